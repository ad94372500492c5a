"""PAN-X (WikiANN as XTREME releases it) as tagging examples, on POS's word -> subword machinery (`pos/data.py`).

Files, per language and split, in `--panx-dir` (plain or `.gz`):
    <lang>-<split>        XTREME's release (panx_dataset/<lang>.tar.gz): `<lang>:<token>\\t<TAG>` per line
    <split>-<lang>.tsv    XTREME's processed copy (utils_preprocess.py panx): `<token>\\t<TAG>`
A blank line ends a sentence. Tags are BIO over PER, ORG, LOC (`TAGS`); anything else is a one-line error naming
the file and line. A gold entity that starts with I- (after O, at the sentence start or after another type) is
legal input, scored the seqeval/conlleval way (it opens an entity); the reader counts such sentences and
remembers the first position, and the run reports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.pawsx.lines import find, text_lines
from xlp_cli.tasks.pos import data as pd

TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
TAG_IDS = {t: i for i, t in enumerate(TAGS)}
IGNORE = pd.IGNORE


@dataclass
class NerSentence:
    id: str                 # "<file>:<line of its first token>"
    words: list[str]
    tags: list[str]


@dataclass
class Read:
    sentences: list[NerSentence]
    i_starts: int = 0                       # sentences with an entity opened by I-
    first_i_start: str = ""                 # "<file>:<line>" of the first one
    files: list[Path] = field(default_factory=list)


def panx_file(folder: Path, lang: str, split: str) -> Path | None:
    return find(folder, f"{lang}-{split}", f"{split}-{lang}.tsv")


def opens_with_inside(tags: list[str]) -> int:
    """The index of the first I- tag that opens an entity (after O, at the start or after another type); -1."""
    prev = "O"
    for i, t in enumerate(tags):
        if t.startswith("I-") and (prev == "O" or prev[2:] != t[2:]):
            return i
        prev = t
    return -1


def read_panx(path: Path, lang: str, limit: int = 0) -> Read:
    """The sentences of one PAN-X file (`limit`: the first N)."""
    out = Read([], files=[Path(path)])
    words: list[str] = []
    tags: list[str] = []
    start = 0
    prefix = f"{lang}:"

    def close() -> None:
        nonlocal words, tags
        if words:
            k = opens_with_inside(tags)
            if k >= 0:
                out.i_starts += 1
                out.first_i_start = out.first_i_start or f"{Path(path).name}:{start + k}"
            out.sentences.append(NerSentence(f"{Path(path).name}:{start}", words, tags))
        words, tags = [], []

    for n, line in text_lines(path):
        if not line.strip():
            close()
            if limit and len(out.sentences) >= limit:
                break
            continue
        cells = line.split("\t")
        if len(cells) != 2 or not cells[0].strip():
            raise BadInput(f"expected `token<TAB>TAG` (PAN-X), found {len(cells)} field(s)", path=path, position=n)
        token, tag = cells[0].strip(), cells[1].strip()
        token = token[len(prefix):] if token.startswith(prefix) and len(token) > len(prefix) else token
        if tag not in TAG_IDS:
            raise BadInput(f"unknown NER tag {tag!r} (PAN-X has {' '.join(TAGS)})", path=path, position=n)
        if not words:
            start = n
        words.append(token)
        tags.append(tag)
    if not limit or len(out.sentences) < limit:
        close()
    return out


@dataclass
class NerTagged(pd.Tagged):
    """POS's tagging examples with BIO labels (`gold` holds the BIO tags)."""

    def labels(self, i: int) -> np.ndarray:
        word_labels = np.asarray([TAG_IDS[t] for t in self.gold[i]], np.int64)
        return pd.spread(self.first[i], word_labels, len(self.ids[i]))


def encode(sents: list[NerSentence], text_encoder, lang: str, max_len: int) -> NerTagged:
    """Every distinct word form encoded once with the run's pipeline for `lang` (`pos.data.align`)."""
    forms = sorted({w for s in sents for w in s.words})
    many = text_encoder.encode_batch(forms, lang) if forms else []
    by_form = {f: np.asarray(x, np.int32) for f, x in zip(forms, many)}
    ids, first = [], []
    for s in sents:
        x, f = pd.align([by_form[w] for w in s.words], max_len)
        ids.append(x)
        first.append(f)
    return NerTagged(ids=ids, first=first, gold=[list(s.tags) for s in sents], sent_ids=[s.id for s in sents], lang=lang)


def cached_encode(cache: Path, sents: list[NerSentence], text_encoder, lang: str, max_len: int) -> NerTagged:
    """Encode once; other seeds and reruns read the Parquet cache (keyed by the sentences and max_len)."""
    key = (s.id + "\t" + " ".join(f"{w}/{t}" for w, t in zip(s.words, s.tags)) for s in sents)
    return pd.cached_tagged(cache, key, max_len, lang, lambda: encode(sents, text_encoder, lang, max_len), NerTagged)
