"""The Ray engine of `xlp prepare` (`--engine ray [--ray-address ADDRESS]`): the splits as Ray tasks.

- Each unfinished split is one task, `prepare_split`: it reads the split (input paths must be readable at
  the same path on every node: a shared filesystem, or the same copy on each), processes its chunks (a
  worker process keeps its text tools from task to task), writes them as chunk files into `OUT/.work`
  itself (atomically: `--out` must be on a filesystem every node sees), and returns only the chunks'
  metadata and, per hash partition, the keys of its rows (partitions.py) as objects of their own.
- At most 2 x (the cluster's CPUs) tasks are in flight; the driver takes their metadata in split order,
  reports their problems (ledger.py) and hands the references of the keys to the partitions
  (finalize_ray.py), which finalizes in parallel: the driver plans from counts, tasks write the shards.
- A task whose worker process dies is retried by Ray (up to `MAX_RETRIES` times); after that the run fails
  with one line (exit 1) and a rerun resumes from the finished splits, as after a kill.
"""

from __future__ import annotations

import collections
import contextlib
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

from xlp_cli.core import ray_cluster
from xlp_cli.prepare import partitions, process
from xlp_cli.prepare.engine_local import Job, Result
from xlp_cli.prepare.finalize import Rules
from xlp_cli.prepare.finalize_ray import RayFinalizer
from xlp_cli.prepare.records import SourceOptions
from xlp_cli.prepare.splits import run_split
from xlp_cli.prepare.workdir import chunk_path

MAX_RETRIES = 2


def prepare_split(job: Job, opts: SourceOptions, on_error: str, size: int, init_args: tuple, work: str,
                  parts: int, rules: Rules) -> tuple:
    """The Ray task: read and process one split, write its chunk files (atomically) into `work`; returns
    ([(chunk index, metadata)], then one keys table per hash partition) as parts + 1 objects."""
    process.ensure_worker(*init_args)
    metas: list[tuple] = []
    keys: list[list[pa.Table]] = [[] for _ in range(parts)]
    s, split, start_chunk, start = job

    def emit(k: int, meta: dict, table: pa.Table | None) -> None:
        if table is not None:
            process.write_chunk(chunk_path(Path(work), s, k), table)
            for p, part in enumerate(partitions.chunk_keys(table, k, parts, rules)):
                keys[p].append(part)
        metas.append((k, meta))

    run_split(split, opts, on_error, size, start_chunk, start, emit)
    return (metas, *(partitions.concat(tables) for tables in keys))


class RayEngine:
    def __init__(self, work: Path, opts: SourceOptions, on_error: str, chunk_size: int, init_args: tuple,
                 address: str = ""):
        self.work, self.opts, self.on_error, self.size, self.init_args = work, opts, on_error, chunk_size, init_args
        self.address = address
        self.stack = contextlib.ExitStack()
        self.ray: Any = None
        self.inflight: collections.deque = collections.deque()
        self.fin: RayFinalizer | None = None

    def start(self, jobs: list[Job], langs: list[str]) -> None:
        self.ray = self.stack.enter_context(ray_cluster.session(self.address))

    def finalizer(self, out: Path, rules: Rules, sink: Any = None) -> RayFinalizer:
        """The hash partitions (actors) and the shard-writing tasks (finalize_ray.py); `sink` is not used (the id
        shards are made by `xlp bpe apply` as Ray tasks)."""
        self.work = self.work.resolve()  # (tasks on other nodes, or started elsewhere, get absolute paths)
        self.fin = RayFinalizer(self.ray, out.resolve(), self.work, rules)
        self.task = self.ray.remote(max_retries=MAX_RETRIES)(prepare_split).options(num_returns=self.fin.parts + 1)
        self.args = [self.ray.put(x) for x in (self.opts, self.on_error, self.size, self.init_args, str(self.work),
                                              self.fin.parts, rules)]
        return self.fin

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
            (s, _, k0, _), refs = self.inflight[0]
            try:
                chunks = ray.get(refs[0])
            except ray.exceptions.RayError as e:
                raise ray_cluster.failure(ray, e, "xlp prepare") from None
            self.inflight.popleft()
            submit()
            assert self.fin is not None
            self.fin.new_keys(s, k0, refs[1:])  # routed to the partitions when the split is done
            for k, meta in chunks:
                yield s, k, meta

    def close(self, abort: bool = False) -> None:
        """Cancel the tasks in flight (forcibly: their worker processes end), drop the partitions, leave
        or shut down the cluster."""
        if self.ray is not None and self.ray.is_initialized():
            for _, refs in self.inflight:
                self.ray.cancel(refs[0], force=True)
            if self.fin is not None:
                self.fin.abort()
        self.inflight.clear()
        self.stack.close()
