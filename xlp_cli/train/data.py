"""Batches for pre-training: the training streams of a run (`streams.py`, read from the id shards of `xlp bpe
apply`, never loading the corpus) and the per-step choice of stream and language.

The objective's registry line (`objectives.PRETRAIN_OBJECTIVES`) says what to read: "mono" in `needs`, one
monolingual stream per language (MLM); "pairs", one pair stream per language pair found (TLM); `adjacent`, pairs
of neighbouring sentences of each language's monolingual shards instead (VECO on monolingual text: sentences 2k
and 2k+1 of a row group, in the pair layout, `adjacent.py`); `alternates`, monolingual windows on even steps and
pairs on odd steps (MLM and TLM).

Language sampling: p_l ~ n_l^alpha (n_l: sentences or pairs in the train split), drawn per step from an RNG
seeded by (seed, step), so every process of a DDP run draws the same language and the order never depends
on the history. The position of every stream is a small JSON-able dict: `state()` / `load_state()` restore it
exactly.

Masking is in `masking.py`; the objectives that use these streams are in `objectives/`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.shards import shard_paths
from xlp_cli.core.errors import BadInput
from xlp_cli.train.adjacent import AdjacentStream
from xlp_cli.train.objectives import PRETRAIN_OBJECTIVES
from xlp_cli.train.shards import Batch
from xlp_cli.train.streams import MonoStream, PairStream, sampling_probs, step_rng


class PretrainData:
    """All training streams of a run plus the per-step choice of streams (`reads`) and language.

    Data slots (multi-process and multi-node runs): the global batch of a step is read as `slots` parts; slot k
    reads only its share of every language's row groups (`partition`), and a process builds the batches of its
    own slots only (`local_slots`), never the whole global batch. The language of a micro-batch is drawn once
    for all slots, so a 1-process run with the same `slots` sees exactly the batches of an N-process run."""

    def __init__(self, ids_dir: Path, langs: list[str], objective: str, bptt: int, seed: int, vocab_size: int,
                 lang_alpha: float, slots: int = 1, local_slots: list[int] | None = None):
        self.langs, self.objective, self.bptt, self.seed = langs, objective, bptt, seed
        self.lang_alpha, self.slots = lang_alpha, slots
        self.local = list(range(slots)) if local_slots is None else list(local_slots)
        self.mono: dict[str, MonoStream] = {}
        self.pairs: dict[str, PairStream] = {}
        index = {l: i for i, l in enumerate(langs)}
        self.spec = spec = PRETRAIN_OBJECTIVES[objective]  # what it reads: the registry line, never the name
        if "mono" in spec.needs:
            for lang in langs:
                folder = layout.read_dir(ids_dir, "train", lang)
                paths = shard_paths(folder)
                if not paths:
                    raise BadInput(f"language '{lang}' has no train data (no shards in {folder})", path=folder)
                for k in self.local:
                    if spec.adjacent:
                        self.pairs[self._key(lang, k)] = AdjacentStream(paths, lang, index[lang], bptt, seed,
                                                                        vocab_size, index[lang], part=(k, slots))
                    else:
                        self.mono[self._key(lang, k)] = MonoStream(paths, lang, index[lang], bptt, seed, vocab_size,
                                                                   part=(k, slots))
        if "pairs" in spec.needs:
            train = ids_dir / "train"
            found = [g for g in layout.groups(ids_dir, "train") if "-" in g]
            for i, pair in enumerate(found):
                l1, _, l2 = pair.partition("-")
                if l1 in index and l2 in index:
                    for k in self.local:
                        self.pairs[self._key(pair, k)] = PairStream(
                            shard_paths(layout.read_dir(ids_dir, "train", pair)), pair, (index[l1], index[l2]), bptt,
                            seed, vocab_size, i, part=(k, slots))
            if not self.pairs:
                raise BadInput(f"--objective {objective} needs parallel data between the languages "
                               f"{','.join(langs)} (folders train/<l1>-<l2>); none found", path=train)
        self.mono_names = list(dict.fromkeys(s.lang for s in self.mono.values()))
        self.pair_names = list(dict.fromkeys(s.pair for s in self.pairs.values()))
        first = self.local[0] if self.local else 0
        self.mono_probs = (sampling_probs([self.mono[self._key(n, first)].n_rows for n in self.mono_names], lang_alpha)
                           if self.mono else None)
        self.pair_probs = (sampling_probs([self.pairs[self._key(n, first)].n_rows for n in self.pair_names], lang_alpha)
                           if self.pairs else None)

    def _key(self, name: str, slot: int) -> str:
        return name if self.slots == 1 else f"{name}/{slot}"

    def reads(self, step: int) -> str:
        """The streams of update `step`: "mono" (windows of a language) or "pairs" (the pair layout)."""
        return self.spec.reads(step)

    def next_batches(self, step: int, micro: int, batch_size: int) -> list[tuple[int, Batch]]:
        """(slot, batch) of each local slot for micro-batch `micro` of optimizer step `step` (0-based)."""
        rng = step_rng(self.seed, step, micro, 0)
        if self.reads(step) == "mono":
            name = self.mono_names[int(rng.choice(len(self.mono_names), p=self.mono_probs))]
            return [(k, self.mono[self._key(name, k)].next_batch(batch_size)) for k in self.local]
        name = self.pair_names[int(rng.choice(len(self.pair_names), p=self.pair_probs))]
        return [(k, self.pairs[self._key(name, k)].next_batch(batch_size)) for k in self.local]

    def next_batch(self, step: int, micro: int, batch_size: int) -> Batch:
        """The micro-batch of a run without slots."""
        return self.next_batches(step, micro, batch_size)[0][1]

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mono": {k: s.state() for k, s in self.mono.items()},
                               "pairs": {k: s.state() for k, s in self.pairs.items()}}
        if self.slots > 1:
            out["slots"] = self.slots
        return out

    def load_state(self, state: dict[str, Any]) -> None:
        for k, s in self.mono.items():
            if k in state.get("mono", {}):
                s.load_state(state["mono"][k])
        for k, s in self.pairs.items():
            if k in state.get("pairs", {}):
                s.load_state(state["pairs"][k])


def valid_batches(ids_dir: Path, lang: str, lang_index: int, bptt: int, batch_size: int, n_batches: int,
                  vocab_size: int, split: str = "valid") -> list[Batch]:
    """The first windows of a language's valid split, in corpus order (the same every evaluation)."""
    paths = shard_paths(layout.read_dir(ids_dir, split, lang))
    if not paths:
        return []
    try:
        stream = MonoStream(paths, lang, lang_index, bptt, 0, vocab_size, shuffle=False)
    except BadInput:
        return []
    out = []
    for _ in range(n_batches):
        w = stream.next_windows(batch_size, max_epochs=1)
        if len(w) == 0:
            break
        t = torch.from_numpy(w)
        out.append(Batch(t, torch.full_like(t, lang_index), None, None, lang))
    return out
