"""VECO's monolingual pairs (section 7): two neighbouring sentences of one language's shards, served like a
TLM pair stream so CA-MLM can attend from one to the other."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from xlp_cli.core.errors import BadInput
from xlp_cli.train.shards import read_list_column
from xlp_cli.train.streams import PairStream


class AdjacentStream(PairStream):
    """Pairs of neighbouring sentences (2k, 2k+1) of each row group of one language's monolingual shards."""

    def __init__(self, paths: list[Path], lang: str, lang_index: int, bptt: int, seed: int, vocab_size: int,
                 pair_index: int, part: tuple[int, int] = (0, 1)):
        super().__init__(paths, lang, (lang_index, lang_index), bptt, seed, vocab_size, pair_index, part)
        self.groups = [g for g in self.groups if g[2] >= 2]
        if not self.groups:
            raise BadInput(f"language '{lang}' has no two sentences in one row group to pair",
                           path=paths[0].parent if paths else lang)
        self.n_rows //= 2

    def _sides(self, path: Path, rg: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        values, offsets = read_list_column(path, rg, "ids")
        n = (len(offsets) - 1) // 2
        starts, ends = offsets[:-1], offsets[1:]
        def side(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            parts = [values[starts[r]:ends[r]] for r in rows]
            lengths = np.asarray([len(x) for x in parts], dtype=np.int64)
            return (np.concatenate(parts) if parts else values[:0]), np.concatenate([[0], np.cumsum(lengths)])
        return side(np.arange(n) * 2), side(np.arange(n) * 2 + 1)
