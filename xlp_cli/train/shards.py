"""Reading the id shards of `xlp bpe apply` for training: row groups from Parquet footers, a data slot's share of
them, one list<int> column of one row group, the id range check, and the `Batch` every stream yields."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

from xlp_cli.artifacts.special_ids import PAD
from xlp_cli.core.errors import BadInput


@dataclasses.dataclass
class Batch:
    """A batch as the streams build it, on the host. What the training step needs to know about it on the host
    (its real tokens, its languages) is counted here, once, in the input pipeline: never on the device."""
    ids: torch.Tensor                      # [B, T] long
    langs: torch.Tensor                    # [B, T] long (language index per token)
    positions: torch.Tensor | None         # [B, T] or None (0..T-1)
    pad_mask: torch.Tensor | None          # [B, T] True at padding, or None
    name: str                              # "en" or "en-fr"
    n_tokens: int = -1                     # real (non-padding) tokens; counted from the host tensors
    present: tuple[int, ...] = ()          # the language indices in `langs`, sorted; idem

    def __post_init__(self) -> None:
        if self.n_tokens < 0:
            self.n_tokens = self.ids.numel() if self.pad_mask is None else int((~self.pad_mask).sum())
        if not self.present:
            self.present = tuple(torch.unique(self.langs).tolist())

    def padded(self, width: int) -> "Batch":
        """The batch right-padded to `width` positions (a fixed shape for the GPU); unchanged if already."""
        b, t = self.ids.shape
        if t >= width:
            return self
        grow = lambda x, fill: torch.cat([x, x.new_full((b, width - t), fill)], dim=1)  # noqa: E731
        pad = torch.zeros_like(self.ids, dtype=torch.bool) if self.pad_mask is None else self.pad_mask
        positions = torch.arange(t).expand(b, t) if self.positions is None else self.positions
        return Batch(grow(self.ids, PAD), grow(self.langs, self.present[0]), grow(positions, 0), grow(pad, True),
                     self.name, self.n_tokens, self.present)

    def to(self, device: torch.device) -> "Batch":
        mv = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        return Batch(mv(self.ids), mv(self.langs), mv(self.positions), mv(self.pad_mask), self.name,
                     self.n_tokens, self.present)


SHAPE_STEP = 32  # on a GPU, padded lengths are multiples of this: few distinct shapes, little padding


def bucket(n: int, step: int) -> int:
    """`n` rounded up to a multiple of `step` (1: unchanged)."""
    return -(-n // step) * step


def row_groups(paths: list[Path]) -> list[tuple[Path, int, int]]:
    """(path, row group index, rows) for every non-empty row group, from Parquet footers only."""
    out = []
    for p in paths:
        try:
            md = pq.ParquetFile(p).metadata
        except Exception as e:  # pyarrow raises several types for a broken footer
            raise BadInput(f"not a readable Parquet shard ({e})", path=p) from None
        for i in range(md.num_row_groups):
            n = md.row_group(i).num_rows
            if n:
                out.append((p, i, n))
    return out


def partition(groups: list[tuple[Path, int, int]], part: tuple[int, int]) -> tuple[list, tuple[int, int], list[int]]:
    """Data slot k of K: (its row groups, its share of each group's windows/rows, extra RNG key).

    With at least K row groups, slot k reads only groups k, k+K, ...; with fewer, every slot reads them all and
    keeps every K-th window of each. K = 1 is the whole stream, with the RNG keys of a run without slots."""
    k, K = part
    if K == 1:
        return groups, (0, 1), []
    if len(groups) >= K:
        return groups[k::K], (0, 1), [k, K]
    return groups, (k, K), [k, K]


def read_list_column(path: Path, rg: int, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(values int64, offsets) of a list<int> column of one row group."""
    try:
        table = pq.ParquetFile(path).read_row_group(rg, columns=[column])
    except KeyError:
        raise BadInput(f"no '{column}' column (is this an `xlp bpe apply` shard?)", path=path) from None
    except Exception as e:
        raise BadInput(f"cannot read row group {rg} ({e})", path=path) from None
    col = table.column(column).combine_chunks()
    offsets = np.asarray(col.offsets, dtype=np.int64)
    values = np.asarray(col.values.to_numpy(zero_copy_only=False), dtype=np.int64)
    return values[offsets[0]:offsets[-1]], offsets - offsets[0]


def check_ids(values: np.ndarray, vocab_size: int, path: Path, rg: int) -> None:
    if values.size and (values.min() < 0 or values.max() >= vocab_size):
        bad = int(values.max() if values.max() >= vocab_size else values.min())
        raise BadInput(f"token id {bad} outside the dictionary (size {vocab_size}): data and dict.txt do not match",
                       path=path, position=f"row group {rg}")
