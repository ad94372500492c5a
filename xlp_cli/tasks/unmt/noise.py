"""The noise of denoising auto-encoding (Lample et al. 2018; XLM's `add_noise`), on subword ids, from an explicit RNG.

    noisy = add_noise(sentences, np.random.default_rng(seed), shuffle=3, drop=0.1, blank=0.1)

In XLM's order, per sentence (ids without `</s>`):
1. local shuffle: token i gets the key i + U(0, k) and the tokens are sorted by key, so none moves k or more
   positions (k = `shuffle`; 0 turns it off);
2. word drop: each token is dropped with probability `drop`; a sentence keeps at least one token (XLM keeps one
   drawn at random when all were dropped);
3. word blank: each remaining token becomes `<special1>` (MASK) with probability `blank`.
Like XLM, the noise acts on BPE tokens, not on whole words. The same RNG state gives the same noise.
"""

from __future__ import annotations

import numpy as np

from xlp_cli.artifacts.special_ids import MASK


def add_noise(sents: list[np.ndarray], rng: np.random.Generator, shuffle: float = 3.0, drop: float = 0.1,
              blank: float = 0.1) -> list[np.ndarray]:
    out = []
    for s in sents:
        s = np.asarray(s, dtype=np.int64)
        n = len(s)
        if shuffle > 0 and n > 1:
            s = s[np.argsort(np.arange(n) + rng.uniform(0, shuffle, size=n), kind="stable")]
        if drop > 0 and n:
            keep = rng.random(n) >= drop
            if not keep.any():
                keep[int(rng.integers(n))] = True
            s = s[keep]
        if blank > 0 and len(s):
            s = np.where(rng.random(len(s)) < blank, MASK, s)
        out.append(s)
    return out
