"""`--source wikipedia` converts wikitext in the worker processes (RawPage records): same shards as the
in-reader conversion and as before the change, whatever the workers; problems, resume and --max-records."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import REPO, run_cli
from kill_helpers import kill_group
from sources_helpers import SRC_FIXTURES, read_all

from xlp_cli.prepare import process
from xlp_cli.prepare.records import RawPage, RecordProblem
from xlp_cli.prepare.sources.wikipedia import page_lines

DUMPS = ("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2", "enwiki-table-markup.xml.bz2",
         "bgwiki-latest-pages-articles-shortened.xml.bz2")
# The shards of `xlp prepare --source wikipedia DUMPS` (default config) as written by the native wikitext converter
# (xlp_cli/text/csrc/wikitext.cpp, issue 31) converting in the reader (main process). They change only if the text
# pipeline or the converter changes on purpose; then regenerate them from a run at that commit.
BEFORE = {
    "test/bg/part-00000.parquet": "ebf27ab81357ee68ce5dac651dd38d459107877eccb1de1432019c66e964a023",
    "test/en/part-00000.parquet": "bb598603618797397e9c26e79535f750fb7e3401d38b1fa0f90adb1fc43356b2",
    "train/bg/part-00000.parquet": "7b15c68cbb6f69f130d0a22d6dc2b519cb4ae3253d397c3d17b5904c9e2cc3d3",
    "train/en/part-00000.parquet": "2f85d8516f17f71b04563f785523a612dd81778e7113442c163780a90f5b9351",
    "valid/bg/part-00000.parquet": "7aa77a1293955f0a644021158508128fa0b163b51f4679a90027da8ed356d834",
    "valid/en/part-00000.parquet": "c19ada763a8a3d9ac8f33f9cec767d13bbca0529f55af9d37d0bb01a68445fe0",
}
PIPE = {"clean": True, "normalize": True, "tokenize": "moses", "lowercase": "safe"}


def _hashes(out: Path) -> dict[str, str]:
    """sha256 of each shard as written without layout.py's key-value metadata (`xlp.*`, added by the artifact
    layout v2 after BEFORE was recorded): the same writer with the shard's row groups gives BEFORE's bytes exactly."""
    import io

    import pyarrow.parquet as pq

    from xlp_cli.artifacts.shards import PARQUET_COMPRESSION

    out_hashes = {}
    base = out / "mono" if (out / "mono").is_dir() else out  # layout 3 keeps the shards under OUT/mono/
    for p in sorted(base.glob("*/*/part-*.parquet")):
        table = pq.read_table(p)
        meta = table.schema.metadata or {}
        assert meta.get(b"xlp.stage") == b"prepare", p  # the layout's metadata is there
        buf = io.BytesIO()
        pq.write_table(table.replace_schema_metadata(None), buf, compression=PARQUET_COMPRESSION,
                       row_group_size=pq.ParquetFile(p).metadata.row_group(0).num_rows)  # the shard's own groups
        out_hashes[p.relative_to(base).as_posix()] = hashlib.sha256(buf.getvalue()).hexdigest()
    return out_hashes


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def _dumps(shared: Path) -> list[Path]:
    paths = [shared / "wikipedia_dumps" / name for name in DUMPS]
    for p in paths:
        if not p.is_file():
            pytest.skip(f"wikipedia dump not found at {p}")
    return paths


# ------------------------------------------------------------------ unit: pages in the worker
def extract_or_fail(text: str, context) -> list[str]:
    """A RawPage extractor for these tests: paragraphs are lines; a page saying FAIL is a record problem."""
    if "FAIL" in text:
        raise RecordProblem("wikitext could not be parsed (test)")
    return [line for line in text.split("\n") if line]


def _page(text: str, title: str) -> tuple:
    return ("w", "en", text, "wikipedia", "dump.xml", f"#{title}", extract_or_fail, None)


def test_pages_expand_in_order_between_other_records():
    tasks, paragraphs, problems = process.expand_pages(
        [("m", "en", "first", "text"), _page("a\nb", "A"), _page("FAIL", "B"), _page("c", "C")])
    assert tasks == [("m", "en", "first", "text"), ("m", "en", "a", "wikipedia"), ("m", "en", "b", "wikipedia"),
                     ("m", "en", "c", "wikipedia")]
    assert paragraphs == 3
    assert problems == [["wikitext could not be parsed (test)", "dump.xml", "#B"]]


def test_a_problem_page_writes_no_chunk_with_raise_and_is_counted_with_skip(tmp_path):
    chunk = [_page("Hello world.\nSecond line here.", "A"), _page("FAIL", "B")]
    process.init_worker(PIPE, 1, 0, "raise")
    meta = process.process_to_file(chunk, str(tmp_path / "c0.parquet"), 0, 2)
    assert not (tmp_path / "c0.parquet").exists() and meta["written"] is False
    assert meta["problems"] == [["wikitext could not be parsed (test)", "dump.xml", "#B"]]

    process.init_worker(PIPE, 1, 0, "skip")
    meta = process.process_to_file(chunk, str(tmp_path / "c1.parquet"), 0, 2)
    assert meta["records"] == 2 and meta["end"] == 2 and meta["problems"] and meta == process.chunk_meta(tmp_path / "c1.parquet")
    assert pq.read_table(tmp_path / "c1.parquet").column("text1").to_pylist() == ["hello world .", "second line here ."]


def test_reader_yields_raw_pages_only_when_deferred():
    tiny = SRC_FIXTURES / "wiki_tiny.xml"
    monos, _ = read_all("wikipedia", [tiny])
    pages, _ = read_all("wikipedia", [tiny], defer_pages=True)
    assert pages and all(isinstance(p, RawPage) and p.extract is page_lines for p in pages)
    assert [m for p in pages for m in p.monos()] == monos  # same records, same order, same origins
    capped, _ = read_all("wikipedia", [tiny], defer_pages=True, max_records=3)  # exact cap: counted in the reader
    assert [m.text for m in capped] == [m.text for m in monos[:3]]


# ------------------------------------------------------------------ integration: the real dumps
@pytest.mark.integration
@pytest.mark.slow
def test_real_dumps_same_shards_for_any_workers_and_as_before(shared_data, tmp_path):
    dumps = _dumps(shared_data)
    runs = {
        "w1": ["--workers", "1", "--chunk-size", "300"],
        "w2": ["--workers", "2"],
        "threads": ["--workers", "2", "--worker-mode", "threads"],  # the native converter runs without the GIL
        "in-reader": ["--workers", "2", "--max-records", str(10**9)],  # --max-records converts in the reader
    }
    for name, extra in runs.items():
        r = run_cli("prepare", "--source", "wikipedia", *dumps, "--out", tmp_path / name, *extra)
        assert r.exit_code == 0, r.stderr
    hashes = {name: _hashes(tmp_path / name) for name in runs}
    assert hashes["w1"] == BEFORE
    assert hashes["w2"] == BEFORE
    assert hashes["in-reader"] == BEFORE
    assert hashes["threads"] == BEFORE
    m1, m2, m3, m4 = (_manifest(tmp_path / name) for name in runs)
    for key in ("counts", "dropped", "records", "skipped", "warnings"):
        assert m1[key] == m2[key] == m3[key] == m4[key], key
    assert m1["records"]["read"] == 8139


@pytest.mark.integration
def test_max_records_stops_after_n_paragraphs(shared_data, tmp_path):
    dumps = _dumps(shared_data)[:1]
    r = run_cli("prepare", "--source", "wikipedia", *dumps, "--out", tmp_path / "cap", "--workers", "2",
                "--max-records", "150", "--json")
    assert r.exit_code == 0, r.stderr
    m = _manifest(tmp_path / "cap")
    assert m["records"]["read"] == 150 and 0 < m["records"]["kept"] <= 150


@pytest.mark.integration
@pytest.mark.slow
def test_killed_wikipedia_run_resumes_to_the_same_output(shared_data, tmp_path):
    dumps = _dumps(shared_data)[:1]
    args = ["prepare", "--source", "wikipedia", *map(str, dumps), "--chunk-size", "100"]
    ref = tmp_path / "ref"
    r = run_cli(*args, "--out", ref, "--workers", "2")
    assert r.exit_code == 0, r.stderr

    out = tmp_path / "killed"
    env = {**os.environ, "XLP_QUIET": "1"}
    cmd = [sys.executable, "-c", "from xlp_cli.cli.app import main; main()", *args, "--workers", "2", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 180
        while len(list((out / ".work").glob("chunk-*.parquet"))) < 8:
            assert proc.poll() is None, "the run finished before it could be killed"
            assert time.time() < deadline
            time.sleep(0.01)
    finally:
        kill_group(proc)  # the CLI and its workers, mid-run: all of them gone before the rerun
    assert not (out / "manifest.json").exists()
    ends = [process.chunk_meta(p)["end"] for p in sorted((out / ".work").glob("chunk-*.parquet"))]
    assert ends == sorted(ends) and len(set(b - a for a, b in zip([0] + ends, ends))) > 1  # pages: uneven chunks

    r = run_cli(*args, "--out", out, "--workers", "1", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "resumed and finished"
    assert _hashes(out) == _hashes(ref)
    m, mref = _manifest(out), _manifest(ref)
    for key in ("counts", "dropped", "records", "skipped", "warnings", "config_hash"):
        assert m[key] == mref[key], key


def _general(text: str, context: object) -> list[str]:
    """page_lines without its `.native` converter: process.py's general path (expand_pages + _mono_columns)."""
    return page_lines(text, context)


@pytest.mark.parametrize("limits", [(1, 0), (3, 12)], ids=["default", "short-and-long-dropped"])
def test_native_page_chunks_equal_the_general_path(limits):
    """A chunk of pages goes from wikitext to the chunk table in one native call (Pipeline.pages) with the columns,
    counts and drops of the general path; a page the native call cannot take (a str holding a lone
    surrogate) sends its chunk down the general path, which reports it."""
    from xlp_cli.prepare.sources.wikipedia_text import DEFAULT_LINK_NAMESPACES

    context = frozenset(DEFAULT_LINK_NAMESPACES)
    texts = [r.text for r in read_all("wikipedia", [SRC_FIXTURES / "wiki_tiny.xml"], defer_pages=True)[0]] + [
        "Ein [[Haus|Häuschen]] steht am See, «nicht weit» vom Dorf.\n\n\u200b\u00adx\u200b\n\nKurz.\n\n"
        "* Ein Punkt der Liste mit '''fettem''' Text und einer Zahl: 1 000,5 km…\n\n" + "Lang " * 30 + "Ende.",
        "İstanbul ΌΣΟΣ Ärger — „Zitat“ (Klammer) ; Doppel  Leerzeichen.\n\n{{Vorlage}}\n\n",
    ]
    tasks = [("w", "de", t, "wikipedia", "dewiki.xml", f"#{i}", page_lines, context) for i, t in enumerate(texts)]
    process.init_worker(PIPE, *limits, "skip")
    assert process._page_columns(tasks) is not None  # the native path is the one taken
    native_meta, native = process.process_to_table(tasks, len(tasks))
    general_meta, general = process.process_to_table([t[:6] + (_general,) + t[7:] for t in tasks], len(tasks))
    assert native_meta == general_meta and native.num_rows > 5
    assert native.equals(general) and native.schema.metadata == general.schema.metadata
    if limits != (1, 0):  # ("empty" cannot happen here: the converter keeps no line without a letter or digit)
        assert set(native_meta["dropped"]) == {"too_short", "too_long"}
    # a reference to a surrogate is U+FFFD already (the converter's); a str holding one is not valid Unicode
    surrogate = tasks + [("w", "de", "Ein Zeichen &#xD800; \ud800 im Satz.", "wikipedia", "dewiki.xml", "#s",
                          page_lines, context)]
    assert process._page_columns(surrogate) is None
    meta, table = process.process_to_table(surrogate, len(surrogate))
    assert (meta, table) == process.process_to_table([t[:6] + (_general,) + t[7:] for t in surrogate], len(surrogate))
    assert table.equals(native)
    assert len(meta["problems"]) == 1 and "could not be converted" in meta["problems"][0][0]
