"""The encoder-decoder, its language encodings, and decoding (small random models: fast, no data)."""

from __future__ import annotations

import math

import pytest
import torch

from xlp_cli.core.errors import BadInput
from xlp_cli.models.factory import build_seq2seq
from xlp_cli.models.search import beam_search, greedy, length_normalized, score_hypothesis
from xlp_cli.models.seq2seq import BOS, EOS, PAD, PRESETS, Seq2SeqConfig, label_smoothed_nll, targets

ENCODINGS = ["attaching", "additive", "xlp", "none"]


def _model(enc: str, arch: str = "transformer", seed: int = 0, **kw):
    torch.manual_seed(seed)
    cfg = Seq2SeqConfig.from_preset("tiny", vocab_size=40, langs=["de", "en", "fr"], arch=arch, lang_encoding=enc, **kw)
    m = build_seq2seq(cfg).eval()
    if enc in ("additive", "attaching"):  # random (not zero-like) language vectors for the sensitivity checks
        for e in (m.src_encoding, m.tgt_encoding):
            torch.nn.init.normal_(e.lang_emb.weight, std=1.0)
    if enc == "xlp":
        for e in (m.src_encoding, m.tgt_encoding):
            torch.nn.init.normal_(e.weight, std=0.3)
    return m


def _batch():
    src = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD]])
    tgt = torch.tensor([[11, 12, 13], [14, 15, PAD]])
    return src, torch.tensor([0, 2]), tgt, torch.tensor([1, 1])


def test_presets_follow_table7():
    p = PRESETS["iwslt"]
    assert (p["enc_layers"], p["dec_layers"], p["d_model"], p["ffn"], p["heads"], p["dropout"]) == (6, 6, 512, 1024, 4, 0.3)


@pytest.mark.parametrize("enc", ENCODINGS)
def test_incremental_decoding_matches_full(enc):
    m = _model(enc)
    src, sl, tgt, tl = _batch()
    mem = m.encode(src, sl)
    full = m.decode(m.decoder_input(tgt), tl, mem)
    assert full.shape == (2, tgt.size(1) + 1, 40)
    cache, outs = [], []
    start = m.decoder_input(tgt[:, :0])
    for t in range(tgt.size(1) + 1):
        outs.append(m.decode(torch.cat([start, tgt[:, :t]], dim=1), tl, mem, cache))
    assert torch.allclose(torch.cat(outs, 1), full, atol=1e-5)


def test_target_language_signal_as_documented():
    # attaching: the decoder starts from L_tgt instead of <s>; the others start from <s>
    tgt = torch.tensor([[11, 12]])
    assert _model("attaching").decoder_input(tgt).tolist() == [[11, 12]]
    for enc in ("additive", "xlp", "none"):
        assert _model(enc).decoder_input(tgt).tolist() == [[BOS, 11, 12]]
    assert _model("interlingua" and "none", arch="interlingua").decoder_input(tgt).tolist() == [[11, 12]]
    src, sl, tgt, tl = _batch()
    for enc in ("attaching", "additive", "xlp"):
        m = _model(enc)
        a = m(src, sl, tgt, tl)
        b = m(src, sl, tgt, torch.tensor([2, 2]))  # another target language
        c = m(src, torch.tensor([1, 1]), tgt, tl)  # another source language
        assert not torch.allclose(a, b, atol=1e-4), enc
        assert not torch.allclose(a, c, atol=1e-4), enc
    m = _model("none")
    assert torch.allclose(m(src, sl, tgt, tl), m(src, sl, tgt, torch.tensor([2, 2])))


def test_attaching_adds_one_encoder_position():
    src, sl, _, _ = _batch()
    assert _model("attaching").encode(src, sl)["out"].shape[1] == src.size(1) + 1
    assert _model("xlp").encode(src, sl)["out"].shape[1] == src.size(1)


def test_padding_does_not_change_outputs():
    m = _model("xlp")
    src = torch.tensor([[9, 10, EOS]])
    padded = torch.tensor([[9, 10, EOS, PAD, PAD]])
    tgt, sl, tl = torch.tensor([[14, 15]]), torch.tensor([0]), torch.tensor([1])
    assert torch.allclose(m(src, sl, tgt, tl), m(padded, sl, tgt, tl), atol=1e-5)


def test_label_smoothed_nll_formula():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 7)
    gold = torch.tensor([[1, 4, PAD], [5, 6, 0]])
    loss, nll, n = label_smoothed_nll(logits, gold, 0.1)
    lp = torch.log_softmax(logits, -1)
    keep = [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    want_nll = -sum(lp[i, j, gold[i, j]] for i, j in keep)
    want = sum(-(0.9 * lp[i, j, gold[i, j]] + 0.1 / 7 * lp[i, j].sum()) for i, j in keep)
    assert n == 5 and math.isclose(float(nll), float(want_nll), rel_tol=1e-5)
    assert math.isclose(float(loss), float(want), rel_tol=1e-5)


def test_targets_append_eos():
    assert targets(torch.tensor([[4, 5, 6], [7, PAD, PAD]])).tolist() == [[4, 5, 6, EOS], [7, EOS, PAD, PAD]]


@pytest.mark.parametrize("enc,arch", [("attaching", "transformer"), ("xlp", "transformer"), ("none", "interlingua")])
def test_beam_one_is_greedy_and_scores_are_normalised_logprobs(enc, arch):
    m = _model(enc, arch, seed=3)
    torch.manual_seed(1)
    src = torch.randint(14, 40, (5, 6))
    src[:, -1] = EOS
    src[2, 3:] = PAD
    src[2, 3] = EOS
    sl, tl = torch.zeros(5, dtype=torch.long), torch.ones(5, dtype=torch.long)
    g = greedy(m, src, sl, tl, max_len_a=0.5, max_len_b=3)
    b1 = beam_search(m, src, sl, tl, beam=1, max_len_a=0.5, max_len_b=3)
    assert [h.tokens for h in g] == [h[0].tokens for h in b1]
    for alpha in (0.0, 1.2):
        hyps = beam_search(m, src, sl, tl, beam=4, length_penalty=alpha, max_len_a=0.5, max_len_b=3, n_best=4)
        for i, nbest in enumerate(hyps):
            assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)
            for h in nbest:
                forced = score_hypothesis(m, src[i:i + 1], sl[:1], torch.tensor([h.tokens]), tl[:1])
                assert math.isclose(float(forced), h.logprob, abs_tol=1e-3)
                assert math.isclose(h.score, h.logprob / (len(h.tokens) + 1) ** alpha, rel_tol=1e-6)


def test_length_normalized_prefers_longer_with_larger_alpha():
    short, long_ = (-2.0, 2), (-3.0, 5)  # (logprob, tokens incl. </s>)
    assert length_normalized(*short, 0.0) > length_normalized(*long_, 0.0)
    assert length_normalized(*short, 1.2) < length_normalized(*long_, 1.2)


def test_bad_configs_are_badinput():
    with pytest.raises(BadInput):
        Seq2SeqConfig.from_preset("huge", vocab_size=10, langs=["en"])
    with pytest.raises(BadInput):
        Seq2SeqConfig.from_preset("tiny", vocab_size=10, langs=["en"], xlm_decoder=True)  # needs an XLM encoder
    with pytest.raises(BadInput):
        Seq2SeqConfig.from_preset("tiny", vocab_size=10, langs=["en"], arch="interlingua", lang_encoding="attaching")
    with pytest.raises(BadInput):
        Seq2SeqConfig.from_preset("tiny", vocab_size=10, langs=["en"]).lang_id("zz")
