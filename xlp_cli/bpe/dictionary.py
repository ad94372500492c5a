"""The token dictionary in XLM's id layout, read from and written to XLM/fastBPE `token count` files.

Ids: `<s>`=0, `</s>`=1, `<pad>`=2, `<unk>`=3, `<special0>`..`<special9>`=4..13, then the file's tokens in
file order (a fastBPE vocab is sorted by count, so: words by count). Reading follows XLM's
`Dictionary.read_vocab` so that XLM's released vocab maps to the same ids: a line containing U+2028 or whose
whitespace split is not exactly `token count` (tokens that are Unicode spaces such as U+00A0), or whose split token
is already in the dictionary (XLM's vocab_xnli_15 has `\xa0@@`, `\u2003@@`, ... which all split to `@@`), is
skipped and takes no id. `max_vocab` keeps ids < max_vocab (specials included, like XLM's `--max_vocab`); `min_count`
keeps tokens seen at least that often.
A file is read natively by these rules (xlp_cli/text/csrc/vocab.cpp, without the GIL: ~0.02 s for XLM's 121k
lines, where Python took 0.15-0.19 s); a file it leaves (not UTF-8, a carriage return, a count that is not ASCII
digits, ...) is read line by line here, and its bad line named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from xlp_cli.artifacts import special_ids
from xlp_cli.artifacts.files import atomic_path
from xlp_cli.core.errors import BadInput, WorkFailed
from xlp_cli.text.native import module

SPECIALS = list(special_ids.SPECIAL_TOKENS)   # the table lives in xlp_cli/artifacts/special_ids.py
UNK_ID = special_ids.UNK
N_SPECIALS = special_ids.N_SPECIAL            # 14: the first word id


@dataclass
class Dictionary:
    words: list[str]                       # id -> token (specials first)
    counts: list[int]                      # id -> count (0 for specials)
    skipped: int = 0                       # lines of the source file that took no id
    _index: dict[str, int] | None = field(default=None, repr=False, compare=False)
    _text: bytes | None = field(default=None, repr=False, compare=False)  # dict.txt as read (a Dictionary is not changed)

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
        data = path.read_bytes()
        found = _native_read(data)  # (XLM's rules natively, without the GIL; None: the Python reader decides)
        if found is not None:
            return found._limited(max_vocab, min_count)
        return cls.from_counts(_entries(path), max_vocab=max_vocab, min_count=min_count, where=str(path))

    def write(self, path: Path) -> None:
        """dict.txt: `token count` for every id >= 14, in id order (the specials are implied)."""

        text = self._text  # (as the native reader made it)
        if text is None:
            text = "".join(f"{w} {c}\n" for w, c in zip(self.words[N_SPECIALS:], self.counts[N_SPECIALS:])).encode("utf-8")
        with atomic_path(path) as tmp:
            tmp.write_bytes(text)

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


def _native_read(data: bytes) -> "Dictionary | None":
    """The dictionary of a vocab file's bytes by XLM's rules, read natively (xlp_cli/text/csrc/vocab.cpp), or None
    when the file needs the Python readers (not UTF-8, a carriage return, a count that is not ASCII digits, ...)."""
    try:
        got = module().xlm_vocab(data, "\n".join(SPECIALS).encode("utf-8"))
    except WorkFailed:  # (the text extension is not built: the Python reader gives the same dictionary)
        return None
    if got is None:
        return None
    tokens, counts, skipped, text = got
    words = SPECIALS + (tokens.decode("utf-8").split("\n") if tokens else [])
    return Dictionary(words, [0] * N_SPECIALS + np.frombuffer(counts, "<i8").tolist(), skipped, _text=text)


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
