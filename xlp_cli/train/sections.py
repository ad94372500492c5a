"""The config sections of the stages that train, each declared once (torch-free: the CLI imports them).

A section is a dataclass mixin (`core.config.Section`): a stage config derives from it, so its fields are that
stage's flags, TOML and recipe keys, and `cfg.warmup` reads like any other field. A stage whose defaults or help
texts differ names them with `@defaults(...)` above its class. `engine.Settings.from_config` maps the optimizer
sections to the training loop.

    Optimizer   --warmup --weight-decay --clip-norm    xlp pretrain, every `xlp finetune` task
    Adam        --adam-betas --adam-eps                xlp pretrain, finetune --task unmt (the other tasks fix them)
    Precision   --amp                                  xlp pretrain, xlp finetune
    Runtime     --device --threads                     xlp finetune, xlp translate, evaluate --task retrieval/xtreme
    Tracking    --tensorboard --wandb                  xlp pretrain, every `xlp finetune` task (train/trackers.py)

The encoding section (`--lang-encoding` and the encodings' options) is `models/encoding_registry.EncodingFlags`.
The defaults written here are the fine-tuning ones (pretrain names its own). Fields that share a name but not a
type or meaning stay with their stage: --lr (one value vs a grid to search), --max-steps (the run's length vs a
cap), --batch-size, --dropout; pretrain's --device (torchrun) and --num-threads keep their own help and name.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import AMP_CHOICES, STEPS_MAX, Section, THREADS_MAX, opt
from xlp_cli.core.errors import BadInput


@dataclasses.dataclass
class Optimizer(Section):
    """AdamW with the one schedule (`train/schedule.py`): warm-up, decoupled weight decay, gradient clipping."""
    warmup: int = opt(4000, "Linear warm-up steps, then inverse square root decay (0: a constant learning rate).", lo=0, hi=STEPS_MAX)
    weight_decay: float = opt(0.0, "Decoupled (AdamW) weight decay.", lo=0, hi=1)
    clip_norm: float = opt(5.0, "Gradient clipping norm (0: off).", lo=0, hi=10**6)

    def check_optimizer(self) -> None:
        if self.warmup < 0:
            raise BadInput("--warmup must be >= 0")


@dataclasses.dataclass
class Adam(Section):
    """Adam's betas and epsilon as flags (a stage without this section gives `Settings` its fixed values)."""
    adam_betas: list[float] = opt(factory=lambda: [0.9, 0.98], help="Adam beta1,beta2.", lo=0, lt=1)
    adam_eps: float = opt(1e-8, "Adam epsilon.", gt=0, hi=1)

    def check_adam(self) -> None:
        if len(self.adam_betas) != 2 or not all(0 <= b < 1 for b in self.adam_betas):
            raise BadInput(f"--adam-betas needs two values in [0, 1), got {self.adam_betas}")


@dataclasses.dataclass
class Precision(Section):
    """Mixed precision of a training stage (`train/runtime.Runtime.create`)."""
    amp: str = opt("auto", "Mixed precision on GPU (auto: bf16 if supported, else fp16 with loss scaling; CPU: fp32).",
                   choices=AMP_CHOICES)


@dataclasses.dataclass
class Runtime(Section):
    """Where torch runs: the device and the CPU threads (neither changes the output)."""
    device: str = opt("auto", "Device: auto (cuda when available), cpu, cuda or cuda:N.", volatile=True)
    threads: int = opt(0, "CPU threads for torch (0: torch's default).", volatile=True, lo=0, hi=THREADS_MAX)


@dataclasses.dataclass
class Tracking(Section):
    """Where a training run's metrics go besides RUN/metrics.jsonl (`train/trackers.py`; both off by default)."""
    tensorboard: Path | None = opt(None, "Also write the metrics as TensorBoard event files, into DIR/<run folder name> "
                                         "(needs the tensorboard package).", volatile=True)
    wandb: str = opt("", "Also log the metrics to this Weights & Biases project (needs the wandb package and its "
                         "login or WANDB_MODE=offline; empty: off).", volatile=True)
