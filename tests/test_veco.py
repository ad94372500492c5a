"""VECO (docs/veco.md): the encoder's plug-and-play cross-attention and its two streams, the CA-MLM objectives,
plug-in / plug-out XNLI fine-tuning and translation initialised from a VECO run.

Tiny models on synthetic ids for the model properties; a real Multi30k de-en slice (XLM's BPE codes) for the
pre-training -> XNLI -> translation path."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mt_fixture
import pytest
import torch
from pretrain_helpers import real_text, synthetic, write_vocab

from xlp_cli.models.checkpoint import load_pretrained
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder
from xlp_cli.models.veco import Side, plug_out, stack_pair, streams, swap_halves
from xlp_cli.train.objectives.veco import pair_losses, split_pair

ENCODINGS = [("none", {}), ("additive", {}), ("attaching", {}), ("xlp", {}),
             ("vle", {"vle_style": "adding", "vle_k": 3}), ("vle", {"vle_style": "padding", "vle_k": 3})]
VOCAB_IDS = [[14, 15, 16], [30, 31, 32]]
TINY = ["--preset", "tiny", "--bptt", "32", "--batch-size", "4", "--accumulate", "2", "--warmup", "3",
        "--lr", "1e-3", "--log-every", "1", "--seed", "3", "--num-threads", "1", "--eval-batches", "2"]


def tiny(enc: str, opts: dict, cross: bool, seed: int = 0) -> TransformerEncoder:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=60, langs=["en", "fr"], lang_encoding=enc, encoding_options=dict(opts), n_layers=2,
                      d_model=16, n_heads=2, d_ff=32, n_positions=64, cross_attention=cross)
    return TransformerEncoder(cfg, vocab_ids=VOCAB_IDS).eval()


def side(ids: list[list[int]], lang: int) -> Side:
    t = max(map(len, ids))
    x = torch.full((len(ids), t), 2, dtype=torch.long)
    for i, row in enumerate(ids):
        x[i, :len(row)] = torch.tensor(row)
    return Side(x, torch.full_like(x, lang), None, x.eq(2))


X = side([[14, 20, 21, 22, 1], [17, 18, 1]], 0)
Y1 = side([[30, 40, 41, 1], [33, 34, 35, 36, 37, 1]], 1)
Y2 = side([[30, 50, 51, 1], [33, 34, 55, 36, 37, 1]], 1)  # y changed in two tokens


# ----------------------------------------------------------------------------------------------- the model
@pytest.mark.parametrize("enc,opts", ENCODINGS)
def test_unplugged_is_exactly_the_plain_encoder(enc, opts) -> None:
    plain, veco = tiny(enc, opts, False), tiny(enc, opts, True, seed=1)
    extra = set(veco.state_dict()) - set(plain.state_dict())
    assert set(plain.state_dict()) <= set(veco.state_dict()) and extra
    assert all(".cross." in k or ".ln_cross." in k for k in extra)
    missing, unexpected = veco.load_state_dict(plain.state_dict(), strict=False)
    assert set(missing) == extra and not unexpected
    a = plain(X.ids, X.langs, None, X.pad_mask)
    assert torch.equal(a, veco(X.ids, X.langs, None, X.pad_mask))
    stripped = plug_out(veco)  # plug-out fine-tuning: the same weights, no cross-attention tensors
    assert set(stripped.state_dict()) == set(plain.state_dict()) and not stripped.config.cross_attention
    assert torch.equal(a, stripped(X.ids, X.langs, None, X.pad_mask))
    # a plain config (and an old model.json without the key) has the plain state dict
    old = {k: v for k, v in plain.config.to_dict().items() if k != "cross_attention"}
    assert set(TransformerEncoder(ModelConfig.from_dict(old), vocab_ids=VOCAB_IDS).state_dict()) == set(plain.state_dict())


@pytest.mark.parametrize("enc,opts", ENCODINGS)
def test_s_depends_on_the_paired_sentence_and_h_does_not(enc, opts) -> None:
    model = tiny(enc, opts, True)
    b = X.ids.shape[0]
    with torch.no_grad():
        h1, s1 = streams(model, stack_pair(X, Y1))
        h2, s2 = streams(model, stack_pair(X, Y2))
    hx1, hx2, sx1, sx2 = (model.token_states(t[:b]) for t in (h1, h2, s1, s2))
    real = ~stack_pair(X, Y1).pad_mask[:b]
    assert torch.equal(hx1[real], hx2[real])            # h_x: self-attention only, blind to y
    assert not torch.allclose(sx1[real], sx2[real])     # s_x attends to h^L_y
    assert not torch.allclose(sx1[real], hx1[real])
    assert not torch.allclose(model.token_states(h1[b:]), model.token_states(h2[b:]))  # y itself changed


def _s_by_hand(model: TransformerEncoder, pair: Side, memory_of: str) -> torch.Tensor:
    """The s stream written out layer by layer: every layer attends to the partner row's states, taken either
    from the last layer of the h stream (VECO Eq. 7-8: h^L) or from the h stream's input to the same layer."""
    from xlp_cli.models.encodings import extend_pad_mask

    pad = extend_pad_mask(pair.pad_mask, model.prefix_len)
    mask = ~pad[:, None, None, :]
    h = model(pair.ids, pair.langs, pair.positions, pair.pad_mask, upto=0)   # h^0 = s^0: the embeddings
    s, hs = h, [h]
    for layer in model.layers:
        hs.append(layer(hs[-1], mask).masked_fill(pad[..., None], 0.0))
    h_last = model.ln_final(hs[-1])
    for l, layer in enumerate(model.layers):
        mem = swap_halves(h_last if memory_of == "last" else hs[l])
        s = layer(s, mask, memory=mem, memory_mask=swap_halves(mask)).masked_fill(pad[..., None], 0.0)
    return model.ln_final(s)


@pytest.mark.parametrize("enc,opts", ENCODINGS)
def test_every_layer_of_s_attends_to_the_partners_last_layer(enc, opts) -> None:
    model = tiny(enc, opts, True)
    pair = stack_pair(X, Y1)
    with torch.no_grad():
        _, s = streams(model, pair)
        by_hand, same_layer = _s_by_hand(model, pair, "last"), _s_by_hand(model, pair, "same")
    real = ~extend_pad(pair, model)
    assert torch.allclose(s[real], by_hand[real], atol=1e-5)            # memory = h^L of the partner, every layer
    assert not torch.allclose(s[real], same_layer[real], atol=1e-3)     # and not the partner's same-layer states


def extend_pad(pair: Side, model: TransformerEncoder) -> torch.Tensor:
    from xlp_cli.models.encodings import extend_pad_mask

    return extend_pad_mask(pair.pad_mask, model.prefix_len)


@pytest.mark.parametrize("enc,opts", ENCODINGS)
def test_no_gradient_reaches_h_through_the_s_terms(enc, opts) -> None:
    model = tiny(enc, opts, True).train()
    pair = stack_pair(X, Y1)
    h, s = streams(model, pair)
    assert torch.autograd.grad(s.pow(2).sum(), h, retain_graph=True, allow_unused=True)[0] is None
    h, s = streams(model, pair, stop_gradient=False)  # the check can fail: without the stop-gradient it flows
    g = torch.autograd.grad(s.pow(2).sum(), h, allow_unused=True)[0]
    assert g is not None and g.abs().sum() > 0
    # Eq. 1 on this encoding: all four terms give gradients to the self-attention and the cross-attention
    model.zero_grad()
    pred = ~pair.pad_mask & (torch.arange(pair.ids.shape[1]) % 2 == 0)
    lh, ls, n = pair_losses(model, pair, pair.ids, pred)
    (lh + ls).backward()
    assert n == int(pred.sum()) and torch.isfinite(lh) and torch.isfinite(ls)
    assert model.layers[0].cross.q.weight.grad.abs().sum() > 0 and model.layers[0].attn.qkv.weight.grad.abs().sum() > 0


def test_split_pair_recovers_both_sides() -> None:
    from xlp_cli.train.shards import Batch

    # TLM layout: </s> a </s> </s> b </s>, positions restarting at b, padded
    ids = torch.tensor([[1, 20, 21, 22, 1, 1, 30, 1, 2, 2], [1, 31, 32, 33, 34, 1, 1, 23, 1, 2]])
    langs = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]])
    pos = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 0, 0], [0, 1, 2, 3, 4, 5, 0, 1, 2, 0]])
    batch = Batch(ids, langs, pos, ids.eq(2), "en-fr")
    pred = ids.ge(20) & ids.le(31)
    pair, targets, p = split_pair(batch, ids, ids, pred)
    rows = [r[~m].tolist() for r, m in zip(pair.ids, pair.pad_mask)]
    assert rows == [[1, 20, 21, 22, 1], [1, 31, 32, 33, 34, 1], [1, 30, 1], [1, 23, 1]]
    assert [r[~m].tolist() for r, m in zip(pair.langs, pair.pad_mask)] == [[0] * 5, [1] * 6, [1] * 3, [0] * 3]
    assert [r[~m].tolist() for r, m in zip(pair.positions, pair.pad_mask)][1] == list(range(6))
    assert targets[p].tolist() == [20, 21, 22, 31, 30, 23]


def test_adjacent_pairs_are_neighbouring_sentences(tmp_path) -> None:
    from pretrain_helpers import write_ids

    from xlp_cli.bpe.dictionary import Dictionary
    from xlp_cli.train.adjacent import AdjacentStream

    dico = Dictionary.from_counts([(f"w{i}", 100 - i) for i in range(40)])
    sents = [[14 + i] * (1 + i % 3) for i in range(11)]  # sentence i is made of token 14+i; 11: the last is unpaired
    root = write_ids(tmp_path / "ids", dico, {"train": {"en": sents}})
    stream = AdjacentStream([root / "train" / "en" / "part-00000.parquet"], "en", 0, 32, 0, len(dico), 0)
    assert stream.n_rows == 5
    batch = stream.next_batch(5)
    pair, _, _ = split_pair(batch, batch.ids, batch.ids, batch.ids.ge(14))
    firsts = sorted(tuple(sorted((int(pair.ids[i, 1]), int(pair.ids[i + 5, 1])))) for i in range(5))
    assert firsts == [(14 + 2 * k, 15 + 2 * k) for k in range(5)]


# ----------------------------------------------------------------------------------------------- pre-training
@pytest.fixture(scope="module")
def ids(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("veco_ids")
    out = synthetic(root / "ids", pairs=True, row_group_size=100)
    vocab = write_vocab(root / "vocab", out, {"en": {3: [14, 15, 16]}, "fr": {3: [120, 121, 122]}})
    return out, vocab


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_pretrained(run, "last").state_dict()


@pytest.mark.parametrize("objective", ["tlm+ca-mlm", "mlm+ca-mlm"])
def test_ca_mlm_resumes_bitwise(cli, ids, tmp_path, objective) -> None:
    data, vocab = ids
    common = ["pretrain", "--data", data, "--data", vocab, "--objective", objective, "--lang-encoding", "vle",
              "--vle-style", "padding", "--vle-k", "3", "--eval-every", "2", "--dropout", "0.1", *TINY]
    assert cli(*common, "--out", tmp_path / "full", "--max-steps", "4").exit_code == 0
    assert cli(*common, "--out", tmp_path / "part", "--max-steps", "2").exit_code == 0
    r = cli(*common, "--out", tmp_path / "part", "--max-steps", "4", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["resumed"] is True
    a, b = weights(tmp_path / "full"), weights(tmp_path / "part")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(".cross." in k for k in a)
    rows = [json.loads(x) for x in (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["event"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4] and all(r["loss_s"] > 0 and r["loss_h"] > 0 for r in train)
    names = set(train[0]["batches"])  # the two micro-batches' pair folder (or language)
    if objective == "tlm+ca-mlm":  # Eq. 1 plus TLM on the same masks
        assert all(abs(r["loss"] - (r["loss_h"] + r["loss_s"] + r["loss_tlm"])) < 1e-3 for r in train)
        assert names == {"en-fr"}
    else:  # adjacent sentences of one language
        assert "loss_tlm" not in train[0] and names <= {"en", "fr"}


@pytest.mark.parametrize("objective,flags,rate", [("tlm+ca-mlm", [], 0.25), ("ca-mlm", [], 0.25),
                                                  ("tlm+ca-mlm", ["--pair-word-pred", "0.4"], 0.4),
                                                  ("mlm+ca-mlm", [], 0.15)])
def test_ca_mlm_masks_a_quarter_of_bilingual_tokens(ids, tmp_path, objective, flags, rate) -> None:
    """VECO Table 8: 25% of bilingual tokens (parallel pairs) are predicted, 15% of monolingual ones (adjacent
    sentences, and the monolingual validation windows every objective shares)."""
    from xlp_cli.core.config import from_dict
    from xlp_cli.train.config import PretrainConfig
    from xlp_cli.train.objectives import PRETRAIN_OBJECTIVES
    from xlp_cli.train.pretrain import model_config, objective_class
    from xlp_cli.train.inputs import resolve
    from xlp_cli.train.runtime import Runtime

    data, _ = ids
    args = {"data": [str(data)], "out": str(tmp_path / "run"), "objective": objective, "preset": "tiny",
            "bptt": 32, "batch-size": 4, "accumulate": 1, "num-threads": 1, "eval-batches": 1}
    args.update(dict(zip(flags[::2], (float(v) for v in flags[1::2]))))
    cfg = from_dict(PretrainConfig, {k.lstrip("-"): v for k, v in args.items()})
    inp = resolve(cfg.data, cfg.lang, PRETRAIN_OBJECTIVES[objective].needs, "additive", {}, objective)
    model = TransformerEncoder(model_config(cfg, len(inp.dictionary), inp.langs))
    obj = objective_class(objective).create(cfg, inp, model, Runtime.create("cpu", "none", 1))
    shares = []
    for step in range(3):
        for mb, pair, _ in obj.micro_batches(step, 1):
            real, n_pred = int((~mb.batch.pad_mask).sum()), int(mb.pred.sum())
            assert n_pred == math.ceil(rate * real), (n_pred, real)   # XLM's masking: exactly ceil(rate * n)
            shares.append(n_pred / real)
    assert min(shares) >= rate
    assert obj.mono_cfg.word_pred == 0.15  # the monolingual validation is masked as MLM/TLM runs are


@pytest.mark.integration
@pytest.mark.parametrize("objective", ["tlm+ca-mlm", "ca-mlm"])
def test_ca_mlm_without_parallel_shards_is_one_line_naming_the_folder(cli, shared_data, tmp_path, objective) -> None:
    mono = real_text(tmp_path / "ids", shared_data, langs=("en", "fr"))  # real BPE'd text, monolingual only
    for extra in ([], ["--lang", "en,fr"]):
        r = cli("pretrain", "--data", mono, "--out", tmp_path / "run", "--objective", objective, *TINY,
                "--max-steps", "2", *extra)
        err = r.stderr.strip()
        assert r.exit_code == 2 and len(err.splitlines()) == 1, (r.exit_code, err)
        assert str(mono) in err and f"--objective {objective} needs parallel" in err and "Traceback" not in err
    assert not (tmp_path / "run" / "checkpoints").exists()


# ----------------------------------------------------------------------------------------------- real data
@pytest.fixture(scope="module")
def veco_run(tmp_path_factory, shared_data) -> tuple[Path, Path]:
    """A tiny tlm+ca-mlm run on a real Multi30k de-en slice (Moses + XLM's fastBPE codes)."""
    from conftest import run_cli

    tmp = tmp_path_factory.mktemp("veco_real")
    split = ("train", 0, 400, 200)
    small = ("train", 400, 100, 20)
    data = mt_fixture.build(tmp, shared_data, {"de-en": {"train": split, "valid": small, "test": small}}, max_words=12)
    run = tmp / "pt"
    r = run_cli("pretrain", "--data", data, "--out", run, "--objective", "tlm+ca-mlm", "--lang-encoding", "additive",
                *TINY, "--bptt", "48", "--max-steps", "6", "--eval-every", "3", "--json")
    assert r.exit_code == 0, r.stderr
    return data, run


@pytest.mark.integration
def test_veco_run_validates_both_streams_on_real_pairs(veco_run) -> None:
    _, run = veco_run
    valid = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"valid"' in x]
    assert [v["step"] for v in valid] == [3, 6] and set(valid[-1]["pairs"]) == {"de-en"}
    assert valid[-1]["loss"] == valid[-1]["loss_h"]  # no monolingual valid split: the h stream picks the best
    model = load_pretrained(run)
    assert model.config.cross_attention and model.config.langs == ["de", "en"]


XNLI = ["--setting", "translate-train", "--lang", "de", "--max-eval-rows", "24", "--epochs", "1", "--lr", "1e-3",
        "--warmup", "2", "--batch-size", "8", "--threads", "1"]


def _logits_with_partner(ckpt_dir: Path, test: Path, lang: str, shuffle: bool) -> torch.Tensor:
    """Logits of a plug-in classifier on its cached test set, y as paired (or y of another example)."""
    from xlp_cli.models.checkpoint import load_model
    from xlp_cli.tasks.xnli import data as xd

    model = load_model(ckpt_dir).eval()
    x = xd.load_encoded(next(test.glob(f"test.{lang}.*.parquet")))
    y = xd.load_encoded(next(test.glob(f"test*pair-of-{lang}.*.parquet")))
    rows = list(range(len(x)))
    ids, mask = xd.collate([x.ids[r] for r in rows])
    partner = rows[1:] + rows[:1] if shuffle else rows
    pids, pmask = xd.collate([y.ids[r] for r in partner])
    with torch.no_grad():
        return model(ids, torch.zeros(len(rows), dtype=torch.long), mask, pids, torch.ones(len(rows), dtype=torch.long),
                     pmask)


@pytest.fixture(scope="module")
def translator(veco_run, tmp_path_factory) -> Path:
    """A tiny de<->en translation run on the same Multi30k slice: the plug-in's machine translator."""
    from conftest import run_cli

    data, _ = veco_run
    mt = tmp_path_factory.mktemp("translator") / "mt"
    r = run_cli("finetune", "--task", "translation", "--data", data, "--out", mt, "--lang-encoding", "additive",
                "--preset", "tiny", "--max-steps", "2", "--max-tokens", "400", "--valid-every", "2",
                "--max-eval-sentences", "3", "--beam", "1", "--threads", "1")
    assert r.exit_code == 0, r.stderr
    return mt


@pytest.mark.integration
def test_xnli_plug_in_and_plug_out_on_a_veco_run(cli, veco_run, tmp_path) -> None:
    _, run = veco_run
    r = cli("finetune", "--task", "xnli", "--data", run, "--out", tmp_path / "in", "--veco", "plug-in",
            "--plug-in-pairs", "oracle", *XNLI, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["veco"] == "plug-in" and "plug-in pairs: en, oracle pairs" in summary["groups"]["de"]["source"]
    best = next((tmp_path / "in" / "runs" / "de").glob("*/checkpoints/best"))
    assert json.loads((best / "model.json").read_text())["kind"] == "veco-classifier"
    preds = (tmp_path / "in" / "predictions" / "seed1" / "test.de.jsonl").read_text().splitlines()
    assert len(preds) == 24 and {json.loads(p)["gold"] for p in preds} <= {"entailment", "neutral", "contradiction"}
    # the prediction for x depends on its partner y: the same x beside another example's y gives other logits
    paired = _logits_with_partner(best, tmp_path / "in" / "encoded", "de", shuffle=False)
    moved = _logits_with_partner(best, tmp_path / "in" / "encoded", "de", shuffle=True)
    assert paired.shape == (24, 3) and (paired - moved).abs().max() > 1e-4
    r = cli("finetune", "--task", "xnli", "--data", run, "--out", tmp_path / "out", *XNLI, "--json")  # plug-out
    assert r.exit_code == 0, r.stderr
    best = next((tmp_path / "out" / "runs" / "de").glob("*/checkpoints/best"))
    meta = json.loads((best / "model.json").read_text())
    assert meta["kind"] == "classifier" and meta["encoder"]["cross_attention"] is False
    r = cli("evaluate", "--task", "xnli", "--data", tmp_path / "out", "--data", tmp_path / "in", "--name", "plug-out",
            "--name", "plug-in", "--out", tmp_path / "eval", "--json")
    assert r.exit_code == 0, r.stderr
    assert set(json.loads(r.stdout)["scores"]["runs"]) == {"plug-out", "plug-in"}


@pytest.mark.integration
def test_plug_in_pairs_are_machine_translations_by_default(cli, veco_run, translator, tmp_path, shared_data) -> None:
    from xlp_cli.tasks.xnli import data as xd
    from xlp_cli.tasks.xnli.pairs import Translator

    _, run = veco_run
    r = cli("finetune", "--task", "xnli", "--data", run, "--out", tmp_path / "in", "--veco", "plug-in",
            "--plug-in-translator", translator, *XNLI, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert "machine-translated by" in summary["groups"]["de"]["source"]
    # y of every test example is the translator's greedy output for x, not the human English item
    lines = [json.loads(l) for l in (tmp_path / "in" / "plug_in_pairs" / "test.de-en.jsonl").read_text().splitlines()]
    header, mt = lines[0], lines[1:]
    test, _ = xd.read_tsv(shared_data / "xnli" / "xnli.test.tsv", langs={"de", "en"}, max_rows_per_lang=24)
    assert len(mt) == 24 and header["translator"].endswith("seed-1")
    again = Translator(translator, torch.device("cpu"))([e.hypothesis for e in test["de"][:5]], "de", "en")
    assert [m["hypothesis"] for m in mt[:5]] == again
    human = {e.key: e.hypothesis for e in test["en"]}
    assert sum(m["hypothesis"] != human[e.key] for m, e in zip(mt, test["de"])) >= 20
    best = next((tmp_path / "in" / "runs" / "de").glob("*/checkpoints/best"))
    y = xd.load_encoded(next((tmp_path / "in" / "encoded").glob("test-mt-pair-of-de.*.parquet")))
    assert len(y) == 24 and json.loads((best / "model.json").read_text())["kind"] == "veco-classifier"


@pytest.mark.integration
def test_plug_in_refusals_are_one_line(cli, veco_run, tmp_path) -> None:
    _, run = veco_run
    r = cli("finetune", "--task", "xnli", "--data", run, "--out", tmp_path / "x", "--veco", "plug-in",
            "--plug-in-pairs", "oracle")
    err = r.stderr.strip()
    assert r.exit_code == 2 and len(err.splitlines()) == 1 and "footnote 4" in err and "zero-shot" in err, err
    r = cli("finetune", "--task", "xnli", "--data", run, "--out", tmp_path / "x", "--veco", "plug-in", *XNLI)
    err = r.stderr.strip()
    assert r.exit_code == 2 and len(err.splitlines()) == 1 and "--plug-in-translator" in err, err
    plain = run.parent / "pt_plain"
    assert cli("pretrain", "--data", veco_run[0], "--out", plain, "--objective", "tlm", "--lang-encoding", "additive",
               *TINY, "--max-steps", "1", "--eval-every", "1").exit_code == 0
    r = cli("finetune", "--task", "xnli", "--data", plain, "--out", tmp_path / "y", "--veco", "plug-in",
            "--plug-in-pairs", "oracle", *XNLI)
    err = r.stderr.strip()
    assert r.exit_code == 2 and len(err.splitlines()) == 1 and "needs a VECO pre-training run" in err, err


@pytest.mark.integration
def test_retrieval_and_pos_read_a_veco_run_plugged_out(cli, veco_run, tmp_path, shared_data) -> None:
    """XTREME-style tasks (docs/evaluate.md) on a VECO run: retrieval reads its encoder with the cross-attention
    unplugged (the vectors of `plug_out`), POS tagging fine-tunes the plugged-out encoder (kind tagger)."""
    from xlp_cli.tasks.retrieval.encode import load_encoder, sentence_vectors

    _, run = veco_run
    enc = load_encoder(run)
    texts = ["Ich habe Hunger.", "Das Haus ist alt und sehr schön."]
    vecs = sentence_vectors(enc, texts, "de", 1)
    enc.model = plug_out(enc.model).eval()
    assert not enc.model.config.cross_attention
    assert torch.allclose(torch.from_numpy(vecs), torch.from_numpy(sentence_vectors(enc, texts, "de", 1)), atol=1e-5)
    r = cli("evaluate", "--task", "retrieval", "--data", run, "--out", tmp_path / "ret", "--sets", "tatoeba,pud",
            "--max-sentences", "40", "--threads", "1", "--json")
    assert r.exit_code == 0, r.stderr
    tables = json.loads((tmp_path / "ret" / "results.json").read_text())["tables"]
    # each accuracy recomputed here: the plugged-out encoder's vectors, cosine nearest neighbour with numpy
    import numpy as np

    from xlp_cli.tasks.retrieval import data as rd

    pairs = {"tatoeba": rd.tatoeba(shared_data / "tatoeba_laser", "de", 40),
             "pud": rd.pud(shared_data / "ud_treebanks", "de", 40)}
    for name, queries, cands in (("tatoeba xx->en", "xx", "en"), ("pud en->xx", "en", "xx")):
        p = pairs[name.split()[0]]
        q = sentence_vectors(enc, getattr(p, queries), "de" if queries == "xx" else "en", enc.layer(-1))
        c = sentence_vectors(enc, getattr(p, cands), "de" if cands == "xx" else "en", enc.layer(-1))
        q, c = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in (q, c))
        want = 100.0 * float(np.mean((q @ c.T).argmax(1) == np.arange(len(q))))
        acc = next(iter(tables[name]["runs"].values()))["acc"]["de"]["mean"]
        assert acc == pytest.approx(want, abs=1e-6), name
    r = cli("finetune", "--task", "pos", "--data", run, "--out", tmp_path / "pos", "--lang", "de", "--epochs", "1",
            "--max-train-sentences", "64", "--max-eval-sentences", "16", "--lr", "1e-3", "--batch-size", "16",
            "--warmup", "0", "--threads", "1", "--json")
    assert r.exit_code == 0, r.stderr
    best = next((tmp_path / "pos" / "runs" / "transfer").glob("*/checkpoints/best"))
    meta = json.loads((best / "model.json").read_text())
    assert meta["kind"] == "tagger" and meta["encoder"]["cross_attention"] is False
    preds = (tmp_path / "pos" / "predictions" / "seed1" / "test.de.jsonl").read_text().splitlines()
    assert len(preds) == 16


@pytest.mark.integration
@pytest.mark.parametrize("tie", [True, False])
def test_translation_starts_from_a_veco_run(cli, veco_run, tmp_path, tie, monkeypatch) -> None:
    from xlp_cli.core import config as cfgmod
    from xlp_cli.tasks.translation.config import TranslationConfig
    from xlp_cli.tasks.translation.job import Job

    data, run = veco_run
    cfg = cfgmod.from_dict(TranslationConfig, {"task": "translation", "data": [str(data)], "out": str(tmp_path / "ft"),
                                               "init-encoder": str(run), "lang-encoding": "additive", "preset": "tiny",
                                               "tie-self-attention": tie})
    model = Job(cfg).new_model()
    veco = load_pretrained(run).state_dict()
    enc = model.xlm_encoder.state_dict()
    assert set(enc) == {k for k in veco if ".cross." not in k and ".ln_cross." not in k}
    assert all(torch.equal(enc[k], veco[k]) for k in enc)
    for i, layer in enumerate(model.decoder):
        for part in ("attn", "ln_attn", "cross", "ln_cross", "ffn", "ln_ffn"):
            for name, p in getattr(layer, part).named_parameters():
                assert torch.equal(p, veco[f"layers.{i}.{part}.{name}"]), (i, part, name)
        assert (layer.attn is model.xlm_encoder.layers[i].attn) is tie
    assert torch.equal(model.emb_norm.weight, veco["ln_emb.weight"])
    assert torch.equal(model.tgt_encoding.lang_emb.weight, veco["lang_encoding.lang_emb.weight"])
    if not tie:
        return
    monkeypatch.delenv("XLP_QUIET")  # the terminal lines saying which tensor came from where
    r = cli("finetune", "--task", "translation", "--data", data, "--out", tmp_path / "mt", "--init-encoder", run,
            "--lang-encoding", "additive", "--preset", "tiny", "--max-steps", "2", "--max-tokens", "400",
            "--valid-every", "2", "--max-eval-sentences", "3", "--beam", "1", "--threads", "1")
    assert r.exit_code == 0, r.stderr
    assert "decoder.1.cross.{q.weight" in r.stderr and "layers.1.cross" in r.stderr and "(tied)" in r.stderr
    manifest = json.loads((tmp_path / "mt" / "manifest.json").read_text())
    assert {m["module"]: m["how"] for m in manifest["veco_init"]}["decoder.0.attn"] == "tied"
    assert manifest["model"]["decoder_layout"] == "encoder" and manifest["model"]["tie_self_attention"] is True
    r = cli("evaluate", "--task", "translation", "--data", tmp_path / "mt", "--out", tmp_path / "ev", "--json")
    assert r.exit_code == 0, r.stderr
