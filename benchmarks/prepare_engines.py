"""Engines and readers of `xlp prepare`: local vs Ray on this machine's CPUs, and 1 vs 2 readers.

Input: the shared UTF-8 Wikipedia samples (en, el, vi; ../shared/data/wikipedia_dumps), each rewritten at
run time as a Wikimedia multistream dump with its index (100 pages per bz2 stream), so the input is cut
into splits of --split-size compressed bytes that readers take independently. In this session:
  readers   read only (decompress, parse XML, take the pages out) every split with a pool of 1, then 2
            processes: the speed-up of the part that one main process did alone before
  local     `xlp prepare --source wikipedia` --workers 1 (one process reads and processes every split)
            and --workers 2 (two worker processes each read and process whole splits)
  ray       --engine ray: joining a Ray cluster of 1, 2 and 4 CPUs that this script started (no start-up in
            the timing; 4 CPUs on a 2-core machine is oversubscribed), and with a local cluster started by the
            run itself (ray.init(), start-up included)
Each prepare run is a fresh subprocess; runs are interleaved, best of --repeat. Every run must write the
same shards (checked). The load average is printed: the machine may be shared.
The scaling model printed at the end. Before issue 27 the driver finalized alone, in stream order (dedup,
split, shard writing; on Ray also the chunk files): that work is timed alone here through the in-order
Finalizer (f before). Now the Ray driver only plans from counts, routes references and writes the manifest:
its CPU seconds are measured in the real runs (the manifest's `run.main_process_cpu_seconds`: the CPU of the
driver process while it read, finalized and wrote shards through the cluster, Ray's own threads included; f
after). Most of that is fixed (Ray's imports on the first remote call, actors, the plan): the CPU per MB is
the slope between a run on one dump and one on 4x the input (each dump under four language codes, so no
copy duplicates another), on a 2-CPU cluster. With f the driver's CPU seconds and w those of the readers
(of the --workers 2 run), N cores give at most S(N) = (w + f) / (w / N + f).

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


COPIES = {"en": ["en", "de", "fr", "es"], "el": ["el", "bg", "ru", "tr"], "vi": ["vi", "ar", "hi", "sw"]}


def copies(dumps: list[Path], folder: Path) -> list[Path]:
    """4x the input: each multistream dump (and its index) under four language codes, so that no copy is a
    duplicate of another (the content hash covers the language)."""
    folder.mkdir()
    out = []
    for dump in dumps:
        lang = dump.name[:2]
        index = dump.with_name(dump.name.replace("multistream.xml", "multistream-index.txt"))
        for code in COPIES[lang]:
            for src in (dump, index):
                dest = folder / src.name.replace(f"{lang}wiki", f"{code}wiki", 1)
                dest.write_bytes(src.read_bytes())
            out.append(folder / dump.name.replace(f"{lang}wiki", f"{code}wiki", 1))
    return out


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
    from xlp_cli.prepare.finalize import Finalizer, Rules
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
        fin = Finalizer(tmp / "driver" / f"out{rep}", Rules(valid_fraction=0.01, test_fraction=0.01, max_valid=5000,
                                                           max_test=5000, max_records=0, shard_size=100_000))
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
               driver_cpu=m["run"]["main_process_cpu_seconds"], driver_thread_cpu=m["run"]["main_thread_cpu_seconds"],
               shards={k: v["sha256"] for k, v in m["outputs"]["shards"].items()})
    return res


def driver_report(costs: tuple, mb: float, marginal: dict, sizes: dict) -> float:
    """Print the Ray driver's CPU per MB (main thread, whole process) beyond its fixed cost; -> the main thread's."""
    fin, write, _ = costs
    low = {k: {c: min(r[c] for r in v) for c in ("driver_cpu", "driver_thread_cpu")} for k, v in marginal.items()}
    slopes = {}
    for c, what in (("driver_thread_cpu", "its main thread"), ("driver_cpu", "the whole driver process")):
        slopes[c] = (low["big"][c] - low["small"][c]) / (sizes["big"] - sizes["small"])
        print(f"the Ray driver's CPU, {what}: {low['small'][c]:.2f} s on {sizes['small']:.2f} MB "
              f"({marginal['small'][0]['splits']} splits), {low['big'][c]:.2f} s on {sizes['big']:.2f} MB "
              f"({marginal['big'][0]['splits']} splits): per MB beyond the fixed cost f = {slopes[c]:.4f} s/MB, "
              f"{(fin + write) / mb / max(slopes[c], 1e-9):.0f}x less than f_ray before ({(fin + write) / mb:.3f})")
    return slopes["driver_thread_cpu"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2, help="interleaved repetitions; the best wall time counts")
    ap.add_argument("--split-size", type=int, default=256 << 10, help="compressed bytes per split")
    ap.add_argument("--driver-split-size", type=int, default=256 << 10,
                    help="--split-size of the runs that measure the Ray driver's CPU per MB (xlp's default: 64 MiB)")
    ap.add_argument("--driver-only", action="store_true",
                    help="only the driver's costs: the in-order finalizer timed alone, the Ray driver's CPU per MB")
    ap.add_argument("--ray-cpus", type=lambda v: [int(x) for x in v.split(",")], default=[1, 2, 4],
                    help="the CPUs of the Ray clusters the runs join (comma-separated)")
    args = ap.parse_args()
    import ray

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        dumps = build_input(tmp)
        size = sum(p.stat().st_size for p in dumps)
        splits = plan_splits("wikipedia", dumps, SourceOptions(langs=[]), args.split_size)
        print(f"input: {len(dumps)} multistream dumps, {size / 1e6:.2f} MB compressed, {len(splits)} splits "
              f"(cpus: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f})")
        names = ("readers 1", "readers 2", "local w1", "local w2", *(f"ray {n} cpu" for n in args.ray_cpus),
                 "ray start")
        runs: dict[str, list] = {k: [] for k in names}
        for i in range(args.repeat if not args.driver_only else 0):  # (before ray.init: no fork with Ray's threads)
            for n in (1, 2):
                runs[f"readers {n}"].append((*readers(splits, n), os.getloadavg()[0]))
        costs = driver_costs(splits, tmp)
        for i in range(args.repeat if not args.driver_only else 0):
            runs["local w1"].append(prepare(dumps, tmp / f"w1-{i}", args.split_size, workers=1))
            runs["local w2"].append(prepare(dumps, tmp / f"w2-{i}", args.split_size, workers=2))
        for n in args.ray_cpus if not args.driver_only else ():  # a cluster of n CPUs, joined by the runs
            ray.init(num_cpus=n, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            address = ray.get_runtime_context().gcs_address
            try:
                for i in range(args.repeat):
                    runs[f"ray {n} cpu"].append(prepare(dumps, tmp / f"r{n}-{i}", args.split_size, engine="ray",
                                                        ray_address=address))
            finally:
                ray.shutdown()
        for i in range(args.repeat if not args.driver_only else 0):  # (own cluster: this script's is gone)
            runs["ray start"].append(prepare(dumps, tmp / f"rs-{i}", args.split_size, engine="ray"))
        big = copies(dumps, tmp / "x4")
        marginal = {"small": [], "big": []}  # the driver's CPU on 1 dump and on 12: per MB, without what is fixed
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        address = ray.get_runtime_context().gcs_address
        try:
            for i in range(args.repeat):
                marginal["small"].append(prepare(dumps[:1], tmp / f"ms-{i}", args.driver_split_size, engine="ray",
                                                 ray_address=address))
                marginal["big"].append(prepare(big, tmp / f"mb-{i}", args.driver_split_size, engine="ray",
                                               ray_address=address))
        finally:
            ray.shutdown()
        sizes = {"small": dumps[0].stat().st_size / 1e6, "big": sum(p.stat().st_size for p in big) / 1e6}
    if args.driver_only:
        driver_report(costs, size / 1e6, marginal, sizes)
        return
    r1, r2 = (min(runs[f"readers {n}"]) for n in (1, 2))
    print(f"readers only, 1 process : {r1[0]:6.2f} s  {r1[1]} pages  {size / 1e6 / r1[0]:5.2f} MB/s compressed"
          f"  cpu {r1[2]:.2f} s  (load {r1[3]:.1f})")
    print(f"readers only, 2 processes: {r2[0]:6.2f} s  {r2[1]} pages  {size / 1e6 / r2[0]:5.2f} MB/s compressed"
          f"  (load {r2[3]:.1f})  -> 2 vs 1 readers: {r1[0] / r2[0]:.2f}x")
    best = {k: min(v, key=lambda x: x["wall"]) for k, v in runs.items() if not k.startswith("readers")}
    base = best["local w1"]["wall"]
    mb = size / 1e6
    for k, r in best.items():
        cpu = (f"  cpu main {r['cpu_main']:.2f} s + workers {r['cpu_workers']:.2f} s" if k.startswith("local")
               else f"  driver cpu {r['driver_cpu']:.2f} s ({r['driver_cpu'] / mb:.3f} s/MB)")
        print(f"xlp prepare, {k:9s}: {r['wall']:6.2f} s  {r['read'] / r['wall']:7.0f} paragraphs/s"
              f"  {size / 1e6 / r['wall']:5.2f} MB/s  vs local w1 {base / r['wall']:.2f}x{cpu}  (load {r['load']:.1f})")
    joined = [k for k in best if k.startswith("ray ") and k.endswith(" cpu")]
    for k in joined:
        print(f"{k} vs local --workers 2: {best['local w2']['wall'] / best[k]['wall']:.2f}x")
    same = all(r["shards"] == best["local w1"]["shards"] for v in runs.values() for r in v if isinstance(r, dict))
    print(f"same shards in every run: {same}")
    fin, write, rows = costs
    print(f"before (the in-order finalizer, timed alone): {fin:.2f} s CPU for {rows} rows kept ({rows / fin:,.0f} "
          f"rows/s, f = {fin / mb:.3f} s/MB); + the Ray driver's chunk-file writes {write:.2f} s "
          f"(f_ray before = {(fin + write) / mb:.3f} s/MB)")
    after = min(r["driver_cpu"] for k in joined for r in runs[k])
    thread = min(r["driver_thread_cpu"] for k in joined for r in runs[k])
    print(f"after (the Ray driver, measured, best of the joined runs): {after:.2f} s CPU ({thread:.2f} s in its main "
          f"thread), fixed costs included: {after / mb:.3f} s/MB, {(fin + write) / after:.1f}x less than before")
    per_mb = driver_report(costs, mb, marginal, sizes)
    print(f"big input: {marginal['big'][0]['wall']:.1f} s wall, readers' CPU r = "
          f"{min(r['cpu_workers'] for r in runs['local w2']) / mb:.2f} s/MB (local w2)")
    w = best["local w2"]["cpu_workers"]
    for name, f in (("ray before", fin + write), ("ray after (all)", after), ("ray after (per MB)", per_mb * mb)):
        model = ", ".join(f"S({n}) = {(w + f) / (w / n + f):.1f}x" for n in (2, 8, 32, 128))
        print(f"scaling model, {name} (readers r = {w / mb:.2f} s/MB, driver f = {f / mb:.3f} s/MB): {model}, "
              f"bound {(w + f) / f:.0f}x")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
