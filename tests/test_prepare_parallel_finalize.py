"""Finalizing in parallel (issue 27): `xlp prepare --workers N` de-duplicates over N hash partitions and writes
the shards in N threads, and must write the bytes of the one in-order finalizer (`--workers 1`) on real
corpora: Common Voice with caps, Multi30k pairs with `--split-by sentences` and caps, Wikipedia, `--max-records`.
A run killed while its shards are being written resumes to the same output, and what it left is complete."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import run_cli
from kill_helpers import kill_when, start_xlp
from test_prepare_splits import hashes, make_multistream, manifest

pytestmark = pytest.mark.integration


def first_lines(src: Path, dest: Path, n: int) -> Path:
    with gzip.open(src, "rt", encoding="utf-8") as f:
        dest.write_text("".join(line for _, line in zip(range(n), f)), encoding="utf-8")
    return dest


@pytest.fixture(scope="module")
def cv_inputs(shared_data, tmp_path_factory) -> list[str]:
    """Common Voice sentences of de (two files), en and el, 6000 lines each at most."""
    folder = tmp_path_factory.mktemp("cv")
    cv = shared_data / "commonvoice_sentences"
    names = ["de.sentence-collector", "de.jf99", "en.sentence-collector", "el.sentence-collector"]
    return [str(first_lines(cv / f"{name}.txt.gz", folder / f"{name}.txt", 6000)) for name in names]


@pytest.fixture(scope="module")
def multi30k_inputs(shared_data, tmp_path_factory) -> list[str]:
    """The first 4000 lines of Multi30k's train.{de,en,fr}, line-aligned (three pairs, sentence groups)."""
    folder = tmp_path_factory.mktemp("m30k")
    return [str(first_lines(shared_data / "multi30k" / f"train.{lang}.gz", folder / f"train.{lang}", 4000))
            for lang in ("de", "en", "fr")]


CV = ["prepare", "--source", "text", "--lang", "de,en,el", "--shard-size", "1500", "--max-valid", "40",
      "--max-test", "25", "--valid-fraction", "0.02", "--test-fraction", "0.02"]
M30K = ["prepare", "--source", "opus", "--lang", "de,en,fr", "--split-by", "sentences", "--mono-from-parallel",
        "--valid-fraction", "0.05", "--test-fraction", "0.05", "--max-valid", "120", "--max-test", "90",
        "--shard-size", "1000"]


def _same_for_every_worker_count(args: list[str], tmp_path: Path, workers=(1, 2, 3)) -> dict[str, str]:
    outs = {}
    for w in workers:
        outs[w] = tmp_path / f"w{w}"
        r = run_cli(*args, "--workers", str(w), "--out", outs[w])
        assert r.exit_code == 0, r.stderr
    ref = hashes(outs[workers[0]])
    for w in workers[1:]:
        assert hashes(outs[w]) == ref, w
        assert manifest(outs[w]) == manifest(outs[workers[0]]), w
    return ref


def test_common_voice_with_caps_is_the_same_for_any_number_of_workers(cv_inputs, tmp_path):
    ref = _same_for_every_worker_count([*CV, *cv_inputs], tmp_path)
    assert {rel.split("/")[1] for rel in ref} == {"train", "valid", "test"} and len(ref) >= 12
    m = json.loads((tmp_path / "w2" / "manifest.json").read_text())
    assert m["counts"]["valid"] == {"de": 40, "el": 40, "en": 40} and m["dropped"]["duplicate"] > 0


def test_multi30k_sentence_groups_with_caps_are_the_same_for_any_number_of_workers(multi30k_inputs, tmp_path):
    ref = _same_for_every_worker_count([*M30K, *multi30k_inputs], tmp_path)
    m = json.loads((tmp_path / "w3" / "manifest.json").read_text())
    assert m["counts"]["valid"]["de-en"] == 120 and m["counts"]["test"]["en-fr"] == 90
    assert m["dropped"]["over_split_cap"] > 0 and any(rel.startswith("mono/test/de/") for rel in ref)


def test_max_records_is_exact_for_any_number_of_workers(multi30k_inputs, tmp_path):
    # (the readers stop at --max-records already, so the finalizer's own cap is not reached here; a chunk in
    # which it runs out is tested in test_prepare_units.py)
    args = ["prepare", "--source", "opus", "--lang", "de,en,fr", *multi30k_inputs, "--max-records", "1700",
            "--mono-from-parallel", "--max-valid", "30", "--shard-size", "600"]
    _same_for_every_worker_count(args, tmp_path, workers=(1, 2))
    m = json.loads((tmp_path / "w2" / "manifest.json").read_text())
    assert {sum(m["counts"][s][pair] for s in m["counts"]) for pair in ("de-en", "de-fr", "en-fr")} == {1700}


def test_wikipedia_split_readers_and_partitions_write_the_bytes_of_one_worker(shared_data, tmp_path):
    _, dump, _ = make_multistream(shared_data, tmp_path / "ms")
    bg = shared_data / "wikipedia_dumps" / "bgwiki-latest-pages-articles-shortened.xml.bz2"
    args = ["prepare", "--source", "wikipedia", str(dump), str(bg), "--split-size", "30000", "--chunk-size", "300",
            "--shard-size", "2000"]
    ref = _same_for_every_worker_count(args, tmp_path, workers=(1, 2))
    assert len(ref) >= 6


def test_a_run_killed_while_writing_shards_resumes_to_the_same_output(cv_inputs, tmp_path):
    ref = tmp_path / "ref"
    assert run_cli(*CV, *cv_inputs, "--shard-size", "300", "--out", ref).exit_code == 0
    out = tmp_path / "killed"
    proc = start_xlp(*CV, *cv_inputs, "--shard-size", "300", "--workers", "2", "--out", str(out))
    kill_when(proc, lambda: len(list(out.glob("*/train/*/part-*.parquet"))) >= 3, timeout=180)
    assert not (out / "manifest.json").exists()
    left = hashes(out)
    assert left and all(hashes(ref)[rel] == sha for rel, sha in left.items())  # what is there is complete
    r = run_cli(*CV, *cv_inputs, "--shard-size", "300", "--workers", "2", "--out", out, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "resumed and finished"
    assert hashes(out) == hashes(ref) and manifest(out) == manifest(ref)
    assert not list(out.rglob("*.tmp")) and not (out / ".work").exists()
