"""The Encoder-Interlingua-Decoder: architecture (Eq. 1-3, initial state, language-aware positions) and the
switchable losses (Eq. 4-5) behind the ablation rows INTL, +REC, +SIM, +REC+SIM."""

from __future__ import annotations

import math

import pytest
import torch

from xlp_cli.models.factory import build_seq2seq
from xlp_cli.models.interlingua import ABLATIONS, LOSS_TERMS, interlingua_losses, semantic_distance
from xlp_cli.models.seq2seq import EOS, PAD, Seq2SeqConfig, label_smoothed_nll, targets


def _model(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = Seq2SeqConfig.from_preset("tiny", vocab_size=40, langs=["de", "en", "fr"], arch="interlingua",
                                    lang_encoding="none", **kw)
    return build_seq2seq(cfg).eval()


X = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD]])
Y = torch.tensor([[11, 12, 13], [14, 15, 16]])
XL, YL = torch.tensor([0, 0]), torch.tensor([1, 1])


def test_interlingua_output_is_r_states_and_the_decoder_sees_only_it():
    m = _model(intl_positions=7)
    mem = m.encode(targets(X), XL)
    assert mem["out"].shape == (2, 7, 64) and mem["mask"] is None
    # the decoder's result depends on the encoder only through the interlingua states
    logits = m.decode(m.decoder_input(Y), YL, mem)
    other = {"out": mem["out"].clone(), "mask": None}
    assert torch.allclose(logits, m.decode(m.decoder_input(Y), YL, other))
    other["out"] = other["out"] + 0.5
    assert not torch.allclose(logits, m.decode(m.decoder_input(Y), YL, other), atol=1e-4)
    assert len(m.interlingua.layers) == 3 and m.interlingua.intl_embed.shape == (7, 64)


def test_queries_depend_on_the_language_embedding():
    m = _model()
    src = targets(X)
    a = m.encode(src, XL)["out"]
    # same sentence read "as French": different L_emb -> different queries and position offsets
    b = m.encode(src, torch.tensor([2, 2]))["out"]
    assert not torch.allclose(a, b, atol=1e-4)


def test_language_embedding_is_the_decoders_initial_state():
    m = _model()
    first = m.embed_target(torch.zeros(2, 0, dtype=torch.long), YL)
    assert first.shape == (2, 1, 64)
    # position 0 of the decoder is L_tgt * sqrt(d) + PE(0 with the language's offset)
    from xlp_cli.models.seq2seq import sinusoid

    want = m.lang_embed(YL) * m.scale + sinusoid(torch.zeros(2, 1, dtype=torch.long), 64, m.position_offset(YL))[:, 0]
    assert torch.allclose(first[:, 0], want, atol=1e-5)


def test_position_offsets_are_language_specific():
    m = _model()
    o = m.position_offset(torch.tensor([0, 1, 2]))
    assert o.shape == (3, 32)
    assert not torch.allclose(o[0], o[1]) and not torch.allclose(o[1], o[2])


@torch.no_grad()
def test_each_ablation_row_computes_exactly_its_terms():
    m = _model()
    full = interlingua_losses(m, X, XL, Y, YL, LOSS_TERMS, epsilon=0.1)
    for row, terms in ABLATIONS.items():
        out = interlingua_losses(m, X, XL, Y, YL, terms, epsilon=0.1)
        assert tuple(out) == tuple(t for t in LOSS_TERMS if t in terms), row
        for t in terms:  # a term's value does not depend on which other terms are on
            assert math.isclose(float(out[t]["loss"]), float(full[t]["loss"]), rel_tol=1e-6), (row, t)
    assert set(ABLATIONS) == {"INTL", "INTL+REC", "INTL+SIM", "INTL+REC+SIM"}


@torch.no_grad()
def test_terms_are_the_documented_directions():
    m = _model()
    out = interlingua_losses(m, X, XL, Y, YL, LOSS_TERMS, epsilon=0.1)
    mx, my = m.encode(targets(X), XL), m.encode(targets(Y), YL)

    def ce(mem, gold, lang):
        loss, _, n = label_smoothed_nll(m.decode(m.decoder_input(gold), lang, mem), targets(gold), 0.1)
        return float(loss) / n

    assert math.isclose(float(out["s2t"]["loss"]), ce(mx, Y, YL), rel_tol=1e-5)   # x -> y
    assert math.isclose(float(out["t2s"]["loss"]), ce(my, X, XL), rel_tol=1e-5)   # y -> x
    assert math.isclose(float(out["s2s"]["loss"]), ce(mx, X, XL), rel_tol=1e-5)   # x -> x (REC)
    assert math.isclose(float(out["t2t"]["loss"]), ce(my, Y, YL), rel_tol=1e-5)   # y -> y (REC)
    sim = 1 - torch.nn.functional.cosine_similarity(mx["intl"], my["intl"], dim=-1).mean(-1).mean()
    assert math.isclose(float(out["sim"]["loss"]), float(sim), rel_tol=1e-5)
    assert out["s2t"]["n"] == int(Y.ne(PAD).sum()) + 2  # target tokens + </s> per sentence


def test_semantic_distance_is_zero_for_identical_and_two_for_opposite():
    a = torch.randn(3, 10, 16)
    assert torch.allclose(semantic_distance(a, a), torch.zeros(3), atol=1e-6)
    assert torch.allclose(semantic_distance(a, -a), torch.full((3,), 2.0), atol=1e-6)


def test_switching_a_term_off_removes_its_gradient():
    m = _model()
    m.train()
    out = interlingua_losses(m, X, XL, Y, YL, ("s2t",), epsilon=0.0)
    sum(t["loss"] for t in out.values()).backward()
    # with s2t only, the source-language embedding row of "en"... the decoder starts from L_en;
    # "de" is used only by the encoder side: both get gradients; "fr" (unused) gets none
    g = m.lang_embed.weight.grad
    assert g[0].abs().sum() > 0 and g[1].abs().sum() > 0 and float(g[2].abs().sum()) == 0.0
    m.zero_grad()
    out = interlingua_losses(m, X, XL, Y, YL, ("s2s",), epsilon=0.0)
    sum(t["loss"] for t in out.values()).backward()
    g = m.lang_embed.weight.grad  # reconstruction of x touches only x's language
    assert g[0].abs().sum() > 0 and float(g[1].abs().sum()) == 0.0


def test_unknown_term_is_rejected():
    with pytest.raises(ValueError):
        interlingua_losses(_model(), X, XL, Y, YL, ("s2t", "cos"))
    assert EOS == 1
