"""Files written whole or not at all, and paths read from files kept inside their folder.

Atomic writes (a temporary name, renamed when complete), the one-line error for a full disk or a read-only folder,
files created with the umask's mode, sha256 of a file, `inside` (a relative path read from a manifest or recipe
never leaves its folder), and where the shared real corpora live. The lowest module of the artifact contract: it
imports only the errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

from xlp_cli.core.errors import BadInput, write_failed


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
        honour_umask(tmp_path)  # mkstemp makes 0600: shared storage needs the umask's mode
        yield tmp_path
        honour_umask(tmp_path)  # again: a writer that replaces the file (safetensors) leaves 0600
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


_umask_lock = threading.Lock()


def _umask() -> int:
    try:  # Linux: read it without changing it (no window in which another thread creates files under 022)
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new file gets under the current umask (mkstemp would make it 0600)."""
    return 0o666 & ~_umask()


def honour_umask(path: str | Path) -> None:
    os.chmod(path, file_mode())


def data_dir() -> Path:
    """Where the shared real corpora live (XLP_DATA_DIR, default ../shared/data)."""
    return Path(os.environ.get("XLP_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
