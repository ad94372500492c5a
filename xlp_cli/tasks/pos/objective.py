"""The POS training objective on the engine: token-level cross-entropy of a token classifier over each word's
first subword, epochs of sentences in a seeded order (`tasks.finetuning.Epochs`), and the selection word accuracy
that picks the best checkpoint; `predict` tags sentences with a model (selection, test predictions).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import torch
import torch.nn.functional as F

from xlp_cli.tasks import conllu
from xlp_cli.tasks.finetuning import Epochs
from xlp_cli.tasks.pos import data as pd
from xlp_cli.tasks.pos.scores import token_accuracy
from xlp_cli.tasks.xnli.data import collate, eval_batches
from xlp_cli.train.runtime import Runtime


@torch.no_grad()
def predict(model: torch.nn.Module, enc: pd.Tagged, lang: int, device: torch.device, bs: int,
            labels: Sequence[str] = conllu.UPOS) -> list[list[str]]:
    """Predicted label per word (UPOS, or NER's BIO `labels`), in the order of `enc`; "" for words past max_len."""
    model.eval()
    out: list[list[str]] = [[] for _ in range(len(enc))]
    for rows, ids, mask in eval_batches(enc, bs):
        logits = model(ids.to(device), torch.full((len(rows),), lang, dtype=torch.long, device=device), mask.to(device))
        best = logits.argmax(-1).cpu().numpy()
        for k, r in enumerate(rows):
            tags = [labels[int(t)] for t in pd.gather(best[k], enc.first[r])]
            out[r] = tags + [""] * (len(enc.gold[r]) - len(tags))
    return out


class Tag(Epochs):
    """Token-level cross-entropy over each word's first subword; the selection score is word accuracy (%)."""

    metric, maximize = "score", True

    def __init__(self, train: pd.Tagged, select: pd.Tagged, lang_index: Any, batch_size: int, seed: int,
                 epoch_size: int, eval_batch_size: int, rt: Runtime):
        self.train, self.select = train, select
        self.train_lang, self.select_lang = lang_index(train.lang), lang_index(select.lang)
        self.labels = [train.labels(i) for i in range(len(train))]
        self.eval_batch_size, self.rt = eval_batch_size, rt
        super().__init__(len(train), batch_size, seed, epoch_size)

    def micro_batches(self, step: int, n: int) -> Iterator[tuple[torch.Tensor, ...]]:
        rows = self.rows(step)
        ids, mask = collate([self.train.ids[r] for r in rows])
        yield ids, mask, pd.pad_labels([self.labels[r] for r in rows], ids.shape[1])

    def loss(self, model: torch.nn.Module, b: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, dict[str, Any]]:
        counts = {"tokens": int((~b[1]).sum()) * self.rt.world, "words": int((b[2] != pd.IGNORE).sum())}  # (host)
        ids, mask, y = (t.to(self.rt.device) for t in b)
        langs = torch.full((ids.shape[0],), self.train_lang, dtype=torch.long, device=ids.device)
        logits = model(ids, langs, mask)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=pd.IGNORE)
        return loss, counts

    def evaluate(self, model: torch.nn.Module) -> dict[str, Any]:
        pred = predict(model, self.select, self.select_lang, self.rt.device, self.eval_batch_size)
        acc = token_accuracy(zip(self.select.gold, pred))[0]
        return {"score": acc, "dev": {self.select.lang: acc}}

    def describe(self, m: dict[str, Any]) -> str:
        return f"selection word accuracy {m['score']:.1f}"
