"""Reading the id shards of `xlp bpe apply` for training: row groups from Parquet footers, a data slot's share of
them, one list<int> column of one row group, the id range check, and the `Batch` every stream yields."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

from xlp_cli.core.errors import BadInput


@dataclasses.dataclass
class Batch:
    ids: torch.Tensor                      # [B, T] long
    langs: torch.Tensor                    # [B, T] long (language index per token)
    positions: torch.Tensor | None         # [B, T] or None (0..T-1)
    pad_mask: torch.Tensor | None          # [B, T] True at padding, or None
    name: str                              # "en" or "en-fr"

    @property
    def n_tokens(self) -> int:
        if self.pad_mask is None:
            return self.ids.numel()
        return int((~self.pad_mask).sum())

    def to(self, device: torch.device) -> "Batch":
        mv = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        return Batch(mv(self.ids), mv(self.langs), mv(self.positions), mv(self.pad_mask), self.name)


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
