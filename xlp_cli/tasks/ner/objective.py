"""The NER training objective: POS's (`pos.objective.Tag`: token-level cross-entropy over each word's first
subword, epochs in a seeded order) with BIO labels, selected by entity F1; `predict` tags sentences."""

from __future__ import annotations

from typing import Any

import torch

from xlp_cli.tasks.ner import data as nd
from xlp_cli.tasks.ner.scores import entity_f1
from xlp_cli.tasks.pos import data as pd
from xlp_cli.tasks.pos.objective import Tag
from xlp_cli.tasks.xnli.data import eval_batches


@torch.no_grad()
def predict(model: torch.nn.Module, enc: nd.NerTagged, lang: int, device: torch.device, bs: int) -> list[list[str]]:
    """Predicted BIO tag per word (in the order of `enc`); "" for words past max_len."""
    model.eval()
    out: list[list[str]] = [[] for _ in range(len(enc))]
    for rows, ids, mask in eval_batches(enc, bs):
        logits = model(ids.to(device), torch.full((len(rows),), lang, dtype=torch.long, device=device), mask.to(device))
        best = logits.argmax(-1).cpu().numpy()
        for k, r in enumerate(rows):
            tags = [nd.TAGS[int(t)] for t in pd.gather(best[k], enc.first[r])]
            out[r] = tags + [""] * (len(enc.gold[r]) - len(tags))
    return out


class TagEntities(Tag):
    """POS's objective on BIO labels; the selection score is entity F1 (%) on the selection set."""

    def evaluate(self, model: torch.nn.Module) -> dict[str, Any]:
        pred = predict(model, self.select, self.select_lang, self.rt.device, self.eval_batch_size)
        f1 = entity_f1(zip(self.select.gold, pred))[0]
        return {"score": f1, "dev": {self.select.lang: f1}}

    def describe(self, m: dict[str, Any]) -> str:
        return f"selection entity F1 {m['score']:.1f}"
