"""Bounded decompression (xlp_cli/prepare/sources/compressed.py) and the broken inputs of issue 30, through the
real `xlp prepare`: trailing garbage in every format, expansion and size caps (and the flags that raise them),
encrypted and unknown-method zip members, WET Content-Length values, NUL bytes inside text lines, tar files,
corrupt .mo catalogs, and a manifest whose empty shard list hides shards."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from bpe_fixtures import make_prepared
from sources_helpers import zip_bytes

from xlp_cli.artifacts.shards import verify_shards
from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.sources import compressed

XLP = str(Path(sys.executable).with_name("xlp"))
GOOD = "".join(f"Hello world , sentence number {i} is here .\n" for i in range(300)).encode()
COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}


def xlp(*args) -> subprocess.CompletedProcess:
    return subprocess.run([XLP, *map(str, args)], capture_output=True, text=True)


def one_error(res: subprocess.CompletedProcess) -> str:
    err = res.stderr.strip()
    assert res.returncode == 2 and len(err.splitlines()) == 1 and err.startswith("xlp: error: "), (res.returncode, err)
    assert "internal error" not in err
    return err


def prepare(tmp: Path, *inputs, source: str = "text", lang: str = "en", extra: tuple = ()) -> subprocess.CompletedProcess:
    """`xlp prepare` into a fresh folder (tmp/out: the last one)."""
    runs = len(list(tmp.glob("out-*")))
    out = tmp / f"out-{runs}"
    out.mkdir()
    (tmp / "out").unlink(missing_ok=True)
    (tmp / "out").symlink_to(out)
    return xlp("prepare", "--source", source, "--lang", lang, *inputs, "--out", out, *extra)


def manifest(tmp: Path) -> dict:
    return json.loads((tmp / "out" / "manifest.json").read_text(encoding="utf-8"))


def skipped(tmp: Path) -> dict:
    return manifest(tmp)["skipped"]


# ------------------------------------------------------------------ compressed streams
@pytest.mark.parametrize("kind", list(COMPRESS))
def test_trailing_garbage_is_reported_for_every_format_and_zero_padding_is_not(tmp_path, kind):
    bad = tmp_path / f"a.en.{kind}"
    bad.write_bytes(COMPRESS[kind](GOOD) + b"not a stream at all")
    assert "trailing garbage" in one_error(prepare(tmp_path, bad))
    padded = tmp_path / f"b.en.{kind}"
    padded.write_bytes(COMPRESS[kind](GOOD[:2000]) + COMPRESS[kind](GOOD[2000:]) + b"\0" * 8)  # two streams
    res = prepare(tmp_path, padded, extra=())
    assert res.returncode == 0, res.stderr
    assert manifest(tmp_path)["counts"]["train"]["en"] > 250


def test_the_expansion_and_size_caps_refuse_and_their_flags_raise_them(tmp_path):
    big = tmp_path / "a.en.gz"
    big.write_bytes(gzip.compress(GOOD * 200))  # ~2.7 MB of text (above EXPANSION_BASE), ~100x
    assert prepare(tmp_path, big).returncode == 0
    err = one_error(prepare(tmp_path, big, extra=("--max-expansion", "1")))
    assert "--max-expansion" in err and str(big) in err
    err = one_error(prepare(tmp_path, big, extra=("--max-member-bytes", "100000")))
    assert "--max-member-bytes" in err


def test_a_bomb_is_refused_after_a_bounded_amount_of_output(tmp_path):
    """In-process: the reader stops at the limit (a few chunks past it at most), never reads the bomb whole."""
    bomb = gzip.compress(b"\0" * (64 << 20), 9)  # 64 MiB of zeros in ~64 KB
    old = (compressed.LIMITS.max_expansion, compressed.LIMITS.max_member_bytes)
    compressed.configure(4, 1 << 40)
    try:
        f = compressed.decompressed(io.BytesIO(bomb), "gz", "bomb.gz")
        with pytest.raises(compressed.TooLarge):
            while f.read(1 << 16):
                pass
        assert f.raw.out <= 4 * compressed.EXPANSION_BASE + compressed.OUT
    finally:
        compressed.configure(*old)




MOSES = {"c.en-fr.en": GOOD, "c.en-fr.fr": GOOD.replace(b"Hello", b"Bonjour")}


def test_zip_members_encrypted_unknown_or_too_large_are_refused_with_one_line(tmp_path):
    z = tmp_path / "c.zip"
    z.write_bytes(zip_bytes(MOSES, flag=0x1))
    assert "encrypted" in one_error(prepare(tmp_path, z, source="opus", lang="en,fr"))
    z.write_bytes(zip_bytes(MOSES, method=99))
    assert "compression method 99" in one_error(prepare(tmp_path, z, source="opus", lang="en,fr"))
    z.write_bytes(zip_bytes({"c.en-fr.en": b"x " * (4 << 20), "c.en-fr.fr": GOOD}))  # 8 MiB in ~8 KB
    err = one_error(prepare(tmp_path, z, source="opus", lang="en,fr", extra=("--max-expansion", "5")))
    assert "c.en-fr.en" in err and "--max-expansion" in err
    z.write_bytes(zip_bytes(MOSES))
    res = prepare(tmp_path, z, source="opus", lang="en,fr")
    assert res.returncode == 0, res.stderr


# ------------------------------------------------------------------ WET Content-Length
REC = "WARC/1.0\r\nWARC-Type: conversion\r\nWARC-Target-URI: http://x/{i}\r\nContent-Type: text/plain\r\n{cl}\r\n\r\n{b}\r\n\r\n"
BODY = "This is an English page about many things, written for the test of this reader. " * 4


def _wet(lengths: list[str]) -> bytes:
    return "".join(REC.format(i=i, cl=cl, b=BODY + str(i)) for i, cl in enumerate(lengths)).encode()


@pytest.mark.parametrize("value,says", [("-7", "negative"), ("abc", "not a number"), (None, "no Content-Length"),
                                        ("1" + "0" * 21, "absurd"), ("9" * 5000, "absurd"), (str(2**40), "absurd"),
                                        ("+12", "not a number"),
                                        ("12e3", "not a number")])
def test_wet_records_with_a_broken_content_length_are_bad_input(tmp_path, value, says):
    n = str(len((BODY + "0").encode()))
    header = "X-Other: 1" if value is None else f"Content-Length: {value}"
    wet = tmp_path / "a.wet"
    wet.write_bytes(_wet([f"Content-Length: {n}", header, f"Content-Length: {n}"]))
    assert says in one_error(prepare(tmp_path, wet, source="commoncrawl"))


def test_a_broken_content_length_is_a_counted_skip_with_on_error_skip(tmp_path):
    n = str(len((BODY + "0").encode()))
    wet = tmp_path / "a.wet"
    wet.write_bytes(_wet([f"Content-Length: {n}", "Content-Length: -1", f"Content-Length: {n}"]))
    res = prepare(tmp_path, wet, source="commoncrawl", extra=("--on-error", "skip"))
    assert res.returncode == 0, res.stderr
    assert sum(skipped(tmp_path).values()) == 1
    counts = manifest(tmp_path)["counts"]
    assert sum(n for split in counts.values() for n in split.values()) == 2  # the records around the bad one


# ------------------------------------------------------------------ text: NUL bytes, archives
@pytest.mark.parametrize("how", ["plain", "gz", "ranges"])
def test_a_nul_byte_inside_a_line_is_bad_input_on_every_read_path(tmp_path, how):
    data = GOOD[:500] + b"a line with a \x00 inside\n" + GOOD[500:]
    line = data[:data.index(b"\x00")].count(b"\n") + 1
    p = tmp_path / ("a.en.gz" if how == "gz" else "a.en.txt")
    p.write_bytes(gzip.compress(data) if how == "gz" else data)
    extra = ("--split-size", "300") if how == "ranges" else ()
    err = one_error(prepare(tmp_path, p, extra=extra))
    assert "NUL byte" in err and f"{p}:{line}:" in err, err
    res = prepare(tmp_path, p, extra=(*extra, "--on-error", "skip"))
    assert res.returncode == 0 and sum(skipped(tmp_path).values()) == 1, res.stderr


def test_a_tar_file_is_named_an_archive_not_utf16(tmp_path):
    import tarfile

    p = tmp_path / "corpus.en.txt"
    (tmp_path / "inner.txt").write_bytes(GOOD)
    with tarfile.open(p, "w") as t:
        t.add(tmp_path / "inner.txt", arcname="inner.txt")
    err = one_error(prepare(tmp_path, p))
    assert "tar archive" in err and "UTF-16" not in err


# ------------------------------------------------------------------ gettext
def _mo(entries: dict[bytes, bytes]) -> bytes:
    """A little-endian .mo as msgfmt writes it (sorted ids, NUL-terminated strings)."""
    keys = sorted(entries)
    ids = strs = b""
    offsets = []
    for k in keys:
        offsets.append((len(ids), len(k), len(strs), len(entries[k])))
        ids += k + b"\0"
        strs += entries[k] + b"\0"
    start = 7 * 4 + 16 * len(keys)
    o = [x for io_, il, _, _ in offsets for x in (il, io_ + start)]
    t = [x for _, _, so, sl in offsets for x in (sl, so + start + len(ids))]
    return (struct.pack("<7I", 0x950412DE, 0, len(keys), 28, 28 + 8 * len(keys), 0, 0)
            + struct.pack(f"<{len(o)}I", *o) + struct.pack(f"<{len(t)}I", *t) + ids + strs)


def test_a_corrupt_mo_catalog_is_bad_input(tmp_path):
    entries = {b"": b"Content-Type: text/plain; charset=UTF-8\n", b"Open the file": b"Die Datei offnen",
               b"Save all documents": b"Alle Dokumente speichern"}
    mo = tmp_path / "loc" / "de" / "LC_MESSAGES" / "app.mo"
    mo.parent.mkdir(parents=True)
    mo.write_bytes(_mo(entries))
    res = prepare(tmp_path, mo, source="gettext", lang="de")
    assert res.returncode == 0, res.stderr
    data = bytearray(mo.read_bytes())
    struct.pack_into("<I", data, 28 + 8 + 8, struct.unpack_from("<I", data, 28 + 8 + 8)[0] + 3)  # a shifted offset
    mo.write_bytes(bytes(data))
    assert "corrupt .mo" in one_error(prepare(tmp_path, mo, source="gettext", lang="de", extra=()))
    empty = tmp_path / "loc" / "fr" / "LC_MESSAGES" / "app.mo"
    empty.parent.mkdir(parents=True)
    empty.write_bytes(struct.pack("<7I", 0x950412DE, 0, 0, 28, 28, 0, 0))
    assert "empty .mo" in one_error(prepare(tmp_path, empty, source="gettext", lang="fr", extra=()))


# ------------------------------------------------------------------ the manifest is the whole truth
def test_an_empty_or_malformed_shard_list_with_shards_present_is_a_mismatch(tmp_path):
    d = make_prepared(tmp_path / "p", {"en": ["a b c", "d e f"]})
    m = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    assert verify_shards(d, m)
    for shards in ({}, [], None, "x"):
        m["outputs"]["shards"] = shards
        with pytest.raises(BadInput):
            verify_shards(d, m)
    m["outputs"].pop("shards")
    with pytest.raises(BadInput, match="not listed"):
        verify_shards(d, m)
