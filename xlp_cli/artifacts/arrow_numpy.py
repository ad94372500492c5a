"""Arrow columns as numpy arrays without pandas, and an `xlp` process that never imports pandas through pyarrow.

pyarrow imports pandas (when it is installed) the first time `pa.array(...)` or `Array.to_numpy()` runs, to check
whether its argument is a pandas object: ~0.4 s of CPU and ~40 MB of memory in every `xlp` process, for a
library no stage uses. `without_pandas()` (called by the console script, entry.py) lets pyarrow's lazy pandas
importer try once while the import is refused, so it records "no pandas"; an explicit conversion such as
`Table.to_pandas()` still imports pandas then (pyarrow retries the import where pandas is required).
`to_numpy(column)` reads a fixed-width column's values buffer directly (Array.to_numpy would import pandas).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

_DTYPES = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
           "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float": np.float32, "double": np.float64}


class _RefusePandas:
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not used by xlp")
        return None


def without_pandas() -> None:
    """Make pyarrow treat pandas as absent in this process (a no-op once pandas is imported)."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    shim = getattr(getattr(pa, "lib", None), "_pandas_api", None)
    if shim is None:
        return
    refuse = _RefusePandas()
    sys.meta_path.insert(0, refuse)
    try:
        shim.have_pandas  # the shim's one import attempt, refused: it records "no pandas"
    except Exception:  # noqa: BLE001 - another pyarrow: leave it as it is
        pass
    finally:
        sys.meta_path.remove(refuse)


def to_numpy(column: Any) -> np.ndarray:
    """A fixed-width Arrow Array or ChunkedArray without nulls as a numpy array (copied once when chunked)."""
    chunks = column.chunks if hasattr(column, "chunks") else [column]
    dtype = _DTYPES.get(str(column.type))
    if dtype is None:
        raise TypeError(f"to_numpy: unsupported Arrow type {column.type}")
    parts = []
    for c in chunks:
        if c.null_count:
            raise ValueError("to_numpy: the column has nulls")
        buf = c.buffers()[1]
        parts.append(np.frombuffer(buf, dtype, len(c), c.offset * np.dtype(dtype).itemsize) if len(c) else np.empty(0, dtype))
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype)


def _dictionary(column: Any) -> tuple[Any, list[str]]:
    """A string column (Array or ChunkedArray) dictionary-encoded, and its dictionary's words."""
    column = column.combine_chunks() if hasattr(column, "chunks") else column
    encoded = column.dictionary_encode()
    return encoded, encoded.dictionary.to_pylist()


def equals(column: Any, value: str) -> np.ndarray:
    """A boolean mask of the rows of a string column (no nulls) equal to `value`: `pc.equal(column, value)` without
    a module-level import of pyarrow.compute (~30 ms at every start of `xlp prepare`), nor pandas."""
    encoded, words = _dictionary(column)
    if value not in words:
        return np.zeros(len(encoded), bool)
    return to_numpy(encoded.indices) == words.index(value)


def group_sums(table: Any, keys: list[str], sums: list[str], count: str | None = None) -> Any:
    """`table.group_by(keys).aggregate(sums' "sum", and with `count` the rows as that column)`, sorted by the keys,
    in numpy. Keys: integer or string columns; sums: integer columns without nulls. (Acero's group_by imports
    pyarrow.dataset, and with it pandas, and costs ~40 ms at its first call: too much for counts of a few rows.)"""
    import pyarrow as pa  # (this module loads at CLI start-up, where `xlp text` does without pyarrow)

    codes, outs = [], []  # per key: int64 codes in sort order; how to turn a code back into the key's value
    for name in keys:
        column = table.column(name)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            encoded, words = _dictionary(column)
            by_word = np.argsort(np.array(words, dtype=object), kind="stable")  # sorted place -> dictionary code
            rank = np.empty(len(words), np.int64)
            rank[by_word] = np.arange(len(words))
            codes.append(rank[to_numpy(encoded.indices)])
            outs.append(lambda c, d=encoded.dictionary, b=by_word: d.take(pa.array(b[c])))
        else:
            codes.append(to_numpy(column).astype(np.int64))
            outs.append(lambda c, t=column.type: pa.array(c.astype(_DTYPES[str(t)]), t))
    n = table.num_rows
    order = np.lexsort(codes[::-1]) if n else np.zeros(0, np.int64)
    sorted_codes = [c[order] for c in codes]
    changes = np.zeros(max(n - 1, 0), bool)
    for c in sorted_codes:
        changes |= c[1:] != c[:-1]
    starts = np.flatnonzero(np.r_[n > 0, changes])
    columns = {name: back(c[starts]) for name, c, back in zip(keys, sorted_codes, outs)}
    if count is not None:
        columns[count] = pa.array(np.diff(np.r_[starts, n]).astype(np.int64))
    for name in sums:
        values = to_numpy(table.column(name)).astype(np.int64)[order]
        columns[name] = pa.array(np.add.reduceat(values, starts) if n else np.zeros(0, np.int64))
    return pa.table(columns)
