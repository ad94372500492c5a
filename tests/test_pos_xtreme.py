"""`xlp finetune --task pos` / `xlp evaluate --task pos|xtreme` on real UD treebanks and tiny real pre-trained
runs: labels sit on first subwords and come back, the tagger learns, the XTREME report's cells are the tasks'."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from ft_helpers import build_runs

from xlp_cli.artifacts.special_ids import EOS, UNK
from xlp_cli.core.config import from_dict
from xlp_cli.core.errors import BadInput
from xlp_cli.evaluate.run import run as evaluate
from xlp_cli.models.checkpoint import load_model, load_pretrained, read_config
from xlp_cli.models.heads import TokenClassifier
from xlp_cli.recipes import run as recipes
from xlp_cli.reporting.stats import welch_two_sided
from xlp_cli.tasks import finetune
from xlp_cli.tasks.conllu import UPOS
from xlp_cli.tasks.finetuning import Pretrained
from xlp_cli.tasks.pos import data as pd
from xlp_cli.tasks.pos.config import PosConfig, PosEvalConfig
from xlp_cli.tasks.pos.objective import predict
from xlp_cli.tasks.retrieval.encode import load_encoder, sentence_vectors
from xlp_cli.tasks.xnli.config import XnliConfig
from xlp_cli.tasks.xtreme import XtremeConfig

REPO = Path(__file__).resolve().parent.parent
EWT = "ud_treebanks/UD_English-EWT/en_ewt-ud-dev.conllu.gz"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shared_data):
    return build_runs(tmp_path_factory.getbasetemp(), shared_data)


@pytest.fixture(scope="module")
def finetuned(runs, shared_data, tmp_path_factory):
    """POS and XNLI fine-tuning of both tiny runs, 2 seeds each, tested on en and fr (a few seconds each)."""
    root = tmp_path_factory.mktemp("xtreme")
    out = {}
    for enc in ("xlp", "additive"):
        out[f"pos_{enc}"] = root / f"pos_{enc}"
        finetune(from_dict(PosConfig, {
            "task": "pos", "data": [str(runs[enc])], "out": str(out[f"pos_{enc}"]), "lang": ["en", "fr"],
            "seeds": [1, 2], "lr": [2e-3], "batch-size": [16], "epochs": 1, "max-train-sentences": 800,
            "max-eval-sentences": 150, "warmup": 10, "threads": 1}))
        out[f"xnli_{enc}"] = root / f"xnli_{enc}"
        finetune(from_dict(XnliConfig, {
            "task": "xnli", "data": [str(runs[enc])], "out": str(out[f"xnli_{enc}"]), "lang": ["en", "fr"],
            "seeds": [1, 2], "lr": [1e-3], "batch-size": [16], "epochs": 1, "max-train-rows": 160,
            "max-eval-rows": 60, "warmup": 5, "threads": 1,
            "train-file": str(shared_data / "mnli_en" / "mnli_train.tsv"),
            "dev-file": str(shared_data / "xnli" / "xnli.dev.tsv"), "test-file": str(shared_data / "xnli" / "xnli.test.tsv")}))
    return out


@pytest.mark.integration
def test_label_alignment_round_trips(runs, shared_data):
    """Real EWT sentences through the run's own pipeline: each word's subwords sit between consecutive first
    positions, the labels sit on the first subwords only, and gathering them gives the word labels back."""
    pre = Pretrained(runs["xlp"], "best")
    sents = pd.read_sentences([shared_data / EWT], 300)
    enc = pd.encode(sents, pre.text_encoder, "en", 128)
    te = pre.text_encoder
    n_multi = 0
    for i, (_, s) in enumerate(sents):
        ids, first = enc.ids[i], enc.first[i]
        assert ids[0] == EOS and ids[-1] == EOS and len(ids) <= 128 and first[0] == 1
        assert len(first) == len(s.words) or len(ids) + len(te.encode(s.words[len(first)].form, "en")) > 128
        ends = list(first[1:]) + [len(ids) - 1]   # the words kept: all but the tail of a very long sentence
        for w, a, b in zip(s.words, first, ends):
            want = te.encode(w.form, "en")
            assert ids[a:b].tolist() == (want.tolist() if len(want) else [UNK])
            n_multi += b - a > 1
        labels = enc.labels(i)
        gold = np.asarray([UPOS.index(t) for t in enc.gold[i]])[: len(first)]
        assert (pd.gather(labels, first) == gold).all()
        assert (labels != pd.IGNORE).sum() == len(first)
        assert (pd.spread(first, pd.gather(labels, first), len(ids)) == labels).all()
    assert n_multi > 100  # the BPE does split words, so the first-subword rule is exercised
    # cut at max_len: later words are not tagged, and the prediction says "" for them
    short = pd.encode(sents[:20], te, "en", 12)
    model = pre.new_head(TokenClassifier, 0.0, torch.device("cpu"), n_labels=len(UPOS))
    pred = predict(model, short, 0, torch.device("cpu"), 8)
    for p, g, f in zip(pred, short.gold, short.first):
        assert len(p) == len(g) and p.count("") == len(g) - len(f) and all(p[: len(f)])
    assert pd.align([np.zeros(0, np.int32)], 8)[0].tolist() == [EOS, UNK, EOS]


@pytest.mark.integration
@pytest.mark.slow
def test_pos_learns_and_is_scored_from_predictions(finetuned, shared_data, runs, tmp_path):
    out = finetuned["pos_xlp"]
    summary = json.loads((out / "results.json").read_text())
    # word accuracy on held-out English (EWT test + PUD) beats the most frequent training tag by a wide margin
    train = Counter(w.upos for _, s in pd.read_sentences([shared_data / EWT], 800) for w in s.words)
    rows = [json.loads(l) for l in (out / "predictions" / "seed1" / "test.en.jsonl").read_text().splitlines()]
    gold = [g for r in rows for g in r["gold"] if g != "_"]
    majority = 100 * sum(g == train.most_common(1)[0][0] for g in gold) / len(gold)
    acc = summary["accuracy"]["1"]["en"]
    assert acc > majority + 10, (acc, majority)
    correct = sum(g == p for r in rows for g, p in zip(r["gold"], r["pred"]) if g != "_")
    assert acc == pytest.approx(100 * correct / len(gold))
    assert summary["gap"] == pytest.approx(summary["test_mean"]["en"] - summary["test_mean"]["fr"])
    # the checkpoint is a tagger; XLP's projections did not move, the rest did
    best = next((out / "runs" / "transfer").iterdir()) / "checkpoints" / "best"
    assert read_config(best)["kind"] == "tagger"
    model, pre = load_model(best), load_pretrained(runs["xlp"])
    assert torch.equal(model.encoder.lang_encoding.weight, pre.lang_encoding.weight)
    assert not torch.equal(model.encoder.embed.weight, pre.embed.weight)
    assert summary["frozen_projections"] is True
    # sentence retrieval reads the fine-tuned encoder of a tagger checkpoint too (text pipeline from upstream)
    enc = load_encoder(best)
    assert enc.model.config.lang_encoding == "xlp"
    vecs = sentence_vectors(enc, ["Le chat dort .", "Il pleut ."], "fr", enc.layer(-1))
    assert vecs.shape == (2, enc.model.config.d_model) and np.isfinite(vecs).all()
    # `xlp evaluate --task pos` recomputes the same numbers
    res = evaluate(from_dict(PosEvalConfig, {"task": "pos", "data": [str(finetuned["pos_additive"]), str(out)],
                                            "out": str(tmp_path / "ev")}))
    xlp_en = res["scores"]["runs"]["xlp"]["acc"]["en"]
    assert xlp_en["n"] == 2 and xlp_en["mean"] == pytest.approx(np.mean([summary["accuracy"][s]["en"] for s in "12"]))
    assert (tmp_path / "ev" / "pos_accuracy.png").is_file() and (tmp_path / "ev" / "report.html").is_file()
    assert "UD POS test split." in (tmp_path / "ev" / "report.md").read_text()  # not a run's name (regression)


@pytest.mark.integration
@pytest.mark.slow
def test_xtreme_report_puts_the_tasks_side_by_side(finetuned, runs, tmp_path):
    from xlp_cli.tasks.pos.scores import scores_of
    from xlp_cli.tasks.xnli.scores import collect, score

    f = finetuned
    data = [f["xnli_additive"], f["pos_additive"], f["xnli_xlp"], f["pos_xlp"]]
    cfg = from_dict(XtremeConfig, {"task": "xtreme", "data": [str(d) for d in data], "out": str(tmp_path / "x"),
                                   "sets": ["pud"], "max-sentences": 100, "threads": 1})
    summary = evaluate(cfg)
    res = json.loads((tmp_path / "x" / "results.json").read_text())
    assert res["runs"] == ["additive", "xlp"] and res["baseline"] == "additive"
    assert list(res["tasks"]) == ["xnli", "pos", "retrieval pud xx->en", "retrieval pud en->xx"]
    header, rows = summary["headline"]
    assert header == ["run", "XNLI avg", "XNLI gap", "POS avg", "POS gap", "PUD xx→en", "PUD en→xx", "XTREME avg"]
    xnli = score(collect([f["xnli_additive"], f["xnli_xlp"]], [], "test"))
    pos = scores_of([f["pos_additive"], f["pos_xlp"]], [], "test", [], "")
    for name in ("additive", "xlp"):
        for task, want in (("xnli", xnli), ("pos", pos)):
            got = res["tasks"][task]["runs"][name]
            assert got["avg"]["mean"] == pytest.approx(want["runs"][name]["avg"]["mean"])
            assert got["avg"]["n"] == 2 and got["gap"]["seeds"] == pytest.approx(want["runs"][name]["gap"]["seeds"])
        # retrieval ran on the pre-training run upstream of the fine-tuning folders
        assert res["tasks"]["retrieval pud xx->en"]["runs"][name]["folders"] == [str(runs[name].resolve())]
    # the marking is XNLI's rule: a two-sided Welch t-test over seeds at 0.05
    for task in ("xnli", "pos"):
        a, b = res["tasks"][task]["runs"]["xlp"], res["tasks"][task]["runs"]["additive"]
        for stat in ("avg", "gap"):
            p = welch_two_sided(*((r[stat]["mean"], r[stat]["std"], r[stat]["n"]) for r in (a, b)))
            beyond = p < 0.05
            assert a["vs_baseline"][stat]["marked"] == beyond
            cell = rows[1][header.index(f"{task.upper()} {stat}")]
            assert ("▲" in cell or "▼" in cell) == beyond
    for name in ("report.html", "report.md", "xtreme_summary.png", "xtreme_pos.png", "manifest.json"):
        assert (tmp_path / "x" / name).is_file()


@pytest.mark.integration
def test_bad_inputs(runs, shared_data, tmp_path, cli):
    # a broken CoNLL-U line: one line on stderr naming file and line, exit 2
    broken = tmp_path / "broken.conllu"
    broken.write_text("# sent_id = a\n1\tHello\thello\tINTJ\t_\t_\t0\troot\t_\n\n", encoding="utf-8")
    r = cli("finetune", "--task", "pos", "--data", str(runs["xlp"]), "--ud-train", str(broken), "--out",
            str(tmp_path / "o"), "--lang", "en")
    assert r.exit_code == 2 and f"{broken}:2: a word line needs 10 tab-separated fields" in r.output
    assert "Traceback" not in r.output
    # a real file whose UPOS column is not UD's (the shared BOUN train snapshot holds ids in every column)
    boun = shared_data / "ud_treebanks" / "UD_Turkish-BOUN" / "tr_boun-ud-train.2020-10-23.conllu.gz"
    te = Pretrained(runs["xlp"], "best").text_encoder
    with pytest.raises(BadInput, match=r"tr_boun-ud-train.2020-10-23.conllu.gz: unknown UPOS tag '1'"):
        pd.encode(pd.read_sentences([boun], 5), te, "tr", 128)
    with pytest.raises(BadInput, match="language 'tr' has no pre-training data"):
        finetune(from_dict(PosConfig, {"task": "pos", "data": [str(runs["xlp"])], "out": str(tmp_path / "p"),
                                       "lang": ["tr"]}))
    r = cli("evaluate", "--task", "xtreme", "--data", str(runs["ids"]), "--out", str(tmp_path / "x"))
    assert r.exit_code == 2 and "expected an `xlp finetune --task xnli|pawsx|pos|ner|qa` folder, an `xlp pretrain` run or an HF model" in r.output


def test_demo_recipe_wiring(tmp_path):
    """pipelines/xtreme_demo.toml: POS and XNLI fine-tune every pretrain run; the xtreme report reads them all
    and the pretrain runs, each row named after its pretrain run; a task's own report reads only its folders."""
    nodes, _ = recipes.parse(REPO / "pipelines" / "xtreme_demo.toml")
    pretrains = ["pretrain.additive", "pretrain.xlp", "pretrain.vle"]
    assert nodes["finetune.vle-pos"].deps == ["pretrain.vle"] and nodes["finetune.xlp-xnli"].deps == ["pretrain.xlp"]
    ev = nodes["evaluate.xtreme"]
    assert sorted(ev.deps) == sorted(pretrains + [f"finetune.{p[9:]}-{t}" for p in pretrains
                                                  for t in ("xnli", "pos", "pawsx", "qa")])
    assert dict(zip(ev.values["data"], ev.values["name"]))["@finetune.vle-pos"] == "vle"
    assert set(ev.values["name"]) == {"additive", "xlp", "vle"}
    recipe = tmp_path / "r.toml"
    recipe.write_text("[[pretrain]]\nname = 'a'\n[[pretrain]]\nname = 'b'\n"
                      "[[finetune]]\nname = 'x'\ntask = 'xnli'\n[[finetune]]\nname = 'p'\ntask = 'pos'\n"
                      "[[evaluate]]\ntask = 'pos'\n[[evaluate]]\ntask = 'xnli'\n[[evaluate]]\ntask = 'retrieval'\n")
    nodes, _ = recipes.parse(recipe)
    assert nodes["evaluate.pos"].deps == ["finetune.a-p", "finetune.b-p"]
    assert nodes["evaluate.pos"].values["name"] == ["a-p", "b-p"]
    assert nodes["evaluate.xnli"].deps == ["finetune.a-x", "finetune.b-x"]
    assert nodes["evaluate.retrieval"].deps == ["pretrain.a", "pretrain.b"]
