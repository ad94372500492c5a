"""The per-record work that runs in worker processes: text processing, length filter, ids and hashes.

Records travel as plain tuples (cheap to pickle):
  mono  ("m", lang, text, source)
  pair  ("p", lang1, lang2, text1, text2, source)      with lang1 <= lang2 (the pipeline orders pairs)
and come back as processed rows or a drop reason:
  ("m", lang, id, source, raw, text, hash, u)
  ("p", "l1-l2", id, source, l1, l2, raw1, raw2, text1, text2, hash, u)
  ("x", reason)                                          reason: empty | too_short | too_long
`hash` (64-bit, for de-duplication) and `u` (64-bit, for the split) come from one blake2b digest of the
processed content, so equal content always dedups and always lands in the same split, whatever its source.
"""

from __future__ import annotations

import hashlib
from typing import Any

from xlp_cli.text.pipeline import TextPipeline

_PIPE: TextPipeline | None = None
_LIMITS: tuple[int, int] = (1, 0)


def init_worker(pipe_config: dict[str, Any], min_tokens: int, max_tokens: int) -> None:
    global _PIPE, _LIMITS
    _PIPE = TextPipeline.from_config(pipe_config)
    _LIMITS = (min_tokens, max_tokens)


def record_id(source: str, lang: str, text: str) -> str:
    return hashlib.sha1(f"{source}\x00{lang}\x00{text}".encode("utf-8")).hexdigest()[:16]


def content_hashes(key: str) -> tuple[int, int]:
    d = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
    return int.from_bytes(d[:8], "little"), int.from_bytes(d[8:], "little")


def _length_problem(text: str) -> str | None:
    if not text:
        return "empty"
    n = text.count(" ") + 1
    lo, hi = _LIMITS
    if n < lo:
        return "too_short"
    if hi and n > hi:
        return "too_long"
    return None


def process_chunk(chunk: list[tuple]) -> list[tuple]:
    pipe = _PIPE
    assert pipe is not None, "init_worker was not called"
    out: list[tuple] = []
    for rec in chunk:
        if rec[0] == "m":
            _, lang, text, source = rec
            raw = pipe.raw(text)
            proc = pipe.process(raw, lang) if raw else ""
            why = _length_problem(proc)
            if why:
                out.append(("x", why))
                continue
            h, u = content_hashes(f"{lang}\x00{proc}")
            out.append(("m", lang, record_id(source, lang, proc), source, raw, proc, h, u))
        else:
            _, l1, l2, t1, t2, source = rec
            r1, r2 = pipe.raw(t1), pipe.raw(t2)
            p1 = pipe.process(r1, l1) if r1 else ""
            p2 = pipe.process(r2, l2) if r2 else ""
            why = _length_problem(p1) or _length_problem(p2)
            if why:
                out.append(("x", why))
                continue
            group = f"{l1}-{l2}"
            h, u = content_hashes(f"{group}\x00{p1}\x00{p2}")
            out.append(("p", group, record_id(source, group, f"{p1}\x00{p2}"), source, l1, l2, r1, r2, p1, p2, h, u))
    return out
