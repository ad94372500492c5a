"""The one training engine: its schedule, the objective interface, exact resume, and the checkpoint layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from xlp_cli.core.errors import BadInput, WorkFailed
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder
from xlp_cli.train import engine
from xlp_cli.train.objectives.base import Objective
from xlp_cli.train.runtime import Runtime, step_seed
from xlp_cli.train.schedule import WarmupInverseSqrt, lr_at

CPU = Runtime(torch.device("cpu"))


# ---------------------------------------------------------------- the schedule
def test_schedule_warmup_then_inverse_sqrt_and_zero_warmup_is_constant() -> None:
    assert [lr_at(s, 1.0, 4) for s in (1, 2, 3)] == [0.25, 0.5, 0.75]
    assert lr_at(4, 1.0, 4) == 1.0 and lr_at(16, 1.0, 4) == 0.5
    assert all(lr_at(s, 3e-4, 0) == 3e-4 for s in (1, 10, 10_000))  # --warmup 0: no warm-up, no decay
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=2.0)
    sched = WarmupInverseSqrt(opt, 4)
    seen = []
    for _ in range(6):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == [lr_at(s, 2.0, 4) for s in range(1, 7)]
    again = WarmupInverseSqrt(torch.optim.AdamW([p], lr=2.0), 4)
    again.load_state_dict(sched.state_dict())
    assert again.last_epoch == 6
    again.resume_at(6)
    assert again.optimizer.param_groups[0]["lr"] == lr_at(7, 2.0, 4)


# ---------------------------------------------------------------- a new objective plugs in
class TwoPassDenoise(Objective):
    """A made-up objective that uses what later objectives need: two forward passes per batch (VECO), and a
    generation step under no_grad in eval mode before the training forward (back-translation)."""

    def __init__(self, vocab: int, seed: int):
        self.vocab, self.seed, self.position = vocab, seed, 0
        self.batch_size = 4

    def micro_batches(self, step: int, n: int):
        for micro in range(n):
            g = torch.Generator().manual_seed(step_seed(self.seed, step, micro, self.position))
            self.position += 1
            yield torch.randint(14, self.vocab, (4, 12), generator=g)

    def loss(self, model, ids):
        model.eval()
        with torch.no_grad():  # "generate" with the current model: its own argmax predictions
            guess = model.mlm_logits(model(ids, torch.zeros(4, dtype=torch.long))).argmax(-1)
        model.train()
        noisy = torch.where(guess % 3 == 0, guess, ids)
        h1 = model(noisy, torch.zeros(4, dtype=torch.long))
        h2 = model(ids, torch.ones(4, dtype=torch.long))
        loss = F.cross_entropy(model.mlm_logits(h1).flatten(0, 1), ids.flatten()) + (h1 - h2).pow(2).mean()
        return loss, {"tokens": ids.numel()}

    def evaluate(self, model):
        with torch.no_grad():
            ids = torch.arange(14, 38).view(2, 12) % self.vocab
            loss = F.cross_entropy(model.mlm_logits(model(ids, torch.zeros(2, dtype=torch.long))).flatten(0, 1),
                                   ids.flatten())
        return {"loss": float(loss)}

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state):
        self.position = int(state["position"])


def _model(seed: int = 0) -> TransformerEncoder:
    torch.manual_seed(seed)
    return TransformerEncoder(ModelConfig.from_preset("tiny", vocab_size=60, langs=["en", "fr"], lang_encoding="xlp"))


def _fit(run: Path, steps: int) -> dict:
    s = engine.Settings(max_steps=steps, lr=3e-3, warmup=3, clip_norm=1.0, accumulate=2, seed=5, eval_every=3,
                        log_every=1)
    return engine.fit(TwoPassDenoise(60, 5), _model(), s, run, CPU)


def test_a_new_objective_trains_checkpoints_and_resumes_bitwise(tmp_path) -> None:
    full = _fit(tmp_path / "full", 8)
    assert full["steps"] == 8 and full["steps_this_run"] == 8 and full["best_step"] in (3, 6, 8)
    _fit(tmp_path / "part", 5)  # stopped after step 5 (its last checkpoint is at step 5)
    resumed = _fit(tmp_path / "part", 8)
    assert resumed["resumed"] and resumed["steps_this_run"] == 3

    def losses(run: Path) -> list[tuple[int, float]]:
        return [(r["step"], r["loss"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
                if r["event"] == "train"]

    assert losses(tmp_path / "full") == losses(tmp_path / "part")  # bitwise, and the log was cut back at step 5
    a = ckpt.load_model(tmp_path / "full" / "checkpoints" / "last").state_dict()
    b = ckpt.load_model(tmp_path / "part" / "checkpoints" / "last").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    meta = ckpt.read_meta(tmp_path / "part" / "checkpoints" / "last")
    assert meta["format_version"] == 2 and meta["objective"] == {"position": 16} and meta["step"] == 8
    state = ckpt.load_state(tmp_path / "part" / "checkpoints" / "last")
    assert set(state) == {"optimizer", "scheduler", "scaler"} and state["scheduler"]["last_epoch"] == 8
    assert not (tmp_path / "part" / "checkpoints" / "best" / ckpt.STATE).exists()  # best: weights only


def test_non_finite_loss_stops_with_one_line(tmp_path) -> None:
    class Exploding(TwoPassDenoise):
        def loss(self, model, ids):
            loss, info = super().loss(model, ids)
            return loss * float("nan"), info

    s = engine.Settings(max_steps=2, lr=1e-3)
    with pytest.raises(WorkFailed, match="the loss became nan at step 1"):
        engine.fit(Exploding(60, 0), _model(), s, tmp_path / "nan", CPU)
    assert not (tmp_path / "nan" / "checkpoints").exists()


# ---------------------------------------------------------------- the checkpoint layout
def test_every_kind_of_model_round_trips_through_one_layout(tmp_path) -> None:
    from xlp_cli.models.factory import build_seq2seq
    from xlp_cli.models.heads import SequenceClassifier
    from xlp_cli.models.seq2seq import Seq2SeqConfig

    torch.manual_seed(0)
    enc = _model()
    models = {"encoder": enc, "classifier": SequenceClassifier(_model(1), 3),
              "seq2seq": build_seq2seq(Seq2SeqConfig.from_preset("tiny", vocab_size=60, langs=["de", "en"])),
              "interlingua": build_seq2seq(Seq2SeqConfig.from_preset("tiny", vocab_size=60, langs=["de", "en"],
                                                                     arch="interlingua", lang_encoding="none"))}
    for name, m in models.items():
        folder = ckpt.save(tmp_path / name, m, {"step": 3})
        assert sorted(p.name for p in folder.iterdir()) == [ckpt.META, ckpt.CONFIG, ckpt.WEIGHTS]
        loaded = ckpt.load_model(folder)
        assert type(loaded) is type(m) and json.loads((folder / ckpt.CONFIG).read_text())["kind"] == m.KIND
        a, b = m.state_dict(), loaded.state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name


def test_a_bit_flip_in_the_weights_is_refused(tmp_path) -> None:
    folder = ckpt.save(tmp_path / "c", _model(), {"step": 1})
    w = folder / ckpt.WEIGHTS
    data = bytearray(w.read_bytes())
    data[-5] ^= 0x01  # inside the last tensor's data: the file still parses
    w.write_bytes(bytes(data))
    with pytest.raises(BadInput, match="corrupt model.safetensors: its sha256 differs"):
        ckpt.load_model(folder)


def test_xlp_0_1_checkpoints_still_load(tmp_path) -> None:
    """The layouts written before the one checkpoint layout: encoder model.json with top-level encoding options,
    XNLI's classifier.safetensors, and translation layers with separate q/k/v projections."""
    from safetensors.torch import save_file

    from xlp_cli.models.factory import build_seq2seq
    from xlp_cli.models.heads import SequenceClassifier
    from xlp_cli.models.seq2seq import Seq2SeqConfig

    # a pre-trained encoder (xlp 0.1 model.json: xlp_bias/vle_style/vle_sizes at the top, no "kind")
    m = _model()
    old = tmp_path / "enc"
    old.mkdir()
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(old / ckpt.WEIGHTS))
    cfg = {k: v for k, v in m.config.to_dict().items() if k != "encoding_options"}
    (old / ckpt.CONFIG).write_text(json.dumps({**cfg, "xlp_bias": True, "vle_style": "adding", "vle_sizes": None}))
    loaded = ckpt.load_pretrained(old)
    assert loaded.config.encoding_options == {"xlp_bias": True}
    ids = torch.randint(14, 60, (2, 7))
    assert torch.equal(loaded(ids, torch.tensor([0, 1])), m.eval()(ids, torch.tensor([0, 1])))

    # an XNLI classifier (weights in classifier.safetensors, model.json = the encoder's config)
    clf = SequenceClassifier(_model(2), 3).eval()
    old = tmp_path / "clf"
    old.mkdir()
    save_file({k: v.contiguous() for k, v in clf.state_dict().items()}, str(old / "classifier.safetensors"))
    (old / ckpt.CONFIG).write_text(json.dumps(clf.encoder.config.to_dict()))
    (old / ckpt.META).write_text(json.dumps({"step": 12, "best": {"score": 41.5, "step": 6, "dev": {"en": 41.5}}}))
    loaded = ckpt.load_model(old).eval()
    assert torch.equal(loaded(ids, torch.tensor([0, 1])), clf(ids, torch.tensor([0, 1])))
    assert ckpt.read_meta(old)["best"] == {"score": 41.5, "step": 6, "metrics": {"dev": {"en": 41.5}}}

    # a translation model with xlp 0.1's layer names
    torch.manual_seed(3)
    s2s = build_seq2seq(Seq2SeqConfig.from_preset("tiny", vocab_size=60, langs=["de", "en"])).eval()
    state = {}
    for k, v in s2s.state_dict().items():
        for new, old_name in ((".attn.out.", ".self_attn.out."), (".ln_attn.", ".self_norm."), (".cross.q.", ".cross_attn.q."),
                              (".cross.out.", ".cross_attn.out."), (".ln_cross.", ".cross_norm."),
                              (".ffn.lin1.", ".ffn.fc1."), (".ffn.lin2.", ".ffn.fc2."), (".ln_ffn.", ".ffn_norm.")):
            k = k.replace(new, old_name)
        if ".attn.qkv." in k:
            for part, t in zip("qkv", v.chunk(3, 0)):
                state[k.replace(".attn.qkv.", f".self_attn.{part}.")] = t.clone()
        elif ".cross.kv." in k:
            for part, t in zip("kv", v.chunk(2, 0)):
                state[k.replace(".cross.kv.", f".cross_attn.{part}.")] = t.clone()
        else:
            state[k] = v.clone()
    old = tmp_path / "s2s"
    old.mkdir()
    save_file({k: v.contiguous() for k, v in state.items()}, str(old / ckpt.WEIGHTS))
    (old / ckpt.CONFIG).write_text(json.dumps(s2s.config.to_dict()))
    loaded = ckpt.load_model(old).eval()
    src, tgt = torch.randint(14, 60, (2, 6)), torch.randint(14, 60, (2, 5))
    lang = torch.tensor([0, 0])
    assert torch.equal(loaded(src, lang, tgt, lang + 1), s2s(src, lang, tgt, lang + 1))


def test_pickled_optimizer_state_is_refused(tmp_path) -> None:
    class Payload:
        def __reduce__(self):
            return (print, ("executed",))

    folder = ckpt.save(tmp_path / "c", _model(), {"step": 1}, {"optimizer": {}})
    torch.save({"optimizer": Payload()}, folder / ckpt.STATE)
    meta = json.loads((folder / ckpt.META).read_text())
    meta["sha256"].pop(ckpt.STATE)
    (folder / ckpt.META).write_text(json.dumps(meta))
    with pytest.raises(BadInput, match="corrupt or unsafe optimizer state, refused"):
        ckpt.load_state(folder)
