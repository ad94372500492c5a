"""`--source opus`: parallel corpora in Moses, TMX and XCES formats, plain, gzipped or inside OPUS release zips.

Formats (recognised by content, not by name):
- Moses: two line-aligned text files. Paired by name: `NAME.l1-l2.l1` + `NAME.l1-l2.l2` (OPUS's layout),
  or `NAME.l1` + `NAME.l2` (Multi30k's `train.de.gz` + `train.en.gz`), where the language part is a
  `--lang` value (any 2-3 letter part without `--lang`; with it, files naming another language are
  ignored). With exactly two unpaired text files and two
  `--lang` values, the files are paired in the order given: `a.txt b.txt --lang de,en` (a is de).
  Three or more files of one name give every pair of them. Different line counts are bad input naming both
  files and the line where one ends. A line that is not UTF-8 is a record-level problem; a pair with an
  empty side is passed over.
- TMX (1.1-1.4): each `<tu>` gives a Pair for every two of its `<tuv>` languages (`xml:lang` or `lang`);
  inline codes (`bpt ept ph it ut`) are dropped, their surrounding text kept. Streamed.
- XCES: OPUS sentence XML (`<s id>` with `<w>` tokens, or plain text in `<s>`) and `cesAlign` alignment
  files (`<linkGrp fromDoc toDoc>` of `<link xtargets="s1 s2;s3">`). The documents named by an alignment
  are looked up among all inputs (zip members included) by path suffix, with or without `.gz`; their
  sentences are joined per link (1:n links join with a space; links with an empty side are skipped).
  Tokenized `<w>` sentences are detokenized with the Moses detokenizer of their language so `raw` is text.
  Sentence XML that no alignment uses is read as Mono (the language from a path part such as
  `xml/en/...`, else `xml:lang`, else a single `--lang`).
- Zip (OPUS releases): members are streamed (bounded: compressed.py), never extracted; a member name with `..`
  or an absolute path, an encrypted member and an unknown compression method are refused. Members are treated as the files above.

Pairs keep the direction of the data (l1 -> l2 of the name/alignment). With `--mono-from-parallel`
each side is also yielded as a Mono. Language codes are kept as written (the pipeline validates them);
TMX region subtags are dropped (`en-US` -> `en`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterator

from xlp_cli.prepare.records import ErrorPolicy, Mono, Pair, SourceOptions
from xlp_cli.prepare.sources import expand_inputs
from xlp_cli.prepare.sources.opus_items import NAME, Item, items_of, kind_of
from xlp_cli.prepare.sources.opus_moses import moses_pairs, read_moses
from xlp_cli.prepare.sources.opus_xml import read_tmx, read_xces_alignment, read_xces_mono

__all__ = ["NAME", "read"]


def read(inputs: list[Path], opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono | Pair]:
    inputs = expand_inputs(inputs)
    items: list[Item] = []
    for path in inputs:
        items.extend(items_of(path, errors))
    moses, tmx, sentence_docs, aligns = [], [], [], []
    for item in items:
        kind = kind_of(item)
        {"moses": moses, "tmx": tmx, "xces-sentences": sentence_docs, "xces-align": aligns}[kind].append(item)
    limit = _Limit(opts)
    for a, b, la, lb in moses_pairs(moses, opts.langs):
        yield from limit(read_moses(a, b, la, lb, opts, errors))
    for item in tmx:
        yield from limit(read_tmx(item, opts, errors))
    used: set[str] = set()
    for item in aligns:
        yield from limit(read_xces_alignment(item, sentence_docs, used, opts, errors))
    for item in sentence_docs:
        if item.name not in used:
            yield from limit(read_xces_mono(item, opts, errors))


class _Limit:
    """Stops yielding a language / pair once `--max-records` of it were given."""

    def __init__(self, opts: SourceOptions):
        self.max = opts.max_records
        self.count: Counter[str] = Counter()

    def __call__(self, records: Iterator[Mono | Pair]) -> Iterator[Mono | Pair]:
        for r in records:
            if self.max:
                key = r.lang if isinstance(r, Mono) else f"{r.lang1}-{r.lang2}"
                if self.count[key] >= self.max:
                    continue
                self.count[key] += 1
            yield r
