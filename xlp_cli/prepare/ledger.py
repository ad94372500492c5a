"""The main process's account of finished chunks, taken in stream order (split by split, chunk by chunk).

Readers run anywhere (splits.py); what they reported travels in the chunks' metadata and is reported here,
in the order of the input, through the run's `ErrorPolicy` (which raises, or counts a skip): so the
messages, the counts and the manifest do not depend on which reader finished first, nor on the engine.
Two things need the splits before: the line numbers of a text file cut into byte ranges (a range counts
its lines from its own start; the ledger adds the lines of the ranges before it), and the "empty file"
check of such a file (no range alone can tell).
"""

from __future__ import annotations

import collections
from typing import Any

from xlp_cli.core.errors import BadInput, WorkFailed
from xlp_cli.prepare.records import ErrorPolicy, Split


class Ledger:
    def __init__(self, errors: ErrorPolicy):
        self.errors = errors
        self.records = 0
        self.bytes = 0
        self.dropped: collections.Counter[str] = collections.Counter()
        self._lines: collections.Counter[str] = collections.Counter()  # lines of the ranges read, per file
        self._got: collections.Counter[str] = collections.Counter()

    def _where(self, split: Split, path: str | None, position: Any) -> Any:
        if split.kind == "range" and not split.first and path == split.path and isinstance(position, int):
            return position + self._lines[split.path]
        return position

    def account(self, split: Split, meta: dict[str, Any]) -> None:
        """Count a finished chunk of `split` and report what its reader and worker found (may raise)."""
        for message, path, position in meta.get("problems") or ():
            self.errors.bad(message, path=path, position=self._where(split, path, position))
        for warning in meta.get("warnings") or ():
            self.errors.warn(warning)
        if meta.get("fatal"):
            kind, message, path, position = meta["fatal"]
            cls = WorkFailed if kind == "WorkFailed" else BadInput
            raise cls(message, path=path, position=self._where(split, path, position))
        self.records += meta["records"]
        self.bytes += meta["bytes"]
        self.dropped.update(meta["dropped"])
        if meta.get("tail") and split.kind == "range":
            self._end_of_range(split, meta.get("facts") or {})

    def _end_of_range(self, split: Split, facts: dict[str, Any]) -> None:
        if split.first:
            self._lines[split.path] = self._got[split.path] = 0
        self._lines[split.path] += facts.get("lines", 0)
        self._got[split.path] += facts.get("got", 0)
        if "got" in facts and split.last and not split.first and self._got[split.path] == 0:
            self.errors.bad("empty file: no text lines", path=split.path)
