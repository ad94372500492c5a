"""THE way xlp writes to a path the user named (`--output`, a positional OUTPUT, an `--out` folder).

    check_output(path, inputs=[...], flag="--output")     # before any work: refuse what can never be written
    with output_stream(path, inputs=[...]) as w: ...      # a binary stream; "-" is standard output
    write_output(path, data, inputs=[...])                # the same, for a whole text or bytes
    check_out_folder(out, inputs=[...])                   # an `--out` folder (outdir.check_folder calls it)

What a target may be:
- a regular file, or a name not there yet: written to a temporary sibling and renamed over it when complete
  (nothing half-written is ever left; symbolic links are followed, the link stays);
- a FIFO or a character/block device (`/dev/null`, a terminal, a named pipe): written in place, as
  `cat > /dev/null` does; it is never replaced. A device that refuses the data (`/dev/full`) is the usual
  one-line "disk full" error (exit 1). The rename checks again, right before it happens, that what is at the
  target is still a regular file (or nothing): a device or folder put there meanwhile is never replaced;
- never a folder, a socket, or a path on /proc, /sys or another kernel file system (procfs, sysfs, cgroup,
  debugfs, ...): one line, exit 2;
- never one of the inputs (the same file, a hard link of it, or a path inside an input folder): one line, exit 2.
Standard output: a closed stdout is bad usage (exit 2); a reader that went away (EPIPE, `xlp text ... | head`)
ends the command quietly with exit 141, as Unix filters do.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import stat
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from xlp_cli.artifacts.files import file_mode
from xlp_cli.core.errors import BadInput, XlpError, write_failed

STDIO = "-"
EPIPE_EXIT = 141  # 128 + SIGPIPE: what a Unix filter's shell reports when its reader went away
# Kernel file systems: what looks like a file there is an interface of the kernel, never an output.
SPECIAL_FS = {"proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "pstore", "bpf",
              "configfs", "fusectl", "mqueue", "binfmt_misc", "efivarfs", "selinuxfs", "autofs", "rpc_pipefs",
              "nsfs", "devpts", "devtmpfs"}
FD_ALIAS = re.compile(r"^/(dev/(fd/[0-9]+|stdout|stderr)|proc/(self|thread-self|[0-9]+)/fd/[0-9]+)$")
SPECIAL_ROOTS = ("/proc", "/sys")  # (refused by path too, when /proc/self/mounts cannot be read)


# ---------------------------------------------------------------- checks
def _mounts() -> list[tuple[str, str]]:
    """(mount point, file system type), longest mount point first."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            rows = [line.split()[1:3] for line in f if len(line.split()) >= 3]
    except OSError:
        return []
    out = [(p.replace("\\040", " "), t) for p, t in rows]
    return sorted(out, key=lambda r: len(r[0]), reverse=True)


def file_system(path: str | Path) -> str:
    """The type of the file system holding `path` (or its nearest existing parent); '' when unknown."""
    p = os.path.realpath(os.path.abspath(os.fspath(path)))
    for point, kind in _mounts():
        if p == point or p.startswith(point.rstrip("/") + "/"):
            return kind
    return ""


def _special(path: str | Path) -> str | None:
    """Why `path` lies on a kernel file system, or None."""
    real = os.path.realpath(os.path.abspath(os.fspath(path)))
    kind = file_system(real)
    if kind in SPECIAL_FS:
        return f"{kind} file system"
    for root in SPECIAL_ROOTS:
        if real == root or real.startswith(root + "/"):
            return f"{root} (a kernel file system)"
    return None


def _kind(st: os.stat_result) -> str:
    m = st.st_mode
    if stat.S_ISREG(m):
        return "file"
    if stat.S_ISDIR(m):
        return "folder"
    if stat.S_ISFIFO(m) or stat.S_ISCHR(m) or stat.S_ISBLK(m):
        return "stream"
    return "socket" if stat.S_ISSOCK(m) else "other"


def _stat(path: str | Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno in (errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG):
            raise BadInput(f"cannot write here: {os.strerror(e.errno).lower()}", path=path) from None
        raise BadInput(f"cannot write here: {e.strerror or e}", path=path) from None


def _is_under(child: str, folder: str) -> bool:
    return child == folder or child.startswith(folder.rstrip("/") + "/")


def _check_inputs(path: str | Path, st: os.stat_result | None, inputs: Iterable[str | Path], flag: str,
                  folder: bool = False) -> None:
    """Refuse a target that is an input (same inode: a hard link too) or lies inside an input folder."""
    real = os.path.realpath(os.path.abspath(os.fspath(path)))
    for inp in inputs:
        if inp is None or os.fspath(inp) == STDIO:
            continue
        ist = _stat_quiet(inp)
        if ist is None:
            continue
        iread = os.path.realpath(os.path.abspath(os.fspath(inp)))
        same = st is not None and (st.st_dev, st.st_ino) == (ist.st_dev, ist.st_ino)
        if same and not stat.S_ISCHR(ist.st_mode):  # (/dev/null in and out is harmless)
            raise BadInput(f"{flag} is the input {inp}; write to another {'folder' if folder else 'file'}", path=path)
        if stat.S_ISDIR(ist.st_mode) and _is_under(real, iread):
            raise BadInput(f"{flag} is inside the input folder {inp}; write somewhere else", path=path)


def _stat_quiet(path: str | Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def check_output(path: str | Path, inputs: Iterable[str | Path] = (), flag: str = "--output") -> str:
    """Refuse (BadInput, one line) a target that can never be written; return how it will be written: 'stdout',
    'stream' (a FIFO or device, in place) or 'file' (atomically)."""
    if os.fspath(path) == STDIO:
        return "stdout"
    path = Path(path)
    st = _stat(path)
    kind = _kind(st) if st is not None else "file"
    if kind == "folder":
        raise BadInput(f"{flag} names a folder; give a file name", path=path)
    if kind in ("socket", "other"):
        raise BadInput(f"{flag} names a {kind}, not a file or a device; refused", path=path)
    if st is not None and FD_ALIAS.match(os.path.abspath(path)):
        kind = "stream"  # /dev/stdout, /dev/fd/N: the descriptor the shell opened, written in place (never renamed over)
    if kind == "file" and (why := _special(path)):
        raise BadInput(f"{flag} is on {why}, not a place for output files; refused", path=path)
    _check_inputs(path, st, inputs, flag)
    if kind == "file":
        _check_parent(path, flag)
    return kind


def _check_parent(path: Path, flag: str) -> None:
    """The folder of a new file can be made (no parent is a file) and written."""
    parent = path.absolute().parent
    while not parent.exists():
        if parent.is_symlink():
            raise BadInput(f"{flag}: {parent} is a broken symbolic link", path=path)
        parent = parent.parent
    if not parent.is_dir():
        raise BadInput(f"cannot make the output's folder: {parent} is a file", path=path)
    if not os.access(parent, os.W_OK):
        err = errno.EROFS if os.statvfs(parent).f_flag & os.ST_RDONLY else errno.EACCES
        raise BadInput(f"cannot write here: {os.strerror(err).lower()}", path=parent)


def check_out_folder(out: str | Path, inputs: Iterable[str | Path] = (), data: Iterable[str | Path] = (),
                     flag: str = "--out") -> None:
    """An `--out` folder: not on a kernel file system, not an existing non-folder, not one of the raw `inputs` nor
    inside one (a rerun would read its own output), not one of the `--data` stage folders (`--force` would clear
    the input; a stage folder nested inside another is a known layout and stays allowed)."""
    out = Path(out)
    if why := _special(out):
        raise BadInput(f"{flag} is on {why}, not a place for output; refused", path=out)
    st = _stat_quiet(out)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{flag} names a {'file' if stat.S_ISREG(st.st_mode) else 'device or special file'}, "
                       "not a folder", path=out)
    _check_inputs(out, st, inputs, flag, folder=True)
    for d in data:
        dst = _stat_quiet(d) if d is not None else None
        if st is not None and dst is not None and (st.st_dev, st.st_ino) == (dst.st_dev, dst.st_ino):
            raise BadInput(f"{flag} is the --data folder {d}; write the output to another folder", path=out)


# ---------------------------------------------------------------- writing
@contextlib.contextmanager
def output_stream(path: str | Path, inputs: Iterable[str | Path] = (), flag: str = "OUTPUT") -> Iterator[BinaryIO]:
    """A binary stream for `path` as `check_output` describes; the whole output or nothing for a regular file."""
    inputs = list(inputs)
    kind = check_output(path, inputs, flag)
    if kind == "stdout":
        with _stdout() as w:
            yield w
        return
    if kind == "stream":
        try:
            f = open(path, "wb", buffering=1 << 16)
        except OSError as e:
            raise _failed(e, path) from None
        try:
            with f:
                yield f
        except OSError as e:
            raise _failed(e, path) from None
        return
    final = Path(os.path.realpath(path))  # (a symbolic link is written through, and stays a link)
    tmp: str | None = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
        os.fchmod(fd, file_mode())  # (mkstemp makes 0600)
        with os.fdopen(fd, "wb", buffering=1 << 16) as f:
            yield f
        _replace(tmp, final, path)
        tmp = None
    except OSError as e:
        raise _failed(e, path) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_output(path: str | Path, data: bytes | str, inputs: Iterable[str | Path] = (), flag: str = "--output") -> None:
    with output_stream(path, inputs, flag) as w:
        w.write(data.encode("utf-8") if isinstance(data, str) else data)


def _replace(tmp: str, final: Path, named: str | Path) -> None:
    """Rename `tmp` over `final` unless something that is not a regular file appeared there meanwhile."""
    try:
        st = os.lstat(final)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise BadInput(f"the output became a {_kind(st)} while xlp was writing; it was left as it is", path=named)
    os.replace(tmp, final)


def _failed(e: OSError, path: str | Path) -> XlpError:
    err = write_failed(e, path)
    if err is not None:
        return err
    if e.errno == errno.EPIPE:
        return BadInput("the reader of this FIFO went away before the output was complete", path=path)
    if e.errno in (errno.EISDIR, errno.ENOTDIR, errno.ENXIO, errno.ENODEV, errno.EINVAL, errno.ENOENT, errno.ELOOP,
                   errno.ENAMETOOLONG, errno.ETXTBSY):
        return BadInput(f"cannot write here: {os.strerror(e.errno).lower()}", path=path)
    return e if isinstance(e, XlpError) else BadInput(f"cannot write here: {e.strerror or e}", path=path)


# ---------------------------------------------------------------- standard output
def stdout_problem() -> str | None:
    """Why standard output cannot be written (closed), or None."""
    closed = "standard output is closed; give an output file or redirect it"
    if sys.stdout is None:  # (Python's own stdout when fd 1 was closed at start-up)
        return closed
    try:
        os.fstat(sys.stdout.fileno())
    except io.UnsupportedOperation:  # an in-memory stream (a test runner's): writable
        return None
    except (OSError, ValueError):  # a closed descriptor or file object
        return closed
    return None


@contextlib.contextmanager
def _stdout() -> Iterator[BinaryIO]:
    if why := stdout_problem():
        raise BadInput(why)
    try:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        reader_gone()
    except OSError as e:
        err = write_failed(e, "<stdout>")
        if err is not None:
            raise err from None
        if e.errno == errno.EBADF:
            raise BadInput("standard output is closed; give an output file or redirect it") from None
        raise


@contextlib.contextmanager
def stdout_writes() -> Iterator[None]:
    """Around what a command prints on stdout (a summary, --json): a reader that went away is exit 141, quietly;
    a closed stdout is exit 2 (what was printed is flushed inside, so nothing fails later at exit)."""
    if why := stdout_problem():
        raise BadInput(why)
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        reader_gone()
    except SystemExit as e:  # rich's Console ends a broken pipe itself: SystemExit(1), stdout put on /dev/null
        if e.code == 1:
            raise SystemExit(EPIPE_EXIT) from None
        raise


def reader_gone() -> None:
    """The reader of stdout went away: end quietly with 141, as a Unix filter killed by SIGPIPE does (stdout is
    pointed at /dev/null first so that Python's final flush does not complain)."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    raise SystemExit(EPIPE_EXIT)
