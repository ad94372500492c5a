"""Lines of a released data file, plain or gzip-compressed (the shared copies of PAWS-X, BUCC and PAN-X are
`.gz`): (line number, line without its break), a binary, non-UTF-8 or cut gzip file a one-line BadInput."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Iterator

from xlp_cli.core import textfile
from xlp_cli.core.errors import BadInput


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    path = Path(path)
    if not path.is_file():
        raise BadInput("no such file", path=path)
    if path.suffix != ".gz":
        yield from textfile.text_lines(path)
        return
    n = 0
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            for n, line in enumerate(f, 1):
                yield n, line.rstrip("\r\n").removeprefix("\ufeff") if n == 1 else line.rstrip("\r\n")
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError, OSError) as e:
        raise BadInput(f"unreadable gzip text ({type(e).__name__}: {e})", path=path, position=n + 1) from None


def find(folder: Path, *names: str) -> Path | None:
    """The first of `names` (or its `.gz`) that exists in `folder`."""
    for name in names:
        for p in (Path(folder) / name, Path(folder) / f"{name}.gz"):
            if p.is_file():
                return p
    return None
