"""Parquet shards: written atomically with the artifact key-value metadata, listed, read and streamed; what a
manifest records of each, and the check of a folder's listed shards (`verify_shards`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.files import atomic_path, inside, sha256_file
from xlp_cli.core.errors import BadInput

MANIFEST = "manifest.json"
SHARD_GLOB = "part-*.parquet"
PARQUET_COMPRESSION = "zstd"
HASH_LIMIT = 256 << 20  # verify_shards hashes the shards when they hold at most this many bytes in all


def write_shard(path: str | Path, table: pa.Table, *, row_group_size: int = 64 * 1024, stage: str | None = None,
                **meta: Any) -> str:
    """Write `table` as a zstd Parquet shard, atomically (with `stage`: the key-value metadata of layout.py, `meta`
    added). Returns its sha256."""
    if stage is not None:
        table = table.replace_schema_metadata(layout.shard_metadata(stage, table.column_names, **meta))
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression=PARQUET_COMPRESSION, row_group_size=row_group_size)
    return sha256_file(path)


def shard_paths(folder: str | Path) -> list[Path]:
    """Complete shards in `folder`, in name order (temp files are never matched)."""
    folder = Path(folder)
    return sorted(p for p in folder.glob(SHARD_GLOB) if p.is_file())


def read_table(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file, whole or some columns: `pq.read_table` without pyarrow.dataset, which read_table imports
    (~30 ms) and which makes pyarrow import pandas (~0.1 s of CPU) in a process that never uses it."""
    with pq.ParquetFile(path) as f:
        return f.read(columns=columns)


def read_shard(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    try:
        return read_table(path, columns=columns)
    except (pa.ArrowInvalid, OSError) as e:
        raise BadInput(f"not a readable Parquet shard ({e})", path=path) from None


def iter_batches(paths: list[Path], columns: list[str] | None = None, batch_size: int = 8192) -> Iterator[pa.RecordBatch]:
    """Stream record batches from shards without loading them whole."""
    for p in paths:
        try:
            pf = pq.ParquetFile(p)
        except (pa.ArrowInvalid, OSError) as e:
            raise BadInput(f"not a readable Parquet shard ({e})", path=p) from None
        yield from pf.iter_batches(batch_size=batch_size, columns=columns)


def with_partition(table: pa.Table, schema: pa.Schema, split: str, group: str) -> pa.Table:
    """`table` laid out as `schema`, its partition columns (layout.PARTITION_COLUMNS: `split`, and `lang` or
    `pair`) filled with the shard folder's values where the table lacks them."""
    values = dict(zip(layout.PARTITION_COLUMNS[layout.dataset_of(group)], (split, group)))
    cols = [table.column(name) if name in table.column_names else pa.repeat(pa.scalar(values[name], pa.string()),
                                                                             table.num_rows)
            for name in schema.names]
    out = pa.Table.from_arrays(cols, names=schema.names)
    return out if out.schema == schema else out.cast(schema)


def shard_entry(path: str | Path, rows: int, sha256: str | None = None) -> dict[str, Any]:
    """What a manifest records of a shard: its sha256, rows and size in bytes."""
    return {"sha256": sha256 or sha256_file(path), "rows": int(rows), "bytes": Path(path).stat().st_size}


def verify_shards(folder: str | Path, manifest: dict[str, Any], *, hash: bool | None = None) -> list[Path]:
    """Every shard `manifest` lists (`outputs.shards`; and every file listed as `outputs.NAME: {sha256}`) exists
    inside `folder` with its recorded size (and sha256: always with `hash=True`, never with False, when cheap -
    HASH_LIMIT bytes in all - by default); a complete shard in a listed shard folder that the manifest does not
    list is refused too. Returns the listed paths.
    The one place that knows how a manifest lists shards (every reader of another stage's shards calls it)."""
    folder = Path(folder)
    source = folder / MANIFEST
    outputs = manifest.get("outputs") if isinstance(manifest.get("outputs"), dict) else {}
    if "shards" in outputs and not isinstance(outputs["shards"], dict):
        raise BadInput("corrupt manifest: outputs.shards is not an object of {path: {sha256, rows, bytes}}",
                       path=source)
    shards = outputs.get("shards") or {}
    # other listed files ({name: {"sha256": ...}}: bpe learn's codes, vocab-score's files) are checked alike
    files = {k: v for k, v in outputs.items() if k != "shards" and isinstance(v, dict) and "sha256" in v}
    paths, entries = [], []
    for rel, info in [*shards.items(), *files.items()]:
        p = inside(folder, rel, "path", source)
        info = info if isinstance(info, dict) else {}
        if not p.is_file():
            raise BadInput(f"{rel}, listed in the manifest, is missing: the folder is incomplete; rerun the "
                           "stage that wrote it", path=folder)
        if isinstance(info.get("bytes"), int) and p.stat().st_size != info["bytes"]:
            raise BadInput(f"{rel} has {p.stat().st_size} bytes, the manifest recorded {info['bytes']}: "
                           "damaged or replaced; rerun the stage that wrote it", path=p)
        paths.append(p)
        entries.append(info)
    if hash is None:
        hash = sum(p.stat().st_size for p in paths) <= HASH_LIMIT
    for p, info in zip(paths, entries):
        if hash and info.get("sha256") and sha256_file(p) != info["sha256"]:
            raise BadInput("file differs from its sha256 in the manifest: damaged or replaced; rerun the stage "
                           "that wrote it", path=p)
    listed = set(paths)
    # the manifest is the whole truth: a shard anywhere in the folder's tree that it does not list (an empty
    # list included) is refused, not only in the folders it names
    for d in sorted({p.parent for p in paths[:len(shards)]} | set(_shard_folders(folder))):
        for extra in shard_paths(d):
            if extra not in listed:
                raise BadInput("shard not listed in the manifest (left by another run?); remove it or rerun the "
                               "stage that wrote the folder", path=extra)
    return paths


def _shard_folders(folder: Path) -> Iterator[Path]:
    """The folders under a stage folder that hold shards (`part-*.parquet`), hidden folders (`.work`, temp
    folders) and nested stage folders (their own manifest: `prepare --bpe-codes`'s bpe/) left out."""
    if not folder.is_dir():
        return
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if (sub / MANIFEST).exists():
            continue
        if any(sub.glob(SHARD_GLOB)):
            yield sub
        yield from _shard_folders(sub)
