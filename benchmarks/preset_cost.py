"""What each `xlp pretrain --preset` costs on this machine: steps/s and the time a run of N steps takes.

    .venv/bin/python benchmarks/preset_cost.py --data out/ids [--presets tiny,small,xlm15] [--steps 3]
        [--batch-size 8] [--bptt 256] [--threads 1]

Runs the real `xlp pretrain` (on the given `xlp bpe apply` output, e.g. the README's out/ids) for --steps
optimizer steps of --batch-size windows of --bptt tokens per preset, and reads the training rate from the run's
metrics.jsonl (the first step, which includes warm-up work, is left out when there are several). A preset's
default step is 64 windows x 4 accumulation x 256 tokens = 65,536 tokens; its time per default step is
estimated as 65,536 / (tokens/s), since a CPU step's time grows linearly with its tokens at these sizes.
Prints one table: tokens/s, steps/s at the measured size, and the estimated hours for 2,000 and 750,000
default steps. The machine's load average is printed with it: on a shared machine, numbers vary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("XLP_QUIET", "1")

from xlp_cli.core.config import from_dict  # noqa: E402
from xlp_cli.train.config import PretrainConfig  # noqa: E402
from xlp_cli.train.pretrain import run  # noqa: E402

DEFAULT_STEP_TOKENS = 64 * 4 * 256  # --batch-size 64 --accumulate 4 --bptt 256


def measure(data: Path, preset: str, steps: int, batch: int, bptt: int, threads: int, out: Path) -> dict:
    cfg = from_dict(PretrainConfig, {"data": [str(data)], "out": str(out / preset), "preset": preset,
                                     "lang-encoding": "additive", "max-steps": steps, "warmup": 0,
                                     "batch-size": batch, "accumulate": 1, "bptt": bptt, "eval-every": 10 ** 6,
                                     "eval-batches": 1, "num-threads": threads, "log-every": 1}, where="benchmark")
    summary = run(cfg)
    rows = [json.loads(l) for l in (out / preset / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r.get("event") == "train"]
    if len(train) >= 2:  # leave out the first step
        tokens = train[-1]["tokens_total"] - train[0]["tokens_total"]
        seconds = train[-1]["elapsed_s"] - train[0]["elapsed_s"]
        n = train[-1]["step"] - train[0]["step"]
    else:
        tokens, seconds, n = train[-1]["tokens_total"], train[-1]["elapsed_s"], train[-1]["step"]
    tps = tokens / seconds
    default_step_s = DEFAULT_STEP_TOKENS / tps
    return {"preset": preset, "parameters": summary["parameters"], "tokens_per_s": tps, "steps_per_s": n / seconds,
            "tokens_per_step": tokens / n, "default_steps_per_s": 1 / default_step_s,
            "hours_2000": 2000 * default_step_s / 3600, "hours_750k": 750_000 * default_step_s / 3600}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="an `xlp bpe apply` output (e.g. the README's out/ids)")
    ap.add_argument("--presets", default="tiny,small,xlm15")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--bptt", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores; --threads {args.threads}; "
          f"measured at {args.batch_size} x {args.bptt} tokens per step, {args.steps} steps")
    print(f"{'preset':8} {'params':>12} {'tokens/s':>10} {'steps/s':>9} {'default steps/s':>16} "
          f"{'2,000 steps':>12} {'750k steps':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets.split(","):
            r = measure(args.data, preset, args.steps, args.batch_size, args.bptt, args.threads, Path(tmp))
            print(f"{preset:8} {r['parameters']:>12,} {r['tokens_per_s']:>10,.0f} {r['steps_per_s']:>9.3f} "
                  f"{r['default_steps_per_s']:>16.4f} {r['hours_2000']:>10.1f} h {r['hours_750k']:>10,.0f} h", flush=True)


if __name__ == "__main__":
    main()
