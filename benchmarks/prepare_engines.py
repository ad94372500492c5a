"""Engines and readers of `xlp prepare`: local vs Ray on this machine's CPUs, and 1 vs 2 readers.

Input: the shared UTF-8 Wikipedia samples (en, el, vi; ../shared/data/wikipedia_dumps), each rewritten at
run time as a Wikimedia multistream dump with its index (100 pages per bz2 stream), so the input is cut
into splits of --split-size compressed bytes that readers take independently. In this session:
  readers   read only (decompress, parse XML, take the pages out) every split with a pool of 1, then 2
            processes: the speed-up of the part that one main process did alone before
  local     `xlp prepare --source wikipedia` --workers 1 (one process reads and processes every split)
            and --workers 2 (two worker processes each read and process whole splits)
  ray       --engine ray: joining a 2-CPU Ray cluster that this script started (no start-up in the
            timing), and with a local cluster started by the run itself (ray.init(), start-up included)
Each prepare run is a fresh subprocess; runs are interleaved, best of --repeat. Every run must write the
same shards (checked). The load average is printed: the machine may be shared.
The scaling model printed at the end: the main process (driver) of a split-parallel run only finalizes
(dedup, split, shard writing; on Ray it also writes the chunk files), timed alone here; with f its CPU
seconds and w the readers' CPU seconds (of the --workers 2 run), N readers give at most
S(N) = (w + f) / (w / N + f).

    .venv/bin/python benchmarks/prepare_engines.py [--repeat 2] [--split-size 262144]
"""

from __future__ import annotations

import argparse
import bz2
import json
import lzma
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prepare_throughput import _RUN  # noqa: E402

from xlp_cli.artifacts.files import data_dir  # noqa: E402
from xlp_cli.prepare.records import ErrorPolicy, SourceOptions  # noqa: E402
from xlp_cli.prepare.sources import plan_splits, read_split  # noqa: E402
from xlp_cli.prepare.sources.wikipedia_multistream import write_multistream  # noqa: E402

SAMPLES = {"en": "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
           "el": "elwiki-truncated-100k.xml.xz", "vi": "viwiki-truncated-100k.xml.xz"}


def build_input(folder: Path) -> list[Path]:
    dumps = []
    for lang, name in SAMPLES.items():
        src = data_dir() / "wikipedia_dumps" / name
        raw = (bz2.open if name.endswith(".bz2") else lzma.open)(src).read()
        dump = folder / f"{lang}wiki-20240101-pages-articles-multistream.xml.bz2"
        write_multistream(raw, dump, folder / f"{lang}wiki-20240101-pages-articles-multistream-index.txt.bz2", 100)
        dumps.append(dump)
    return dumps


def _read_one(split) -> tuple[int, float]:
    t = time.process_time()
    n = sum(1 for _ in read_split(split, SourceOptions(langs=[], defer_pages=True), ErrorPolicy("raise")))
    return n, time.process_time() - t


def readers(splits: list, n: int) -> tuple[float, int, float]:
    """(wall, pages, reader CPU seconds) of reading every split with a pool of n processes."""
    t = time.perf_counter()
    with mp.get_context("fork").Pool(n) as pool:
        res = pool.map(_read_one, splits, chunksize=1)
    return time.perf_counter() - t, sum(r[0] for r in res), sum(r[1] for r in res)


def driver_costs(splits: list, tmp: Path) -> tuple[float, float, int]:
    """(CPU seconds of the finalizing alone, of writing the chunk files as the Ray driver does, rows kept):
    the chunk files are made once in this process, then timed through a Finalizer (best of 2)."""
    import pyarrow.parquet as pq

    from xlp_cli.prepare import process
    from xlp_cli.prepare.finalize import Finalizer
    from xlp_cli.prepare.splits import run_split_to_files
    from xlp_cli.prepare.workdir import chunk_path, finished_chunks

    work = tmp / "driver" / ".work"
    work.mkdir(parents=True)
    opts = SourceOptions(langs=[], defer_pages=True)
    process.init_worker({"clean": True, "normalize": True, "tokenize": "moses", "lowercase": "safe"}, 1, 512)
    for s, split in enumerate(splits):
        run_split_to_files((s, split, 0, 0), str(work), opts, "raise", 2000)
    paths = [chunk_path(work, s, k) for s, metas in enumerate(finished_chunks(work, len(splits)))
             for k in range(len(metas))]
    fin_cpu, write_cpu = [], []
    for rep in range(2):
        t = time.process_time()
        fin = Finalizer(tmp / "driver" / f"out{rep}", valid_fraction=0.01, test_fraction=0.01, max_valid=5000,
                        max_test=5000, max_records=0, shard_size=100_000)
        for p in paths:
            fin.add_file(p)
        rows = sum(v["rows"] for v in fin.close()[1].values())
        fin_cpu.append(time.process_time() - t)
        tables = [pq.read_table(p) for p in paths]
        t = time.process_time()
        for i, table in enumerate(tables):
            process.write_chunk(tmp / "driver" / f"w{rep}-{i}.parquet", table)
        write_cpu.append(time.process_time() - t)
    return min(fin_cpu), min(write_cpu), rows


def prepare(dumps: list[Path], out: Path, split_size: int, **extra) -> dict:
    args = {"inputs": [str(p) for p in dumps], "source": "wikipedia", "out": str(out), "split_size": split_size,
            **extra}
    env = {**os.environ, "XLP_QUIET": "1", "PYTHONPATH": str(ROOT)}
    load = os.getloadavg()[0]
    r = subprocess.run([sys.executable, "-c", _RUN, json.dumps(args)], capture_output=True, text=True, env=env,
                       cwd=ROOT)
    if r.returncode:
        raise SystemExit(f"xlp prepare failed: {r.stderr.strip().splitlines()[-1:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    res.update(load=load, read=m["records"]["read"], splits=m["run"]["splits"],
               shards={k: v["sha256"] for k, v in m["outputs"]["shards"].items()})
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2, help="interleaved repetitions; the best wall time counts")
    ap.add_argument("--split-size", type=int, default=256 << 10, help="compressed bytes per split")
    args = ap.parse_args()
    import ray

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        dumps = build_input(tmp)
        size = sum(p.stat().st_size for p in dumps)
        splits = plan_splits("wikipedia", dumps, SourceOptions(langs=[]), args.split_size)
        print(f"input: {len(dumps)} multistream dumps, {size / 1e6:.2f} MB compressed, {len(splits)} splits "
              f"(cpus: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f})")
        runs: dict[str, list] = {k: [] for k in ("readers 1", "readers 2", "local w1", "local w2", "ray join",
                                                 "ray start")}
        for i in range(args.repeat):  # (before ray.init: no process forks with Ray's threads)
            for n in (1, 2):
                runs[f"readers {n}"].append((*readers(splits, n), os.getloadavg()[0]))
        costs = driver_costs(splits, tmp)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        address = ray.get_runtime_context().gcs_address
        try:
            for i in range(args.repeat):
                runs["local w1"].append(prepare(dumps, tmp / f"w1-{i}", args.split_size, workers=1))
                runs["local w2"].append(prepare(dumps, tmp / f"w2-{i}", args.split_size, workers=2))
                runs["ray join"].append(prepare(dumps, tmp / f"rj-{i}", args.split_size, engine="ray",
                                                ray_address=address))
        finally:
            ray.shutdown()
        for i in range(args.repeat):  # (own cluster: this script's is gone)
            runs["ray start"].append(prepare(dumps, tmp / f"rs-{i}", args.split_size, engine="ray"))
    r1, r2 = (min(runs[f"readers {n}"]) for n in (1, 2))
    print(f"readers only, 1 process : {r1[0]:6.2f} s  {r1[1]} pages  {size / 1e6 / r1[0]:5.2f} MB/s compressed"
          f"  cpu {r1[2]:.2f} s  (load {r1[3]:.1f})")
    print(f"readers only, 2 processes: {r2[0]:6.2f} s  {r2[1]} pages  {size / 1e6 / r2[0]:5.2f} MB/s compressed"
          f"  (load {r2[3]:.1f})  -> 2 vs 1 readers: {r1[0] / r2[0]:.2f}x")
    best = {k: min(v, key=lambda x: x["wall"]) for k, v in runs.items() if not k.startswith("readers")}
    base = best["local w1"]["wall"]
    for k, r in best.items():
        cpu = f"  cpu main {r['cpu_main']:.2f} s + workers {r['cpu_workers']:.2f} s" if k.startswith("local") else ""
        print(f"xlp prepare, {k:9s}: {r['wall']:6.2f} s  {r['read'] / r['wall']:7.0f} paragraphs/s"
              f"  {size / 1e6 / r['wall']:5.2f} MB/s  vs local w1 {base / r['wall']:.2f}x{cpu}  (load {r['load']:.1f})")
    print(f"ray (joined, 2 CPUs) vs local --workers 2: {best['local w2']['wall'] / best['ray join']['wall']:.2f}x; "
          f"ray (own cluster) vs local --workers 2: {best['local w2']['wall'] / best['ray start']['wall']:.2f}x")
    same = all(r["shards"] == best["local w1"]["shards"] for v in runs.values() for r in v if isinstance(r, dict))
    print(f"same shards in every run: {same}")
    fin, write, rows = costs
    mb = size / 1e6
    print(f"driver alone: finalizing {fin:.2f} s CPU for {rows} rows kept ({rows / fin:,.0f} rows/s, "
          f"f = {fin / mb:.3f} s/MB); the Ray driver's chunk-file writes {write:.2f} s (f_ray = {(fin + write) / mb:.3f} s/MB)")
    w = best["local w2"]["cpu_workers"]
    for name, f in (("local", fin), ("ray", fin + write)):
        model = ", ".join(f"S({n}) = {(w + f) / (w / n + f):.1f}x" for n in (2, 8, 32, 128))
        print(f"scaling model, {name} (readers r = {w / mb:.2f} s/MB, driver f = {f / mb:.3f} s/MB): {model}, "
              f"bound {(w + f) / f:.0f}x")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
