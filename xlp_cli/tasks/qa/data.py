"""SQuAD-format QA data: the reader, context units with their character spans, and the input windows.

Reader: SQuAD JSON as released (`{"version", "data": [{"title", "paragraphs": [{"context", "qas": [{"id",
"question", "answers": [{"text", "answer_start"}]}]}]}]}`, plain or .gz). A file that is not such JSON is a
one-line BadInput (file, line or JSON path); an answer whose `answer_start` does not point at its text in the
context is counted (`BadAnswers`, with the first one's file, article and question id) and never fatal: the
question is not trained on, and its answer texts still score predictions (as the official scripts do).

Units: the context is cut into units with character spans: whitespace-separated chunks, each Unicode
punctuation character a unit of its own, runs of digits apart from the letters they touch ("Wakazi14" in
TyDiQA's sw contexts), and for zh / th the word segmenter's words (`text/segment.py`, as in pre-training). Each distinct unit is encoded on its own with the run's codec (`bpe/encoder.py`: normalize,
tokenize, lowercase, BPE), as POS encodes UD words; a unit that encodes to nothing gets one `<unk>`. So every
subword belongs to one unit, an answer's characters map to the units they touch (start unit: the first unit
ending after `answer_start`; end unit: the last starting before its end), and a predicted subword span maps
back to the context characters from its first unit's start to its last unit's end.

Windows (XTREME's run_squad.py): `</s> question </s> context window </s>`, the question cut to
`max_query_len` subwords, windows of `max_seq_len - len(question) - 3` context subwords starting
`doc_stride` apart until the context's end; a token is scored in the window where it has the most context on
both sides. A training window whose context does not contain the whole answer targets position 0.
"""

from __future__ import annotations

import bisect
import gzip
import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xlp_cli.artifacts.special_ids import EOS, UNK
from xlp_cli.core import textfile
from xlp_cli.core.errors import BadInput
from xlp_cli.text.segment import segmenter

SEGMENTED_LANGS = ("zh", "th")


@dataclass
class Question:
    id: str
    question: str
    context: str
    answers: list[str]           # answer texts (what predictions are scored against)
    span: tuple[int, int] | None  # the first answer's characters [start, end) in the context; None: not placeable


@dataclass
class BadAnswers:
    """Answers whose `answer_start` does not point at their text; the first one's position."""
    count: int = 0
    first: str = ""

    def add(self, where: str) -> None:
        self.count += 1
        self.first = self.first or where

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "first": self.first}


# ---------------------------------------------------------------- the reader
def _load_json(path: Path) -> Any:
    """A SQuAD JSON file (.gz too), read with the bounded JSON reader (core/textfile.py: depth, integer size)."""
    if not path.is_file():
        raise BadInput("no such SQuAD JSON file", path=path)
    try:
        raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        text = raw.decode("utf-8")
    except (UnicodeDecodeError, OSError, EOFError) as e:
        raise BadInput(f"not SQuAD JSON ({type(e).__name__}: {e})", path=path) from None
    return textfile.json_value(text, path)


def _field(obj: Any, key: str, kind: type | tuple[type, ...], path: Path, where: str) -> Any:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise BadInput(f"not SQuAD JSON: {where}.{key} must be a {names}", path=path)
    return value


def read_squad(path: Path | str, bad: BadAnswers, limit: int = 0) -> list[Question]:
    """The questions of one SQuAD JSON file (at most `limit`, 0: all), answers checked against their context."""
    path = Path(path)
    doc = _load_json(path)
    out: list[Question] = []
    for a, article in enumerate(_field(doc, "data", list, path, "$")):
        title = article.get("title", "") if isinstance(article, dict) else ""
        for p, para in enumerate(_field(article, "paragraphs", list, path, f"data[{a}]")):
            where = f"data[{a}].paragraphs[{p}]"
            context = _field(para, "context", str, path, where)
            for q, qa in enumerate(_field(para, "qas", list, path, where)):
                at = f"{where}.qas[{q}]"
                qid = str(_field(qa, "id", (str, int), path, at))
                texts, span = [], None
                for k, ans in enumerate(_field(qa, "answers", list, path, at)):
                    text = _field(ans, "text", str, path, f"{at}.answers[{k}]")
                    start = _field(ans, "answer_start", int, path, f"{at}.answers[{k}]")
                    texts.append(text)
                    if start < 0 or context[start:start + len(text)] != text:
                        bad.add(f"{path}: article {a} ({title!r}), question {qid!r}: answer {text!r} is not at "
                                f"character {start} of its context")
                    elif k == 0 and text.strip():
                        span = (start, start + len(text))
                out.append(Question(qid, _field(qa, "question", str, path, at), context, texts, span))
                if limit and len(out) >= limit:
                    return out
    return out


def holdout(questions: list[Question], fraction: float = 0.1) -> tuple[list[Question], list[Question]]:
    """Deterministic (train, held-out) split by a hash of the question id."""
    def key(q: Question) -> float:
        return int(hashlib.sha1(q.id.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF

    return [q for q in questions if key(q) >= fraction], [q for q in questions if key(q) < fraction]


# ---------------------------------------------------------------- units
def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def units(text: str, lang: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the units of `text`, in order (see the module doc)."""
    spans: list[tuple[int, int]] = []
    for m in re.finditer(r"\S+", text):
        start = m.start()
        for i, ch in enumerate(m.group(), start):
            if _is_punct(ch):
                _words(text, start, i, lang, spans)
                spans.append((i, i + 1))
                start = i + 1
        _words(text, start, m.end(), lang, spans)
    return spans


def _words(text: str, a: int, b: int, lang: str, spans: list[tuple[int, int]]) -> None:
    """The units of text[a:b] (no space, no punctuation): runs of digits and of other characters, and for zh / th
    the segmenter's words of the latter."""
    for m in _DIGIT_RUNS.finditer(text, a, b):
        _segment(text, m.start(), m.end(), lang, spans)


_DIGIT_RUNS = re.compile(r"\d+|\D+")


def _segment(text: str, a: int, b: int, lang: str, spans: list[tuple[int, int]]) -> None:
    if a >= b:
        return
    if lang not in SEGMENTED_LANGS or text[a].isdigit():
        spans.append((a, b))
        return
    pos = a
    for word in segmenter(lang, False)(text[a:b]).split():
        at = text.find(word, pos, b)
        if at < 0:  # a segmenter that changed the text: the rest is one unit
            break
        if at > pos:
            spans.append((pos, at))
        spans.append((at, at + len(word)))
        pos = at + len(word)
    if pos < b:
        spans.append((pos, b))


# ---------------------------------------------------------------- encoding into windows
@dataclass
class Encoded:
    """One (set, language) of questions and their input windows."""

    questions: list[Question]
    lang: str
    unit_spans: list[np.ndarray] = field(default_factory=list)   # per question: [U, 2] character spans
    tok_unit: list[np.ndarray] = field(default_factory=list)     # per question: unit of each context subword
    ids: list[np.ndarray] = field(default_factory=list)          # per window: </s> q </s> context </s>
    question: list[int] = field(default_factory=list)            # per window: its question
    ctx_start: list[int] = field(default_factory=list)           # per window: position of its first context subword
    offset: list[int] = field(default_factory=list)              # per window: its first context subword's index
    scored: list[np.ndarray] = field(default_factory=list)       # per window: its context subwords scored here
    target: list[tuple[int, int]] = field(default_factory=list)  # per window: answer (start, end) positions, or 0, 0
    unplaced: int = 0                                            # answers that touch no unit

    def __len__(self) -> int:
        return len(self.ids)


def answer_tokens(span: tuple[int, int], unit_spans: np.ndarray, first_tok: np.ndarray) -> tuple[int, int] | None:
    """The context subwords [first, last] of the units an answer's characters touch (None: none)."""
    s, e = span
    u_s = bisect.bisect_right(unit_spans[:, 1].tolist(), s)      # first unit ending after s
    u_e = bisect.bisect_left(unit_spans[:, 0].tolist(), e) - 1   # last unit starting before e
    if u_s > u_e or u_s >= len(unit_spans):
        return None
    return int(first_tok[u_s]), int(first_tok[u_e + 1] - 1)


def windows(n: int, room: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of the context windows (run_squad.py's doc spans)."""
    out, start = [], 0
    while True:
        length = min(n - start, room)
        out.append((start, length))
        if start + length >= n:
            return out
        start += min(length, stride)


def encode(questions: list[Question], text_encoder: Any, lang: str, max_seq_len: int, doc_stride: int,
           max_query_len: int) -> Encoded:
    """Units and questions encoded with the run's codec for `lang` (each distinct text once), then windows."""
    spans = [units(q.context, lang) for q in questions]
    forms = sorted({q.context[a:b] for q, sp in zip(questions, spans) for a, b in sp} | {q.question for q in questions})
    many = text_encoder.encode_batch(forms, lang) if forms else []
    by_form = {f: np.asarray(x, np.int32) for f, x in zip(forms, many)}
    enc = Encoded(questions, lang)
    for qi, (q, sp) in enumerate(zip(questions, spans)):
        pieces = [by_form[q.context[a:b]] for a, b in sp]
        pieces = [p if len(p) else np.asarray([UNK], np.int32) for p in pieces]
        lengths = np.asarray([len(p) for p in pieces], np.int64)
        first_tok = np.concatenate([[0], np.cumsum(lengths)])
        ctx = np.concatenate(pieces) if pieces else np.zeros(0, np.int32)
        unit_spans = np.asarray(sp, np.int64).reshape(-1, 2)
        enc.unit_spans.append(unit_spans)
        enc.tok_unit.append(np.repeat(np.arange(len(pieces)), lengths))
        answer = answer_tokens(q.span, unit_spans, first_tok) if q.span else None
        enc.unplaced += int(q.span is not None and answer is None)
        qids = by_form[q.question][:max_query_len]
        room = max_seq_len - len(qids) - 3
        wins = windows(len(ctx), room, doc_stride)
        best = _max_context(len(ctx), wins)
        for w, (start, length) in enumerate(wins):
            enc.ids.append(np.concatenate([[EOS], qids, [EOS], ctx[start:start + length], [EOS]]).astype(np.int32))
            enc.question.append(qi)
            enc.ctx_start.append(len(qids) + 2)
            enc.offset.append(start)
            enc.scored.append(best[start:start + length] == w)
            if answer and start <= answer[0] and answer[1] < start + length:
                enc.target.append((answer[0] - start + len(qids) + 2, answer[1] - start + len(qids) + 2))
            else:
                enc.target.append((0, 0))
    return enc


def _max_context(n: int, wins: list[tuple[int, int]]) -> np.ndarray:
    """The window in which each context subword has the most context (min of left and right, + 0.01 x length)."""
    best = np.zeros(n, np.int64)
    score = np.full(n, -np.inf)
    for w, (start, length) in enumerate(wins):
        pos = np.arange(start, start + length)
        s = np.minimum(pos - start, start + length - 1 - pos) + 0.01 * length
        better = s > score[pos]
        best[pos[better]], score[pos[better]] = w, s[better]
    return best


def answer_text(enc: Encoded, window: int, s: int, e: int) -> str:
    """The context characters of window positions s..e (inclusive): first unit's start to last unit's end."""
    qi, off = enc.question[window], enc.offset[window] - enc.ctx_start[window]
    units_ = enc.tok_unit[qi]
    a, b = enc.unit_spans[qi][units_[s + off], 0], enc.unit_spans[qi][units_[e + off], 1]
    return enc.questions[qi].context[a:b]
