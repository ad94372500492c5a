"""A Parquet file written under a temporary name beside its destination and renamed over it when complete, so
the destination only ever holds a whole file (prepare's text shards, bpe's id shards, written a row group at a
time). A failure the disk or the folder is to blame for becomes the one-line error naming the destination."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli.artifacts.files import honour_umask
from xlp_cli.artifacts.shards import PARQUET_COMPRESSION
from xlp_cli.core.errors import write_failed


class StagedParquet:
    def __init__(self, dest: Path, schema: pa.Schema):
        self.dest = Path(dest)
        self.dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.dest.name}.", suffix=".tmp", dir=self.dest.parent)
        os.close(fd)
        self.tmp: Path | None = Path(tmp)
        honour_umask(self.tmp)  # mkstemp makes 0600: shared storage needs the umask's mode
        self.writer: pq.ParquetWriter | None = pq.ParquetWriter(self.tmp, schema,
                                                                compression=PARQUET_COMPRESSION)

    def write(self, table: pa.Table, row_group_size: int) -> None:
        self.writer.write_table(table, row_group_size=row_group_size)  # type: ignore[union-attr]

    def commit(self) -> None:
        """Close the file and give it its name."""
        self.writer.close()  # type: ignore[union-attr]
        self.writer = None
        os.replace(self.tmp, self.dest)  # type: ignore[arg-type]
        self.tmp = None

    def discard(self) -> None:
        """Remove the temporary file (nothing appears at `dest`)."""
        if self.writer is not None:
            try:
                self.writer.close()
            except Exception:  # noqa: BLE001 - the temp file goes anyway
                pass
            self.writer = None
        if self.tmp is not None and self.tmp.exists():
            self.tmp.unlink()
        self.tmp = None


def guarded(dest: Path, step: Callable[[], Any], discard: Callable[[], None]) -> Any:
    """step(); if it fails, discard() and raise, as the one-line error naming `dest` when the disk (full) or the
    folder (read-only) is to blame."""
    try:
        return step()
    except Exception as e:
        discard()
        err = write_failed(e, dest)
        if err is None:
            raise
        raise err from None
