"""Each source's bad input through the real `xlp prepare` CLI: one line naming file, position and problem,
exit 2, no traceback, no shard; a truncated Wikipedia dump succeeds with a manifest warning."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
import zipfile

import pytest
from conftest import run_cli
from sources_helpers import SRC_FIXTURES

F = SRC_FIXTURES


def one_line(result) -> str:
    err = result.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def no_shards(out) -> bool:
    return not list(out.rglob("*.parquet")) and not (out / "manifest.json").exists()


def _truncated_gz(tmp_path):
    data = gzip.compress("".join(f"Zeile Nummer {i}.\n" for i in range(3000)).encode())
    (tmp_path / "cut.de.gz").write_bytes(data[: len(data) // 2])
    return [tmp_path / "cut.de.gz"]


def _corrupt_mo(tmp_path):
    path = tmp_path / "de" / "LC_MESSAGES" / "x.mo"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xde\x12\x04\x95" + b"\x00" * 4 + b"\x00\x00\x00\x05" + b"\x00\x00\x10\x00" * 4)
    return [path]


def _evil_zip(tmp_path):
    with zipfile.ZipFile(tmp_path / "evil.zip", "w") as zf:
        zf.writestr("/etc/x.de-en.de", "x\n")
    return [tmp_path / "evil.zip"]


def _cut_warc(tmp_path):
    data = (F / "sample.warc.gz").read_bytes()
    (tmp_path / "cut.warc.gz").write_bytes(data[: len(data) - 300])
    return [tmp_path / "cut.warc.gz"]


CASES = {  # name: (source, inputs (or a function of tmp_path), extra args, regex the one line must match)
    "malformed-xml": ("wikipedia", [F / "wiki_malformed.xml"], [], r"wiki_malformed\.xml:\d+:\d+: malformed XML"),
    "truncated-gz": ("text", _truncated_gz, ["--lang", "de"], r"cut\.de\.gz:\d+: truncated compressed file"),
    "unequal-moses": ("opus", [F / "moses" / "unequal.de-en.de", F / "moses" / "unequal.de-en.en"], [],
                      r"unequal\.de-en\.de:3: parallel files differ in length: .*unequal\.de-en\.en ends at line 2"),
    "corrupt-mo": ("gettext", _corrupt_mo, [], r"x\.mo:byte \d+: corrupt \.mo catalog"),
    "zip-escape": ("opus", _evil_zip, [], r"evil\.zip: zip member '/etc/x\.de-en\.de' points outside"),
    "cut-warc": ("commoncrawl", _cut_warc, [], r"cut\.warc\.gz:byte \d+ \(decompressed\): .*cut inside a record"),
    "not-a-dump": ("wikipedia", [F / "tiny.tmx"], ["--lang", "de"], r"tiny\.tmx: no <page> found"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2_no_shards(tmp_path, case):
    source, inputs, extra, pattern = CASES[case]
    if callable(inputs):
        inputs = inputs(tmp_path)
    out = tmp_path / "out"
    r = run_cli("prepare", "--source", source, *inputs, *extra, "--out", out)
    assert r.exit_code == 2, r.stderr
    assert re.search(pattern, one_line(r)), r.stderr
    assert no_shards(out)


def test_skip_mode_counts_and_keeps_the_rest(tmp_path):
    out = tmp_path / "out"
    r = run_cli("prepare", "--source", "wikipedia", F / "wiki_malformed.xml", F / "wiki_tiny.xml",
                "--on-error", "skip", "--out", out, "--json")
    assert r.exit_code == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert sum(m["skipped"].values()) == 1 and any("malformed XML" in k for k in m["skipped"])
    assert sum(n for split in m["counts"].values() for n in split.values()) >= 7


def test_truncated_dump_succeeds_with_manifest_warning(tmp_path):
    raw = (F / "wiki_tiny.xml").read_bytes()
    path = tmp_path / "dewiki-cut.xml.xz"
    path.write_bytes(lzma.compress(raw[: raw.index(b"Hunde bellen")]))
    out = tmp_path / "out"
    r = run_cli("prepare", "--source", "wikipedia", path, "--out", out)
    assert r.exit_code == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert len(m["warnings"]) == 1 and "truncated dump" in m["warnings"][0] and "kept the 3 complete pages" in m["warnings"][0]
    assert list(out.rglob("part-*.parquet"))


def test_bz2_wikipedia_and_gettext_po_end_to_end(tmp_path):
    (tmp_path / "dewiki-x.xml.bz2").write_bytes(bz2.compress((F / "wiki_tiny.xml").read_bytes()))
    r = run_cli("prepare", "--source", "wikipedia", tmp_path / "dewiki-x.xml.bz2", "--out", tmp_path / "w", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["counts"]["train"].get("de", 0) >= 5
    r = run_cli("prepare", "--source", "gettext", F / "de.po", "--mono-from-parallel", "--out", tmp_path / "g", "--json")
    assert r.exit_code == 0, r.stderr
    counts = json.loads((tmp_path / "g" / "manifest.json").read_text())["counts"]
    assert sum(split.get("de-en", 0) for split in counts.values()) == 6
