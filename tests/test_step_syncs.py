"""The training step keeps a GPU busy: no host sync outside log steps, fixed prediction shapes, and an input
pipeline that builds batches ahead without changing them (issue 26). All on CPU, with the real objectives.

A host sync is a Python conversion of a tensor (`float`, `int`, `bool`, `.item()`, `.tolist()`): on a GPU each
one waits for every kernel queued before it. The counter patches those conversions and counts the ones the
training loop's thread makes from its first batch to its end, leaving out validation and the checkpoint
writer (they run every few thousand steps). The input pipeline's worker thread is not counted: that is the
point of it, its tensors are host tensors.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import traceback
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from pretrain_helpers import synthetic, write_vocab

from xlp_cli.models import checkpoint as ckpt
from xlp_cli.train import engine, prefetch
from xlp_cli.train.masking import IGNORE, capacity, mask_tokens, prediction_slots
from xlp_cli.train.objectives.base import Objective
from xlp_cli.train.objectives.mass import Mass
from xlp_cli.train.objectives.mlm import MaskedLM
from xlp_cli.train.runtime import Runtime, step_seed

CONVERSIONS = ("__float__", "__int__", "__bool__", "__index__", "item", "tolist")
RUN = ["--preset", "tiny", "--bptt", "32", "--batch-size", "4", "--accumulate", "2", "--warmup", "2",
       "--lr", "1e-3", "--seed", "3", "--num-threads", "1", "--max-steps", "20", "--log-every", "10",
       "--eval-every", "20", "--json"]


class SyncCounter:
    """Counts tensor-to-Python conversions made by the thread that runs the training loop."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.on, self.paused, self.where = False, 0, []
        self.loop = threading.current_thread()
        for name in CONVERSIONS:
            original = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, self._counting(original))
        counter = self

        class Counted(prefetch.Prefetcher):
            def get(self, step):  # the loop's first batch starts the count
                counter.on = True
                return super().get(step)

        monkeypatch.setattr(engine, "Prefetcher", Counted)
        monkeypatch.setattr(engine.Trainer, "save", self.uncounted(engine.Trainer.save))
        for cls in (MaskedLM, Mass):
            monkeypatch.setattr(cls, "evaluate", self.uncounted(cls.evaluate))

    def _counting(self, original):
        def wrapper(t, *a, **k):
            if self.on and not self.paused and threading.current_thread() is self.loop:
                self.where.append("".join(traceback.format_stack(limit=4)[:-1]))
            return original(t, *a, **k)
        return wrapper

    def uncounted(self, fn):
        def wrapper(*a, **k):
            self.paused += 1
            try:
                return fn(*a, **k)
            finally:
                self.paused -= 1
        return wrapper


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sync_inputs")
    ids = synthetic(root / "ids", pairs=True, row_group_size=100)
    vocab = write_vocab(root / "vocab", ids, {"en": {100: list(range(14, 60))}, "fr": {100: list(range(120, 170))}})
    return ids, vocab


@pytest.mark.parametrize("objective,encoding", [("mlm+tlm", "xlp"), ("mlm", "vle"), ("tlm+ca-mlm", "additive"),
                                                ("mass", "xlp")])
def test_twenty_steps_read_the_device_only_at_log_steps_and_the_checkpoint(cli, inputs, tmp_path, monkeypatch,
                                                                           objective, encoding) -> None:
    ids, vocab = inputs
    counter = SyncCounter(monkeypatch)
    r = cli("pretrain", "--data", ids, "--data", vocab, "--out", tmp_path / "run", "--objective", objective,
            "--lang-encoding", encoding, *RUN)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["steps"] == 20
    # 2 log steps (10, 20: the record and the non-finite check in one read) + 1 check before the checkpoint
    assert counter.on and len(counter.where) <= 3, "\n".join(counter.where[:3])
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["event"] == "train"]
    assert [r["step"] for r in train] == [10, 20]
    assert all(isinstance(r["loss"], float) and isinstance(r["grad_norm"], float) for r in train)
    if objective == "tlm+ca-mlm":  # the objective's own numbers come back as plain floats too
        assert all(isinstance(r["loss_h"], float) and isinstance(r["loss_s"], float) for r in train)


def test_the_counter_sees_a_sync_in_the_step(cli, inputs, tmp_path, monkeypatch) -> None:
    """The counter can fail: a `float(loss)` in every step (what the engine did before) is 20 more reads."""
    ids, _ = inputs
    counter = SyncCounter(monkeypatch)
    step = engine.Trainer.train_step

    def syncing(self, batches, position):
        rec = step(self, batches, position)
        float(rec["loss"])
        return rec

    monkeypatch.setattr(engine.Trainer, "train_step", syncing)
    assert cli("pretrain", "--data", ids, "--out", tmp_path / "run", *RUN).exit_code == 0
    assert len(counter.where) >= 20


def test_prediction_slots_are_fixed_per_shape_and_give_the_masked_mean() -> None:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(14, 500, (8, 40), generator=g)
    pad = torch.zeros_like(ids, dtype=torch.bool)
    pad[:4, 25:] = True  # half the rows padded: fewer real tokens, the same number of slots
    slots = capacity(0.15, tuple(ids.shape))
    assert slots % 8 == 0 and slots >= 0.15 * ids.numel()
    for p in (None, pad):
        _, targets, pred = mask_tokens(ids, p, g, 500)
        index, gold = prediction_slots(pred, targets, slots)
        assert index.shape == gold.shape == (slots,)
        real = ids.numel() if p is None else int((~p).sum())
        assert int((gold != IGNORE).sum()) == int(pred.sum()) == math.ceil(0.15 * real)  # XLM's exact count
        logits = torch.randn(ids.numel(), 500, generator=g)
        masked = F.cross_entropy(logits[pred.reshape(-1)], targets[pred])
        slotted = F.cross_entropy(logits[index], gold)
        assert torch.allclose(masked, slotted, atol=1e-6)
    with pytest.raises(ValueError, match="do not fit"):
        prediction_slots(torch.ones(2, 4, dtype=torch.bool), torch.zeros(2, 4, dtype=torch.long), 7)


# ---------------------------------------------------------------- building ahead changes nothing
class Counting(Objective):
    """A data stream with a position; its batches are a pure function of (seed, step, position)."""
    prefetch = True

    def __init__(self, fail_at: int | None = None):
        self.position, self.fail_at, self.built = 0, fail_at, []

    def micro_batches(self, step, n):
        if step == self.fail_at:
            raise KeyboardInterrupt  # a kill while the worker builds ahead
        self.built.append(step)
        for micro in range(n):
            g = torch.Generator().manual_seed(step_seed(1, step, micro, self.position))
            self.position += 1
            yield torch.randint(14, 60, (4, 12), generator=g)

    def loss(self, model, ids):
        h = model(ids, torch.zeros(4, dtype=torch.long))
        return F.cross_entropy(model.mlm_logits(h).flatten(0, 1), ids.flatten()), {"tokens": ids.numel()}

    def data_position(self):
        return {"position": self.position}

    def state_dict(self, position=None):
        return dict(position) if position is not None else {"position": self.position}

    def load_state_dict(self, state):
        self.position = int(state["position"])


def _model():
    from xlp_cli.models.encoder import ModelConfig, TransformerEncoder

    torch.manual_seed(0)
    return TransformerEncoder(ModelConfig.from_preset("tiny", vocab_size=60, langs=["en"], lang_encoding="xlp"))


def _losses(run: Path) -> list[float]:
    return [r["loss"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["event"] == "train"]


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_a_kill_while_batches_are_built_ahead_resumes_bitwise(tmp_path, depth) -> None:
    cpu = Runtime(torch.device("cpu"))
    s = engine.Settings(max_steps=12, lr=3e-3, warmup=2, accumulate=2, seed=5, eval_every=4, log_every=1,
                        prefetch=depth)
    engine.fit(Counting(), _model(), s, tmp_path / "full", cpu)
    killed = Counting(fail_at=10)
    with pytest.raises(KeyboardInterrupt):
        engine.fit(killed, _model(), s, tmp_path / "part", cpu)
    assert max(killed.built) == 9  # the worker had built past the last checkpoint (step 8) ...
    meta = ckpt.read_meta(tmp_path / "part" / "checkpoints" / "last")
    assert meta["step"] == 8 and meta["objective"] == {"position": 16}  # ... which records what was trained
    resumed = engine.fit(Counting(), _model(), s, tmp_path / "part", cpu)
    assert resumed["steps_this_run"] == 4
    assert _losses(tmp_path / "full") == _losses(tmp_path / "part")  # bitwise, whatever the depth


# ---------------------------------------------------------------- the GPU's padded shapes change no loss
def _objective(ids: Path, vocab: Path, name: str, shape_step: int):
    from xlp_cli.core import config as cfgmod
    from xlp_cli.train import pretrain
    from xlp_cli.train.config import PretrainConfig

    cfg = cfgmod.from_dict(PretrainConfig, {"data": [str(ids), str(vocab)], "objective": name, "preset": "tiny",
                                            "bptt": 32, "batch_size": 4, "accumulate": 1, "lang_encoding": "xlp",
                                            "dropout": 0.0, "attention_dropout": 0.0, "seed": 2})
    inp = pretrain.inputs(cfg)
    model = pretrain.build_model(cfg, inp, torch.device("cpu"))
    obj = pretrain.objective_class(name).create(cfg, inp, model, Runtime(torch.device("cpu")))
    obj.shape_step = shape_step
    return obj, model


@pytest.mark.parametrize("objective", ["tlm", "tlm+ca-mlm", "mass"])
def test_batches_padded_to_gpu_shapes_give_the_same_losses(inputs, tmp_path, objective) -> None:
    """On a GPU pair and MASS batches are padded to multiples of 32 (`shape_step`); the masks pick the same
    tokens and the padding is masked out, so the losses are those of the tight batches (dropout off)."""
    ids, vocab = inputs
    losses, widths = {}, {}
    for step in (1, 32):
        obj, model = _objective(ids, vocab, objective, step)
        widths[step] = {t.shape[1] for b in obj.micro_batches(0, 1) for t in prefetch_tensors(b)}
        obj, model = _objective(ids, vocab, objective, step)
        s = engine.Settings(max_steps=4, lr=1e-3, warmup=1, log_every=1, seed=2)
        engine.fit(obj, model, s, tmp_path / f"s{step}", Runtime(torch.device("cpu")))
        losses[step] = _losses(tmp_path / f"s{step}")
    assert all(w % 16 == 0 for w in widths[32]) and widths[32] != widths[1]  # other shapes ...
    assert len(losses[1]) == 4 and losses[1] == pytest.approx(losses[32], rel=1e-5)  # ... the same losses


def prefetch_tensors(item) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    prefetch.map_tensors(item, lambda t: out.append(t) or t)
    return [t for t in out if t.dim() == 2]


# ---------------------------------------------------------------- torch.compile: on by default on CUDA, never fatal
class CompileFails(torch.nn.Module):
    """What `torch.compile` hands back when its backend cannot build the graph: a module whose first call raises
    (e.g. inductor without a C++ compiler). Injected: a real failure cannot be produced on demand."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *a, **k):
        raise RuntimeError("backend compiler failed\nCppCompileError: C++ compile error")


def test_a_failing_compile_warns_once_and_the_run_goes_on_eagerly(tmp_path, monkeypatch, capsys) -> None:
    cpu = Runtime(torch.device("cpu"))
    s = engine.Settings(max_steps=6, lr=3e-3, warmup=2, accumulate=2, seed=5, log_every=1)
    engine.fit(Counting(), _model(), s, tmp_path / "eager", cpu)
    monkeypatch.setattr(torch, "compile", CompileFails)
    out = engine.fit(Counting(), _model(), dataclasses.replace(s, compile="on"), tmp_path / "fallback", cpu)
    assert out["steps"] == 6
    err = capsys.readouterr().err
    assert err.count("torch.compile failed (RuntimeError: backend compiler failed)") == 1, err
    assert _losses(tmp_path / "fallback") == _losses(tmp_path / "eager")  # the failed step ran again, eagerly
    assert engine.Settings(max_steps=1, lr=1.0).compile == "off"  # finetuning stages: off unless asked


def test_compile_auto_is_on_for_cuda_only() -> None:
    model = _model()
    t = engine.Trainer(Counting(), model, engine.Settings(max_steps=1, lr=1e-3, compile="auto"), Path("unused"),
                       Runtime(torch.device("cpu")), {})
    assert not t.compiled and t.net.model is model
