"""`xlp prepare`: source records -> processed, filtered, de-duplicated, split Parquet shards + manifest.

How a killed run resumes to the same output (docs/prepare.md, "Resume"):
- The source is read in order and cut into chunks of `--chunk-size` records (by position in the record
  stream; a `RawPage`, whose paragraphs the workers extract, weighs about its number of paragraphs:
  1 + len(wikitext) // 500). Workers extract pages, clean/normalize/tokenize/lowercase a chunk, apply the
  length filter, and write it as a chunk file `OUT/.work/chunk-NNNNNNNN.parquet` (atomic) whose metadata
  records where in the stream it ends. A rerun re-reads the source but skips the records of the finished
  chunks (an unbroken run of chunk files from 0).
- The main process feeds chunk files, in order, to the Finalizer (finalize.py): exact de-duplication,
  split by content hash with the valid/test caps, `--max-records`, and streaming shard writers for
  `OUT/<split>/<lang or l1-l2>/part-NNNNN.parquet`. A rerun feeds the finished chunks again from 0, so
  it makes exactly the same decisions; shards already on disk are checked and kept, not rewritten. Shard
  bytes depend only on their rows, so they do not depend on workers, chunk size or interruptions.
- Then the manifest (last), then `.work` is removed.
With --bpe-codes/--bpe-from the `xlp bpe learn`/`apply` stages run on the result into OUT/bpe and OUT/ids.
"""

from __future__ import annotations

import collections
import functools
import json
import multiprocessing as mp
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
from rich.progress import ProgressColumn, SpinnerColumn
from rich.table import Table
from rich.text import Text

from xlp_cli import artifacts, ui
from xlp_cli.config import to_dict
from xlp_cli.errors import BadInput, WorkFailed
from xlp_cli.prepare import process
from xlp_cli.prepare.config import PrepareConfig
from xlp_cli.prepare.finalize import SPLITS, Finalizer
from xlp_cli.prepare.records import ErrorPolicy, Mono, Pair, RawPage, RecordProblem, SourceOptions, unpaired
from xlp_cli.text.langs import safe_folder_name

STAGE = "prepare"
# config keys that do not change the output (a rerun with other values resumes instead of being refused;
# `out` is left out so that a moved folder is still recognised)
_NOT_OUTPUT = ("workers", "force", "chunk_size", "out")
_WORK = ".work"


# ---------------------------------------------------------------- progress columns
class _Rate(ProgressColumn):
    def __init__(self, field: str | None, unit: str, scale: float = 1.0, digits: int = 1):
        super().__init__()
        self.field, self.unit, self.scale, self.digits = field, unit, scale, digits

    def render(self, task: Any) -> Text:
        elapsed = task.elapsed or 0.0
        value = task.completed if self.field is None else task.fields.get(self.field, 0)
        rate = value / elapsed / self.scale if elapsed > 0 else 0.0
        return Text(f"{rate:,.{self.digits}f} {self.unit}", style="progress.data.speed")


def _progress():
    return ui.progress(SpinnerColumn(), _Rate(None, "docs/s"), _Rate("bytes", "MB/s", 1e6, 2))


# ---------------------------------------------------------------- config
def output_config(cfg: PrepareConfig) -> dict[str, Any]:
    """The config as recorded in the manifest and guarded against: everything that changes the output."""
    return {k: v for k, v in to_dict(cfg).items() if k.replace("-", "_") not in _NOT_OUTPUT}


def _pipe_config(config: dict[str, Any]) -> dict[str, Any]:
    return {k: config[k] for k in ("clean", "normalize", "tokenize", "lowercase")}


# ---------------------------------------------------------------- run
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
    inputs = [] if cfg.download else _inputs(cfg)  # a missing path is reported before anything is written
    _forget_config_if_nothing_done(out)
    prev = artifacts.guard_out_dir(out, STAGE, config, force=cfg.force)
    chash = artifacts.config_hash(config)

    if prev is not None and prev.get("config_hash") == chash and _shards_intact(out, prev, remove_bad=True):
        shutil.rmtree(out / _WORK, ignore_errors=True)
        if (cfg.bpe_codes or cfg.bpe_from) and not prev.get("outputs", {}).get("ids"):
            prev = _bpe_steps(cfg, out, prev)
        summary = _summary(prev, out, time.time() - t0)
        summary["status"] = "up to date (nothing to do)"
        summary["docs_per_s"] = summary["mb_per_s"] = None
        return summary

    if cfg.download:
        inputs = _inputs(cfg)
    errors = ErrorPolicy(cfg.on_error)
    opts = SourceOptions(langs=list(cfg.lang), lid_threshold=cfg.lid_threshold,
                         mono_from_parallel=cfg.mono_from_parallel, max_records=cfg.max_records,
                         defer_pages=True)
    from xlp_cli.prepare.sources import SOURCES

    records = SOURCES[cfg.source](inputs, opts, errors)
    if cfg.unpair:  # a first read of the source (problems counted by the second) groups the pairs
        records = unpaired(SOURCES[cfg.source](inputs, opts, ErrorPolicy("skip")), records)
    work = out / _WORK
    _remove_temp_shards(out)
    fin = Finalizer(out, valid_fraction=cfg.valid_fraction, test_fraction=cfg.test_fraction, max_valid=cfg.max_valid,
                    max_test=cfg.max_test, max_records=cfg.max_records, shard_size=cfg.shard_size, dedup=cfg.dedup)
    try:
        stats = _process_and_finalize(cfg, records, errors, work, fin, _pipe_config(config))
        counts, shards, dropped = fin.close()
    except BaseException:
        fin.abort()
        raise
    dropped.update(stats["dropped"])
    if not shards:
        errors.warn("no record was kept: the output holds no shard")

    manifest = artifacts.new_manifest(
        STAGE, config,
        inputs=[{"path": str(p), "sha256": artifacts.sha256_file(p)} for p in inputs],
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
        run={"workers": cfg.workers, "seconds": round(time.time() - t0, 2)},
    )
    manifest["config_hash"] = chash
    artifacts.write_manifest(out, manifest)
    shutil.rmtree(work, ignore_errors=True)
    if cfg.bpe_codes or cfg.bpe_from:
        manifest = _bpe_steps(cfg, out, manifest)
    summary = _summary(manifest, out, time.time() - t0)
    summary["status"] = "resumed and finished" if stats["resumed"] else "done"
    return summary


def _inputs(cfg: PrepareConfig) -> list[Path]:
    if cfg.download:
        try:
            from xlp_cli.prepare.download import download
        except ModuleNotFoundError as e:
            raise WorkFailed(f"--download is not available in this build ({e})") from None
        return [Path(p) for p in download(cfg)]
    if not cfg.inputs:
        return []
    from xlp_cli.prepare.sources import expand_inputs

    return expand_inputs(cfg.inputs)


def _forget_config_if_nothing_done(out: Path) -> None:
    """A folder whose earlier run stopped before any work was kept (e.g. at a bad input file) accepts
    another config without --force: there is nothing to protect."""
    marker = out / ".xlp-config.json"
    if not marker.is_file() or (out / artifacts.MANIFEST).exists():
        return
    # chunk files after a gap are not kept work (a worker may finish a later chunk before the chunk whose
    # error stopped the run); a rerun removes them
    if _chunk_path(out / _WORK, 0).is_file() or any(out.glob("*/*/part-*.parquet")):
        return
    marker.unlink()


def _shards_intact(out: Path, manifest: dict[str, Any], *, remove_bad: bool = False) -> bool:
    """Every shard the manifest lists is there with its sha256. With `remove_bad`, damaged ones are deleted
    (the run that follows rebuilds them; shards on disk are otherwise trusted and kept)."""
    ok = True
    for rel, info in manifest.get("outputs", {}).get("shards", {}).items():
        p = out / rel
        if not p.is_file() or artifacts.sha256_file(p) != info.get("sha256"):
            ok = False
            if remove_bad and p.is_file():
                ui.warn(f"{p}: shard does not match its sha256 in the manifest; rebuilding it")
                p.unlink()
    return ok


# ---------------------------------------------------------------- processing + finalizing
@functools.lru_cache(maxsize=4096)
def _folder_ok(lang: str) -> bool:
    return safe_folder_name(lang)


def _to_task(rec: Mono | Pair, errors: ErrorPolicy) -> tuple | None:
    if type(rec) is Mono:
        if not _folder_ok(rec.lang):
            errors.bad(f"language code {rec.lang!r} cannot name an output folder", path=rec.origin)
            return None
        return ("m", rec.lang, rec.text, rec.source)
    l1, l2, t1, t2 = rec.lang1, rec.lang2, rec.text1, rec.text2
    for lang in (l1, l2):
        if not _folder_ok(lang):
            errors.bad(f"language code {lang!r} cannot name an output folder", path=rec.origin)
            return None
    if l1 == l2:
        errors.bad(f"a parallel record needs two languages, both sides are {l1!r}", path=rec.origin)
        return None
    if l1 > l2:
        l1, l2, t1, t2 = l2, l1, t2, t1
    return ("p", l1, l2, t1, t2, rec.source)


_WORKER_DIED = ("a worker process died (out of memory? killed?); rerun the same command to resume, "
                "perhaps with fewer --workers")


# how much a page weighs when cutting chunks: about its number of paragraphs (wikipedia samples: one
# paragraph per 220-1,100 characters of wikitext), so that chunks of pages take about as long as others
_PAGE_CHARS = 500


def _page_task(page: RawPage, errors: ErrorPolicy) -> tuple[tuple | None, int]:
    """(task for the workers, records counted here). A page whose language cannot name a folder is expanded
    here so that each of its paragraphs is reported (and counted) as a Mono would be."""
    if _folder_ok(page.lang):
        return ("w", page.lang, page.text, page.source, page.path, page.position, page.extract, page.context), 0
    try:
        monos = page.monos()
    except RecordProblem as e:
        errors.bad(str(e), path=page.path, position=page.position)
        return None, 0
    for m in monos:
        _to_task(m, errors)
    return None, len(monos)


def _chunk_path(work: Path, c: int) -> Path:
    return work / f"chunk-{c:08d}.parquet"


def _finished_chunks(work: Path) -> int:
    """The number of chunk files 0..k-1 present without a gap; later ones (a gap) are removed."""
    c = 0
    while _chunk_path(work, c).is_file():
        c += 1
    for stray in work.glob("chunk-*.parquet"):
        if int(stray.stem.split("-")[1]) >= c:
            stray.unlink()
    for tmp in work.glob(".chunk-*.tmp"):
        tmp.unlink()
    return c


def _work_state(work: Path, cfg: PrepareConfig) -> dict[str, Any]:
    """The chunk size is fixed by the first run of a folder (chunk files must line up on resume)."""
    path = work / "state.json"
    if path.is_file():
        state = json.loads(path.read_text(encoding="utf-8"))
        if state["chunk_size"] != cfg.chunk_size:
            ui.info(f"resuming with the chunk size of the interrupted run ({state['chunk_size']})")
        return state
    state = {"chunk_size": cfg.chunk_size}
    artifacts.write_json_atomic(path, state)
    return state


def _remove_temp_shards(out: Path) -> None:
    for split in SPLITS:
        if (out / split).is_dir():
            for tmp in (out / split).glob("*/.part-*.tmp"):
                tmp.unlink()


def _process_and_finalize(cfg: PrepareConfig, records: Iterator[Mono | Pair], errors: ErrorPolicy, work: Path,
                          fin: Finalizer, pipe_config: dict[str, Any]) -> dict[str, Any]:
    """Run the chunks through the workers and the finalizer. Returns {records, bytes, dropped, resumed}."""
    work.mkdir(parents=True, exist_ok=True)
    size = _work_state(work, cfg)["chunk_size"]
    totals: dict[str, Any] = {"records": 0, "bytes": 0, "dropped": collections.Counter()}

    def account(meta: dict[str, Any], report: bool = True) -> None:
        """Count a finished chunk; its record-level problems go to `errors` (which raises by default)."""
        if report:
            for message, path, position in meta.get("problems") or ():
                errors.bad(message, path=path, position=position)
        totals["records"] += meta["records"]
        totals["bytes"] += meta["bytes"]
        totals["dropped"].update(meta["dropped"])

    done_marker = work / "source.done"
    resumed = _finished_chunks(work)
    if resumed:
        ui.info(f"resuming: {resumed} finished chunk(s) of {size} records are kept")
    start = 0
    for c in range(resumed):
        meta = process.chunk_meta(_chunk_path(work, c))
        account(meta, report=not done_marker.is_file())  # source.done holds the problems already
        fin.add_file(_chunk_path(work, c))
        start = meta.get("end") or (c + 1) * size  # (chunk files of older versions: `size` records each)
    if done_marker.is_file():  # every chunk was written: the source need not be read again
        prev = json.loads(done_marker.read_text(encoding="utf-8"))
        errors.skipped.update(prev["skipped"])
        errors.examples.extend(prev["examples"])
        errors.warnings.extend(prev["warnings"])
        totals["resumed"] = resumed
        totals["dropped"] = dict(totals["dropped"])
        return totals

    process.init_worker(pipe_config, cfg.min_tokens, cfg.max_tokens, cfg.on_error)
    process.warm([lang for lang in cfg.lang if _folder_ok(lang)])  # workers fork with the tools built
    pool = None
    if cfg.workers > 1:
        pool = ProcessPoolExecutor(cfg.workers, mp_context=mp.get_context("fork"), initializer=process.init_worker,
                                   initargs=(pipe_config, cfg.min_tokens, cfg.max_tokens, cfg.on_error))
        pool.submit(int).result()  # fork the workers now, before the progress bar starts its thread
    inflight: collections.deque = collections.deque()
    max_inflight = 2 * cfg.workers

    try:
        with _progress() as bar:
            task = bar.add_task(f"prepare {cfg.source}", total=None, bytes=0)

            def finished(c: int, meta: dict[str, Any]) -> None:
                account(meta)  # raises on a problem with --on-error raise (that chunk was not written)
                fin.add_file(_chunk_path(work, c))
                bar.update(task, completed=totals["records"], bytes=totals["bytes"])

            def submit(chunk: list[tuple], c: int, n: int, end: int) -> None:
                path = str(_chunk_path(work, c))
                if pool is None:
                    finished(c, process.process_to_file(chunk, path, n, end))
                    return
                inflight.append((pool.submit(process.process_to_file, chunk, path, n, end), c))
                while len(inflight) >= max_inflight:
                    res, cc = inflight.popleft()
                    finished(cc, res.result())

            chunk: list[tuple] = []
            c = resumed
            index = items = n = weight = 0  # stream position; this chunk's items, records (not pages), weight
            for rec in records:
                index += 1
                if index <= start:
                    continue
                items += 1
                if type(rec) is RawPage:
                    t, counted = _page_task(rec, errors)
                    n += counted
                    weight += 1 + len(rec.text) // _PAGE_CHARS
                else:
                    t = _to_task(rec, errors)
                    n += 1
                    weight += 1
                if t is not None:
                    chunk.append(t)
                if weight >= size:
                    submit(chunk, c, n, index)
                    c += 1
                    chunk, items, n, weight = [], 0, 0, 0
            if items:
                submit(chunk, c, n, index)
            while inflight:
                res, cc = inflight.popleft()
                finished(cc, res.result())
    except BrokenProcessPool:
        raise WorkFailed(_WORKER_DIED) from None
    finally:
        if pool is not None:
            for res, _ in inflight:
                res.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
    artifacts.write_json_atomic(done_marker, {"skipped": dict(errors.skipped), "examples": errors.examples,
                                              "warnings": errors.warnings})
    totals["resumed"] = resumed
    totals["dropped"] = dict(totals["dropped"])
    return totals


# ---------------------------------------------------------------- BPE sub-steps
def _bpe_steps(cfg: PrepareConfig, out: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    try:
        from xlp_cli.bpe import run as bpe_run
        from xlp_cli.bpe.config import BpeApplyConfig, BpeLearnConfig
    except ModuleNotFoundError as e:
        raise WorkFailed(f"BPE inside prepare is not available: the bpe stage is missing ({e}); "
                         "run `xlp bpe learn` / `xlp bpe apply` on this folder instead") from None
    data = [out]
    apply_kwargs: dict[str, Any] = {}
    if cfg.bpe_codes:
        bpe_run.learn(BpeLearnConfig(data=[out], out=out / "bpe", codes=cfg.bpe_codes, parallel=True))
        data.append(out / "bpe")
        manifest.setdefault("outputs", {})["bpe"] = "bpe"
    else:
        src = Path(cfg.bpe_from)  # type: ignore[arg-type]
        if src.is_dir():
            data.append(src)
        else:
            apply_kwargs["codes"] = src
    bpe_run.apply(BpeApplyConfig(data=data, out=out / "ids", **apply_kwargs))
    manifest.setdefault("outputs", {})["ids"] = "ids"
    artifacts.write_manifest(out, manifest)
    return manifest


# ---------------------------------------------------------------- summary
def _summary(manifest: dict[str, Any], out: Path, seconds: float) -> dict[str, Any]:
    rec = manifest.get("records", {})
    counts = manifest.get("counts", {})
    kept = sum(n for per in counts.values() for n in per.values())
    return {
        "out": str(out),
        "records_read": rec.get("read", 0),
        "kept": kept,
        "dropped": manifest.get("dropped", {}),
        "skipped": sum(manifest.get("skipped", {}).values()),
        "warnings": len(manifest.get("warnings", [])),
        "shards": len(manifest.get("outputs", {}).get("shards", {})),
        "counts": counts,
        "seconds": round(seconds, 2),
        "docs_per_s": round(rec.get("read", 0) / seconds, 1) if seconds > 0 else 0.0,
        "mb_per_s": round(rec.get("bytes", 0) / 1e6 / seconds, 2) if seconds > 0 else 0.0,
        "bpe": manifest.get("outputs", {}).get("bpe"),
        "ids": manifest.get("outputs", {}).get("ids"),
    }


def print_summary(summary: dict[str, Any]) -> None:
    counts = summary.get("counts", {})
    groups = sorted({g for per in counts.values() for g in per})
    t = Table(title=f"xlp prepare: {summary.get('status', '')}")
    t.add_column("lang / pair", style="bold")
    for s in SPLITS:
        t.add_column(s, justify="right")
    t.add_column("total", justify="right")
    for g in groups:
        row = [counts.get(s, {}).get(g, 0) for s in SPLITS]
        t.add_row(g, *(f"{n:,}" for n in row), f"{sum(row):,}")
    totals = [sum(counts.get(s, {}).values()) for s in SPLITS]
    t.add_row("all", *(f"{n:,}" for n in totals), f"{sum(totals):,}", style="bold")
    ui.out.print(t)
    dropped = ", ".join(f"{k} {v:,}" for k, v in sorted(summary.get("dropped", {}).items())) or "none"
    ui.out.print(f"read {summary.get('records_read', 0):,} records, kept {summary.get('kept', 0):,}; dropped: {dropped}; "
                 f"skipped (bad input): {summary.get('skipped', 0):,}; warnings: {summary.get('warnings', 0)}")
    speed = (f"{summary.get('docs_per_s')} docs/s, {summary.get('mb_per_s')} MB/s"
             if summary.get("docs_per_s") is not None else "nothing to do")
    ui.out.print(f"{summary.get('shards', 0)} shards in {summary.get('out')}  ({summary.get('seconds')} s, {speed})")
    if summary.get("ids"):
        ui.out.print(f"BPE: {summary.get('bpe') or 'reused'}; token ids in {summary.get('ids')}")
