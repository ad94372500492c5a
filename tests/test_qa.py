"""`xlp finetune --task qa` / `xlp evaluate --task qa`: the official F1/EM normalizations on hand-computed cases,
the SQuAD JSON reader on fixtures (bad answers counted, malformed JSON one line), context units and windows,
a tiny model that overfits a tiny set, and a toy run on the real XQuAD / MLQA / TyDiQA data."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from xlp_cli.core.config import from_dict
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.qa import data as qd
from xlp_cli.tasks.qa.scores import f1, mlqa_tokens, qa_scores, question_scores, scores_of_file, squad_tokens

FIX = Path(__file__).resolve().parent / "fixtures" / "qa"
TINY = FIX / "tiny_squad.json"


# ---------------------------------------------------------------- metrics, hand-computed
def test_squad_normalization_and_f1():
    # lowercase, ASCII punctuation out, a/an/the out, whitespace split
    assert squad_tokens("The Cat's  hat!") == ["cats", "hat"]
    assert squad_tokens("An apple, a pear") == ["apple", "pear"]
    assert squad_tokens("theatre") == ["theatre"]                 # articles are whole words only
    # "the big red dog" vs "a red dog barked": {big, red, dog} vs {red, dog, barked}: 2 common, P = R = 2/3
    assert question_scores("the big red dog", ["a red dog barked"], squad_tokens) == (0.0, pytest.approx(2 / 3))
    # the best over the answers: EM 1 against "Denver Broncos" (the final '.' is punctuation)
    assert question_scores("Denver Broncos.", ["The Broncos", "Denver Broncos"], squad_tokens) == (1.0, 1.0)
    # "Broncos" vs "Denver Broncos": P = 1, R = 1/2, F1 = 2/3
    assert question_scores("Broncos", ["Denver Broncos"], squad_tokens) == (0.0, pytest.approx(2 / 3))
    assert question_scores("", ["Denver"], squad_tokens) == (0.0, 0.0)    # no answer scores 0
    # SQuAD's punctuation is ASCII only: the guillemets stay, so "«Paris»" is not "Paris"
    assert question_scores("«Paris»", ["Paris"], squad_tokens) == (0.0, 0.0)
    # averages over questions, x 100: (1 + 2/3) / 2 and (1 + 0) / 2
    s = qa_scores([(["Denver Broncos"], "denver broncos"), (["Denver Broncos"], "Broncos")], squad_tokens)
    assert s["f1"] == pytest.approx(100 * (1 + 2 / 3) / 2) and s["em"] == pytest.approx(50.0) and s["n"] == 2
    assert f1(["a", "a", "b"], ["a", "b", "b"]) == pytest.approx(2 / 3)   # bags: min counts, 2 of 3 each way


def test_mlqa_normalization_per_language():
    assert mlqa_tokens("«Paris»", "en") == ["paris"]                      # Unicode P* punctuation goes
    assert question_scores("«Paris»", ["Paris"], lambda t: mlqa_tokens(t, "en")) == (1.0, 1.0)
    assert mlqa_tokens("La casa de los sueños", "es") == ["casa", "de", "sueños"]
    assert mlqa_tokens("Der Hund des Nachbarn", "de") == ["hund", "nachbarn"]
    assert mlqa_tokens("những ngôi nhà", "vi") == ["ngôi", "nhà"]
    assert mlqa_tokens("البيت الكبير", "ar") == ["بيت", "كبير"]           # every ال becomes a space
    assert mlqa_tokens("एक किताब।", "hi") == ["एक", "किताब"]               # no articles; the danda is punctuation
    # zh: each CJK character a token, other runs split on whitespace; punctuation removed first
    assert mlqa_tokens("北京大学，2008年", "zh") == ["北", "京", "大", "学", "2008", "年"]
    zh = lambda t: mlqa_tokens(t, "zh")  # noqa: E731
    # "北京" vs "北京大学": 2 common of 2 and 4 characters: P = 1, R = 1/2, F1 = 2/3; SQuAD's rule sees two words
    assert question_scores("北京", ["北京大学"], zh) == (0.0, pytest.approx(2 / 3))
    assert question_scores("北京", ["北京大学"], squad_tokens) == (0.0, 0.0)
    with pytest.raises(ValueError, match="knows no language 'fr'"):
        mlqa_tokens("le chat", "fr")


def test_prediction_files_are_scored_with_their_sets_rule(tmp_path):
    rows = [{"id": "1", "lang": "zh", "gold": ["北京大学"], "pred": "北京"},
            {"id": "2", "lang": "zh", "gold": ["上海"], "pred": "上海。"}]
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"
    (tmp_path / "mlqa.zh.jsonl").write_text(text, encoding="utf-8")
    (tmp_path / "xquad.zh.jsonl").write_text(text, encoding="utf-8")
    mlqa = scores_of_file(tmp_path / "mlqa.zh.jsonl")
    assert mlqa["f1"] == pytest.approx(100 * (2 / 3 + 1) / 2) and mlqa["em"] == pytest.approx(50.0)
    squad = scores_of_file(tmp_path / "xquad.zh.jsonl")   # "。" is not ASCII punctuation: no match at all
    assert squad["f1"] == 0.0 and squad["n"] == 2
    (tmp_path / "mlqa.fr.jsonl").write_text(text, encoding="utf-8")
    with pytest.raises(BadInput, match="knows no language 'fr'"):
        scores_of_file(tmp_path / "mlqa.fr.jsonl")
    (tmp_path / "xquad.en.jsonl").write_text('{"id": "1", "gold": "Paris", "pred": "Paris"}\n', encoding="utf-8")
    with pytest.raises(BadInput, match=r"xquad.en.jsonl:1: not a prediction line"):
        scores_of_file(tmp_path / "xquad.en.jsonl")


# ---------------------------------------------------------------- reader
def test_reader_counts_bad_answers_and_reads_gz(tmp_path):
    bad = qd.BadAnswers()
    qs = qd.read_squad(FIX / "bad_answers.json", bad)
    assert [q.id for q in qs] == ["b1", "b2", "b3", "r1"]
    assert bad.count == 2   # b2 points at character 40 instead of 49; r1 past the end of its context
    assert "bad_answers.json: article 0 ('Bridge'), question 'b2': answer 'grey stone' is not at character 40" in bad.first
    assert qs[0].span == (19, 24) and qs[1].span is None and qs[3].span is None
    assert qs[1].answers == ["grey stone"]   # its text still scores predictions
    good = qd.BadAnswers()
    plain = qd.read_squad(TINY, good)
    assert good.count == 0 and len(plain) == 10 and plain[2].answers == ["the Anvil", "Anvil"]
    gz = tmp_path / "tiny.json.gz"
    gz.write_bytes(gzip.compress(TINY.read_bytes()))
    assert [(q.id, q.span) for q in qd.read_squad(gz, good)] == [(q.id, q.span) for q in plain]
    assert len(qd.read_squad(TINY, good, limit=3)) == 3


def test_reader_bad_input_is_one_line(tmp_path):
    with pytest.raises(BadInput) as e:
        qd.read_squad(FIX / "malformed.json", qd.BadAnswers())
    assert str(e.value).startswith(f"{FIX / 'malformed.json'}:3: corrupt malformed.json (")
    nodata = tmp_path / "nodata.json"
    nodata.write_text('{"version": "1.1", "articles": []}', encoding="utf-8")
    with pytest.raises(BadInput, match=r"\$.data must be a list"):
        qd.read_squad(nodata, qd.BadAnswers())
    noq = tmp_path / "noq.json"
    noq.write_text('{"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "1", "answers": []}]}]}]}')
    with pytest.raises(BadInput, match=r"data\[0\].paragraphs\[0\].qas\[0\].question must be a str"):
        qd.read_squad(noq, qd.BadAnswers())


# ---------------------------------------------------------------- units, answers, windows
def test_units_windows_and_answer_mapping():
    text = "Kelby's (1742) port, pop.3,500m2."
    spans = qd.units(text, "en")
    assert [text[a:b] for a, b in spans] == ["Kelby", "'", "s", "(", "1742", ")", "port", ",", "pop", ".", "3", ",",
                                             "500", "m", "2", "."]
    zh = "我爱北京天安门。"
    zspans = qd.units(zh, "zh")   # jieba's words, then the full stop alone; together they cover the text
    assert "".join(zh[a:b] for a, b in zspans) == zh and zh[zspans[-1][0]:] == "。" and len(zspans) >= 3
    # 10 context subwords, room 4, stride 2: windows at 0, 2, 4, 6 (the last reaches the end)
    assert qd.windows(10, 4, 2) == [(0, 4), (2, 4), (4, 4), (6, 4)]
    assert qd.windows(3, 4, 2) == [(0, 3)]
    # subword 2: min(2, 1) = 1 in window 0, min(0, 3) = 0 in window 1 -> 0; subword 3: min(3, 0) = 0 in window 0,
    # min(1, 2) = 1 in window 1 -> 1; and so on; 8 and 9 are only in window 3
    assert qd._max_context(10, qd.windows(10, 4, 2)).tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    # units of 1, 2, 1, 3 subwords at characters [0,5) [6,10) [11,12) [13,20): first subwords 0, 1, 3, 4
    unit_spans = np.asarray([[0, 5], [6, 10], [11, 12], [13, 20]])
    first_tok = np.asarray([0, 1, 3, 4, 7])
    assert qd.answer_tokens((6, 12), unit_spans, first_tok) == (1, 3)     # units 1..2: subwords 1..3
    assert qd.answer_tokens((7, 8), unit_spans, first_tok) == (1, 2)      # inside unit 1: all of its subwords
    assert qd.answer_tokens((5, 6), unit_spans, first_tok) is None        # only the space between units
    assert qd.answer_tokens((12, 20), unit_spans, first_tok) == (4, 6)    # a leading space is skipped


# ---------------------------------------------------------------- a tiny run from the fixture's own text
def _fixture_run(base: Path) -> Path:
    """prepare -> bpe learn -> bpe apply -> pretrain (tiny) on the sentences of tiny_squad.json (English only)."""
    from xlp_cli.bpe.config import BpeApplyConfig, BpeLearnConfig
    from xlp_cli.bpe.run import apply, learn
    from xlp_cli.prepare.config import PrepareConfig
    from xlp_cli.prepare.run import run as prepare
    from xlp_cli.train.config import PretrainConfig
    from xlp_cli.train.pretrain import run as pretrain

    qs = qd.read_squad(TINY, qd.BadAnswers())
    lines = sorted({s.strip() + "." for q in qs for s in q.context.split(".") if s.strip()} | {q.question for q in qs})
    src = base / "qa.en.txt"
    src.write_text("\n".join(lines * 1) + "\n", encoding="utf-8")
    prepare(from_dict(PrepareConfig, {"inputs": [str(src)], "source": "text", "lang": ["en"], "valid-fraction": 0.2,
                                      "test-fraction": 0.0, "out": str(base / "prep")}))
    learn(from_dict(BpeLearnConfig, {"data": [str(base / "prep")], "codes": 100, "out": str(base / "bpe")}))
    apply(from_dict(BpeApplyConfig, {"data": [str(base / "prep"), str(base / "bpe")], "out": str(base / "ids")}))
    pretrain(from_dict(PretrainConfig, {
        "data": [str(base / "ids")], "out": str(base / "pt"), "lang-encoding": "additive", "preset": "tiny",
        "d-model": 32, "n-heads": 2, "d-ff": 64, "n-layers": 2, "max-steps": 4, "batch-size": 4, "accumulate": 1,
        "bptt": 32, "warmup": 1, "lr": 5e-4, "eval-every": 4, "eval-batches": 1, "num-threads": 1, "seed": 0}))
    return base / "pt"


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    return _fixture_run(tmp_path_factory.mktemp("qa_run"))


def test_gold_spans_round_trip_through_the_codec(fixture_run):
    from xlp_cli.tasks.finetuning import Pretrained

    pre = Pretrained(fixture_run, "best")
    qs = qd.read_squad(TINY, qd.BadAnswers())
    enc = qd.encode(qs, pre.text_encoder, "en", 24, 4, 8)   # small windows: several per context
    assert len(enc) > 2 * len(qs) and enc.unplaced == 0
    placed = set()
    for w in range(len(enc)):
        ids, (s, e) = enc.ids[w], enc.target[w]
        assert len(ids) <= 24 and ids[0] == ids[enc.ctx_start[w] - 1] == ids[-1] == 1   # </s> q </s> ctx </s>
        if s:
            q = enc.questions[enc.question[w]]
            assert enc.ctx_start[w] <= s <= e < len(ids) - 1
            assert qd.answer_text(enc, w, s, e) == q.answers[0]   # the subword span gives the answer's characters
            placed.add(q.id)
    assert placed == {q.id for q in qs}   # every answer fits some window whole


def test_a_tiny_model_overfits_a_tiny_set(fixture_run, tmp_path):
    """Train and evaluate on the same 10 questions: F1 far above the untrained head's (chance-level) F1."""
    from xlp_cli.models.heads import SpanExtractor
    from xlp_cli.tasks.finetuning import Pretrained
    from xlp_cli.tasks.qa.objective import Span, predict
    from xlp_cli.train import engine
    from xlp_cli.train.runtime import Runtime

    rt = Runtime.create("cpu", "off", 1)
    pre = Pretrained(fixture_run, "best")
    enc = qd.encode(qd.read_squad(TINY, qd.BadAnswers()), pre.text_encoder, "en", 64, 32, 16)
    torch.manual_seed(0)
    model = pre.new_head(SpanExtractor, 0.0, rt.device)
    gold = [q.answers for q in enc.questions]

    def score() -> float:
        return qa_scores(zip(gold, predict(model, enc, 0, rt.device, 16, 20, 30)), squad_tokens)["f1"]

    before = score()
    objective = Span(enc, enc, pre.lang_index, 4, 1, 0, 16, 20, 30, rt)
    settings = engine.Settings(max_steps=150, lr=3e-3, warmup=0, seed=1, eval_every=150, log_every=50)
    engine.fit(objective, model, settings, tmp_path / "fit", rt)
    after = score()
    print(f"overfit F1 before {before:.1f} after {after:.1f}")
    assert after >= 80 and before <= 40, (before, after)


def test_cli_bad_input_is_one_line_exit_2(fixture_run, tmp_path, cli):
    r = cli("finetune", "--task", "qa", "--data", str(fixture_run), "--qa-train", str(FIX / "malformed.json"),
            "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and f"{FIX / 'malformed.json'}:3: corrupt malformed.json (" in r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1
    r = cli("finetune", "--task", "qa", "--data", str(fixture_run), "--qa-sets", "squad", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "unknown test set 'squad'" in r.output
    r = cli("finetune", "--task", "qa", "--data", str(fixture_run), "--max-seq-len", "40", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "leaves no room for the context" in r.output


# ---------------------------------------------------------------- the real data, toy size
@pytest.mark.integration
def test_toy_run_on_real_data_is_scored_from_its_predictions(tmp_path_factory, shared_data, cli):
    """`xlp finetune --task qa` on TyDiQA-GoldP en train (150 questions), tested on the XQuAD / MLQA English the
    en+fr run has (30 questions each, two seeds); `xlp evaluate --task qa` recomputes the same numbers."""
    from ft_helpers import build_runs

    from xlp_cli.models.checkpoint import read_config
    from xlp_cli.tasks.qa.finetune import test_files

    run = build_runs(tmp_path_factory.getbasetemp(), shared_data)["xlp"]
    out = tmp_path_factory.mktemp("qa_ft") / "ft"
    r = cli("finetune", "--task", "qa", "--data", str(run), "--out", str(out), "--seeds", "1,2", "--max-train-questions",
            "150", "--max-eval-questions", "30", "--max-seq-len", "96", "--doc-stride", "48", "--max-query-len", "24",
            "--epochs", "1", "--epoch-size", "64", "--batch-size", "16", "--lr", "1e-3", "--warmup", "0", "--threads", "1")
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert res["task"] == "qa" and sorted(res["sets"]) == ["mlqa", "xquad"]   # no sw / ko in an en+fr run
    assert res["files"]["questions"]["xquad.en"] == res["files"]["questions"]["mlqa.en"] == 30
    for qa_set in ("xquad", "mlqa"):
        for seed in ("1", "2"):
            rows = [json.loads(l) for l in (out / "predictions" / f"seed{seed}" / f"{qa_set}.en.jsonl").read_text().splitlines()]
            assert len(rows) == 30 and all(isinstance(r["pred"], str) and r["gold"] for r in rows)
            hand = qa_scores(((r["gold"], r["pred"]) for r in rows),
                             squad_tokens if qa_set == "xquad" else (lambda t: mlqa_tokens(t, "en")))
            assert res["sets"][qa_set]["f1"][seed]["en"] == pytest.approx(hand["f1"])
            assert res["sets"][qa_set]["em"][seed]["en"] == pytest.approx(hand["em"])
        # predictions are spans of their contexts (or empty)
        ctx = {q.id: q.context for q in qd.read_squad(Path(res["files"]["test"][qa_set]["en"]), qd.BadAnswers(), 30)}
        assert all(r["pred"] in ctx[r["id"]] for r in rows)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["task"] == "qa" and manifest["upstream"][0]["stage"] == "pretrain"
    assert read_config(next((out / "runs" / "transfer").iterdir()) / "checkpoints" / "best")["kind"] == "span"
    assert "## xquad" in (out / "report.md").read_text()
    # `xlp evaluate --task qa` reads the prediction files again (XNLI's tables: mean over the two seeds)
    ev = tmp_path_factory.mktemp("qa_ev")
    r = cli("evaluate", "--task", "qa", "--data", str(out), "--out", str(ev))
    assert r.exit_code == 0, r.output
    tables = json.loads((ev / "results.json").read_text())["tables"]
    got = tables["xquad f1"]["runs"]["xlp"]["acc"]["en"]
    assert got["n"] == 2 and got["mean"] == pytest.approx(res["sets"]["xquad"]["f1_mean"]["en"])
    assert tables["mlqa em"]["runs"]["xlp"]["acc"]["en"]["mean"] == pytest.approx(res["sets"]["mlqa"]["em_mean"]["en"])
    # training on MLQA English leaves it out of the MLQA test files; a language no test set has is one line
    mlqa_en = shared_data / "mlqa" / "dev" / "dev-context-en-question-en.json.gz"
    assert "en" in test_files(shared_data, "mlqa", set()) and "en" not in test_files(shared_data, "mlqa", {mlqa_en.resolve()})
    assert set(test_files(shared_data, "tydiqa", set())) == {"en", "ko", "sw"} and len(test_files(shared_data, "xquad", set())) == 11
    r = cli("finetune", "--task", "qa", "--data", str(run), "--out", str(tmp_path_factory.mktemp("x")), "--lang", "fr")
    assert r.exit_code == 2 and "no test file of xquad, mlqa, tydiqa" in r.output
