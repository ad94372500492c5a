"""A local .bz2 file decompressed a block at a time by several threads, ahead of its reader.

    f = ParallelBz2(path, threads=2)      # read1() / read() -> the next decompressed bytes, b"" at the end; close()

bzip2 compresses blocks of up to 900 kB independently; libbz2 decodes them one after the other. Here a thread
finds the blocks (native `bz2_magics`: their 48-bit magic at any bit offset) and has `threads` threads decode
them without the GIL, handing the results over in order: the native decoder (`bz2_decode`, text/csrc/
bz2decode.cpp, ~2.4x libbz2), or where it declines a block (damage, a kind it leaves to libbz2), libbz2 on the
block made a one-block stream (`bz2_block`, bzip2recover's method: libbz2 checks its CRC and says what is
wrong). It checks what the sequential decoder checks around the blocks: the header of every stream, the combined
CRC at each stream's end, the limits of sources/compressed.py (--max-expansion, --max-member-bytes).

Anything else (a damaged or truncated block, a stream that ends early, zero padding or other bytes after the last
stream, a limit reached, a block magic that is not one) hands over to the sequential decoder of
sources/compressed.py, which decodes the file again from its start, skips what was already handed over (bytes
that decoded and passed their CRC, so the same bytes) and goes on: the reader gets the very bytes and the very
error, at the same byte, that the sequential decoder gives. `xlp prepare --workers N` (N > 1) reads a Wikipedia
dump that is one .bz2 file this way (the decompression was the reading thread's bottleneck). The 48-bit magic
can also occur by chance inside a block's data (about once per 800 dumps of enwiki's 22 GB): that block then
fails to decode, and the sequential decoder takes over there too (correct, only slower from that point).
"""

from __future__ import annotations

import bz2
import collections
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from xlp_cli.core.errors import BadInput
from xlp_cli.core.handoff import Blocks
from xlp_cli.prepare.sources import compressed
from xlp_cli.prepare.sources._files import track
from xlp_cli.text.native import module

READ = 1 << 20  # compressed bytes read at a time
BLOCK, END = 1, 2  # the kinds of bz2_magics
# The most bytes a block may decode to here: a 900 kB block of text gives about as much, while bzip2's run-length
# step lets one give ~46 MB (a bomb's); such a block sends the file to the sequential decoder (64 KiB at a time), so
# the blocks held here (in flight, ready, queued: a few per thread) stay a few MB each.
BLOCK_LIMIT = 4 << 20


class _Sequential(Exception):
    """The parallel decoder stops: the sequential one takes over after the bytes handed over so far."""


def _decode(native: Any, data: bytes, start: int, end: int, level: int) -> bytes:
    """The bytes of the block at bits [start, end) of `data`, whose CRC matched; ValueError if it is damaged or
    decodes to more than BLOCK_LIMIT bytes. The native decoder (bz2decode.cpp) decodes it; where it does not
    (damage, or a kind of block it leaves to libbz2), libbz2 decodes the block as a one-block stream and decides."""
    out = native.bz2_decode(data, start, end, level, BLOCK_LIMIT)
    if out is not None:
        return out
    dec = bz2.BZ2Decompressor()
    out = dec.decompress(native.bz2_block(data, start, end, level), BLOCK_LIMIT)
    if not dec.eof or dec.unused_data:
        raise ValueError("not one whole bzip2 stream of at most BLOCK_LIMIT bytes")
    return out


class ParallelBz2:
    BLOCK_OUT = 1 << 16  # the sequential decoder's blocks, after a hand-over

    def __init__(self, path: str | Path, threads: int = 2, ahead: int = 2):
        self.path, self.threads, self.ahead = Path(path), max(1, threads), max(1, ahead) * max(1, threads)
        try:
            self.raw = track(self.path, open(self.path, "rb"))  # (its position: the progress bar's)
        except OSError as e:
            raise BadInput(f"cannot open: {e.strerror or e}", path=path) from None
        self.blocks = Blocks(self.ahead)
        self.stopping = self.blocks.stopping
        self.native = module()
        self.thread = threading.Thread(target=self._fill, name="xlp-bz2", daemon=True)
        self.thread.start()

    # ---------------------------------------------------------------- the reader's side
    def read1(self, n: int = -1) -> bytes:
        """The next decompressed bytes (a block, at most BLOCK_LIMIT; 64 KiB at a time after a hand-over to the
        sequential decoder), b"" at the end."""
        return self.blocks.take()

    read = read1

    def close(self) -> None:
        self.blocks.stop()  # (the filler sees it between blocks, and within 0.1 s when the queue is full)
        self.thread.join()
        self.raw.close()

    # ---------------------------------------------------------------- the filler thread
    def _put(self, data: bytes, error: BaseException | None = None) -> bool:
        return self.blocks.put(data, error)

    def _fill(self) -> None:
        self.handed = 0  # decompressed bytes handed over
        try:
            try:
                self._parallel()
                self._put(b"")
                return
            except _Sequential:
                pass
            self._sequential(self.handed)
        except BaseException as e:  # noqa: BLE001 - handed to the reader, raised there
            self._put(b"", e)

    def _parallel(self) -> None:
        """Decode the file's blocks on the threads and hand them over in order; _Sequential where it stops.

        A decoded block is handed over once at least OUT (64 KiB) decoded bytes follow it: the sequential decoder
        makes its bytes OUT at a time and loses the piece it was making when it meets damage (and it hands over
        the start of a block whose CRC fails), so what is handed over here is what it hands over too, and the
        rest is left to it."""
        name = str(self.path)
        decoded = 0
        inflight: collections.deque[tuple[Future, int]] = collections.deque()  # (decoding block, its end in the file)
        ready: collections.deque[bytes] = collections.deque()  # decoded blocks not handed over yet, in order
        held = 0  # their bytes
        f = self.raw
        with ThreadPoolExecutor(self.threads, thread_name_prefix="xlp-bz2") as pool:
            buf, base, eof = b"", 0, False  # buf: the file's bytes [base, base + len(buf))

            def more() -> None:
                nonlocal buf, eof
                data = f.read(READ)
                eof = not data
                buf += data

            def settle(keep: int, final: bool = False) -> None:
                """Wait for the decoding blocks in order until at most `keep` are in flight; hand over the
                decoded ones that are safe to (all of them when `final`)."""
                nonlocal decoded, held
                while len(inflight) > keep:
                    fut, end = inflight.popleft()
                    try:
                        data = fut.result()
                        compressed.check_limits(decoded + len(data), end, name)
                    except Exception:  # noqa: BLE001 - damaged, or over a limit: the sequential decoder says so
                        raise _Sequential() from None
                    decoded += len(data)
                    ready.append(data)
                    held += len(data)
                while ready and (final or held - len(ready[0]) >= compressed.OUT):
                    data = ready.popleft()
                    held -= len(data)
                    if not self._put(data):
                        raise _Sequential()  # (closed: nothing more is read)
                    self.handed += len(data)

            try:
                pos = 0  # the next stream's first byte, in buf
                while not self.stopping.is_set():
                    while len(buf) - pos < 4 and not eof:
                        more()
                    if len(buf) == pos:
                        settle(0, final=True)
                        return  # the file ends after a whole stream
                    head = buf[pos:pos + 4]
                    if len(head) < 4 or head[:3] != b"BZh" or not b"1" <= head[3:] <= b"9":
                        raise _Sequential()  # padding or garbage after a stream: as the sequential decoder says
                    level, bit, combined = head[3] - 48, (pos + 4) * 8, 0
                    while True:
                        found = self.native.bz2_magics(buf, bit, 2)
                        if not found or found[0][0] != bit:  # the block (or the end) must start right here
                            if not found and not eof:
                                more()
                                continue
                            raise _Sequential()
                        if found[0][1] == END:
                            if len(buf) * 8 < bit + 80 and not eof:
                                more()
                                continue
                            if len(buf) * 8 < bit + 80 or self.native.bz2_bits(buf, bit + 48, 32) != combined:
                                raise _Sequential()
                            pos = (bit + 80 + 7) // 8
                            break
                        if len(found) < 2:  # the block's end is further on
                            if eof:
                                raise _Sequential()  # truncated
                            more()
                            continue
                        end = found[1][0]
                        crc = self.native.bz2_bits(buf, bit + 48, 32)
                        combined = (((combined << 1) | (combined >> 31)) & 0xFFFFFFFF) ^ crc
                        inflight.append((pool.submit(_decode, self.native, buf, bit, end, level), base + (end + 7) // 8))
                        settle(self.ahead - 1)
                        cut = end // 8  # drop what is before the next block
                        buf, base, bit = buf[cut:], base + cut, end - cut * 8
                        pos = 0
                        if self.stopping.is_set():
                            raise _Sequential()
            except ValueError:  # (native: a "block" shorter than its header: a false magic)
                raise _Sequential() from None
            finally:
                for fut, _ in inflight:
                    fut.cancel()

    def _sequential(self, handed: int) -> None:
        """Decode the file from its start with sources/compressed.py, skip `handed` bytes, hand over the rest."""
        if self.stopping.is_set():
            return
        stream: Any = compressed.decompressed(track(self.path, open(self.path, "rb")), "bz2", str(self.path))
        with stream:
            while handed > 0:
                skipped = stream.read(min(handed, self.BLOCK_OUT))
                if not skipped:
                    break
                handed -= len(skipped)
            while not self.stopping.is_set():
                data = stream.read1(self.BLOCK_OUT)
                if not self._put(data) or not data:
                    return
