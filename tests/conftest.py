"""Shared test helpers: where the real corpora are, and a CLI runner over the real `xlp` app."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xlp_cli.artifacts import data_dir

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"

os.environ.setdefault("XLP_QUIET", "1")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real corpora (XLP_DATA_DIR, default ../shared/data). Skips visibly only when the folder is absent."""
    d = data_dir()
    if not d.is_dir():
        pytest.skip(f"shared real corpora not found at {d} (set XLP_DATA_DIR)")
    return d


def run_cli(*args: str, input: str | None = None):
    """Invoke the real `xlp` Typer app in-process; returns click's Result (exit_code, stdout, stderr)."""
    from typer.testing import CliRunner

    from xlp_cli.cli import app

    runner = CliRunner()
    return runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)


@pytest.fixture
def cli():
    return run_cli
