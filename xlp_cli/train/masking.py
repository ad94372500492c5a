"""XLM's token masking for MLM/TLM: `word_pred` (15%) of the non-padding tokens, chosen uniformly or, with
`sample_alpha` > 0, with weights count(x)^-alpha (specials never chosen); of those 80% -> <special1> (MASK),
10% kept, 10% a random word id (>= 14, never a special). All on CPU, from an explicit generator.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from xlp_cli.artifacts.special_ids import MASK as MASK_INDEX, N_SPECIAL


def mask_scores(counts: np.ndarray, sample_alpha: float) -> torch.Tensor | None:
    """XLM's frequency-smoothed masking weights: max(count, 1)^-alpha, 0 for specials/unseen; None if alpha=0."""
    if sample_alpha <= 0:
        return None
    scores = np.maximum(counts, 1).astype(np.float64) ** -sample_alpha
    scores[counts == 0] = 0
    scores[:N_SPECIAL] = 0
    return torch.from_numpy(scores).float()


def mask_tokens(ids: torch.Tensor, pad_mask: torch.Tensor | None, gen: torch.Generator, vocab_size: int,
                word_pred: float = 0.15, probs: tuple[float, float, float] = (0.8, 0.1, 0.1),
                scores: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs with masks applied, targets (= original ids), pred_mask [B, T] bool). All on CPU."""
    real = torch.ones_like(ids, dtype=torch.bool) if pad_mask is None else ~pad_mask
    if scores is None:
        pred = (torch.rand(ids.shape, generator=gen) < word_pred) & real
    else:
        w = scores[ids.reshape(-1)] * real.reshape(-1)
        n_tgt = min(int(math.ceil(word_pred * int(real.sum()))), int((w > 0).sum()))
        pred = torch.zeros(ids.numel(), dtype=torch.bool)
        if n_tgt > 0:
            pred[torch.multinomial(w, n_tgt, replacement=False, generator=gen)] = True
        pred = pred.reshape(ids.shape)
    if not bool(pred.any()):  # never an empty prediction set
        first = real.reshape(-1).nonzero()[0, 0]
        pred.view(-1)[first] = True
    return corrupt(ids, pred, gen, vocab_size, probs), ids, pred


def corrupt(ids: torch.Tensor, pred: torch.Tensor, gen: torch.Generator, vocab_size: int,
            probs: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> torch.Tensor:
    """`ids` with the positions of `pred` replaced: MASK, kept or a random word, with `probs` (BERT/XLM/MASS)."""
    n = int(pred.sum())
    kind = torch.multinomial(torch.tensor(probs, dtype=torch.float), n, replacement=True, generator=gen)
    rand_words = torch.randint(N_SPECIAL, vocab_size, (n,), generator=gen)
    orig = ids[pred]
    new = torch.where(kind == 0, torch.full_like(orig, MASK_INDEX), torch.where(kind == 1, orig, rand_words))
    inputs = ids.clone()
    inputs[pred] = new
    return inputs
