"""Benchmark `xlp vocab-score`: tokens per second end to end from Parquet id shards, on one core.

    .venv/bin/python benchmarks/vocab_score_throughput.py [--copies 12]

Builds real id shards once (Common Voice sentences of 15 languages, as in benchmarks/bpe_learn.py, 10k BPE
merges learned and applied by xlp), then repeats each language's shards `--copies` times (new shard files with
the same real rows) to reach ~100M tokens, and times the whole `vocab-score` stage (read Parquet, bincount per
language, score, rank, write vocab_scores.parquet + vle_vocab.json) with Arrow limited to one thread.
The reference is a plain-Python collections.Counter over the same id lists (on the first copy only), so the
script prints the ratio too. Target: >= 50M tokens/s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from xlp_cli.artifacts import layout  # noqa: E402
from xlp_cli.artifacts.shards import shard_paths  # noqa: E402

WORK = ROOT / ".bench" / "vocab"


def build_ids() -> Path:
    ids = WORK / "ids"
    if (ids / "manifest.json").is_file():
        return ids
    from bpe_fixtures import make_prepared
    from bpe_learn import corpus_lines

    from xlp_cli.bpe.config import BpeApplyConfig, BpeLearnConfig
    from xlp_cli.bpe.run import apply, learn

    shutil.rmtree(WORK, ignore_errors=True)
    prep = make_prepared(WORK / "prep", corpus_lines(0), shard_rows=50000)
    learn(BpeLearnConfig(data=[prep], out=WORK / "bpe", codes=10000))
    apply(BpeApplyConfig(data=[prep, WORK / "bpe"], out=ids))
    return ids


def replicate(ids: Path, copies: int) -> Path:
    big = WORK / f"ids_x{copies}"
    if (big / "manifest.json").is_file():
        return big
    shutil.rmtree(big, ignore_errors=True)
    shutil.copytree(ids, big)
    for lang_dir in [layout.read_dir(big, "train", g) for g in layout.groups(big, "train")]:
        base = shard_paths(lang_dir)
        for c in range(1, copies):
            for p in base:
                shutil.copyfile(p, lang_dir / f"part-{c:03d}{p.name[5:]}")
    return big


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=12)
    args = ap.parse_args()
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)

    from xlp_cli.vocab.config import VocabConfig
    from xlp_cli.vocab.run import run

    ids = build_ids()
    big = replicate(ids, args.copies)
    # warm the page cache so that we time decoding and counting, not the disk
    for p in sorted(p for g in layout.groups(big, "train") for p in layout.read_dir(big, "train", g).glob("*.parquet")):
        p.read_bytes()
    out = WORK / "voc"
    shutil.rmtree(out, ignore_errors=True)
    t, c = time.perf_counter(), time.process_time()
    summary = run(VocabConfig(data=[big], out=out, k=[20, 50, 100, 200, 500, 1000]))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    n = summary["tokens_counted"]
    print(f"xlp vocab-score: {n:,} tokens, {summary['languages']} languages, dictionary {summary['dictionary_size']:,}")
    print(f"  end to end: {wall:.2f} s wall, {cpu:.2f} s CPU -> {n / wall / 1e6:.1f}M tokens/s (wall), "
          f"{n / cpu / 1e6:.1f}M tokens/s (CPU)")

    # reference: a per-token Python Counter over the same rows (one copy only; scaled)
    t = time.process_time()
    counts: Counter = Counter()
    m = 0
    for p in sorted(p for g in layout.groups(ids, "train") for p in layout.read_dir(ids, "train", g).glob("*.parquet")):
        for row in pq.read_table(p, columns=["ids"]).column(0).to_pylist():
            counts.update(row)
            m += len(row)
    ref = time.process_time() - t
    print(f"  reference Counter loop: {m / ref / 1e6:.2f}M tokens/s (CPU) -> xlp is {(n / cpu) / (m / ref):.0f}x faster")


if __name__ == "__main__":
    main()
