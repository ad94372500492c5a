"""Start-up time of `xlp COMMAND --help` against another revision of this repository (issue 25).

    .venv/bin/python benchmarks/cli_startup.py [--base REV] [--rounds 7]

The other revision is checked out into a temporary git worktree (the compiled extensions of this tree are copied
beside its sources, so both run the same native code) and both trees run `python -m xlp_cli ...` with this venv's
Python, in interleaved rounds so a busy machine slows them alike. Prints the median wall time of each command per
tree and the ratio HEAD / REV (above 1: HEAD starts slower). Start-up is what a shell pipeline of `xlp text` or a
mistyped flag pays every time; no torch, no stage code, only the CLI, the stage table and one stage's config.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMANDS = [["prepare", "--help"], ["pretrain", "--help"], ["finetune", "--help"], ["evaluate", "--help"],
            ["text", "--help"], ["bpe", "apply", "--help"]]


def _worktree(rev: str, where: Path) -> Path:
    tree = where / "base"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(tree), rev], check=True)
    for ext in (REPO / "xlp_cli").rglob("*.so"):  # the native parts, built by `make setup` in place
        dest = tree / ext.relative_to(REPO)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ext, dest)
    return tree


def _time(tree: Path, args: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "xlp_cli", *args], cwd=tree, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="9ad19a3", help="the revision to compare with (default: before issue 25)")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = _worktree(args.base, Path(tmp))
        try:
            print(f"{'command':20s} {args.base:>10s} {'HEAD':>10s}  HEAD/{args.base}")
            for cmd in COMMANDS:
                times: dict[str, list[float]] = {"base": [], "head": []}
                for _ in range(args.rounds):
                    times["base"].append(_time(base, cmd))
                    times["head"].append(_time(REPO, cmd))
                b, h = statistics.median(times["base"]), statistics.median(times["head"])
                print(f"{' '.join(cmd):20s} {b:9.3f}s {h:9.3f}s  {h / b:.2f}x")
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)


if __name__ == "__main__":
    main()
