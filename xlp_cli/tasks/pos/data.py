"""UD sentences as tagging examples: words -> subwords with the run's own text pipeline, labels on the first
subword of each word (XTREME's convention), a Parquet cache, and the way back from subwords to words.

    ids   = </s> w1.1 w1.2 w2.1 ... </s>        (XLM's sentence input; positions 0..T-1)
    first = [1, 3, ...]                          the position of each word's first subword
    label = -100 everywhere except at `first`    (ignored by the loss), where it is the word's UPOS id

Each word is encoded on its own (normalize, tokenize, lowercase, BPE as in pre-training), so the word
boundaries are UD's. A word the pipeline turns into no subword at all gets one `<unk>`, so every word keeps a
position. Words past `max_len` subwords are not tagged (the prediction files say "" for them and they count
as errors). Words whose gold UPOS is `_` (not annotated) get no label and are not scored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, TypeVar

import numpy as np
import pyarrow as pa
import torch

from xlp_cli.artifacts.shards import read_shard, write_shard
from xlp_cli.artifacts.special_ids import EOS, UNK
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.conllu import UPOS, Sentence, read_conllu, upos_v2

T = TypeVar("T", bound="Tagged")

IGNORE = -100
TAG_IDS = {t: i for i, t in enumerate(UPOS)}


def label_of(tag: str, path: Path | str, sent: str) -> int:
    """The label id of a gold UPOS (UD v1's CONJ is CCONJ); `_` -> IGNORE; anything else is bad input."""
    tag = upos_v2(tag)
    if tag == "_":
        return IGNORE
    if tag not in TAG_IDS:
        raise BadInput(f"unknown UPOS tag {tag!r} in sentence {sent} (UD v2 has {' '.join(UPOS)})", path=path)
    return TAG_IDS[tag]


def read_sentences(paths: list[Path], limit: int = 0) -> list[tuple[Path, Sentence]]:
    out: list[tuple[Path, Sentence]] = []
    for p in paths:
        for s in read_conllu(p):
            if limit and len(out) >= limit:
                return out
            out.append((p, s))
    return out


def holdout(sents: list[tuple[Path, Sentence]], fraction: float = 0.1) -> tuple[list, list]:
    """Deterministic (train, held-out) split by a hash of the sentence id."""
    def key(item: tuple[Path, Sentence]) -> float:
        return int(hashlib.sha1(item[1].id.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF

    train = [s for s in sents if key(s) >= fraction]
    held = [s for s in sents if key(s) < fraction]
    return train, held


# ---------------------------------------------------------------- alignment
def align(word_ids: list[np.ndarray], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids with </s> markers, position of each kept word's first subword); words past max_len are dropped."""
    pieces, first, pos = [EOS], [], 1
    for w in word_ids:
        w = w if len(w) else np.asarray([UNK], np.int32)
        if pos + len(w) + 1 > max_len:
            break
        first.append(pos)
        pieces.extend(int(x) for x in w)
        pos += len(w)
    pieces.append(EOS)
    return np.asarray(pieces, np.int32), np.asarray(first, np.int32)


def spread(first: np.ndarray, word_labels: np.ndarray, length: int) -> np.ndarray:
    """Word labels -> a label per position (IGNORE except at each word's first subword)."""
    out = np.full(length, IGNORE, np.int64)
    out[first] = word_labels[: len(first)]
    return out


def gather(position_values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """A value per position (e.g. predicted tags) -> a value per kept word: the inverse of `spread`."""
    return np.asarray(position_values)[first]


# ---------------------------------------------------------------- encoding + cache
@dataclass
class Tagged:
    """One (split, language) of tagging examples."""

    ids: list[np.ndarray]        # per sentence: </s> subwords </s>
    first: list[np.ndarray]      # per sentence: first-subword position of each kept word
    gold: list[list[str]]        # per sentence: gold UPOS of every word ("_" = not annotated)
    sent_ids: list[str]
    lang: str

    def __len__(self) -> int:
        return len(self.ids)

    def labels(self, i: int) -> np.ndarray:
        word_labels = np.asarray([TAG_IDS.get(upos_v2(t), IGNORE) for t in self.gold[i]], np.int64)
        return spread(self.first[i], word_labels, len(self.ids[i]))


def encode(sents: list[tuple[Path, Sentence]], text_encoder, lang: str, max_len: int) -> Tagged:
    """Every distinct word form is encoded once with the run's pipeline for `lang`."""
    for path, s in sents:
        for w in s.words:
            label_of(w.upos, path, s.id)
    forms = sorted({w.form for _, s in sents for w in s.words})
    many = text_encoder.encode_batch(forms, lang) if forms else []
    by_form = {f: np.asarray(x, np.int32) for f, x in zip(forms, many)}
    ids, first = [], []
    for _, s in sents:
        x, f = align([by_form[w.form] for w in s.words], max_len)
        ids.append(x)
        first.append(f)
    return Tagged(ids=ids, first=first, gold=[[upos_v2(w.upos) for w in s.words] for _, s in sents],
                  sent_ids=[s.id for _, s in sents], lang=lang)


def cached_encode(cache: Path, sents: list[tuple[Path, Sentence]], text_encoder, lang: str, max_len: int) -> Tagged:
    """Encode once; other seeds and reruns read the Parquet cache (keyed by the sentences and max_len)."""
    key = (s.id + "\t" + " ".join(f"{w.form}/{w.upos}" for w in s.words) for _, s in sents)
    return cached_tagged(cache, key, max_len, lang, lambda: encode(sents, text_encoder, lang, max_len), Tagged)


def cached_tagged(cache: Path, key_lines: Iterable[str], max_len: int, lang: str, build: Callable[[], T],
                  cls: type[T]) -> T:
    """The tagging examples of one (split, language) from their Parquet cache beside `cache` (named by a hash of
    max_len and one key line per sentence), else `build()` written there first (POS and NER share it)."""
    h = hashlib.sha256(f"{max_len}\n".encode("utf-8"))
    for line in key_lines:
        h.update((line + "\n").encode("utf-8"))
    path = cache.with_name(f"{cache.name}.{h.hexdigest()[:12]}.parquet")
    if path.is_file():
        t = read_shard(path)
        return cls(ids=[np.asarray(x, np.int32) for x in t.column("ids").to_pylist()],
                   first=[np.asarray(x, np.int32) for x in t.column("first").to_pylist()],
                   gold=t.column("gold").to_pylist(), sent_ids=t.column("id").to_pylist(), lang=lang)
    enc = build()
    write_shard(path, pa.table({
        "id": pa.array(enc.sent_ids, pa.string()),
        "ids": pa.array([x.tolist() for x in enc.ids], pa.list_(pa.int32())),
        "first": pa.array([x.tolist() for x in enc.first], pa.list_(pa.int32())),
        "gold": pa.array(enc.gold, pa.list_(pa.string())),
    }))
    return enc


def pad_labels(labels: list[np.ndarray], t: int) -> torch.Tensor:
    out = torch.full((len(labels), t), IGNORE, dtype=torch.long)
    for i, y in enumerate(labels):
        out[i, : len(y)] = torch.from_numpy(y)
    return out
