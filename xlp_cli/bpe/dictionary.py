"""The token dictionary in XLM's id layout, read from and written to XLM/fastBPE `token count` files.

Ids: `<s>`=0, `</s>`=1, `<pad>`=2, `<unk>`=3, `<special0>`..`<special9>`=4..13, then the file's tokens in
file order (a fastBPE vocab is sorted by count, so: words by count). Reading follows XLM's
`Dictionary.read_vocab` so that XLM's released vocab maps to the same ids: a line containing U+2028 or whose
whitespace split is not exactly `token count` (tokens that are Unicode spaces such as U+00A0), or whose split token
is already in the dictionary (XLM's vocab_xnli_15 has `\xa0@@`, `\u2003@@`, ... which all split to `@@`), is
skipped and takes no id. `max_vocab` keeps ids < max_vocab (specials included, like XLM's `--max_vocab`); `min_count`
keeps tokens seen at least that often.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from xlp_cli import special_ids
from xlp_cli.errors import BadInput

SPECIALS = list(special_ids.SPECIAL_TOKENS)   # the table lives in xlp_cli/special_ids.py
UNK_ID = special_ids.UNK
N_SPECIALS = special_ids.N_SPECIAL            # 14: the first word id


@dataclass
class Dictionary:
    words: list[str]                       # id -> token (specials first)
    counts: list[int]                      # id -> count (0 for specials)
    skipped: int = 0                       # lines of the source file that took no id
    _index: dict[str, int] | None = field(default=None, repr=False, compare=False)

    @property
    def index(self) -> dict[str, int]:
        """token -> id, built when first asked for (`xlp bpe apply` gives the tokens to the native applier and
        never needs it: ~10 MB less)."""
        if self._index is None:
            self._index = {w: i for i, w in enumerate(self.words)}
        return self._index

    def __len__(self) -> int:
        return len(self.words)

    # ------------------------------------------------------------ build
    @classmethod
    def from_counts(cls, entries: Iterable[tuple[str, int]], *, max_vocab: int = 0, min_count: int = 0,
                    where: str = "vocab") -> "Dictionary":
        """Specials, then `entries` in order, with XLM's skip rule, `max_vocab` and `min_count`."""
        if isinstance(entries, _Regular):  # every line `token count`, the tokens printable: in bulk, same result
            order = dict.fromkeys(SPECIALS + entries.tokens)  # first occurrences, in order (XLM skips repeats)
            first = dict(zip(reversed(entries.tokens), reversed(entries.counts)))  # (the first one's count wins)
            words = list(order)
            d = cls(words, [0] * N_SPECIALS + list(map(int, map(first.__getitem__, words[N_SPECIALS:]))),
                    entries.skipped + len(entries.tokens) + N_SPECIALS - len(words))
            return d._limited(max_vocab, min_count)
        words, counts = list(SPECIALS), [0] * N_SPECIALS
        index = {w: i for i, w in enumerate(words)}
        skipped = 0
        for tok, c in entries:
            tok = _xlm_token(tok, c)
            if tok is None:
                skipped += 1
                continue
            if tok in index:
                skipped += 1  # XLM skips these lines ("already in vocab" for a repeat); they take no id
                continue
            index[tok] = len(words)
            words.append(tok)
            counts.append(int(c))
        del index  # (rebuilt on demand: Dictionary.index)
        return cls(words, counts, skipped)._limited(max_vocab, min_count)

    def _limited(self, max_vocab: int, min_count: int) -> "Dictionary":
        d = self
        if max_vocab and max_vocab > 0:
            d = d._keep([i for i in range(len(d)) if i < max(max_vocab, N_SPECIALS)])
        if min_count and min_count > 0:
            d = d._keep([i for i in range(len(d)) if i < N_SPECIALS or d.counts[i] >= min_count])
        return d

    def _keep(self, ids: list[int]) -> "Dictionary":
        return Dictionary([self.words[i] for i in ids], [self.counts[i] for i in ids], skipped=self.skipped)

    @classmethod
    def read(cls, path: Path, *, max_vocab: int = 0, min_count: int = 0) -> "Dictionary":
        """Read an XLM vocab / dict.txt / fastBPE vocab file (`token count` per line)."""
        path = Path(path)
        if not path.is_file():
            raise BadInput("no such dictionary file", path=path)
        entries = _regular_entries(path)  # (the whole file at once; None: a line for the per-line reader)
        return cls.from_counts(_entries(path) if entries is None else entries, max_vocab=max_vocab,
                               min_count=min_count, where=str(path))

    def write(self, path: Path) -> None:
        """dict.txt: `token count` for every id >= 14, in id order (the specials are implied)."""
        from xlp_cli.artifacts import write_text_atomic

        write_text_atomic(path, "".join(f"{w} {c}\n" for w, c in zip(self.words[N_SPECIALS:], self.counts[N_SPECIALS:])))

    # ------------------------------------------------------------ use
    def encode(self, tokens: list[str]) -> np.ndarray:
        get = self.index.get
        return np.fromiter((get(t, UNK_ID) for t in tokens), dtype=np.int32, count=len(tokens))

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.words[i] for i in ids]

    def is_special(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(ids) < N_SPECIALS


def _xlm_token(tok: str, count: int) -> str | None:
    """The token an entry gives in XLM's `read_vocab` (None: the line takes no id)."""
    if tok and " " not in tok and tok.isprintable():  # a token with no whitespace splits as is
        return tok
    parts = f"{tok} {count}".rstrip().split()  # XLM reads `line.rstrip().split()`
    if "\u2028" in tok or len(parts) != 2:
        return None
    return parts[0]


@dataclass
class _Regular:
    """A vocab file whose every line is `token count`: its tokens as XLM reads them (repeats included), their
    counts, and the lines that take no id before repeats are dropped."""
    tokens: list[str]
    counts: list[str]
    skipped: int = 0


_LINE = re.compile(r"^([^ \n]+) ([0-9]+)$", re.M)
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)


def _regular_entries(path: Path) -> "_Regular | None":
    """The file read at once when every line is `token count` (XLM's vocab_xnli_15, every dict.txt xlp writes):
    the per-line rules of `_entries` and `_xlm_token` run only for the few tokens with unprintable characters
    (U+00A0, U+2003, ...). None when a line needs `_entries` (and its messages: not UTF-8, no count, ...).
    0.19 -> 0.14 s for XLM's 121k lines."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    pairs = _LINE.findall(text)
    if len(pairs) != text.count("\n") + (0 if text.endswith("\n") or not text else 1):
        return None
    tokens, counts = list(map(_FIRST, pairs)), list(map(_SECOND, pairs))
    if "".join(tokens).isprintable():
        return _Regular(tokens, counts)
    out = _Regular(tokens, counts)
    for i in reversed([i for i, t in enumerate(tokens) if not t.isprintable()]):  # (a few: U+00A0, U+2003, ...)
        tok = _xlm_token(*_line_entries(f"{tokens[i]} {counts[i]}"))
        if tok is None:
            del tokens[i], counts[i]
            out.skipped += 1
        else:
            tokens[i] = tok
    return out


def _line_entries(line: str) -> tuple[str, int]:
    """`_entries`' rules for a `token count` line whose token is not printable."""
    parts = line.rstrip().split()
    if "\u2028" in line or len(parts) != 2:
        return "\u2028", 0  # skipped, like XLM
    return line.rstrip().rsplit(None, 1)[0], int(parts[1])


def _entries(path: Path) -> Iterator[tuple[str, int]]:
    """(token, count) per line of a vocab file, ("\u2028", 0) for a line XLM skips; lines are read lazily."""
    with open(path, "rb") as f:
        for i, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\n")
            except UnicodeDecodeError as e:
                raise BadInput(f"not UTF-8 ({e.reason})", path=path, position=i) from None
            tok, sep, count = line.partition(" ")
            if sep and tok and count.isdigit() and count.isascii() and tok.isprintable():
                yield tok, int(count)  # the common case, `token count`: no re-splitting
                continue
            parts = line.rstrip().split()
            if "\u2028" in line or len(parts) != 2:
                yield "\u2028", 0  # counted as skipped, like XLM
                continue
            if not parts[1].isdigit():
                raise BadInput(f"count is not a number: {line[:60]!r}", path=path, position=i)
            yield line.rstrip().rsplit(None, 1)[0], int(parts[1])
