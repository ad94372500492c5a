"""From processed chunk files to final shards: exact de-duplication, split, caps, shard writing.

Chunk files are fed in order. Per language or pair ("group"):
- with --dedup (default), a record whose content hash was seen before (in this group: the hash covers the
  language) is a duplicate;
- with --max-records, records past the cap are dropped;
- the split comes from the content hash: u = hash/2^64; valid if u < valid_fraction, test if
  u < valid_fraction + test_fraction, else train. Once a group's valid (test) split holds --max-valid
  (--max-test) records, further valid (test) records go to train, or with `--split-by sentences` are dropped
  (`over_split_cap`): a held-out sentence is never trained on. (There `u` is the sentence group's, see
  sentence_groups.py, so all pairs of a group agree.)
Everything is vectorised per batch, and rows keep their input order inside each split/group.
`assign` is THE rule (one group's new rows and the rooms left under the caps -> the rows of each split): the
in-order Finalizer here and the parallel finalizing (shard_plan.py, shard_writer.py) both apply it, so
they write the same shards.
"""

from __future__ import annotations

import collections
import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli.artifacts.arrow_numpy import codes, take_rows, to_numpy
from xlp_cli.prepare.dedup import HashSet64
from xlp_cli.prepare.shards import GroupWriter

SPLITS = ("train", "valid", "test")
_MONO = {"id": "id", "source": "source", "lang": "lang1", "raw": "raw1", "text": "text1"}
_PAIR = ["id", "source", "lang1", "lang2", "raw1", "raw2", "text1", "text2"]


@dataclasses.dataclass(frozen=True)
class Rules:
    """What decides a record's fate once processed: de-duplication, the split by `u`, the caps (0: no cap)."""
    valid_fraction: float
    test_fraction: float
    max_valid: int
    max_test: int
    max_records: int
    shard_size: int
    dedup: bool = True
    overflow_to_train: bool = True  # a valid/test record past its cap goes to train (else: dropped)

    def rooms(self, kept: int, valid: int, test: int) -> Rooms:
        """The rooms left in a group that holds `kept` records, `valid` of them valid and `test` test."""
        def left(cap: int, n: int) -> int | None:
            return max(0, cap - n) if cap else None

        return Rooms(left(self.max_records, kept), left(self.max_valid, valid), left(self.max_test, test))


class Rooms(NamedTuple):
    """How many more records a group may keep, and put in valid / test (None: no cap)."""
    records: int | None
    valid: int | None
    test: int | None


def split_values(u: np.ndarray) -> np.ndarray:
    """The content hash's `u` column as a value in [0, 1)."""
    return u.astype(np.float64) / float(2**64)


def assign(idx: np.ndarray, uu: np.ndarray, rules: Rules, rooms: Rooms) -> tuple[dict[str, np.ndarray], Counter]:
    """The rows `idx` of one group (new records, in stream order; `uu` their split values) given `rooms`: the
    rows kept in each split ({split: rows of idx}) and the drops ({reason: n}). THE rule of every finalizer."""
    dropped: Counter = collections.Counter()
    if rooms.records is not None and len(idx) > rooms.records:
        dropped["over_max_records"] += len(idx) - rooms.records
        idx, uu = idx[:rooms.records], uu[:rooms.records]
    vf, tf = rules.valid_fraction, rules.valid_fraction + rules.test_fraction
    is_train = np.ones(len(idx), dtype=bool)
    take: dict[str, np.ndarray] = {}
    for split, at, room in (("valid", np.flatnonzero(uu < vf), rooms.valid),
                            ("test", np.flatnonzero((uu >= vf) & (uu < tf)), rooms.test)):
        is_train[at] = False
        if room is not None:  # past its cap a valid/test record goes to train (or is dropped)
            if rules.overflow_to_train:
                is_train[at[room:]] = True
            else:
                dropped["over_split_cap"] += len(at[room:])
            at = at[:room]
        take[split] = idx[at]
    take["train"] = idx[is_train]
    return take, dropped


def select_columns(part: pa.Table, pair: bool) -> pa.Table:
    """Chunk rows -> the columns of a text shard."""
    if pair:
        return part.select(_PAIR)
    return pa.table({name: part.column(col) for name, col in _MONO.items()})


class Finalizer:
    """The finalizer that takes every chunk in stream order, in this process (`--engine local --workers 1`, and
    with --bpe-from's id shards made alongside); partitioned.py finalizes in parallel, to the same bytes."""

    def __init__(self, out: Path, rules: Rules, seen: HashSet64 | None = None, sink: Any = None):
        self.out = out
        self.rules = rules
        self.sink = sink  # given to the shard writers (bpe/alongside.py)
        self.seen = HashSet64() if seen is None else seen
        self.writers: dict[tuple[str, str], GroupWriter] = {}
        self.kept: collections.Counter[str] = collections.Counter()
        self.per_split: dict[str, collections.Counter[str]] = {s: collections.Counter() for s in SPLITS}
        self.dropped: collections.Counter[str] = collections.Counter()

    def add_chunk(self, s: int, k: int, table: pa.Table | None, path: Path) -> None:
        """Chunk k of split s, in stream order: its table when held in memory, else its file."""
        if table is not None:
            self.add_batch(table)
        else:
            self.add_file(path)

    def split_done(self, s: int) -> None:
        """Every chunk of split s was given (nothing to do here: the chunks are finalized as they come)."""

    def add_file(self, path: Path) -> None:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=8192):
            self.add_batch(pa.Table.from_batches([batch]))

    def add_batch(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self.rules.dedup:
            new = self.seen.add_batch(to_numpy(table.column("h")))
            if not new.all():
                self.dropped["duplicate"] += int((~new).sum())
                table = take_rows(table, np.flatnonzero(new))
                if table.num_rows == 0:
                    return
        u = split_values(to_numpy(table.column("u")))
        group_codes, names = codes(table.column("group"))
        kinds = table.column("kind")
        for k, group in enumerate(names):
            idx = np.flatnonzero(group_codes == k)
            rooms = self.rules.rooms(self.kept[group], self.per_split["valid"][group], self.per_split["test"][group])
            take, dropped = assign(idx, u[idx], self.rules, rooms)
            self.dropped.update(dropped)
            kept = sum(len(rows) for rows in take.values()) + dropped["over_split_cap"]  # (under --max-records)
            if kept == 0:
                continue
            self.kept[group] += kept
            pair = kinds[int(idx[0])].as_py() == "p"
            for split in SPLITS:
                rows = take[split]
                if len(rows) == 0:
                    continue
                key = (split, group)
                w = self.writers.get(key)
                if w is None:
                    w = self.writers[key] = GroupWriter(self.out, split, group, pair, self.rules.shard_size, self.sink)
                w.add_table(select_columns(take_rows(table, rows), pair))
                self.per_split[split][group] += len(rows)

    def close(self) -> tuple[dict, dict, dict]:
        """-> counts {split: {group: n}}, shards {relative path: {sha256, rows}}, dropped {reason: n}."""
        shards: dict[str, dict] = {}
        for key in sorted(self.writers):
            self.writers[key].close()
            shards.update(self.writers[key].done)
        counts = {s: dict(sorted(self.per_split[s].items())) for s in SPLITS}
        return counts, dict(sorted(shards.items())), dict(self.dropped)

    def abort(self) -> None:
        for w in self.writers.values():
            w.abort()
