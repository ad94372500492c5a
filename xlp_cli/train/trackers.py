"""Where a run's metrics go besides RUN/metrics.jsonl: TensorBoard event files (`--tensorboard DIR`) and Weights &
Biases (`--wandb PROJECT`), both off unless asked for (train/sections.Tracking).

    trackers = Trackers.open(settings.tensorboard, settings.wandb, run_dir, step)   # rank 0 only
    trackers.write({"event": "train", "step": 10, "loss": 2.3, ...})              # every metrics.jsonl record
    trackers.close()

A record's numbers become scalars named `EVENT/KEY` at its `step` (`train/loss`, `valid/dev/acc`: nested dicts
are joined with `/`); strings and lists are left to metrics.jsonl. TensorBoard writes into DIR/<run folder name>,
so the grid points of one `xlp finetune` are separate runs under one DIR. A resumed run purges the events after
its checkpoint's step (`purge_step`), as metrics.jsonl is cut back. torch.utils.tensorboard and wandb are imported
here, when asked for, never at CLI start-up; a missing package is a one-line error naming it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator

from xlp_cli.core.errors import BadInput


def scalars(rec: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """(name, value) for every finite number of a metrics record, nested dicts joined with `/`."""
    for key, value in rec.items():
        if key in ("event", "step"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from scalars(value, name + "/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            yield name, float(value)


class Trackers:
    def __init__(self, board: Any = None, wandb_run: Any = None):
        self.board, self.wandb_run = board, wandb_run

    @classmethod
    def open(cls, tensorboard: str | Path | None, wandb_project: str, run_dir: Path, step: int) -> "Trackers":
        board = wandb_run = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter  # (needs the tensorboard package)
            except ImportError:
                raise BadInput("--tensorboard needs the tensorboard package (pip install tensorboard)",
                               path="--tensorboard") from None
            board = SummaryWriter(str(Path(tensorboard) / Path(run_dir).resolve().name),
                                  purge_step=step + 1 if step > 0 else None)
        if wandb_project:
            try:
                import wandb  # (an optional package: only when --wandb is given)
            except ImportError:
                raise BadInput("--wandb needs the wandb package (pip install wandb)", path="--wandb") from None
            wandb_run = wandb.init(project=wandb_project, name=Path(run_dir).resolve().name, dir=str(run_dir),
                                   resume="allow")
        return cls(board, wandb_run)

    def write(self, rec: dict[str, Any]) -> None:
        if self.board is None and self.wandb_run is None:
            return
        step, event = int(rec.get("step", 0)), rec.get("event", "train")
        values = dict(scalars(rec, f"{event}/"))
        if self.board is not None:
            for name, value in values.items():
                self.board.add_scalar(name, value, step)
        if self.wandb_run is not None and values:
            self.wandb_run.log(values, step=step)

    def close(self) -> None:
        if self.board is not None:
            self.board.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()
