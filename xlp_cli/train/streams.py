"""The streams pre-training reads from the id shards of `xlp bpe apply` (never loading the corpus).

Monolingual streams (MLM), as XLM's StreamDataset: the sentences of a language, each followed by `</s>` (the
stream starts with `</s>`), concatenated and cut into windows of `bptt` tokens. Reading goes one Parquet row
group at a time: per epoch the row groups come in a seeded random order; within a row group the windows are
served in a seeded random order; the tail shorter than a window is carried into the next row group.

Parallel pairs (TLM): `[</s>] s1 [</s>] [</s>] s2 [</s>]` with positions restarting at the second segment and
each segment carrying its own language; each side is cut to bptt/2 - 2 tokens; the sides are swapped with
probability 1/2 (seeded per pair). Pairs of a row group are served in a seeded random order, padded per batch.
`RowCursor` is the position in the rows of some shards that pair streams (and `sentences.SentenceStream`) share;
`adjacent.AdjacentStream` serves VECO's adjacent sentences in the pair layout.

A stream's position (epoch, row group, window, carry) is a small JSON-able dict: `state()` / `load_state()`
restore it exactly. `sampling_probs` (p_l ~ n_l^alpha) and `step_rng` (seeded by (seed, step, micro, what)) are
the language sampling of `data.PretrainData`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlp_cli.artifacts.special_ids import EOS as EOS_INDEX, PAD as PAD_INDEX
from xlp_cli.core.errors import BadInput
from xlp_cli.train.shards import Batch, check_ids, partition, read_list_column, row_groups


class MonoStream:
    """Fixed-length windows over one language's concatenated sentences."""

    def __init__(self, paths: list[Path], lang: str, lang_index: int, bptt: int, seed: int, vocab_size: int,
                 shuffle: bool = True, part: tuple[int, int] = (0, 1)):
        self.lang, self.lang_index, self.bptt, self.seed = lang, lang_index, bptt, seed
        self.vocab_size, self.shuffle = vocab_size, shuffle
        self.groups = row_groups(paths)
        self.n_rows = sum(n for _, _, n in self.groups)  # the whole language's (sampling probabilities)
        self.groups, self.share, self.key = partition(self.groups, part)
        if not self.groups:
            raise BadInput(f"language '{lang}' has no sentences", path=paths[0].parent if paths else lang)
        self.epoch, self.group_pos, self.window_pos = 0, 0, 0
        self.carry: list[int] = [EOS_INDEX]
        self._loaded: tuple[Any, ...] | None = None  # (key, windows, order, carry_out)

    # ------------------------------------------------------------ position
    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "group_pos": self.group_pos, "window_pos": self.window_pos,
                "carry": list(map(int, self.carry))}

    def load_state(self, s: dict[str, Any]) -> None:
        self.epoch, self.group_pos, self.window_pos = int(s["epoch"]), int(s["group_pos"]), int(s["window_pos"])
        self.carry = [int(x) for x in s["carry"]]
        self._loaded = None

    # ------------------------------------------------------------ reading
    def _group_order(self) -> np.ndarray:
        if not self.shuffle:
            return np.arange(len(self.groups))
        return np.random.default_rng([self.seed, self.lang_index, self.epoch, 1, *self.key]).permutation(len(self.groups))

    def _load(self) -> tuple[np.ndarray, np.ndarray, list[int]]:
        key = (self.epoch, self.group_pos, tuple(self.carry))
        if self._loaded is not None and self._loaded[0] == key:
            return self._loaded[1:]
        path, rg, _ = self.groups[int(self._group_order()[self.group_pos])]
        values, offsets = read_list_column(path, rg, "ids")
        check_ids(values, self.vocab_size, path, rg)
        stream = np.insert(values, offsets[1:], EOS_INDEX)  # </s> after every sentence
        stream = np.concatenate([np.asarray(self.carry, dtype=np.int64), stream])
        n = len(stream) // self.bptt
        windows = stream[: n * self.bptt].reshape(n, self.bptt)
        carry_out = stream[n * self.bptt:].tolist()
        order = (np.random.default_rng([self.seed, self.lang_index, self.epoch, self.group_pos, 2, *self.key]).permutation(n)
                 if self.shuffle else np.arange(n))[self.share[0]::self.share[1]]
        self._loaded = (key, windows, order, carry_out)
        return windows, order, carry_out

    def _advance_group(self, carry_out: list[int]) -> None:
        self.carry = carry_out
        self.window_pos = 0
        self.group_pos += 1
        if self.group_pos >= len(self.groups):
            self.group_pos = 0
            self.epoch += 1

    def next_windows(self, count: int, max_epochs: int | None = None) -> np.ndarray:
        """`count` windows [count, bptt] (fewer only when `max_epochs` is reached)."""
        out: list[np.ndarray] = []
        got = 0
        empty_groups = 0
        while got < count:
            if max_epochs is not None and self.epoch >= max_epochs:
                break
            windows, order, carry_out = self._load()
            if self.window_pos >= len(order):
                self._advance_group(carry_out)
                empty_groups += 1
                if empty_groups > 2 * len(self.groups) + 2 and not out:
                    raise BadInput(f"language '{self.lang}' has fewer than {self.bptt} tokens in total; lower --bptt")
                continue
            empty_groups = 0
            take = order[self.window_pos: self.window_pos + (count - got)]
            out.append(windows[take])
            got += len(take)
            self.window_pos += len(take)
        if not out:
            return np.zeros((0, self.bptt), dtype=np.int64)
        return np.concatenate(out)

    def next_batch(self, batch_size: int) -> Batch:
        w = torch.from_numpy(self.next_windows(batch_size))
        return Batch(w, torch.full_like(w, self.lang_index), None, None, self.lang)


class RowCursor:
    """A position (epoch, row group, row) in the rows of some shards (of data slot `part`, `partition`): per epoch
    the row groups in a seeded order, then the rows of each in the order `row_rng()` draws first (the slot keeping
    its `share`), a pure function of (seed, stream id, epoch, row group)."""

    def __init__(self, paths: list[Path], name: str, empty: str, seed: int, stream_id: int,
                 part: tuple[int, int] = (0, 1)):
        self.seed, self.stream_id = seed, stream_id
        self.groups = row_groups(paths)
        self.n_rows = sum(n for _, _, n in self.groups)  # the whole stream's (sampling probabilities)
        self.groups, self.share, self.key = partition(self.groups, part)
        if not self.groups:
            raise BadInput(empty, path=paths[0].parent if paths else name)
        self.epoch, self.group_pos, self.row_pos = 0, 0, 0
        self._loaded: tuple[Any, ...] | None = None

    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "group_pos": self.group_pos, "row_pos": self.row_pos}

    def load_state(self, s: dict[str, Any]) -> None:
        self.epoch, self.group_pos, self.row_pos = int(s["epoch"]), int(s["group_pos"]), int(s["row_pos"])
        self._loaded = None

    def group(self) -> tuple[Path, int, int]:
        """The current row group: (path, index, rows)."""
        rng = np.random.default_rng([self.seed, self.stream_id, self.epoch, 1, *self.key])
        return self.groups[int(rng.permutation(len(self.groups))[self.group_pos])]

    def row_rng(self) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.stream_id, self.epoch, self.group_pos, 2, *self.key])

    def next_group(self) -> None:
        self.row_pos, self.group_pos = 0, self.group_pos + 1
        if self.group_pos >= len(self.groups):
            self.group_pos, self.epoch = 0, self.epoch + 1


class PairStream(RowCursor):
    """TLM pairs of one language pair, padded per batch."""

    def __init__(self, paths: list[Path], pair: str, lang_indices: tuple[int, int], bptt: int, seed: int,
                 vocab_size: int, pair_index: int, part: tuple[int, int] = (0, 1)):
        super().__init__(paths, pair, f"language pair '{pair}' has no sentence pairs", seed, 1000 + pair_index, part)
        self.pair, self.lang_indices, self.vocab_size = pair, lang_indices, vocab_size
        self.max_side = max(1, bptt // 2 - 2)
        self.pair_index = pair_index

    def _sides(self, path: Path, rg: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        return read_list_column(path, rg, "ids1"), read_list_column(path, rg, "ids2")

    def _load(self) -> tuple[Any, ...]:
        key = (self.epoch, self.group_pos)
        if self._loaded is not None and self._loaded[0] == key:
            return self._loaded[1:]
        path, rg, n = self.group()
        (v1, o1), (v2, o2) = self._sides(path, rg)
        check_ids(v1, self.vocab_size, path, rg)
        check_ids(v2, self.vocab_size, path, rg)
        rng = self.row_rng()
        order, swap = rng.permutation(len(o1) - 1), rng.random(len(o1) - 1) < 0.5
        # both sides' tokens in one array, side 2's offsets shifted past side 1's (one gather per batch)
        self._loaded = (key, np.concatenate([v1, v2]), o1, o2 + len(v1), order[self.share[0]::self.share[1]], swap)
        return self._loaded[1:]

    def next_batch(self, batch_size: int) -> Batch:
        """The next `batch_size` pairs (crossing into the next row groups as needed)."""
        parts: list[tuple[np.ndarray, ...]] = []
        need = batch_size
        while need:
            values, o1, o2, order, swap = self._load()
            if self.row_pos >= len(order):
                self.next_group()
                continue
            r = order[self.row_pos: self.row_pos + need]
            self.row_pos += len(r)
            need -= len(r)
            parts.append((values, o1[r], o1[r + 1] - o1[r], o2[r], o2[r + 1] - o2[r], swap[r]))
        if len(parts) > 1:  # rows from several row groups: one values array, later starts shifted
            base = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
            parts = [(p[0], p[1] + b, p[2], p[3] + b, p[4], p[5]) for p, b in zip(parts, base)]
            values = np.concatenate([p[0] for p in parts])
        else:
            values = parts[0][0]
        s1, n1, s2, n2, sw = (np.concatenate([p[i] for p in parts]) for i in range(1, 6))
        return self._collate(values, s1, n1, s2, n2, sw)

    def _collate(self, values: np.ndarray, s1: np.ndarray, n1: np.ndarray, s2: np.ndarray, n2: np.ndarray,
                 swap: np.ndarray) -> Batch:
        """`</s> a </s> </s> b </s>` per row, right-padded: a and b are the two sides (side 2 first where `swap`),
        each `values[start: start + n]` cut to `max_side`. Positions restart at each segment; each token has its
        segment's language, padding the last one's. Vectorized over the batch: the input pipeline builds one of
        these per step (`benchmarks/data_throughput.py`)."""
        swap = swap.astype(bool)
        first_start, first_n = np.where(swap, s2, s1), np.minimum(np.where(swap, n2, n1), self.max_side)
        second_start, second_n = np.where(swap, s1, s2), np.minimum(np.where(swap, n1, n2), self.max_side)
        l1 = first_n + 2
        lengths = l1 + second_n + 2
        t = int(lengths.max())
        col = np.arange(t)[None, :]
        real = col < lengths[:, None]
        in_first = col < l1[:, None]
        ids = np.full((len(lengths), t), PAD_INDEX, dtype=np.int64)
        ids[real] = EOS_INDEX  # every segment starts and ends with </s>; the words overwrite the inside
        words = (col >= 1) & (col <= first_n[:, None])
        ids[words] = values[(first_start[:, None] + col - 1)[words]]
        words = (col >= l1[:, None] + 1) & (col < lengths[:, None] - 1)
        ids[words] = values[(second_start[:, None] + col - l1[:, None] - 1)[words]]
        langs = np.array(self.lang_indices, dtype=np.int64)
        la, lb = langs[swap.astype(np.int64)][:, None], langs[1 - swap.astype(np.int64)][:, None]
        pos = np.where(in_first, col, col - l1[:, None]) * real
        lng = np.where(in_first & real, la, lb)
        return Batch(torch.from_numpy(ids), torch.from_numpy(lng), torch.from_numpy(pos), torch.from_numpy(~real),
                     self.pair)


def sampling_probs(sizes: list[int], alpha: float) -> np.ndarray:
    """p_l ~ n_l^alpha (XLM's smoothing), normalised."""
    n = np.asarray(sizes, dtype=np.float64)
    p = n / n.sum()
    q = p ** alpha
    return q / q.sum()


def step_rng(seed: int, step: int, micro: int, what: int) -> np.random.Generator:
    return np.random.default_rng([seed, step, micro, what])
