"""`make gpu-data`: the real data that `benchmarks/gpu_proof.py` and `benchmarks/data_throughput.py` read, in
one ignored folder small enough to travel to a lent GPU (`../shared` does not travel; the device copies the
repository plus at most 64 MiB of carried paths).

    .venv/bin/python benchmarks/gpu_data.py [--out gpu-data] [--max-records 30000] [--codes 8000]

It runs xlp itself on the shared Multi30k corpus (de, en, fr image captions, `train.*` only; the held-out
FLORES/NTREX sets are never read):
    xlp prepare --source opus  (pairs de-en, de-fr, en-fr, and each side as monolingual text) --bpe-codes N
    xlp vocab-score            (VLE's top-K vocabularies, K = 100)
and keeps what training needs: gpu-data/ids (id shards + dict.txt + manifests) and gpu-data/vocab. The text
shards and BPE codes are deleted afterwards (gpu-data/work), so the folder stays well under 40 MiB; its size is
printed. A rerun with the folder present does nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LANGS = ("de", "en", "fr")


def xlp(*args: str) -> None:
    cmd = [sys.executable, "-m", "xlp_cli.cli", *args]
    print("+ xlp " + " ".join(args), flush=True)
    subprocess.run(cmd, cwd=REPO, check=True, env={**os.environ, "XLP_QUIET": "1"})


def folder_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2 ** 20


def build(out: Path, shared: Path, max_records: int, codes: int) -> None:
    inputs = [str(shared / "multi30k" / f"train.{lang}.gz") for lang in LANGS]
    missing = [p for p in inputs if not Path(p).is_file()]
    if missing:
        raise SystemExit(f"gpu_data: {missing[0]} not found (set XLP_DATA_DIR to the shared corpora)")
    work = out / "work"
    xlp("prepare", "--source", "opus", *inputs, "--lang", ",".join(LANGS), "--out", str(work / "prep"),
        "--mono-from-parallel", "--max-records", str(max_records), "--bpe-codes", str(codes),
        "--valid-fraction", "0.02", "--test-fraction", "0.02", "--workers", "2", "--force")
    shutil.move(str(work / "prep-ids"), str(out / "ids"))
    xlp("vocab-score", "--data", str(out / "ids"), "--out", str(out / "vocab"), "--k", "100", "--force")
    shutil.rmtree(work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "gpu-data")
    ap.add_argument("--max-records", type=int, default=30_000, help="per language and per pair")
    ap.add_argument("--codes", type=int, default=8000, help="BPE merges")
    args = ap.parse_args()
    shared = Path(os.environ.get("XLP_DATA_DIR", REPO.parent / "shared" / "data"))
    if (args.out / "ids" / "manifest.json").is_file() and (args.out / "vocab" / "manifest.json").is_file():
        print(f"{args.out}: already built ({folder_mib(args.out):.1f} MiB)")
        return
    args.out.mkdir(parents=True, exist_ok=True)
    build(args.out, shared, args.max_records, args.codes)
    print(f"{args.out}: {folder_mib(args.out):.1f} MiB (carry it: run(carry=['{args.out.name}']))")


if __name__ == "__main__":
    main()
