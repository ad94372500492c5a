"""Reading the files users hand to xlp (TSV, JSON lines, JSON objects, TOML): UTF-8 text, or a one-line error naming
the file and line.

Every JSON and TOML file xlp reads (--config and recipes, manifests, meta.json, model.json, results.json, predictions,
HF config.json, ...) goes through `json_value` / `json_object` / `json_lines` / `toml_file`: bounded parsers. A value
nested deeper than MAX_DEPTH, or an integer of more than MAX_INT_DIGITS digits, is a one-line BadInput naming the
file (not a RecursionError, nor Python's int-str-limit ValueError, nor a number no field allows anyway).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from xlp_cli.core.errors import BadInput

MAX_DEPTH = 64          # arrays/objects/tables inside each other: xlp's own files use a handful
MAX_INT_DIGITS = 20     # |n| < 10^20: every count, step, seed and size fits (int64 is 19 digits)


class _TooLarge(ValueError):
    """An integer past MAX_INT_DIGITS (raised from inside the JSON parser)."""


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("+-").replace("_", ""))
    if digits > MAX_INT_DIGITS:
        raise _TooLarge(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def check_bounds(value: Any, path: str | Path, position: int | None = None) -> Any:
    """`value` (parsed JSON or TOML) nested at most MAX_DEPTH deep, its integers at most MAX_INT_DIGITS digits long;
    else a one-line BadInput. Iterative: a value of any depth is walked without recursion."""
    todo: list[tuple[Any, int]] = [(value, 0)]
    limit = 10 ** MAX_INT_DIGITS
    while todo:
        v, depth = todo.pop()
        if isinstance(v, (dict, list)):
            if depth >= MAX_DEPTH:
                raise BadInput(f"nested deeper than {MAX_DEPTH} levels", path=path, position=position)
            todo.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
        elif isinstance(v, int) and not isinstance(v, bool) and not -limit < v < limit:
            raise BadInput(f"an integer of over {MAX_INT_DIGITS} digits", path=path, position=position)
    return value


def json_value(text: str, path: str | Path, position: int | None = None) -> Any:
    """The JSON value of `text` (read from `path`, at line `position` of a JSON-lines file), bounded (`check_bounds`);
    anything else is a one-line BadInput naming the file."""
    import json

    try:
        value = json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as e:
        where = position if position is not None else e.lineno
        raise BadInput(f"corrupt {Path(path).name} ({e.msg} at column {e.colno})", path=path, position=where) from None
    except _TooLarge as e:
        raise BadInput(str(e), path=path, position=position) from None
    except RecursionError:
        raise BadInput(f"nested deeper than {MAX_DEPTH} levels", path=path, position=position) from None
    except ValueError as e:  # (Python's int-str limit, or a number json cannot make)
        raise BadInput(f"corrupt {Path(path).name} ({str(e).split(':')[0]})", path=path, position=position) from None
    return check_bounds(value, path, position)


def read_text(path: str | Path) -> str:
    """The UTF-8 text of a file xlp reads whole (a JSON or TOML file); else a one-line BadInput."""
    path = Path(path)
    try:
        return path.read_bytes().decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise BadInput(f"not UTF-8 text (invalid byte at offset {e.start})", path=path) from None
    except IsADirectoryError:
        raise BadInput("a folder, not a file", path=path) from None
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror or e}", path=path) from None


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


def json_file(path: str | Path) -> Any:
    """The JSON value of a file (bounded: `json_value`); anything else is a one-line BadInput."""
    return json_value(read_text(path), path)


def json_object(path: str | Path) -> dict:
    """A JSON file holding one object (config.json, vocab.json, ...); anything else is a one-line BadInput."""
    path = Path(path)
    value = json_file(path)
    if not isinstance(value, dict):
        raise BadInput(f"corrupt {path.name} (not a JSON object)", path=path)
    return value


def json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) of each non-blank line of a JSON-lines file (predictions, metrics), bounded."""
    for n, line in text_lines(path):
        if line.strip():
            yield n, json_value(line, path, n)


def toml_file(path: str | Path) -> dict[str, Any]:
    """A TOML file (--config, a recipe), bounded like JSON (`check_bounds`); else a one-line BadInput."""
    import tomllib

    path = Path(path)
    text = read_text(path)
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"invalid TOML ({e})", path=path) from None
    except RecursionError:
        raise BadInput(f"nested deeper than {MAX_DEPTH} levels", path=path) from None
    except ValueError as e:  # Python's int-str limit: an integer of over 4300 digits
        what = "an integer of over 4300 digits" if "integer string conversion" in str(e) else str(e).split(":")[0]
        raise BadInput(f"invalid TOML ({what}; at most {MAX_INT_DIGITS} digits)", path=path) from None
    return check_bounds(value, path)
