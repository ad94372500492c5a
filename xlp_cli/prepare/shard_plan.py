"""Finalizing in parallel, step 2 (the driver's): the caps and the shards, planned from counts, not rows.

Input: per (split s, chunk k, group) the new rows and their valid / test candidates, summed over the hash
partitions (partitions.py). Per group, the chunks are walked in stream order, carrying the rooms left under
`--max-records`, `--max-valid`, `--max-test` (finalize.Rooms), exactly as the sequential Finalizer carries its
counters: with the room at a chunk's start known, what the chunk gives each split follows from its counts
(`finalize.assign` on counts). One chunk per group may need its rows: the one in which `--max-records` runs
out (which of its new rows come first decides how many valid / test records it keeps): `resolve` reads that
one chunk (at most --chunk-size rows per group, whatever the size of the input).
Then each (split, group)'s rows, in stream order, are cut into shards of `--shard-size` rows: a ShardSpec
names the chunk segments of one shard and the rooms at each chunk's start, which is all its writer needs
(shard_writer.py). The shards are those of the sequential Finalizer, byte for byte.
"""

from __future__ import annotations

import collections
import dataclasses
from collections import Counter
from typing import Callable

import pyarrow as pa

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.arrow_numpy import group_sums
from xlp_cli.prepare.finalize import SPLITS, Rooms, Rules

# resolve(s, k, group, rooms) -> ({split: rows kept}, dropped): the rows of one chunk, for the one chunk per
# group where --max-records runs out
Resolve = Callable[[int, int, str, Rooms], tuple[dict[str, int], Counter]]


@dataclasses.dataclass(frozen=True)
class Segment:
    s: int  # split index
    k: int  # chunk index
    lo: int  # this shard's rows of the chunk: [lo, hi) of the chunk's rows in the shard's (split, group)
    hi: int
    rooms: Rooms  # the group's rooms at the chunk's start


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    split: str
    group: str
    index: int  # part-NNNNN
    rows: int
    segments: tuple[Segment, ...]

    @property
    def rel(self) -> str:
        return layout.shard_rel(self.split, self.group, f"part-{self.index:05d}.parquet")


@dataclasses.dataclass
class Plan:
    shards: list[ShardSpec]
    counts: dict[str, dict[str, int]]  # {split: {group: rows}}
    dropped: Counter


def chunk_counts(counts: pa.Table) -> pa.Table:
    """Counts (columns s, k, group, new, valid, test) from every partition, summed per (s, k, group), in
    stream order."""
    return group_sums(counts, ["group", "s", "k"], ["new", "valid", "test"])


def _by_counts(new: int, valid: int, test: int, rules: Rules, rooms: Rooms) -> tuple[dict[str, int], Counter]:
    """`finalize.assign` on counts, for a chunk whose new rows all fit under --max-records."""
    dropped: Counter = collections.Counter()
    took = {}
    for split, n, room in (("valid", valid, rooms.valid), ("test", test, rooms.test)):
        took[split] = n if room is None else min(n, room)
        if room is not None and not rules.overflow_to_train:
            dropped["over_split_cap"] += n - took[split]
    took["train"] = new - took["valid"] - took["test"] - dropped["over_split_cap"]
    return took, dropped


def plan(counts: pa.Table, duplicates: int, rules: Rules, resolve: Resolve) -> Plan:
    """The shards and the manifest's counts and drops, from the partitions' counts (columns s, k, group, new,
    valid, test) and the number of duplicates they found."""
    rows: dict[tuple[str, str], list[tuple[int, int, int, Rooms]]] = collections.defaultdict(list)
    per_split: dict[str, Counter] = {split: collections.Counter() for split in SPLITS}
    dropped: Counter = collections.Counter()
    if duplicates:
        dropped["duplicate"] = duplicates
    table = chunk_counts(counts) if counts.num_rows else None
    columns = table.to_pydict() if table is not None else {}
    kept: Counter = collections.Counter()
    for group, s, k, new, valid, test in zip(*(columns.get(c, []) for c in ("group", "s", "k", "new", "valid",
                                                                               "test"))):
        if new == 0:
            continue
        rooms = rules.rooms(kept[group], per_split["valid"][group], per_split["test"][group])
        if rooms.records == 0:
            dropped["over_max_records"] += new
            continue
        if rooms.records is not None and new > rooms.records:
            took, more = resolve(s, k, group, rooms)
        else:
            took, more = _by_counts(new, valid, test, rules, rooms)
        dropped.update(more)
        kept[group] += min(new, rooms.records if rooms.records is not None else new)
        for split in SPLITS:
            if took[split]:
                rows[(split, group)].append((s, k, took[split], rooms))
                per_split[split][group] += took[split]
    return Plan(_cut(rows, rules.shard_size), {split: dict(sorted(per_split[split].items())) for split in SPLITS},
                dropped)


def _cut(rows: dict[tuple[str, str], list[tuple[int, int, int, Rooms]]], size: int) -> list[ShardSpec]:
    """Each (split, group)'s rows, in stream order, in shards of `size` rows."""
    shards = []
    for (split, group), chunks in sorted(rows.items()):
        segments: list[Segment] = []
        filled = index = 0
        for s, k, n, rooms in chunks:
            lo = 0
            while lo < n:
                step = min(n - lo, size - filled)
                segments.append(Segment(s, k, lo, lo + step, rooms))
                lo += step
                filled += step
                if filled == size:
                    shards.append(ShardSpec(split, group, index, filled, tuple(segments)))
                    segments, filled, index = [], 0, index + 1
        if filled:
            shards.append(ShardSpec(split, group, index, filled, tuple(segments)))
    return shards
