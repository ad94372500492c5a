"""BUCC 2018 files as released (and as XTREME copies them): no torch here.

    <xx>-en.<split>.<xx>     one sentence per line: `<id>\\t<sentence>` (ids like zh-000000001)
    <xx>-en.<split>.en       the English side, same layout
    <xx>-en.<split>.gold     `<xx id>\\t<en id>` per true translation pair
(plain or `.gz`; XTREME names BUCC's gold-annotated sample set `dev`). A malformed line or a repeated id is a
one-line error naming file and line. A gold pair naming an id that is in neither sentence file is counted and
reported with its first line, and left out of the gold set (it could never be mined).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.pawsx.lines import find, text_lines


@dataclass
class Side:
    lang: str
    ids: list[str]
    texts: list[str]
    path: Path

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Corpus:
    lang: str                         # the non-English side
    src: Side
    en: Side
    gold: set[tuple[str, str]]
    missing_gold: int = 0             # gold lines naming an id absent from the sentence files
    first_missing: str = ""           # "<file>:<line>" of the first such line
    gold_path: Path | None = None


def files(folder: Path, xx: str, split: str) -> dict[str, Path] | None:
    """{"src", "en", "gold"} of one pair, or None when any is missing."""
    out = {"src": find(folder, f"{xx}-en.{split}.{xx}"), "en": find(folder, f"{xx}-en.{split}.en"),
           "gold": find(folder, f"{xx}-en.{split}.gold")}
    return out if all(out.values()) else None  # type: ignore[return-value]


def langs_in(folder: Path, split: str) -> list[str]:
    """The xx of every complete <xx>-en.<split> set in the folder."""
    found = {p.name.split("-", 1)[0] for p in Path(folder).glob(f"*-en.{split}.gold*")}
    return sorted(x for x in found if files(folder, x, split))


def read_sentences(path: Path, lang: str) -> Side:
    ids, texts, seen = [], [], set()
    for n, line in text_lines(path):
        if not line.strip():
            continue
        sid, tab, text = line.partition("\t")
        if not tab or not sid.strip() or not text.strip():
            raise BadInput("expected `<id><TAB><sentence>` (BUCC)", path=path, position=n)
        if sid in seen:
            raise BadInput(f"sentence id {sid!r} appears twice", path=path, position=n)
        seen.add(sid)
        ids.append(sid)
        texts.append(text)
    if not ids:
        raise BadInput("no sentences", path=path)
    return Side(lang, ids, texts, Path(path))


def read_gold(path: Path, src: Side, en: Side) -> tuple[set[tuple[str, str]], int, str]:
    """(gold pairs, lines naming a missing id, "<file>:<line>" of the first)."""
    src_ids, en_ids = set(src.ids), set(en.ids)
    gold: set[tuple[str, str]] = set()
    missing, first = 0, ""
    for n, line in text_lines(path):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != 2 or not cells[0].strip() or not cells[1].strip():
            raise BadInput("expected `<xx id><TAB><en id>` (BUCC gold)", path=path, position=n)
        a, b = cells[0].strip(), cells[1].strip()
        if a not in src_ids or b not in en_ids:
            missing += 1
            first = first or f"{Path(path).name}:{n}"
            continue
        gold.add((a, b))
    return gold, missing, first


def cap(side: Side, keep: set[str], limit: int) -> Side:
    """At most `limit` sentences: every id of `keep`, then the first others, in file order."""
    if not limit or len(side) <= limit:
        return side
    room = max(0, limit - len(keep))
    chosen = []
    for i, sid in enumerate(side.ids):
        if sid in keep:
            chosen.append(i)
        elif room:
            chosen.append(i)
            room -= 1
    return Side(side.lang, [side.ids[i] for i in chosen], [side.texts[i] for i in chosen], side.path)


def read(folder: Path, xx: str, split: str, limit: int = 0) -> Corpus | None:
    f = files(folder, xx, split)
    if f is None:
        return None
    src, en = read_sentences(f["src"], xx), read_sentences(f["en"], "en")
    gold, missing, first = read_gold(f["gold"], src, en)
    src, en = cap(src, {a for a, _ in gold}, limit), cap(en, {b for _, b in gold}, limit)
    return Corpus(xx, src, en, gold, missing, first, gold_path=f["gold"])
