"""Finalizing in parallel, step 1: exact de-duplication over hash partitions, and the counts the plan needs.

Every chunk row has a 64-bit content hash `h` (which covers its language or pair) and a split value `u`
(process.py). Partition p of P holds the rows with h % P == p, so equal contents always meet in the same
partition. A partition takes its rows in stream order (split by split, chunk by chunk, row by row) and keeps
a row when its hash is new there: "the first occurrence wins" decides exactly as the one set of the
sequential Finalizer, for any P. What a partition gives back:
- for each part of the stream it is handed, the duplicates' positions (chunk k, row in the chunk): few,
  read by the shard writers;
- at the end (`totals`), per (split, chunk, group), how many new rows, and how many of them are valid / test
  candidates (their `u` below valid_fraction / valid_fraction + test_fraction): the caps and the shards are
  planned from these counts alone (shard_plan.py), never from rows.
The keys a partition reads (`chunk_keys`: k, row, h, cls, group) are made by whoever holds the chunk (the
reader task on Ray, the main thread locally) or read back from a kept chunk file on a rerun.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from xlp_cli.artifacts.arrow_numpy import from_numpy, group_sums, take, take_rows, to_numpy
from xlp_cli.artifacts.shards import read_table
from xlp_cli.prepare.dedup import HashSet64
from xlp_cli.prepare.finalize import Rules, split_values

KEY_COLUMNS = ["h", "u", "group"]  # what the keys are made of (a kept chunk file is read for these only)
COUNT_SCHEMA = pa.schema([("k", pa.int32()), ("group", pa.string()), ("new", pa.int64()), ("valid", pa.int64()),
                          ("test", pa.int64())])
S_FIELD = pa.field("s", pa.int32())  # (the split index, added to a partition's counts)


def candidate_class(u: np.ndarray, rules: Rules) -> np.ndarray:
    """0 train, 1 valid, 2 test candidate, from the `u` column (as `finalize.assign` reads it)."""
    uu = split_values(u)
    vf, tf = rules.valid_fraction, rules.valid_fraction + rules.test_fraction
    return np.where(uu < vf, 1, np.where(uu < tf, 2, 0)).astype(np.int8)


def chunk_keys(table: pa.Table, k: int, parts: int, rules: Rules) -> list[pa.Table]:
    """Chunk k's keys (columns k, row, h, cls, group), one table per partition, rows in chunk order."""
    h = to_numpy(table.column("h")).astype(np.uint64, copy=False)
    cls = candidate_class(to_numpy(table.column("u")), rules)
    group = table.column("group")
    part = h % np.uint64(parts)
    out = []
    for p in range(parts):
        rows = np.flatnonzero(part == p).astype(np.int32)
        out.append(pa.table({"k": from_numpy(np.full(len(rows), k, dtype=np.int32)), "row": from_numpy(rows),
                             "h": from_numpy(h[rows]), "cls": from_numpy(cls[rows]), "group": take(group, rows)}))
    return out


def split_keys(paths: list[tuple[int, Path]], parts: int, rules: Rules) -> list[pa.Table]:
    """The keys of kept chunk files [(k, path)] of one split, one table per partition (read back on a rerun)."""
    per_part: list[list[pa.Table]] = [[] for _ in range(parts)]
    for k, path in paths:
        for p, keys in enumerate(chunk_keys(read_table(path, columns=KEY_COLUMNS), k, parts, rules)):
            per_part[p].append(keys)
    return [concat(tables) for tables in per_part]


def concat(tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables) if tables else empty_keys()


def empty_keys() -> pa.Table:
    return pa.table({"k": pa.array([], pa.int32()), "row": pa.array([], pa.int32()), "h": pa.array([], pa.uint64()),
                     "cls": pa.array([], pa.int8()), "group": pa.array([], pa.string())})


class DedupPartition:
    """One hash partition's set of the hashes seen, fed the partition's keys in stream order; it keeps the counts
    of what it found, for the plan (`totals`), and gives back the duplicates of each part."""

    def __init__(self, dedup: bool = True):
        self.dedup = dedup
        self.seen = HashSet64()
        self.calls = 0  # how many parts of the stream were added: `add` checks they come in order
        self.counts: list[pa.Table] = []
        self.duplicates = 0

    def add(self, order: int, s: int, keys: pa.Table) -> np.ndarray:
        """The keys of the next part of the stream (`order`: its place, 0, 1, ...; rows of split s): -> its
        duplicates, an int64 array of shape (n, 2): (chunk, row)."""
        if order != self.calls:  # a part out of order would change which occurrence wins: never silently
            raise RuntimeError(f"dedup partition got part {order} of the stream where {self.calls} was due")
        self.calls += 1
        if self.dedup and keys.num_rows:
            new = self.seen.add_batch(to_numpy(keys.column("h")))
        else:
            new = np.ones(keys.num_rows, dtype=bool)
        counts = count_new(take_rows(keys, np.flatnonzero(new)))
        self.counts.append(counts.append_column("s", from_numpy(np.full(counts.num_rows, s, dtype=np.int32))))
        self.duplicates += int((~new).sum())
        return np.stack([to_numpy(keys.column("k"))[~new], to_numpy(keys.column("row"))[~new]],
                        axis=1).astype(np.int64)

    def totals(self) -> tuple[int, pa.Table, int]:
        """(parts added, counts per (split s, chunk k, group): new, valid, test, duplicates found)."""
        counts = pa.concat_tables(self.counts) if self.counts else COUNT_SCHEMA.append(S_FIELD).empty_table()
        return self.calls, counts, self.duplicates


def count_new(keys: pa.Table) -> pa.Table:
    """Per (chunk, group): new rows, valid and test candidates among them."""
    if keys.num_rows == 0:
        return COUNT_SCHEMA.empty_table()
    cls = to_numpy(keys.column("cls"))  # (numpy: pc.equal(cls, 1)'s Python scalar makes pyarrow import pandas)
    table = pa.table({"k": keys.column("k"), "group": keys.column("group"),
                      "valid": from_numpy((cls == 1).astype(np.int64)), "test": from_numpy((cls == 2).astype(np.int64))})
    return group_sums(table, ["k", "group"], ["valid", "test"], count="new").select(COUNT_SCHEMA.names)


def dup_index(dups: list[np.ndarray]) -> dict[int, np.ndarray]:
    """The duplicates of one split from all partitions: {chunk: rows}."""
    both = np.concatenate(dups) if dups else np.zeros((0, 2), dtype=np.int64)
    both = both[np.argsort(both[:, 0], kind="stable")]
    chunks, starts = np.unique(both[:, 0], return_index=True)
    return {int(k): rows for k, rows in zip(chunks, np.split(both[:, 1], starts[1:]))}
