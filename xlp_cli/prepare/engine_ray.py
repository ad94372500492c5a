"""The Ray engine of `xlp prepare` (`--engine ray [--ray-address ADDRESS]`): the splits as Ray tasks.

- Each unfinished split is one task, `prepare_split`: it reads the split (input paths must be readable at
  the same path on every node: a shared filesystem, or the same copy on each), processes its chunks (a
  worker process keeps its text tools from task to task) and returns the chunk tables through Ray's object
  store. The driver (the process that runs `xlp prepare`) writes them as chunk files, atomically, and
  finalizes them in stream order, exactly as the local engine does: so the shards and the manifest are the
  same, `--out` only needs to be on the driver's disk, and a task that dies leaves no file behind.
- At most 2 x (the cluster's CPUs) tasks are in flight; the driver takes their results in split order.
- A task whose worker process dies is retried by Ray (up to `MAX_RETRIES` times); after that the run fails
  with one line (exit 1) and a rerun resumes from the finished splits, as after a kill.
- De-duplication is hash-partitioned: P actors (`HashSet64` each; P = the number of nodes, at least 2,
  spread over the nodes) hold the 64-bit content hashes h with h % P == p. The driver sends each batch's
  hashes to their partitions and gets back which are new. A partition gets its hashes in stream order
  (calls from one caller run in order) and equal hashes always meet in the same partition, so "the first
  occurrence wins" decides exactly as one set would, while no process holds more than its 1/P share
  (8 bytes per distinct record).
"""

from __future__ import annotations

import collections
import contextlib
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from xlp_cli.core import ray_cluster
from xlp_cli.prepare import process
from xlp_cli.prepare.dedup import HashSet64
from xlp_cli.prepare.engine_local import Job, Result
from xlp_cli.prepare.records import SourceOptions
from xlp_cli.prepare.splits import run_split
from xlp_cli.prepare.workdir import chunk_path

MAX_RETRIES = 2


def prepare_split(job: Job, opts: SourceOptions, on_error: str, size: int, init_args: tuple) -> list[tuple]:
    """The Ray task: read and process one split; [(chunk index, metadata, table or None)]."""
    process.ensure_worker(*init_args)
    out: list[tuple] = []
    _, split, start_chunk, start = job
    run_split(split, opts, on_error, size, start_chunk, start, lambda k, meta, table: out.append((k, meta, table)))
    return out


class PartitionedHashSet:
    """`HashSet64.add_batch` over P Ray actors, each holding the hashes h with h % P == p."""

    def __init__(self, ray: Any, partitions: int):
        self.ray = ray
        actor = ray.remote(num_cpus=0)(HashSet64).options(scheduling_strategy="SPREAD")
        self.actors = [actor.remote() for _ in range(partitions)]

    def add_batch(self, hashes: np.ndarray) -> np.ndarray:
        hashes = np.asarray(hashes, dtype=np.uint64)
        part = hashes % np.uint64(len(self.actors))
        where = [part == p for p in range(len(self.actors))]
        try:
            masks = self.ray.get([a.add_batch.remote(hashes[w]) for a, w in zip(self.actors, where)])
        except self.ray.exceptions.RayError as e:  # a partition's process died: its hashes are gone
            raise ray_cluster.failure(self.ray, e, "xlp prepare") from None
        new = np.zeros(len(hashes), dtype=bool)
        for w, mask in zip(where, masks):
            new[w] = mask
        return new

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)


class RayEngine:
    def __init__(self, work: Path, opts: SourceOptions, on_error: str, chunk_size: int, init_args: tuple,
                 address: str = ""):
        self.work, self.opts, self.on_error, self.size, self.init_args = work, opts, on_error, chunk_size, init_args
        self.address = address
        self.stack = contextlib.ExitStack()
        self.ray: Any = None
        self.inflight: collections.deque = collections.deque()
        self.hashes: PartitionedHashSet | None = None

    def start(self, jobs: list[Job], langs: list[str]) -> None:
        self.ray = self.stack.enter_context(ray_cluster.session(self.address))
        self.task = self.ray.remote(max_retries=MAX_RETRIES)(prepare_split)
        self.args = [self.ray.put(x) for x in (self.opts, self.on_error, self.size, self.init_args)]

    def hash_set(self) -> PartitionedHashSet:
        nodes = sum(1 for n in self.ray.nodes() if n.get("Alive"))
        self.hashes = PartitionedHashSet(self.ray, max(2, nodes))
        return self.hashes

    def results(self, jobs: list[Job]) -> Iterator[Result]:
        ray = self.ray
        todo = iter(jobs)

        def submit() -> None:
            job = next(todo, None)
            if job is not None:
                self.inflight.append((job, self.task.remote(job, *self.args)))

        for _ in range(2 * ray_cluster.cluster_cpus(ray)):
            submit()
        while self.inflight:
            (s, *_), ref = self.inflight[0]
            try:
                chunks = ray.get(ref)
            except ray.exceptions.RayError as e:
                raise ray_cluster.failure(ray, e, "xlp prepare") from None
            self.inflight.popleft()
            submit()
            for k, meta, table in chunks:
                if table is not None:
                    process.write_chunk(chunk_path(self.work, s, k), table)
                yield s, k, meta

    def close(self, abort: bool = False) -> None:
        """Cancel the tasks in flight (forcibly: their worker processes end), drop the partitions, leave
        or shut down the cluster."""
        if self.ray is not None and self.ray.is_initialized():
            for _, ref in self.inflight:
                self.ray.cancel(ref, force=True)
            if self.hashes is not None:
                self.hashes.close()
        self.inflight.clear()
        self.stack.close()
