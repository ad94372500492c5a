"""The one training loop of xlp: every kind of run (pre-training, XNLI, translation, ...) is `fit(objective, ...)`.

    rt = Runtime.create(cfg.device, cfg.amp, cfg.threads)
    result = fit(objective, model, Settings.from_config(cfg, max_steps=..., lr=...), run_dir, rt)

One update (step s, 0-based): dropout seeded from (seed, s, rank); the objective's micro-batches for s, each
forward+backward under autocast (DDP syncs gradients on the last one); unscale, clip, AdamW step, the one
schedule (`schedule.py`). Every `eval_every` steps and at the end, rank 0 evaluates (`objective.evaluate`),
writes `RUN/checkpoints/last` (weights, optimizer/scheduler/scaler state, meta with the objective's data position
and RNG) and, when the objective's metric improved (or there is nothing to evaluate), `checkpoints/best` (weights).
`save_every` also writes `last` in between. Metrics go to `RUN/metrics.jsonl`, one JSON object per event.

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
from xlp_cli.train.runtime import Runtime, batch_too_large, is_oom, rng_state, seed_dropout, set_rng_state
from xlp_cli.train.schedule import WarmupInverseSqrt
from xlp_cli.train.sections import Adam
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
    log_every: int = 10
    compile: bool = False
    label: str = "train"     # progress bar and terminal lines

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
        fused = {"fused": True} if self.rt.device.type == "cuda" else {}
        self.optimizer = torch.optim.AdamW(params, lr=self.s.lr, betas=tuple(self.s.betas), eps=self.s.eps,
                                           weight_decay=self.s.weight_decay, **fused)
        self.scheduler = WarmupInverseSqrt(self.optimizer, self.s.warmup)
        self.scaler = self.rt.grad_scaler()
        inner = torch.compile(self.model) if self.s.compile else self.model
        self.net = self.rt.wrap(LossModule(inner, self.objective),
                                find_unused_parameters=self.objective.find_unused_parameters)

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
    def train_step(self) -> dict[str, Any]:
        s, step = self.s, self.step
        self.net.train()
        seed_dropout(s.seed, step, self.rt.rank)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.zero_grad(set_to_none=True)
        total, logs = 0.0, []
        batches = list(self.objective.micro_batches(step, s.accumulate))  # the mean is over all of them
        for i, batch in enumerate(batches):
            sync = i == len(batches) - 1 or self.rt.world == 1
            with contextlib.nullcontext() if sync else self.net.no_sync():  # type: ignore[operator]
                with self.rt.autocast():
                    loss, info = self.net(batch)
                if not torch.isfinite(loss.detach()):
                    raise WorkFailed(f"the loss became {float(loss.detach())} at step {step + 1} (lower --lr, raise --warmup"
                                     + (", or use --amp bf16/none)" if self.rt.amp == torch.float16 else ")"))
                self.scaler.scale(loss / len(batches)).backward()
            total += float(loss.detach()) / len(batches)
            logs.append(info)
        for p in self.params:  # a sparse gradient only when VLE was the sole user of an embedding row
            if p.grad is not None and p.grad.is_sparse:
                p.grad = p.grad.to_dense()
        self.scaler.unscale_(self.optimizer)
        if s.clip_norm > 0:
            gnorm = torch.nn.utils.clip_grad_norm_(self.params, s.clip_norm)
        else:
            gnorm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in self.params if p.grad is not None))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        if self.rt.world > 1:  # log the loss of the whole world, not of this process's share
            t = torch.tensor([total], dtype=torch.float64, device=self.rt.device)
            torch.distributed.all_reduce(t)
            total = float(t) / self.rt.world
        self.step = step + 1
        rec = {"step": self.step, "loss": total, "lr": lr, "grad_norm": float(gnorm), **_merge(logs)}
        self.tokens += int(rec.get("tokens", 0))
        return rec

    # ---------------------------------------------------------------- evaluation
    def evaluate_and_save(self, log: Callable[[dict[str, Any]], None]) -> None:
        objective_state = self.objective.state_dict()  # on every process: it may gather across them
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


def _merge(logs: list[dict[str, Any]]) -> dict[str, Any]:
    """Micro-batch logs of one update: tokens summed, other numbers averaged, the rest listed."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for d in logs for k in d):
        vals = [d[key] for d in logs if key in d]
        if key == "tokens":
            out[key] = int(sum(vals))
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            out[key] = float(np.mean(vals))
        else:
            out[key] = vals if len(vals) > 1 else vals[0]
    return out


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

    def checkpoint_hook() -> None:
        if on_checkpoint is not None and rt.main:
            on_checkpoint({"step": t.step, "best_step": t.best.get("step")})

    start, tok0, t0 = t.step, t.tokens, time.time()
    recent: list[float] = []
    bar = ui.progress(ui.text_column("{task.fields[info]}")) if rt.main else None
    try:
        with bar if bar is not None else contextlib.nullcontext():
            task = bar.add_task(settings.label, total=settings.max_steps, completed=t.step, info="") if bar else None
            while t.step < settings.max_steps:
                try:
                    rec = t.train_step()
                except Exception as e:
                    if not is_oom(e):
                        raise
                    t.optimizer.zero_grad(set_to_none=True)
                    if t.step == start and objective.batch_size:  # the first update: find what fits, before any
                        raise batch_too_large(objective.batch_size, settings.accumulate, t.largest_fitting_batch(),
                                              "GPU" if rt.device.type == "cuda" else "CPU") from None
                    raise WorkFailed(f"out of memory at step {t.step + 1}; lower the batch size (--batch-size / "
                                     "--max-tokens) and raise --accumulate, then rerun to resume") from None
                recent = (recent + [rec["loss"]])[-50:]
                elapsed = time.time() - t0
                tps = (t.tokens - tok0) / max(elapsed, 1e-9)
                if bar is not None:
                    bar.update(task, completed=t.step, info=f"loss {np.mean(recent):.3f} lr {rec['lr']:.2e} {tps:,.0f} tok/s")
                if t.step % settings.log_every == 0 or t.step == settings.max_steps:
                    log({"event": "train", **rec, "tokens_per_s": tps, "tokens_total": t.tokens, "elapsed_s": elapsed,
                         "world_size": rt.world})
                at_eval = (settings.eval_every and t.step % settings.eval_every == 0) or t.step == settings.max_steps
                if at_eval:
                    t.evaluate_and_save(log)
                    checkpoint_hook()
                elif settings.save_every and t.step % settings.save_every == 0:
                    objective_state = objective.state_dict()
                    if rt.main:
                        t.save("last", objective_state)
                    rt.barrier()
    finally:
        if out is not None:
            os.close(out)
    elapsed = time.time() - t0
    return {"steps": t.step, "steps_this_run": t.step - start, "tokens": t.tokens, "resumed": resumed,
            "tokens_per_s": (t.tokens - tok0) / max(elapsed, 1e-9), "best_step": t.best.get("step"),
            "best_score": t.best.get("score"), "best_metrics": t.best.get("metrics"), "valid": t.last_metrics,
            "seconds": elapsed}

