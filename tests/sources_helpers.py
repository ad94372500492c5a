"""Helpers for the source reader tests: run a reader, collect what it yields and reports."""

from __future__ import annotations

from pathlib import Path

from xlp_cli.prepare.records import ErrorPolicy, Mono, Pair, SourceOptions
from xlp_cli.prepare.sources import SOURCES

SRC_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sources"


def read_all(source: str, inputs, langs=(), mode: str = "raise", **opts):
    """(records, ErrorPolicy) of reading `inputs` with `source`."""
    errors = ErrorPolicy(mode)
    recs = list(SOURCES[source]([Path(p) for p in inputs], SourceOptions(langs=list(langs), **opts), errors))
    return recs, errors


def monos(recs):
    return [r for r in recs if isinstance(r, Mono)]


def pairs(recs):
    return [r for r in recs if isinstance(r, Pair)]
