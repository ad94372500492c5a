"""The source readers of `xlp prepare`, one module per format, input expansion and input splits.

`SOURCES[name](inputs, opts, errors)` streams `Mono`/`Pair` records (see `records.py`). Modules are
imported on first use, so `xlp --help` does not pay for warcio or py3langid.

A source module may also cut its input into splits that readers take independently (docs/prepare.md,
"Engines and splits"): `plan(inputs, opts, split_size) -> list[Split]` and `read_split(split, opts, errors)`,
a generator of the split's records that may return a dict of facts about the split (text: `lines`, `got`).
A source without `plan`, and every source with --max-records, is one "stream" split read by `read`.
"""

from __future__ import annotations

import glob
import importlib
from pathlib import Path
from typing import Iterator

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.records import ErrorPolicy, Record, Source, SourceOptions, Split
from xlp_cli.prepare.sources import compressed

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


def plan_splits(source: str, inputs: list[Path], opts: SourceOptions, split_size: int) -> list[Split]:
    """The splits of the input, in order (one "stream" split where the source cannot cut its input)."""
    mod = importlib.import_module(f"{__name__}.{source}")
    _limits(opts)
    if opts.max_records or not hasattr(mod, "plan"):
        return [Split(source, "stream", [str(p) for p in inputs])]
    return mod.plan(inputs, opts, split_size)


def _limits(opts: SourceOptions) -> None:
    """This process's decompression limits from the options (every engine's reader comes through here)."""
    compressed.configure(opts.max_expansion, opts.max_member_bytes)


def read_split(split: Split, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Record]:
    """The records of one split, in order (a generator whose return value is the split's facts, or None)."""
    mod = importlib.import_module(f"{__name__}.{split.source}")
    _limits(opts)
    if split.kind == "stream":
        return (yield from mod.read([Path(p) for p in split.paths], opts, errors))
    return (yield from mod.read_split(split, opts, errors))


def read_tasks(split: Split, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[tuple] | None:
    """A source's fast path for one split: the workers' tasks themselves (what splits.to_task makes of each
    record, a generator returning the split's facts), or None where the source has none (`read_split` then)."""
    if split.kind == "stream":
        return None
    fast = getattr(importlib.import_module(f"{__name__}.{split.source}"), "read_tasks", None)
    return fast(split, opts, errors) if fast is not None else None


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


__all__ = ["NAMES", "SOURCES", "expand_inputs", "plan_splits", "read_split"]
