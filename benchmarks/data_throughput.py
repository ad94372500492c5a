"""The input pipeline's speed: tokens per second that ONE core's batch building delivers to the training step,
for MLM, TLM, CA-MLM and MASS, from real id shards (`make gpu-data`: Multi30k de/en/fr, BPE 8k).

    .venv/bin/python benchmarks/data_throughput.py [--data gpu-data] [--tokens 16384] [--bptt 256]
        [--steps 40] [--rounds 3] [--device-shapes cuda|cpu]

What is timed is exactly what `train/prefetch.py`'s worker runs for a step, on one thread
(`torch.set_num_threads(1)`): the objective's `micro_batches(step, 1)` (reading row groups, packing windows or
pairs, language sampling, masking 80/10/10, the fixed prediction slots, VECO's side split, MASS's span batches)
for `--steps` consecutive steps, as a GPU run builds them (`--device-shapes cuda`: lengths padded to multiples
of 32). Every objective gets micro-batches of about `--tokens` real tokens, as a GPU run sizes them (MLM:
tokens / bptt windows; TLM, CA-MLM, MASS: as many pairs or sentences as hold that many on this data).
Tokens are the real (non-padding) tokens of the batches, as the engine counts them. The target is >= 1M tokens/s per core: an H100 at 40% MFU trains `xlm15`
at ~300k tokens/s and `small` at several million (issue 26), and the worker runs beside the step.

Time is the building thread's CPU time (`time.thread_time`): per core, and not inflated by other jobs on a
loaded machine; the wall-clock rate is printed beside it. Rounds are interleaved over the objectives; the best
and the median round are reported, and the target is judged on the median.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xlp_cli.core import config as cfgmod  # noqa: E402
from xlp_cli.train.config import PretrainConfig  # noqa: E402
from xlp_cli.train import pretrain  # noqa: E402
from xlp_cli.train.runtime import Runtime  # noqa: E402
from xlp_cli.train.shards import SHAPE_STEP  # noqa: E402

OBJECTIVES = ("mlm", "tlm", "tlm+ca-mlm", "mass")


def build_objective(name: str, args: argparse.Namespace):
    cfg = cfgmod.from_dict(PretrainConfig, {"data": [str(args.data / "ids"), str(args.data / "vocab")], "objective": name,
                                       "preset": "tiny", "bptt": args.bptt, "batch_size": args.tokens // args.bptt,
                                       "accumulate": 1, "lang_encoding": "xlp", "seed": 1})
    inp = pretrain.inputs(cfg)
    obj = pretrain.objective_class(name).create(cfg, inp, pretrain.build_model(cfg, inp, torch.device("cpu")),
                                                Runtime(torch.device("cpu")))
    if args.device_shapes == "cuda":  # build what a GPU run builds (its padded shapes) without a GPU
        obj.shape_step = SHAPE_STEP
    return obj


def tokens_of(item) -> int:
    """The real tokens of one micro-batch as the engine counts them (its `tokens` log entry)."""
    if isinstance(item, tuple) and len(item) == 3 and isinstance(item[0], int):  # MASS: (lang, batch, tokens)
        return item[2]
    mb = item[0] if isinstance(item, tuple) else item                      # VECO: (masked, sides...)
    return mb.batch.n_tokens


def time_round(obj, start: int, steps: int) -> tuple[float, float, int]:
    """(CPU seconds of this thread, wall seconds, tokens) of building `steps` steps' batches."""
    c0, t0, tokens = time.thread_time(), time.perf_counter(), 0
    for step in range(start, start + steps):
        for item in obj.micro_batches(step, 1):
            tokens += tokens_of(item)
    return time.thread_time() - c0, time.perf_counter() - t0, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent.parent / "gpu-data")
    ap.add_argument("--tokens", type=int, default=16384, help="real tokens per micro-batch (about)")
    ap.add_argument("--bptt", type=int, default=256)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device-shapes", choices=("cpu", "cuda"), default="cuda",
                    help="build the batches a GPU run builds (fixed shapes: padded pairs, MASS widths) or a CPU run's")
    args = ap.parse_args()
    if not (args.data / "ids" / "manifest.json").is_file():
        raise SystemExit(f"{args.data}/ids not found: run `make gpu-data` first")
    torch.set_num_threads(1)
    objs = {name: build_objective(name, args) for name in OBJECTIVES}
    sizes = {}
    for name, obj in objs.items():  # warm (first row groups read), and each objective's batch size for --tokens
        _, _, tokens = time_round(obj, 0, 2)
        per_row = tokens / (2 * obj.cfg.batch_size)
        if name != "mlm":
            obj.cfg = dataclasses.replace(obj.cfg, batch_size=max(1, round(args.tokens / per_row)))
        sizes[name] = obj.cfg.batch_size
    rates: dict[str, list[float]] = {name: [] for name in OBJECTIVES}
    walls: dict[str, list[float]] = {name: [] for name in OBJECTIVES}
    for r in range(args.rounds):
        for name, obj in objs.items():
            cpu, wall, tokens = time_round(obj, 2 + r * args.steps, args.steps)
            rates[name].append(tokens / cpu)
            walls[name].append(tokens / wall)
    print(f"batch building on one core: ~{args.tokens} tokens per micro-batch, --bptt {args.bptt}, {args.steps} steps "
          f"x {args.rounds} rounds, {args.device_shapes} shapes, data {args.data}, load {os.getloadavg()[0]:.1f}")
    print("tokens per CPU-second of the building thread (per core; a loaded machine's wall clock is also given)")
    print(f"{'objective':<12} {'batch size':>10} {'best tok/s':>12} {'median tok/s':>13} {'wall median':>12} "
          f"{'target 1M':>10}")
    for name in OBJECTIVES:
        best, med = max(rates[name]), statistics.median(rates[name])
        print(f"{name:<12} {sizes[name]:>10} {best:>12,.0f} {med:>13,.0f} {statistics.median(walls[name]):>12,.0f} "
              f"{'ok' if med >= 1e6 else 'BELOW':>10}")


if __name__ == "__main__":
    main()
