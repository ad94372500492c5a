"""A CoNLL-U reader (Universal Dependencies), for POS tagging and the PUD retrieval set. No torch here.

    for sent in read_conllu(path):            # plain or .gz; sentences separated by blank lines
        sent.words    # syntactic words (ID 1, 2, ...): form, upos; what UPOS tags label
        sent.tokens   # the surface tokens: a multi-word token `1-2 du` stands for words 1 and 2 (de, le)
        sent.text     # the `# text = ` comment, or the surface tokens joined by SpaceAfter (old files have none)

As UD defines the format (https://universaldependencies.org/format.html):
- a line is a comment (`#`), a blank line (end of a sentence) or 10 tab-separated fields;
- ID `n` is a syntactic word; `n-m` is a multi-word token whose surface form covers words n..m (they follow
  it); `n.k` is an empty node of the enhanced graph: not part of the sentence's words or its surface text;
- UPOS `_` means "not annotated" (kept as "_"; taggers leave such words out of the loss and the score).
UD v1 files (UD 1.x, e.g. PADT 1.3) name the coordinating-conjunction tag CONJ; `upos_v2` renames it CCONJ.
Anything else (a wrong number of fields, a non-numeric ID, words out of order, a multi-word range that does
not cover the words after it) is a one-line `BadInput` naming the file and line.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from xlp_cli.core.errors import BadInput

# the 17 universal POS tags of UD v2
UPOS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
        "SCONJ", "SYM", "VERB", "X")
V1_RENAMES = {"CONJ": "CCONJ"}
_WORD = re.compile(r"[1-9][0-9]*")
_RANGE = re.compile(r"([1-9][0-9]*)-([1-9][0-9]*)")
_EMPTY = re.compile(r"(0|[1-9][0-9]*)\.([1-9][0-9]*)")


def upos_v2(tag: str) -> str:
    return V1_RENAMES.get(tag, tag)


@dataclass
class Word:
    form: str
    upos: str


@dataclass
class Sentence:
    id: str                                         # `# sent_id`, else "<file name>:<first line>"
    words: list[Word] = field(default_factory=list)
    tokens: list[tuple[str, bool]] = field(default_factory=list)  # (surface form, space after it)
    comment_text: str | None = None                 # `# text = ...`
    line: int = 0                                   # line of its first word/token

    @property
    def text(self) -> str:
        if self.comment_text is not None:
            return self.comment_text
        return "".join(f + (" " if space else "") for f, space in self.tokens).strip()


def _open(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


class _Builder:
    """Checks one sentence's lines as they come, then hands out the finished Sentence."""

    def __init__(self, path: Path, line: int):
        self.path, self.sent = path, Sentence(id="", line=line)
        self.covered_to = 0   # the last word covered by the latest multi-word token

    def fail(self, n: int, what: str) -> BadInput:
        return BadInput(what, path=self.path, position=n)

    def add(self, n: int, cols: list[str]) -> None:
        ident, form = cols[0], cols[1]
        if _EMPTY.fullmatch(ident):
            return  # an empty node: enhanced graph only
        s = self.sent
        space = "SpaceAfter=No" not in cols[9].split("|")
        r = _RANGE.fullmatch(ident)
        if r:
            lo, hi = int(r[1]), int(r[2])
            if lo != len(s.words) + 1 or hi <= lo:
                raise self.fail(n, f"multi-word token {ident} must start at word {len(s.words) + 1} and span 2+ words")
            s.tokens.append((form, space))
            self.covered_to = hi
            return
        if not _WORD.fullmatch(ident):
            raise self.fail(n, f"bad ID {ident!r} (expected n, n-m or n.k)")
        if int(ident) != len(s.words) + 1:
            raise self.fail(n, f"word ID {ident} out of order (expected {len(s.words) + 1})")
        s.words.append(Word(form, cols[3]))
        if int(ident) > self.covered_to:
            s.tokens.append((form, space))

    def finish(self, n: int) -> Sentence:
        s = self.sent
        if self.covered_to > len(s.words):
            raise self.fail(n, f"multi-word token covers word {self.covered_to}, but the sentence has {len(s.words)} words")
        if not s.words:
            raise self.fail(n, "sentence without words")
        s.id = s.id or f"{self.path.name}:{s.line}"
        return s


def read_conllu(path: str | Path) -> Iterator[Sentence]:
    """The sentences of one CoNLL-U file, in order."""
    path = Path(path)
    if not path.is_file():
        raise BadInput("no such CoNLL-U file", path=path)
    b: _Builder | None = None
    meta: dict[str, str] = {}
    n = 0
    try:
        with _open(path) as f:
            for n, raw in enumerate(f, 1):
                line = raw.rstrip("\r\n")
                if not line.strip():
                    if b is not None:
                        yield b.finish(n)
                    b, meta = None, {}
                    continue
                if line.startswith("#"):
                    key, eq, value = line[1:].partition("=")
                    if not eq and key.strip().startswith("sent_id "):  # UD v1: `# sent_id s-p1`
                        key, eq, value = "sent_id", "=", key.strip()[8:]
                    if eq and b is None:
                        meta[key.strip()] = value.strip()
                    continue
                cols = line.split("\t")
                if len(cols) != 10:
                    raise BadInput(f"a word line needs 10 tab-separated fields, this one has {len(cols)}",
                                   path=path, position=n)
                if b is None:
                    b = _Builder(path, n)
                    b.sent.id = meta.get("sent_id", "")
                    b.sent.comment_text = meta.get("text")
                b.add(n, cols)
            if b is not None:
                yield b.finish(n + 1)
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as e:
        raise BadInput(f"unreadable CoNLL-U file ({type(e).__name__}: {e})", path=path, position=n + 1) from None


def treebank_files(root: Path) -> list[tuple[str, str, Path]]:
    """(language, split, file) for every `*.conllu[.gz]` under `root` (one folder per treebank).

    The language is the file name's prefix (`en_ewt-ud-test` -> en, `ar-ud-dev.v1.3` -> ar,
    `GlobalVoices.ken.sw...` -> the ISO code among its dot-separated parts); the split is train/dev/test from
    `-ud-<split>`, or "other" for files that name none (the unreleased Swahili annotations)."""
    out = []
    for p in sorted(Path(root).glob("*/*.conllu*")):
        if not (p.name.endswith(".conllu") or p.name.endswith(".conllu.gz")):
            continue
        m = re.match(r"([a-z]{2,3})(?:_[a-z]+)?-ud-(train|dev|test)\b", p.name)
        if m:
            out.append((m[1], m[2], p))
            continue
        parts = [x for x in p.name.split(".") if re.fullmatch(r"[a-z]{2}", x)]
        if parts:
            out.append((parts[0], "other", p))
    return out
