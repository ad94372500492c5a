"""UNMT and MASS end to end on real data: Multi30k train pairs made into two monolingual halves by
`xlp prepare --unpair`, real BPE, tiny models, a few steps: the halves share no pair, MASS and UNMT resume
bitwise, a one-sided pair is refused, the copy baseline and a run are scored by `xlp evaluate --task
translation`, and the lexicon test reads MASS and UNMT runs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from conftest import run_cli

from xlp_cli.artifacts import layout
from xlp_cli.text.pipeline import TextPipeline

pytestmark = [pytest.mark.integration]

PAIRS = 1200
TINY = ["--preset", "tiny", "--max-steps", "3", "--batch-size", "8", "--accumulate", "1", "--bptt", "32",
        "--eval-every", "3", "--eval-batches", "1", "--warmup", "0", "--lr", "1e-3", "--num-threads", "1"]


def ok(*args):
    r = run_cli(*args)
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def m30k(tmp_path_factory, shared_data):
    """prepare (--unpair) + BPE + vocab-score on the first PAIRS Multi30k de-en train pairs, and 20-line eval files."""
    tmp = tmp_path_factory.mktemp("unmt")
    src = shared_data / "multi30k"
    ok("prepare", "--source", "opus", src / "train.de.gz", src / "train.en.gz", "--lang", "de,en", "--unpair",
       "--lowercase", "none", "--max-records", PAIRS, "--valid-fraction", "0.05", "--test-fraction", "0",
       "--bpe-codes", "600", "--out", tmp / "prep")
    ok("vocab-score", "--data", tmp / "prep-ids", "--k", "20", "--out", tmp / "vocab")
    for lang in ("de", "en"):
        with gzip.open(src / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8") as f:
            (tmp / f"tst.{lang}").write_text("".join(next(f) for _ in range(12)), encoding="utf-8")
    return {"tmp": tmp, "src": src, "ids": tmp / "prep-ids", "vocab": tmp / "vocab",
            "test": [tmp / "tst.de", tmp / "tst.en"]}


def test_the_two_halves_share_no_sentence_pair(m30k):
    prep = m30k["tmp"] / "prep"
    kept = {lang: {r for split in ("train", "valid") for p in sorted(layout.shard_dir(prep, split, lang).glob("*.parquet"))
                   for r in pq.read_table(p, columns=["raw"]).column("raw").to_pylist()} for lang in ("de", "en")}
    assert kept["de"] and not (prep / "pairs").exists()  # no pair folder
    pipe = TextPipeline.from_config({"clean": True, "normalize": True, "tokenize": "moses", "lowercase": "none"})
    lines = {}
    for lang in ("de", "en"):
        with gzip.open(m30k["src"] / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            lines[lang] = [pipe.raw(next(f).strip()) for _ in range(PAIRS)]
    both = [i for i in range(PAIRS) if lines["de"][i] in kept["de"] and lines["en"][i] in kept["en"]]
    assert both == []  # no sentence has its translation in the training data
    for lang in ("de", "en"):  # each language got about half of the pairs
        assert 0.4 * PAIRS < sum(lines[lang][i] in kept[lang] for i in range(PAIRS)) < 0.6 * PAIRS


def test_a_pair_with_one_side_only_is_refused_in_one_line(m30k, tmp_path):
    r = run_cli("finetune", "--task", "unmt", "--data", m30k["ids"], "--lang", "de,fr", "--out", tmp_path / "x")
    assert r.exit_code == 2
    lines = [l for l in r.output.splitlines() if l.strip()]
    assert len(lines) == 1 and "'fr' has none" in lines[0] and "train/fr" in lines[0], r.output


@pytest.fixture(scope="module")
def mlm_run(m30k):
    out = m30k["tmp"] / "mlm"
    ok("pretrain", "--data", m30k["ids"], "--data", m30k["vocab"], "--lang", "de,en", "--lang-encoding", "vle",
       "--vle-k", "20", *TINY, "--out", out)
    return out


def unmt(m30k, init, out, steps, *extra):
    return ok("finetune", "--task", "unmt", "--data", m30k["ids"], "--lang", "de,en", "--init", init,
              "--lang-encoding", "vle", "--vle-k", "20", "--max-steps", steps, "--batch-sentences", "6",
              "--max-len", "24", "--warmup", "0", "--lr", "1e-3", "--valid-every", "2", "--threads", "1", "--log-every", "1",
              "--valid-data", m30k["test"][0], "--valid-data", m30k["test"][1], "--valid-sentences", "4",
              "--test-data", m30k["test"][0], "--test-data", m30k["test"][1], "--out", out, *extra)


def same_weights(a: Path, b: Path) -> bool:
    """Every tensor of the two `last` checkpoints bitwise equal (the file header's key order may differ)."""
    from safetensors.torch import load_file

    wa, wb = (load_file(str(r / "checkpoints" / "last" / "model.safetensors")) for r in (a, b))
    return set(wa) == set(wb) and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.slow
def test_unmt_from_mlm_resumes_bitwise_and_is_scored_against_the_copy_baseline(m30k, mlm_run):
    straight, resumed = m30k["tmp"] / "ft_a", m30k["tmp"] / "ft_b"
    unmt(m30k, mlm_run, straight, "4", "--bt-temperature", "0.5")
    unmt(m30k, mlm_run, resumed, "2", "--bt-temperature", "0.5")
    unmt(m30k, mlm_run, resumed, "4", "--bt-temperature", "0.5")  # more steps: continues from `last`
    assert same_weights(straight / "seed-1", resumed / "seed-1")
    train = lambda run: [l for l in (run / "seed-1" / "metrics.jsonl").read_text().splitlines() if '"train"' in l]  # noqa: E731
    strip = lambda l: {k: v for k, v in json.loads(l).items() if k not in ("tokens_per_s", "elapsed_s")}  # noqa: E731
    assert [strip(l) for l in train(straight)] == [strip(l) for l in train(resumed)]
    rec = json.loads(train(straight)[-1])
    assert {"ae_de", "bt_de", "mlm_de", "ae_en", "bt_en", "mlm_en"} <= set(rec)
    rows = (straight / "seed-1" / "predictions" / "test.de-en.jsonl").read_text().splitlines()
    assert len(rows) == 12 and {"hyp", "hyp_tok", "ref", "ref_tok", "source"} <= set(json.loads(rows[0]))
    copy = m30k["tmp"] / "ft_copy"
    ok("finetune", "--task", "unmt", "--data", m30k["ids"], "--lang", "de,en", "--copy-baseline",
       "--test-data", m30k["test"][0], "--test-data", m30k["test"][1], "--out", copy)
    copied = [json.loads(l) for l in (copy / "copy" / "predictions" / "test.en-de.jsonl").read_text().splitlines()]
    english = [json.loads(l) for l in (straight / "seed-1" / "predictions" / "test.de-en.jsonl").read_text().splitlines()]
    assert [r["hyp_tok"] for r in copied] == [r["ref_tok"] for r in english]  # the English source, word for word
    r = ok("evaluate", "--task", "translation", "--data", copy, "--data", straight, "--out", m30k["tmp"] / "ev")
    res = json.loads((m30k["tmp"] / "ev" / "results.json").read_text())
    assert set(res["runs"]) == {"copy", "vle"} and res["supervised"] == ["de-en", "en-de"]
    assert any("smooth:none" in s and "tok:none" in s for s in res["signatures"])
    assert "multi-bleu" in r.output and "copy" in r.output
    assert "## Unsupervised directions" in (m30k["tmp"] / "ev" / "report.md").read_text()  # UNMT saw no pair
    assert "(unsupervised," in r.output and "(supervised," not in r.output  # the terminal tables say so too


@pytest.mark.slow
def test_mass_resumes_bitwise_and_starts_unmt_and_the_lexicon_test(m30k):
    a, b = m30k["tmp"] / "mass_a", m30k["tmp"] / "mass_b"
    args = ["pretrain", "--data", m30k["ids"], "--data", m30k["vocab"], "--lang", "de,en", "--objective", "mass",
            "--lang-encoding", "vle", "--vle-k", "20", "--vle-style", "padding", *TINY]
    ok(*args, "--max-steps", "4", "--out", a)
    ok(*args, "--max-steps", "2", "--out", b)
    ok(*args, "--max-steps", "4", "--out", b)
    assert same_weights(a, b)
    assert json.loads((a / "model.json").read_text())["kind"] == "seq2seq"
    ft = m30k["tmp"] / "ft_mass"
    ok("finetune", "--task", "unmt", "--data", m30k["ids"], "--lang", "de,en", "--init", a, "--lang-encoding", "vle",
       "--vle-style", "padding", "--vle-k", "20", "--max-steps", "1", "--batch-sentences", "4", "--max-len", "16",
       "--test-data", m30k["test"][0], "--test-data", m30k["test"][1], "--max-eval-sentences", "3", "--out", ft)
    r = ok("evaluate", "--task", "lexicon", "--data", a, "--data", ft, "--name", "mass", "--name", "unmt",
           "--lang", "de", "--which", "last", "--max-pairs", "300", "--out", m30k["tmp"] / "lex")
    res = json.loads((m30k["tmp"] / "lex" / "results.json").read_text())
    assert res["runs"]["mass"]["de"]["covered_pairs"] > 0 and res["runs"]["unmt"]["de"]["covered_pairs"] > 0
