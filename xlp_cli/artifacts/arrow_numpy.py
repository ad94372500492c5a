"""Arrow columns as numpy arrays without pandas, and an `xlp` process that never imports pandas through pyarrow.

pyarrow imports pandas (when it is installed) the first time `pa.array(...)` or `Array.to_numpy()` runs, to check
whether its argument is a pandas object: ~0.4 s of CPU and ~40 MB of memory in every `xlp` process, for a
library no stage uses. `without_pandas()` (called by the console script, entry.py) lets pyarrow's lazy pandas
importer try once while the import is refused, so it records "no pandas"; an explicit conversion such as
`Table.to_pandas()` still imports pandas then (pyarrow retries the import where pandas is required).
`to_numpy(column)` reads a fixed-width column's values buffer directly (Array.to_numpy would import pandas).
The rest does what prepare needs of Arrow without the modules its shortcuts import: `from_numpy` (pa.array on a
numpy array imports numpy.ma), `take`, `take_rows`, `codes`, `equals` and `group_sums` (Arrow's take, filter,
dictionary_encode and group_by import pyarrow.compute, and group_by pyarrow.dataset with pandas).
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


def from_numpy(values: np.ndarray, type: Any = None) -> Any:
    """`pa.array(values, type)` for a 1-d numpy array of a fixed-width type, from its buffer: pa.array on a numpy
    array checks for numpy.ma's masked arrays, which imports numpy.ma (~6 ms of CPU) in every `xlp prepare`."""
    import pyarrow as pa  # (this module loads at CLI start-up, where `xlp text` does without pyarrow)

    values = np.ascontiguousarray(values)
    t = type if type is not None else pa.from_numpy_dtype(values.dtype)
    if values.ndim != 1 or np.dtype(_DTYPES.get(str(t), object)) != values.dtype:
        return pa.array(values, t)
    return pa.Array.from_buffers(t, len(values), [None, pa.py_buffer(values)])


def _flat_strings(column: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A string or binary column (Array or ChunkedArray, 32-bit offsets) as (offsets: int64, n + 1 of them, from
    0; its bytes: uint8; valid: bool per row, None without nulls), the chunks joined."""
    chunks = column.chunks if hasattr(column, "chunks") else [column]
    offsets, datas, valids, base = [np.zeros(1, np.int64)], [], [], 0
    any_null = False
    for c in chunks:
        n = len(c)
        if not n:
            continue
        bufs = c.buffers()
        off = np.frombuffer(bufs[1], np.int32, n + 1, c.offset * 4).astype(np.int64)
        size = int(off[-1] - off[0])
        datas.append(np.frombuffer(bufs[2], np.uint8, size, int(off[0])) if bufs[2] is not None and size
                     else np.empty(0, np.uint8))
        offsets.append(off[1:] - off[0] + base)
        base += size
        if c.null_count:
            any_null = True
            bits = np.unpackbits(np.frombuffer(bufs[0], np.uint8), bitorder="little")
            valids.append(bits[c.offset:c.offset + n].astype(bool))
        else:
            valids.append(np.ones(n, bool))
    data = np.concatenate(datas) if len(datas) > 1 else (datas[0] if datas else np.empty(0, np.uint8))
    return np.concatenate(offsets), data, (np.concatenate(valids) if any_null else None)


def _gather(offsets: np.ndarray, data: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The strings at `rows` of (offsets, data): their offsets (int64, from 0) and bytes. Runs of consecutive rows
    (most of them, as prepare selects rows) are copied a slice at a time."""
    lengths = offsets[rows + 1] - offsets[rows]
    out = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    if not len(rows):
        return out, np.empty(0, np.uint8)
    breaks = np.flatnonzero(rows[1:] != rows[:-1] + 1) + 1
    firsts, lasts = rows[np.r_[0, breaks]], rows[np.r_[breaks, len(rows)] - 1]
    pieces = [data[a:b] for a, b in zip(offsets[firsts].tolist(), offsets[lasts + 1].tolist())]
    return out, (np.concatenate(pieces) if len(pieces) > 1 else pieces[0].copy())


_STRINGS = {"string", "binary"}  # the 32-bit-offset types take() gathers itself


def take(column: Any, rows: Any) -> Any:
    """`column.take(rows)` (an Array or ChunkedArray; rows: integer positions) -> Array, in numpy for the column
    types of prepare's chunk files (strings with or without nulls, fixed-width without nulls); Arrow's take for
    others. (Arrow's take, filter, dictionary_encode and combine_chunks import pyarrow.compute, whose ~300
    function wrappers cost ~45 ms of CPU at the first call: in every `xlp prepare`.)"""
    import pyarrow as pa  # (this module loads at CLI start-up, where `xlp text` does without pyarrow)

    rows = np.asarray(rows, np.int64)
    n = len(column)
    if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= n):
        raise IndexError(f"take: rows outside 0..{n - 1}")
    t = column.type
    if n and column.null_count == n:
        return pa.nulls(len(rows), t)
    if str(t) in _DTYPES and not column.null_count:
        return from_numpy(to_numpy(column)[rows], t)
    if str(t) in _STRINGS:
        offsets, data, valid = _flat_strings(column)
        off, got = _gather(offsets, data, rows)
        if off[-1] < 1 << 31:
            validity = None
            if valid is not None:
                mask = valid[rows]
                validity = pa.py_buffer(np.packbits(mask, bitorder="little"))
            buffers = [validity, pa.py_buffer(off.astype(np.int32)), pa.py_buffer(got)]
            return pa.Array.from_buffers(t, len(rows), buffers, null_count=-1 if valid is not None else 0)
    return column.take(pa.array(rows))


def take_rows(table: Any, rows: Any) -> Any:
    """`table.take(rows)`, column by column through `take`."""
    import pyarrow as pa

    return pa.Table.from_arrays([take(c, rows) for c in table.columns], schema=table.schema)


def codes(column: Any) -> tuple[np.ndarray, list[str]]:
    """A string column without nulls dictionary-encoded: (each row's code: int64, the words in order of first
    occurrence), as `dictionary_encode` gives them. Short words (group names: languages, pairs) in numpy; others
    through Python."""
    offsets, data, valid = _flat_strings(column)
    if valid is not None:
        raise ValueError("codes: the column has nulls")
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    width = int(lengths.max()) if n else 0
    if n and int(lengths.min()) == width and (data.reshape(n, width) == data[:width]).all():
        return np.zeros(n, np.int64), [bytes(data[:width]).decode("utf-8")]  # one word (a chunk of one language)
    if n and width <= 32 and not (data == 0).any():  # (NUL-free: a fixed-width bytes value pads with NULs)
        matrix = np.zeros((n, max(width, 1)), np.uint8)
        at = np.arange(offsets[-1], dtype=np.int64)
        row = np.repeat(np.arange(n), lengths)
        matrix[row, at - offsets[row]] = data
        fixed = matrix.view(f"S{max(width, 1)}").ravel()
        words, first, inverse = np.unique(fixed, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # np.unique sorts: back to first occurrence
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        return rank[inverse.ravel()], [w.decode("utf-8") for w in words[order]]
    seen: dict[str, int] = {}
    values = column.to_pylist()
    return np.fromiter((seen.setdefault(v, len(seen)) for v in values), np.int64, len(values)), list(seen)


def equals(column: Any, value: str) -> np.ndarray:
    """A boolean mask of the rows of a string column (no nulls) equal to `value`: `pc.equal(column, value)` without
    pyarrow.compute (see `take`), nor pandas."""
    found, words = codes(column)
    if value not in words:
        return np.zeros(len(found), bool)
    return found == words.index(value)


def group_sums(table: Any, keys: list[str], sums: list[str], count: str | None = None) -> Any:
    """`table.group_by(keys).aggregate(sums' "sum", and with `count` the rows as that column)`, sorted by the keys,
    in numpy. Keys: integer or string columns; sums: integer columns without nulls. (Acero's group_by imports
    pyarrow.dataset, and with it pandas, and costs ~40 ms at its first call: too much for counts of a few rows.)"""
    import pyarrow as pa  # (this module loads at CLI start-up, where `xlp text` does without pyarrow)

    keys_codes, outs = [], []  # per key: int64 codes in sort order; how to turn a code back into the key's value
    for name in keys:
        column = table.column(name)
        if pa.types.is_string(column.type):
            found, words = codes(column)
            by_word = np.argsort(np.array(words, dtype=object), kind="stable")  # sorted place -> dictionary code
            rank = np.empty(len(words), np.int64)
            rank[by_word] = np.arange(len(words))
            keys_codes.append(rank[found])
            outs.append(lambda c, w=words, b=by_word, t=column.type: pa.array([w[i] for i in b[c]], t))
        else:
            keys_codes.append(to_numpy(column).astype(np.int64))
            outs.append(lambda c, t=column.type: from_numpy(c.astype(_DTYPES[str(t)]), t))
    n = table.num_rows
    order = np.lexsort(keys_codes[::-1]) if n else np.zeros(0, np.int64)
    sorted_codes = [c[order] for c in keys_codes]
    changes = np.zeros(max(n - 1, 0), bool)
    for c in sorted_codes:
        changes |= c[1:] != c[:-1]
    starts = np.flatnonzero(np.r_[n > 0, changes])
    columns = {name: back(c[starts]) for name, c, back in zip(keys, sorted_codes, outs)}
    if count is not None:
        columns[count] = from_numpy(np.diff(np.r_[starts, n]).astype(np.int64))
    for name in sums:
        values = to_numpy(table.column(name)).astype(np.int64)[order]
        columns[name] = from_numpy(np.add.reduceat(values, starts) if n else np.zeros(0, np.int64))
    return pa.table(columns)
