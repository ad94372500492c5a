"""The artifact contract between stages: manifests, atomic writes, Parquet shards.

Every stage reads its inputs and writes its outputs through this module only.
A shard exists only when complete (temp file + rename); the manifest is written last.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import errno
import functools
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

from xlp_cli import layout
from xlp_cli.errors import BadInput, WorkFailed, XlpError

MANIFEST = "manifest.json"
SHARD_GLOB = "part-*.parquet"
PARQUET_COMPRESSION = "zstd"


# ---------------------------------------------------------------- atomic files
def write_failed(e: BaseException, path: str | Path) -> XlpError | None:
    """The one-line error for a failure met writing `path` when the disk or the folder is to blame (disk full: exit
    1; read-only or not permitted: exit 2), else None. Libraries that do not say ENOSPC (torch, safetensors,
    Parquet writers) are caught by looking at the free space of the file system right after the failure."""
    if isinstance(e, XlpError):
        return None
    code = getattr(e, "errno", None) or 0
    if code in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(e) or (not code and _no_space(path)):
        return WorkFailed("disk full (no space left on device) while writing this file; nothing half-written was "
                          "kept: free some space and rerun to resume", path=path)
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        return BadInput(f"cannot write here: {os.strerror(code).lower()}", path=path)
    return None


def _no_space(path: str | Path, below: int = 1 << 20) -> bool:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < below


@contextlib.contextmanager
def atomic_path(final: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to `final`; rename it over `final` only if the block succeeds. A full disk or a
    read-only folder is a one-line error naming `final`; the temporary file is removed in every case."""
    final = Path(final)
    tmp_path: Path | None = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
        os.close(fd)
        tmp_path = Path(tmp)
        layout.honour_umask(tmp_path)  # mkstemp makes 0600: shared storage needs the umask's mode
        yield tmp_path
        os.replace(tmp_path, final)
    except Exception as e:
        err = write_failed(e, final) if getattr(e, "filename", None) in (None, str(tmp_path), str(final)) else None
        if err is None:
            raise
        raise err from None
    finally:
        if tmp_path is not None and tmp_path.exists():
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
    try:
        yield tmp
    except BaseException as e:
        err = write_failed(e, final) if isinstance(e, Exception) else None
        shutil.rmtree(tmp, ignore_errors=True)  # (a kill leaves it: the next claim of the folder sweeps it)
        if err is not None:
            raise err from None
        raise
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
    # a log line that is not UTF-8 JSON (a damaged disk, a hand edit) is dropped like any unreadable line
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
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
@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str], ...]:
    out = {"python": platform.python_version(), "xlp": _version("xlp")}
    for pkg in ("pyarrow", "numpy", "torch", "sacremoses", "fastBPE", "sentencepiece", "jieba", "pythainlp", "sacrebleu"):
        v = _version(pkg)
        if v:
            out[pkg] = v
    return tuple(out.items())


def software_versions() -> dict[str, str]:
    """The versions of Python, xlp and the libraries that shape the outputs (read once per process: a run that
    writes its manifest at every checkpoint would otherwise parse the packages' metadata each time)."""
    return dict(_versions())


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
        "format_version": layout.FORMAT_VERSION,
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
    if not isinstance(m, dict):
        raise BadInput(f"manifest is a JSON {type(m).__name__}, not an object", path=path)
    if "stage" not in m:
        raise BadInput("manifest has no 'stage' field", path=path)
    layout.check_format(m, path)
    for key, kind in (("config", dict), ("outputs", dict), ("upstream", list), ("counts", dict)):
        if m.get(key) is not None and not isinstance(m[key], kind):
            raise BadInput(f"manifest field '{key}' is not a JSON {'object' if kind is dict else 'list'}", path=path)
    if stage is not None and m["stage"] != stage:
        raise BadInput(f"expected the output of `xlp {stage}`, found `xlp {m['stage']}`", path=path)
    return m


def try_read_manifest(folder: str | Path) -> dict[str, Any] | None:
    """The manifest of `folder`, or None when there is none (or it is not a JSON object)."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return None
    return m if isinstance(m, dict) else None


def find_upstream(data_dirs: list[Path], stage: str, *, verify: bool = True) -> tuple[Path, dict[str, Any]] | None:
    """Find the output of `stage` among `--data` folders, following each manifest's `upstream` links. Upstream
    links are the one kind of manifest path that names another folder: a link is followed only to a folder with a
    valid manifest, and inside it every path is confined (`inside`). With `verify`, the shards the found manifest
    lists are checked (`verify_shards`). A damaged manifest on the way is a one-line error."""
    seen: set[Path] = set()
    todo = [Path(d) for d in data_dirs]
    while todo:
        d = todo.pop(0).resolve()
        if d in seen:
            continue
        seen.add(d)
        if not (d / MANIFEST).is_file():
            continue
        m = read_manifest(d)
        if m.get("stage") == stage:
            if verify:
                verify_shards(d, m)
            return d, m
        outputs = m.get("outputs") if isinstance(m.get("outputs"), dict) else {}
        for key in ("ids", "bpe"):  # the stage folders `xlp prepare --bpe-codes/--bpe-from` wrote (siblings)
            if isinstance(outputs.get(key), str):
                todo.append(layout.linked_folder(d, outputs[key], f"outputs.{key}", d / MANIFEST))
        ups = m.get("upstream") or []
        for up in ups if isinstance(ups, list) else [ups]:
            path = up.get("path") if isinstance(up, dict) else up
            if not isinstance(path, str) or not path:
                raise BadInput("an `upstream` entry of the manifest has no 'path'", path=d / MANIFEST)
            todo.append(Path(path))
    return None


def inside(folder: str | Path, rel: Any, what: str, source: str | Path | None = None) -> Path:
    """`folder / rel` for a relative path read from a manifest or recipe, refused (one line) when it is not a
    relative path that stays inside `folder` (symbolic links resolved)."""
    folder = Path(folder)
    if not isinstance(rel, str) or not rel or Path(rel).is_absolute():
        raise BadInput(f"{what} {rel!r} is not a relative path inside the folder; refused", path=source or folder)
    base = folder.resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        raise BadInput(f"{what} {rel!r} points outside its folder; refused", path=source or folder)
    return folder / rel


HASH_LIMIT = 256 << 20  # verify_shards hashes the shards when they hold at most this many bytes in all


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
    shards = outputs.get("shards") if isinstance(outputs.get("shards"), dict) else {}
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
    for d in {p.parent for p in paths[:len(shards)]}:
        for extra in shard_paths(d):
            if extra not in listed:
                raise BadInput("shard not listed in the manifest (left by another run?); remove it or rerun the "
                               "stage that wrote the folder", path=extra)
    return paths


def guard_out_dir(out: Path, stage: str, config: dict[str, Any], *, force: bool, owns: tuple[str, ...] = (),
                  on_locked: Any = None) -> dict[str, Any] | None:
    """Lock `out` and make it this stage's folder (`outdir.claim`: foreign files, --force, temp sweep, config).
    Returns the previous manifest (same config) when the folder holds a run that can be resumed, else None."""
    from xlp_cli import outdir

    return outdir.claim(Path(out), stage, config, force=force, owns=owns, on_locked=on_locked)


def data_dir() -> Path:
    """Where the shared real corpora live (XLP_DATA_DIR, default ../shared/data)."""
    return Path(os.environ.get("XLP_DATA_DIR", Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
