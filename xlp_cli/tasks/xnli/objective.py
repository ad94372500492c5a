"""The XNLI training objective on the engine: cross-entropy of a sentence-pair classifier, epochs of
examples in a seeded order (`tasks.finetuning.Epochs`: each epoch's order is a permutation seeded by (seed, epoch)
alone, so a run resumes anywhere by its step count), and the selection accuracy (dev) that picks the best
checkpoint.

VECO plug-in (`--veco plug-in`): every example x carries its translation y (`Encoded.pair`); a batch is
(x ids, langs, mask, y ids, langs, mask, labels), the model (`heads.PlugInClassifier`) classifies x from
[h_x; s_x] and, in training, also y from [h_y; s_y] with the same label (VECO 3.1); predictions are for x.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from xlp_cli.tasks.finetuning import Epochs
from xlp_cli.tasks.xnli import data as xd
from xlp_cli.train.runtime import Runtime


class LangIds:
    """Language indices of a set of examples: the hypothesis (= example) language, the premise language and
    where the hypothesis starts, so mixed-language pairs get a [B, T] language tensor."""

    def __init__(self, encs: list[xd.Encoded], lang_index: Any):
        self.lang_index = lang_index
        self.hyp = np.concatenate([np.full(len(e), lang_index(e.lang), np.int64) for e in encs])
        self.prem = np.concatenate([np.asarray([lang_index(p or e.lang) for p in e.premise_langs], np.int64)
                                    if e.premise_langs else np.full(len(e), lang_index(e.lang), np.int64)
                                    for e in encs])
        self.start = np.concatenate([e.hyp_start if e.hyp_start is not None else np.zeros(len(e), np.int64) for e in encs])
        self.mixed = bool((self.hyp != self.prem).any())

    def batch(self, rows: np.ndarray, t: int) -> torch.Tensor:
        if not self.mixed:
            return torch.from_numpy(self.hyp[rows])
        return xd.lang_tensor(t, self.hyp[rows], self.prem[rows], self.start[rows])


@torch.no_grad()
def predict(model: torch.nn.Module, enc: xd.Encoded, langs: LangIds, device: torch.device, batch_size: int) -> np.ndarray:
    """Predicted label id per example (in the order of `enc`)."""
    model.eval()
    out = np.zeros(len(enc), dtype=np.int64)
    pair_langs = LangIds([enc.pair], langs.lang_index) if enc.pair is not None else None
    for rows, ids, mask in xd.eval_batches(enc, batch_size):
        inputs = [ids, langs.batch(rows, ids.shape[1]), mask]
        if enc.pair is not None and pair_langs is not None:
            inputs += pair_inputs(enc.pair, pair_langs, rows)
        logits = model(*(t.to(device) for t in inputs))
        out[rows] = logits.argmax(-1).cpu().numpy()
    return out


def pair_inputs(pair: xd.Encoded, langs: LangIds, rows: np.ndarray) -> list[torch.Tensor]:
    """VECO plug-in: the translations y of the examples `rows` (ids, languages, padding mask)."""
    ids, mask = xd.collate([pair.ids[r] for r in rows])
    return [ids, langs.batch(rows, ids.shape[1]), mask]


def accuracy(model: torch.nn.Module, enc: xd.Encoded, langs: LangIds, device: torch.device, batch_size: int) -> float:
    if len(enc) == 0:
        return math.nan
    pred = predict(model, enc, langs, device, batch_size)
    return float(100.0 * (pred == enc.labels).mean())


class Classify(Epochs):
    metric, maximize = "score", True

    def __init__(self, train: list[xd.Encoded], select: dict[str, xd.Encoded], lang_index: Any, batch_size: int,
                 seed: int, epoch_size: int, eval_batch_size: int, rt: Runtime):
        self.seqs = [x for enc in train for x in enc.ids]
        self.labels = np.concatenate([enc.labels for enc in train])
        self.langs = LangIds(train, lang_index)
        self.pairs = [e.pair for e in train if e.pair is not None]
        if self.pairs and len(self.pairs) != len(train):
            raise ValueError("either every training set has its paired translations or none has")
        if self.pairs:
            self.pair = xd.Encoded(ids=[x for enc in self.pairs for x in enc.ids], labels=self.labels,
                                   example_ids=[i for enc in self.pairs for i in enc.example_ids], lang="")
            self.pair_langs = LangIds(self.pairs, lang_index)
        self.select = select
        self.select_langs = {lang: LangIds([enc], lang_index) for lang, enc in select.items()}
        self.eval_batch_size, self.rt = eval_batch_size, rt
        super().__init__(len(self.seqs), batch_size, seed, epoch_size)

    def micro_batches(self, step: int, n: int) -> Iterator[tuple[torch.Tensor, ...]]:
        rows = self.rows(step)
        ids, mask = xd.collate([self.seqs[r] for r in rows])
        inputs = [ids, self.langs.batch(rows, ids.shape[1]), mask]
        if self.pairs:
            inputs += pair_inputs(self.pair, self.pair_langs, rows)
        yield *inputs, torch.from_numpy(self.labels[rows])

    def loss(self, model: torch.nn.Module, b: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, dict[str, Any]]:
        tokens = int((~b[2]).sum()) + (int((~b[5]).sum()) if self.pairs else 0)  # counted on the host
        *inputs, y = (t.to(self.rt.device) for t in b)
        if self.pairs:  # plug-in: the label of x from [h_x; s_x] and of its translation y from [h_y; s_y]
            logits, y = model(*inputs, both=True), torch.cat([y, y])
        else:
            logits = model(*inputs)
        return F.cross_entropy(logits, y), {"tokens": tokens * self.rt.world, "examples": len(y)}

    def evaluate(self, model: torch.nn.Module) -> dict[str, Any]:
        dev = {lang: accuracy(model, enc, self.select_langs[lang], self.rt.device, self.eval_batch_size)
               for lang, enc in self.select.items()}
        return {"score": float(np.nanmean(list(dev.values()))), "dev": dev}

    def describe(self, m: dict[str, Any]) -> str:
        return f"selection accuracy {m['score']:.1f}"
