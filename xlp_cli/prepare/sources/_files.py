"""Opening input files: compression by magic bytes, line iteration with UTF-8 checks, language from file names."""

from __future__ import annotations

import gzip
import lzma
import os
import re
import threading
import zipfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from xlp_cli.core.errors import BadInput
from xlp_cli.core.handoff import Blocks
from xlp_cli.prepare.records import ErrorPolicy
from xlp_cli.prepare.sources import compressed

_MAGIC = (
    (b"\x1f\x8b", "gz"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
)
# The exceptions a truncated or corrupt compressed stream raises while being read.
ARCHIVE_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error, gzip.BadGzipFile, zipfile.BadZipFile)
COMPRESSED_SUFFIXES = {".gz", ".bz2", ".xz"}


def compression(path: Path) -> str:
    """'gz', 'bz2', 'xz' or '' (plain), from the file's first bytes (not its name)."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    return ""


# ---------------------------------------------------------------- the file being read (byte-based progress)
_READING: list[Any] = [None, None]  # [path, raw file object] of the input this process reads now


def track(path: str | Path, raw: Any) -> Any:
    """Note that this process now reads `path` through the raw (still compressed) file object `raw`: its
    position is how far the reader got (`bytes_read`, the prepare progress bar's percentage)."""
    _READING[:] = [str(path), raw]
    return raw


def bytes_read(paths: list[str], start: int = 0) -> int | None:
    """Bytes of `paths` (read in order, the first from byte `start`) consumed so far by this process's reader;
    None when it is not reading one of them now."""
    path, raw = _READING
    if path is None or path not in paths:
        return None
    try:
        pos = raw.tell()
    except (OSError, ValueError):  # closed
        return None
    i = paths.index(path)
    return sum(os.path.getsize(p) for p in paths[:i]) + pos - start


def open_binary(path: Path) -> BinaryIO:
    """A buffered binary stream of the decompressed content of `path` (its raw position tracked: `track`),
    bounded and streamed (compressed.py: --max-expansion, --max-member-bytes, trailing garbage)."""
    try:
        kind = compression(path)
        raw = track(path, open(path, "rb", buffering=1 << 16))
        return compressed.decompressed(raw, kind, str(path)) if kind else raw
    except OSError as e:
        raise BadInput(f"cannot open: {e.strerror or e}", path=path) from None


class ReadAhead:
    """`f.read1` run in a thread of its own, up to `depth` blocks ahead of the reader: the decompression of a
    compressed input (libbz2, zlib and liblzma release the GIL) overlaps the parsing of the blocks before it.
    The same bytes in the same order; an exception of `f` is raised at the place of the block it cut short.
    `close()` stops the thread and closes `f`. Used by `xlp prepare --workers N` (N > 1) for Wikipedia dumps."""

    BLOCK = 1 << 16

    def __init__(self, f: Any, depth: int = 16):
        self.f = f
        self.blocks = Blocks(depth)
        self.thread = threading.Thread(target=self._fill, name="xlp-read-ahead", daemon=True)
        self.thread.start()

    def _fill(self) -> None:
        try:
            while not self.blocks.stopping.is_set():
                data = self.f.read1(self.BLOCK)
                if not self.blocks.put(data) or not data:
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the reader, raised there
            self.blocks.put(b"", e)

    def read1(self, n: int = -1) -> bytes:
        """The next block (of up to 64 KiB, whatever `n`), b"" at the end."""
        return self.blocks.take()

    read = read1

    def close(self) -> None:
        self.blocks.stop()
        self.thread.join()
        self.f.close()


def archive_problem(e: BaseException) -> str:
    """A short description of a decompression failure."""
    if isinstance(e, EOFError):
        return "truncated compressed file (unexpected end of stream)"
    if isinstance(e, compressed.TrailingGarbage):
        return f"corrupt compressed file ({e})"
    return f"corrupt compressed file ({type(e).__name__}: {e})"


# Archives and binary formats a text input may truly be (magic bytes at an offset of the file's first bytes).
_ARCHIVES = ((0, b"PK\x03\x04", "a zip archive"), (257, b"ustar", "a tar archive"),
             (0, b"7z\xbc\xaf\x27\x1c", "a 7z archive"), (0, b"Rar!\x1a\x07", "a RAR archive"),
             (0, b"\x28\xb5\x2f\xfd", "a zstd-compressed file"), (0, b"%PDF-", "a PDF document"),
             (0, b"PAR1", "a Parquet file"), (0, b"\x7fELF", "an executable"))
NUL_IN_LINE = "NUL byte inside the line: a binary file, not UTF-8 text"


def archive_problem_of(head: bytes) -> str | None:
    """Why a file starting with `head` (its first line, or first 512 bytes) is an archive or binary format
    rather than text, or None."""
    for at, magic, what in _ARCHIVES:
        if head[at:at + len(magic)] == magic:
            hint = "extract it first" if "archive" in what else "give the text it holds"
            return f"{what}, not text: {hint} (xlp reads plain, .gz, .bz2 and .xz text)"
    return None


def utf16_problem(first_line: bytes) -> str | None:
    """Why a file whose first line is `first_line` is UTF-16 rather than UTF-8 text, or None. UTF-16 of Latin,
    Cyrillic, Greek... text is valid UTF-8 byte by byte, with a NUL beside every character: read as UTF-8 and
    cleaned it would become `w e a r e`, so it is refused. Real UTF-8 text has no NUL bytes. An archive (a tar
    file's NUL-padded header looks like UTF-16) is named as such first."""
    if problem := archive_problem_of(first_line):
        return problem
    if first_line.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text (byte order mark); convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)"
    if len(first_line) >= 4 and first_line.count(0) * 4 >= len(first_line):
        return ("NUL bytes in every other position: UTF-16 text without a byte order mark, not UTF-8; convert it "
                "(e.g. iconv -f UTF-16LE -t UTF-8)")
    return None


MAX_LINE_BYTES = 16 << 20  # a longer "line" (a binary file, a bomb of one line) is a bad record, never held whole


def bounded_lines(f: BinaryIO) -> Iterator[bytes | None]:
    """The lines of `f` with their line breaks; None for a line longer than MAX_LINE_BYTES (read past in
    pieces, never held whole)."""
    while raw := f.readline(MAX_LINE_BYTES + 1):
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := f.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield None
            continue
        yield raw


LONG_LINE = f"line longer than {MAX_LINE_BYTES >> 20} MiB: not a text line (a binary file?)"


def iter_lines(path: Path, errors: ErrorPolicy) -> Iterator[tuple[int, str]]:
    """(line number, text without the line break) for each line that decodes as UTF-8.

    Invalid UTF-8 is a record-level problem (errors.bad, skippable); a truncated or corrupt archive
    keeps the lines read before the damage and then reports it (errors.bad, skippable).
    """
    n = 0
    with open_binary(path) as f:
        try:
            for n, raw in enumerate(bounded_lines(f), 1):
                if raw is None:
                    errors.bad(LONG_LINE, path=path, position=n)
                    continue
                if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                if n == 1 and (problem := utf16_problem(raw)):
                    errors.bad(problem, path=path, position=1)  # (skipped: the whole file)
                    return
                if b"\x00" in raw:
                    errors.bad(NUL_IN_LINE, path=path, position=n)
                    continue
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    errors.bad(f"invalid UTF-8 at byte {e.start} of the line", path=path, position=n)
                    continue
                yield n, line.rstrip("\r\n")
        except ARCHIVE_ERRORS as e:
            errors.bad(archive_problem(e) + f" after line {n}", path=path, position=n + 1)


_LANG_PART = re.compile(r"^[a-z]{2,3}(?:[_-][A-Za-z]{2,4})?$")
NOT_LANGS = {"txt", "gz", "bz2", "xz", "xml", "tsv", "raw", "tok", "zip", "tmx", "csv", "dev", "val", "tst"}


def lang_from_name(path: Path, langs: list[str]) -> str | None:
    """The language a file name declares in a dot-separated part: `train.de.gz` -> de, `x.en-sw.sw` -> sw, and
    (Common Voice's naming) a first part: `en.sentence-collector.txt.gz` -> en, `zh-CN.wiki.txt.gz` -> zh.

    With `langs`, only those count; the last matching part wins, the first part last. Without, any 2-3 letter
    part that is not a known extension counts.
    """
    parts = path.name.split(".")
    first = parts[0].split("-")[0] if len(parts) > 1 else ""
    for part in [*reversed(parts[1:]), first]:
        if langs:
            if part in langs:
                return part
        elif part and _LANG_PART.match(part) and part.lower() not in NOT_LANGS:
            return part
    return None


class TolerantStream:
    """A read-only view of a decompressing stream that ends quietly where the data is damaged.

    `read(n)` makes at most one underlying read (`read1`), so every byte decoded before the damage
    comes out; then it returns b"" and keeps the exception in `.error` for the caller to report.
    `eof` tells whether the stream ended (cleanly or not); `bytes` counts what was delivered.
    """

    def __init__(self, f: BinaryIO):
        self.f = f
        self.error: BaseException | None = None
        self.eof = False
        self.bytes = 0

    def read(self, n: int = -1) -> bytes:
        if self.eof:
            return b""
        try:
            data = self.f.read1(n if n and n > 0 else 1 << 16)
        except ARCHIVE_ERRORS as e:
            self.error = e
            data = b""
        if not data:
            self.eof = True
        self.bytes += len(data)
        return data

    def close(self) -> None:
        self.f.close()

    def __enter__(self) -> "TolerantStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def is_documentation(name: str) -> bool:
    """README, LICENSE, INFO, SOURCE, COPYING and *.md/*.html files that corpus folders and releases carry."""
    stem = name.split(".")[0].upper()
    return stem in ("README", "LICENSE", "INFO", "SOURCE", "COPYING") or name.lower().endswith((".md", ".html"))


def data_files(inputs: list[Path]) -> list[Path]:
    """The inputs without documentation files (see `is_documentation`)."""
    return [p for p in inputs if not is_documentation(p.name)]
