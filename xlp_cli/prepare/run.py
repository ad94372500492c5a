"""`xlp prepare`: source records -> processed, filtered, de-duplicated, split Parquet shards + manifest.

How the work is cut, run and resumed (docs/prepare.md, "Engines and splits" and "Resume"):
- The input is planned as splits (sources/__init__.plan_splits): parts that one reader reads alone, in
  order: a file, a byte range of a plain text file, a run of bz2 streams of a Wikipedia multistream dump.
  The plan and the chunk size are kept in `OUT/.work/state.json` for reruns.
- An engine (engine_local.py, engine_ray.py) reads and processes the splits (splits.py): each split's
  records are cut into chunks of `--chunk-size` records, cleaned/normalized/tokenized/lowercased and length-
  filtered, and written as chunk files `OUT/.work/chunk-SSSSSS-KKKKKK.parquet` (workdir.py).
- The main process takes the chunks in stream order (split by split): it reports their problems (ledger.py)
  and gives them to the engine's finalizer: exact de-duplication, split by content hash with the valid/test
  caps, `--max-records`, shards `OUT/<mono|pairs>/<split>/<lang or l1-l2>/part-NNNNN.parquet`. `--workers 1`: the
  Finalizer (finalize.py), in order; `--workers N` and Ray: hash partitions de-duplicate in parallel, the caps
  and shards are planned from their counts, and N threads or Ray tasks write the shards (partitioned.py,
  finalize_ray.py; partitions.py, shard_plan.py, shard_writer.py). The rows of each shard are in stream
  order, and the records of the splits in order are the records of the input in order, so the shards do not
  depend on the engine, the workers, the split or chunk size, or interruptions.
- A rerun keeps the finished chunks (a finished split is not read again, an unfinished one resumes after
  its last chunk), feeds them to the finalizer again from the start, so it makes exactly the same decisions,
  and checks and keeps the shards already on disk. Then the manifest (last), then `.work` is removed.
With --bpe-codes/--bpe-from the `xlp bpe learn`/`apply` stages run on the result into the sibling folders OUT-bpe
and OUT-ids (each stage folder stands alone, so glob readers see one table; xlp 0.1 wrote OUT/bpe and OUT/ids).
With --engine ray, apply runs as one Ray task per text shard (bpe/ray_apply.py); the same id shards.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pyarrow as pa

from xlp_cli.artifacts import layout, outdir
from xlp_cli.artifacts.files import sha256_file
from xlp_cli.artifacts.manifest import config_hash, new_manifest, software_versions, write_manifest
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.bpe import run as bpe_run
from xlp_cli.bpe.alongside import IdsAlongside
from xlp_cli.bpe.config import BpeApplyConfig, BpeLearnConfig
from xlp_cli.bpe.ray_apply import runner as ray_runner
from xlp_cli.core import ray_cluster, ui
from xlp_cli.core.config import keys_where, to_dict
from xlp_cli.core.errors import BadInput, WorkFailed
from xlp_cli.prepare import workdir
from xlp_cli.prepare.config import PrepareConfig
from xlp_cli.prepare.download import download
from xlp_cli.prepare.engine_local import WORKER_DIED, LocalEngine
from xlp_cli.prepare.engine_ray import RayEngine
from xlp_cli.prepare.finalize import Rules
from xlp_cli.prepare.ledger import Ledger
from xlp_cli.prepare.records import CollectedErrors, ErrorPolicy, SourceOptions
from xlp_cli.prepare.report import (  # noqa: F401 (print_summary: the CLI's)
    print_summary,
    progress,
    summary,
)
from xlp_cli.prepare.sentence_groups import split_plan, unpair_plan
from xlp_cli.prepare.sources import expand_inputs, plan_splits, read_split
from xlp_cli.prepare.splits import folder_ok, split_bytes

STAGE = "prepare"
_WORK = ".work"
_STAGED = "ids"  # OUT/.work/ids: the id shards made along the text shards (bpe/alongside.py)
OWNS = ("mono", "pairs", "train", "valid", "test", _WORK, "bpe", "ids", "downloads")  # what xlp prepare writes in OUT (outdir.py)


# ---------------------------------------------------------------- config
def output_config(cfg: PrepareConfig) -> dict[str, Any]:
    """The config as recorded in the manifest and guarded against: everything that changes the output (the
    volatile flags are marked in config.py; `out` is left out so that a moved folder is still recognised)."""
    drop = keys_where(cfg, "volatile") | {"out"}
    if cfg.split_by == "pair":
        drop.add("split-by")  # the default, as before the flag existed: earlier folders keep their config hash
    return {k: v for k, v in to_dict(cfg).items() if k not in drop}


def _pipe_config(config: dict[str, Any]) -> dict[str, Any]:
    return {k: config[k] for k in ("clean", "normalize", "tokenize", "lowercase")}


# ---------------------------------------------------------------- run
_GC_THRESHOLDS = (100_000, 50, 1000)  # Python's are (700, 10, 10)


def _gc_frozen(fn: Any) -> Any:
    """`fn` with the objects alive at its start (~100k of the imports) out of the collector's full passes, which
    the records' tuples trigger (docs/prepare.md, "Speed"), and with a young generation of 100k objects instead of
    700: the chunks' records are short-lived and hold no cycles, yet with 2 workers the collector took 0.12 s of
    the 2 s of a 15 MB Wikipedia dump (0.04 s with these thresholds). Both are restored afterwards."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(*_GC_THRESHOLDS)
        try:
            return fn(*args, **kwargs)
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()

    return wrapper


@outdir.scoped
@_gc_frozen
def run(cfg: PrepareConfig) -> dict[str, Any]:
    t0 = time.time()
    try:  # jemalloc gives memory back sooner than the default pool: peak memory stays flatter
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except (NotImplementedError, AttributeError):
        pass
    out = Path(cfg.out)
    config = output_config(cfg)
    if cfg.bpe_from is not None and not Path(cfg.bpe_from).exists():
        raise BadInput("no such BPE codes file or `xlp bpe learn` folder", path=cfg.bpe_from)
    if cfg.bpe_from is not None:  # what the BPE step reads, checked before the first file goes to --out
        bpe_run.check_source(Path(cfg.bpe_from))
    inputs = [] if cfg.download else _inputs(cfg)  # a missing path is reported before anything is written
    prev = outdir.guard_out_dir(out, STAGE, config, force=cfg.force, owns=OWNS,
                                on_locked=lambda: _forget_config_if_nothing_done(out))
    chash = config_hash(config)

    if prev is not None and prev.get("config_hash") == chash and _shards_intact(out, prev, remove_bad=True):
        shutil.rmtree(out / _WORK, ignore_errors=True)
        if (cfg.bpe_codes or cfg.bpe_from) and not prev.get("outputs", {}).get("ids"):
            prev = _bpe_steps(cfg, out, prev)
        result = summary(prev, out, time.time() - t0)
        result["status"] = "up to date (nothing to do)"
        result["docs_per_s"] = result["mb_per_s"] = None
        return result

    if cfg.download:
        inputs = _inputs(cfg)
    with contextlib.ExitStack() as cluster:
        if cfg.engine == "ray":  # one Ray cluster for the processing and the BPE apply tasks
            cluster.enter_context(ray_cluster.session(cfg.ray_address))
        errors = ErrorPolicy(cfg.on_error)
        work = out / _WORK
        loaded = _load_tokenizer_early(cfg, out)
        facts = _manifest_facts(inputs)
        sink = None  # the id shards made along the text shards (bpe/alongside.py)
        if loaded is not None:
            sink = cluster.enter_context(IdsAlongside(loaded, work / _STAGED, cfg.workers))
        stats = _process(cfg, inputs, errors, work, _pipe_config(config), sink)
        counts, shards, dropped = stats["finalized"]
        dropped.update(stats["dropped"])
        if not shards:
            errors.warn("no record was kept: the output holds no shard")
        for lang in missing_langs(cfg.lang, counts):
            errors.warn(f"--lang {lang}: the input yielded no {lang} record{_HINTS.get(cfg.source, '').format(cfg=cfg)}")

        manifest = new_manifest(
            STAGE, config,
            inputs=facts.result(),
            outputs={"shards": shards},
            counts=counts,
            skipped=dict(errors.skipped),
            skipped_examples=errors.examples,
            dropped=dropped,
            records={"read": stats["records"], "bytes": stats["bytes"],
                     "kept": sum(n for per in counts.values() for n in per.values())},
            warnings=list(errors.warnings),
            schema={"mono": ["id", "source", "lang", "raw", "text"],
                    "pair": ["id", "source", "lang1", "lang2", "raw1", "raw2", "text1", "text2"]},
            text_pipeline=_pipe_config(config),
            run={"engine": cfg.engine, "workers": cfg.workers, "splits": stats["splits"],
                 "worker_mode": ("threads" if cfg.uses_threads() else "processes") if cfg.engine == "local" else None,
                 "seconds": round(time.time() - t0, 2), "main_process_cpu_seconds": stats["cpu"],
                 "main_thread_cpu_seconds": stats["thread_cpu"]},
        )
        manifest["config_hash"] = chash
        write_manifest(out, manifest)
        # the chunk files go while the BPE step runs (~4 ms of unlink each); a run stopped meanwhile leaves
        # them to the rerun, which finds the shards complete and removes them
        remover = threading.Thread(target=_remove_chunks, args=(work,), daemon=True)
        remover.start()
        try:
            if cfg.bpe_codes or cfg.bpe_from:
                manifest = _bpe_steps(cfg, out, manifest, loaded, sink)
        finally:
            remover.join()
        shutil.rmtree(work, ignore_errors=True)
    result = summary(manifest, out, time.time() - t0)
    result["status"] = "resumed and finished" if stats["resumed"] else "done"
    return result


_HINTS = {"commoncrawl": " (documents are kept by language identification with confidence >= --lid-threshold "
                          "{cfg.lid_threshold})",
          "gettext": " (this machine has no message catalog for it)",
          "text": " (a file's language comes from --lang or its name, NAME.xx.txt)"}


def missing_langs(requested: list[str], counts: dict[str, dict[str, int]]) -> list[str]:
    """The requested languages without a kept record, monolingual or on either side of a pair."""
    have = {part for per in counts.values() for group, n in per.items() if n for part in group.split("-")}
    have |= {group for per in counts.values() for group, n in per.items() if n}
    return [lang for lang in requested if lang not in have]


def _inputs(cfg: PrepareConfig) -> list[Path]:
    if cfg.download:
        return [Path(p) for p in download(cfg)]
    if not cfg.inputs:
        return []

    return expand_inputs(cfg.inputs)


def _forget_config_if_nothing_done(out: Path) -> None:
    """A folder whose earlier run stopped before any work was kept (e.g. at a bad input file) accepts
    another config without --force: there is nothing to protect."""
    marker = out / ".xlp-config.json"
    if not marker.is_file() or (out / MANIFEST).exists():
        return
    # chunk files after a gap are not kept work (a worker may finish a later chunk before the chunk whose
    # error stopped the run); a rerun removes them
    if workdir.has_work(out / _WORK) or any(out.glob("*/*/*/part-*.parquet")) or any(out.glob("*/*/part-*.parquet")):
        return
    marker.unlink()


def tidy(out: Path) -> None:
    """A finished output's leftover chunk files (a run killed while they were being removed) go."""
    shutil.rmtree(Path(out) / _WORK, ignore_errors=True)


def _shards_intact(out: Path, manifest: dict[str, Any], *, remove_bad: bool = False) -> bool:
    """Every shard the manifest lists is there with its sha256. With `remove_bad`, damaged ones are deleted
    (the run that follows rebuilds them; shards on disk are otherwise trusted and kept)."""
    ok = True
    for rel, info in manifest.get("outputs", {}).get("shards", {}).items():
        p = out / rel
        if not p.is_file() or sha256_file(p) != info.get("sha256"):
            ok = False
            if remove_bad and p.is_file():
                ui.warn(f"{p}: shard does not match its sha256 in the manifest; rebuilding it")
                p.unlink()
    return ok


# ---------------------------------------------------------------- processing + finalizing
def _engine(cfg: PrepareConfig, work: Path, opts: SourceOptions, size: int, init_args: tuple):
    if cfg.engine == "ray":
        return RayEngine(work, opts, cfg.on_error, size, init_args, cfg.ray_address)

    return LocalEngine(work, opts, cfg.on_error, size, cfg.workers, init_args, threads=cfg.uses_threads())


def _process(cfg: PrepareConfig, inputs: list[Path], errors: ErrorPolicy, work: Path,
             pipe_config: dict[str, Any], sink: Any = None) -> dict[str, Any]:
    """Plan the splits, run the unfinished ones on the engine and finalize every chunk in stream order (`sink`:
    given every row group of the text shards, bpe/alongside.py).
    Returns {records, bytes, dropped, resumed, splits, finalized: Finalizer.close(), cpu / thread_cpu: the CPU
    seconds of this process / of its main thread meanwhile (with --engine ray the driver's: docs/scale.md)}."""
    cpu0, thread0 = time.process_time(), time.thread_time()

    opts = SourceOptions(langs=list(cfg.lang), lid_threshold=cfg.lid_threshold,
                         mono_from_parallel=cfg.mono_from_parallel, max_records=cfg.max_records,
                         defer_pages=True, max_expansion=cfg.max_expansion, max_member_bytes=cfg.max_member_bytes,
                         read_ahead=cfg.workers if cfg.workers > 1 and cfg.engine == "local" and cfg.uses_threads() else 0)
    size, plan = workdir.load_plan(work, cfg.chunk_size, lambda: plan_splits(cfg.source, inputs, opts, cfg.split_size))
    if cfg.unpair:  # a first read of the splits groups the pairs; its problems are reported by the real read
        opts.unpair_keep = unpair_plan(r for split in plan for r in read_split(split, opts, CollectedErrors("skip")))
    if cfg.split_by == "sentences":  # the same first read: every pair's group and its split
        opts.split_plan = split_plan(r for split in plan for r in read_split(split, opts, CollectedErrors("skip")))
    done = workdir.finished_chunks(work, len(plan))
    resumed = sum(map(len, done))
    if resumed:
        ui.info(f"resuming: {resumed} finished chunk(s) of {size} records are kept")
    jobs = [(s, split, len(done[s]), done[s][-1]["end"] if done[s] else 0)
            for s, split in enumerate(plan) if not (done[s] and done[s][-1].get("tail"))]
    ledger = Ledger(errors)
    engine = _engine(cfg, work, opts, size, (pipe_config, cfg.min_tokens, cfg.max_tokens, cfg.on_error))
    fin = None
    failed = True
    try:
        engine.start(jobs, [lang for lang in cfg.lang if folder_ok(lang)])
        rules = Rules(valid_fraction=cfg.valid_fraction, test_fraction=cfg.test_fraction, max_valid=cfg.max_valid,
                      max_test=cfg.max_test, max_records=cfg.max_records, shard_size=cfg.shard_size, dedup=cfg.dedup,
                      overflow_to_train=cfg.split_by == "pair")
        fin = engine.finalizer(work.parent, rules, sink)
        sizes = [split_bytes(split) for split in plan]
        read = [0] * len(plan)  # input bytes consumed per split (the reader's position; all of it at its tail)
        with progress(sum(sizes)) as bar:
            unit = "bytes" if sum(sizes) else "records"
            task = bar.add_task(f"prepare {cfg.source}", total=sum(sizes) or None, records=0, bytes=0, unit=unit)

            def take(s: int, k: int, meta: dict[str, Any]) -> None:
                ledger.account(plan[s], meta)  # raises on a problem with --on-error raise
                # (thread mode: the table as processed, not read back from its file)
                fin.add_chunk(s, k, held(s, k), workdir.chunk_path(work, s, k))
                read[s] = sizes[s] if meta.get("tail") else meta.get("read_bytes", read[s])
                in_bytes = unit == "bytes"
                bar.update(task, completed=sum(read) if in_bytes else ledger.records, records=ledger.records,
                           bytes=ledger.bytes, info=f"{ledger.records:,} records" if in_bytes else "")

            results = engine.results(jobs)
            held = getattr(engine, "table", lambda s, k: None)
            for s in range(len(plan)):
                for k, meta in enumerate(done[s]):
                    take(s, k, meta)
                while not (done[s] and done[s][-1].get("tail")):
                    s_, k, meta = next(results)
                    assert s_ == s, (s_, s)
                    take(s, k, meta)
                    done[s].append(meta)
                fin.split_done(s)
        finalized = fin.close()
        failed = False
    except BrokenProcessPool:
        if fin is not None:
            fin.abort()

        raise WorkFailed(WORKER_DIED) from None
    except BaseException:
        if fin is not None:
            fin.abort()
        raise
    finally:
        engine.close(abort=failed)
    return {"records": ledger.records, "bytes": ledger.bytes, "dropped": dict(ledger.dropped), "resumed": resumed,
            "splits": len(plan), "finalized": finalized, "cpu": round(time.process_time() - cpu0, 3),
            "thread_cpu": round(time.thread_time() - thread0, 3)}


# ---------------------------------------------------------------- BPE sub-steps
def _manifest_facts(inputs: list[Path]) -> Any:
    """The manifest's `inputs` entries (path, sha256), computed in a thread while the text is processed (hashlib
    works without the GIL), with the package versions (~0.02 s of metadata lookups, cached for new_manifest)."""
    def facts() -> list[dict[str, str]]:
        software_versions()
        return [{"path": str(p), "sha256": sha256_file(p)} for p in inputs]

    pool = ThreadPoolExecutor(1, thread_name_prefix="xlp-manifest")
    found = pool.submit(facts)
    pool.shutdown(wait=False)
    return found


def _remove_chunks(work: Path) -> None:
    """Everything in the work folder but the id shards staged by bpe/alongside.py (apply is moving them)."""
    for p in work.iterdir() if work.is_dir() else ():
        if p.name == _STAGED:
            continue
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):  # (what is left goes with the folder at the end, or on the rerun)
                p.unlink()


def _load_tokenizer_early(cfg: PrepareConfig, out: Path) -> Any:
    """With --bpe-from (local engine, worker threads): `bpe.run.load_early`'s future of the codes and dictionary,
    read in a thread while the text is processed (natively, without the GIL); their problem is raised when the BPE
    step starts, as before. Else None (worker processes are forked as the text step starts: no thread runs then)."""
    if not cfg.bpe_from or cfg.bpe_codes or cfg.engine != "local" or not cfg.uses_threads():
        return None
    src = Path(cfg.bpe_from)
    return bpe_run.load_early(BpeApplyConfig(data=[src] if src.is_dir() else [out], out=layout.sibling(out, "ids"),
                                             codes=None if src.is_dir() else src))


def _bpe_steps(cfg: PrepareConfig, out: Path, manifest: dict[str, Any], loaded: Any = None,
               made: Any = None) -> dict[str, Any]:
    data = [out]
    apply_kwargs: dict[str, Any] = {"force": cfg.force, "workers": max(1, cfg.workers)}
    bpe_dir, ids_dir = layout.sibling(out, "bpe"), layout.sibling(out, "ids")  # siblings: each stands alone
    if cfg.bpe_codes:
        bpe_run.learn(BpeLearnConfig(data=[out], out=bpe_dir, codes=cfg.bpe_codes, parallel=True, force=cfg.force))
        data.append(bpe_dir)
        manifest.setdefault("outputs", {})["bpe"] = f"../{bpe_dir.name}"
    else:
        src = Path(cfg.bpe_from)  # type: ignore[arg-type]
        if src.is_dir():
            data.append(src)
        else:
            apply_kwargs["codes"] = src
    runner = None
    if cfg.engine == "ray":  # one Ray task per text shard (bpe/ray_apply.py); learning stays on the driver

        runner = ray_runner(cfg.ray_address)
    bpe_run.apply(BpeApplyConfig(data=data, out=ids_dir, **apply_kwargs), runner, loaded, made)
    manifest.setdefault("outputs", {})["ids"] = f"../{ids_dir.name}"
    write_manifest(out, manifest)
    return manifest
