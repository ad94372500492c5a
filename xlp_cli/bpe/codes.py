"""fastBPE-format BPE: learn merge codes, write codes and vocab, apply (native extensions; they read and check the files).

Formats (those of fastBPE, https://github.com/glample/fastBPE):
- codes: one merge per line, `left right count`; the last symbol of a word carries `</w>`.
- vocab: one subword per line, `token count`, most frequent first (ties: byte order); a token that
  continues into the next one ends in `@@`.

Learning runs in `_learnbpe` and applying in `_applybpe` (C++, built by `pip install -e .`), once per unique
word (the binary's behaviour, without re-encoding every occurrence); fastBPE's Python module is not used.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from xlp_cli.artifacts.files import atomic_path
from xlp_cli.bpe.filter import load_applier
from xlp_cli.core.errors import BadInput, WorkFailed


@dataclass(frozen=True)
class Merge:
    left: str
    right: str
    count: int


# ---------------------------------------------------------------- learning
def native_learner():
    """The compiled learner class, or a one-line error saying how to build it."""
    try:
        from xlp_cli.bpe._learnbpe import Learner  # (the compiled extension: not built is a one-line error)
    except ImportError as e:  # pragma: no cover - depends on the install
        raise WorkFailed(f"the native BPE learner is not built ({e}); run `make setup` or `pip install -e .`") from None
    return Learner


def learn_merges(chunks: Iterable[bytes], n_merges: int) -> tuple[list[Merge], list[tuple[str, int]], int]:
    """Count the words of UTF-8 `chunks` (lines joined by '\\n'; words split on ' ' and '\\n' like fastBPE)
    and learn up to `n_merges` merges. Returns (merges, word counts, running words)."""
    learner = native_learner()()
    for chunk in chunks:
        learner.add(chunk)
    words = [(w.decode("utf-8", errors="surrogateescape"), c) for w, c in learner.words()]
    n_tokens = learner.n_tokens
    raw = learner.learn(int(n_merges))
    merges = [Merge(a.decode("utf-8", errors="surrogateescape"), b.decode("utf-8", errors="surrogateescape"), c)
              for a, b, c in raw]
    return merges, words, n_tokens


# ---------------------------------------------------------------- files
def write_codes(path: Path, merges: list[Merge]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for m in merges:
            f.write(f"{m.left} {m.right} {m.count}\n")


def write_vocab(path: Path, entries: list[tuple[str, int]]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for tok, c in entries:
            f.write(f"{tok} {c}\n")


# ---------------------------------------------------------------- applying
_NEWLINE = "a text line contains a newline character; prepared text holds one sentence per record"

class BpeCodec:
    """Apply fastBPE codes (and optionally restrict to a vocab) exactly like `fast applybpe`.

    The native loader checks both files (UTF-8, line format, repeated merges or tokens, vocab tokens the codes
    cannot produce: docs/bpe.md), naming the bad line; fastBPE itself aborts the process on a malformed file.
    `check` is kept for callers; the files are always checked."""

    def __init__(self, codes_path: Path, vocab_path: Path | None = None, *, check: bool = True):
        self.codes_path = Path(codes_path)
        self.vocab_path = Path(vocab_path) if vocab_path else None
        self._bpe = load_applier(self.codes_path, self.vocab_path)
        self._ids_for: list[str] | None = None  # the token list given to the applier for encode_arrow
        self._ids_lock = threading.Lock()  # (encode_arrow runs in several threads; set_ids clears the cache)
        self._cache: dict[str, str] = {}
        self._tables: dict[int, object] = {}
        self.max_cache = 2_000_000

    def apply_words(self, words: Iterable[str]) -> dict[str, str]:
        """Segment each distinct word once; returns word -> 'sub@@ word'."""
        needed = set(words)
        needed.discard("")
        todo = [w for w in needed if w not in self._cache]
        if len(self._cache) + len(todo) > self.max_cache:  # bound memory; keep this batch's words
            self._cache.clear()
            todo = list(needed)
        if todo:
            self._cache.update(zip(todo, self._segment(todo)))
        return self._cache

    def _segment(self, words: list[str]) -> list[str]:
        return [b.decode("utf-8", "surrogateescape")
                for b in self._bpe.apply_words([w.encode("utf-8", "surrogateescape") for w in words])]

    def apply_lines(self, lines: list[str]) -> list[str]:
        """Byte-identical to `fast applybpe` on these lines: words are split on ' ' only, spaces kept as they are."""
        return self.encode_lines(lines)[0]

    def encode_arrow(self, lines: Any, words: list[str], unk: int = 3, threads: int = 1) -> tuple[Any, Any]:
        """(Arrow string array of subword lines, Arrow list<int32> array of ids) for `lines` (a list of str, or an
        Arrow string array: nulls read as ""); `words[i]` is the token of id i. All natively: splitting,
        segmenting new words, the ids of their pieces (split like str.split(), as XLM's binarization does), and
        the arrays' buffers; no Python object per line."""
        import pyarrow as pa

        with self._ids_lock:
            if self._ids_for is not words:
                self._bpe.set_ids("\n".join(words).encode("utf-8", "surrogateescape"))
                self._ids_for = words
        n = len(lines)
        if isinstance(lines, pa.Array) and lines.type == pa.string():
            if lines.null_count:
                lines = lines.fill_null("")
            _, offsets, data = lines.buffers()
            try:
                text, text_off, ids, id_off = self._bpe.encode_rows(offsets, data if data is not None else b"",
                                                                    lines.offset, n, threads, unk)
            except ValueError:
                raise BadInput(_NEWLINE) from None
        else:
            data = ("\n".join(lines) + "\n").encode("utf-8") if n else b""
            if data.count(b"\n") != n:
                raise BadInput(_NEWLINE)
            text, text_off, ids, id_off = self._bpe.encode_lines(data, threads, unk)
        sub = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(text_off), pa.py_buffer(text)])
        values = pa.Array.from_buffers(pa.int32(), len(ids) // 4, [None, pa.py_buffer(ids)])
        offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(id_off)])
        return sub, pa.ListArray.from_arrays(offsets, values)

    def encode_lines(self, lines: list[str], index: dict[str, int] | None = None, unk: int = 3):
        """(subword lines, flat int32 ids, int32 offsets per line) -- ids only with a dictionary `index`.

        Splitting, de-duplication and mapping back run natively (`_learnbpe.WordTable`); each distinct word is
        segmented once by the native applier and remembered (up to `max_cache` words) across calls."""
        import numpy as np

        from xlp_cli.bpe._learnbpe import WordTable  # (the compiled extension, as in `learner`)

        data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
        if data.count(b"\n") != len(lines):
            raise BadInput("a text line contains a newline character; prepared text holds one sentence per record")
        key = id(index) if index is not None else 0
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = WordTable()
        new = table.unique(data)
        if len(table) + len(new) > self.max_cache:
            table.clear()
            new = table.unique(data)
        if new:
            subs = [b.decode("utf-8") for b in self._bpe.apply_words(new)]
            if index is not None:
                get = index.get
                # XLM's binarization splits subword lines with str.split() (any Unicode space), so do we
                ids = [np.fromiter((get(t, unk) for t in sub.split()), np.int32).tobytes() for sub in subs]
            else:
                ids = [b""] * len(subs)
            table.add(new, [x.encode("utf-8") for x in subs], ids)
        out, flat, offsets = table.apply(data)
        sub_lines = out.decode("utf-8").split("\n")[:-1] if lines else []
        return sub_lines, np.frombuffer(flat, np.int32), np.frombuffer(offsets, np.int32)


def read_merges(path: Path) -> list[tuple[str, str]]:
    """The (left, right) merges of a fastBPE codes file in order, once the native loader has checked the file
    (a bad line is a one-line error naming it)."""
    BpeCodec(path)
    pairs = [line.split(" ") for line in Path(path).read_text(encoding="utf-8").splitlines() if line]
    return [(p[0], p[1]) for p in pairs]


def subword_counts(word_counts: Iterable[tuple[str, int]], codec: BpeCodec) -> list[tuple[str, int]]:
    """The fastBPE vocab of a corpus after BPE (what `fast getvocab` prints on the applied text), computed
    from word counts: count desc, then token byte order."""
    word_counts = [(w, c) for w, c in word_counts if w]
    table = codec.apply_words(w for w, _ in word_counts)
    counts: Counter[str] = Counter()
    for w, c in word_counts:
        for piece in table[w].split(" "):
            counts[piece] += c
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].encode("utf-8", "surrogateescape")))
