"""The artifact contract between stages: manifests, atomic writes, Parquet shards.

Every stage reads its inputs and writes its outputs through this module only.
A shard exists only when complete (temp file + rename); the manifest is written last.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli.errors import BadInput

MANIFEST = "manifest.json"
SHARD_GLOB = "part-*.parquet"
PARQUET_COMPRESSION = "zstd"


# ---------------------------------------------------------------- atomic files
@contextlib.contextmanager
def atomic_path(final: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to `final`; rename it over `final` only if the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, final)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_folder(final: str | Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside `final`; when the block succeeds it replaces `final`.

    The old folder is moved aside first and deleted last, so at every moment either the old or the new
    complete folder exists under its name (or, for a crash between the two renames, `.NAME.old`).
    """
    final = Path(final)
    tmp = final.with_name(f".{final.name}.tmp")
    old = final.with_name(f".{final.name}.old")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    yield tmp
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    if old.exists():
        shutil.rmtree(old)


def truncate_jsonl(path: str | Path, step: int) -> None:
    """Keep the lines of a metrics log whose `step` is <= `step` (a resumed run writes the rest again)."""
    path = Path(path)
    if not path.is_file():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if int(json.loads(line).get("step", 0)) <= step:
                keep.append(line + "\n")
        except (json.JSONDecodeError, TypeError, ValueError, AttributeError):
            continue
    write_text_atomic(path, "".join(keep))


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if dataclasses.is_dataclass(o):
        return dataclasses.asdict(o)
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def config_hash(config: dict[str, Any]) -> str:
    """A stable hash of a config dict (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, default=_json_default, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


# ---------------------------------------------------------------- shards
def write_shard(path: str | Path, table: pa.Table, *, row_group_size: int = 64 * 1024) -> str:
    """Write `table` as a zstd Parquet shard, atomically. Returns its sha256."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression=PARQUET_COMPRESSION, row_group_size=row_group_size)
    return sha256_file(path)


def shard_paths(folder: str | Path) -> list[Path]:
    """Complete shards in `folder`, in name order (temp files are never matched)."""
    folder = Path(folder)
    return sorted(p for p in folder.glob(SHARD_GLOB) if p.is_file())


def read_shard(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    try:
        return pq.read_table(path, columns=columns)
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


# ---------------------------------------------------------------- manifests
def software_versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version(), "xlp": _version("xlp")}
    for pkg in ("pyarrow", "numpy", "torch", "sacremoses", "fastBPE", "sentencepiece", "jieba", "pythainlp", "sacrebleu"):
        v = _version(pkg)
        if v:
            out[pkg] = v
    return out


def _version(pkg: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return ""


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def new_manifest(stage: str, config: dict[str, Any], **fields: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "stage": stage,
        "config": config,
        "config_hash": config_hash(config),
        "inputs": [],
        "outputs": {},
        "counts": {},
        "warnings": [],
        "versions": software_versions(),
        "created": now_iso(),
    }
    m.update(fields)
    return m


def write_manifest(folder: str | Path, manifest: dict[str, Any]) -> Path:
    path = Path(folder) / MANIFEST
    write_json_atomic(path, manifest)
    return path


def read_manifest(folder: str | Path, *, stage: str | None = None) -> dict[str, Any]:
    """Read `folder/manifest.json`; with `stage`, insist it was written by that stage."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not folder.exists():
        raise BadInput("no such folder", path=folder)
    if not path.is_file():
        raise BadInput("no manifest.json here: not an xlp stage output (or the stage did not finish)", path=folder)
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"corrupt manifest ({e})", path=path) from None
    if not isinstance(m, dict) or "stage" not in m:
        raise BadInput("manifest has no 'stage' field", path=path)
    if stage is not None and m["stage"] != stage:
        raise BadInput(f"expected the output of `xlp {stage}`, found `xlp {m['stage']}`", path=path)
    return m


def try_read_manifest(folder: str | Path) -> dict[str, Any] | None:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def find_upstream(data_dirs: list[Path], stage: str) -> tuple[Path, dict[str, Any]] | None:
    """Find the output of `stage` among `--data` folders, following each manifest's `upstream` links."""
    seen: set[Path] = set()
    todo = [Path(d) for d in data_dirs]
    while todo:
        d = todo.pop(0).resolve()
        if d in seen:
            continue
        seen.add(d)
        m = try_read_manifest(d)
        if m is None:
            continue
        if m.get("stage") == stage:
            return d, m
        for up in m.get("upstream", []) or []:
            todo.append(Path(up["path"]) if isinstance(up, dict) else Path(up))
    return None


def guard_out_dir(out: Path, stage: str, config: dict[str, Any], *, force: bool) -> dict[str, Any] | None:
    """Refuse to write a different config into an existing stage folder unless `force`.

    Returns the previous manifest (same config) when the folder holds a finished or partial run that can
    be resumed, else None. A stage keeps a `.xlp-config.json` from its first start so that an interrupted
    run (no manifest yet) is recognised too.
    """
    out.mkdir(parents=True, exist_ok=True)
    marker = out / ".xlp-config.json"
    h = config_hash(config)
    if marker.exists():
        try:
            prev = json.loads(marker.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            prev = {}
        if prev.get("stage") not in (None, stage) and not force:
            raise BadInput(f"folder holds the output of `xlp {prev.get('stage')}`, not `xlp {stage}`; use another --out or --force", path=out)
        if prev.get("config_hash") != h and not force:
            changed = sorted(k for k in set(prev.get("config", {})) | set(config) if prev.get("config", {}).get(k) != config.get(k))
            raise BadInput(
                "folder was written with a different config (changed: " + ", ".join(changed[:8]) + "); use another --out or --force",
                path=out,
            )
        if prev.get("config_hash") != h and force:
            _clear_stage_folder(out)
    write_json_atomic(marker, {"stage": stage, "config_hash": h, "config": config})
    return try_read_manifest(out)


KEEP_ON_FORCE = {"downloads"}  # fetched raw inputs do not depend on the stage config


def _clear_stage_folder(out: Path) -> None:
    import shutil

    for child in out.iterdir():
        if child.name in KEEP_ON_FORCE:
            continue
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()


def data_dir() -> Path:
    """Where the shared real corpora live (XLP_DATA_DIR, default ../shared/data)."""
    return Path(os.environ.get("XLP_DATA_DIR", Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
