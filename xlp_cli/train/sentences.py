"""Whole sentences from the monolingual id shards of `xlp bpe apply`, for the objectives that train on sentences
rather than on stream windows (MASS; UNMT's denoising, back-translation and MLM).

    stream = SentenceStream(paths, "en", seed=1, salt=0, vocab_size=V, max_len=100)
    sents = stream.next(32)          # 32 int64 arrays (ids without </s>); advances the position
    x = collate(sents)               # [B, T] right-padded with <pad>
    stream.state() / stream.load_state(s)

Order: per epoch the row groups come in a seeded random order and the rows of a row group in a seeded random
order (as `streams.PairStream`), a pure function of (seed, salt, epoch, row group), so a resumed run continues
exactly where it stopped; `salt` gives two streams over the same shards different orders (UNMT reads one stream
per language for each of its three losses, as XLM keeps one iterator per step kind). A sentence longer than
`max_len` tokens is cut to it (XLM's --max_len); one row group is in memory at a time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from xlp_cli.artifacts.special_ids import PAD
from xlp_cli.core.errors import BadInput
from xlp_cli.train.shards import check_ids, read_list_column, row_groups
from xlp_cli.train.streams import RowCursor


def collate(seqs: list[np.ndarray]) -> torch.Tensor:
    """Id sequences -> [B, T] long, right-padded with <pad> (T = the longest)."""
    T = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), T), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.from_numpy(np.asarray(s, dtype=np.int64))
    return out


class SentenceStream(RowCursor):
    def __init__(self, paths: list[Path], lang: str, seed: int, salt: int, vocab_size: int, max_len: int):
        super().__init__(paths, lang, f"language '{lang}' has no sentences", seed, salt)
        self.lang, self.salt, self.vocab_size, self.max_len = lang, salt, vocab_size, max_len

    def _load(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        key = (self.epoch, self.group_pos)
        if self._loaded is not None and self._loaded[0] == key:
            return self._loaded[1:]
        path, rg, _ = self.group()
        values, offsets = read_list_column(path, rg, "ids")
        check_ids(values, self.vocab_size, path, rg)
        order = self.row_rng().permutation(len(offsets) - 1)
        self._loaded = (key, values, offsets, order)
        return values, offsets, order

    def next(self, n: int) -> list[np.ndarray]:
        """The next `n` non-empty sentences (cut to `max_len`)."""
        out: list[np.ndarray] = []
        empty_run = 0
        while len(out) < n:
            values, offsets, order = self._load()
            if self.row_pos >= len(order):
                self.next_group()
                continue
            r = int(order[self.row_pos])
            self.row_pos += 1
            s = values[offsets[r]: offsets[r + 1]][: self.max_len]
            if len(s):
                out.append(s)
                empty_run = 0
            else:
                empty_run += 1
                if empty_run > self.n_rows:
                    raise BadInput(f"language '{self.lang}' has only empty sentences")
        return out


def first_sentences(paths: list[Path], n: int, vocab_size: int, max_len: int) -> list[np.ndarray]:
    """The first `n` non-empty sentences of some shards, in corpus order (fixed validation sets)."""
    out: list[np.ndarray] = []
    for path, rg, _ in row_groups(paths):
        values, offsets = read_list_column(path, rg, "ids")
        check_ids(values, vocab_size, path, rg)
        for r in range(len(offsets) - 1):
            s = values[offsets[r]: offsets[r + 1]][:max_len]
            if len(s):
                out.append(s)
            if len(out) >= n:
                return out
    return out
