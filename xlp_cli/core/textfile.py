"""Reading the files users hand to xlp (TSV, JSON lines, JSON objects): UTF-8 text, or a one-line error naming the line."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from xlp_cli.core.errors import BadInput


def text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, line without its line break) of a UTF-8 text file; anything else is a one-line BadInput."""
    path = Path(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror or e}", path=path) from None
    with f:
        for n, raw in enumerate(f, 1):
            if b"\x00" in raw:
                raise BadInput("NUL byte: a binary file, not UTF-8 text", path=path, position=n)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise BadInput(f"not UTF-8 text (invalid byte at {e.start} of the line): a binary file?",
                               path=path, position=n) from None
            line = line.rstrip("\r\n")
            yield n, line.removeprefix("\ufeff") if n == 1 else line


def json_object(path: str | Path) -> dict:
    """A JSON file holding one object (config.json, vocab.json, ...); anything else is a one-line BadInput."""
    import json

    path = Path(path)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"corrupt {path.name} ({e})", path=path) from None
    if not isinstance(value, dict):
        raise BadInput(f"corrupt {path.name} (not a JSON object)", path=path)
    return value
