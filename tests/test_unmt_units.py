"""Unit tests of the UNMT / MASS parts: denoising noise, MASS spans, back-translation's mode, VLE on a decoder,
the XLM-style decoder initialisation, multi-bleu BLEU, the loss-weight schedules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xlp_cli.artifacts.special_ids import BOS, EOS, MASK, PAD
from xlp_cli.core.errors import BadInput
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder
from xlp_cli.models.search import greedy
from xlp_cli.models.seq2seq import Seq2Seq, Seq2SeqConfig, targets
from xlp_cli.tasks.unmt.config import lambda_at, parse_lambda
from xlp_cli.tasks.unmt.noise import add_noise
from xlp_cli.tasks.unmt.objective import back_translate
from xlp_cli.train.objectives.mass import span_batch, spans

V = 60
VOC = [list(range(14, 24)), list(range(30, 40))]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one intra-op thread (two threads on a busy 2-core machine wait on each other)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def sentences(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(14, V, size=int(rng.integers(2, 15))) for _ in range(n)]


def xlm_seq2seq(encoding: str = "additive", style: str = "adding") -> Seq2Seq:
    torch.manual_seed(0)
    enc = TransformerEncoder(ModelConfig(vocab_size=V, langs=["de", "en"], lang_encoding=encoding,
                                         encoding_options={"vle_style": style, "vle_k": 10}, d_model=32, n_heads=4,
                                         d_ff=64, n_positions=64, dropout=0.1, attention_dropout=0.1), vocab_ids=VOC)
    return Seq2Seq(Seq2SeqConfig.like_encoder(enc.config), enc)


# ---------------------------------------------------------------- denoising noise
def test_noise_is_deterministic_under_a_seed_and_follows_xlm() -> None:
    sents = sentences(400)
    a = add_noise(sents, np.random.default_rng(7))
    b = add_noise(sents, np.random.default_rng(7))
    c = add_noise(sents, np.random.default_rng(8))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert any(not np.array_equal(x, y) for x, y in zip(a, c))
    # shuffle only: a permutation in which no token moves k = 3 or more positions
    for s, t in zip(sents, add_noise(sents, np.random.default_rng(1), 3.0, 0.0, 0.0)):
        assert sorted(s.tolist()) == sorted(t.tolist())
        pos = {}
        for i, tok in enumerate(s.tolist()):
            pos.setdefault(tok, []).append(i)
        moved = [min(abs(j - i) for i in pos[tok]) for j, tok in enumerate(t.tolist())]
        assert max(moved) < 3
    # drop only: about 10% fewer tokens, never an empty sentence; blank only: about 10% MASK, same length
    dropped = add_noise(sents, np.random.default_rng(2), 0.0, 0.1, 0.0)
    n, kept = sum(len(s) for s in sents), sum(len(s) for s in dropped)
    assert all(len(s) >= 1 for s in dropped) and 0.85 < kept / n < 0.95
    blanked = add_noise(sents, np.random.default_rng(3), 0.0, 0.0, 0.1)
    assert [len(s) for s in blanked] == [len(s) for s in sents]
    share = sum(int((s == MASK).sum()) for s in blanked) / n
    assert 0.07 < share < 0.13


def test_loss_weight_schedules_are_xlms() -> None:
    pts = parse_lambda("0:1,100000:0.1,300000:0")
    assert lambda_at(pts, 0) == 1 and lambda_at(pts, 50000) == pytest.approx(0.55)
    assert lambda_at(pts, 200000) == pytest.approx(0.05) and lambda_at(pts, 10**6) == 0
    assert lambda_at(parse_lambda("1"), 123) == 1
    for bad in ("x", "5:1", "0:1,0:2", "0:-1"):
        with pytest.raises(BadInput):
            parse_lambda(bad)


# ---------------------------------------------------------------- MASS
@pytest.mark.parametrize("prefix", [0, 1])
def test_mass_batch_masks_one_half_span_and_decodes_it_at_its_positions(prefix: int) -> None:
    sents = sentences(200, 1)
    lens = [len(s) for s in sents]
    sp = spans(lens, 0.5, np.random.default_rng(5))
    assert all(m == max(1, round(n * 0.5)) and 0 <= a <= n - m for (a, m), n in zip(sp, lens))
    starts = np.array([a == 0 for a, _ in sp]) & np.array([n > 2 for n in lens])
    assert 0.15 < starts.mean() < 0.5  # 20% forced to the start, plus the random ones that land there
    b = span_batch(sents, prefix, 0.5, np.random.default_rng(5), torch.Generator().manual_seed(0), V, (0.8, 0.1, 0.1))
    for i, (s, (a, m)) in enumerate(zip(sents, sp)):
        src = b["src"][i]
        assert src[len(s)] == EOS and torch.equal(src[:a], torch.from_numpy(s[:a]))
        assert torch.equal(src[a + m:len(s)], torch.from_numpy(s[a + m:]))
        gold = b["gold"][i][b["gold"][i] != PAD].tolist()
        assert gold == s[a:a + m].tolist()  # the decoder predicts exactly the span
        prev = b["prev"][i][: m - (prefix if a == 0 else 0)]
        full = [BOS] + s.tolist()
        lo = max(a, prefix)
        assert prev.tolist() == full[lo:a + m] and b["positions"][i][: len(prev)].tolist() == list(range(lo, a + m))
    masked = sum(int((b["src"][i][a:a + m] == MASK).sum()) for i, (a, m) in enumerate(sp))
    assert 0.7 < masked / sum(m for _, m in sp) < 0.9


# ---------------------------------------------------------------- back-translation
def test_back_translation_generates_without_gradient_in_eval_mode_and_restores_train() -> None:
    model = xlm_seq2seq()
    model.train()
    seen = []
    hook = model.decoder[0].register_forward_hook(
        lambda mod, args, out: seen.append((torch.is_grad_enabled(), mod.training)))
    x = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(s) for s in sentences(6)], batch_first=True,
                                        padding_value=PAD)
    y = back_translate(model, x, 0, 1)
    hook.remove()
    assert seen and all(state == (False, False) for state in seen)  # every generation step: no grad, eval mode
    assert model.training and all(m.training for m in model.modules())
    assert not y.requires_grad and y.size(0) == 6
    # sampled generation is reproducible from its generator
    g = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    assert torch.equal(back_translate(model, x, 0, 1, 1.0, g()), back_translate(model, x, 0, 1, 1.0, g()))


# ---------------------------------------------------------------- VLE on a decoder, XLM-style decoder init
@pytest.mark.parametrize("style", ["adding", "padding"])
def test_vle_tells_the_decoder_the_target_language(style: str, tmp_path) -> None:
    cfg = Seq2SeqConfig.from_preset("tiny", vocab_size=V, langs=["de", "en"], lang_encoding="vle",
                                    encoding_options={"vle_style": style, "vle_k": 10})
    model = Seq2Seq(cfg, vocab_ids=VOC).eval()
    assert model.decoder_prefix() == (1 if style == "padding" else 0)
    assert model.config.encoding_options["vle_sizes"] == [10, 10]
    src = targets(torch.tensor([[20, 21, 22, 23]]))
    prev = model.decoder_input(torch.tensor([[31, 32]]))
    mem = model.encode(src, torch.tensor([0]))
    to_de = model.decode(prev, torch.tensor([0]), mem)
    to_en = model.decode(prev, torch.tensor([1]), mem)
    assert not torch.allclose(to_de, to_en)  # the decoder knows which language to produce
    ckpt.save(tmp_path / "c", model)
    back = ckpt.load_model(tmp_path / "c").eval()
    assert torch.equal(back.decode(prev, torch.tensor([1]), back.encode(src, torch.tensor([0]))), to_en)
    h = greedy(back, src, torch.tensor([0]), torch.tensor([1]))
    assert len(h) == 1


def test_decoder_starts_from_the_mlm_encoder_as_xlm() -> None:
    model = xlm_seq2seq("vle", "adding")
    before = model.decoder[0].cross.q.weight.clone()
    model.init_decoder_from_encoder()
    enc = model.xlm_encoder
    for dec, src in zip(model.decoder, enc.layers):
        assert torch.equal(dec.attn.qkv.weight, src.attn.qkv.weight) and torch.equal(dec.ffn.lin1.weight, src.ffn.lin1.weight)
    assert torch.equal(model.tgt_encoding.W, enc.lang_encoding.W)
    assert model.tgt_encoding.W is not enc.lang_encoding.W  # its own parameters, starting equal
    assert torch.equal(model.pos_embed.weight, enc.pos_embed.weight[: model.pos_embed.num_embeddings])
    assert torch.equal(model.decoder[0].cross.q.weight, before)  # cross-attention stays random


def test_multi_bleu_has_no_smoothing() -> None:
    from xlp_cli.tasks.translation.bleu import multi_bleu

    hyp, ref = ["a b c d e f"], ["a b c d e f"]
    assert multi_bleu().corpus_score(hyp, [ref]).score == pytest.approx(100.0)
    # three matching unigrams, one bigram, no trigram: multi-bleu.perl prints 0 (log of a zero precision)
    assert multi_bleu().corpus_score(["a b x c"], [["a b c y"]]).score == 0.0
    # equal lengths (no brevity penalty), 4/5 unigrams, 3/4 bigrams, 2/3 trigrams, 1/2 4-grams: exp(mean log p_n)
    h, r = "the cat sat on it", "the cat sat on mat"
    p = [4 / 5, 3 / 4, 2 / 3, 1 / 2]
    assert multi_bleu().corpus_score([h], [[r]]).score == pytest.approx(100 * float(np.exp(np.mean(np.log(p)))))


# ---------------------------------------------------------------- every encoding through one UNMT step
@pytest.mark.parametrize("encoding,style", [("none", "adding"), ("additive", "adding"), ("attaching", "adding"),
                                            ("xlp", "adding"), ("vle", "adding"), ("vle", "padding")])
def test_one_unmt_step_trains_both_sides_language_signal(encoding: str, style: str, tmp_path) -> None:
    from types import SimpleNamespace

    from pretrain_helpers import write_ids

    from xlp_cli.artifacts.shards import shard_paths
    from xlp_cli.bpe.dictionary import Dictionary
    from xlp_cli.tasks.unmt.objective import KINDS, Unmt
    from xlp_cli.train.runtime import Runtime
    from xlp_cli.train.sentences import SentenceStream

    dico = Dictionary.from_counts([(f"w{i}", 100 - i) for i in range(V - 14)])
    ids = write_ids(tmp_path / "ids", dico, {"train": {"de": [s.tolist() for s in sentences(20, 1)],
                                                       "en": [s.tolist() for s in sentences(20, 2)]}})
    model = xlm_seq2seq(encoding, style)
    model.init_decoder_from_encoder()
    cfg = SimpleNamespace(batch_sentences=4, word_shuffle=3.0, word_dropout=0.1, word_blank=0.1, word_pred=0.15,
                          lambda_ae="1", lambda_bt="1", lambda_mlm="1", label_smoothing=0.1, bt_temperature=0.0)
    streams = {k: {lang: SentenceStream(shard_paths(ids / "train" / lang), lang, 1, 10 * j + i, V, 12)
                   for i, lang in enumerate(("de", "en"))} for j, k in enumerate(KINDS)}
    obj = Unmt(cfg, 1, ["de", "en"], {"de": 0, "en": 1}, streams, V, Runtime.create("cpu", "none", 0))
    model.train()
    loss, logs = obj.loss(model, next(iter(obj.micro_batches(0, 1))))
    loss.backward()
    assert torch.isfinite(loss) and {"ae_de", "bt_en", "mlm_de"} <= set(logs) and logs["tokens"] > 0
    for side in (model.xlm_encoder.lang_encoding, model.tgt_encoding):  # source and target language signals learn
        for p in side.language_parameters():
            assert p.grad is not None and float(p.grad.abs().sum()) > 0
    assert model.decoder[0].cross.q.weight.grad is not None
