"""Margin-based parallel-sentence mining (LASER's `mine_bitexts.py --mode mine --retrieval max --margin ratio`, as
XTREME's BUCC runs it) and the F1-optimal threshold (LASER's `bucc.py` BuccOptimize).

    x, y: sentence vectors [n, d], [m, d] (cosine: rows are L2-normalised here)
    ratio margin(x, y) = cos(x, y) / ( sum_{z in NN_k(x)} cos(x, z) / 2k + sum_{z in NN_k(y)} cos(y, z) / 2k )
        NN_k(x): the k nearest targets of x, NN_k(y): the k nearest sources of y (k = 4)
    forward: each x's best y among NN_k(x) by margin; backward: each y's best x among NN_k(y)
    max retrieval: both lists together, by margin descending, each source and each target used once (greedy)
    threshold: over the candidates by margin descending, the prefix with the best F1 against the gold pairs;
               the threshold is half-way between its last margin and the next one
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import torch


def normalise(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def knn(x: np.ndarray, y: np.ndarray, k: int, block: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """(cosines [n, k], indices [n, k]) of each row of x's k nearest rows of y (x, y normalised), by blocks."""
    k = min(k, len(y))
    yt = torch.from_numpy(np.ascontiguousarray(y, np.float32))
    sims, idx = [], []
    for i in range(0, len(x), block):
        s = torch.from_numpy(np.ascontiguousarray(x[i: i + block], np.float32)) @ yt.T
        v, j = s.topk(k, dim=1)
        sims.append(v.numpy())
        idx.append(j.numpy())
    return np.concatenate(sims), np.concatenate(idx)


def mine(x: np.ndarray, y: np.ndarray, k: int = 4) -> list[tuple[int, int, float]]:
    """Candidate pairs (source row, target row, ratio margin), best first, each row used once."""
    x, y = normalise(x), normalise(y)
    x2y_sim, x2y_ind = knn(x, y, k)
    y2x_sim, y2x_ind = knn(y, x, k)
    x2y_mean, y2x_mean = x2y_sim.mean(1), y2x_sim.mean(1)

    def margins(a: np.ndarray, b: np.ndarray, cand: np.ndarray, a_mean: np.ndarray, b_mean: np.ndarray) -> np.ndarray:
        cos = np.einsum("nd,nkd->nk", a, b[cand])
        return cos / ((a_mean[:, None] + b_mean[cand]) / 2)

    fwd = margins(x, y, x2y_ind, x2y_mean, y2x_mean)
    bwd = margins(y, x, y2x_ind, y2x_mean, x2y_mean)
    fwd_best = x2y_ind[np.arange(len(x)), fwd.argmax(1)]
    bwd_best = y2x_ind[np.arange(len(y)), bwd.argmax(1)]
    src = np.concatenate([np.arange(len(x)), bwd_best])
    tgt = np.concatenate([fwd_best, np.arange(len(y))])
    score = np.concatenate([fwd.max(1), bwd.max(1)])
    out, seen_src, seen_tgt = [], set(), set()
    for i in np.argsort(-score, kind="stable"):
        a, b = int(src[i]), int(tgt[i])
        if a not in seen_src and b not in seen_tgt:
            seen_src.add(a)
            seen_tgt.add(b)
            out.append((a, b, float(score[i])))
    return out


def prf(n_correct: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    """(precision, recall, F1) in %, 0 where undefined."""
    p = n_correct / n_pred if n_pred else 0.0
    r = n_correct / n_gold if n_gold else 0.0
    return 100 * p, 100 * r, (200 * p * r / (p + r) if p + r else 0.0)


def best_threshold(cands: Iterable[tuple[object, object, float]], gold: set) -> tuple[float, float]:
    """(threshold, F1 in % at it) of candidates (source, target, score) against gold {(source, target)}."""
    items = sorted(cands, key=lambda c: -c[2])
    best_f1, threshold, correct = 0.0, float("inf"), 0
    for n, (a, b, s) in enumerate(items, 1):
        correct += (a, b) in gold
        f1 = prf(correct, n, len(gold))[2]
        if f1 > best_f1:
            best_f1 = f1
            threshold = (s + items[n][2]) / 2 if n < len(items) else s
    return threshold, best_f1


def at_threshold(cands: Iterable[tuple[object, object, float]], gold: set, threshold: float) -> dict[str, float]:
    """Precision, recall and F1 (%) of the candidates scoring at least `threshold`."""
    kept = [(a, b) for a, b, s in cands if s >= threshold]
    correct = sum((a, b) in gold for a, b in kept)
    p, r, f1 = prf(correct, len(kept), len(gold))
    return {"precision": p, "recall": r, "f1": f1, "mined": len(kept), "correct": correct, "gold": len(gold)}
