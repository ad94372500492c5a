"""`xlp evaluate --task lexicon` and `--task analysis` on tiny runs pre-trained through the real stages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from ft_helpers import build_runs

from xlp_cli.core.errors import BadInput
from xlp_cli.evaluate.run import run
from xlp_cli.models.checkpoint import load_pretrained
from xlp_cli.tasks.common import EVALUATE

pytestmark = [pytest.mark.integration]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shared_data):
    return build_runs(tmp_path_factory.getbasetemp(), shared_data)


def _eval(runs, out: Path, **kw) -> dict:
    values = {"data": [str(runs["additive"]), str(runs["xlp"])], "out": str(out)}
    values.update(kw)
    return run(EVALUATE.build(values))


def test_lexicon_identical_words_known_numbers(runs, tmp_path):
    d = tmp_path / "dicts"
    d.mkdir()
    # hand-made: words spelled the same in French and English share their subwords -> raw cosine exactly 1
    words = ["radio", "taxi", "piano", "hotel", "television"]
    (d / "fr-en.test").write_text("".join(f"{w}\t{w}\n" for w in words), encoding="utf-8")
    s = _eval(runs, tmp_path / "lex", task="lexicon", **{"dict-dir": str(d)})
    for name in ("additive", "xlp"):
        r = s["table"]["runs"][name]["fr"]
        assert r["covered_pairs"] == 5
        assert r["mean_cos"] == pytest.approx(1.0, abs=1e-6)
        assert r["p1"] == pytest.approx(100.0) and r["p5"] == pytest.approx(100.0)
    # encoded: each side goes through its own language's encoding, so identical words no longer coincide
    s = _eval(runs, tmp_path / "lex2", task="lexicon", embedding="encoded", **{"dict-dir": str(d)})
    assert s["table"]["runs"]["additive"]["fr"]["mean_cos"] < 0.999
    assert (tmp_path / "lex2" / "lexicon_cosine.png").read_bytes().startswith(PNG_MAGIC)


def test_lexicon_real_dictionary(runs, tmp_path, shared_data):
    s = _eval(runs, tmp_path / "lex", task="lexicon", **{"dict-split": "testsmall", "max-pairs": 200})
    res = json.loads((tmp_path / "lex" / "results.json").read_text())
    assert res["langs"] == ["fr"]
    for name in ("additive", "xlp"):
        r = res["runs"][name]["fr"]
        assert r["pairs"] == 200 and 0 < r["covered_pairs"] <= 200
        assert -1 <= r["mean_cos"] <= 1 and 0 <= r["p1"] <= r["p5"] <= 100
    assert "fr-en" in (tmp_path / "lex" / "report.md").read_text()
    with pytest.raises(BadInput, match="language 'de' has no pre-training data"):
        _eval(runs, tmp_path / "lex3", task="lexicon", lang=["de"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "fr-en.test").write_text("chat\tcat\nseulement-un-mot\ntuso\t\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"fr-en\.test:2: mostly unreadable: 2 of 3 lines"):
        _eval(runs, tmp_path / "lex4", task="lexicon", **{"dict-dir": str(bad)})


def test_analysis_figures_and_numbers(runs, tmp_path):
    s = _eval(runs, tmp_path / "an", task="analysis", words=["water"], sentence="the house is red .")
    res = json.loads((tmp_path / "an" / "results.json").read_text())
    add, xlp = res["runs"]["additive"], res["runs"]["xlp"]
    # Fig. 4 for additive, recomputed from the weights: cos(e + L[en], e + L[fr]) averaged over subwords
    model = load_pretrained(runs["additive"])
    from xlp_cli.bpe.encoder import TextEncoder

    ids = torch.as_tensor(np.array(TextEncoder.from_folder(runs["additive"]).encode("water", "en")), dtype=torch.long)
    e = model.embed.weight[ids].detach()
    lang = model.lang_encoding.lang_emb.weight.detach()
    v_en, v_fr = (e + lang[0]).mean(0), (e + lang[1]).mean(0)
    expect = torch.nn.functional.cosine_similarity(v_en, v_fr, dim=0).item()
    m = np.asarray(add["fig4"]["words"]["water"]["matrix"])
    assert m.shape == (2, 2) and np.allclose(np.diag(m), 1.0, atol=1e-4)
    assert m[0, 1] == pytest.approx(expect, abs=1e-4)
    # Fig. 5: 9 topic words, within/across topic means
    assert len(add["fig5"]["matrix"]) == len(add["fig5"]["words"]) >= 2
    # Fig. 2 only for a language-embedding table; VLE histogram only for vle
    assert len(add["fig2"]["word_to_language"]) == len(add["fig2"]["tokens"]) >= 4
    assert "skipped" in xlp["fig2"] and "skipped" in add["vle"]
    from PIL import Image

    for p in res["plots"]:
        blob = (tmp_path / "an" / p).read_bytes()
        assert blob.startswith(PNG_MAGIC)
        Image.open(tmp_path / "an" / p).verify()
    assert {"analysis_additive_fig4.png", "analysis_additive_fig2.png", "analysis_xlp_fig5.png"} <= set(res["plots"])
    assert s["task"] == "analysis"
