"""The one learning-rate schedule of xlp: linear warm-up, then inverse square root (fairseq's inverse_sqrt).

    lr(s) = peak * s / warmup          for the s-th update, s < warmup
    lr(s) = peak * sqrt(warmup / s)    for s >= warmup
    warmup = 0: lr(s) = peak           (no warm-up and no decay: there is no step to anchor the decay at)

Every kind of run (pretraining, XNLI, translation, and any later objective) uses it through the engine, so
`--warmup 0` means the same everywhere. A `torch.optim.lr_scheduler.LRScheduler`: its state (the update count)
is saved in each checkpoint with the optimizer's.
"""

from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LRScheduler


def lr_at(step: int, peak: float, warmup: int) -> float:
    """The learning rate of update number `step` (counting from 1)."""
    if warmup <= 0:
        return peak
    if step < warmup:
        return peak * step / warmup
    return peak * math.sqrt(warmup / step)


class WarmupInverseSqrt(LRScheduler):
    def __init__(self, optimizer: torch.optim.Optimizer, warmup: int, last_epoch: int = -1):
        self.warmup = int(warmup)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:  # last_epoch = updates made so far; this is the lr of the next one
        return [lr_at(self.last_epoch + 1, base, self.warmup) for base in self.base_lrs]

    def resume_at(self, updates: int) -> None:
        """Continue after `updates` updates (for a checkpoint that saved no scheduler state)."""
        self.last_epoch = updates
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = lr_at(updates + 1, base, self.warmup)
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]
