"""The rest of XTREME (issue 33): NER (PAN-X, entity F1 with seqeval semantics), PAWS-X (XNLI's pair classifier),
BUCC (ratio-margin mining, F1 at the threshold tuned on a training part) and the XTREME average of the report.

Unit tests use hand-computed numbers and fixtures written here (tests/fixtures/panx: PAN-X's released format);
integration tests read the real PAWS-X and BUCC copies (XLP_DATA_DIR) with tiny pre-trained runs."""

from __future__ import annotations

import gzip
import json
import math
import os
import random
from pathlib import Path

import numpy as np
import pytest
from ft_helpers import build_runs

from xlp_cli.core.config import from_dict
from xlp_cli.core.errors import BadInput
from xlp_cli.evaluate.run import run as evaluate
from xlp_cli.tasks import finetune
from xlp_cli.tasks.bucc import data as bd
from xlp_cli.tasks.bucc.mining import at_threshold, best_threshold, mine
from xlp_cli.tasks.ner import data as nd
from xlp_cli.tasks.ner.config import NerConfig, NerEvalConfig
from xlp_cli.tasks.ner.scores import entities, entity_f1
from xlp_cli.tasks.pawsx import data as px

FIXTURES = Path(__file__).resolve().parent / "fixtures"


# ---------------------------------------------------------------- NER: seqeval / conlleval semantics
def test_entities_follow_seqeval_default_mode():
    assert entities(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
    assert entities(["I-PER", "I-PER", "O"]) == [("PER", 0, 1)]            # I- at the start opens an entity
    assert entities(["O", "I-LOC", "B-LOC"]) == [("LOC", 1, 1), ("LOC", 2, 2)]
    assert entities(["B-PER", "I-ORG", "I-ORG"]) == [("PER", 0, 0), ("ORG", 1, 2)]  # a type change opens one
    assert entities(["B-PER", "B-PER", "I-PER"]) == [("PER", 0, 0), ("PER", 1, 2)]
    assert entities(["O", "O"]) == [] and entities([]) == []


def test_entity_f1_hand_computed():
    # sentence 1: gold {PER 0-1, LOC 3}, pred {PER 0-1, ORG 3}: 1 of 2 correct
    s1 = (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "I-PER", "O", "B-ORG"])
    assert entity_f1([s1]) == (pytest.approx(50.0), 2)
    # sentence 2: gold opens with I- (PER 0-1), the prediction's B-PER I-PER is the same entity
    s2 = (["I-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"])
    assert entity_f1([s2]) == (pytest.approx(100.0), 1)
    # micro over both: 2 correct of 3 predicted, 3 gold -> P = R = 2/3
    assert entity_f1([s1, s2])[0] == pytest.approx(100 * 2 / 3)
    # boundaries must match exactly; "" (a word past --max-len) is O
    s3 = (["O", "I-LOC", "B-LOC"], ["O", "B-LOC", "I-LOC"])
    assert entity_f1([s3]) == (0.0, 2)
    s4 = (["B-ORG", "O", "B-PER"], ["B-ORG", "O", ""])
    assert entity_f1([s4])[0] == pytest.approx(100 * 2 * 1 * 0.5 / 1.5)  # P 1/1, R 1/2
    assert entity_f1([(["O"], ["B-PER"])]) == (0.0, 0)


def test_panx_reader_release_and_processed_formats(tmp_path):
    read = nd.read_panx(FIXTURES / "panx" / "en-test", "en")
    assert len(read.sentences) == 20 and all(not w.startswith("en:") for s in read.sentences for w in s.words)
    assert read.i_starts == 1 and read.first_i_start == "en-test:27"   # the I-LOC of "Then Berlin hosted ..."
    s = read.sentences[3]
    assert s.words[:2] == ["Then", "Berlin"] and s.tags[:2] == ["O", "I-LOC"] and s.id == "en-test:26"
    # XTREME's processed copy (no language prefix), gzip; a token with a colon keeps it
    p = tmp_path / "test-de.tsv.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write("Bonn\tB-LOC\nde:Wort\tO\n\nhttp://x.de\tO\nAnna\tI-PER\n")
    r = nd.read_panx(p, "de")
    assert [x.words for x in r.sentences] == [["Bonn", "Wort"], ["http://x.de", "Anna"]]
    assert r.i_starts == 1 and r.first_i_start == "test-de.tsv.gz:5"
    assert nd.panx_file(tmp_path, "de", "test") == p and nd.panx_file(tmp_path, "de", "dev") is None
    bad = tmp_path / "en-dev"
    bad.write_text("en:Paris\tB-LOC\nen:x\tB-MISC\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"en-dev.*2.*unknown NER tag 'B-MISC'"):
        nd.read_panx(bad, "en")
    bad.write_text("en:Paris B-LOC\n", encoding="utf-8")
    with pytest.raises(BadInput, match="token<TAB>TAG"):
        nd.read_panx(bad, "en")


# ---------------------------------------------------------------- BUCC: margin and threshold
def test_ratio_margin_mining_hand_computed():
    x = np.array([[1.0, 0.0], [0.0, 1.0]])
    y = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 2.0]])  # y2 is not unit length: cosine normalises it
    # k = 2: mean cosine of the 2 nearest: x0 (1 + .6)/2 = .8, x1 (1 + .8)/2 = .9, y0 .5, y1 .7, y2 .5
    # forward x0: y0 1/((.8+.5)/2) = 1/.65, y1 .6/.75 = .8; x1: y2 1/((.9+.5)/2) = 1/.7, y1 .8/.8 = 1
    # backward y1: x1 1.0, x0 .8 -> (1, 1, 1.0), dropped: source 1 is taken by (1, 2) first
    got = mine(x, y, k=2)
    assert [(a, b) for a, b, _ in got] == [(0, 0), (1, 2)]
    assert [s for *_, s in got] == pytest.approx([1 / 0.65, 1 / 0.7])
    # k = 1: every best cosine is 1, so the margins are 1 (and y1's backward 0.8 / 0.9 loses to (1, 2))
    assert [(a, b, round(s, 6)) for a, b, s in mine(x, y, k=1)] == [(0, 0, 1.0), (1, 2, 1.0)]


def test_best_threshold_and_f1_hand_computed():
    gold = {("a", "A"), ("b", "B"), ("d", "D"), ("e", "E")}
    cands = [("a", "A", 0.9), ("b", "B", 0.8), ("c", "X", 0.7), ("d", "D", 0.6), ("f", "F", 0.5)]
    # prefixes: F1 .4, .667, .571, .75 (3 of 4 mined correct, 3 of 4 gold), .667 -> the 4th; half-way to the 5th
    t, f1 = best_threshold(cands, gold)
    assert t == pytest.approx(0.55) and f1 == pytest.approx(75.0)
    m = at_threshold(cands, gold, t)
    assert (m["mined"], m["correct"], m["gold"]) == (4, 3, 4) and m["f1"] == pytest.approx(75.0)
    assert at_threshold(cands, gold, 0.85)["f1"] == pytest.approx(100 * 2 * 1 * 0.25 / 1.25)
    assert best_threshold([("c", "X", 0.7)], gold) == (math.inf, 0.0)  # nothing correct: nothing is mined


def test_bucc_readers(tmp_path):
    (tmp_path / "fr-en.dev.fr").write_text("fr-1\tBonjour .\nfr-2\tMerci .\nfr-3\tOui .\n", encoding="utf-8")
    (tmp_path / "fr-en.dev.en").write_text("en-1\tHello .\nen-2\tThanks .\nen-3\tYes .\nen-4\tNo .\n", encoding="utf-8")
    (tmp_path / "fr-en.dev.gold").write_text("fr-1\ten-1\nfr-9\ten-2\nfr-3\ten-3\nfr-2\ten-8\n", encoding="utf-8")
    c = bd.read(tmp_path, "fr", "dev")
    assert c.gold == {("fr-1", "en-1"), ("fr-3", "en-3")}
    assert c.missing_gold == 2 and c.first_missing == "fr-en.dev.gold:2"   # counted, first position, no crash
    assert bd.langs_in(tmp_path, "dev") == ["fr"] and bd.read(tmp_path, "de", "dev") is None
    capped = bd.read(tmp_path, "fr", "dev", limit=2)       # every gold sentence kept, then the first others
    assert capped.src.ids == ["fr-1", "fr-3"] and capped.en.ids == ["en-1", "en-3"]
    (tmp_path / "fr-en.dev.fr").write_text("fr-1\tBonjour .\nfr-1\tEncore .\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"fr-en.dev.fr.*2.*appears twice"):
        bd.read(tmp_path, "fr", "dev")
    (tmp_path / "fr-en.dev.fr").write_text("fr-1 Bonjour .\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"fr-en.dev.fr.*1.*<id><TAB><sentence>"):
        bd.read(tmp_path, "fr", "dev")


# ---------------------------------------------------------------- PAWS-X reader and split
def test_pawsx_reader_as_released(tmp_path):
    p = tmp_path / "dev-de.tsv"
    p.write_text('"""Angel Eyes"" ist ein Lied ."\tDas Lied heißt „Angel Eyes“ .\t1\n'
                 'Er kam 1990 .\tEr ging 1990 .\t0\n', encoding="utf-8")
    rows = px.read_tsv(p, "de")
    assert [(r.premise, r.hypothesis, r.label, r.key) for r in rows] == [
        ('"Angel Eyes" ist ein Lied .', "Das Lied heißt „Angel Eyes“ .", 1, "0"),
        ("Er kam 1990 .", "Er ging 1990 .", 0, "1")]
    test = tmp_path / "test-de.tsv"
    test.write_text("a b .\tc d .\n", encoding="utf-8")
    assert px.read_tsv(test, "de", labelled=False)[0].hypothesis == "c d ."
    with pytest.raises(BadInput, match=r"test-de.tsv.*1.*expected 3 tab-separated fields"):
        px.read_tsv(test, "de")
    p.write_text("a .\tb .\t2\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"dev-de.tsv.*1.*label '2' is not 0 or 1"):
        px.read_tsv(p, "de")
    # the parts depend on the row index only: the same rows in every language, disjoint, about half tested
    parts = [px.part(str(i), 0.5) for i in range(2000)]
    assert 900 < parts.count("test") < 1100 and 80 < parts.count("select") < 120
    assert parts == [px.part(str(i), 0.5) for i in range(2000)]


# ---------------------------------------------------------------- tiny models: learning, real data, the report
@pytest.fixture(scope="module")
def runs(tmp_path_factory, shared_data):
    return build_runs(tmp_path_factory.getbasetemp(), shared_data)


def _easy_pawsx(folder: Path, n: int = 300) -> Path:
    """PAWS-X files (as released: no header, 3 columns) whose rule a tiny model can learn: a non-paraphrase's
    second sentence starts with "never"."""
    rng = random.Random(3)
    words = "the a house river city old new small green runs sees takes with near after".split()
    rows = []
    for _ in range(n):
        s1 = " ".join(rng.choice(words) for _ in range(6)) + " ."
        label = rng.random() < 0.5
        s2 = " ".join(reversed(s1[:-2].split())) + " ." if label else "never " + s1
        rows.append(f"{s1}\t{s2}\t{int(label)}\n")
    folder.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "fr"):
        (folder / f"dev-{lang}.tsv").write_text("".join(rows), encoding="utf-8")
    return folder


@pytest.mark.integration
def test_ner_learns_the_fixture_and_is_scored_from_predictions(runs, tmp_path):
    out = tmp_path / "ner"
    summary = finetune(from_dict(NerConfig, {
        "task": "ner", "data": [str(runs["xlp"])], "out": str(out), "panx-dir": str(FIXTURES / "panx"),
        "lang": ["en", "fr"], "seeds": [1], "lr": [2e-3], "batch-size": [8], "epochs": 5, "threads": 1}))
    assert summary["f1"]["1"]["en"] > 60      # all-O scores 0; the fixture's English test set follows its train set
    assert summary["i_starts"] == {"test.en": {"sentences": 1, "first": "en-test:27"}}
    rows = [json.loads(l) for l in (out / "predictions" / "seed1" / "test.en.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and all(len(r["gold"]) == len(r["pred"]) for r in rows)
    assert entity_f1((r["gold"], r["pred"]) for r in rows)[0] == pytest.approx(summary["f1"]["1"]["en"])
    ev = evaluate(from_dict(NerEvalConfig, {"task": "ner", "data": [str(out)], "out": str(tmp_path / "ev")}))
    assert ev["scores"]["runs"]["xlp"]["acc"]["fr"]["mean"] == pytest.approx(summary["f1"]["1"]["fr"])


@pytest.mark.integration
def test_pawsx_learns_a_learnable_rule(runs, tmp_path):
    from xlp_cli.tasks.pawsx.config import PawsxConfig

    summary = finetune(from_dict(PawsxConfig, {
        "task": "pawsx", "data": [str(runs["additive"])], "out": str(tmp_path / "p"),
        "pawsx-dir": str(_easy_pawsx(tmp_path / "easy")), "lang": ["en"], "seeds": [1], "lr": [1e-3],
        "batch-size": [16], "epochs": 6, "threads": 1}))
    assert summary["accuracy"]["1"]["test"]["en"] > 80   # chance 50


@pytest.mark.integration
def test_pawsx_on_real_data_toy_size(runs, shared_data, tmp_path):
    """Real PAWS-X: train on part of English dev, test en and fr on the held-out rows; nothing tested was trained
    on in any language; scores come back from the prediction files."""
    from xlp_cli.tasks.pawsx.config import PawsxConfig, PawsxEvalConfig

    out = tmp_path / "p"
    summary = finetune(from_dict(PawsxConfig, {
        "task": "pawsx", "data": [str(runs["xlp"])], "out": str(out), "lang": ["en", "fr"], "seeds": [1, 2],
        "lr": [1e-3], "batch-size": [16], "epochs": 1, "max-train-rows": 160, "max-eval-rows": 80, "threads": 1}))
    assert summary["rows"]["en"]["test"] == 80 and summary["rows"]["fr"]["train"] > 800
    keys = {}
    for split in ("dev", "test"):
        for lang in (["en"] if split == "dev" else ["en", "fr"]):
            rows = [json.loads(l) for l in (out / "predictions" / "seed1" / f"{split}.{lang}.jsonl").read_text().splitlines()]
            keys[split, lang] = {int(r["id"].rsplit(":", 1)[1]) - 1 for r in rows}   # file line -> row index
            assert {r["gold"] for r in rows} <= set(px.LABELS)
    assert len(keys["test", "fr"]) == 80 and keys["test", "en"] == keys["test", "fr"]
    assert not keys["test", "en"] & keys["dev", "en"]
    assert all(px.part(str(k), 0.5) == "test" for k in keys["test", "en"])
    ev = evaluate(from_dict(PawsxEvalConfig, {"task": "pawsx", "data": [str(out)], "out": str(tmp_path / "ev")}))
    for lang in ("en", "fr"):
        assert ev["scores"]["runs"]["xlp"]["acc"][lang]["seeds"] == pytest.approx(
            [summary["accuracy"][s]["test"][lang] for s in ("1", "2")])


@pytest.fixture(scope="module")
def zh_run(tmp_path_factory, shared_data):
    """A tiny zh-en pre-training run through the real stages (Common Voice sentences)."""
    from xlp_cli.bpe.config import BpeApplyConfig, BpeLearnConfig
    from xlp_cli.bpe.run import apply, learn
    from xlp_cli.prepare.config import PrepareConfig
    from xlp_cli.prepare.run import run as prepare
    from xlp_cli.train.config import PretrainConfig
    from xlp_cli.train.pretrain import run as pretrain

    root = tmp_path_factory.mktemp("zh_en")
    inputs = []
    for lang, name in (("en", "en.sentence-collector.txt.gz"), ("zh", "zh-CN.sentence-collector.txt.gz")):
        path = shared_data / "commonvoice_sentences" / name
        if not path.is_file():
            pytest.skip(f"Common Voice sentences not found at {path}")
        os.symlink(path, root / f"cv.{lang}.gz")
        inputs.append(str(root / f"cv.{lang}.gz"))
    prepare(from_dict(PrepareConfig, {"inputs": inputs, "source": "text", "lang": ["en", "zh"], "max-records": 3000,
                                      "out": str(root / "prep")}))
    learn(from_dict(BpeLearnConfig, {"data": [str(root / "prep")], "codes": 1500, "out": str(root / "bpe")}))
    apply(from_dict(BpeApplyConfig, {"data": [str(root / "prep"), str(root / "bpe")], "out": str(root / "ids")}))
    pretrain(from_dict(PretrainConfig, {
        "data": [str(root / "ids")], "out": str(root / "pt"), "lang-encoding": "additive", "preset": "tiny",
        "d-model": 64, "n-heads": 4, "d-ff": 256, "max-steps": 40, "batch-size": 16, "accumulate": 1, "bptt": 64,
        "warmup": 10, "lr": 5e-4, "eval-every": 20, "eval-batches": 2, "num-threads": 1, "seed": 0}))
    return root / "pt"


@pytest.mark.integration
def test_bucc_on_real_zh_en(zh_run, shared_data, tmp_path, cli):
    r = cli("evaluate", "--task", "bucc", "--data", zh_run, "--out", tmp_path / "b", "--bucc-max-sentences", "3000",
            "--threads", "1")
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "b" / "results.json").read_text())
    zh = res["runs"][0]["langs"]["zh"]
    assert zh["gold"] + zh["train_gold"] == 257 and zh["missing_gold"] == 0
    assert zh["sentences"] == {"zh": 3000, "en": 3000} and 0 <= zh["f1"] <= 100
    assert res["table"]["runs"]["additive"]["acc"]["zh"]["mean"] == zh["f1"]


@pytest.mark.integration
def test_bucc_mines_identical_sentences(runs, shared_data, tmp_path):
    """Real English BUCC sentences on both sides (the source side read as French): mining finds them."""
    from xlp_cli.tasks.bucc.config import BuccConfig
    from xlp_cli.tasks.bucc.scores import run

    en = [l.split("\t", 1)[1] for l in gzip.open(shared_data / "bucc2018" / "zh-en.dev.en.gz", "rt",
                                                 encoding="utf-8").read().splitlines()[:400]]
    d = tmp_path / "bucc"
    d.mkdir()
    (d / "fr-en.dev.fr").write_text("".join(f"fr-{i}\t{s}\n" for i, s in enumerate(en[:200])), encoding="utf-8")
    (d / "fr-en.dev.en").write_text("".join(f"en-{i}\t{s}\n" for i, s in enumerate(en)), encoding="utf-8")
    (d / "fr-en.dev.gold").write_text("".join(f"fr-{i}\ten-{i}\n" for i in range(200)) + "fr-x\ten-1\n", encoding="utf-8")
    s = run(from_dict(BuccConfig, {"task": "bucc", "data": [str(runs["xlp"])], "out": str(tmp_path / "o"),
                                   "bucc-dir": str(d), "threads": 1}))
    fr = s["runs"][0]["langs"]["fr"]
    assert fr["f1"] > 90 and fr["missing_gold"] == 1 and fr["first_missing"] == "fr-en.dev.gold:201"


@pytest.fixture(scope="module")
def finetuned(runs, tmp_path_factory):
    """NER (fixture) and PAWS-X (real, toy) fine-tunings of both tiny runs, 2 seeds each."""
    from xlp_cli.tasks.pawsx.config import PawsxConfig

    root = tmp_path_factory.mktemp("xtreme_tasks")
    out = {}
    for enc in ("xlp", "additive"):
        out[f"ner_{enc}"] = root / f"ner_{enc}"
        finetune(from_dict(NerConfig, {
            "task": "ner", "data": [str(runs[enc])], "out": str(out[f"ner_{enc}"]), "panx-dir": str(FIXTURES / "panx"),
            "lang": ["en", "fr"], "seeds": [1, 2], "lr": [2e-3], "batch-size": [8], "epochs": 2, "threads": 1}))
        out[f"pawsx_{enc}"] = root / f"pawsx_{enc}"
        finetune(from_dict(PawsxConfig, {
            "task": "pawsx", "data": [str(runs[enc])], "out": str(out[f"pawsx_{enc}"]), "lang": ["en", "fr"],
            "seeds": [1, 2], "lr": [1e-3], "batch-size": [16], "epochs": 1, "max-train-rows": 96,
            "max-eval-rows": 60, "threads": 1}))
    return out


@pytest.mark.integration
@pytest.mark.slow
def test_xtreme_report_has_the_new_tasks_and_their_average(finetuned, runs, tmp_path):
    from xlp_cli.reporting.stats import welch_two_sided
    from xlp_cli.tasks.ner.scores import scores_of as ner_scores
    from xlp_cli.tasks.pawsx.scores import scores_of as pawsx_scores
    from xlp_cli.tasks.xtreme import XtremeConfig

    f = finetuned
    data = [f["pawsx_additive"], f["ner_additive"], f["pawsx_xlp"], f["ner_xlp"]]
    summary = evaluate(from_dict(XtremeConfig, {"task": "xtreme", "data": [str(d) for d in data],
                                                "out": str(tmp_path / "x"), "sets": ["pud"], "max-sentences": 50,
                                                "threads": 1}))
    res = json.loads((tmp_path / "x" / "results.json").read_text())
    header, rows = summary["headline"]
    assert header == ["run", "PAWS-X avg", "PAWS-X gap", "NER avg", "NER gap", "PUD xx→en", "PUD en→xx", "XTREME avg"]
    assert res["xtreme_average"]["tasks"] == ["pawsx", "ner"]          # PUD is not an XTREME task
    want = {"pawsx": pawsx_scores([f["pawsx_additive"], f["pawsx_xlp"]], [], "test", [], ""),
            "ner": ner_scores([f["ner_additive"], f["ner_xlp"]], [], "test", [], "")}
    for name in ("additive", "xlp"):
        per_task = [want[t]["runs"][name]["avg"] for t in ("pawsx", "ner")]
        got = res["xtreme_average"]["runs"][name]["avg"]
        assert got["mean"] == pytest.approx(sum(s["mean"] for s in per_task) / 2)
        assert got["seeds"] == pytest.approx([(a + b) / 2 for a, b in zip(*(s["seeds"] for s in per_task))])
        for t in ("pawsx", "ner"):
            assert res["tasks"][t]["runs"][name]["avg"]["seeds"] == pytest.approx(want[t]["runs"][name]["avg"]["seeds"])
    a, b = (res["xtreme_average"]["runs"][n]["avg"] for n in ("xlp", "additive"))
    beyond = welch_two_sided((a["mean"], a["std"], a["n"]), (b["mean"], b["std"], b["n"])) < 0.05
    assert res["xtreme_average"]["runs"]["xlp"]["vs_baseline"]["avg"]["marked"] == beyond
    assert ("▲" in rows[1][-1] or "▼" in rows[1][-1]) == beyond and "±" in rows[1][-1]


@pytest.mark.integration
@pytest.mark.slow
def test_xtreme_report_reads_qa_and_bucc(finetuned, runs, zh_run, tmp_path):
    """A QA run (the qa task's own folder) adds its sets' columns; a run missing an XTREME task has no average;
    BUCC is measured on a pre-training run that knows zh."""
    from xlp_cli.tasks.qa.config import QaConfig
    from xlp_cli.tasks.xtreme import XtremeConfig

    qa = tmp_path / "qa"
    finetune(from_dict(QaConfig, {"task": "qa", "data": [str(runs["xlp"])], "out": str(qa), "lang": ["en"],
                                  "qa-sets": ["xquad"], "seeds": [1], "lr": [1e-3], "batch-size": [16], "epochs": 1,
                                  "max-train-questions": 60, "max-eval-questions": 20, "max-seq-len": 128,
                                  "threads": 1}))
    f = finetuned
    data = [f["ner_additive"], f["ner_xlp"], qa, zh_run]
    summary = evaluate(from_dict(XtremeConfig, {"task": "xtreme", "data": [str(d) for d in data],
                                                "name": ["additive", "xlp", "xlp", "zh"], "out": str(tmp_path / "x"),
                                                "sets": ["pud"], "max-sentences": 30, "bucc-max-sentences": 1000,
                                                "threads": 1}))
    header, rows = summary["headline"]
    assert header == ["run", "NER avg", "NER gap", "XQuAD F1 avg", "XQuAD F1 gap", "PUD xx→en", "PUD en→xx", "BUCC",
                      "XTREME avg"]
    res = summary["result"]
    assert set(res["tasks"]) >= {"qa xquad f1", "qa xquad em", "bucc"}
    assert res["xtreme_average"]["tasks"] == ["ner", "qa xquad f1", "bucc"]
    assert [r[-1] for r in rows] == ["-", "-", "-"]               # each run misses one of them
    assert res["tasks"]["bucc"]["runs"]["zh"]["acc"]["zh"]["n"] == 1


@pytest.mark.integration
@pytest.mark.slow
def test_pawsx_veco_plug_in_pairs_each_row_with_its_translation(runs, tmp_path, cli):
    """translate-train with VECO plug-in (oracle pairs: the human row of the same index in the other language)."""
    veco = tmp_path / "veco"
    r = cli("pretrain", "--data", runs["ids"], "--out", veco, "--objective", "mlm+ca-mlm", "--preset", "tiny",
            "--d-model", "32", "--n-heads", "2", "--d-ff", "64", "--max-steps", "4", "--batch-size", "8", "--bptt", "32",
            "--warmup", "1", "--eval-every", "4", "--eval-batches", "1", "--num-threads", "1")
    assert r.exit_code == 0, r.output
    out = tmp_path / "p"
    r = cli("finetune", "--task", "pawsx", "--data", veco, "--out", out, "--setting", "translate-train", "--veco",
            "plug-in", "--plug-in-pairs", "oracle", "--lang", "en,fr", "--lr", "1e-3", "--batch-size", "16",
            "--epochs", "1", "--max-train-rows", "32", "--max-eval-rows", "20", "--threads", "1")
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert res["veco"] == "plug-in" and set(res["groups"]) == {"en", "fr"}
    assert "plug-in pairs: en, oracle" in res["groups"]["fr"]["source"]
    meta = json.loads(next((out / "runs" / "fr").glob("*/checkpoints/best/model.json")).read_text())
    assert meta["kind"] == "veco-classifier" and meta.get("n_labels") == 2
    r = cli("finetune", "--task", "pawsx", "--data", veco, "--out", tmp_path / "q", "--veco", "plug-in",
            "--plug-in-pairs", "oracle")
    assert r.exit_code == 2 and "zero-shot transfer has no such pairs" in r.output


@pytest.mark.integration
def test_bad_inputs_are_one_line_errors(runs, tmp_path, cli):
    r = cli("finetune", "--task", "ner", "--data", runs["xlp"], "--out", tmp_path / "n", "--panx-dir", tmp_path / "none")
    assert r.exit_code == 2 and "no PAN-X folder" in r.output and "Traceback" not in r.output
    r = cli("finetune", "--task", "ner", "--data", runs["xlp"], "--out", tmp_path / "n", "--panx-dir",
            FIXTURES / "panx", "--lang", "de")
    assert r.exit_code == 2 and "'de' has no pre-training data" in r.output
    bad = tmp_path / "pawsx"
    bad.mkdir()
    (bad / "dev-en.tsv").write_text("a .\tb .\t1\nc .\td .\n", encoding="utf-8")
    r = cli("finetune", "--task", "pawsx", "--data", runs["xlp"], "--out", tmp_path / "p", "--pawsx-dir", bad,
            "--lang", "en")
    assert r.exit_code == 2 and "dev-en.tsv" in r.output and "expected 3 tab-separated fields" in r.output
    r = cli("evaluate", "--task", "bucc", "--data", runs["xlp"], "--out", tmp_path / "b", "--bucc-dir", bad)
    assert r.exit_code == 2 and "no language of these runs (besides English) has a complete" in r.output
    r = cli("evaluate", "--task", "bucc", "--data", runs["xlp"], "--out", tmp_path / "b", "--margin-k", "0")
    assert r.exit_code == 2 and "margin-k" in r.output
