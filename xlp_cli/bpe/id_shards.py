"""Id shards: the subword text and ids of a prepared text shard, written a row group at a time.

`apply_shard` makes the id shard of a text shard on disk (`xlp bpe apply`). Its writer, `IdShardWriter`, is also
fed row group by row group while `xlp prepare --bpe-from` writes the text shard (bpe/alongside.py): both take
the text shard's rows in order and cut the id shard into the same row groups, so they write the same bytes.
"""

from __future__ import annotations

import collections
import ctypes
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.arrow_numpy import to_numpy
from xlp_cli.artifacts.files import sha256_file
from xlp_cli.artifacts.staged_parquet import StagedParquet, guarded
from xlp_cli.bpe.dictionary import UNK_ID
from xlp_cli.bpe.tokenizer import Tokenizer

APPLY_STAGE = "bpe-apply"
ROW_GROUP = 8192  # rows per row group (64k before: 8k lets the writing keep up with the encoding threads)


class IdShardWriter:
    """The id shard `dest` of one text shard: `encode` batches of its rows (any thread), `add` them in row order,
    `close` (-> sha256, rows, tokens, unknown tokens). The file appears at `dest` only when closed."""

    def __init__(self, dest: Path, pair: bool, partition: dict[str, str]):
        self.dest = Path(dest)
        self.keep = ["id", "lang1", "lang2"] if pair else ["id", "lang"]  # what the text shard gives
        self.names = ["1", "2"] if pair else [""]
        # the partition columns (layout.PARTITION_COLUMNS) from the shard's folder: a format 1-2 text shard has none
        self.fill = {k: v for k, v in partition.items() if k in ("split", "pair")}
        if set(self.fill) != ({"split", "pair"} if pair else {"split"}):
            raise ValueError(f"id shard {dest}: no split/pair in {partition}")
        self.head = ["id", *self.fill, *self.keep[1:]]  # the string columns of the id shard
        fields = [(c, pa.string()) for c in self.head]
        for s in self.names:
            fields += [("text" + s, pa.string()), ("ids" + s, pa.list_(pa.int32()))]
        self.schema = pa.schema(fields, metadata=layout.shard_metadata(APPLY_STAGE, [f[0] for f in fields], **partition))
        self.pending: list[pa.Table] = []
        self.rows = self.n_tok = self.unk = 0
        self.file: StagedParquet | None = None

    def columns(self, tok: Tokenizer) -> list[str]:
        """What `encode` reads of a text shard."""
        return self.keep + [tok.column + s for s in self.names]

    def encode(self, tok: Tokenizer, batch: pa.RecordBatch | pa.Table) -> tuple[pa.Table, int, int]:
        """(rows of the id shard, tokens, unknown tokens) for a batch of the text shard's rows (`columns`)."""
        arrays = {c: batch.column(c) if c in self.keep else pa.repeat(pa.scalar(self.fill[c], pa.string()),
                                                                      batch.num_rows)
                  for c in self.head}
        n_tok = unk = 0
        for s in self.names:
            col = batch.column(tok.column + s)
            text, ids = tok.encode_arrow(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
            arrays["text" + s], arrays["ids" + s] = text, ids
            values = to_numpy(ids.values)
            n_tok += len(values)
            unk += int(np.count_nonzero(values == UNK_ID))
        return pa.table(arrays, schema=self.schema), n_tok, unk

    def add(self, table: pa.Table, n_tok: int, unk: int) -> None:
        self.pending.append(table)
        self.rows, self.n_tok, self.unk = self.rows + table.num_rows, self.n_tok + n_tok, self.unk + unk
        if sum(x.num_rows for x in self.pending) >= ROW_GROUP:
            self._write(False)

    def _write(self, final: bool) -> None:
        guarded(self.dest, lambda: self._write_groups(final), self.abort)

    def _write_groups(self, final: bool) -> None:
        if self.file is None:
            self.file = StagedParquet(self.dest, self.schema)
        table = pa.concat_tables(self.pending) if self.pending else self.schema.empty_table()
        while table.num_rows >= ROW_GROUP or (final and table.num_rows):
            self.file.write(table.slice(0, ROW_GROUP).combine_chunks(), ROW_GROUP)
            table = table.slice(ROW_GROUP)
        self.pending[:] = [table] if table.num_rows else []

    def close(self) -> tuple[str, int, int, int]:
        self._write(True)
        guarded(self.dest, self.file.commit, self.abort)  # type: ignore[union-attr]
        self.file = None
        self.pending.clear()
        return sha256_file(self.dest), self.rows, self.n_tok, self.unk

    def abort(self) -> None:
        """Remove the temporary file (the id shard is not written)."""
        if self.file is not None:
            self.file.discard()
            self.file = None
        self.pending.clear()


def apply_shard(tok: Tokenizer, shard: Path, pair: bool, batch_rows: int, dest: Path,
                partition: dict[str, str], workers: int = 1) -> tuple[str, int, int, int]:
    """Write the id shard of one text shard (layout.py's key-value metadata with `partition` included); `workers`
    threads encode batches side by side (the native applier runs without the GIL, and its cache of segmented
    words is shared) while this thread reads the next batches and compresses and writes.
    -> (sha256, rows, tokens, unknown tokens)."""
    w = IdShardWriter(dest, pair, partition)
    batches = pq.ParquetFile(shard, pre_buffer=False).iter_batches(
        batch_size=batch_rows, columns=w.columns(tok), use_threads=False)  # (threads: more memory)
    try:
        for table, n_tok, unk in in_order(lambda batch: w.encode(tok, batch), batches, workers):
            w.add(table, n_tok, unk)
        found = w.close()
    finally:
        w.abort()
    release_memory()
    return found


def in_order(fn: Any, items: Iterator[Any], workers: int) -> Iterator[Any]:
    """fn(item) for each item, computed by `workers` threads up to 2 * workers items ahead, yielded in order.
    The items are drawn in the caller's thread; a caller that stops early waits for the running calls."""
    pending: collections.deque = collections.deque()
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="xlp-bpe") as pool:
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= 2 * max(1, workers):
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


def release_memory() -> None:
    """Give freed memory back to the system: Arrow's default pool (mimalloc) and glibc's malloc keep it, and
    a shard's batches would otherwise stay in the process's RSS for the rest of the run."""
    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
