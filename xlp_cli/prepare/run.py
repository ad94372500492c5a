"""`xlp prepare`: source records -> processed, filtered, de-duplicated, split Parquet shards + manifest.

Two phases, so that a killed run resumes to the same output (docs/prepare.md, "Resume"):

1. process  The source is read in order and cut into blocks of BLOCK records (by position in the record
            stream). Workers clean/normalize/tokenize/lowercase chunks of a block and apply the length
            filter; the main process writes each finished block to `OUT/.work/block-NNNNNN.parquet`
            (atomic). A rerun re-reads the source but skips the records of finished blocks.
2. finalize Blocks are read in order: exact de-duplication (8-byte hashes), split by content hash with the
            valid/test caps, `--max-records`, then streaming shard writers write
            `OUT/<split>/<lang or l1-l2>/part-NNNNN.parquet`. The order of rows does not depend on the
            block size or the number of workers, so every run of one config gives the same shards.
            Then the manifest (last), then `.work` is removed.
With --bpe-codes/--bpe-from the `xlp bpe learn`/`apply` stages run on the result into OUT/bpe and OUT/ids.
"""

from __future__ import annotations

import collections
import json
import multiprocessing as mp
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from rich.progress import ProgressColumn, SpinnerColumn
from rich.table import Table
from rich.text import Text

from xlp_cli import artifacts, ui
from xlp_cli.config import to_dict
from xlp_cli.errors import BadInput, WorkFailed
from xlp_cli.prepare import process
from xlp_cli.prepare.config import PrepareConfig
from xlp_cli.prepare.dedup import HashSet64
from xlp_cli.prepare.records import ErrorPolicy, Mono, Pair, SourceOptions
from xlp_cli.prepare.shards import GroupWriter
from xlp_cli.text.langs import safe_folder_name

STAGE = "prepare"
BLOCK = 20_000  # records per work block (resume granularity); the final shards do not depend on it
CHUNK = 500  # records per task sent to a worker; divides BLOCK
SPLITS = ("train", "valid", "test")
# config keys that do not change the output: a rerun with other values resumes instead of being refused
_NOT_OUTPUT = ("workers", "force")
_WORK = ".work"
_BLOCK_COLUMNS = ["kind", "group", "id", "source", "lang1", "lang2", "raw1", "raw2", "text1", "text2", "h", "u"]
_BLOCK_SCHEMA = pa.schema([(c, pa.string()) for c in _BLOCK_COLUMNS[:-2]] + [("h", pa.uint64()), ("u", pa.uint64())])


# ---------------------------------------------------------------- progress columns
class _Rate(ProgressColumn):
    def __init__(self, field: str | None, unit: str, scale: float = 1.0):
        super().__init__()
        self.field, self.unit, self.scale = field, unit, scale

    def render(self, task: Any) -> Text:
        elapsed = task.elapsed or 0.0
        value = task.completed if self.field is None else task.fields.get(self.field, 0)
        rate = value / elapsed / self.scale if elapsed > 0 else 0.0
        return Text(f"{rate:,.1f} {self.unit}", style="progress.data.speed")


def _progress():
    return ui.progress(SpinnerColumn(), _Rate(None, "docs/s"), _Rate("bytes", "MB/s", 1e6))


# ---------------------------------------------------------------- config
def output_config(cfg: PrepareConfig) -> dict[str, Any]:
    """The config as recorded in the manifest and guarded against: everything that changes the output."""
    return {k: v for k, v in to_dict(cfg).items() if k.replace("-", "_") not in _NOT_OUTPUT}


def _pipe_config(config: dict[str, Any]) -> dict[str, Any]:
    return {k: config[k] for k in ("clean", "normalize", "tokenize", "lowercase")}


# ---------------------------------------------------------------- run
def run(cfg: PrepareConfig) -> dict[str, Any]:
    t0 = time.time()
    out = Path(cfg.out)
    config = output_config(cfg)
    if cfg.bpe_from is not None and not Path(cfg.bpe_from).exists():
        raise BadInput("no such BPE codes file or `xlp bpe learn` folder", path=cfg.bpe_from)
    prev = artifacts.guard_out_dir(out, STAGE, config, force=cfg.force)
    chash = artifacts.config_hash(config)

    if prev is not None and prev.get("config_hash") == chash and _shards_intact(out, prev):
        shutil.rmtree(out / _WORK, ignore_errors=True)
        if (cfg.bpe_codes or cfg.bpe_from) and not prev.get("outputs", {}).get("ids"):
            prev = _bpe_steps(cfg, out, prev)
        summary = _summary(prev, out, time.time() - t0)
        summary["status"] = "up to date (nothing to do)"
        return summary

    inputs = _inputs(cfg)
    errors = ErrorPolicy(cfg.on_error)
    opts = SourceOptions(langs=list(cfg.lang), lid_threshold=cfg.lid_threshold,
                         mono_from_parallel=cfg.mono_from_parallel, max_records=cfg.max_records)
    from xlp_cli.prepare.sources import SOURCES

    records = SOURCES[cfg.source](inputs, opts, errors)
    work = out / _WORK
    stats = _phase_process(cfg, records, errors, work, _pipe_config(config))
    counts, shards, dropped = _phase_finalize(cfg, out, work)
    dropped.update(stats["dropped"])

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
    summary["status"] = "resumed and finished" if stats["resumed_blocks"] else "done"
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


def _shards_intact(out: Path, manifest: dict[str, Any]) -> bool:
    shards = manifest.get("outputs", {}).get("shards", {})
    for rel, info in shards.items():
        p = out / rel
        if not p.is_file() or artifacts.sha256_file(p) != info.get("sha256"):
            return False
    return True


# ---------------------------------------------------------------- phase 1: process
def _to_task(rec: Mono | Pair, errors: ErrorPolicy) -> tuple | None:
    if isinstance(rec, Mono):
        if not safe_folder_name(rec.lang):
            errors.bad(f"language code {rec.lang!r} cannot name an output folder", path=rec.origin)
            return None
        return ("m", rec.lang, rec.text, rec.source)
    l1, l2, t1, t2 = rec.lang1, rec.lang2, rec.text1, rec.text2
    for lang in (l1, l2):
        if not safe_folder_name(lang):
            errors.bad(f"language code {lang!r} cannot name an output folder", path=rec.origin)
            return None
    if l1 == l2:
        errors.bad(f"a parallel record needs two languages, both sides are {l1!r}", path=rec.origin)
        return None
    if l1 > l2:
        l1, l2, t1, t2 = l2, l1, t2, t1
    return ("p", l1, l2, t1, t2, rec.source)


def _task_bytes(task: tuple) -> int:
    if task[0] == "m":
        return len(task[2].encode("utf-8", "surrogatepass"))
    return len(task[3].encode("utf-8", "surrogatepass")) + len(task[4].encode("utf-8", "surrogatepass"))


def _block_path(work: Path, b: int) -> Path:
    return work / f"block-{b:06d}.parquet"


def _finished_blocks(work: Path) -> int:
    b = 0
    while _block_path(work, b).is_file():
        b += 1
    for stray in work.glob("block-*.parquet"):  # blocks after a gap cannot be trusted to line up
        if int(stray.stem.split("-")[1]) >= b:
            stray.unlink()
    return b


def _write_block(work: Path, b: int, rows: list[tuple], meta: dict[str, Any]) -> None:
    cols: dict[str, list] = {c: [] for c in _BLOCK_COLUMNS}
    for r in rows:
        if r[0] == "m":
            _, lang, rid, source, raw, text, h, u = r
            vals = ("m", lang, rid, source, lang, None, raw, None, text, None, h, u)
        else:
            vals = r
        for c, v in zip(_BLOCK_COLUMNS, vals):
            cols[c].append(v)
    table = pa.Table.from_pydict(cols, schema=_BLOCK_SCHEMA)
    table = table.replace_schema_metadata({"xlp": json.dumps(meta)})
    with artifacts.atomic_path(_block_path(work, b)) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def _phase_process(cfg: PrepareConfig, records: Iterator[Mono | Pair], errors: ErrorPolicy, work: Path,
                   pipe_config: dict[str, Any]) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    done_marker = work / "process.done"
    if done_marker.is_file():
        # Everything was processed before: the source is still read (its skips and warnings go to the
        # manifest), nothing is processed again.
        for _ in records:
            pass
        return json.loads(done_marker.read_text(encoding="utf-8"))
    resumed = _finished_blocks(work)
    start = resumed * BLOCK
    if resumed:
        ui.info(f"resuming: {resumed} finished block(s) of {BLOCK} records are kept, skipping {start} records")

    pool = None
    if cfg.workers > 1:
        pool = mp.get_context("fork").Pool(cfg.workers, initializer=process.init_worker,
                                           initargs=(pipe_config, cfg.min_tokens, cfg.max_tokens))
    else:
        process.init_worker(pipe_config, cfg.min_tokens, cfg.max_tokens)
    max_inflight = 2 * cfg.workers + 2
    inflight: collections.deque = collections.deque()
    block_rows: list[tuple] = []
    block_meta = {"records": 0, "bytes": 0, "dropped": collections.Counter()}
    n_records = 0
    n_bytes = 0

    def finish_chunk(result: list[tuple], b: int, last: bool, nrec: int, nbytes: int) -> None:
        for r in result:
            if r[0] == "x":
                block_meta["dropped"][r[1]] += 1
            else:
                block_rows.append(r)
        block_meta["records"] += nrec
        block_meta["bytes"] += nbytes
        if last:
            _write_block(work, b, block_rows, {"records": block_meta["records"], "bytes": block_meta["bytes"],
                                               "dropped": dict(block_meta["dropped"])})
            block_rows.clear()
            block_meta["records"] = block_meta["bytes"] = 0
            block_meta["dropped"] = collections.Counter()

    def submit(chunk: list[tuple], b: int, last: bool, nrec: int, nbytes: int) -> None:
        if pool is None:
            finish_chunk(process.process_chunk(chunk), b, last, nrec, nbytes)
            return
        inflight.append((pool.apply_async(process.process_chunk, (chunk,)), b, last, nrec, nbytes))
        while len(inflight) >= max_inflight:
            drain_one()

    def drain_one() -> None:
        res, b, last, nrec, nbytes = inflight.popleft()
        finish_chunk(res.get(), b, last, nrec, nbytes)

    try:
        with _progress() as bar:
            task = bar.add_task(f"prepare {cfg.source}", total=None, bytes=0)
            chunk: list[tuple] = []
            chunk_records = chunk_bytes = 0
            index = 0
            for rec in records:
                pos = index
                index += 1
                if pos < start:
                    continue
                t = _to_task(rec, errors)
                nb = _task_bytes(t) if t is not None else 0
                if t is not None:
                    chunk.append(t)
                chunk_records += 1
                chunk_bytes += nb
                n_records += 1
                n_bytes += nb
                end_of_block = index % BLOCK == 0
                if chunk_records >= CHUNK or end_of_block:
                    submit(chunk, pos // BLOCK, end_of_block, chunk_records, chunk_bytes)
                    chunk, chunk_records, chunk_bytes = [], 0, 0
                    bar.update(task, completed=n_records, bytes=n_bytes)
            if chunk_records or (index > start and index % BLOCK):
                submit(chunk, (index - 1) // BLOCK, True, chunk_records, chunk_bytes)
            while inflight:
                drain_one()
            bar.update(task, completed=n_records, bytes=n_bytes)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()

    # totals over all blocks (those of an earlier, interrupted run included)
    totals = {"records": 0, "bytes": 0, "dropped": collections.Counter(), "resumed_blocks": resumed}
    for b in range(_finished_blocks(work)):
        meta = json.loads(pq.read_schema(_block_path(work, b)).metadata[b"xlp"])
        totals["records"] += meta["records"]
        totals["bytes"] += meta["bytes"]
        totals["dropped"].update(meta["dropped"])
    totals["dropped"] = dict(totals["dropped"])
    artifacts.write_json_atomic(done_marker, totals)
    return totals


# ---------------------------------------------------------------- phase 2: finalize
def _phase_finalize(cfg: PrepareConfig, out: Path, work: Path) -> tuple[dict, dict, dict]:
    seen = HashSet64()
    writers: dict[tuple[str, str], GroupWriter] = {}
    kept: collections.Counter[str] = collections.Counter()
    per_split: dict[str, collections.Counter[str]] = {s: collections.Counter() for s in SPLITS}
    dropped: collections.Counter[str] = collections.Counter()
    two64 = float(2**64)
    vf = cfg.valid_fraction
    tf = vf + cfg.test_fraction
    caps = {"valid": cfg.max_valid, "test": cfg.max_test}
    n_blocks = _finished_blocks(work)
    try:
        for b in range(n_blocks):
            table = pq.read_table(_block_path(work, b))
            if table.num_rows == 0:
                continue
            new = seen.add_batch(table.column("h").to_numpy())
            dropped["duplicate"] += int((~new).sum())
            us = table.column("u").to_numpy().astype(np.float64) / two64
            cols = {c: table.column(c).to_pylist() for c in _BLOCK_COLUMNS[:-2]}
            for i in np.flatnonzero(new):
                group = cols["group"][i]
                if cfg.max_records and kept[group] >= cfg.max_records:
                    dropped["over_max_records"] += 1
                    continue
                u = us[i]
                split = "valid" if u < vf else "test" if u < tf else "train"
                if split != "train" and caps[split] and per_split[split][group] >= caps[split]:
                    split = "train"
                key = (split, group)
                w = writers.get(key)
                pair = cols["kind"][i] == "p"
                if w is None:
                    w = writers[key] = GroupWriter(out, split, group, pair, cfg.shard_size)
                if pair:
                    w.add((cols["id"][i], cols["source"][i], cols["lang1"][i], cols["lang2"][i], cols["raw1"][i],
                           cols["raw2"][i], cols["text1"][i], cols["text2"][i]))
                else:
                    w.add((cols["id"][i], cols["source"][i], cols["lang1"][i], cols["raw1"][i], cols["text1"][i]))
                kept[group] += 1
                per_split[split][group] += 1
        shards: dict[str, dict] = {}
        for key in sorted(writers):
            writers[key].close()
            shards.update(writers[key].done)
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    counts = {s: dict(sorted(per_split[s].items())) for s in SPLITS}
    return counts, dict(sorted(shards.items())), dict(dropped)


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
    ui.out.print(f"{summary.get('shards', 0)} shards in {summary.get('out')}  ({summary.get('seconds')} s, "
                 f"{summary.get('docs_per_s')} docs/s, {summary.get('mb_per_s')} MB/s)")
    if summary.get("ids"):
        ui.out.print(f"BPE: {summary.get('bpe') or 'reused'}; token ids in {summary.get('ids')}")
