"""The partitioned finalizer on Ray (`--engine ray`): the driver plans and routes references, the cluster works.

- Hash partitions: P actors (`DedupActor`, a partitions.DedupPartition each; P = half the cluster's CPUs, at
  least 2, spread over the nodes). Each split's reader task (engine_ray.prepare_split) returns, besides its
  chunks' metadata, one keys table per partition; when a split is done the driver hands partition p the
  reference of its table (never the rows). Calls from the driver to an actor run in the order they were made,
  and the splits are routed in stream order, so each partition sees its rows in stream order (it checks).
  The chunks a rerun keeps are keyed by a task that reads their files (`split_keys_task`).
- Each call gives back the duplicates' positions (an object the driver never fetches); the counts per
  (split, chunk, group) stay in the partition until the driver fetches them at the end, one table per
  partition (`totals`). The driver plans the caps and the shards from them (shard_plan.py), and starts one
  task per shard (`write_shard_task`, shard_writer.py) with the references of the duplicates of the splits
  its chunks come from. The task reads the chunk files and writes the shard itself, atomically.
- So `--out` must be on a filesystem every node sees (the readers write the chunk files there too). A task
  whose worker dies is retried by Ray (MAX_RETRIES); the temporary file of a shard it was writing is removed
  before the manifest is written. A dead partition actor stops the run with one line; a rerun resumes (the
  finished chunks and shards are kept, the partitions are rebuilt from the chunk files).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from xlp_cli.core import ray_cluster
from xlp_cli.core.errors import WorkFailed
from xlp_cli.prepare import partitions, shard_writer
from xlp_cli.prepare.finalize import Rules
from xlp_cli.prepare.shard_plan import ShardSpec, plan
from xlp_cli.prepare.workdir import chunk_path

MAX_RETRIES = 2


class DedupActor(partitions.DedupPartition):
    """A hash partition as a Ray actor (its processes are titled `ray::DedupActor`)."""


def split_keys_task(work: str, s: int, ks: list[int], parts: int, rules: Rules) -> tuple:
    """The keys of the kept chunk files `ks` of split s, one table per partition."""
    return tuple(partitions.split_keys([(k, chunk_path(Path(work), s, k)) for k in ks], parts, rules))


def write_shard_task(out: str, work: str, spec: ShardSpec, rules: Rules, dup_refs: dict[int, list]) -> dict:
    """One shard, written by a Ray task; `dup_refs`: per split its chunks come from, the partitions' duplicates."""
    import ray

    index = {s: partitions.dup_index(ray.get(refs)) for s, refs in dup_refs.items()}
    empty = np.zeros(0, dtype=np.int64)
    return shard_writer.write_shard(Path(out), Path(work), spec, rules,
                                    lambda s, k: index.get(s, {}).get(k, empty))


class RayFinalizer:
    def __init__(self, ray: Any, out: Path, work: Path, rules: Rules):
        self.ray, self.out, self.work, self.rules = ray, out, work, rules
        self.parts = max(2, ray_cluster.cluster_cpus(ray) // 2)
        actor = ray.remote(num_cpus=0, max_restarts=0)(DedupActor).options(scheduling_strategy="SPREAD")
        self.actors = [actor.remote(rules.dedup) for _ in range(self.parts)]
        self.keys_task = ray.remote(max_retries=MAX_RETRIES)(split_keys_task).options(num_returns=self.parts)
        self.write_task = ray.remote(max_retries=MAX_RETRIES)(write_shard_task)
        self.new: dict[int, tuple[int, list]] = {}  # split -> (its first chunk read in this run, keys refs)
        self.seen: dict[int, list[int]] = {}  # split -> its chunks given, in order
        self.sent = 0  # parts of the stream given to every partition
        self.dups: dict[int, list] = {}  # split -> the partitions' duplicates refs (never fetched here)
        self.writing: list = []

    def new_keys(self, s: int, first_chunk: int, refs: list) -> None:
        """The keys of split s's chunks from `first_chunk` on, made by its reader task."""
        self.new[s] = (first_chunk, list(refs))

    def add_chunk(self, s: int, k: int, table: pa.Table | None, path: Path) -> None:
        self.seen.setdefault(s, []).append(k)

    def split_done(self, s: int) -> None:
        """Route split s's keys to the partitions, in stream order: the kept chunks' (keyed by a task), then
        those of this run's reader task."""
        first, refs = self.new.pop(s, (None, None))
        kept = [k for k in self.seen.pop(s, []) if first is None or k < first]
        routed = []
        if kept:
            routed.append(self.keys_task.remote(str(self.work), s, kept, self.parts, self.rules))
        if refs is not None:
            routed.append(refs)
        for keys in routed:
            self.dups.setdefault(s, []).extend(a.add.remote(self.sent, s, ref) for a, ref in zip(self.actors, keys))
            self.sent += 1

    def _get(self, refs: Any) -> Any:
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayError as e:
            raise ray_cluster.failure(self.ray, e, "xlp prepare") from None

    def close(self) -> tuple[dict, dict, dict]:
        totals = self._get([a.totals.remote() for a in self.actors])  # (one table of counts per partition)
        if any(calls != self.sent for calls, _, _ in totals):  # (a part that failed: its error is in its ref)
            self._get([ref for refs in self.dups.values() for ref in refs])
            raise WorkFailed("a dedup partition of xlp prepare missed a part of the input; rerun the same command "
                             "to resume")
        table = pa.concat_tables([counts for _, counts, _ in totals])
        found = plan(table, sum(n for _, _, n in totals), self.rules, self._resolve)
        self.writing = [self.write_task.remote(str(self.out), str(self.work), spec, self.rules,
                                               {s: self.dups[s] for s in {seg.s for seg in spec.segments}})
                        for spec in found.shards]
        shards: dict[str, dict] = {}
        for entry in self._get(self.writing):
            shards.update(entry)
        self.writing = []
        _sweep(self.out, found.shards)
        return found.counts, dict(sorted(shards.items())), dict(found.dropped)

    def _resolve(self, s: int, k: int, group: str, rooms: Any) -> Any:
        index = partitions.dup_index(self._get(self.dups.get(s, [])))
        empty = np.zeros(0, dtype=np.int64)
        return shard_writer.resolve(self.work, lambda s_, k_: index.get(k_, empty), self.rules, s, k, group, rooms)

    def abort(self) -> None:
        for ref in self.writing:
            self.ray.cancel(ref, force=True)
        self.writing = []
        for a in self.actors:
            self.ray.kill(a)
        self.actors = []


def _sweep(out: Path, shards: list[ShardSpec]) -> None:
    """The temporary files of shard writes whose task died (and was retried): nothing half-written stays."""
    for folder in {(out / spec.rel).parent for spec in shards}:
        for tmp in folder.glob(".part-*.tmp"):
            tmp.unlink(missing_ok=True)
