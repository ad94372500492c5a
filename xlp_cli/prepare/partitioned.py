"""The partitioned finalizer of the local engine (`--engine local --workers N`, N > 1): N hash partitions
de-duplicate in threads of their own while the chunks arrive, then N threads write the shards.

- `add_chunk` (the main thread, in stream order) cuts a chunk's keys (partitions.chunk_keys: hash, split
  class, group; the chunk's table when held in memory, else its file's three columns) by partition and hands
  each part to its partition's own thread (one thread per partition: its parts run in stream order).
- `close`: the partitions' counts are summed and planned (shard_plan.py; the driver's only pass, over counts),
  then the shards are written by N threads (shard_writer.py), each reading its chunk files back. The shards
  are the bytes the sequential Finalizer writes (tested against it), whatever N.
engine_ray.py runs the same steps as Ray tasks and actors.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from xlp_cli.artifacts.shards import read_table
from xlp_cli.prepare import partitions, shard_writer
from xlp_cli.prepare.finalize import Rules
from xlp_cli.prepare.shard_plan import Plan, plan


def plan_from(totals: list[tuple[int, pa.Table, int]], dups_by_split: dict[int, list[np.ndarray]], rules: Rules,
              work: Path) -> tuple[Plan, Any]:
    """The plan from the partitions' totals and duplicates {split: [arrays]}, and the dups lookup
    (split, chunk) -> rows."""
    index = {s: partitions.dup_index(d) for s, d in dups_by_split.items()}
    empty = np.zeros(0, dtype=np.int64)

    def dups(s: int, k: int) -> np.ndarray:
        return index.get(s, {}).get(k, empty)

    table = pa.concat_tables([counts for _, counts, _ in totals])
    found = plan(table, sum(n for _, _, n in totals), rules,
                 lambda s, k, group, rooms: shard_writer.resolve(work, dups, rules, s, k, group, rooms))
    return found, dups


class PartitionedFinalizer:
    def __init__(self, out: Path, work: Path, rules: Rules, workers: int):
        self.out, self.work, self.rules, self.workers = out, work, rules, workers
        self.parts = [partitions.DedupPartition(rules.dedup) for _ in range(workers)]
        self.queues = [ThreadPoolExecutor(1, thread_name_prefix="xlp-dedup") for _ in range(workers)]
        self.sent = [0] * workers
        self.results: list[tuple[int, Future]] = []
        self.writers: ThreadPoolExecutor | None = None

    def add_chunk(self, s: int, k: int, table: pa.Table | None, path: Path) -> None:
        if table is None:
            table = read_table(path, columns=partitions.KEY_COLUMNS)
        for p, keys in enumerate(partitions.chunk_keys(table, k, len(self.parts), self.rules)):
            self.results.append((s, self.queues[p].submit(self.parts[p].add, self.sent[p], s, keys)))
            self.sent[p] += 1

    def split_done(self, s: int) -> None:
        """(The chunks went to their partitions as they came.)"""

    def close(self) -> tuple[dict, dict, dict]:
        dups_by_split: dict[int, list[np.ndarray]] = {}
        for s, fut in self.results:
            dups_by_split.setdefault(s, []).append(fut.result())
        for q in self.queues:
            q.shutdown()
        found, dups = plan_from([part.totals() for part in self.parts], dups_by_split, self.rules, self.work)
        self.writers = ThreadPoolExecutor(self.workers, thread_name_prefix="xlp-shards")
        written = [self.writers.submit(shard_writer.write_shard, self.out, self.work, spec, self.rules, dups)
                   for spec in found.shards]
        shards: dict[str, dict] = {}
        for fut in written:
            shards.update(fut.result())
        self.writers.shutdown()
        return found.counts, dict(sorted(shards.items())), dict(found.dropped)

    def abort(self) -> None:
        for pool in [*self.queues, self.writers]:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
