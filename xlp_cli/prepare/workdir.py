"""`OUT/.work`, the unfinished part of an `xlp prepare` run, and what a rerun keeps of it.

- `state.json`: the chunk size and the split plan of the folder's first run; a rerun uses the same ones, so
  its chunks line up with the finished ones (the output depends on neither).
- `chunk-SSSSSS-KKKKKK.parquet`: chunk K of split S, written atomically (processed rows and metadata, see
  process.py and splits.py). A rerun keeps, per split, the chunk files 0..k without a gap; a split whose
  kept chunks end with its tail chunk is finished and is not read again.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path
from typing import Any, Callable

from xlp_cli.artifacts.files import write_json_atomic
from xlp_cli.core import ui
from xlp_cli.prepare import process
from xlp_cli.prepare.records import Split

_CHUNK = re.compile(r"^chunk-(\d{6})-(\d{6})\.parquet$")


def chunk_path(work: Path, s: int, k: int) -> Path:
    return work / f"chunk-{s:06d}-{k:06d}.parquet"


def has_work(work: Path) -> bool:
    """Some chunk file is kept work (the first chunk of a split: later ones after a gap are not)."""
    return any(work.glob("chunk-*-000000.parquet"))


def load_plan(work: Path, chunk_size: int, make_plan: Callable[[], list[Split]]) -> tuple[int, list[Split]]:
    """(chunk size, splits) of this folder: those of its first run, else `chunk_size` and a new plan."""
    path = work / "state.json"
    if path.is_file():
        state = json.loads(path.read_text(encoding="utf-8"))
        if "splits" in state:
            if state["chunk_size"] != chunk_size:
                ui.info(f"resuming with the chunk size of the interrupted run ({state['chunk_size']})")
            return state["chunk_size"], [Split(**s) for s in state["splits"]]
        ui.info(f"{work}: left by an older xlp version; its chunks are not reused")  # finished shards still are
        shutil.rmtree(work)
    splits = make_plan()  # (a bad input file is found here, before anything is written)
    work.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"chunk_size": chunk_size, "splits": [dataclasses.asdict(s) for s in splits]})
    return chunk_size, splits


def finished_chunks(work: Path, n_splits: int) -> list[list[dict[str, Any]]]:
    """Per split, the metadata of its chunk files 0..k-1 present without a gap. Chunk files after a gap (a
    worker may finish a later chunk before the one whose error stopped the run) and temp files are removed."""
    present: dict[int, set[int]] = {}
    for p in work.glob("chunk-*.parquet"):
        m = _CHUNK.match(p.name)
        if m:
            present.setdefault(int(m.group(1)), set()).add(int(m.group(2)))
    out: list[list[dict[str, Any]]] = []
    for s in range(n_splits):
        have = present.get(s, set())
        k = 0
        metas = []
        while k in have:
            metas.append(process.chunk_meta(chunk_path(work, s, k)))
            if metas[-1].get("tail"):
                break
            k += 1
        for stray in have:
            if stray >= len(metas):
                chunk_path(work, s, stray).unlink()
        out.append(metas)
    for tmp in work.glob(".chunk-*.tmp"):
        tmp.unlink()
    return out
