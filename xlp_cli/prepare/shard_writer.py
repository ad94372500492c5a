"""Finalizing in parallel, step 3: one final shard written from its plan (a local worker thread or a Ray task).

A ShardSpec (shard_plan.py) names the chunk segments of one shard of one (split, group). For each chunk the
writer reads the chunk file, marks the duplicates the hash partitions found (partitions.py), and runs THE rule
of every finalizer (`finalize.assign`) for the group with the rooms at the chunk's start: so it makes the very
decisions of the sequential Finalizer, and takes the segment's rows of its split. Rows go to a GroupWriter
(shards.py) whose index is the shard's: the same row groups, metadata and bytes as the sequential writer,
written to a temporary file and renamed when complete. A shard already on disk (an interrupted run of the same
config) is checked (its row count) and kept without reading any chunk.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli.artifacts.arrow_numpy import equals, take_rows, to_numpy
from xlp_cli.artifacts.shards import read_table, shard_entry
from xlp_cli.core.errors import WorkFailed
from xlp_cli.prepare.finalize import Rooms, Rules, assign, select_columns, split_values
from xlp_cli.prepare.shard_plan import ShardSpec
from xlp_cli.prepare.shards import GroupWriter
from xlp_cli.prepare.workdir import chunk_path

Dups = Callable[[int, int], np.ndarray]  # (split, chunk) -> the rows of the chunk that are duplicates


def chunk_take(table: pa.Table, dup_rows: np.ndarray, group: str, rules: Rules,
               rooms: Rooms) -> tuple[dict[str, np.ndarray], Counter]:
    """The rows of the chunk `table` kept in each split for `group` ({split: rows}), and the drops."""
    keep = equals(table.column("group"), group)
    if rules.dedup and len(dup_rows):
        keep[dup_rows] = False
    idx = np.flatnonzero(keep)
    return assign(idx, split_values(to_numpy(table.column("u")))[idx], rules, rooms)


def resolve(work: Path, dups: Dups, rules: Rules, s: int, k: int, group: str,
            rooms: Rooms) -> tuple[dict[str, int], Counter]:
    """shard_plan.Resolve: what chunk (s, k) gives each split of `group` (read from its file)."""
    table = read_table(chunk_path(work, s, k), columns=["group", "u"])
    take, dropped = chunk_take(table, dups(s, k), group, rules, rooms)
    return {split: len(rows) for split, rows in take.items()}, dropped


def write_shard(out: Path, work: Path, spec: ShardSpec, rules: Rules, dups: Dups) -> dict[str, dict]:
    """Write the shard `spec` (or keep it when complete on disk); -> {relative path: shard entry}."""
    path = out / spec.rel
    if path.is_file():
        found = pq.ParquetFile(path).metadata.num_rows
        if found != spec.rows:
            raise WorkFailed(f"an existing shard holds {found} rows where this run makes {spec.rows}; "
                             "rerun with --force to rebuild the folder", path=path)
        return {spec.rel: shard_entry(path, spec.rows)}
    writer: GroupWriter | None = None
    try:
        for seg in spec.segments:
            table = read_table(chunk_path(work, seg.s, seg.k))
            take, _ = chunk_take(table, dups(seg.s, seg.k), spec.group, rules, seg.rooms)
            rows = take[spec.split][seg.lo:seg.hi]
            if len(rows) != seg.hi - seg.lo:
                raise WorkFailed(f"chunk {seg.s}/{seg.k} does not hold the rows its counts promised; "
                                 "rerun with --force", path=chunk_path(work, seg.s, seg.k))
            pair = table.column("kind")[int(rows[0])].as_py() == "p"
            if writer is None:
                writer = GroupWriter(out, spec.split, spec.group, pair, rules.shard_size)
                writer.index = spec.index
            writer.add_table(select_columns(take_rows(table, rows), pair))
        assert writer is not None
        writer.close()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return writer.done
