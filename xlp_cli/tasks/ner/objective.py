"""The NER training objective: POS's (`pos.objective.Tag`: token-level cross-entropy over each word's first
subword, epochs in a seeded order) with BIO labels, selected by entity F1; `predict` tags sentences."""

from __future__ import annotations

from typing import Any

import torch

from xlp_cli.tasks.ner import data as nd
from xlp_cli.tasks.ner.scores import entity_f1
from xlp_cli.tasks.pos.objective import Tag, predict as tag_words


def predict(model: torch.nn.Module, enc: nd.NerTagged, lang: int, device: torch.device, bs: int) -> list[list[str]]:
    """Predicted BIO tag per word (in the order of `enc`); "" for words past max_len (POS's tagger, NER's labels)."""
    return tag_words(model, enc, lang, device, bs, nd.TAGS)


class TagEntities(Tag):
    """POS's objective on BIO labels; the selection score is entity F1 (%) on the selection set."""

    def evaluate(self, model: torch.nn.Module) -> dict[str, Any]:
        pred = predict(model, self.select, self.select_lang, self.rt.device, self.eval_batch_size)
        f1 = entity_f1(zip(self.select.gold, pred))[0]
        return {"score": f1, "dev": {self.select.lang: f1}}

    def describe(self, m: dict[str, Any]) -> str:
        return f"selection entity F1 {m['score']:.1f}"
