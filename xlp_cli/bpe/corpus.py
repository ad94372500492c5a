"""Reading a prepared folder for BPE: which language folders exist, and XLM's smoothed language sampling.

Sampling (XLM, Lample & Conneau 2019, section 3.1): with n_l the sentences of language l in the split,
q_l = n_l^alpha / sum_k n_k^alpha. The learning corpus holds N sentences (`--sample-sentences`, default the
split's total), t_l = round(N * q_l) from language l: every sentence floor(t_l / n_l) times, plus
t_l mod n_l sentences drawn without replacement (seeded), kept in shard order. Languages are visited in
sorted order, so the same prepared folder and flags give the same corpus, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow.parquet as pq

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.shards import iter_batches, shard_paths
from xlp_cli.core.errors import BadInput


@dataclass
class Folder:
    split: str
    name: str                 # "en" or "de-en"
    path: Path
    pair: bool
    shards: list[Path]

    @property
    def langs(self) -> list[str]:
        return self.name.split("-", 1) if self.pair else [self.name]


def _is_pair(shards: list[Path], name: str) -> bool:
    try:
        names = set(pq.read_schema(shards[0]).names)
    except Exception as e:  # pyarrow raises several kinds
        raise BadInput(f"not a readable Parquet shard ({e})", path=shards[0]) from None
    if "ids" in names or "ids1" in names:
        raise BadInput("these are token-id shards (`xlp bpe apply` output), not text shards of `xlp prepare`", path=shards[0])
    if {"text1", "text2"} <= names:
        return True
    if "text" in names:
        return False
    raise BadInput(f"shard has neither a 'text' nor 'text1/text2' column (columns: {', '.join(sorted(names))})", path=shards[0])


def list_folders(root: Path, splits: list[str] | None = None) -> list[Folder]:
    """Every (split, language or pair) folder with shards under a prepare (or ids) output (layout.read_dir), in
    split then name order."""
    out: list[Folder] = []
    for split in layout.splits(root):
        if splits and split not in splits:
            continue
        for name in layout.groups(root, split):
            d = layout.read_dir(root, split, name)
            shards = shard_paths(d)
            if shards:
                out.append(Folder(split, name, d, _is_pair(shards, name), shards))
    return out


def rows(shards: list[Path]) -> int:
    n = 0
    for s in shards:
        try:
            n += pq.ParquetFile(s).metadata.num_rows
        except Exception as e:
            raise BadInput(f"not a readable Parquet shard ({e})", path=s) from None
    return n


def language_sources(root: Path, split: str, langs: list[str], parallel: bool, column: str) -> dict[str, list[tuple[Path, str]]]:
    """lang -> [(shard, column)] for the split: monolingual folders, plus pair sides with `parallel`."""
    src: dict[str, list[tuple[Path, str]]] = {}
    for f in list_folders(root, [split]):
        if not f.pair:
            if not langs or f.name in langs:
                src.setdefault(f.name, []).extend((s, column) for s in f.shards)
        elif parallel:
            for side, lang in zip(("1", "2"), f.langs):
                if not langs or lang in langs:
                    src.setdefault(lang, []).extend((s, column + side) for s in f.shards)
    missing = [l for l in langs if l not in src]
    if missing:
        raise BadInput(f"no {split} data for language(s) {', '.join(missing)}", path=Path(root) / split)
    if not src:
        raise BadInput(f"no {split} shards found", path=Path(root) / split)
    return src


def merged_sources(roots: list[Path], split: str, langs: list[str], parallel: bool, column: str) -> dict[str, list[tuple[Path, str]]]:
    """`language_sources` over several prepared folders: a language's shards from all of them, in --data order."""
    if len(roots) == 1:
        return language_sources(roots[0], split, langs, parallel, column)
    src: dict[str, list[tuple[Path, str]]] = {}
    for root in roots:
        for lang, shards in language_sources(root, split, [], parallel, column).items():
            if not langs or lang in langs:
                src.setdefault(lang, []).extend(shards)
    missing = [l for l in langs if l not in src]
    if missing:
        raise BadInput(f"no {split} data for language(s) {', '.join(missing)} in any --data folder", path=Path(roots[0]) / split)
    return src


def sampling_plan(n: dict[str, int], alpha: float, total: int) -> dict[str, dict[str, float | int]]:
    """q_l and target sentences t_l per language (see module doc)."""
    langs = sorted(n)
    weights = np.array([float(n[l]) ** alpha if n[l] > 0 else 0.0 for l in langs])
    q = weights / weights.sum()
    total = total or int(sum(n.values()))
    return {l: {"sentences": int(n[l]), "p": n[l] / sum(n.values()), "q": float(q[i]), "sampled": int(round(total * q[i]))}
            for i, l in enumerate(langs)}


def sampled_lines(sources: dict[str, list[tuple[Path, str]]], plan: dict[str, dict], seed: int,
                  batch_rows: int = 65536) -> Iterator[tuple[str, list[str]]]:
    """Yield (lang, lines) batches of the learning corpus, in a deterministic order."""
    for li, lang in enumerate(sorted(sources)):
        n, t = int(plan[lang]["sentences"]), int(plan[lang]["sampled"])
        if n == 0 or t == 0:
            continue
        reps, rem = divmod(t, n)
        rng = np.random.default_rng([seed, li])
        extra = np.sort(rng.choice(n, size=rem, replace=False)) if rem else np.empty(0, dtype=np.int64)
        for rep in range(reps + (1 if rem else 0)):
            offset = 0
            for shard, column in sources[lang]:
                for batch in iter_batches([shard], columns=[column], batch_size=batch_rows):
                    col = batch.column(0).to_pylist()
                    if rep < reps:
                        lines = col
                    else:
                        lo, hi = np.searchsorted(extra, [offset, offset + len(col)])
                        lines = [col[i - offset] for i in extra[lo:hi]]
                    offset += len(col)
                    lines = [x for x in lines if x]
                    if lines:
                        yield lang, lines
