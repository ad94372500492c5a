"""The two kinds of failure every stage reports, and how they map to exit codes.

Stages raise these; the command line (`cli/commands.py`) turns them into one line on stderr and an exit code:
2 for bad input or usage (the user can fix it), 1 for a failure of the work itself, 130 for Ctrl-C (INTERRUPTED).
`write_failed` names the error of a failed write when the disk or the folder is to blame. This module imports
nothing beyond what Python itself loads at start-up: the console script (`cli/entry.py`) reads INTERRUPTED from it
before anything else is loaded.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

INTERRUPTED = "xlp: interrupted; rerun the same command to resume\n"


class XlpError(Exception):
    """Base class. `str(err)` is the one-line message shown to the user."""

    exit_code = 1

    def __init__(self, message: str, *, path: str | Path | None = None, position: str | int | None = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.position = position
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.position is not None:
                where += f":{self.position}"
            where += ": "
        return (where + self.message).replace("\n", " ")


class BadInput(XlpError):
    """The input (a file, a flag, a config, a recipe) is wrong. Exit code 2."""

    exit_code = 2


class WorkFailed(XlpError):
    """The input was fine but the work could not be done. Exit code 1."""

    exit_code = 1


def did_you_mean(word: str, candidates: "list[str] | set[str] | tuple[str, ...]") -> str:
    """' (did you mean 'x'?)' for the closest candidate to a mistyped key, flag or name; '' when none is close."""
    import difflib

    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def write_failed(e: BaseException, path: str | Path) -> XlpError | None:
    """The one-line error for a failure met writing `path` when the disk or the folder is to blame (disk full: exit
    1; read-only or not permitted: exit 2), else None. Libraries that do not say ENOSPC (torch, safetensors,
    Parquet writers) are caught by looking at the free space of the file system right after the failure."""
    if isinstance(e, XlpError):
        return None
    code = getattr(e, "errno", None) or 0
    if code in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(e) or (not code and _no_space(path)):
        return WorkFailed("disk full (no space left on device) while writing this file; nothing half-written was "
                          "kept: free some space and rerun to resume", path=path)
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        return BadInput(f"cannot write here: {os.strerror(code).lower()}", path=path)
    return None


def _no_space(path: str | Path, below: int = 1 << 20) -> bool:
    p = os.fspath(path)  # (os.path, not pathlib: this module loads nothing Python has not loaded at start-up)
    while not os.path.exists(p) and (os.path.dirname(p) or ".") != p:
        p = os.path.dirname(p) or "."
    try:
        st = os.statvfs(p)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < below
