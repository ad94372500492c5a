"""The native bzip2 block decoder (text/csrc/bz2decode.cpp, `bz2_decode`) against libbz2 (Python's bz2 module),
which stays the authority: on every block it decodes, the native decoder gives libbz2's bytes, and where libbz2
fails (damage) or the block is a kind it leaves to libbz2, it gives None."""

from __future__ import annotations

import bz2
import random

import pytest
from sources_helpers import shared_dumps

from xlp_cli.text.native import module

NATIVE = module()
NO_LIMIT = 1 << 40


def _blocks(data: bytes) -> tuple[int, list[tuple[int, int]]]:
    """(level, [(start bit, end bit)] of each block) of a one-stream .bz2."""
    found = NATIVE.bz2_magics(data, 32, 1 << 20)
    assert found and found[-1][1] == 2
    return data[3] - 48, [(found[i][0], found[i + 1][0]) for i in range(len(found) - 1)]


def _libbz2(data: bytes, start: int, end: int, level: int) -> bytes | None:
    """libbz2's bytes for the block (a one-block stream, bzip2recover's method), None where it fails."""
    dec = bz2.BZ2Decompressor()
    try:
        out = dec.decompress(NATIVE.bz2_block(data, start, end, level))
    except (OSError, ValueError):
        return None
    return out if dec.eof and not dec.unused_data else None


def _same_as_libbz2(data: bytes) -> int:
    level, blocks = _blocks(data)
    decoded = b"".join(NATIVE.bz2_decode(data, a, b, level, NO_LIMIT) for a, b in blocks)
    assert decoded == bz2.decompress(data)
    return len(blocks)


def _text(n_lines: int, seed: int) -> bytes:
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "\u03b4\u03ad\u03bb\u03c4\u03b1", "ti\u1ebfng", "e", "[[link]]", "{{tpl|x}}"]
    return "\n".join(f"{i} " + " ".join(rng.choice(words) for _ in range(rng.randint(1, 25)))
                     for i in range(n_lines)).encode("utf-8")


@pytest.mark.parametrize("level", [1, 5, 9])
def test_blocks_of_text_decode_to_libbz2s_bytes(level):
    assert _same_as_libbz2(bz2.compress(_text(40000, level), level)) >= (2 if level < 9 else 1)


@pytest.mark.parametrize("name,data", [
    ("one byte", b"x"),
    ("every byte value", bytes(range(256)) * 40),
    ("random bytes (258 symbols, long codes)", random.Random(1).randbytes(250_000)),
    ("runs for the run-length step (4 equal bytes and a count)", b"".join(bytes([i % 7]) * (i % 300) for i in range(3000))),
    ("one long run (RUNA/RUNB up to 2^20)", b"z" * 2_000_000 + b"end"),
    ("skewed symbols (20-bit codes)", bytes(random.Random(2).choices(range(256), weights=[2.0 ** -(i / 12) for i in range(256)], k=400_000))),
])
def test_edge_blocks_decode_to_libbz2s_bytes(name, data):
    for level in (1, 9):
        _same_as_libbz2(bz2.compress(data, level))


@pytest.mark.integration
def test_the_shared_dumps_decode_natively_block_for_block(shared_data):
    """Every block of the shared .bz2 dumps (and of the first 4 MB of the xz ones, as bzip2 -9), natively."""
    n = 0
    for path, xml in shared_dumps(shared_data):
        data = path.read_bytes() if path.suffix == ".bz2" else bz2.compress(xml[: 4 << 20], 9)
        n += _same_as_libbz2(data)
    assert n >= 12


def test_damaged_blocks_give_none_or_libbz2s_bytes():
    """Bits flipped and bytes replaced at random in a block: where libbz2 fails, None; where libbz2 still
    decodes it (a flip that leaves a valid block), the same bytes. Never bytes libbz2 would not give."""
    data = bz2.compress(_text(800, 7), 1)
    level, [(start, end)] = _blocks(data)
    rng = random.Random(11)
    failed = 0
    for trial in range(400):
        damaged = bytearray(data)
        for _ in range(1 + trial % 3):
            bit = rng.randrange(start + 80, end)  # after the magic and the CRC (the bits the finder checks)
            damaged[bit // 8] ^= 0x80 >> (bit % 8)
        damaged = bytes(damaged)
        want = _libbz2(damaged, start, end, level)
        got = NATIVE.bz2_decode(damaged, start, end, level, NO_LIMIT)
        assert got == want, (trial, None if got is None else len(got), None if want is None else len(want))
        failed += want is None
    assert failed > 350


def test_none_where_the_block_is_not_what_the_caller_says():
    data = bz2.compress(_text(800, 3), 1)
    level, [(start, end)] = _blocks(data)
    good = NATIVE.bz2_decode(data, start, end, level, NO_LIMIT)
    assert good == bz2.decompress(data)
    assert NATIVE.bz2_decode(data, start, end + 1, level, NO_LIMIT) is None  # the bits end elsewhere
    assert NATIVE.bz2_decode(data, start + 8, end, level, NO_LIMIT) is None  # no magic there
    crc = bytearray(data)
    crc[(start + 48) // 8 + 1] ^= 1  # the header's CRC
    assert NATIVE.bz2_decode(bytes(crc), start, end, level, NO_LIMIT) is None
    assert NATIVE.bz2_decode(data, start, end, level, len(good)) == good  # the limit is inclusive
    assert NATIVE.bz2_decode(data, start, end, level, len(good) - 1) is None
    runs = bz2.compress(b"q" * 3_000_000, 9)  # one block: 3 MB from a few bytes, through both run-length steps
    level, [(start, end)] = _blocks(runs)
    assert NATIVE.bz2_decode(runs, start, end, level, 1 << 20) is None
    assert NATIVE.bz2_decode(runs, start, end, level, 3_000_000) == b"q" * 3_000_000


def test_randomised_and_oversized_blocks_are_left_to_libbz2():
    """A randomised block (bzip2 0.9.0's: a header bit) and a block over its level's size: None."""
    data = bz2.compress(_text(30000, 5), 2)  # a level-2 block holds up to 200,000 bytes
    level, blocks = _blocks(data)
    start, end = blocks[0]
    randomised = bytearray(data)
    randomised[(start + 80) // 8] |= 0x80 >> ((start + 80) % 8)
    assert NATIVE.bz2_decode(bytes(randomised), start, end, level, NO_LIMIT) is None
    assert NATIVE.bz2_decode(data, start, end, 1, NO_LIMIT) is None  # level 1: at most 100,000 bytes
    with pytest.raises(ValueError):
        NATIVE.bz2_decode(data, start, start + 40, level, NO_LIMIT)  # shorter than a block's header


def test_a_block_left_to_libbz2_still_reads_in_the_parallel_reader(tmp_path):
    """A flipped bit in the code lengths of symbols the block never uses: no longer a complete prefix code, so
    the native decoder leaves the block to libbz2, which decodes it (its CRC matches); the parallel reader gives
    the file's bytes, as the sequential decoder does."""
    from xlp_cli.prepare.sources import bz2_blocks

    data = bytearray(bz2.compress(b"ab" * 30000, 1))
    level, [(start, end)] = _blocks(bytes(data))
    bit = start + 157
    data[bit // 8] ^= 0x80 >> (bit % 8)
    data = bytes(data)
    assert NATIVE.bz2_decode(data, start, end, level, NO_LIMIT) is None
    assert _libbz2(data, start, end, level) == b"ab" * 30000 == bz2.decompress(data)
    assert bz2_blocks._decode(NATIVE, data, start, end, level) == b"ab" * 30000
    path = tmp_path / "ab.bz2"
    path.write_bytes(data * 3)
    f = bz2_blocks.ParallelBz2(path, threads=2)
    got = b"".join(iter(f.read1, b""))
    f.close()
    assert got == b"ab" * 90000
