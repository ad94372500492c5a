"""PAWS-X as XTREME releases it, as XNLI examples (`xnli/data.Example`: sentence 1 = premise, sentence 2 =
hypothesis), and the split of its labelled rows into train / selection / test parts.

Files: `dev-<lang>.tsv` and `test-<lang>.tsv` (plain or `.gz`), no header, no id column, tab-separated, fields
quoted CSV-style (a field starting with a quote is quoted, inner quotes doubled). Dev rows: sentence1,
sentence2, label (1 = paraphrase, 0 = not);
XTREME's test files have no labels (2 columns), so they cannot be scored, and the labelled dev rows are split
instead. Rows are parallel across languages (row i is the same pair translated): an example's key is its row
index, and the parts are cut by a hash of that index, so no test pair was trained on in any language.
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.pawsx.lines import find, text_lines
from xlp_cli.tasks.xnli import data as xd

LABELS = ["not_paraphrase", "paraphrase"]   # label ids 0, 1 as in the files
LANGS = ("en", "de", "es", "fr", "zh", "ja", "ko")


def dev_file(folder: Path, lang: str) -> Path | None:
    return find(folder, f"dev-{lang}.tsv")


def read_tsv(path: Path, lang: str, labelled: bool = True) -> list[xd.Example]:
    """Every row of one PAWS-X file, in order (key = the 0-based row index)."""
    want = 3 if labelled else 2
    lines = text_lines(path)
    out: list[xd.Example] = []
    numbers: list[int] = []

    def numbered():  # csv sees the text; we keep each record's first line number for the messages
        for n, line in lines:
            numbers.append(n)
            yield line

    reader = csv.reader(numbered(), delimiter="\t", quotechar='"', strict=True)
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            raise BadInput(f"not a PAWS-X TSV row ({e})", path=path, position=numbers[-1] if numbers else 1) from None
        n = numbers[-1] if numbers else 1
        if not cells or cells == [""]:
            continue
        if len(cells) != want:
            names = "sentence1 sentence2 label" if labelled else "sentence1 sentence2"
            raise BadInput(f"expected {want} tab-separated fields ({names}), found {len(cells)}", path=path, position=n)
        s1, s2 = cells[0], cells[1]
        if not s1.strip() or not s2.strip():
            raise BadInput("empty sentence", path=path, position=n)
        label = 0
        if labelled:
            if cells[2].strip() not in ("0", "1"):
                raise BadInput(f"label {cells[2]!r} is not 0 or 1", path=path, position=n)
            label = int(cells[2])
        out.append(xd.Example(id=f"{Path(path).name}:{n}", lang=lang, premise=s1, hypothesis=s2, label=label,
                              key=str(len(out))))
    if not out:
        raise BadInput("no rows", path=path)
    return out


def _unit(key: str, salt: str) -> float:
    return int(hashlib.sha1(f"{salt}{key}".encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF


def part(key: str, test_fraction: float) -> str:
    """"test", "select" or "train" for a row key: test by a hash of the key; of the rest, 10% select."""
    if _unit(key, "pawsx-test:") < test_fraction:
        return "test"
    return "select" if _unit(key, "pawsx-select:") < 0.1 else "train"


def split_rows(rows: list[xd.Example], test_fraction: float) -> dict[str, list[xd.Example]]:
    out: dict[str, list[xd.Example]] = {"train": [], "select": [], "test": []}
    for e in rows:
        out[part(e.key, test_fraction)].append(e)
    return out
