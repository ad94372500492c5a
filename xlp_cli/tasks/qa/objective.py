"""The QA training objective on the engine: start/end cross-entropy of a span head over input windows, epochs of
windows in a seeded order (`tasks.finetuning.Epochs`), and the selection F1 that picks the best checkpoint;
`predict` answers questions with a model (selection, test predictions).

A question's answer is the best span over all its windows (run_squad.py): each window's `n_best` starts (among
the subwords scored in that window) and `n_best` ends, end >= start, at most `max_answer_len` subwords, score =
start logit + end logit; no valid span in any window gives the empty answer.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from xlp_cli.tasks.finetuning import Epochs
from xlp_cli.tasks.qa import data as qd
from xlp_cli.tasks.qa.scores import qa_scores, squad_tokens
from xlp_cli.tasks.xnli.data import collate, eval_batches
from xlp_cli.train.runtime import Runtime

NEG = -1e4  # the logit of padding positions


def best_span(start: np.ndarray, end: np.ndarray, scored: np.ndarray, n_best: int, max_answer_len: int
              ) -> tuple[float, int, int] | None:
    """(score, s, e) of the best valid span of one window's context logits (None: no valid span)."""
    starts = np.flatnonzero(scored)
    if not len(starts):
        return None
    starts = starts[np.argsort(-start[starts], kind="stable")[:n_best]]
    ends = np.argsort(-end, kind="stable")[:n_best]
    score = start[starts][:, None] + end[ends][None, :]
    width = ends[None, :] - starts[:, None]
    score = np.where((width >= 0) & (width < max_answer_len), score, -np.inf)
    i, j = np.unravel_index(int(np.argmax(score)), score.shape)
    return None if score[i, j] == -np.inf else (float(score[i, j]), int(starts[i]), int(ends[j]))


@torch.no_grad()
def predict(model: torch.nn.Module, enc: qd.Encoded, lang: int, device: torch.device, bs: int, n_best: int,
            max_answer_len: int) -> list[str]:
    """The predicted answer text of every question of `enc`, in order ("" when no window has a valid span)."""
    model.eval()
    best: list[tuple[float, int, int, int] | None] = [None] * len(enc.questions)
    for rows, ids, mask in eval_batches(enc, bs):
        logits = model(ids.to(device), torch.full((len(rows),), lang, dtype=torch.long, device=device),
                       mask.to(device)).float().cpu().numpy()
        for k, r in enumerate(rows):
            cs, n = enc.ctx_start[r], len(enc.scored[r])
            found = best_span(logits[k, cs:cs + n, 0], logits[k, cs:cs + n, 1], enc.scored[r], n_best, max_answer_len)
            q = enc.question[r]
            if found and (best[q] is None or found[0] > best[q][0]):
                best[q] = (found[0], int(r), found[1] + cs, found[2] + cs)
    return ["" if b is None else qd.answer_text(enc, b[1], b[2], b[3]) for b in best]


class Span(Epochs):
    """Mean of the start and end cross-entropies over windows; the selection score is SQuAD F1 (%)."""

    metric, maximize = "score", True

    def __init__(self, train: qd.Encoded, select: qd.Encoded, lang_index: Any, batch_size: int, seed: int,
                 epoch_size: int, eval_batch_size: int, n_best: int, max_answer_len: int, rt: Runtime):
        self.train, self.select = train, select
        self.train_lang, self.select_lang = lang_index(train.lang), lang_index(select.lang)
        self.eval_batch_size, self.n_best, self.max_answer_len, self.rt = eval_batch_size, n_best, max_answer_len, rt
        super().__init__(len(train), batch_size, seed, epoch_size)

    def micro_batches(self, step: int, n: int) -> Iterator[tuple[torch.Tensor, ...]]:
        rows = self.rows(step)
        ids, mask = collate([self.train.ids[r] for r in rows])
        yield ids, mask, torch.tensor([self.train.target[r] for r in rows], dtype=torch.long)

    def loss(self, model: torch.nn.Module, b: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, dict[str, Any]]:
        counts = {"tokens": int((~b[1]).sum()) * self.rt.world, "answers": int((b[2][:, 0] > 0).sum())}  # (host)
        ids, mask, y = (t.to(self.rt.device) for t in b)
        langs = torch.full((ids.shape[0],), self.train_lang, dtype=torch.long, device=ids.device)
        logits = model(ids, langs, mask).float().masked_fill(mask[..., None], NEG)
        loss = (F.cross_entropy(logits[..., 0], y[:, 0]) + F.cross_entropy(logits[..., 1], y[:, 1])) / 2
        return loss, counts

    def evaluate(self, model: torch.nn.Module) -> dict[str, Any]:
        pred = predict(model, self.select, self.select_lang, self.rt.device, self.eval_batch_size, self.n_best,
                       self.max_answer_len)
        s = qa_scores(((q.answers, p) for q, p in zip(self.select.questions, pred)), squad_tokens)
        return {"score": s["f1"], "em": s["em"], "dev": {self.select.lang: s["f1"]}}

    def describe(self, m: dict[str, Any]) -> str:
        return f"selection F1 {m['score']:.1f} EM {m['em']:.1f}"
