"""The fast paths of `xlp prepare --source text` (issue 18): the block reader of plain files gives exactly the
chunks, problems and facts of the record-by-record reader, and the `xlp` process keeps pandas unloaded while
pyarrow columns become numpy arrays without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sources_helpers import SRC_FIXTURES
from xlp_cli.artifacts.arrow_numpy import to_numpy
from xlp_cli.prepare import splits
from xlp_cli.prepare.records import SourceOptions, Split
from xlp_cli.prepare.sources import text as text_source


def _lines() -> list[bytes]:
    rng = np.random.default_rng(3)
    out = [b"\xef\xbb\xbf  first line, after a byte order mark \r"]
    for i in range(700):
        r = rng.random()
        if r < 0.03:
            out.append(b"broken \xff\xfe utf-8 %d" % i)
        elif r < 0.07:
            out.append(b" \t ")
        elif r < 0.08:
            out.append(b"long " * int(rng.integers(40, 90)))  # longer than the test's block
        else:
            out.append(("line %d caf\u00e9\u00a0%s \u2028 end\r" % (i, "w " * int(rng.integers(0, 12)))).encode())
    return out


def _chunks(path: Path, on_error: str, size: int, start: int, fast: bool, monkeypatch) -> list:
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(text_source, "read_tasks", lambda *a: None)
        m.setattr(text_source, "_BLOCK", 97)  # many block boundaries, lines longer than a block
        got = splits.cut(Split("text", "file", [str(path)]), SourceOptions(langs=["en"]), on_error, size, start)
        return [(c, n, {k: v for k, v in meta.items() if k != "read_bytes"}) for c, n, meta in got]


@pytest.mark.parametrize("ending", [b"\n", b""])
@pytest.mark.parametrize("on_error,size,start", [("skip", 50, 0), ("skip", 37, 120), ("skip", 50, 100),
                                                 ("raise", 50, 0), ("skip", 1000, 5000)])
def test_block_reader_gives_the_same_chunks(tmp_path, monkeypatch, ending, on_error, size, start):
    path = tmp_path / "mixed.en.txt"
    path.write_bytes(b"\n".join(_lines()) + ending)
    slow = _chunks(path, on_error, size, start, False, monkeypatch)
    fast = _chunks(path, on_error, size, start, True, monkeypatch)
    assert fast == slow
    assert sum(n for _, n, _ in slow) > 0 or start or on_error == "raise"
    if on_error == "skip" and not start:
        problems = [p for _, _, meta in slow for p in meta["problems"]]
        assert problems and all("invalid UTF-8" in p[0] for p in problems)


@pytest.mark.parametrize("data", [b"", b"\n \n\t\n", b"only line", b"\xff\nok\n", "hi\nthere\n".encode("utf-16"),
                                  b"a\r\n\r\nb\r\n"])
def test_block_reader_edge_files(tmp_path, monkeypatch, data):
    path = tmp_path / "edge.en.txt"
    path.write_bytes(data)
    for on_error in ("skip", "raise"):
        assert _chunks(path, on_error, 2, 0, True, monkeypatch) == _chunks(path, on_error, 2, 0, False, monkeypatch)


def test_to_numpy_reads_the_buffers():
    chunked = pa.chunked_array([pa.array(np.arange(10, dtype=np.uint64)).slice(3, 4), pa.array([2**64 - 1], pa.uint64())])
    assert to_numpy(chunked).tolist() == [3, 4, 5, 6, 2**64 - 1]
    assert to_numpy(pa.array([1, -2], pa.int32()).slice(1)).tolist() == [-2]
    assert to_numpy(pa.chunked_array([], pa.int64())).tolist() == []
    with pytest.raises(ValueError):
        to_numpy(pa.array([1, None], pa.int64()))
    with pytest.raises(TypeError):
        to_numpy(pa.array(["a"]))


@pytest.mark.parametrize("source", ["text", "wikipedia"])
def test_xlp_process_does_not_load_pandas_but_can_still_convert(tmp_path, source):
    """The console script's process: pyarrow's conversions run without importing pandas (~0.1 s of CPU, ~35 MB;
    pyarrow imports it for a type it has to infer, `pc.equal(column, 1)`, Acero's `group_by` and `pq.read_table`),
    nor pyarrow.compute (~45 ms: Arrow's take, filter and dictionary_encode import it; arrow_numpy does them),
    nor numpy.ma (~6 ms: `pa.array` of a numpy array imports it; arrow_numpy.from_numpy does without),
    and an explicit `to_pandas()` still works there. `wikipedia`: 2 worker threads, hence the partitioned
    finalizer (de-duplication, counts per split, the plan, the shard writers)."""
    if source == "text":
        src = tmp_path / "news.en.txt"
        src.write_text("Hello, World!\nA second line.\nAnd a third one.\nHello, World!\n", encoding="utf-8")
        args = ["--lang", "en", str(src), "--valid-fraction", "0.3", "--test-fraction", "0.3"]
    else:
        args = ["--source", "wikipedia", "--lang", "de", str(SRC_FIXTURES / "wiki_tiny.xml"), "--workers", "2",
                "--worker-mode", "threads", "--valid-fraction", "0.3", "--test-fraction", "0.3"]
    code = ("import sys; from xlp_cli.cli.entry import main; "
            f"sys.argv = ['xlp', 'prepare', *{args!r}, '--out', {str(tmp_path / 'out')!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print('pandas' in sys.modules, 'pyarrow.compute' in sys.modules, 'numpy.ma' in sys.modules)\n"
            "import pyarrow as pa; print(pa.table({'a': [1, 2]}).to_pandas()['a'].sum())")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split()[-4:] == ["False", "False", "False", "3"], res.stdout  # (pyarrow.compute ~45 ms, numpy.ma ~6)


def test_take_and_codes_are_arrows_take_and_dictionary_encode():
    """arrow_numpy.take / take_rows / codes against Arrow's take and dictionary_encode: strings with and without
    nulls, all-null and integer columns, chunked and sliced columns, empty selections; codes in order of first
    occurrence, through numpy for short words and through Python for long ones or ones with a NUL."""
    from xlp_cli.artifacts.arrow_numpy import codes, from_numpy, take, take_rows

    rng = np.random.default_rng(3)
    words = ["vi", "de", "\u00e9l", "", "de-fr", "x" * 40, "a\x00b"]
    values = [None if rng.random() < 0.1 else words[int(rng.integers(0, len(words)))] for _ in range(300)]
    table = pa.concat_tables([pa.table({"s": pa.array(values[a:b], pa.string()), "n": pa.nulls(b - a, pa.string()),
                                        "h": pa.array(np.arange(a, b, dtype=np.uint64))})
                              for a, b in ((0, 120), (120, 120), (120, 300))])
    sliced = table.slice(7, 250)
    for t in (table, sliced, table.combine_chunks()):
        for rows in (rng.integers(0, t.num_rows, 80), np.arange(t.num_rows)[::-1], np.zeros(0, np.int64)):
            got, want = take_rows(t, rows), t.take(pa.array(rows))
            assert got.equals(want) and got.schema == t.schema
            assert take(t.column("s"), rows).to_pylist() == want.column("s").to_pylist()
    with pytest.raises(IndexError):
        take(table.column("h"), [0, table.num_rows])
    for array in (np.arange(5, dtype=np.uint64), np.arange(10, dtype=np.int32)[::3], np.zeros(0, np.int8),
                  np.array([True, False])):
        assert from_numpy(array).equals(pa.array(array))
    assert from_numpy(np.arange(3, dtype=np.int64), pa.int64()).type == pa.int64()
    for col in ([w for w in values if w is not None], ["de", "vi", "de", "fr"], ["a\x00b", "a", "a\x00b"], [],
                ["vi"] * 7, [""] * 3, ["vi", "vj"] * 3):
        arr = pa.chunked_array([pa.array(col[:5], pa.string()), pa.array(col[5:], pa.string())])
        found, names = codes(arr)
        enc = arr.combine_chunks().dictionary_encode()
        assert names == enc.dictionary.to_pylist() and found.tolist() == enc.indices.to_pylist()


def test_group_sums_equals_arrow_group_by_sorted_by_the_keys():
    """`group_sums` (numpy) and `equals` against Acero's `group_by(...).aggregate(...)` sorted by the keys: string and integer
    keys, chunked columns, an empty table."""
    from xlp_cli.artifacts.arrow_numpy import equals, group_sums

    rng = np.random.default_rng(7)
    n = 500
    words = np.array(["vi", "de", "\u00e9l", "en", "de-fr", ""], dtype=object)
    parts = [pa.table({"g": pa.array(list(words[rng.integers(0, len(words), m)]), pa.string()),
                       "k": pa.array(rng.integers(-3, 4, m).astype(np.int32)),
                       "v": pa.array(rng.integers(0, 9, m).astype(np.int64)),
                       "t": pa.array(rng.integers(0, 2, m).astype(np.int64))}) for m in (n, 0, 37)]
    table = pa.concat_tables(parts)
    for keys in (["g", "k"], ["k", "g"], ["k"], ["g"]):
        want = table.group_by(keys).aggregate([("v", "sum"), ("t", "sum"), ("v", "count")])
        want = want.sort_by([(k, "ascending") for k in keys])
        got = group_sums(table, keys, ["v", "t"], count="n")
        for k in keys:
            assert got.column(k).to_pylist() == want.column(k).to_pylist(), keys
            assert got.schema.field(k).type == table.schema.field(k).type
        assert got.column("v").to_pylist() == want.column("v_sum").to_pylist()
        assert got.column("t").to_pylist() == want.column("t_sum").to_pylist()
        assert got.column("n").to_pylist() == want.column("v_count").to_pylist()
    empty = group_sums(table.slice(0, 0), ["g", "k"], ["v"], count="n")
    assert empty.num_rows == 0 and empty.column_names == ["g", "k", "n", "v"]
    for word in ("de", "", "absent"):  # and `equals`, the rows of a string column equal to a value
        assert equals(table.column("g"), word).tolist() == [g == word for g in table.column("g").to_pylist()]


def test_native_record_hashes_equal_the_python_ones():
    """Record ids (sha1) and content hashes (blake2b-128) of the native path equal `record_id` and
    `content_hashes` for texts of every length around the hash block sizes, one source/language per chunk or
    several (the Python path), with and without the SHA-NI block function."""
    from xlp_cli.prepare import process

    rng = np.random.default_rng(5)
    alphabet = list("ab \x00\u00e9\u0416\u4e2d\U0001f600\t")
    texts = ["".join(rng.choice(alphabet, size=n)) for n in list(range(0, 300)) + list(rng.integers(0, 3000, 50))]
    for tasks in ([("m", "en", t, "text") for t in texts],
                  [("m", "en" if i % 3 else "fr", t, "opus" if i % 5 else "text") for i, t in enumerate(texts)]):
        ids, digests = process._hashes(tasks, texts, [t[1] for t in tasks], [t[3] for t in tasks])
        ids = ids.to_pylist() if isinstance(ids, pa.Array) else ids
        assert ids == [process.record_id(t[3], t[1], t[2]) for t in tasks]
        hu = np.frombuffer(digests, dtype="<u8").reshape(-1, 2).tolist()
        assert hu == [list(process.content_hashes(f"{t[1]}\x00{t[2]}")) for t in tasks]
    # SHA-1 runs on the CPU's SHA extensions where it has them; the portable code gives the same digests
    from xlp_cli.text.native import module

    for portable in (False, True):
        ids, _ = module().record_hashes("text\x00en\x00", "en\x00", texts, portable)
        assert ids.decode() == "".join(process.record_id("text", "en", t) for t in texts), portable


def test_native_length_filter_equals_the_python_one():
    """prepare's native length filter (`length_problems`) drops exactly what `_length_problem` drops, for every
    limit, on texts with single, double, leading and trailing spaces, tabs, no-break and other Unicode spaces,
    and whitespace-only texts."""
    from xlp_cli.prepare import process
    from xlp_cli.text.native import module

    rng = np.random.default_rng(7)
    alphabet = list("ab  \t\u00a0\u3000\u2028\u0416\U0001f600\x1c")
    texts = ["", " ", "\t", "\u00a0\u3000", "a", " a", "a ", "a  b", "a \tb", "a\u00a0b", "a b c"]
    texts += ["".join(rng.choice(alphabet, size=n)) for n in rng.integers(0, 40, 2000)]
    names = process._LENGTH_PROBLEMS
    for lo, hi in [(1, 0), (2, 3), (0, 1), (3, 0)]:
        process._LIMITS = (lo, hi)
        try:
            want = [process._length_problem(t) for t in texts]
        finally:
            process._LIMITS = (1, 0)
        got = module().length_problems(texts, lo, hi)
        assert [names[c] for c in got] == want, (lo, hi)
        assert sum(1 for w in want if w) > 0
