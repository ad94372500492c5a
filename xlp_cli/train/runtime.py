"""Where and how a run executes: device, torchrun/DDP, mixed precision, seeds, barriers, out-of-memory hints.

    rt = Runtime.create(device="auto", amp="auto", threads=0)   # torchrun's env: one process per GPU / CPU share
                                                                 # (on CUDA: TF32 matmuls allowed)
    rt.device, rt.rank, rt.world, rt.main, rt.amp               # amp: torch.bfloat16 / float16 on GPU, else None
    with rt.autocast(): ...                                      # CUDA autocast to rt.amp (nothing on CPU)
    scaler = rt.grad_scaler()                                    # enabled only for fp16
    net = rt.wrap(module, find_unused_parameters=False)          # DistributedDataParallel when world > 1
    rt.barrier()

Determinism: the random choices of optimizer step s are seeded from (seed, s, rank, ...) by `step_seed`, never from
history, so a run stopped after step k and resumed from its checkpoint computes the same steps (bitwise on CPU).
This is the one module for each of these; stages and the engine never pick a device or seed on their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from xlp_cli.core.errors import BadInput


def pick_device(name: str, local_rank: int = 0, world: int = 1) -> torch.device:
    """`auto` (a GPU when there is one), `cpu`, `cuda` or `cuda:N`; under torchrun each process takes its
    LOCAL_RANK GPU."""
    if name not in ("auto", "cpu", "cuda") and not name.startswith("cuda:"):
        raise BadInput(f"--device {name!r}: expected auto, cpu, cuda or cuda:N")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise BadInput(f"--device {name}: no CUDA GPU is available")
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    dev = torch.device(f"cuda:{local_rank}" if world > 1 or name in ("auto", "cuda") else name)
    torch.cuda.set_device(dev)
    return dev


def amp_dtype(device: torch.device, amp: str) -> torch.dtype | None:
    """`--amp auto|bf16|fp16|none`: auto = bf16 where the GPU supports it, else fp16; always None (fp32) on CPU."""
    if device.type != "cuda" or amp == "none":
        return None
    if amp == "fp16":
        return torch.float16
    if amp == "bf16" or torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16


@dataclasses.dataclass
class Runtime:
    device: torch.device
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    amp: torch.dtype | None = None

    @classmethod
    def create(cls, device: str = "auto", amp: str = "auto", threads: int = 0) -> "Runtime":
        """torchrun sets WORLD_SIZE/RANK/LOCAL_RANK: NCCL on GPUs, gloo on CPU. Otherwise a single process."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
        dev = pick_device(device, local, world)
        if dev.type == "cuda":  # TF32 for the float32 matmuls that autocast leaves (and for --amp none)
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        if threads > 0:
            torch.set_num_threads(threads)
        if world > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        return cls(dev, rank, world, local, amp_dtype(dev, amp))

    @property
    def main(self) -> bool:
        return self.rank == 0

    def autocast(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if self.amp is None else torch.autocast("cuda", dtype=self.amp)

    def grad_scaler(self) -> torch.amp.GradScaler:
        return torch.amp.GradScaler("cuda", enabled=self.amp == torch.float16)

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def wrap(self, module: torch.nn.Module, *, find_unused_parameters: bool = False) -> torch.nn.Module:
        """DDP when world > 1, its gradients views of the all-reduce buckets (no second copy). Not
        `static_graph`: a step's autograd graph changes with its data (XLP's projection runs once for a
        monolingual batch, once per language for a pair; `no_sync` micro-batches), which DDP's static graph
        refuses (an internal assert in torch 2.13, seen on gloo)."""
        if self.world == 1:
            return module
        return torch.nn.parallel.DistributedDataParallel(
            module, device_ids=[self.device.index] if self.device.type == "cuda" else None,
            find_unused_parameters=find_unused_parameters, gradient_as_bucket_view=True)

    def amp_name(self) -> str:
        return "none" if self.amp is None else str(self.amp).replace("torch.", "")

    def describe(self) -> str:
        return (str(self.device) + (f" x {self.world} processes" if self.world > 1 else "")
                + (f", {self.amp_name()} autocast" if self.amp is not None else ""))


# ---------------------------------------------------------------- seeds and RNG
def step_seed(*parts: int) -> int:
    """A 32-bit seed from integers (seed, step, micro-batch, rank, purpose ...)."""
    return int(np.random.SeedSequence([int(p) & 0xFFFFFFFF for p in parts]).generate_state(1)[0])


def seed_dropout(seed: int, step: int, rank: int) -> None:
    """The global torch RNG (dropout) for optimizer step `step` (0-based) of process `rank`."""
    torch.manual_seed(step_seed(seed, step, rank, 7))


def rng_state() -> dict[str, Any]:
    out = {"torch": torch.get_rng_state().tolist()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return out


def set_rng_state(states: dict[str, Any]) -> None:
    """Restore `rng_state()`; raises ValueError/TypeError for a malformed record."""
    if "torch" in states:
        torch.set_rng_state(torch.tensor(states["torch"], dtype=torch.uint8))
    if "cuda" in states and torch.cuda.is_available():
        with contextlib.suppress(RuntimeError):
            torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in states["cuda"]])


# ---------------------------------------------------------------- out of memory
def is_oom(e: BaseException) -> bool:
    if isinstance(e, (MemoryError, torch.cuda.OutOfMemoryError)):
        return True
    msg = str(e)
    return isinstance(e, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg
                                            or "DefaultCPUAllocator" in msg)


def batch_too_large(batch_size: int, accumulate: int, fitting: int, where: str) -> BadInput:
    """The one-line answer to an out-of-memory first step: what fits, with the same effective batch."""
    if fitting < 1:
        return BadInput(f"even --batch-size 1 does not fit in {where} memory; use a smaller --preset or --bptt")
    acc = accumulate * math.ceil(batch_size / fitting)
    return BadInput(f"--batch-size {batch_size} does not fit in {where} memory; --batch-size {fitting} does: "
                    f"try --batch-size {fitting} --accumulate {acc} (the same effective batch)")


def fmt_time(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
