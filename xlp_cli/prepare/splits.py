"""One input split -> its chunks: read the split's records, turn them into tasks, cut them into chunks.

This is the reader's side of `xlp prepare`, the same wherever it runs: the main process (--workers 1, or
fewer splits than workers), a local worker process, or a Ray task. A split's records are cut into chunks
of about `--chunk-size` records (a `RawPage` weighs about its number of paragraphs, 1 + len(wikitext) //
500, so that chunks of pages take about as long as others). Each chunk carries, in its metadata:
- `end`: the position in the split's record stream after it (a resumed split skips that many records);
- `problems` / `warnings`: what the reader reported while reading the chunk's records (`CollectedErrors`),
  which the main process reports in stream order; `fatal`: a problem that stopped the reader;
- `tail`: set on the last chunk of a split (possibly empty), with `facts` (what `read_split` returned).
  A split is finished when its chunk files 0..k hold a tail chunk;
- `read_bytes`: how many of the split's input bytes (compressed, as on disk) the reader had consumed (the
  progress bar's percentage and ETA; `split_bytes` is the whole).
"""

from __future__ import annotations

import functools
import itertools
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa

from xlp_cli.core.errors import XlpError
from xlp_cli.prepare import process
from xlp_cli.prepare.records import (
    CollectedErrors,
    ErrorPolicy,
    Mono,
    Pair,
    RawPage,
    RecordProblem,
    SourceOptions,
    Split,
)
from xlp_cli.prepare.sentence_groups import unpair, with_group_u
from xlp_cli.prepare.sources import read_split, read_tasks
from xlp_cli.prepare.sources._files import bytes_read
from xlp_cli.prepare.workdir import chunk_path
from xlp_cli.text.langs import safe_folder_name

# how much a page weighs when cutting chunks: about its number of paragraphs (wikipedia samples: one
# paragraph per 220-1,100 characters of wikitext), from the length of its text: characters, or UTF-8 bytes where
# the reader gives bytes, as the dump reader does (1-3 bytes a character: within that spread)
_PAGE_CHARS = 500


def split_bytes(split: Split) -> int:
    """The input bytes a split stands for (0 when its inputs are not files, e.g. gettext's catalog scan)."""
    if split.kind == "range":
        return split.end - split.start
    return sum(os.path.getsize(p) for p in split.paths if os.path.isfile(p))


def read_bytes(split: Split) -> int | None:
    """How many of the split's bytes this process's reader has consumed (None: unknown now)."""

    n = bytes_read(split.paths, split.start if split.kind == "range" else 0)
    return None if n is None else max(0, min(n, split_bytes(split)))


@functools.lru_cache(maxsize=4096)
def folder_ok(lang: str) -> bool:
    return safe_folder_name(lang)


def to_task(rec: Mono | Pair, errors: ErrorPolicy) -> tuple | None:
    if type(rec) is Mono:
        if not folder_ok(rec.lang):
            errors.bad(f"language code {rec.lang!r} cannot name an output folder", path=rec.origin)
            return None
        return ("m", rec.lang, rec.text, rec.source)
    l1, l2, t1, t2 = rec.lang1, rec.lang2, rec.text1, rec.text2
    for lang in (l1, l2):
        if not folder_ok(lang):
            errors.bad(f"language code {lang!r} cannot name an output folder", path=rec.origin)
            return None
    if l1 == l2:
        errors.bad(f"a parallel record needs two languages, both sides are {l1!r}", path=rec.origin)
        return None
    if l1 > l2:
        l1, l2, t1, t2 = l2, l1, t2, t1
    return ("p", l1, l2, t1, t2, rec.source)


def page_task(page: RawPage, errors: ErrorPolicy) -> tuple[tuple | None, int]:
    """(task for the workers, records counted here). A page whose language cannot name a folder is expanded
    here so that each of its paragraphs is reported (and counted) as a Mono would be."""
    if folder_ok(page.lang):
        return ("w", page.lang, page.text, page.source, page.path, page.position, page.extract, page.context), 0
    try:
        monos = page.monos()
    except RecordProblem as e:
        errors.bad(str(e), path=page.path, position=page.position)
        return None, 0
    for m in monos:
        to_task(m, errors)
    return None, len(monos)


def cut(split: Split, opts: SourceOptions, on_error: str, size: int, start: int = 0
        ) -> Iterator[tuple[list[tuple], int, dict[str, Any]]]:
    """(tasks, records, extra metadata) per chunk of the split, skipping its first `start` records (finished
    by an interrupted run). The last chunk has `tail` (and `fatal` if a problem stopped the reader)."""

    errors = CollectedErrors(on_error)
    facts: dict[str, Any] = {}
    chunk: list[tuple] = []
    index = n = weight = 0  # stream position; this chunk's records (not pages) and weight

    def extra(**more: Any) -> dict[str, Any]:
        problems, warnings = errors.take()
        done = split_bytes(split) if more.get("tail") else read_bytes(split)
        return {"problems": problems, "warnings": warnings, **({"read_bytes": done} if done is not None else {}), **more}

    def records() -> Iterator:
        facts.update((yield from read_split(split, opts, errors)) or {})

    try:
        fast = read_tasks(split, opts, errors)
        if fast is not None:  # the source makes the tasks itself (plain text files)
            yield from _cut_tasks(fast, errors, size, start, extra, facts)
            return
        for rec in records():
            index += 1
            if index <= start:
                if index == start:
                    errors.take()  # reported with the finished chunks already
                continue
            if type(rec) is RawPage:
                t, counted = page_task(rec, errors)
                n += counted
                weight += 1 + len(rec.text) // _PAGE_CHARS
            else:
                if opts.unpair_keep is not None and type(rec) is Pair:
                    rec = unpair(rec, opts.unpair_keep)  # --unpair: one side of each pair
                t = to_task(rec, errors)
                if t is not None and opts.split_plan is not None:
                    t = with_group_u(t, rec, opts.split_plan)  # --split-by sentences
                n += 1
                weight += 1
            if t is not None:
                chunk.append(t)
            if weight >= size:
                yield chunk, n, extra(end=index)
                chunk, n, weight = [], 0, 0
    except XlpError as e:  # a problem that stops the run (on_error raise, or fatal): the main process raises it
        yield chunk, n, extra(end=index, tail=True, fatal=[type(e).__name__, e.message, e.path, e.position])
        return
    yield chunk, n, extra(end=index, tail=True, facts=facts)


def _cut_tasks(tasks: Iterator[tuple], errors: CollectedErrors, size: int, start: int,
               extra: Callable[..., dict[str, Any]], facts: dict[str, Any]) -> Iterator[tuple[list[tuple], int, dict[str, Any]]]:
    """`cut` for a stream of tasks of one record each (sources.read_tasks): the same chunks, `size` at a time."""
    def stream() -> Iterator[tuple]:
        facts.update((yield from tasks) or {})

    it = stream()
    chunk: list[tuple] = []
    done = 0  # records before `chunk`
    try:
        if start:
            done = sum(1 for _ in itertools.islice(it, start))
            if done == start:
                errors.take()  # reported with the finished chunks already
        while True:
            chunk = []
            chunk.extend(itertools.islice(it, size))  # (a problem that stops the run leaves what was read)
            if len(chunk) < size:
                break
            done += size
            yield chunk, size, extra(end=done)
    except XlpError as e:  # as in `cut`
        yield chunk, len(chunk), extra(end=done + len(chunk), tail=True,
                                       fatal=[type(e).__name__, e.message, e.path, e.position])
        return
    yield chunk, len(chunk), extra(end=done + len(chunk), tail=True, facts=facts)


def run_split(split: Split, opts: SourceOptions, on_error: str, size: int, start_chunk: int, start: int,
              emit: Callable[[int, dict[str, Any], pa.Table | None], None]) -> int:
    """Read and process a whole split (in this process), giving each chunk `k` (from `start_chunk`) to `emit`
    with its metadata and table (None: not written, the run stops there). Returns the number of chunks."""
    k = start_chunk
    for tasks, n, more in cut(split, opts, on_error, size, start):
        meta, table = process.process_to_table(tasks, n, **more)
        emit(k, meta, table)
        k += 1
        if table is None:
            break
    return k - start_chunk


def run_split_to_files(job: tuple[int, Split, int, int], work: str, opts: SourceOptions, on_error: str,
                       size: int) -> list[dict[str, Any]]:
    """`run_split` in a local worker process: chunk files in `work`; returns the chunks' metadata."""

    s, split, start_chunk, start = job
    metas: list[dict[str, Any]] = []

    def emit(k: int, meta: dict[str, Any], table: pa.Table | None) -> None:
        if table is not None:
            process.write_chunk(chunk_path(Path(work), s, k), table)
        metas.append(meta)

    run_split(split, opts, on_error, size, start_chunk, start, emit)
    return metas
