"""The one training loop of xlp: every kind of run (pre-training, XNLI, translation, ...) is `fit(objective, ...)`.

    rt = Runtime.create(cfg.device, cfg.amp, cfg.threads)
    result = fit(objective, model, Settings.from_config(cfg, max_steps=..., lr=...), run_dir, rt)

One update (step s, 0-based): dropout seeded from (seed, s, rank); the objective's micro-batches for s (built
ahead by the input pipeline, `prefetch.py`), each forward+backward under autocast (DDP syncs gradients on the
last one); unscale, clip, AdamW step, the one schedule (`schedule.py`).

The step never waits for the device. Loss, gradient norm and the objectives' logged numbers stay device tensors
in the step's record; the host reads them all at once every `log_every` steps (`read`). A non-finite loss is recorded on the
device (the first step it happened and its value) and read at those log steps and before every checkpoint,
so it stops the run with its step number and never reaches a checkpoint. On CUDA: TF32 matmuls, bf16 autocast
(`runtime.py`), fused AdamW, the norm with foreach kernels, and `torch.compile` (`--compile auto`), which falls
back to eager with one line when it fails.

Every `eval_every` steps and at the end, rank 0 evaluates (`objective.evaluate`),
writes `RUN/checkpoints/last` (weights, optimizer/scheduler/scaler state, meta with the objective's data position
and RNG) and, when the objective's metric improved (or there is nothing to evaluate), `checkpoints/best` (weights).
`save_every` also writes `last` in between. Metrics go to `RUN/metrics.jsonl`, one JSON object per event (and to
TensorBoard / W&B when asked for: `trackers.py`).

A run folder with a `last` checkpoint resumes from it: weights, optimizer, schedule, data position and RNG come
back, the metrics log is cut back to that step, and the remaining steps are exactly those of an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from xlp_cli.artifacts.files import truncate_jsonl
from xlp_cli.artifacts.manifest import now_iso
from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput, WorkFailed, write_failed
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.train.objectives.base import Objective
from xlp_cli.train.prefetch import Prefetcher, to_device
from xlp_cli.train.runtime import Runtime, batch_too_large, is_oom, rng_state, seed_dropout, set_rng_state
from xlp_cli.train.schedule import WarmupInverseSqrt
from xlp_cli.train.sections import Adam, Tracking
from xlp_cli.train.trackers import Trackers
from xlp_cli.train.warmup import check_warmup


@dataclasses.dataclass
class Settings:
    max_steps: int
    lr: float
    warmup: int = 0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    clip_norm: float = 0.0
    accumulate: int = 1
    seed: int = 0
    eval_every: int = 0      # evaluate + checkpoint every N steps and at the end (0: only at the end)
    save_every: int = 0      # also write `last` every N steps without evaluating (0: never)
    log_every: int = 10      # read the step's numbers from the device every N steps (and write them)
    compile: str = "off"     # torch.compile the model: on, off, or auto (on for CUDA)
    prefetch: int = 2        # steps of batches built ahead in a worker thread (0: in the loop's thread)
    label: str = "train"     # progress bar and terminal lines
    tensorboard: str = ""    # also TensorBoard event files under DIR/<run folder name> (train/trackers.py)
    wandb: str = ""          # also this Weights & Biases project

    @classmethod
    def from_config(cls, cfg: Any, **given: Any) -> "Settings":
        """THE mapping of a stage config to the loop's settings: its optimizer section (warm-up, weight decay,
        clipping: `train/sections.Optimizer`), its Adam section when it has one (else `given` or the defaults:
        betas 0.9,0.98, eps 1e-8) and its `log_every` (every training stage has one). `given`: what the stage
        decides itself (max_steps, lr, seed, eval_every, label, ...)."""
        values: dict[str, Any] = {"warmup": cfg.warmup, "weight_decay": cfg.weight_decay, "clip_norm": cfg.clip_norm,
                                  "log_every": cfg.log_every}
        if isinstance(cfg, Adam):
            values.update(betas=tuple(cfg.adam_betas), eps=cfg.adam_eps)
        if isinstance(cfg, Tracking):
            values.update(tensorboard=str(cfg.tensorboard or ""), wandb=cfg.wandb)
        return cls(**{**values, **given})


class LossModule(torch.nn.Module):
    """The model and its objective's loss as one forward: what DDP wraps, so it sees every use of the model."""

    def __init__(self, model: torch.nn.Module, objective: Objective):
        super().__init__()
        self.model = model
        self.objective = objective

    def forward(self, batch: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        return self.objective.loss(self.model, batch)


@dataclasses.dataclass
class Trainer:
    """The state `fit` carries between steps (and writes into every checkpoint)."""
    objective: Objective
    model: torch.nn.Module
    s: Settings
    run: Path
    rt: Runtime
    meta_extra: dict[str, Any]
    step: int = 0
    tokens: int = 0
    best: dict[str, Any] = dataclasses.field(default_factory=lambda: {"score": None, "step": None, "metrics": {}})
    last_metrics: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.params = params
        # fused: one kernel for every parameter, and no per-parameter `step.item()` (a host sync on a GPU)
        self.optimizer = torch.optim.AdamW(params, lr=self.s.lr, betas=tuple(self.s.betas), eps=self.s.eps,
                                           weight_decay=self.s.weight_decay, fused=True)
        self.scheduler = WarmupInverseSqrt(self.optimizer, self.s.warmup)
        self.scaler = self.rt.grad_scaler()
        self.compiled = self.s.compile == "on" or (self.s.compile == "auto" and self.rt.device.type == "cuda")
        if self.compiled:  # one graph per padded shape (<= bptt/32) and language set: more than dynamo's default 8
            dynamo = torch._dynamo.config
            limit = "recompile_limit" if hasattr(dynamo, "recompile_limit") else "cache_size_limit"
            setattr(dynamo, limit, max(getattr(dynamo, limit), 64))
        self.net = self._wrap(torch.compile(self.model) if self.compiled else self.model)
        self.position: dict[str, Any] | None = None   # the data position after the last step trained
        self.watch = NonFinite(self.rt.device)

    def _wrap(self, inner: torch.nn.Module) -> torch.nn.Module:
        return self.rt.wrap(LossModule(inner, self.objective),
                            find_unused_parameters=self.objective.find_unused_parameters)

    def compile_failed(self, e: Exception) -> None:
        """torch.compile could not build the step: one line, then the same step runs eagerly."""
        ui.warn(f"{self.s.label}: torch.compile failed ({type(e).__name__}: {str(e).strip().splitlines()[0][:160]}); "
                "running without it (--compile off skips the attempt)")
        self.compiled = False
        self.optimizer.zero_grad(set_to_none=True)
        self.net = self._wrap(self.model)

    def objective_state(self) -> dict[str, Any]:
        """The objective's state at the last step trained (on every process: it may gather)."""
        if self.position is None:
            return self.objective.state_dict()
        return self.objective.state_dict(self.position)

    # ---------------------------------------------------------------- checkpoints
    @property
    def last_dir(self) -> Path:
        return self.run / "checkpoints" / "last"

    def save(self, which: str, objective_state: dict[str, Any]) -> None:
        meta = {"step": self.step, "tokens": self.tokens, "best": self.best, "objective": objective_state,
                "rng": rng_state(), "world_size": self.rt.world, "valid": self.last_metrics,
                "time": now_iso(), **self.meta_extra}
        state = None
        if which == "last":
            state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                     "scaler": self.scaler.state_dict()}
        ckpt.save(self.run / "checkpoints" / which, self.model, meta, state)

    def restore(self) -> bool:
        """Continue from `last` if there is one; False for a fresh run."""
        for which in ("last", "best"):  # xlp replaces these folders whole: a link would be followed, then broken
            if (self.run / "checkpoints" / which).is_symlink():
                raise BadInput("a symbolic link, not the checkpoint folder xlp wrote: put the folder it points to in "
                               "its place (or remove it), or rerun with --force", path=self.run / "checkpoints" / which)
        meta = ckpt.read_meta(self.last_dir)
        if meta is None:
            return False
        ckpt.load_weights(self.model, self.last_dir, self.rt.device)
        state = ckpt.load_state(self.last_dir, self.rt.device)
        try:
            self.optimizer.load_state_dict(state["optimizer"])
            if state.get("scaler") and self.scaler.is_enabled():
                self.scaler.load_state_dict(state["scaler"])
            if state.get("scheduler"):
                self.scheduler.load_state_dict(state["scheduler"])
            else:  # checkpoints of xlp 0.1 kept no scheduler state
                self.scheduler.resume_at(int(meta["step"]))
        except (ValueError, KeyError, RuntimeError, TypeError) as e:
            raise BadInput(f"checkpoint optimizer state does not fit this run ({str(e).splitlines()[0]}); "
                           "rerun with --force", path=self.last_dir / ckpt.STATE) from None
        try:
            self.step, self.tokens = int(meta["step"]), int(meta.get("tokens") or 0)
            self.best = dict(meta.get("best") or self.best)
            self.last_metrics = meta.get("valid")
            self.objective.load_state_dict(meta.get("objective") or {})
            set_rng_state(meta.get("rng") or {})
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise BadInput(f"corrupt checkpoint metadata ({e}); rerun with --force", path=self.last_dir / ckpt.META) from None
        return True

    # ---------------------------------------------------------------- one update
    def train_step(self, batches: list[Any], position: dict[str, Any] | None) -> dict[str, Any]:
        """One update on this step's micro-batches (already on the device). Returns its record, whose numbers
        are device tensors: `read` turns a record into plain numbers (one host sync)."""
        s, step = self.s, self.step
        self.net.train()
        seed_dropout(s.seed, step, self.rt.rank)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.zero_grad(set_to_none=True)
        total: torch.Tensor | float = 0.0
        logs = []
        for i, batch in enumerate(batches):
            sync = i == len(batches) - 1 or self.rt.world == 1
            with contextlib.nullcontext() if sync else self.net.no_sync():  # type: ignore[operator]
                with self.rt.autocast():
                    loss, info = self.net(batch)
                self.scaler.scale(loss / len(batches)).backward()
            total = total + loss.detach().float() / len(batches)  # the mean is over all micro-batches
            logs.append(info)
        for p in self.params:  # a sparse gradient only when VLE was the sole user of an embedding row
            if p.grad is not None and p.grad.is_sparse:
                p.grad = p.grad.to_dense()
        self.scaler.unscale_(self.optimizer)
        gnorm = grad_norm(self.params, s.clip_norm, foreach=self.rt.device.type == "cuda")
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        if self.rt.world > 1:  # log the loss of the whole world, not of this process's share
            total = total.double()  # type: ignore[union-attr]
            torch.distributed.all_reduce(total)
            total = total / self.rt.world
        self.watch.update(total, step + 1)  # type: ignore[arg-type]
        self.step = step + 1
        self.position = position
        rec = {"step": self.step, "loss": total, "lr": lr, "grad_norm": gnorm, **_merge(logs)}
        self.tokens += int(rec.get("tokens", 0))
        return rec

    def guarded_step(self, batches: list[Any], position: dict[str, Any] | None, first: bool) -> dict[str, Any]:
        """`train_step`, with the answers to its failures: out of memory (what fits, on the first update of
        this run), and torch.compile failing on its first call (the step reruns eagerly)."""
        try:
            return self.train_step(batches, position)
        except WorkFailed:
            raise
        except Exception as e:
            if is_oom(e):
                self.optimizer.zero_grad(set_to_none=True)
                if first and self.objective.batch_size:  # the first update: find what fits, before any
                    raise batch_too_large(self.objective.batch_size, self.s.accumulate, self.largest_fitting_batch(),
                                          "GPU" if self.rt.device.type == "cuda" else "CPU") from None
                raise WorkFailed(f"out of memory at step {self.step + 1}; lower the batch size (--batch-size / "
                                 "--max-tokens) and raise --accumulate, then rerun to resume") from None
            if not (first and self.compiled):
                raise
            self.compile_failed(e)
            return self.train_step(batches, position)

    # ---------------------------------------------------------------- evaluation
    def evaluate_and_save(self, log: Callable[[dict[str, Any]], None]) -> None:
        self.watch.check(self.rt.amp)  # never a checkpoint of weights that a non-finite loss has updated
        objective_state = self.objective_state()  # on every process: it may gather across them
        if self.rt.main:
            metrics = self.objective.evaluate(self.model)
            improved = metrics is None
            if metrics is not None:
                score = float(metrics[self.objective.metric])
                prev = self.best.get("score")
                improved = prev is None or (score > prev if self.objective.maximize else score < prev)
                self.last_metrics = metrics
                log({"event": "valid", "step": self.step, **metrics})
            if improved:
                self.best = {"score": None if metrics is None else score, "step": self.step, "metrics": metrics or {}}
                self.save("best", objective_state)
            self.save("last", objective_state)  # last: `last` commits the step (a kill before it redoes the step,
            #                                     and so writes the same `best` again)
            if metrics is not None:
                ui.info(f"{self.s.label} step {self.step}/{self.s.max_steps}: {self.objective.describe(metrics)} "
                        f"(best at step {self.best['step']})")
        self.rt.barrier()

    def probe(self) -> None:
        """GPU: one full-size forward/backward before training; out of memory -> what fits (see `fits`)."""
        if self.rt.device.type == "cuda" and self.objective.batch_size and self.step < self.s.max_steps:
            b = self.largest_fitting_batch()
            if b != self.objective.batch_size:
                raise batch_too_large(self.objective.batch_size, self.s.accumulate, b, "GPU")

    def fits(self, b: int) -> bool:
        try:
            with self.rt.autocast():
                loss = self.objective.probe_loss(self.model, b)
            if loss is None:
                return True
            loss.backward()
            return True
        except Exception as e:  # noqa: BLE001 - only out-of-memory is an answer; the rest is re-raised
            if not is_oom(e):
                raise
            return False
        finally:
            self.optimizer.zero_grad(set_to_none=True)
            if self.rt.device.type == "cuda":
                torch.cuda.empty_cache()

    def largest_fitting_batch(self) -> int:
        b = self.objective.batch_size
        while b >= 1 and not self.fits(b):
            b //= 2
        return b


class NonFinite:
    """The first step whose loss was not finite, and that loss, kept on the device and read only by `check`."""

    def __init__(self, device: torch.device):
        self.step = torch.zeros((), dtype=torch.long, device=device)    # 0: none yet
        self.loss = torch.zeros((), dtype=torch.float64, device=device)

    def update(self, loss: torch.Tensor, step: int) -> None:
        first = (self.step == 0) & ~torch.isfinite(loss)
        self.step = torch.where(first, step, self.step)
        self.loss = torch.where(first, loss.double(), self.loss)

    def check(self, amp: torch.dtype | None = None) -> None:
        """Raise WorkFailed if a loss was not finite: one host read."""
        self.read({}, amp)

    def read(self, rec: dict[str, Any], amp: torch.dtype | None = None) -> dict[str, Any]:
        """`rec` with its device tensors as Python floats, read with this check in one host sync."""
        out = read({**rec, "_bad_step": self.step, "_bad_loss": self.loss})
        step, loss = int(out.pop("_bad_step")), out.pop("_bad_loss")
        if step:
            raise WorkFailed(f"the loss became {loss} at step {step} (lower --lr, raise --warmup"
                             + (", or use --amp bf16/none)" if amp == torch.float16 else ")"))
        return out


def grad_norm(params: list[torch.nn.Parameter], clip_norm: float, foreach: bool) -> torch.Tensor:
    """The global L2 norm of the gradients (a device tensor), clipping them to `clip_norm` when it is > 0."""
    grads = [p.grad for p in params if p.grad is not None]
    each = True if foreach else None  # (foreach kernels are the GPU's; on a CPU torch picks its own path)
    if clip_norm > 0:
        return torch.nn.utils.clip_grad_norm_(params, clip_norm, foreach=each)
    return torch.nn.utils.get_total_norm(grads, foreach=each)


def _merge(logs: list[dict[str, Any]]) -> dict[str, Any]:
    """Micro-batch logs of one update: tokens summed, other numbers averaged (device tensors stay on the
    device), the rest listed."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for d in logs for k in d):
        vals = [d[key] for d in logs if key in d]
        if key == "tokens":
            out[key] = int(sum(vals))
        elif all(isinstance(v, torch.Tensor) for v in vals):
            out[key] = torch.stack([v.float() for v in vals]).mean()
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            out[key] = float(np.mean(vals))
        else:
            out[key] = vals if len(vals) > 1 else vals[0]
    return out


def read(rec: dict[str, Any]) -> dict[str, Any]:
    """A step record with its device tensors as Python floats: all of them in one host read."""
    keys = [k for k, v in rec.items() if isinstance(v, torch.Tensor)]
    if not keys:
        return dict(rec)
    values = torch.stack([rec[k].detach().double().reshape(()) for k in keys]).tolist()
    return {**rec, **dict(zip(keys, values))}


def fit(objective: Objective, model: torch.nn.Module, settings: Settings, run_dir: Path, rt: Runtime, *,
        meta: dict[str, Any] | None = None, on_checkpoint: Callable[[dict[str, Any]], None] | None = None
        ) -> dict[str, Any]:
    """Train `model` on `objective` up to `settings.max_steps` updates in `run_dir`, resuming from its `last`."""
    run_dir = Path(run_dir)
    warning = check_warmup(settings.warmup, settings.max_steps, settings.lr)  # a warm-up >= the run, or > half
    if warning and rt.main:
        ui.warn(f"{settings.label}: {warning}")
    t = Trainer(objective, model, settings, run_dir, rt, dict(meta or {}))
    resumed = t.restore()
    metrics_path = run_dir / "metrics.jsonl"
    if rt.main:
        run_dir.mkdir(parents=True, exist_ok=True)
        truncate_jsonl(metrics_path, t.step)
    t.probe()
    trackers = Trackers.open(settings.tensorboard, settings.wandb, run_dir, t.step) if rt.main else Trackers()
    out = os.open(metrics_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if rt.main else None

    def log(rec: dict[str, Any]) -> None:
        """One whole line, or none: a failed write (disk full) is cut off again before the error is raised."""
        if out is not None:
            data, end = (json.dumps(rec) + "\n").encode("utf-8"), os.lseek(out, 0, os.SEEK_END)
            try:
                while data:
                    data = data[os.write(out, data):]
            except OSError as e:
                os.ftruncate(out, end)
                raise write_failed(e, metrics_path) or e from None
            trackers.write(rec)

    def checkpoint_hook() -> None:
        if on_checkpoint is not None and rt.main:
            on_checkpoint({"step": t.step, "best_step": t.best.get("step")})

    start, tok0, t0 = t.step, t.tokens, time.time()
    recent: list[float] = []  # the losses read at log steps (the bar shows their mean)
    bar = ui.progress(ui.text_column("{task.fields[info]}")) if rt.main else None
    feed = Prefetcher(objective, settings.accumulate, t.step, settings.max_steps, settings.prefetch,
                      pin=rt.device.type == "cuda")
    try:
        with bar if bar is not None else contextlib.nullcontext():
            task = bar.add_task(settings.label, total=settings.max_steps, completed=t.step, info="") if bar else None
            while t.step < settings.max_steps:
                batches, position = feed.get(t.step)
                rec = t.guarded_step(to_device(batches, rt.device), position, first=t.step == start)
                elapsed = time.time() - t0
                tps = (t.tokens - tok0) / max(elapsed, 1e-9)
                if t.step % settings.log_every == 0 or t.step == settings.max_steps:
                    rec = t.watch.read(rec, rt.amp)  # the record and the non-finite check: one host read
                    recent = (recent + [rec["loss"]])[-5:]
                    log({"event": "train", **rec, "tokens_per_s": tps, "tokens_total": t.tokens, "elapsed_s": elapsed,
                         "world_size": rt.world})
                if bar is not None:
                    loss = f"loss {np.mean(recent):.3f} " if recent else ""
                    bar.update(task, completed=t.step, info=f"{loss}lr {rec['lr']:.2e} {tps:,.0f} tok/s")
                at_eval = (settings.eval_every and t.step % settings.eval_every == 0) or t.step == settings.max_steps
                if at_eval:
                    t.evaluate_and_save(log)
                    checkpoint_hook()
                elif settings.save_every and t.step % settings.save_every == 0:
                    t.watch.check(rt.amp)  # (as before every save)
                    objective_state = t.objective_state()
                    if rt.main:
                        t.save("last", objective_state)
                    rt.barrier()
    finally:
        feed.close()
        trackers.close()
        if out is not None:
            os.close(out)
    elapsed = time.time() - t0
    return {"steps": t.step, "steps_this_run": t.step - start, "tokens": t.tokens, "resumed": resumed,
            "tokens_per_s": (t.tokens - tok0) / max(elapsed, 1e-9), "best_step": t.best.get("step"),
            "best_score": t.best.get("score"), "best_metrics": t.best.get("metrics"), "valid": t.last_metrics,
            "seconds": elapsed}

