"""The source readers of `xlp prepare`, one module per format, and input expansion.

`SOURCES[name](inputs, opts, errors)` streams `Mono`/`Pair` records (see `records.py`). Modules are
imported on first use, so `xlp --help` does not pay for mwparserfromhell, warcio or py3langid.
"""

from __future__ import annotations

import glob
import importlib
from pathlib import Path
from typing import Iterator

from xlp_cli.errors import BadInput
from xlp_cli.prepare.records import ErrorPolicy, Record, Source, SourceOptions

# The one table of sources: each name is `--source NAME` and the module `xlp_cli.prepare.sources.NAME`.
NAMES = ("wikipedia", "commoncrawl", "opus", "text", "gettext")


def _lazy(module: str) -> Source:
    def read(inputs: list[Path], opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Record]:
        mod = importlib.import_module(f"{__name__}.{module}")
        return mod.read(inputs, opts, errors)

    read.__name__ = f"read_{module}"
    read.__doc__ = f"Read records with xlp_cli.prepare.sources.{module}.read."
    return read


SOURCES: dict[str, Source] = {name: _lazy(name) for name in NAMES}


def expand_inputs(patterns: list[str | Path]) -> list[Path]:
    """Files named by paths, folders (all files below, sorted, hidden ones skipped) and globs, in order, once each.

    A path that does not exist, or a glob that matches nothing, is bad input naming it.
    """
    out: list[Path] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            out.append(p)

    for pattern in patterns:
        s = str(pattern)
        if glob.has_magic(s) and not Path(s).exists():
            matches = sorted(glob.glob(s, recursive=True))
            if not matches:
                raise BadInput("no file matches this pattern", path=s)
            for m in matches:
                p = Path(m)
                if p.is_dir():
                    for f in _files_below(p):
                        add(f)
                else:
                    add(p)
            continue
        p = Path(s).expanduser()
        if p.is_dir():
            files = _files_below(p)
            if not files:
                raise BadInput("folder holds no files", path=p)
            for f in files:
                add(f)
        elif p.is_file():
            add(p)
        elif p.exists():
            raise BadInput("not a regular file or folder", path=p)
        else:
            raise BadInput("no such file or folder", path=p)
    return out


def _files_below(folder: Path) -> list[Path]:
    return sorted(
        f for f in folder.rglob("*")
        if f.is_file() and not any(part.startswith(".") for part in f.relative_to(folder).parts)
    )


__all__ = ["NAMES", "SOURCES", "expand_inputs"]
