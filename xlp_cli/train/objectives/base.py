"""What the engine asks of a training objective. One small object per objective; the engine never changes.

    class MyObjective(Objective):
        metric, maximize = "loss", False              # which evaluate() number picks the best checkpoint
        def micro_batches(self, step, n): ...        # this process's micro-batches of update `step` (0-based) for n
                                                     # accumulation steps (it may yield several per step, e.g. one
                                                     # per data slot); the update averages over all it yields
        def loss(self, model, batch): ...            # -> (mean loss tensor, {"tokens": int, ...numbers to log})
        def evaluate(self, model): ...               # -> {"loss": ..., ...} or None (rank 0, no gradients)
        def state_dict(self) / load_state_dict(s)   # the data position, JSON-able, saved in meta.json;
                                                     # state_dict runs on every process (it may gather)
        prefetch = True; def data_position(self): ...  # optional: batches built ahead (`train/prefetch.py`)

- `micro_batches` must be a pure function of (seed, step, rank or data slot) and the objective's state, and must advance that
  state, so a resumed run draws the same batches (`runtime.step_seed` seeds any randomness: masking, noise).
- `loss` runs inside the engine's DDP-wrapped module, under autocast, in train mode. It may call the model more
  than once (VECO's two streams), call its parts (encode/decode), or generate with it under `torch.no_grad()` and
  `model.eval()` before the training forward (on-the-fly back-translation); it must restore `model.train()`.
  The "tokens" it reports are the tokens of this micro-batch summed over all processes.
- `evaluate` returns None when there is nothing to validate on (the latest checkpoint is then the best).
- The training step never reads a number from the device: `loss` returns device tensors in its info (never
  `float(...)`), and what it must know on the host (token counts, languages, how many tokens are predicted)
  comes with the batch, counted by `micro_batches`. The engine reads everything at once at log steps.
- `prefetch = True` lets the engine build the batches of the coming steps in a worker thread. It needs
  `micro_batches` to touch nothing but the objective's data position and explicit generators, and
  `data_position()` to return that position (this process's, JSON-able, without collectives);
  `state_dict(position)` turns a snapshot of it into the checkpoint's state (gathering across processes).
"""

from __future__ import annotations

from typing import Any, Iterable

import torch


class Objective:
    metric: str = "loss"
    maximize: bool = False
    find_unused_parameters: bool = False  # DDP must look for parameters a step leaves without a gradient
    batch_size: int = 0                    # for the out-of-memory hint (0: no batch-size search)
    prefetch: bool = False                 # micro_batches may run ahead in a worker thread (see above)

    def micro_batches(self, step: int, n: int) -> Iterable[Any]:
        raise NotImplementedError

    def loss(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        raise NotImplementedError

    def evaluate(self, model: torch.nn.Module) -> dict[str, Any] | None:
        return None

    def data_position(self) -> dict[str, Any] | None:
        """This process's data position now (a prefetching objective's snapshot after each step's batches)."""
        return None

    def state_dict(self, position: dict[str, Any] | None = None) -> dict[str, Any]:
        """The state a checkpoint records; `position`: a `data_position()` snapshot to record instead of the
        current one (the input pipeline may have built batches past the last step trained)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def describe(self, metrics: dict[str, Any]) -> str:
        """One line about an evaluation, for the terminal."""
        v = metrics.get(self.metric)
        return f"{self.metric} {v:.4f}" if isinstance(v, float) else f"{self.metric} {v}"

    def probe_loss(self, model: torch.nn.Module, batch_size: int) -> torch.Tensor | None:
        """A loss on a synthetic full-size micro-batch of `batch_size` rows (out-of-memory search); None: none."""
        return None
