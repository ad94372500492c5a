"""Exact de-duplication with 8 bytes per kept record: a set of 64-bit content hashes.

The hashes are kept in sorted numpy runs whose sizes grow geometrically (a small log-structured merge
tree): a batch is looked up with `searchsorted` in every run, and runs of similar size are merged, so
inserting N hashes costs O(N log N) time and about 8*N bytes (16*N briefly while two runs merge).
A Python `set` of ints would take ~60 bytes per record.
"""

from __future__ import annotations

import numpy as np


class HashSet64:
    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []  # sorted, disjoint, sizes decreasing
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def _contains(self, hashes: np.ndarray) -> np.ndarray:
        found = np.zeros(len(hashes), dtype=bool)
        for run in self._runs:
            pos = np.searchsorted(run, hashes)
            pos[pos == len(run)] = 0
            found |= run[pos] == hashes
        return found

    def add_batch(self, hashes: np.ndarray) -> np.ndarray:
        """Insert `hashes` (in order); returns a mask of the ones that are new (the first of equal ones in
        the batch counts as new, later ones as duplicates)."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if len(hashes) == 0:
            return np.zeros(0, dtype=bool)
        _, first = np.unique(hashes, return_index=True)
        new = np.zeros(len(hashes), dtype=bool)
        new[first] = True
        new &= ~self._contains(hashes)
        fresh = np.sort(hashes[new])
        if len(fresh):
            self._runs.append(fresh)
            self.size += len(fresh)
            while len(self._runs) > 1 and len(self._runs[-2]) <= 2 * len(self._runs[-1]):
                b = self._runs.pop()
                a = self._runs.pop()
                merged = np.concatenate([a, b])
                merged.sort(kind="mergesort")
                self._runs.append(merged)
        return new
