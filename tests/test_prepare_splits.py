"""Input splits: plain text by byte ranges, Wikipedia multistream dumps by bz2 streams (the fixture is built
from the shared sample at test time), one split per WET file. The records of the splits in order are the
records of the whole input, and the shards do not depend on the split size or on who read which split."""

from __future__ import annotations

import bz2
import hashlib
import json
from pathlib import Path

import pytest
from conftest import run_cli
from kill_helpers import kill_when, start_xlp
from sources_helpers import SRC_FIXTURES, read_all

from xlp_cli.prepare.records import CollectedErrors, ErrorPolicy, SourceOptions
from xlp_cli.prepare.sources import plan_splits, read_split
from xlp_cli.prepare.sources.wikipedia_multistream import index_for, stream_offsets, write_multistream
from xlp_cli.prepare.workdir import finished_chunks

EN_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def hashes(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.glob("*/*/*/part-*.parquet"))}


def manifest(out: Path) -> dict:
    m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return {k: v for k, v in m.items() if k not in ("run", "created")}  # timings and how it ran


def make_multistream(shared: Path, folder: Path, pages_per_stream: int = 10) -> tuple[Path, Path, Path]:
    """(the shared single-stream sample, the same pages as a multistream dump, its index), in Wikimedia's format."""
    src = shared / "wikipedia_dumps" / EN_DUMP
    if not src.is_file():
        pytest.skip(f"wikipedia sample not found at {src}")
    folder.mkdir(parents=True, exist_ok=True)
    dump = folder / "enwiki-20240101-pages-articles-multistream.xml.bz2"
    index = folder / "enwiki-20240101-pages-articles-multistream-index.txt.bz2"
    assert write_multistream(bz2.open(src).read(), dump, index, pages_per_stream) == 206
    return src, dump, index


def records_of_splits(source: str, inputs: list[Path], split_size: int, mode: str = "raise", **opts):
    o = SourceOptions(langs=opts.pop("langs", []), **opts)
    splits = plan_splits(source, inputs, o, split_size)
    errors = ErrorPolicy(mode)
    return splits, [r for s in splits for r in read_split(s, o, errors)], errors


# ------------------------------------------------------------------ plain text: byte ranges
def _text_file(tmp_path: Path) -> Path:
    lines = ["\ufeffFirst line.", "", "  Second line, with spaces.  ", "Third.\r", "x" * 50, "", "Fourth line."]
    lines += [f"Line number {i}." for i in range(40)]
    p = tmp_path / "small.en.txt"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


@pytest.mark.parametrize("split_size", [1, 7, 33, 10_000])
def test_text_byte_ranges_give_the_records_of_the_whole_file(tmp_path, split_size):
    p = _text_file(tmp_path)
    whole, _ = read_all("text", [p], langs=["en"])
    splits, parts, _ = records_of_splits("text", [p], split_size, langs=["en"])
    assert len(splits) == (1 if split_size >= p.stat().st_size else -(-p.stat().st_size // split_size))
    assert [r.text for r in parts] == [r.text for r in whole] and whole[0].text == "First line."


def test_text_ranges_report_file_line_numbers_and_shards_do_not_depend_on_splits(tmp_path):
    p = _text_file(tmp_path)
    raw = p.read_bytes().replace(b"Line number 30.", b"Line \xff 30.")
    p.write_bytes(raw)
    r = run_cli("prepare", "--source", "text", "--lang", "en", p, "--out", tmp_path / "whole")
    assert r.exit_code == 2 and "small.en.txt:38: invalid UTF-8" in r.stderr, r.stderr
    r = run_cli("prepare", "--source", "text", "--lang", "en", p, "--out", tmp_path / "ranges", "--split-size", "40")
    assert r.exit_code == 2 and "small.en.txt:38: invalid UTF-8" in r.stderr, r.stderr  # same line, 1 of 23 ranges
    for name, extra in (("whole", []), ("ranges", ["--split-size", "40", "--workers", "2"])):
        r = run_cli("prepare", "--source", "text", "--lang", "en", p, "--out", tmp_path / f"skip-{name}",
                    "--on-error", "skip", "--min-tokens", "1", "--valid-fraction", "0.2", "--test-fraction", "0.2", *extra)
        assert r.exit_code == 0, r.stderr
    a, b = tmp_path / "skip-whole", tmp_path / "skip-ranges"
    assert hashes(a) == hashes(b) and hashes(a)
    assert manifest(a) == manifest(b)
    assert manifest(a)["skipped_examples"] == [f"{p}:38: invalid UTF-8 at byte 5 of the line"]
    assert json.loads((b / "manifest.json").read_text())["run"]["splits"] == -(-len(raw) // 40)


def test_a_blank_file_cut_in_ranges_is_still_an_empty_file(tmp_path):
    p = tmp_path / "blank.en.txt"
    p.write_text("\n  \n" * 30, encoding="utf-8")
    r = run_cli("prepare", "--source", "text", "--lang", "en", p, "--out", tmp_path / "o", "--split-size", "10")
    assert r.exit_code == 2 and r.stderr.strip() == f"xlp: error: {p}: empty file: no text lines", r.stderr


def test_collected_errors_keep_skips_for_the_main_process_and_raise_what_stops_the_run():
    errors = CollectedErrors("skip")
    errors.bad("one", path="f", position=3)
    errors.warn("careful")
    assert errors.take() == ([["one", "f", 3]], ["careful"]) and errors.take() == ([], [])
    assert not errors.skipped  # counted by the main process, in stream order
    with pytest.raises(Exception, match="f:4: two"):
        CollectedErrors("raise").bad("two", path="f", position=4)


# ------------------------------------------------------------------ Wikipedia multistream
@pytest.mark.integration
def test_multistream_splits_read_the_pages_of_the_single_stream_dump(shared_data, tmp_path):
    src, dump, index = make_multistream(shared_data, tmp_path / "ms")
    assert index_for(dump) == index
    offsets = stream_offsets(index)
    assert len(offsets) == 21 and bz2.decompress(dump.read_bytes()[:offsets[0]]).rstrip().endswith(b"</siteinfo>")
    whole, _ = read_all("wikipedia", [src])
    splits, parts, _ = records_of_splits("wikipedia", [tmp_path / "ms"], 60_000)  # the folder: index is no dump
    assert len(splits) > 4 and all(s.kind == "range" for s in splits)
    # 7,894 paragraphs since the native converter (issue 31) drops headings and the reference sections
    assert [(r.lang, r.text) for r in parts] == [(r.lang, r.text) for r in whole] and len(whole) == 7894
    _, one, _ = records_of_splits("wikipedia", [dump], 1 << 30)
    assert [r.text for r in one] == [r.text for r in whole]  # one split of all the streams


@pytest.mark.integration
def test_multistream_prepare_with_split_readers_equals_the_single_stream_dump(shared_data, tmp_path):
    src, dump, _ = make_multistream(shared_data, tmp_path / "ms")
    r = run_cli("prepare", "--source", "wikipedia", src, "--out", tmp_path / "single")
    assert r.exit_code == 0, r.stderr
    r = run_cli("prepare", "--source", "wikipedia", tmp_path / "ms", "--out", tmp_path / "split", "--workers", "2",
                "--split-size", "40000", "--json")
    assert r.exit_code == 0, r.stderr
    a, b = tmp_path / "single", tmp_path / "split"
    assert hashes(a) == hashes(b) and len(hashes(a)) == 3
    for key in ("counts", "dropped", "records", "skipped", "warnings", "outputs"):  # (other inputs: other config)
        assert manifest(a)[key] == manifest(b)[key], key
    assert json.loads((b / "manifest.json").read_text())["run"]["splits"] >= 4  # >= 2 x workers: split readers


@pytest.mark.integration
def test_a_bad_multistream_index_is_one_line_bad_input(shared_data, tmp_path):
    _, dump, index = make_multistream(shared_data, tmp_path / "ms")
    index.write_bytes(bz2.compress(b"12:34:Title\nnot an index line\n"))
    r = run_cli("prepare", "--source", "wikipedia", dump, "--out", tmp_path / "o")
    assert r.exit_code == 2 and r.stderr.startswith(f"xlp: error: {index}:2: not a multistream index line"), r.stderr
    index.write_bytes(bz2.compress(b"999999999:1:Far\n"))
    r = run_cli("prepare", "--source", "wikipedia", dump, "--out", tmp_path / "o2")
    assert r.exit_code == 2 and "do not fit the dump" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_commoncrawl_is_one_split_per_file_and_gettext_one_stream():
    wets = sorted((SRC_FIXTURES).glob("*.wet"))
    assert wets
    splits = plan_splits("commoncrawl", wets, SourceOptions(langs=[]), 1)
    assert [s.kind for s in splits] == ["file"] * len(wets) and [s.path for s in splits] == [str(p) for p in wets]
    assert [s.kind for s in plan_splits("gettext", [], SourceOptions(langs=[]), 1)] == ["stream"]
    capped = plan_splits("commoncrawl", wets, SourceOptions(langs=[], max_records=5), 1)
    assert [s.kind for s in capped] == ["stream"]  # --max-records counts across files: one reader


def test_numbered_multistream_files_find_their_own_index(tmp_path):
    """The big wikis come as several pairs per language; each dump pairs with its own index."""
    names = ["enwiki-20240601-pages-articles-multistream1.xml-p1p41242.bz2",
             "enwiki-20240601-pages-articles-multistream-index1.txt-p1p41242.bz2",
             "enwiki-20240601-pages-articles-multistream2.xml-p41243p151573.bz2",
             "enwiki-20240601-pages-articles-multistream-index2.txt-p41243p151573.bz2",
             "enwiki-20240601-pages-articles-multistream3.xml-p151574p311329.bz2"]  # (its index is missing)
    for n in names:
        (tmp_path / n).write_bytes(b"")
    found = {n: index_for(tmp_path / n) for n in names if "index" not in n}
    assert found == {names[0]: tmp_path / names[1], names[2]: tmp_path / names[3], names[4]: None}


def test_engine_flags_are_checked_before_any_work(tmp_path):
    p = tmp_path / "a.en.txt"
    p.write_text("Hello world.\n", encoding="utf-8")
    r = run_cli("prepare", "--source", "text", "--lang", "en", p, "--out", tmp_path / "o", "--ray-address", "h:1")
    assert r.exit_code == 2 and r.stderr.strip() == "xlp: error: --ray-address needs --engine ray", r.stderr
    r = run_cli("prepare", "--source", "text", "--lang", "en", p, "--out", tmp_path / "o", "--split-size", "0")
    assert r.exit_code == 2 and "--split-size" in r.stderr, r.stderr
    r = run_cli("prepare", "--source", "text", "--lang", "en", p, "--out", tmp_path / "o", "--engine", "spark")
    assert r.exit_code == 2 and "spark" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.integration
def test_killed_split_readers_resume_to_the_same_output(shared_data, tmp_path):
    """--workers 2 over >= 4 splits: each worker reads whole splits; killed mid-way, a rerun keeps the finished
    chunks of every split (partly read ones included) and ends with the shards of the single-stream dump."""
    src, _, _ = make_multistream(shared_data, tmp_path / "ms")
    assert run_cli("prepare", "--source", "wikipedia", src, "--out", tmp_path / "ref").exit_code == 0
    args = ["prepare", "--source", "wikipedia", str(tmp_path / "ms"), "--split-size", "30000", "--chunk-size", "100",
            "--out", str(tmp_path / "killed")]
    work = tmp_path / "killed" / ".work"
    proc = start_xlp(*args, "--workers", "2")
    kill_when(proc, lambda: len({p.name.split("-")[1] for p in work.glob("chunk-*.parquet")}) >= 3)  # 3 splits
    kept = finished_chunks(work, len(json.loads((work / "state.json").read_text())["splits"]))
    assert any(metas and not metas[-1].get("tail") for metas in kept)  # a split read only in part
    r = run_cli(*args, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "resumed and finished"
    assert hashes(tmp_path / "killed") == hashes(tmp_path / "ref")
    for key in ("counts", "dropped", "records", "skipped", "warnings"):
        assert manifest(tmp_path / "killed")[key] == manifest(tmp_path / "ref")[key], key
