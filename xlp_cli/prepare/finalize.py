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
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli.artifacts.arrow_numpy import to_numpy
from xlp_cli.prepare.dedup import HashSet64
from xlp_cli.prepare.shards import GroupWriter

SPLITS = ("train", "valid", "test")
_MONO = {"id": "id", "source": "source", "lang": "lang1", "raw": "raw1", "text": "text1"}
_PAIR = ["id", "source", "lang1", "lang2", "raw1", "raw2", "text1", "text2"]


class Finalizer:
    def __init__(self, out: Path, *, valid_fraction: float, test_fraction: float, max_valid: int, max_test: int,
                 max_records: int, shard_size: int, dedup: bool = True, seen: HashSet64 | None = None,
                 overflow_to_train: bool = True, sink: Any = None):
        self.out = out
        self.sink = sink  # given to the shard writers (bpe/alongside.py)
        self.overflow_to_train = overflow_to_train
        self.dedup = dedup
        self.vf = valid_fraction
        self.tf = valid_fraction + test_fraction
        self.caps = {"valid": max_valid, "test": max_test}
        self.max_records = max_records
        self.shard_size = shard_size
        self.seen = HashSet64() if seen is None else seen  # or any object with its add_batch (engine_ray)
        self.writers: dict[tuple[str, str], GroupWriter] = {}
        self.kept: collections.Counter[str] = collections.Counter()
        self.per_split: dict[str, collections.Counter[str]] = {s: collections.Counter() for s in SPLITS}
        self.dropped: collections.Counter[str] = collections.Counter()

    def add_file(self, path: Path) -> None:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=8192):
            self.add_batch(pa.Table.from_batches([batch]))

    def add_batch(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self.dedup:
            new = self.seen.add_batch(to_numpy(table.column("h")))
            if not new.all():
                self.dropped["duplicate"] += int((~new).sum())
                table = table.filter(pa.array(new))
                if table.num_rows == 0:
                    return
        u = to_numpy(table.column("u")).astype(np.float64) / float(2**64)
        groups = table.column("group").combine_chunks().dictionary_encode()
        codes = to_numpy(groups.indices)
        names = groups.dictionary.to_pylist()
        kinds = table.column("kind")
        for k, group in enumerate(names):
            idx = np.flatnonzero(codes == k)
            if self.max_records:
                room = max(0, self.max_records - self.kept[group])
                if len(idx) > room:
                    self.dropped["over_max_records"] += len(idx) - room
                    idx = idx[:room]
            if len(idx) == 0:
                continue
            self.kept[group] += len(idx)
            uu = u[idx]
            take = {"valid": idx[uu < self.vf], "test": idx[(uu >= self.vf) & (uu < self.tf)]}
            is_train = np.ones(len(table), dtype=bool)
            for split in ("valid", "test"):  # past its cap a valid/test record goes to train (or is dropped)
                is_train[take[split]] = False
                cap = self.caps[split]
                if cap:
                    room = max(0, cap - self.per_split[split][group])
                    if self.overflow_to_train:
                        is_train[take[split][room:]] = True
                    else:
                        self.dropped["over_split_cap"] += len(take[split][room:])
                    take[split] = take[split][:room]
            take["train"] = idx[is_train[idx]]
            pair = kinds[int(idx[0])].as_py() == "p"
            for split in SPLITS:
                rows = take[split]
                if len(rows) == 0:
                    continue
                part = table.take(pa.array(rows))
                if pair:
                    part = part.select(_PAIR)
                else:
                    part = pa.table({name: part.column(col) for name, col in _MONO.items()})
                key = (split, group)
                w = self.writers.get(key)
                if w is None:
                    w = self.writers[key] = GroupWriter(self.out, split, group, pair, self.shard_size, self.sink)
                w.add_table(part)
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
