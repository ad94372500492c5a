"""The two kinds of failure every stage reports, and how they map to exit codes.

Stages raise these; the command line (`cli/commands.py`) turns them into one line on stderr and an exit code:
2 for bad input or usage (the user can fix it), 1 for a failure of the work itself, 130 for Ctrl-C (INTERRUPTED).
This module imports nothing at load time: the console script (`cli/entry.py`) reads INTERRUPTED from it before
anything else is loaded.
"""

from __future__ import annotations

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
