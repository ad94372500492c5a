"""The input pipeline of the training loop: the micro-batches of the coming steps, built ahead in a worker thread.

    feed = Prefetcher(objective, accumulate=4, start=step, stop=max_steps, depth=2, pin=rt.device.type == "cuda")
    batches, position = feed.get(step)      # this step's micro-batches (pinned) and the data position after them
    batches = to_device(batches, rt.device) # non_blocking copies: they overlap the kernels queued before them
    feed.close()

Masking, padding, splitting pairs and counting tokens are CPU work; done between two steps they leave the GPU
idle. The worker builds step s+1 .. s+depth while the GPU runs step s, and waits when `depth` steps are ready
(a bounded queue: memory stays depth x one step's batches).

Exactness: an objective's `micro_batches(step, n)` is a pure function of (seed, step) and its data position,
which it advances, so building ahead changes no batch. What a checkpoint must record is the position after
the last step the loop *consumed*, not after the last one built: the worker snapshots `objective.data_position()`
after each step's batches and hands it over with them; the engine saves that snapshot.

Objectives whose batches depend on anything else (the model, a state that `loss` or `evaluate` changes) leave
`Objective.prefetch` False: their batches are then built in the loop's thread, as `depth` 0 does for any.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from typing import Any, Callable

import torch

from xlp_cli.core.handoff import put_unless_stopped
from xlp_cli.train.objectives.base import Objective


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """`obj` with `fn` applied to every tensor in it (tuples, lists, dicts, dataclasses; others kept)."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(map_tensors(x, fn) for x in obj)
    if isinstance(obj, list):
        return [map_tensors(x, fn) for x in obj]
    if isinstance(obj, dict):
        return {k: map_tensors(v, fn) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: map_tensors(getattr(obj, f.name), fn)
                                          for f in dataclasses.fields(obj) if f.init})
    return obj


def to_device(obj: Any, device: torch.device) -> Any:
    """Every tensor of `obj` on `device`, copied without blocking the host (from pinned memory: asynchronous)."""
    if device.type == "cpu":
        return obj
    return map_tensors(obj, lambda t: t.to(device, non_blocking=True))


class Prefetcher:
    """The micro-batches of steps start .. stop - 1, in order, `depth` steps ahead (0: built on demand)."""

    def __init__(self, objective: Objective, accumulate: int, start: int, stop: int, depth: int = 2,
                 pin: bool = False):
        self.objective, self.accumulate, self.pin = objective, accumulate, pin
        self.next_step, self.stop = start, stop
        self.depth = depth if objective.prefetch else 0
        self._closing = threading.Event()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, self.depth))
        self._thread: threading.Thread | None = None
        if self.depth > 0 and start < stop:
            self._thread = threading.Thread(target=self._work, name="xlp-batches", daemon=True)
            self._thread.start()

    def _build(self, step: int) -> tuple[list[Any], dict[str, Any] | None]:
        batches = list(self.objective.micro_batches(step, self.accumulate))  # the update's mean is over all of them
        if self.pin:
            batches = map_tensors(batches, lambda t: t.pin_memory())
        return batches, self.objective.data_position() if self.depth > 0 else None

    def _work(self) -> None:
        try:
            for step in range(self.next_step, self.stop):
                handed = put_unless_stopped(self._queue, (step, *self._build(step)), self._closing)
                if not handed or self._closing.is_set():
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the loop's thread, which raises it as its own
            self._queue.put(e)

    def get(self, step: int) -> tuple[list[Any], dict[str, Any] | None]:
        """Step `step`'s micro-batches and the objective's data position after them (None: the objective keeps
        no position of its own; its `state_dict()` at save time is exact)."""
        if step != self.next_step:
            raise RuntimeError(f"the input pipeline is at step {self.next_step}, asked for {step}")
        self.next_step += 1
        if self._thread is None:
            return self._build(step)
        item = self._queue.get()
        if isinstance(item, BaseException):
            raise item
        got, batches, position = item
        assert got == step, (got, step)
        return batches, position

    def close(self) -> None:
        """Stop the worker (it may be waiting on a full queue) and wait for it."""
        self._closing.set()
        if self._thread is not None:
            while self._thread.is_alive():
                try:
                    self._queue.get(timeout=0.1)
                except queue.Empty:
                    pass
            self._thread.join()
