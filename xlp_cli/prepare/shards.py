"""Streaming shard writers: rows go to `OUT/<mono|pairs>/<split>/<group>/part-NNNNN.parquet` (layout.shard_dir) a
row group at a time, each row with its `split` and `lang` / `pair` columns.

A shard is written to a temp file and renamed when it holds `shard_size` rows (or at the end), so a shard
exists only when complete. Row groups hold exactly ROW_GROUP rows (the last one of a shard fewer), so
the bytes of a shard depend only on its rows, not on how they arrived (chunk size, workers), and memory
holds at most one row group per open shard. Rows arrive in a deterministic order, so a rerun produces
the same files; a shard that already exists (from an interrupted run of the same config) is not
rewritten, only checked and hashed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.shards import shard_entry, with_partition
from xlp_cli.artifacts.staged_parquet import StagedParquet, guarded
from xlp_cli.core.errors import WorkFailed

MONO_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("split", pa.string()), ("lang", pa.string()),
                         ("raw", pa.string()), ("text", pa.string())])
PAIR_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("split", pa.string()), ("pair", pa.string()),
                         ("lang1", pa.string()), ("lang2", pa.string()), ("raw1", pa.string()), ("raw2", pa.string()),
                         ("text1", pa.string()), ("text2", pa.string())])
ROW_GROUP = 4096  # rows per Parquet row group


class GroupWriter:
    """The shards of one (split, language or pair) folder."""

    def __init__(self, out: Path, split: str, group: str, pair: bool, shard_size: int, sink: Any = None):
        self.out = out
        self.sink = sink  # bpe/alongside.py's IdsAlongside: each row group written, each shard completed
        self.folder = layout.shard_dir(out, split, group)
        self.split, self.group = split, group
        schema = PAIR_SCHEMA if pair else MONO_SCHEMA
        self.schema = schema.with_metadata(layout.shard_metadata("prepare", schema.names, split=split,
                                                                 **{"pair" if pair else "lang": group}))
        self.shard_size = shard_size
        self.index = 0
        self.rows_in_shard = 0  # rows given to the current shard (written or pending)
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.file: StagedParquet | None = None  # the shard being written
        self.existing: bool | None = None  # current shard already on disk (None: not checked yet)
        self.done: dict[str, dict[str, int | str]] = {}  # relative path -> {sha256, rows, bytes}
        self.rows = 0

    def _path(self) -> Path:
        return self.folder / f"part-{self.index:05d}.parquet"

    def _rel(self) -> str:
        return self._path().relative_to(self.out).as_posix()

    def add_table(self, table: pa.Table) -> None:
        table = with_partition(table, self.schema, self.split, self.group)
        while table.num_rows:
            room = self.shard_size - self.rows_in_shard
            part, table = table.slice(0, room), table.slice(room)
            self.pending.append(part)
            self.pending_rows += part.num_rows
            self.rows_in_shard += part.num_rows
            self.rows += part.num_rows
            while self.pending_rows >= ROW_GROUP:
                self._write_rows(ROW_GROUP)
            if self.rows_in_shard >= self.shard_size:
                self._close_shard()

    def _write_rows(self, n: int) -> None:
        # a full disk or a read-only folder is the user's to fix: one line naming the shard
        guarded(self._path(), lambda: self._write_rows_(n), self.abort)

    def _write_rows_(self, n: int) -> None:
        """Write the first `n` pending rows as one row group."""
        pending = pa.concat_tables(self.pending)
        head, rest = pending.slice(0, n), pending.slice(n)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows
        if self.existing is None:
            self.existing = self._path().exists()  # finished by an interrupted run of the same config
            if not self.existing:
                self.file = StagedParquet(self._path(), self.schema)
        if self.file is not None:
            head = head.combine_chunks()
            self.file.write(head, ROW_GROUP)
            if self.sink is not None:
                self.sink.rows(self._rel(), head)

    def _close_shard(self) -> None:
        if self.pending_rows:
            self._write_rows(self.pending_rows)
        path = self._path()
        if self.file is not None:
            guarded(path, self.file.commit, self.abort)
            self.file = None
            if self.sink is not None:
                self.sink.close(self._rel())
        elif self.existing:
            found = pq.ParquetFile(path).metadata.num_rows
            if found != self.rows_in_shard:
                raise WorkFailed(f"an existing shard holds {found} rows where this run makes {self.rows_in_shard}; "
                                 "rerun with --force to rebuild the folder", path=path)
        if self.rows_in_shard:
            rel = path.relative_to(self.out).as_posix()
            self.done[rel] = shard_entry(path, self.rows_in_shard)
            self.index += 1
        self.rows_in_shard = 0
        self.existing = None

    def close(self) -> None:
        if self.rows_in_shard:
            self._close_shard()

    def abort(self) -> None:
        if self.sink is not None:
            self.sink.drop(self._rel())
        if self.file is not None:
            self.file.discard()
            self.file = None
