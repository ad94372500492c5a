"""Streaming shard writers: rows go to `OUT/<split>/<group>/part-NNNNN.parquet` a row group at a time.

A shard is written to a temp file and renamed when it holds `shard_size` rows (or at the end), so a shard
exists only when complete, and memory holds at most one row group per open shard. Shards are numbered in
order of their rows, and rows arrive in a deterministic order, so a rerun produces the same files; a shard
that already exists (from an interrupted run of the same config) is not rewritten, only hashed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli import artifacts
from xlp_cli.errors import WorkFailed

MONO_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("lang", pa.string()),
                         ("raw", pa.string()), ("text", pa.string())])
PAIR_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("lang1", pa.string()), ("lang2", pa.string()),
                         ("raw1", pa.string()), ("raw2", pa.string()), ("text1", pa.string()), ("text2", pa.string())])
ROW_GROUP = 8192


class GroupWriter:
    """The shards of one (split, language or pair) folder."""

    def __init__(self, out: Path, split: str, group: str, pair: bool, shard_size: int):
        self.out = out
        self.folder = out / split / group
        self.schema = PAIR_SCHEMA if pair else MONO_SCHEMA
        self.shard_size = shard_size
        self.index = 0
        self.rows_in_shard = 0
        self.buffer: list[list[str]] = [[] for _ in self.schema.names]
        self.writer: pq.ParquetWriter | None = None
        self.tmp: Path | None = None
        self.skip_existing = False
        self.done: dict[str, dict[str, int | str]] = {}  # relative path -> {sha256, rows}
        self.rows = 0

    def _path(self) -> Path:
        return self.folder / f"part-{self.index:05d}.parquet"

    def add(self, row: tuple[str, ...]) -> None:
        for col, v in zip(self.buffer, row):
            col.append(v)
        self.rows_in_shard += 1
        self.rows += 1
        if len(self.buffer[0]) >= ROW_GROUP:
            self._flush_group()
        if self.rows_in_shard >= self.shard_size:
            self._close_shard()

    def _flush_group(self) -> None:
        if not self.buffer[0]:
            return
        if self.writer is None and not self.skip_existing:
            if self._path().exists():  # finished by an interrupted run of the same config: keep it
                self.skip_existing = True
            else:
                self.folder.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{self._path().name}.", suffix=".tmp", dir=self.folder)
                os.close(fd)
                self.tmp = Path(tmp)
                self.writer = pq.ParquetWriter(self.tmp, self.schema, compression=artifacts.PARQUET_COMPRESSION)
        if self.writer is not None:
            table = pa.Table.from_arrays([pa.array(c, pa.string()) for c in self.buffer], schema=self.schema)
            self.writer.write_table(table, row_group_size=ROW_GROUP)
        self.buffer = [[] for _ in self.schema.names]

    def _close_shard(self) -> None:
        self._flush_group()
        path = self._path()
        if self.writer is not None:
            self.writer.close()
            os.replace(self.tmp, path)  # type: ignore[arg-type]
            self.writer, self.tmp = None, None
        elif self.skip_existing:
            found = pq.ParquetFile(path).metadata.num_rows
            if found != self.rows_in_shard:
                raise WorkFailed(f"an existing shard holds {found} rows where this run makes {self.rows_in_shard}; "
                                 "rerun with --force to rebuild the folder", path=path)
        if self.rows_in_shard:
            rel = path.relative_to(self.out).as_posix()
            self.done[rel] = {"sha256": artifacts.sha256_file(path), "rows": self.rows_in_shard}
            self.index += 1
        self.rows_in_shard = 0
        self.skip_existing = False

    def close(self) -> None:
        if self.rows_in_shard:
            self._close_shard()

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.tmp is not None and self.tmp.exists():
            self.tmp.unlink()
