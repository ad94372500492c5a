"""XNLI / MNLI examples: reading TSVs, encoding them exactly as the pre-training run, caching, batching.

TSV format (tab-separated, header row, no quoting: XNLI text contains quotes):
    XNLI:  language  gold_label  sentence1  sentence2  genre ...
    MNLI:  sentence1  sentence2  label  genre            (no language column: the file's language is given)
Accepted column names: premise = sentence1 | premise, hypothesis = sentence2 | hypothesis,
label = gold_label | label, language = language | lang (optional), premise_language (optional: the premise is
in another language than the hypothesis, as in the catalog-derived task of `xlp run`; default: the same),
index | pairID (optional: the example's key, equal across the languages of XNLI's 15-way parallel files; default:
the row's position among its language's rows, so line-aligned translated files pair up). VECO's plug-in
fine-tuning pairs each example with the example of the same key in another language (`pair_examples`).
Labels: contradiction (alias contradictory, as in the XNLI-MT files), neutral, entailment; rows whose label
is "-" (no annotator consensus in MultiNLI) are skipped and counted. Anything else is an error.

Input ids follow XLM's XNLI classifier (src/evaluation/xnli.py + concat_batches without position reset):
    </s> premise </s> hypothesis </s>
positions 0..T-1 continuously, and every token carries its segment's language (the example's language, or
for `</s> premise </s>` the premise language when one is given). Each sentence is cut to
`max_len` tokens including its </s> markers, as XLM's `truncate` does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import torch

from xlp_cli.artifacts.shards import read_shard, write_shard
from xlp_cli.artifacts.special_ids import EOS as EOS_INDEX, PAD as PAD_INDEX
from xlp_cli.core import textfile
from xlp_cli.core.errors import BadInput

LABELS = ["contradiction", "neutral", "entailment"]  # XLM's label ids
LABEL_IDS = {"contradiction": 0, "contradictory": 0, "neutral": 1, "entailment": 2}
SKIP_LABELS = {"-"}

_COLS = {
    "premise": ("sentence1", "premise"),
    "hypothesis": ("sentence2", "hypothesis"),
    "label": ("gold_label", "label"),
    "lang": ("language", "lang"),
    "premise_lang": ("premise_language", "premise_lang"),
    "key": ("index", "pairid"),
}


@dataclass
class Example:
    id: str
    lang: str
    premise: str
    hypothesis: str
    label: int
    premise_lang: str = ""  # "" = the example's language
    key: str = ""           # the same example in another language has the same key (index column or row position)


def read_tsv(path: Path, *, default_lang: str | None = None, langs: set[str] | None = None,
             max_rows_per_lang: int = 0) -> tuple[dict[str, list[Example]], int]:
    """Examples per language from one TSV, and the number of rows skipped for a '-' label."""
    path = Path(path)
    if not path.is_file():
        raise BadInput("no such TSV file", path=path)
    out: dict[str, list[Example]] = {}
    skipped = 0
    lines = textfile.text_lines(path)  # a binary or non-UTF-8 file is a one-line error with its line number
    header_line = next(lines, (1, ""))[1]
    header = [h.strip().lower() for h in header_line.split("\t")]
    idx: dict[str, int] = {}
    for key, names in _COLS.items():
        for n in names:
            if n in header:
                idx[key] = header.index(n)
                break
    missing = [f"{_COLS[k][0]} (or {_COLS[k][1]})" for k in ("premise", "hypothesis", "label") if k not in idx]
    if "lang" not in idx and default_lang is None:
        missing.append("language")
    if missing:
        raise BadInput(f"missing column(s) {', '.join(missing)}; header is: {' '.join(header) or '(empty)'}",
                       path=path, position=1)
    width = max(idx.values()) + 1
    for n, line in lines:
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) < width:
            raise BadInput(f"row has {len(cells)} columns, the header needs at least {width}", path=path, position=n)
        label = cells[idx["label"]].strip()
        if label in SKIP_LABELS:
            skipped += 1
            continue
        if label.lower() not in LABEL_IDS:
            raise BadInput(f"unknown label {label!r} (expected {', '.join(LABELS)})", path=path, position=n)
        lang = cells[idx["lang"]].strip() if "lang" in idx else str(default_lang)
        if langs is not None and lang not in langs:
            continue
        rows = out.setdefault(lang, [])
        if max_rows_per_lang and len(rows) >= max_rows_per_lang:
            continue
        premise, hypothesis = cells[idx["premise"]], cells[idx["hypothesis"]]
        if not premise.strip() or not hypothesis.strip():
            raise BadInput("empty premise or hypothesis", path=path, position=n)
        plang = cells[idx["premise_lang"]].strip() if "premise_lang" in idx else ""
        key = cells[idx["key"]].strip() if "key" in idx else str(len(rows))
        rows.append(Example(id=f"{path.name}:{n}", lang=lang, premise=premise, hypothesis=hypothesis,
                            label=LABEL_IDS[label.lower()], premise_lang="" if plang == lang else plang, key=key))
    return out, skipped


def pair_examples(rows: list[Example], others: list[Example], where: Path) -> list[Example]:
    """For each row, the example of `others` with the same key (its translation), in the order of `rows`."""
    by_key = {e.key: e for e in others}
    out = []
    for e in rows:
        if e.key not in by_key:
            lang = others[0].lang if others else "the other language"
            raise BadInput(f"example {e.id} (key {e.key!r}) has no {lang} counterpart to pair with", path=where)
        out.append(by_key[e.key])
    return out


def holdout_split(examples: list[Example], fraction: float = 0.1) -> tuple[list[Example], list[Example]]:
    """Deterministic (train, held-out) split by a hash of the premise, so both hypotheses of a premise stay together."""
    def key(ex: Example) -> float:
        return int(hashlib.sha1(ex.premise.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF

    train, held = [], []
    for ex in examples:
        (held if key(ex) < fraction else train).append(ex)
    if not held and len({ex.premise for ex in train}) > 1:  # small sets: hold out the premise with the lowest hash
        low = min(train, key=key).premise
        held = [ex for ex in train if ex.premise == low]
        train = [ex for ex in train if ex.premise != low]
    return train, held


# ---------------------------------------------------------------- encoding + cache
@dataclass
class Encoded:
    """Token ids of one (split, language): the concatenated XLM input per example, and its label."""

    ids: list[np.ndarray]
    labels: np.ndarray
    example_ids: list[str]
    lang: str
    premise_langs: list[str] | None = None  # per example ("" = lang); None when every premise is in `lang`
    hyp_start: np.ndarray | None = None     # per example: index of the hypothesis segment (after "</s> p </s>")
    pair: "Encoded | None" = None           # VECO plug-in: the same examples in another language (not cached)

    def __len__(self) -> int:
        return len(self.ids)


def build_input(premise_ids: list[int], hypothesis_ids: list[int], max_len: int) -> np.ndarray:
    """</s> p </s> h </s>, each sentence (with its markers) cut to max_len like XLM's truncate."""
    p = list(premise_ids)[: max_len - 2]
    h = list(hypothesis_ids)[: max_len - 2]
    return np.asarray([EOS_INDEX] + p + [EOS_INDEX] + h + [EOS_INDEX], dtype=np.int32)


def encode_texts(text_encoder, texts: list[str], lang: str) -> list[list[int]]:
    """Raw sentences -> ids through the run's own normalization, tokenization, lowercasing and BPE."""
    many = getattr(text_encoder, "encode_batch", None)
    if many is not None:
        return [list(x) for x in many(texts, lang)]
    return [list(text_encoder.encode(t, lang)) for t in texts]


def encode_examples(examples: list[Example], text_encoder, lang: str, max_len: int, max_total: int) -> Encoded:
    """Encode with the pre-training run's text pipeline for `lang`; the total is cut to the model's positions."""
    premises: list[list[int]] = [[] for _ in examples]
    by_lang: dict[str, list[int]] = {}
    for i, e in enumerate(examples):  # each premise with its own language's pipeline
        by_lang.setdefault(e.premise_lang or lang, []).append(i)
    for plang, rows in by_lang.items():
        for i, ids_p in zip(rows, encode_texts(text_encoder, [examples[i].premise for i in rows], plang)):
            premises[i] = ids_p
    hypotheses = encode_texts(text_encoder, [e.hypothesis for e in examples], lang)
    ids, starts = [], []
    for p, h in zip(premises, hypotheses):
        p = list(p)[: max_len - 2]
        x = build_input(p, h, max_len)
        if len(x) > max_total:  # the model has fewer positions than 2*max_len: cut the premise first
            over = len(x) - max_total
            p = p[: max(1, len(p) - over)]
            x = build_input(p, h, max_len)[:max_total]
            x[-1] = EOS_INDEX
        ids.append(x)
        starts.append(len(p) + 2)
    mixed = any(e.premise_lang for e in examples)
    return Encoded(ids=ids, labels=np.asarray([e.label for e in examples], dtype=np.int64),
                   example_ids=[e.id for e in examples], lang=lang,
                   premise_langs=[e.premise_lang for e in examples] if mixed else None,
                   hyp_start=np.asarray(starts, dtype=np.int64))


def save_encoded(path: Path, enc: Encoded) -> None:
    table = pa.table({
        "id": pa.array(enc.example_ids, pa.string()),
        "lang": pa.array([enc.lang] * len(enc), pa.string()),
        "premise_lang": pa.array(enc.premise_langs or [""] * len(enc), pa.string()),
        "hyp_start": pa.array(enc.hyp_start if enc.hyp_start is not None else np.zeros(len(enc), np.int64), pa.int32()),
        "label": pa.array(enc.labels, pa.int8()),
        "ids": pa.array([x.tolist() for x in enc.ids], pa.list_(pa.int32())),
    })
    write_shard(path, table)


def load_encoded(path: Path) -> Encoded:
    t = read_shard(path)
    langs = t.column("lang").to_pylist()
    plangs = t.column("premise_lang").to_pylist()
    return Encoded(ids=[np.asarray(x, dtype=np.int32) for x in t.column("ids").to_pylist()],
                   labels=np.asarray(t.column("label").to_pylist(), dtype=np.int64),
                   example_ids=t.column("id").to_pylist(), lang=langs[0] if langs else "",
                   premise_langs=plangs if any(plangs) else None,
                   hyp_start=np.asarray(t.column("hyp_start").to_pylist(), dtype=np.int64))


def cached_encode(cache: Path, examples: list[Example], text_encoder, lang: str, max_len: int, max_total: int) -> Encoded:
    """Encode once; later runs (other seeds, resume) read the Parquet cache. The cache key includes the rows."""
    h = hashlib.sha256()
    for e in examples:
        h.update(f"{e.id}\t{e.premise_lang}\t{e.premise}\t{e.hypothesis}\t{e.label}\n".encode("utf-8"))
    path = cache.with_name(f"{cache.name}.{h.hexdigest()[:12]}.parquet")
    if path.is_file():
        return load_encoded(path)
    enc = encode_examples(examples, text_encoder, lang, max_len, max_total)
    save_encoded(path, enc)
    return enc


# ---------------------------------------------------------------- batches
def collate(seqs: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad to the longest: (ids [B, T] long, pad_mask [B, T] True at padding)."""
    t = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), t), PAD_INDEX, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.from_numpy(s.astype(np.int64))
    return ids, ids.eq(PAD_INDEX)


def lang_tensor(t: int, hyp_lang: np.ndarray, premise_lang: np.ndarray, hyp_start: np.ndarray) -> torch.Tensor:
    """[B, T] language index per position: the premise segment (positions < hyp_start) gets `premise_lang`."""
    pos = np.arange(t)[None, :]
    out = np.where(pos < hyp_start[:, None], premise_lang[:, None], hyp_lang[:, None])
    return torch.from_numpy(out.astype(np.int64))


def eval_batches(enc: Encoded, batch_size: int) -> Iterator[tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
    """Batches in length order (less padding); yields (row indices, ids, pad_mask)."""
    order = np.argsort([len(x) for x in enc.ids], kind="stable")
    for i in range(0, len(order), batch_size):
        rows = order[i: i + batch_size]
        ids, mask = collate([enc.ids[r] for r in rows])
        yield rows, ids, mask
