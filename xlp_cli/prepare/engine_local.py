"""The local engine of `xlp prepare` (`--engine local`, the default): this machine's threads or processes.

An engine takes the jobs of a run, (split index, split, first chunk, records to skip) for every split not
finished yet, and yields (split, chunk, metadata) for each chunk it wrote, in job and chunk order, ending
each job with its tail chunk (or a chunk that stops the run). How the local engine spreads the work, with
`--worker-mode processes` (forked worker processes):
- `--workers 1`: the main process reads and processes every split itself;
- `--workers N`, at least 2N splits to do: each worker process reads and processes whole splits (N readers);
  the main process takes each split's chunk files as they appear, in order;
- `--workers N`, fewer splits (a few files or dumps that cannot be cut, where whole splits would leave
  workers idle while the longest one finishes): the main process reads the splits and the workers process
  their chunks (one reader, N processors), with at most 2N chunks in flight.
With `--worker-mode threads` (what `auto` picks when every step is native: no Wikipedia pages, no zh/th
segmenter; PrepareConfig.uses_threads), for any N: the main thread reads the splits and N threads of this process process the chunks (the native
  text core runs without the GIL) and write their chunk files; the main process finalizes each chunk's table
  as it is, without reading its file back. One process: no start-up or imports per worker, no second copy
  of the libraries in memory.
The chunk files are the same in every case (a split is cut into chunks the same way wherever it is read).
The main process takes the chunks in stream order and finalizes them: with `--workers 1` in order, as they
come (finalize.Finalizer); with N > 1 over N hash partitions and N shard-writing threads (partitioned.py), to
the same bytes.
"""

from __future__ import annotations

import collections
import ctypes
import multiprocessing as mp
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Iterator

from xlp_cli.prepare import process
from xlp_cli.prepare.finalize import Finalizer, Rules
from xlp_cli.prepare.partitioned import PartitionedFinalizer
from xlp_cli.prepare.records import SourceOptions, Split
from xlp_cli.prepare.splits import cut, run_split_to_files
from xlp_cli.prepare.workdir import chunk_path

Job = tuple[int, Split, int, int]  # split index, split, first chunk, records of the split to skip
Result = tuple[int, int, dict[str, Any]]  # split index, chunk index, chunk metadata

WORKER_DIED = ("a worker process died (out of memory? killed?); rerun the same command to resume, "
               "perhaps with fewer --workers")


def _table_to_file(chunk: list[tuple], path: str, n_records: int, **more: Any) -> tuple[dict[str, Any], Any]:
    """A worker thread's job: `process.process_to_table`, its chunk file written; -> (metadata, table or None)."""
    meta, table = process.process_to_table(chunk, n_records, **more)
    if table is not None:
        process.write_chunk(path, table)
    return meta, table


def _few_malloc_arenas(workers: int) -> None:
    """glibc gives each thread its own malloc arena, whose freed memory stays in the process: cap them
    (M_ARENA_MAX) so the worker threads share a few. A no-op elsewhere than glibc."""
    try:
        ctypes.CDLL(None).mallopt(-8, max(2, workers))  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass


class LocalEngine:
    def __init__(self, work: Path, opts: SourceOptions, on_error: str, chunk_size: int, workers: int,
                 init_args: tuple, threads: bool = False):
        self.work, self.opts, self.on_error, self.size, self.workers = work, opts, on_error, chunk_size, workers
        self.init_args = init_args
        self.threads = threads
        self.pool: Executor | None = None
        self.inflight: collections.deque = collections.deque()
        self.tables: dict[tuple[int, int], Any] = {}  # thread mode: the tables of the chunks handed out
        self.mode = "inline"

    def start(self, jobs: list[Job], langs: list[str]) -> None:
        """Set up the text tools here and, for N workers, fork them (before any progress thread starts)."""
        process.init_worker(*self.init_args)
        process.warm(langs)  # workers fork with the tools built
        if self.threads and jobs:
            self.mode = "threads"
            _few_malloc_arenas(self.workers)
            self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="xlp-prepare")
        elif self.workers > 1 and jobs:
            self.mode = "splits" if len(jobs) >= 2 * self.workers else "chunks"
            self.pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("fork"),
                                            initializer=process.init_worker, initargs=self.init_args)
            self.pool.submit(int).result()

    def finalizer(self, out: Path, rules: Rules, sink: Any = None) -> Finalizer | PartitionedFinalizer:
        """With N > 1 workers, N hash partitions and N shard-writing threads (partitioned.py); else (or with
        --bpe-from's id shards made alongside, whose writer follows one finalizer) the sequential Finalizer.
        The same shards either way."""
        if self.workers > 1 and sink is None:
            return PartitionedFinalizer(out, self.work, rules, self.workers)
        return Finalizer(out, rules, sink=sink)

    def table(self, s: int, k: int) -> Any:
        """The table of chunk (s, k) when this engine still holds it (thread mode), else None: read its file."""
        return self.tables.pop((s, k), None)

    def results(self, jobs: list[Job]) -> Iterator[Result]:
        if self.mode == "threads":
            return self._threaded(jobs)
        if self.mode == "splits":
            return self._split_parallel(jobs)
        return self._chunk_parallel(jobs) if self.mode == "chunks" else self._inline(jobs)

    def _inline(self, jobs: list[Job]) -> Iterator[Result]:
        for s, split, k0, start in jobs:
            for k, (tasks, n, more) in enumerate(cut(split, self.opts, self.on_error, self.size, start), k0):
                yield s, k, process.process_to_file(tasks, str(chunk_path(self.work, s, k)), n, **more)

    def _threaded(self, jobs: list[Job]) -> Iterator[Result]:
        assert self.pool is not None

        def done() -> Result:
            s_, k_, fut = self.inflight.popleft()
            meta, table = fut.result()
            if table is not None:
                self.tables[(s_, k_)] = table
            return s_, k_, meta

        for s, split, k0, start in jobs:
            for k, (tasks, n, more) in enumerate(cut(split, self.opts, self.on_error, self.size, start), k0):
                path = str(chunk_path(self.work, s, k))
                self.inflight.append((s, k, self.pool.submit(_table_to_file, tasks, path, n, **more)))
                while len(self.inflight) >= 2 * self.workers:
                    yield done()
        while self.inflight:
            yield done()

    def _chunk_parallel(self, jobs: list[Job]) -> Iterator[Result]:
        assert self.pool is not None
        for s, split, k0, start in jobs:
            for k, (tasks, n, more) in enumerate(cut(split, self.opts, self.on_error, self.size, start), k0):
                path = str(chunk_path(self.work, s, k))
                self.inflight.append((s, k, self.pool.submit(process.process_to_file, tasks, path, n, **more)))
                while len(self.inflight) >= 2 * self.workers:
                    s_, k_, fut = self.inflight.popleft()
                    yield s_, k_, fut.result()
        while self.inflight:
            s_, k_, fut = self.inflight.popleft()
            yield s_, k_, fut.result()

    def _split_parallel(self, jobs: list[Job]) -> Iterator[Result]:
        assert self.pool is not None
        todo = iter(jobs)

        def submit() -> None:
            job = next(todo, None)
            if job is not None:
                self.inflight.append((job, self.pool.submit(run_split_to_files, job, str(self.work), self.opts,
                                                            self.on_error, self.size)))

        for _ in range(2 * self.workers):
            submit()
        while self.inflight:
            (s, _, k, _), fut = self.inflight[0]
            while True:  # follow the split's chunk files as its worker writes them, so finalizing keeps up
                path = chunk_path(self.work, s, k)
                if path.is_file():
                    meta = process.chunk_meta(path)
                    yield s, k, meta
                    k += 1
                    if meta.get("tail"):
                        break
                elif fut.done():
                    metas = fut.result()  # (raises BrokenProcessPool if a worker died)
                    first = k - self.inflight[0][0][2]
                    for meta in metas[first:]:  # the rest, and a last chunk that was not written
                        yield s, k, meta
                        k += 1
                    break
                else:
                    wait([fut], timeout=0.02)
            self.inflight.popleft()
            submit()

    def close(self, abort: bool = False) -> None:
        """Stop the workers; with `abort` (the run failed) without waiting for the splits they are reading
        (their chunk files so far are kept work; a temp file of a killed write is removed by the rerun)."""
        if self.pool is not None:
            for item in self.inflight:
                item[-1].cancel()
            if abort and self.mode == "splits":
                for proc in list(getattr(self.pool, "_processes", {}).values()):
                    proc.terminate()
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        self.tables.clear()
