"""`xlp evaluate --task retrieval` on real Tatoeba / PUD sentences and tiny real pre-trained runs: a model against
itself retrieves 100%, a shuffled target side falls to chance, the report's numbers are the API's."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from ft_helpers import build_runs

from xlp_cli.core.config import from_dict
from xlp_cli.core.errors import BadInput
from xlp_cli.evaluate.run import run as evaluate
from xlp_cli.tasks.retrieval import data as rd
from xlp_cli.tasks.retrieval.config import RetrievalConfig
from xlp_cli.tasks.retrieval.encode import accuracy, load_encoder, nearest, sentence_ids, sentence_vectors

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shared_data):
    return build_runs(tmp_path_factory.getbasetemp(), shared_data)


@pytest.fixture(scope="module")
def xlp(runs):
    return load_encoder(runs["xlp"])


@pytest.fixture(scope="module")
def fr_pairs(shared_data):
    return rd.tatoeba(shared_data / "tatoeba_laser", "fr")


def test_model_against_itself_is_100_percent(xlp, fr_pairs):
    """The same sentences on both sides (distinct after the run's text pipeline) are each their own neighbour."""
    for lang, texts in (("fr", fr_pairs.xx), ("en", fr_pairs.en)):
        ids = sentence_ids(xlp, texts, lang)
        keep = list({tuple(x): i for i, x in enumerate(ids)}.values())   # drop sentences that encode identically
        assert len(keep) > 950
        vecs = sentence_vectors(xlp, [texts[i] for i in keep], lang, xlp.layer(-1))
        assert accuracy(vecs, vecs.copy()) == 100.0
        assert (nearest(vecs, vecs) == np.arange(len(keep))).all()


def test_shuffled_target_side_drops_to_chance(xlp, fr_pairs):
    """Real fr-en pairs retrieve far above chance; with the English side shuffled (gold = a random sentence) the
    hits are those of chance: P(X >= 6) for X ~ Binomial(1000, 1/1000) is 6e-4."""
    layer = xlp.layer(-1)
    fr = sentence_vectors(xlp, fr_pairs.xx, "fr", layer)
    en = sentence_vectors(xlp, fr_pairs.en, "en", layer)
    assert len(fr) == 1000
    aligned = accuracy(fr, en)
    assert aligned > 2.0, aligned  # 20 hits, where chance gives 1 (measured: 6.9%)
    perm = np.random.default_rng(0).permutation(len(en))
    assert (perm == np.arange(len(en))).sum() <= 2   # (almost) every gold pair is broken
    for src, tgt in ((fr, en[perm]), (en[perm], fr)):
        hits = int(round(accuracy(src, tgt) * len(src) / 100))
        assert hits <= 5, hits


def test_middle_layer_and_layer_flag(xlp, runs):
    model = xlp.model
    ids, langs = torch.tensor([[1, 20, 30, 40, 1]]), torch.tensor([0])
    with torch.no_grad():
        assert torch.equal(model(ids, langs, upto=model.config.n_layers), model(ids, langs))
        assert not torch.equal(model(ids, langs, upto=1), model(ids, langs))
    assert xlp.layer(-1) == model.config.n_layers // 2 == 1 and xlp.layer(0) == 0
    with pytest.raises(BadInput, match="--layer 3: the model has 2 layers"):
        xlp.layer(3)


def test_report_numbers_are_the_api_numbers(runs, xlp, shared_data, tmp_path):
    out = tmp_path / "ret"
    cfg = from_dict(RetrievalConfig, {"task": "retrieval", "data": [str(runs["xlp"]), str(runs["additive"])],
                                      "out": str(out), "max-sentences": 100, "threads": 1})
    summary = evaluate(cfg)
    res = json.loads((out / "results.json").read_text())
    assert set(res["tables"]) == {"tatoeba xx->en", "tatoeba en->xx", "pud xx->en", "pud en->xx"}
    pairs = rd.pud(shared_data / "ud_treebanks", "fr", 100)
    assert len(pairs) == 100 and pairs.xx[0].startswith("« Alors que")
    fr = sentence_vectors(xlp, pairs.xx, "fr", 1)
    en = sentence_vectors(xlp, pairs.en, "en", 1)
    got = res["tables"]["pud en->xx"]["runs"]["xlp"]["acc"]["fr"]
    assert got["mean"] == pytest.approx(accuracy(en, fr)) and got["n"] == 1 and got["std"] == 0.0
    assert res["runs"][0]["layer"] == 1 and res["runs"][0]["sets"]["tatoeba"]["fr"]["pairs"] == 100
    assert (out / "report.html").is_file() and (out / "retrieval_tatoeba_xx2en.png").is_file()
    assert json.loads((out / "manifest.json").read_text())["task"] == "retrieval"
    assert not math.isnan(summary["tables"]["tatoeba xx->en"]["runs"]["additive"]["avg"]["mean"])


def test_bad_inputs(runs, tmp_path, cli):
    r = cli("evaluate", "--task", "retrieval", "--data", str(runs["ids"]), "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "expected the output of `xlp pretrain`" in r.output
    r = cli("evaluate", "--task", "retrieval", "--data", str(runs["xlp"]), "--sets", "bucc", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "--sets: unknown set(s) bucc" in r.output
    bad = tmp_path / "tat"
    bad.mkdir()
    (bad / "tatoeba.fra-eng.fra").write_text("un\ndeux\n", encoding="utf-8")
    (bad / "tatoeba.fra-eng.eng").write_text("one\n", encoding="utf-8")
    with pytest.raises(BadInput, match="tatoeba.fra-eng.fra has 2 lines but tatoeba.fra-eng.eng has 1"):
        rd.tatoeba(bad, "fr")
