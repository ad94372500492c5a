"""`xlp prepare --bpe-from`: each id shard made while its text shard is written, not read back after.

The finalizer hands every row group it writes to a text shard (`rows`) and says when the shard is complete
(`close`). Threads encode the row groups (the tokenizer is the one `bpe.run.load_early` reads meanwhile) and one
thread writes them, in order, into the id shard (`id_shards.IdShardWriter`, as `xlp bpe apply` writes it),
staged under prepare's work folder. `bpe.run.apply` then moves each staged shard into IDS instead of making it,
so IDS and its manifest are what `xlp bpe apply` makes, byte for byte. The encoding uses the cores the text
step leaves idle (its main thread finalizes in order while the workers wait for it).

Nothing here can fail the text step: a shard whose encoding or writing fails (a newline in a text, a tokenizer
that did not load, a full disk) is dropped, and `apply` makes it the usual way, meeting the problem there.
"""

from __future__ import annotations

import collections
import os
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import pyarrow as pa

from xlp_cli.artifacts import layout
from xlp_cli.bpe.id_shards import IdShardWriter

_WHILE_LOADING = 16  # row groups (4096 rows each) held while the tokenizer loads (~0.2 s of text: ~5)


class _Dropped(Exception):
    """The shard was not made here (see the module doc)."""


class IdsAlongside:
    def __init__(self, loaded: Future, staging: Path, workers: int):
        self.loaded, self.staging, self.workers = loaded, Path(staging), max(1, workers)
        self.encoders = ThreadPoolExecutor(self.workers, thread_name_prefix="xlp-bpe")
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="xlp-bpe-write")
        self.shards: dict[str, IdShardWriter | None] = {}  # text shard (relative to OUT) -> its id shard (None: dropped)
        self.queue: collections.deque = collections.deque()  # the writer's jobs not waited for
        self.made: dict[str, Future] = {}  # text shard -> future of (sha256, rows, tokens, unknown tokens)

    # ------------------------------------------------------------ the finalizer's side (its thread)
    def rows(self, rel: str, table: pa.Table) -> None:
        """A row group just written to the text shard `rel` (`layout.shard_rel`), in order."""
        if rel not in self.shards:
            partition = layout.partition_of(Path(rel))
            self.shards[rel] = IdShardWriter(self.staging / rel, "pair" in partition, partition)
        encoded = self.encoders.submit(self._encode, rel, table)
        self.queue.append(self.writer.submit(self._add, rel, encoded))
        # a few row groups in flight (memory stays flat); more while the tokenizer is still being read, so that
        # the text step does not wait for it
        while len(self.queue) > (2 * self.workers if self.loaded.done() else _WHILE_LOADING):
            wait([self.queue.popleft()])

    def close(self, rel: str) -> None:
        """The text shard `rel` is complete."""
        if rel in self.shards:
            self.made[rel] = self.writer.submit(self._close, rel)

    def drop(self, rel: str) -> None:
        """The text shard `rel` was not written after all (its writing failed)."""
        if rel in self.shards:
            self.writer.submit(self._abort, rel)

    # ------------------------------------------------------------ the threads' side
    def _encode(self, rel: str, table: pa.Table) -> tuple[pa.Table, int, int]:
        tok = self.loaded.result()[0]
        w = self.shards.get(rel)
        if w is None:
            raise _Dropped
        return w.encode(tok, table)

    def _add(self, rel: str, encoded: Future) -> None:
        w = self.shards.get(rel)
        if w is None:
            return
        try:
            w.add(*encoded.result())
        except Exception:  # noqa: BLE001 - `apply` meets it again (module doc)
            self._abort(rel)

    def _close(self, rel: str) -> tuple[str, int, int, int]:
        w = self.shards.pop(rel, None)
        if w is None:
            raise _Dropped
        try:
            return w.close()
        except Exception:
            w.abort()
            raise

    def _abort(self, rel: str) -> None:
        w = self.shards.get(rel)
        if w is not None:
            w.abort()
            self.shards[rel] = None

    # ------------------------------------------------------------ apply's side
    def take(self, rel: str, dest: Path) -> tuple[str, int, int, int] | None:
        """Move the id shard of text shard `rel` to `dest` -> its (sha256, rows, tokens, unknown tokens); None when
        it was not made here (`apply` makes it)."""
        made = self.made.pop(rel, None)
        if made is None:
            return None
        try:
            found = made.result()
        except Exception:  # noqa: BLE001 - made the usual way
            return None
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.staging / rel, dest)
        except OSError:  # (another file system, say): made the usual way
            return None
        return found

    def shutdown(self) -> None:
        """Stop the threads; the id shards not taken stay staged (prepare's work folder goes with them)."""
        for f in self.queue:
            f.cancel()
        self.writer.submit(self._abort_all)
        self.writer.shutdown(wait=True)
        self.encoders.shutdown(wait=True)

    def _abort_all(self) -> None:
        for rel in list(self.shards):
            self._abort(rel)

    def __enter__(self) -> "IdsAlongside":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
