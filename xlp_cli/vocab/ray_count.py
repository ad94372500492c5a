"""`xlp vocab-score --engine ray`: the token counts as Ray tasks, one per id shard.

Each task runs `scoring.count_shards` on one shard (the shards must be readable at the same path on every
node) and returns its int64 counts; the driver adds them up per language. Integer sums do not depend on
their order, so the counts, and everything scored from them, are exactly those of the local counting.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xlp_cli.core import ray_cluster
from xlp_cli.vocab.scoring import count_shards


def count_languages(shards: list[list[tuple[Path, str]]], vocab_size: int, address: str = "") -> np.ndarray:
    """[languages, vocab] counts; `shards[l]` are language l's (shard, column) pairs."""
    counts = np.zeros((len(shards), vocab_size), dtype=np.int64)
    with ray_cluster.session(address) as ray:
        task = ray.remote(max_retries=2)(count_shards)
        refs = [(li, task.remote([shard], vocab_size)) for li, group in enumerate(shards) for shard in group]
        for li, ref in refs:
            try:
                counts[li] += ray.get(ref)
            except ray.exceptions.RayError as e:
                raise ray_cluster.failure(ray, e, "xlp vocab-score") from None
    return counts
