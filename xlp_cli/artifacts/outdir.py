"""A stage's output folder: one writer at a time, what xlp owns there, `--force`, and the temp-file sweep.

    prev = outdir.claim(OUT, stage, config, force=cfg.force, owns=("train", "valid", "test"))
    @outdir.scoped                        # on each stage's run function: the locks it took are released on return

`claim`, in this order:
1. `--out` must be a folder (or not exist yet); a file there, or a file as one of its parents, is bad input.
2. A folder that xlp did not write (no `.xlp-config.json`, no manifest) and that holds other files is refused,
   unless `--force`: then xlp writes beside those files and never removes them.
3. The lock: `fcntl.flock` on `OUT/.xlp.lock`, which holds the PID of the process that has it. A second writer
   is refused at once (exit 2) with that PID; the kernel drops the lock when the holder exits or is killed, so
   a rerun after a crash or SIGKILL resumes without any cleanup.
4. Leftovers of a killed run are swept: `.NAME.*.tmp` files and `.NAME.tmp` folders (artifacts.atomic_path /
   atomic_folder); a `.NAME.old` folder is put back when `NAME` is missing (a crash between two renames).
5. The config: a folder written with another config (or by another stage) is refused unless `--force`, which
   removes only what xlp wrote there: the entries the stage declares in `owns` (recorded in `.xlp-config.json`,
   so a later `--force` knows them too), the files the manifest lists, the manifest and the marker.
Nested stage folders (e.g. `OUT/bpe` of `xlp prepare --bpe-codes`) have their own lock and marker and are left
to their own stage by the sweep.

`unclaim(OUT, owns)`: a run refused before it produced anything (`xlp pretrain` with no checkpoint yet) gives a
folder it claimed fresh back: what it wrote there and the marker go, so a rerun with another config is not
refused as "a different config" (files xlp did not write stay, as with --force).
"""

from __future__ import annotations

import errno
import fcntl
import fnmatch
import functools
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from xlp_cli.artifacts import safe_output
from xlp_cli.artifacts.files import write_json_atomic
from xlp_cli.artifacts.manifest import config_hash, try_read_manifest
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.core import textfile
from xlp_cli.core.errors import BadInput

LOCK, MARKER = ".xlp.lock", ".xlp-config.json"
INTERNAL = {LOCK, MARKER, MANIFEST}
KEEP_ON_FORCE = {"downloads"}  # fetched raw inputs do not depend on the stage config
_TEMP = re.compile(r"^\..+\.tmp$")
_OLD = re.compile(r"^\.(.+)\.old$")

_held: dict[str, int] = {}          # resolved folder -> fd of its lock file (this process)
_scopes: list[list[str]] = []       # the locks taken inside each active `scoped` call
F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------- the folder itself
def check_folder(out: Path) -> None:
    """`out` is a folder or can be made one: neither it nor a parent is a file."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BadInput("--out names a file, not a folder", path=out)
    safe_output.check_out_folder(out)  # /proc, /sys and other kernel file systems; devices
    for parent in out.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise BadInput(f"cannot make the output folder: {parent} is a file", path=out)
            break


def check_output_file(path: Path, flag: str = "--output") -> None:
    """Before any work: `path` can be written as a file (not a folder, its folder can be made and written)."""
    path = Path(path)
    if path.is_dir():
        raise BadInput(f"{flag} names a folder; give a file name", path=path)
    check_folder(path.parent)
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        err = errno.EROFS if os.statvfs(parent).f_flag & os.ST_RDONLY else errno.EACCES
        raise cannot_write(OSError(err, os.strerror(err)), parent)


def cannot_write(e: OSError, path: Path) -> BadInput:
    """A one-line error for an OSError met while creating or writing `path` (read-only, permissions, ...)."""
    what = {errno.EROFS: "read-only file system", errno.EACCES: "permission denied", errno.EPERM: "not permitted",
            errno.ENOSPC: "disk full (no space left on device)", errno.EDQUOT: "disk quota exceeded",
            errno.ENOTDIR: "a parent is not a folder"}.get(e.errno or 0, e.strerror or str(e))
    return BadInput(f"cannot write here: {what}", path=e.filename or path)


def _paths(config: dict[str, Any], key: str) -> list[str]:
    """The local paths a config lists under `key` (`inputs`, `data`); URIs and other values left out."""
    value = config.get(key)
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    return [v for v in items if isinstance(v, str) and v and "://" not in v]


# ---------------------------------------------------------------- the lock
def lock(out: Path) -> None:
    """Take the folder's lock for this process (creating the folder), or refuse at once naming the holder."""
    out = Path(out)
    check_folder(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        key = str(out.resolve())
        if key in _held:
            return
        fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise cannot_write(e, out) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise cannot_write(e, out / LOCK) from None
        who = f" (PID {holder})" if holder.isdigit() else ""
        raise BadInput(f"another xlp process{who} is writing to this folder; wait for it to finish, "
                       "or use another --out", path=out) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as e:
        os.close(fd)
        raise cannot_write(e, out / LOCK) from None
    _held[key] = fd
    if _scopes:
        _scopes[-1].append(key)


def release(out: Path | str) -> None:
    fd = _held.pop(str(Path(out).resolve()), None)
    if fd is not None:
        os.close(fd)


def scoped(fn: F) -> F:
    """Release the folder locks `fn` took when it returns or fails (a stage's run function)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _scopes.append([])
        try:
            return fn(*args, **kwargs)
        finally:
            for key in _scopes.pop():
                release(key)
    return wrapper  # type: ignore[return-value]


# ---------------------------------------------------------------- what xlp owns
def read_marker(out: Path) -> dict[str, Any]:
    try:
        marker = textfile.json_file(Path(out) / MARKER)
    except BadInput:
        return {}
    return marker if isinstance(marker, dict) else {}


def _listed(manifest: dict[str, Any] | None) -> set[str]:
    """Top-level names of the files a manifest lists as outputs (relative paths only)."""
    names: set[str] = set()

    def add(value: Any) -> None:
        if isinstance(value, str) and value and not Path(value).is_absolute() and ".." not in Path(value).parts:
            names.add(Path(value).parts[0])

    outputs = (manifest or {}).get("outputs")
    for key, value in (outputs.items() if isinstance(outputs, dict) else ()):
        if key == "shards" and isinstance(value, dict):
            for rel in value:
                add(rel)
        elif isinstance(value, dict):
            add(key)
        for v in (value if isinstance(value, list) else [value]):
            add(v)
    return names


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def foreign_entries(out: Path, owns: Iterable[str] = ()) -> list[str]:
    """The top-level entries of `out` that xlp did not write (per the stage's `owns`, the marker, the manifest)."""
    out = Path(out)
    if not out.is_dir():
        return []
    marker = read_marker(out)
    patterns = set(owns) | set(marker.get("owns") or []) | INTERNAL | _listed(try_read_manifest(out))
    return sorted(e for e in os.listdir(out) if not _TEMP.match(e) and not _matches(e, patterns))


def claim(out: Path, stage: str, config: dict[str, Any], *, force: bool, owns: Iterable[str],
          on_locked: Callable[[], None] | None = None) -> dict[str, Any] | None:
    """Make `out` this stage's folder (see the module doc). Returns the previous manifest when the folder holds a
    finished or partial run of the same config (to resume), else None."""
    out = Path(out)
    owns = sorted(set(owns))
    check_folder(out)
    safe_output.check_out_folder(out, inputs=_paths(config, "inputs"), data=_paths(config, "data"))
    if out.is_dir() and not (out / MARKER).exists() and try_read_manifest(out) is None:
        foreign = foreign_entries(out, owns)
        if foreign and not force:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise BadInput(f"folder is not empty and was not written by xlp (it holds {shown}); use a new or empty "
                           "--out, or add --force to write beside these files (xlp never removes files it did not "
                           "write)", path=out)
    lock(out)
    if on_locked is not None:
        on_locked()
    sweep(out, skip=foreign_entries(out, owns))
    prev = read_marker(out)
    h = config_hash(config)
    if prev and (prev.get("stage") not in (None, stage) or prev.get("config_hash") != h):
        if not force:
            if prev.get("stage") not in (None, stage):
                raise BadInput(f"folder holds the output of `xlp {prev.get('stage')}`, not `xlp {stage}`; use another "
                               "--out or --force", path=out)
            old = prev.get("config") if isinstance(prev.get("config"), dict) else {}
            changed = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
            raise BadInput("folder was written with a different config (changed: " + ", ".join(changed[:8])
                           + "); use another --out or --force", path=out)
        clear(out, set(owns) | set(prev.get("owns") or []))
        prev = {}
    keep = set(prev.get("owns") or []) if prev.get("stage") == stage else set()
    try:
        write_json_atomic(out / MARKER, {"stage": stage, "config_hash": h, "config": config,
                                         "owns": sorted(keep | set(owns))})
    except OSError as e:
        raise cannot_write(e, out / MARKER) from None
    return try_read_manifest(out)


def clear(out: Path, owns: Iterable[str]) -> None:
    """Remove what xlp wrote in `out` (`owns` patterns, the manifest's files, manifest, marker); keep the rest."""
    patterns = (set(owns) | _listed(try_read_manifest(out)) | {MARKER, MANIFEST}) - KEEP_ON_FORCE
    for name in os.listdir(out):
        if name == LOCK or name in KEEP_ON_FORCE or not (_matches(name, patterns) or _TEMP.match(name)):
            continue
        _remove(out / name)


def unclaim(out: Path, owns: Iterable[str]) -> None:
    """Give back a folder this process claimed fresh and wrote no result into (see the module doc)."""
    if Path(out).is_dir():
        clear(Path(out), owns)


# ---------------------------------------------------------------- leftovers of a killed run
def sweep(out: Path, skip: Iterable[str] = ()) -> list[Path]:
    """Remove the temporary files and folders a killed run left under `out` (not inside nested stage folders nor
    the top-level entries in `skip`: files xlp did not write); put back a `.NAME.old` folder whose `NAME` is
    missing. Returns what was removed."""
    out = Path(out)
    removed: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(out):
        here = Path(dirpath)
        if here == out:
            dirnames[:] = [d for d in dirnames if d not in set(skip)]
        elif MARKER in filenames or LOCK in filenames:
            dirnames[:] = []  # another stage's folder
            continue
        for name in list(dirnames):
            old = _OLD.match(name)
            if old and not (here / old.group(1)).exists():
                os.rename(here / name, here / old.group(1))
                dirnames.remove(name)
                dirnames.append(old.group(1))
        for name in [*dirnames, *filenames]:
            if _TEMP.match(name) or _OLD.match(name):
                _remove(here / name)
                removed.append(here / name)
                if name in dirnames:
                    dirnames.remove(name)
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def guard_out_dir(out: Path, stage: str, config: dict[str, Any], *, force: bool, owns: tuple[str, ...] = (),
                  on_locked: Any = None) -> dict[str, Any] | None:
    """Lock `out` and make it this stage's folder (`claim`: foreign files, --force, temp sweep, config).
    Returns the previous manifest (same config) when the folder holds a run that can be resumed, else None."""
    return claim(Path(out), stage, config, force=force, owns=owns, on_locked=on_locked)
