"""Per-language token counts and the VLE monolinguality score (Ai & Fang, VLE, section 3.2, Eq. 4).

    m_l(x) = C_l(x) / C_{!=l}(x)

C_l(x) counts token x in language l's corpus, C_{!=l}(x) in all the other languages' corpora together.
When C_{!=l}(x) = 0 the ratio is undefined; we set m = +inf and rank such *exclusive* tokens above every
shared token, ordered among themselves by C_l(x) (more frequent first). Shared tokens are ordered by m, then
by C_l(x); remaining ties by id (smaller first), so the ranking is a total order.
Candidates of l are the non-special tokens with C_l(x) >= min_count (and, optionally, not only
digits/punctuation/symbols). Counting is numpy.bincount over the flat id arrays: memory O(vocab x languages).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow.parquet as pq

from xlp_cli.bpe.dictionary import N_SPECIALS
from xlp_cli.core.errors import BadInput


def count_shards(shards: Iterable[tuple[Path, str]], vocab_size: int) -> np.ndarray:
    """Token counts (int64, length vocab_size) over the `ids` list column(s) of the given shards."""
    total = np.zeros(vocab_size, dtype=np.int64)
    for path, column in shards:
        try:
            pf = pq.ParquetFile(path)
            if column not in pf.schema_arrow.names:
                raise BadInput(f"shard has no '{column}' column: not `xlp bpe apply` output", path=path)
            for rg in range(pf.num_row_groups):
                col = pf.read_row_group(rg, columns=[column]).column(0)
                for chunk in col.chunks:
                    flat = chunk.flatten().to_numpy(zero_copy_only=False)
                    if flat.size == 0:
                        continue
                    hi = int(flat.max())
                    if hi >= vocab_size or int(flat.min()) < 0:
                        raise BadInput(f"token id {hi} is outside the dictionary ({vocab_size} ids): shards of another tokenizer",
                                       path=path)
                    total += np.bincount(flat, minlength=vocab_size)
        except BadInput:
            raise
        except Exception as e:  # pyarrow raises several kinds on a corrupt file
            raise BadInput(f"not a readable id shard ({e})", path=path) from None
    return total


def is_nonword(token: str) -> bool:
    """True for tokens made only of digits, punctuation and symbols (after removing BPE/SentencePiece marks)."""
    t = token.removesuffix("@@").replace("\u2581", "")
    return bool(t) and all(unicodedata.category(ch)[0] in "NPSZ" for ch in t) or not t


@dataclass
class Ranking:
    lang: str
    ids: np.ndarray          # candidate ids, best first
    count_l: np.ndarray
    count_other: np.ndarray
    m: np.ndarray            # float64, +inf for exclusive tokens


def rank(counts: np.ndarray, langs: list[str], *, min_count: int = 1, exclude: np.ndarray | None = None) -> dict[str, Ranking]:
    """Rank each language's candidate tokens by m(x) (see module doc). `counts` is [languages, vocab]."""
    counts = np.asarray(counts, dtype=np.int64)
    total = counts.sum(axis=0)
    ok = np.ones(counts.shape[1], dtype=bool)
    ok[: min(N_SPECIALS, counts.shape[1])] = False
    if exclude is not None:
        ok &= ~exclude
    out: dict[str, Ranking] = {}
    for li, lang in enumerate(langs):
        c_l = counts[li]
        c_o = total - c_l
        ids = np.flatnonzero(ok & (c_l >= max(1, min_count)))
        cl, co = c_l[ids], c_o[ids]
        with np.errstate(divide="ignore"):
            m = np.where(co > 0, cl / np.maximum(co, 1), np.inf)
        exclusive = co == 0
        # lexsort: last key is primary. exclusive first; then m desc (exclusive all inf); then count desc; then id asc
        order = np.lexsort((ids, -cl, -np.where(exclusive, 0.0, m), ~exclusive))
        out[lang] = Ranking(lang, ids[order], cl[order], co[order], m[order])
    return out
