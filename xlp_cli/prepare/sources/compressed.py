"""Bounded decompression: every gz, bz2, xz stream and zip member a source reads goes through here.

    f = decompressed(raw, "gz", name)           # a buffered binary stream, read as it is decompressed
    check_member(info, name)                    # a zip member: encrypted, unknown method or too large -> refused
    f = member_stream(zf, info, name)           # a zip member (a .gz inside it decompressed too), streamed

The limits (`--max-expansion`, `--max-member-bytes` of `xlp prepare`, set once per process by `configure`):
- expansion: the decompressed bytes of one stream never exceed `max_expansion` times the compressed bytes
  read so far (counted from at least EXPANSION_BASE, so small files are never refused for their ratio): a
  zip or gzip bomb is refused after a few MiB, long before it fills the disk or the memory;
- size: one decompressed stream (a compressed file, a zip member) holds at most `max_member_bytes`;
- both are checked from a zip's central directory before a member is opened, and again while it is read;
- trailing bytes after the last compressed stream are reported for every format (Python's bz2 and lzma
  modules drop them silently); zero padding is allowed;
- decompression is streamed: at most CHUNK compressed bytes and OUT decompressed bytes are held at a time.
A stream over a limit is bad input naming the file and the flag that raises the limit (exit 2).
"""

from __future__ import annotations

import bz2
import dataclasses
import io
import lzma
import zipfile
import zlib
from typing import Any, BinaryIO

from xlp_cli.core.errors import BadInput

CHUNK = 1 << 16  # compressed bytes read at a time
OUT = 1 << 16  # decompressed bytes made at a time
EXPANSION_BASE = 1 << 20  # the ratio is counted from at least this many compressed bytes
MAGIC = {"gz": b"\x1f\x8b", "bz2": b"BZh", "xz": b"\xfd7zXZ\x00"}
ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate", zipfile.ZIP_BZIP2: "bzip2",
               zipfile.ZIP_LZMA: "lzma"}


@dataclasses.dataclass
class Limits:
    max_expansion: float = 200.0
    max_member_bytes: int = 64 << 30


LIMITS = Limits()


def configure(max_expansion: float | None = None, max_member_bytes: int | None = None) -> None:
    """Set this process's limits (prepare sets them from its config before any input is opened)."""
    if max_expansion is not None:
        LIMITS.max_expansion = float(max_expansion)
    if max_member_bytes is not None:
        LIMITS.max_member_bytes = int(max_member_bytes)


class TrailingGarbage(OSError):
    """Bytes after the last compressed stream that are not another stream (reported like a corrupt file)."""


class TooLarge(BadInput):
    """A decompressed stream over `--max-expansion` or `--max-member-bytes`."""


def check_limits(out: int, compressed: int, name: str) -> None:
    """TooLarge when `out` decompressed bytes from `compressed` bytes break --max-member-bytes or --max-expansion."""
    if out > LIMITS.max_member_bytes:
        raise TooLarge(f"decompresses to more than {LIMITS.max_member_bytes:,} bytes (--max-member-bytes); refused "
                       "as a possible decompression bomb (raise --max-member-bytes if the file is genuine)", path=name)
    if out > LIMITS.max_expansion * max(compressed, EXPANSION_BASE):
        raise TooLarge(f"decompresses more than {LIMITS.max_expansion:g} times its compressed size "
                       "(--max-expansion); refused as a possible decompression bomb (raise --max-expansion if "
                       "the file is genuine)", path=name)


class _Decompressing(io.RawIOBase):
    """The decompressed bytes of `raw` (one or more concatenated gz, bz2 or xz streams), bounded and streamed.
    A truncated stream raises EOFError, a corrupt one the format's error, trailing bytes TrailingGarbage."""

    def __init__(self, raw: Any, kind: str, name: str, close_raw: bool = True):
        self.raw, self.kind, self.name, self.close_raw = raw, kind, name, close_raw
        self.dec = self._new()
        self.inp = self.out = 0
        self.pending = b""
        self.input = b""  # compressed bytes read but not yet given to the decompressor (zlib)
        self.done = False

    def _new(self) -> Any:
        if self.kind == "gz":
            return zlib.decompressobj(31)
        if self.kind == "bz2":
            return bz2.BZ2Decompressor()
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ)

    def readable(self) -> bool:
        return True

    def _read_raw(self) -> bytes:
        data = self.raw.read(CHUNK)
        self.inp += len(data)
        return data

    def readinto(self, b: Any) -> int:
        while not self.pending and not self.done:
            self.pending = self._step()
            self.out += len(self.pending)
            check_limits(self.out, self.inp, self.name)
        n = min(len(b), len(self.pending))
        b[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n

    def _step(self) -> bytes:
        """The next decompressed bytes (possibly b"" while input is being consumed)."""
        dec = self.dec
        if dec.eof:
            rest = dec.unused_data + self.input
            self.input = b""
            if not rest:
                rest = self._read_raw()
            if not rest:
                self.done = True
                return b""
            if not rest.startswith(MAGIC[self.kind][: len(rest)]) or not rest.strip(b"\0"):
                self._trailing(rest)
                return b""
            self.dec = dec = self._new()
            self.input = rest
        if self.kind == "gz":
            data = dec.unconsumed_tail or self.input or self._read_raw()
            self.input = b""
            if not data:
                raise EOFError("compressed file ended before the end-of-stream marker was reached")
            return dec.decompress(data, OUT)
        if dec.needs_input:
            data, self.input = self.input or self._read_raw(), b""
            if not data:
                raise EOFError("compressed file ended before the end-of-stream marker was reached")
            return dec.decompress(data, OUT)
        return dec.decompress(b"", OUT)

    def _trailing(self, rest: bytes) -> None:
        """After the last stream: zero padding ends the file; anything else is trailing garbage."""
        at = self.inp - len(rest)
        while rest:
            if rest.strip(b"\0"):
                raise TrailingGarbage(f"trailing garbage after the compressed data (at byte {at:,} of the file)")
            rest = self._read_raw()
        self.done = True

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.close_raw and self.raw is not None:
                self.raw.close()


def decompressed(raw: Any, kind: str, name: str, close_raw: bool = True) -> BinaryIO:
    """A buffered binary stream of the decompressed content of `raw` ('gz', 'bz2' or 'xz'), bounded."""
    return io.BufferedReader(_Decompressing(raw, kind, name, close_raw), CHUNK)  # type: ignore[return-value]


# ---------------------------------------------------------------- zip members
def member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a zip member cannot be read (encrypted, an unknown method, over the limits), or None."""
    if info.flag_bits & 0x1:
        return f"zip member {info.filename!r} is encrypted; xlp reads no encrypted archives (decrypt it first)"
    if info.compress_type not in ZIP_METHODS:
        return (f"zip member {info.filename!r} uses compression method {info.compress_type}, which xlp cannot "
                f"read (only {', '.join(ZIP_METHODS.values())})")
    try:
        check_limits(info.file_size, info.compress_size, "")
    except TooLarge as e:
        return f"zip member {info.filename!r} {e.message}"
    return None


class _Counted(io.RawIOBase):
    """A zip member as zipfile streams it, its decompressed bytes counted against the limits (zipfile itself
    stops at the size the central directory declares, which `member_problem` checked)."""

    def __init__(self, f: Any, info: zipfile.ZipInfo, name: str):
        self.f, self.info, self.name, self.out = f, info, name, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.f.read(min(len(b), OUT))
        self.out += len(data)
        check_limits(self.out, max(self.info.compress_size, 1), self.name)
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.f.close()


def member_stream(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> BinaryIO:
    """A zip member's bytes, streamed and bounded; a gzip member is decompressed too (bounded again)."""
    if problem := member_problem(info):
        raise BadInput(problem, path=name)
    f = io.BufferedReader(_Counted(zf.open(info), info, name), CHUNK)
    if f.peek(2)[:2] == MAGIC["gz"]:
        return decompressed(f, "gz", name)
    return f  # type: ignore[return-value]
