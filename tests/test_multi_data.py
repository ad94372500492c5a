"""Several --data folders (issue 11, section 6): merged where a stage can learn from or apply to several inputs
(bpe learn, bpe apply), refused with one line where it reads one (vocab-score, pretrain); vocab-score on a
parallel-only prepare output counts each side of a pair for its language."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from xlp_cli.artifacts import layout
import pytest

from tests.conftest import FIXTURES, run_cli

FIX = FIXTURES / "prepare"
NO_SPLITS = ("--valid-fraction", "0", "--test-fraction", "0")


def _rows(folder, split, name) -> int:
    return sum(pq.ParquetFile(p).metadata.num_rows for p in layout.read_dir(folder, split, name).glob("part-*.parquet"))


@pytest.fixture(scope="module")
def preps(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi")
    made = {"en_news": ("en", FIX / "news.en.txt", ()), "en_talk": ("en", FIX / "talk.en-fr.en", ()),
            "fr_news": ("fr", FIX / "news.fr.txt", ()), "en_cased": ("en", FIX / "talk.en-fr.en", ("--lowercase", "none"))}
    for name, (lang, path, extra) in made.items():
        r = run_cli("prepare", "--source", "text", "--lang", lang, path, "--out", root / name, *NO_SPLITS, *extra)
        assert r.exit_code == 0, r.output
    return root


def test_bpe_learn_and_apply_merge_every_data_folder(preps):
    data = [x for n in ("en_news", "en_talk", "fr_news") for x in ("--data", preps / n)]
    r = run_cli("bpe", "learn", *data, "--codes", "100", "--out", preps / "bpe")
    assert r.exit_code == 0, r.output
    m = json.loads((preps / "bpe" / "manifest.json").read_text())
    en = _rows(preps / "en_news", "train", "en") + _rows(preps / "en_talk", "train", "en")
    assert m["sampling"]["en"]["sentences"] == en and m["sampling"]["fr"]["sentences"] == _rows(preps / "fr_news", "train", "fr")
    assert len(m["upstream"]) == 3

    r = run_cli("bpe", "apply", *data, "--data", preps / "bpe", "--out", preps / "ids")
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in layout.shard_dir(preps / "ids", "train", "en").glob("part-*.parquet"))
    assert names == ["part-00000.parquet", "part-in1-00000.parquet"]  # neither input overwrote the other
    m = json.loads((preps / "ids" / "manifest.json").read_text())
    assert m["counts"]["train"] == {"en": en, "fr": _rows(preps / "fr_news", "train", "fr")}
    assert _rows(preps / "ids", "train", "en") == en


def test_folders_prepared_differently_are_not_merged(preps):
    r = run_cli("bpe", "learn", "--data", preps / "en_news", "--data", preps / "en_cased", "--codes", "50",
                "--out", preps / "bpe_bad")
    assert r.exit_code == 2 and "other text settings" in r.output and "lowercase" in r.output
    assert len(r.output.strip().splitlines()) == 1 and not (preps / "bpe_bad").exists()


def test_stages_that_read_one_ids_folder_refuse_two(preps):
    if not (preps / "ids").is_dir():
        test_bpe_learn_and_apply_merge_every_data_folder(preps)
    r = run_cli("bpe", "apply", "--data", preps / "en_news", "--data", preps / "bpe", "--out", preps / "ids2")
    assert r.exit_code == 0, r.output
    two = ("--data", preps / "ids", "--data", preps / "ids2")
    for args in (("vocab-score", *two, "--out", preps / "v"),
                 ("pretrain", *two, "--preset", "tiny", "--max-steps", "1", "--warmup", "0", "--out", preps / "run")):
        r = run_cli(*args)
        assert r.exit_code == 2 and "names 2 `xlp bpe-apply` outputs" in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1


def test_vocab_score_on_a_parallel_prepare_output(tmp_path):
    prep = tmp_path / "par"
    r = run_cli("prepare", "--source", "opus", "--lang", "fr,en", FIX / "talk.en-fr.en", FIX / "talk.en-fr.fr",
                "--bpe-codes", "40", "--out", prep, *NO_SPLITS)
    assert r.exit_code == 0, r.output
    r = run_cli("vocab-score", "--data", prep, "--k", "5", "--out", tmp_path / "vocab", "--json")
    assert r.exit_code == 0, r.output
    vle = json.loads((tmp_path / "vocab" / "vle_vocab.json").read_text())
    assert sorted(vle["langs"]) == ["en", "fr"] and all(len(v["5"]) == 5 for v in vle["langs"].values())
    m = json.loads((tmp_path / "vocab" / "manifest.json").read_text())
    assert m["counts"]["en"] > 0 and m["counts"]["fr"] > 0
