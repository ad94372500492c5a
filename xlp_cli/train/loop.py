"""The training loop: AdamW + warm-up/inverse-sqrt, accumulation, clipping, AMP, DDP, validation, checkpoints.

Determinism: every random choice of step s (language, masking, dropout) is seeded from (seed, s, micro-batch,
rank), never from history; data streams keep an explicit position. So a run stopped after step k and resumed
from its `last` checkpoint computes exactly the steps an uninterrupted run computes (bitwise on CPU).

Checkpoint folder (RUN/checkpoints/last, .../best):
    model.safetensors + model.json   weights and model config (xlp_cli.models.checkpoint)
    state.pt                         {"optimizer": ..., "scaler": ...}: tensors/numbers only, weights_only=True
    meta.json                        step, tokens, data position, best validation loss, RNG states as lists
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from xlp_cli import artifacts, ui
from xlp_cli.errors import BadInput, WorkFailed
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.models.encoder import TransformerEncoder
from xlp_cli.train.data import Batch, PretrainData, mask_tokens

STATE = "state.pt"
META = "meta.json"


# ------------------------------------------------------------------------------------------ setup
@dataclasses.dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str) -> tuple[Dist, torch.device]:
    """torchrun sets WORLD_SIZE/RANK/LOCAL_RANK: NCCL on GPUs, gloo on CPU. Otherwise a single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    d = Dist(int(os.environ.get("RANK", "0")), world, int(os.environ.get("LOCAL_RANK", "0")))
    want_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BadInput(f"--device {device}: no CUDA GPU is available")
    if want_cuda:
        dev = torch.device(f"cuda:{d.local_rank}" if world > 1 or device in ("auto", "cuda") else device)
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return d, dev


def barrier(d: Dist) -> None:
    """Wait for every process (a no-op in a single process)."""
    if d.world > 1:
        dist.barrier()


def amp_dtype(device: torch.device, amp: str) -> torch.dtype | None:
    """`--amp auto|bf16|fp16|none`: auto = bf16 where the GPU supports it, else fp16; always None (fp32) on CPU."""
    if device.type != "cuda" or amp == "none":
        return None
    if amp == "fp16":
        return torch.float16
    if amp == "bf16" or torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16


def autocast(dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """CUDA autocast to `dtype`, or nothing when `dtype` is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast("cuda", dtype=dtype)


def wrap_ddp(net: torch.nn.Module, device: torch.device, *, find_unused_parameters: bool = False) -> torch.nn.Module:
    """DistributedDataParallel on the process group made by `init_distributed` (CUDA: this process's GPU)."""
    return torch.nn.parallel.DistributedDataParallel(
        net, device_ids=[device.index] if device.type == "cuda" else None, find_unused_parameters=find_unused_parameters)


def lr_at(step: int, peak: float, warmup: int) -> float:
    """fairseq's inverse_sqrt: linear warm-up from 0 to `peak` over `warmup` steps, then peak*sqrt(warmup/step).

    `step` counts from 1 (the update being made)."""
    if warmup > 0 and step < warmup:
        return peak * step / warmup
    return peak * math.sqrt(max(warmup, 1) / max(step, 1))


def step_seed(*parts: int) -> int:
    return int(np.random.SeedSequence([int(p) & 0xFFFFFFFF for p in parts]).generate_state(1)[0])


def _rng_states() -> dict[str, Any]:
    out = {"torch": torch.get_rng_state().tolist()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return out


def _set_rng_states(states: dict[str, Any]) -> None:
    if "torch" in states:
        torch.set_rng_state(torch.tensor(states["torch"], dtype=torch.uint8))
    if "cuda" in states and torch.cuda.is_available():
        with contextlib.suppress(Exception):
            torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in states["cuda"]])


def is_oom(e: BaseException) -> bool:
    if isinstance(e, (MemoryError, torch.cuda.OutOfMemoryError)):
        return True
    msg = str(e)
    return isinstance(e, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg
                                            or "DefaultCPUAllocator" in msg)


# ------------------------------------------------------------------------------------------ trainer
class Trainer:
    def __init__(self, cfg: Any, model: TransformerEncoder, data: PretrainData, run: Path, device: torch.device,
                 dist_info: Dist, counts: np.ndarray, valid: dict[str, list[Batch]], mask_weights: torch.Tensor | None,
                 on_checkpoint: Callable[[dict[str, Any]], None] | None = None):
        self.cfg, self.model, self.data, self.run, self.device, self.d = cfg, model, data, run, device, dist_info
        self.valid, self.mask_weights, self.on_checkpoint = valid, mask_weights, on_checkpoint
        self.vocab_size = model.config.vocab_size
        self.step, self.tokens, self.best = 0, 0, math.inf
        self.best_step: int | None = None
        self.last_valid: dict[str, Any] | None = None
        decay = [p for p in model.parameters() if p.requires_grad]
        fused = device.type == "cuda"
        self.optimizer = torch.optim.AdamW(decay, lr=cfg.lr, betas=tuple(cfg.adam_betas), eps=cfg.adam_eps,
                                           weight_decay=cfg.weight_decay, **({"fused": True} if fused else {}))
        self.amp_dtype = self._amp_dtype()
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp_dtype == torch.float16)
        self.net: torch.nn.Module = model
        if cfg.compile:
            self.net = torch.compile(model)  # type: ignore[assignment]
        if dist_info.world > 1:
            self.net = wrap_ddp(self.net, device)

    def _amp_dtype(self) -> torch.dtype | None:
        return amp_dtype(self.device, self.cfg.amp)

    def _autocast(self) -> contextlib.AbstractContextManager:
        return autocast(self.amp_dtype)

    # ---------------------------------------------------------------- one step
    def _micro(self, step: int, micro: int) -> tuple[Batch, torch.Tensor, torch.Tensor, torch.Tensor]:
        cfg, d = self.cfg, self.d
        full = self.data.next_batch(step, micro, cfg.batch_size * d.world)
        sl = slice(d.rank * cfg.batch_size, (d.rank + 1) * cfg.batch_size)
        batch = Batch(full.ids[sl], full.langs[sl], None if full.positions is None else full.positions[sl],
                      None if full.pad_mask is None else full.pad_mask[sl], full.name)
        gen = torch.Generator().manual_seed(step_seed(cfg.seed, step, micro, d.rank, 11))
        inputs, targets, pred = mask_tokens(batch.ids, batch.pad_mask, gen, self.vocab_size, cfg.word_pred,
                                            tuple(cfg.mask_probs), self.mask_weights)
        return batch, inputs, targets, pred

    def _loss(self, net: torch.nn.Module, batch: Batch, inputs: torch.Tensor, targets: torch.Tensor,
              pred: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dev = self.device
        logits = net(inputs.to(dev), batch.langs.to(dev),
                     None if batch.positions is None else batch.positions.to(dev),
                     None if batch.pad_mask is None else batch.pad_mask.to(dev), pred.to(dev))
        tgt = targets.to(dev)[pred.to(dev)]
        return F.cross_entropy(logits.float(), tgt), logits

    def train_step(self, step: int) -> dict[str, Any]:
        """Optimizer step number `step + 1` (batches of index `step`)."""
        cfg = self.cfg
        self.net.train()
        torch.manual_seed(step_seed(cfg.seed, step, self.d.rank, 7))  # dropout
        lr = lr_at(step + 1, cfg.lr, cfg.warmup)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        total, tokens, names = 0.0, 0, []
        for micro in range(cfg.accumulate):
            batch, inputs, targets, pred = self._micro(step, micro)
            sync = micro == cfg.accumulate - 1 or self.d.world == 1
            ctx = contextlib.nullcontext() if sync else self.net.no_sync()  # type: ignore[operator]
            with ctx:
                with self._autocast():
                    loss, _ = self._loss(self.net, batch, inputs, targets, pred)
                self.scaler.scale(loss / cfg.accumulate).backward()
            total += float(loss.detach()) / cfg.accumulate
            tokens += batch.n_tokens
            names.append(batch.name)
        for p in self.model.parameters():  # a sparse gradient only when VLE was the sole user of a row
            if p.grad is not None and p.grad.is_sparse:
                p.grad = p.grad.to_dense()
        self.scaler.unscale_(self.optimizer)
        gnorm = (torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm) if cfg.clip_norm > 0
                 else torch.sqrt(sum((p.grad.float() ** 2).sum() for p in self.model.parameters() if p.grad is not None)))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if not math.isfinite(total):
            raise WorkFailed(f"loss is {total} at step {step + 1}; lower --lr or use --amp bf16/none")
        self.step = step + 1
        self.tokens += tokens * self.d.world
        return {"step": self.step, "loss": total, "lr": lr, "grad_norm": float(gnorm), "tokens": tokens * self.d.world,
                "batches": names}

    # ---------------------------------------------------------------- validation
    @torch.no_grad()
    def validate(self) -> dict[str, Any]:
        model = self.model
        model.eval()
        out: dict[str, Any] = {"event": "valid", "step": self.step, "langs": {}}
        losses = []
        for lang, batches in self.valid.items():
            nll, correct, n = 0.0, 0, 0
            for i, b in enumerate(batches):
                gen = torch.Generator().manual_seed(step_seed(self.cfg.seed, 99, i, model.config.langs.index(lang)))
                inputs, targets, pred = mask_tokens(b.ids, b.pad_mask, gen, self.vocab_size, self.cfg.word_pred,
                                                    tuple(self.cfg.mask_probs), self.mask_weights)
                with self._autocast():
                    _, logits = self._loss(model, b, inputs, targets, pred)
                tgt = targets[pred].to(self.device)
                nll += float(F.cross_entropy(logits.float(), tgt, reduction="sum"))
                correct += int((logits.argmax(-1) == tgt).sum())
                n += int(pred.sum())
            if n:
                loss = nll / n
                out["langs"][lang] = {"loss": loss, "ppl": math.exp(min(loss, 50.0)), "acc": correct / n, "n": n}
                losses.append(loss)
        if losses:
            out["loss"] = float(np.mean(losses))
            out["ppl"] = math.exp(min(out["loss"], 50.0))
            out["acc"] = float(np.mean([v["acc"] for v in out["langs"].values()]))
        self.last_valid = out
        return out

    # ---------------------------------------------------------------- checkpoints
    def save(self, which: str = "last") -> Path:
        folder = self.run / "checkpoints" / which
        with artifacts.atomic_folder(folder) as tmp:
            ckpt.save_model(tmp, self.model)
            torch.save({"optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict()}, tmp / STATE)
            meta = {"step": self.step, "tokens": self.tokens, "best_loss": None if math.isinf(self.best) else self.best,
                    "best_step": self.best_step, "data": self.data.state(), "rng": _rng_states(),
                    "schedule": {"kind": "inverse_sqrt", "lr": self.cfg.lr, "warmup": self.cfg.warmup},
                    "valid": self.last_valid, "time": artifacts.now_iso()}
            artifacts.write_json_atomic(tmp / META, meta)
        return folder

    def restore(self, folder: Path) -> None:
        meta_path, state_path = folder / META, folder / STATE
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BadInput(f"corrupt checkpoint metadata ({e})", path=meta_path) from None
        ckpt.load_into(self.model, folder / ckpt.WEIGHTS, self.device)
        try:
            state = torch.load(state_path, map_location=self.device, weights_only=True)
            self.optimizer.load_state_dict(state["optimizer"])
            self.scaler.load_state_dict(state["scaler"])
        except FileNotFoundError:
            raise BadInput("checkpoint has no optimizer state", path=state_path) from None
        except (RuntimeError, KeyError, ValueError, EOFError, OSError) as e:
            raise BadInput(f"corrupt or incompatible optimizer state ({str(e).splitlines()[0]})", path=state_path) from None
        try:
            self.step, self.tokens = int(meta["step"]), int(meta.get("tokens", 0))
            self.best = math.inf if meta.get("best_loss") is None else float(meta["best_loss"])
            self.best_step = meta.get("best_step")
            self.last_valid = meta.get("valid")
            self.data.load_state(meta["data"])
            _set_rng_states(meta.get("rng", {}))
        except (KeyError, TypeError, ValueError) as e:
            raise BadInput(f"corrupt checkpoint metadata ({e})", path=meta_path) from None

    # ---------------------------------------------------------------- the loop
    def fit(self, metrics_path: Path) -> dict[str, Any]:
        cfg = self.cfg
        main = self.d.main
        log = open(metrics_path, "a", encoding="utf-8") if main else None
        t0, tok0, start = time.time(), self.tokens, self.step
        recent: list[float] = []
        progress = ui.progress(ui_text("{task.fields[info]}")) if main else None
        try:
            ctx = progress if progress is not None else contextlib.nullcontext()
            with ctx:
                task = progress.add_task("pretrain", total=cfg.max_steps, completed=self.step, info="") if progress else None
                while self.step < cfg.max_steps:
                    try:
                        rec = self.train_step(self.step)
                    except Exception as e:
                        if not is_oom(e):
                            raise
                        self.optimizer.zero_grad(set_to_none=True)
                        if self.step == start:  # the first step of this run: find what fits, before any update
                            raise batch_too_large(cfg, largest_fitting_batch(self, cfg.bptt), self.device.type.upper()
                                                  if self.device.type == "cuda" else "CPU") from None
                        raise WorkFailed(f"out of memory at step {self.step + 1} with --batch-size {cfg.batch_size}; "
                                         f"try --batch-size {max(1, cfg.batch_size // 2)} --accumulate "
                                         f"{cfg.accumulate * 2} (rerun to resume)") from None
                    recent.append(rec["loss"])
                    recent = recent[-50:]
                    elapsed = time.time() - t0
                    tps = (self.tokens - tok0) / max(elapsed, 1e-9)
                    eta = (cfg.max_steps - self.step) * elapsed / max(self.step - start, 1)
                    if progress is not None:
                        progress.update(task, completed=self.step,
                                        info=f"loss {np.mean(recent):.3f} lr {rec['lr']:.2e} {tps:,.0f} tok/s "
                                             f"ETA {fmt_time(eta)}")
                    if log is not None and (self.step % cfg.log_every == 0 or self.step == cfg.max_steps):
                        rec = {"event": "train", **rec, "tokens_per_s": tps, "tokens_total": self.tokens,
                               "elapsed_s": elapsed}
                        log.write(json.dumps(rec) + "\n")
                        log.flush()
                    if self.step % cfg.eval_every == 0 or self.step == cfg.max_steps:
                        self._evaluate_and_save(log)
        finally:
            if log is not None:
                log.close()
        elapsed = time.time() - t0
        return {"steps": self.step, "steps_this_run": self.step - start, "tokens": self.tokens,
                "tokens_per_s": (self.tokens - tok0) / max(elapsed, 1e-9), "best_step": self.best_step,
                "best_valid_loss": None if math.isinf(self.best) else self.best, "valid": self.last_valid}

    def _evaluate_and_save(self, log: Any) -> None:
        if self.d.main:
            v = self.validate() if self.valid else None
            improved = False
            if v is not None and "loss" in v:
                improved = v["loss"] < self.best
                if improved:
                    self.best, self.best_step = v["loss"], self.step
                if log is not None:
                    log.write(json.dumps(v) + "\n")
                    log.flush()
                ui.info(f"step {self.step}: valid loss {v['loss']:.4f} ppl {v['ppl']:.2f} acc {v['acc']:.3f}")
            elif not self.valid:
                improved, self.best_step = True, self.step  # no valid split: best = latest
            self.save("last")
            if improved:
                with artifacts.atomic_folder(self.run / "checkpoints" / "best") as tmp:
                    shutil.copytree(self.run / "checkpoints" / "last", tmp, dirs_exist_ok=True)
            if self.on_checkpoint is not None:
                self.on_checkpoint({"step": self.step, "best_step": self.best_step})
        if self.d.world > 1:
            dist.barrier()


def ui_text(fmt: str) -> Any:
    from rich.progress import TextColumn

    return TextColumn(fmt)


def fmt_time(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _fits(trainer: Trainer, b: int, bptt: int) -> bool:
    """One forward/backward of `b` full windows; False on out-of-memory. Leaves no gradients behind."""
    try:
        ids = torch.randint(14, trainer.vocab_size, (b, bptt), device=trainer.device)
        langs = torch.zeros_like(ids)
        pred = torch.rand(ids.shape, device=trainer.device) < trainer.cfg.word_pred
        with trainer._autocast():
            loss = F.cross_entropy(trainer.net(ids, langs, None, None, pred).float(), ids[pred])
        loss.backward()
        return True
    except Exception as e:
        if not is_oom(e):
            raise
        return False
    finally:
        trainer.optimizer.zero_grad(set_to_none=True)
        if trainer.device.type == "cuda":
            torch.cuda.empty_cache()


def largest_fitting_batch(trainer: Trainer, bptt: int) -> int:
    """The largest batch size (halving from --batch-size) whose forward/backward fits in memory; 0 if none."""
    b = trainer.cfg.batch_size
    while b >= 1 and not _fits(trainer, b, bptt):
        b //= 2
    return b


def batch_too_large(cfg: Any, fitting: int, where: str) -> BadInput:
    if fitting < 1:
        return BadInput(f"even --batch-size 1 does not fit in {where} memory; use a smaller --preset or --bptt")
    acc = cfg.accumulate * math.ceil(cfg.batch_size / fitting)
    return BadInput(f"--batch-size {cfg.batch_size} does not fit in {where} memory; --batch-size {fitting} does: "
                    f"try --batch-size {fitting} --accumulate {acc} (the same effective batch)")


def probe_batch_size(trainer: Trainer, bptt: int) -> None:
    """GPU: one forward/backward at full size before training; on OOM, a BadInput saying what fits."""
    if trainer.device.type != "cuda":
        return  # CPU: the first step is the probe (see Trainer.fit)
    b = largest_fitting_batch(trainer, bptt)
    if b != trainer.cfg.batch_size:
        raise batch_too_large(trainer.cfg, b, "GPU")
