"""XLM's token masking for MLM/TLM: exactly ceil(`word_pred` x n) of the n non-padding tokens (15%), chosen
uniformly or, with `sample_alpha` > 0, with weights count(x)^-alpha (specials never chosen), without replacement
(XLM's `n_tgt`); of those 80% -> <special1> (MASK), 10% kept, 10% a random word id (>= 14, never a special).
All on CPU, from an explicit generator, in the input pipeline's worker.

The training step reads the prediction set as `prediction_slots`: a fixed number of flat positions per batch
(`capacity`: ceil(word_pred x B x T), a bound on the count), the unused ones with the target IGNORE that
cross-entropy skips, so the GPU sees the same shapes every step and never asks the host how many tokens were
masked.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from xlp_cli.artifacts.special_ids import MASK as MASK_INDEX, N_SPECIAL

IGNORE = -100  # the target of an unused prediction slot (F.cross_entropy's default ignore_index)


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
    flat_real = real.reshape(-1)
    pred = torch.zeros(ids.numel(), dtype=torch.bool)
    if scores is None:  # uniform: a random ceil(15%) of the real positions (a permutation's head: fast)
        where = flat_real.nonzero().squeeze(1) if pad_mask is not None else None
        n_real = ids.numel() if where is None else where.numel()
        n_tgt = math.ceil(word_pred * n_real)
        chosen = torch.randperm(n_real, generator=gen)[:n_tgt]
        pred[chosen if where is None else where[chosen]] = True
    else:
        w = scores[ids.reshape(-1)] * flat_real
        n_tgt = min(math.ceil(word_pred * int(flat_real.sum())), int((w > 0).sum()))
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


def capacity(word_pred: float, shape: tuple[int, ...]) -> int:
    """The fixed number of prediction slots of a batch of `shape`: ceil(word_pred x B x T), the most that
    `mask_tokens` can choose, rounded up to a multiple of 8 (tensor-core friendly)."""
    n = math.ceil(word_pred * math.prod(shape))
    return max(8, -(-n // 8) * 8)


def prediction_slots(pred: torch.Tensor, targets: torch.Tensor, slots: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(index [slots] long, gold [slots] long): the flat positions of `pred` in row-major order and their
    targets, then position 0 with the target IGNORE up to `slots`. `F.cross_entropy(logits, gold)` (its default
    ignore_index) is then the mean over the predicted tokens, as over a boolean selection, with fixed shapes."""
    flat = pred.reshape(-1).nonzero().squeeze(1)
    if flat.numel() > slots:
        raise ValueError(f"{flat.numel()} predicted positions do not fit {slots} slots")
    index = torch.zeros(slots, dtype=torch.long)
    gold = torch.full((slots,), IGNORE, dtype=torch.long)
    index[: flat.numel()] = flat
    gold[: flat.numel()] = targets.reshape(-1)[flat]
    return index, gold
