"""Shared test helpers: where the real corpora are, and a CLI runner over the real `xlp` app."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xlp_cli.artifacts.files import data_dir

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

    from xlp_cli.cli.app import app

    runner = CliRunner()
    return runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)


@pytest.fixture
def cli():
    return run_cli


def write_commonvoice(shared: Path, tmp: Path, counts: tuple[tuple[str, int], ...]) -> list[Path]:
    """The first n Common Voice sentences of each (lang, n), written as tmp/cv.<lang>.txt (skips without them)."""
    import gzip

    paths = []
    for lang, n in counts:
        src = sorted((shared / "commonvoice_sentences").glob(f"{lang}.*.txt.gz"))
        if not src:
            pytest.skip(f"Common Voice {lang} sentences not found under {shared / 'commonvoice_sentences'}")
        with gzip.open(src[0], "rt", encoding="utf-8") as f:
            lines = [next(f) for _ in range(n)]
        p = tmp / f"cv.{lang}.txt"
        p.write_text("".join(lines), encoding="utf-8")
        paths.append(p)
    return paths
