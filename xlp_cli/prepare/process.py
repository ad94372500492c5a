"""The per-record work that runs in worker processes: text processing, length filter, ids and hashes.

Records travel as plain tuples (cheap to pickle):
  mono  ("m", lang, text, source)
  pair  ("p", lang1, lang2, text1, text2, source)      with lang1 <= lang2 (the pipeline orders pairs)
        (with `--split-by sentences` a mono or pair task carries one more item: its sentence group's `u`)
  page  ("w", lang, text, source, path, position, extract, context)   a `RawPage`: the worker first runs
        `extract(text, context)` (wikipedia: wikitext -> paragraphs) and treats each paragraph as a mono
        record; a `RecordProblem` it raises is returned as a problem [message, path, position]
and come back (from `process_chunk`) as processed rows or a drop reason:
  ("m", lang, id, source, raw, text, hash, u)
  ("p", "l1-l2", id, source, l1, l2, raw1, raw2, text1, text2, hash, u)
  ("x", reason)                                          reason: empty | too_short | too_long
`hash` (64-bit, for de-duplication) and `u` (64-bit, for the split) come from one blake2b digest of the
processed content, so equal content always dedups and always lands in the same split, whatever its source.

`process_to_table` processes one chunk into a chunk table (columns CHUNK_COLUMNS) whose metadata holds the
chunk's counts (records, bytes, dropped), its problems and `end`, the position in its split's record stream
after it (splits.py adds the rest); `process_to_file` writes it, atomically, as a "chunk file"
(`OUT/.work/chunk-SSSSSS-KKKKKK.parquet`, workdir.py). With on_error raise, a chunk with a problem is not
written: the main process reports the problem and stops.
"""

from __future__ import annotations

import hashlib
import json
import operator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli.artifacts.arrow_numpy import from_numpy
from xlp_cli.artifacts.files import atomic_path
from xlp_cli.prepare.records import RecordProblem
from xlp_cli.text.native import module
from xlp_cli.text.pipeline import TextPipeline

_PIPE: TextPipeline | None = None
_LIMITS: tuple[int, int] = (1, 0)
_ON_ERROR = "raise"
_SETTINGS: str | None = None  # the arguments of the last init_worker


def init_worker(pipe_config: dict[str, Any], min_tokens: int, max_tokens: int, on_error: str = "raise") -> None:
    global _PIPE, _LIMITS, _ON_ERROR, _SETTINGS
    _SETTINGS = json.dumps([pipe_config, min_tokens, max_tokens, on_error], sort_keys=True)
    _PIPE = TextPipeline.from_config(pipe_config)
    _LIMITS = (min_tokens, max_tokens)
    _ON_ERROR = on_error


def ensure_worker(pipe_config: dict[str, Any], min_tokens: int, max_tokens: int, on_error: str = "raise") -> None:
    """`init_worker` unless this process is set up with these settings already (a long-lived Ray worker)."""
    if json.dumps([pipe_config, min_tokens, max_tokens, on_error], sort_keys=True) != _SETTINGS:
        init_worker(pipe_config, min_tokens, max_tokens, on_error)


def warm(langs: list[str]) -> None:
    """Build the tools for `langs` now (in the parent, before the workers fork, so they share them)."""
    assert _PIPE is not None, "init_worker was not called"
    for lang in langs:
        _PIPE.process("warm up", lang)


def record_id(source: str, lang: str, text: str) -> str:
    return hashlib.sha1(f"{source}\x00{lang}\x00{text}".encode("utf-8")).hexdigest()[:16]


def content_hashes(key: str) -> tuple[int, int]:
    d = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
    return int.from_bytes(d[:8], "little"), int.from_bytes(d[8:], "little")


def _length_problem(text: str) -> str | None:
    if not text or text.isspace():
        return "empty"
    # --tokenize xlm keeps XLM's spacing (th "   ", hi double spaces): count tokens, not spaces, there
    n = text.count(" ") + 1 if "  " not in text and text[0] != " " and text[-1] != " " else len(text.split())
    lo, hi = _LIMITS
    if n < lo:
        return "too_short"
    if hi and n > hi:
        return "too_long"
    return None


def _processed(pipe: TextPipeline, langs: list[str], texts: list[str], raws: list[str]) -> list[str]:
    """The processed text of every side, one native call per language; "" where raw is empty. The text,
    not its raw form, is processed: the normalizer sees tabs and no-break spaces as perl does."""
    if len(set(langs)) == 1 and all(raws):  # one language, no empty text: the common case, in one call
        return pipe.process_batch(texts if isinstance(texts, list) else list(texts), langs[0])
    out = [""] * len(texts)
    by_lang: dict[str, list[int]] = {}
    for i, (lang, raw) in enumerate(zip(langs, raws)):
        if raw:
            by_lang.setdefault(lang, []).append(i)
    for lang, idx in by_lang.items():
        for i, proc in zip(idx, pipe.process_batch([texts[i] for i in idx], lang)):
            out[i] = proc
    return out


def process_chunk(chunk: list[tuple]) -> list[tuple]:
    pipe = _PIPE
    assert pipe is not None, "init_worker was not called"
    langs: list[str] = []  # every side of every record: language, text
    texts: list[str] = []
    for rec in chunk:
        if rec[0] == "m":
            langs.append(rec[1])
            texts.append(rec[2])
        else:
            langs += (rec[1], rec[2])
            texts += (rec[3], rec[4])
    raw_list = pipe.raw_batch(texts)
    procs = iter(_processed(pipe, langs, texts, raw_list))
    raws = iter(raw_list)
    problem = _length_problem
    out: list[tuple] = []
    for rec in chunk:
        if rec[0] == "m":
            lang, source = rec[1], rec[3]
            raw, proc = next(raws), next(procs)
            why = problem(proc)
            if why:
                out.append(("x", why))
                continue
            h, u = content_hashes(f"{lang}\x00{proc}")
            u = rec[4] if len(rec) > 4 else u
            out.append(("m", lang, record_id(source, lang, proc), source, raw, proc, h, u))
        else:
            l1, l2, source = rec[1], rec[2], rec[5]
            r1, r2 = next(raws), next(raws)
            p1, p2 = next(procs), next(procs)
            why = problem(p1) or problem(p2)
            if why:
                out.append(("x", why))
                continue
            group = f"{l1}-{l2}"
            h, u = content_hashes(f"{group}\x00{p1}\x00{p2}")
            u = rec[6] if len(rec) > 6 else u
            out.append(("p", group, record_id(source, group, f"{p1}\x00{p2}"), source, l1, l2, r1, r2, p1, p2, h, u))
    return out


def _mono_columns(chunk: list[tuple]) -> tuple[dict[str, Any], dict[str, int]]:
    """`process_chunk` for a chunk of mono tasks only, straight into the chunk table's columns (the same
    values: ids and hashes as `record_id` and `content_hashes` make them). -> (columns, dropped)."""
    pipe = _PIPE
    assert pipe is not None, "init_worker was not called"
    _, langs, texts, sources = zip(*chunk)  # (tuples)
    raws = pipe.raw_batch(texts)
    procs = _processed(pipe, langs, texts, raws)
    why = _native_length_problems()(procs, *_LIMITS)  # one byte per text: 0 keep, else _LENGTH_PROBLEMS
    dropped = {name: why.count(code) for code, name in enumerate(_LENGTH_PROBLEMS) if code and code in why}
    keep = [i for i, code in enumerate(why) if not code] if dropped else range(len(chunk))
    n = len(keep)
    if n == len(chunk):
        lang_col, raw_col, text_col = list(langs), raws, procs
    else:
        lang_col, raw_col, text_col = [langs[i] for i in keep], [raws[i] for i in keep], [procs[i] for i in keep]
    ids, digests = _hashes([chunk[i] for i in keep] if n < len(chunk) else chunk, text_col, lang_col, sources)
    hu = np.frombuffer(digests, dtype="<u8").reshape(-1, 2)  # little-endian halves: h, u
    none = pa.nulls(n, pa.string())
    source_col = list(sources) if n == len(chunk) else [sources[i] for i in keep]
    cols = {"kind": pa.array(["m"] * n, pa.string()), "group": lang_col, "id": ids, "source": source_col,
            "lang1": lang_col, "lang2": none, "raw1": raw_col, "raw2": none, "text1": text_col, "text2": none,
            "h": from_numpy(hu[:, 0].copy()), "u": from_numpy(hu[:, 1].copy())}
    return cols, dropped


def _hashes(tasks: list[tuple], procs: list[str], langs: Any, sources: Any) -> tuple[Any, bytes]:
    """(ids, 16-byte blake2b digests joined) of mono records: `record_id` and `content_hashes`' digest, computed
    natively without the GIL when the records share their language and source (a chunk of one file; `langs`
    and `sources`: those of the records or of a superset)."""
    if tasks and len(set(langs)) == 1 and len(set(sources)) == 1:
        _, lang, _, source = tasks[0]
        hexes, digests = _native_hashes()(f"{source}\x00{lang}\x00", f"{lang}\x00", procs)
        offsets = np.arange(0, len(hexes) + 1, 16, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), len(procs), [None, pa.py_buffer(offsets), pa.py_buffer(hexes)]), digests
    blake, sha1 = hashlib.blake2b, hashlib.sha1
    ids = [sha1(f"{t[3]}\x00{t[1]}\x00{p}".encode("utf-8")).hexdigest()[:16] for t, p in zip(tasks, procs)]
    return ids, b"".join(blake(f"{t[1]}\x00{p}".encode("utf-8"), digest_size=16).digest() for t, p in zip(tasks, procs))


_LENGTH_PROBLEMS = (None, "empty", "too_short", "too_long")  # the codes of `length_problems`


def _native_length_problems() -> Any:
    return module().length_problems


def _native_hashes() -> Any:
    return module().record_hashes


CHUNK_COLUMNS = ["kind", "group", "id", "source", "lang1", "lang2", "raw1", "raw2", "text1", "text2", "h", "u"]
CHUNK_SCHEMA = pa.schema([(c, pa.string()) for c in CHUNK_COLUMNS[:-2]] + [("h", pa.uint64()), ("u", pa.uint64())])


_KIND = operator.itemgetter(0)  # a task's kind


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def expand_pages(chunk: list[tuple]) -> tuple[list[tuple], int, list[list[str]]]:
    """The chunk with each page task replaced by its paragraphs as mono tasks, in order.
    -> (tasks, number of paragraphs the pages gave, problems [message, path, position])."""
    if "w" not in map(_KIND, chunk):
        return chunk, 0, []
    tasks: list[tuple] = []
    paragraphs = 0
    problems: list[list[str]] = []
    for t in chunk:
        if t[0] != "w":
            tasks.append(t)
            continue
        _, lang, text, source, path, position, extract, context = t
        try:
            lines = extract(text, context)
        except RecordProblem as e:
            problems.append([str(e), path, position])
            continue
        paragraphs += len(lines)
        tasks.extend(("m", lang, line, source) for line in lines)
    return tasks, paragraphs, problems


def _page_columns(chunk: list[tuple]) -> tuple[dict[str, Any], dict[str, int], int, int] | None:
    """A chunk of pages of one language, source, extract function and context, whose extract function names
    the native converter it runs (`extract.native(context)`, sources/wikipedia_text.py): from the pages' text
    to the chunk table's columns in one native call (Pipeline.pages), the values `expand_pages` and
    `_mono_columns` give. -> (columns, dropped, paragraphs, their UTF-8 bytes); None: the general path
    (another chunk, a segmented language, a page that is not valid Unicode: that path reports it)."""
    pipe = _PIPE
    assert pipe is not None, "init_worker was not called"
    if chunk[0][0] != "w":
        return None
    _, lang, _, source, _, _, extract, context = chunk[0]
    native_converter = getattr(extract, "native", None)
    if native_converter is None or pipe.segmenter(lang) is not None:
        return None
    if any(t[0] != "w" or t[1] != lang or t[3] != source or t[6] is not extract
           or (t[7] is not context and t[7] != context) for t in chunk):
        return None
    found = pipe.native(lang).pages(native_converter(context), [t[2] for t in chunk], f"{source}\x00{lang}\x00",
                                    f"{lang}\x00", *_LIMITS)
    if found is None:
        return None
    paragraphs, nbytes, why, raw_data, raw_offsets, text_data, text_offsets, ids, digests = found
    n = len(raw_offsets) // 4 - 1
    dropped = {name: why.count(code) for code, name in enumerate(_LENGTH_PROBLEMS) if code and code in why}
    string = pa.string()
    hu = np.frombuffer(digests, dtype="<u8").reshape(-1, 2)  # little-endian halves: h, u
    langs = pa.array([lang] * n, string)
    none = pa.nulls(n, string)
    cols = {"kind": pa.array(["m"] * n, string), "group": langs,
            "id": pa.Array.from_buffers(string, n, [None, pa.py_buffer(np.arange(0, 16 * n + 1, 16, dtype=np.int32)),
                                                    pa.py_buffer(ids)]),
            "source": pa.array([source] * n, string), "lang1": langs, "lang2": none,
            "raw1": pa.Array.from_buffers(string, n, [None, pa.py_buffer(raw_offsets), pa.py_buffer(raw_data)]),
            "raw2": none,
            "text1": pa.Array.from_buffers(string, n, [None, pa.py_buffer(text_offsets), pa.py_buffer(text_data)]),
            "text2": none, "h": from_numpy(hu[:, 0].copy()), "u": from_numpy(hu[:, 1].copy())}
    return cols, dropped, paragraphs, nbytes


def process_to_table(chunk: list[tuple], n_records: int, end: int | None = None, problems: list | tuple = (),
                     **extra: Any) -> tuple[dict[str, Any], pa.Table | None]:
    """Process `chunk` (the tasks made from `n_records` source records, not counting pages, whose paragraphs
    count instead) into a chunk table (None when, with on_error raise, the chunk has a problem, or a reader
    problem stopped its split: `fatal`). `end` (the position in the split's record stream after the chunk),
    the reader's `problems` (before the pages' own) and `extra` (see splits.py) go into the metadata."""
    fatal = extra.get("fatal") or (problems and _ON_ERROR == "raise")
    pages = None if fatal or not chunk else _page_columns(chunk)
    if pages is not None:  # Wikipedia pages, natively from wikitext to columns
        cols, dropped, paragraphs, nbytes = pages
        problems = list(problems)
    else:
        chunk, paragraphs, page_problems = expand_pages(chunk)
        problems = list(problems) + page_problems
        if extra.get("fatal") or (problems and _ON_ERROR == "raise"):  # the main process raises; a rerun meets it
            return {"records": n_records + paragraphs, "bytes": 0, "dropped": {}, "problems": problems[:1],
                    "end": end, **extra, "written": False}, None
        cols, dropped, nbytes = _task_columns(chunk)
    meta = {"records": n_records + paragraphs, "bytes": nbytes, "dropped": dropped, "problems": problems, "end": end,
            **extra}
    table = pa.Table.from_pydict(cols, schema=CHUNK_SCHEMA).replace_schema_metadata({"xlp": json.dumps(meta)})
    return meta, table


def _task_columns(chunk: list[tuple]) -> tuple[dict[str, Any], dict[str, int], int]:
    """The chunk table's columns of mono and pair tasks -> (columns, dropped, the tasks' UTF-8 bytes)."""
    if chunk and set(map(len, chunk)) == {4} and set(map(_KIND, chunk)) == {"m"}:  # the common case, by column
        cols, dropped = _mono_columns(chunk)
        return cols, dropped, len("".join([t[2] for t in chunk]).encode("utf-8", "surrogatepass"))
    rows = process_chunk(chunk)
    dropped = {}
    for r in rows:
        if r[0] == "x":
            dropped[r[1]] = dropped.get(r[1], 0) + 1
    kept = [r if r[0] == "p" else ("m", r[1], r[2], r[3], r[1], None, r[4], None, r[5], None, r[6], r[7])
            for r in rows if r[0] != "x"]
    cols = dict(zip(CHUNK_COLUMNS, map(list, zip(*kept)))) if kept else {c: [] for c in CHUNK_COLUMNS}
    return cols, dropped, sum(_utf8_len(t[2]) if t[0] == "m" else _utf8_len(t[3]) + _utf8_len(t[4]) for t in chunk)


def write_chunk(path: str | Path, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="lz4", use_dictionary=False)  # (temporary files: fast to write)


def process_to_file(chunk: list[tuple], path: str, n_records: int, end: int | None = None, problems: list | tuple = (),
                    **extra: Any) -> dict[str, Any]:
    """`process_to_table`, written (atomically) as the chunk file `path` when there is a table."""
    meta, table = process_to_table(chunk, n_records, end, problems, **extra)
    if table is not None:
        write_chunk(path, table)
    return meta


def chunk_meta(path: str | Path) -> dict[str, Any]:
    return json.loads(pq.read_schema(path).metadata[b"xlp"])
