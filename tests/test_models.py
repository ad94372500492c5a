"""The models library: encoder shapes, the five language encodings, checkpoints."""

from __future__ import annotations

import pytest
import torch

from xlp_cli.core.errors import BadInput
from xlp_cli.models.checkpoint import load_model, load_pretrained, load_weights, save
from xlp_cli.models.encoder import PRESETS, ModelConfig, TransformerEncoder
from xlp_cli.models.encodings import ENCODINGS, build_encoding

V = 120
VOC = [[20, 21, 22, 23], [30, 31, 32]]  # VLE top-K ids of language 0 and 1


def make(enc: str, style: str = "adding", seed: int = 0, **kw) -> TransformerEncoder:
    torch.manual_seed(seed)
    cfg = ModelConfig.from_preset("tiny", vocab_size=V, langs=["en", "fr"], lang_encoding=enc,
                                  encoding_options={"vle_style": style}, **kw)
    return TransformerEncoder(cfg, vocab_ids=VOC if enc == "vle" else None).eval()


def batch(b: int = 3, t: int = 9, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(40, V, (b, t), generator=g)


@pytest.mark.parametrize("enc,style,prefix", [("none", "adding", 0), ("additive", "adding", 0),
                                              ("attaching", "adding", 1), ("xlp", "adding", 0),
                                              ("vle", "adding", 0), ("vle", "padding", 1)])
def test_shapes_and_prefix(enc: str, style: str, prefix: int) -> None:
    m = make(enc, style)
    ids = batch()
    h = m(ids, torch.tensor([0, 1, 0]))
    assert h.shape == (3, 9 + prefix, 32)
    assert m.prefix_len == prefix
    assert m.token_states(h).shape == (3, 9, 32)
    assert m.pooled(h).shape == (3, 32)
    assert m.mlm_logits(m.token_states(h)).shape == (3, 9, V)
    # per-token languages [B, T] are accepted too
    assert m(ids, torch.zeros(3, 9, dtype=torch.long)).shape == h.shape


def test_attaching_adds_exactly_one_position_and_keeps_padding_masked() -> None:
    m = make("attaching")
    ids = batch(2, 6)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    h = m(ids, torch.tensor([0, 1]), pad_mask=pad)
    assert h.shape[1] == 7
    assert torch.all(h[1, 5:] == 0)  # padded tokens (shifted by the prefix) stay zero
    # padding does not change the states of the real tokens
    h_short = m(ids[1:, :4], torch.tensor([1]))
    assert torch.allclose(h[1, :5], h_short[0], atol=1e-5)


def test_xlp_identity_init_equals_none() -> None:
    none, xlp = make("none"), make("xlp")
    state = {k: v for k, v in xlp.state_dict().items() if not k.startswith("lang_encoding.")}
    none.load_state_dict(state)
    ids = batch()
    for langs in (torch.tensor([0, 1, 1]), torch.tensor([1, 1, 1])):
        assert torch.allclose(none(ids, langs), xlp(ids, langs), atol=1e-6)
    enc = xlp.lang_encoding
    assert torch.equal(enc.weight[1], torch.eye(32)) and torch.all(enc.bias == 0)


@pytest.mark.parametrize("enc,style", [("additive", "adding"), ("xlp", "adding"), ("vle", "adding"),
                                       ("vle", "padding"), ("attaching", "adding")])
def test_languages_differ_for_same_ids(enc: str, style: str) -> None:
    m = make(enc, style)
    if enc == "xlp":  # identity at init by design; a trained model's projections differ per language
        with torch.no_grad():
            m.lang_encoding.weight.add_(0.1 * torch.randn_like(m.lang_encoding.weight))
    ids = batch()
    a = m(ids, torch.zeros(3, dtype=torch.long))
    b = m(ids, torch.ones(3, dtype=torch.long))
    assert not torch.allclose(a, b, atol=1e-4)


def test_none_ignores_language() -> None:
    m = make("none")
    ids = batch()
    assert torch.equal(m(ids, torch.zeros(3, dtype=torch.long)), m(ids, torch.ones(3, dtype=torch.long)))


def test_xlp_mixed_languages_match_per_language() -> None:
    m = make("xlp")
    with torch.no_grad():
        m.lang_encoding.weight.add_(0.1 * torch.randn_like(m.lang_encoding.weight))
        m.lang_encoding.bias.add_(0.1)
    ids = batch(2, 8)
    langs = torch.tensor([[0] * 5 + [1] * 3, [1] * 8])  # a TLM-like row and a monolingual row
    emb = m.embed(ids)
    mixed = m.lang_encoding.on_words(emb, langs, m.embed)
    assert torch.allclose(mixed[0, :5], m.lang_encoding.project(emb[0, :5], 0), atol=1e-6)
    assert torch.allclose(mixed[0, 5:], m.lang_encoding.project(emb[0, 5:], 1), atol=1e-6)
    assert torch.allclose(mixed[1], m.lang_encoding.project(emb[1], 1), atol=1e-6)


@pytest.mark.parametrize("style", ["adding", "padding"])
def test_vle_gradients_reach_vocabulary_embeddings(style: str) -> None:
    m = make("vle", style).train()
    ids = batch()  # ids >= 40: disjoint from the VLE vocabularies (20..32)
    out = m(ids, torch.tensor([0, 0, 1]))
    out.pow(2).sum().backward()
    g = m.embed.weight.grad
    for i in VOC[0] + VOC[1]:
        assert g[i].abs().sum() > 0, f"no gradient for Voc id {i}"
    assert g[24:30].abs().sum() == 0 and g[33:40].abs().sum() == 0  # neither input nor Voc
    assert m.lang_encoding.W.grad.abs().sum() > 0


def test_vle_equation() -> None:
    m = make("vle")
    enc = m.lang_encoding
    with torch.no_grad():
        e_v = enc.language_vectors(m.embed)
        for lang, ids in enumerate(VOC):
            e_voc = m.embed.weight[ids].mean(0)
            expect = torch.sigmoid(enc.W[lang] @ e_voc) * e_voc
            assert torch.allclose(e_v[lang], expect, atol=1e-6)


def test_vle_only_present_languages_are_computed_in_training() -> None:
    m = make("vle").train()
    enc = m.lang_encoding
    full = enc.language_vectors(m.embed)
    part = enc.language_vectors(m.embed, present=[1])
    assert torch.allclose(part[1], full[1], atol=1e-6) and torch.all(part[0] == 0)
    part[1].sum().backward()
    g = m.embed.weight.grad.to_dense()  # sparse when VLE is the only path to the embedding
    assert g[VOC[1]].abs().sum() > 0 and g[VOC[0]].abs().sum() == 0


def test_vle_cached_at_inference_and_refreshed_after_update() -> None:
    m = make("vle")
    enc = m.lang_encoding
    with torch.no_grad():
        a = enc.language_vectors(m.embed)
        assert enc.language_vectors(m.embed) is a  # cached constant
        m.embed.weight[20].add_(1.0)  # weights changed: recomputed
        b = enc.language_vectors(m.embed)
    assert b is not a and not torch.allclose(a[0], b[0])
    m.train()
    c1, c2 = enc.language_vectors(m.embed), enc.language_vectors(m.embed)
    assert c1 is not c2 and c1.requires_grad  # training: once per forward, with gradients


def test_build_encoding_table_and_errors() -> None:
    assert set(ENCODINGS) == {"none", "additive", "attaching", "xlp", "vle"}
    assert build_encoding("xlp", 8, 3, {"xlp_bias": False, "vle_style": "adding"}).bias is None
    with pytest.raises(ValueError):
        build_encoding("bogus", 8, 2)
    with pytest.raises(ValueError):
        build_encoding("vle", 8, 2)  # no vocabulary


def test_presets() -> None:
    assert PRESETS["xlm15"] == dict(n_layers=12, d_model=1024, n_heads=8, d_ff=4096, n_positions=520)
    cfg = ModelConfig.from_preset("small", vocab_size=10, n_layers=1)
    assert cfg.n_layers == 1 and cfg.d_model == 256 and cfg.preset == "small"


@pytest.mark.parametrize("enc", ["xlp", "vle"])
def test_checkpoint_roundtrip(tmp_path, enc: str) -> None:
    m = make(enc, "padding", pre_ln=True)
    save(tmp_path / "checkpoints" / "best", m)
    loaded = load_pretrained(tmp_path, "best")
    ids = batch()
    langs = torch.tensor([1, 0, 1])
    assert torch.equal(m(ids, langs), loaded(ids, langs))
    assert loaded.config.langs == ["en", "fr"] and loaded.config.pre_ln


def test_corrupt_or_mismatched_checkpoint_is_bad_input(tmp_path) -> None:
    m = make("additive")
    save(tmp_path, m)
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInput, match="corrupt"):
        load_model(tmp_path)
    save(tmp_path, m)
    other = ModelConfig.from_preset("tiny", vocab_size=V + 1, langs=["en", "fr"])
    with pytest.raises(BadInput, match="shape"):
        load_weights(TransformerEncoder(other), tmp_path)
    with pytest.raises(BadInput, match="no 'best' checkpoint"):
        load_pretrained(tmp_path / "nothing")


def test_torch_free_name_tables_match_the_classes():
    from xlp_cli.models.encoding_registry import ENCODING_NAMES
    from xlp_cli.models.encodings import LanguageEncoding, encoding_class
    from xlp_cli.models.presets import ENCODER_PRESETS
    from xlp_cli.train.config import PretrainConfig

    assert ENCODING_NAMES == tuple(ENCODINGS) == ("none", "additive", "attaching", "xlp", "vle")
    for name in ENCODING_NAMES:  # every registry line names a class that carries it
        cls = encoding_class(name)
        assert issubclass(cls, LanguageEncoding) and cls.spec is ENCODINGS[name]
    fields = {f.name: f for f in __import__("dataclasses").fields(PretrainConfig)}
    assert fields["lang_encoding"].metadata["choices"] == ENCODING_NAMES
    assert fields["preset"].metadata["choices"] == ("auto", *PRESETS) == ("auto", *ENCODER_PRESETS)
    assert {"xlp_bias", "vle_style", "vle_k"} <= set(fields)  # each encoding's options are flags


def test_a_checkpoint_with_a_shared_tensor_is_the_same_bytes_every_time(tmp_path) -> None:
    """safetensors writes the header's metadata (the name a shared tensor is stored under) in a random order per
    save; `save` sorts it, so equal weights give equal files (resume gives the clean run's bytes)."""
    import hashlib
    import types

    class Tied(torch.nn.Module):
        KIND = "test"

        def __init__(self) -> None:
            super().__init__()
            self.config = types.SimpleNamespace(to_dict=lambda: {})
            self.embed, self.out = torch.nn.Embedding(7, 4), torch.nn.Linear(4, 7, bias=False)
            self.out.weight = self.embed.weight

    m = Tied()
    sums = set()
    for i in range(8):
        save(tmp_path / str(i), m)
        sums.add(hashlib.sha256((tmp_path / str(i) / "model.safetensors").read_bytes()).hexdigest())
    assert len(sums) == 1
    fresh = Tied()
    load_weights(fresh, tmp_path / "0")
    assert torch.equal(fresh.out.weight, m.embed.weight) and fresh.out.weight is fresh.embed.weight
