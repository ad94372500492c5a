"""`--source wikipedia`: MediaWiki `pages-articles` XML dumps -> one Mono per paragraph of article text.

- Plain, .bz2, .xz or .gz (recognised by content). Streamed through expat in blocks, keeping only the fields
  read (wikipedia_xml.py: no element tree), so memory stays flat whatever the dump size.
- Encoding: expat honours the XML declaration and a BOM (one sample dump is UTF-16 LE with BOM).
- Truncation: a dump that ends inside the XML (or whose compressed stream ends early) keeps every page
  completed before the cut, and `errors.warn`s (the manifest records it). Malformed XML elsewhere is
  bad input with file, line and column (`--on-error skip`: keep the pages before it, count a skip).
- Articles only: `<ns>0</ns>` (or, in dumps without `<ns>`, a title without a namespace prefix), no
  `<redirect>` pages and no `#REDIRECT` text.
- Wikitext -> plain text: the native converter of wikipedia_text.py (xlp_cli/text/csrc/wikitext.cpp), with the
  dump's localised namespace names added to the link namespaces it drops.
- Unit: one record per non-empty line of the converted article (a paragraph or list item), as
  WikiExtractor writes it for XLM's get-data-wiki.sh. Origin: "file#title".
- Where the conversion runs: with `opts.defer_pages` (set by `xlp prepare` unless --max-records is given)
  the reader only streams the XML and yields one `RawPage` per article (its wikitext, `page_lines` and the
  dump's link namespaces); the pipeline's worker processes convert it, so `--workers N` spreads the
  conversion too. Otherwise (tests, --max-records, which must stop after exactly N paragraphs) the reader
  converts and yields the `Mono`s itself. Both give the same records in the same order.
- Splits: a multistream dump with its index beside it is read as runs of its bz2 streams, each split on its
  own (wikipedia_multistream.py); the index file itself is not a dump. Other dumps are one split each.
- Language: the `<dbname>` in `<siteinfo>` (`bgwiki` -> bg), else the file name (`elwiki-...`), else the
  root's `xml:lang`, else a single `--lang`. Files in a language not among `--lang` are skipped.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator
from xml.parsers import expat

from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.records import ErrorPolicy, Mono, RawPage, RecordProblem, SourceOptions, Split
from xlp_cli.prepare.sources import expand_inputs, wikipedia_multistream as multistream
from xlp_cli.prepare.sources.bz2_blocks import ParallelBz2
from xlp_cli.prepare.sources._files import (
    ReadAhead,
    TolerantStream,
    archive_problem,
    compression,
    data_files,
    open_binary,
)
from xlp_cli.prepare.sources.wikipedia_text import DEFAULT_LINK_NAMESPACES, page_lines
from xlp_cli.prepare.sources.wikipedia_xml import BLOCK, DumpEvents, Page, SiteInfo

NAME = "wikipedia"

NON_PROSE_NS_KEYS = {"-2", "-1", "2", "4", "6", "8", "10", "12", "14", "100", "828"}
_REDIRECT = re.compile(r"\s*#\s*([^\W\d_]+)\s*:?\s*\[\[")  # #REDIRECT [[x]], #WEITERLEITUNG [[x]], ...
_ASCII_SPACE = bytes(c for c in range(128) if chr(c).isspace())  # what `\s` matches below U+0080
# expat error codes that mean "the document ended early" (not a syntax error in the middle)
_TRUNCATED_CODES = {3, 5, 6, 20}  # no element found, unclosed token, partial character, unclosed CDATA


def lang_from_dbname(dbname: str) -> str | None:
    m = re.match(r"^([a-z_]+?)wiki$", dbname.strip())
    return m.group(1).replace("_", "-") if m else None


def lang_from_filename(path: Path) -> str | None:
    m = re.match(r"^([a-z_]+?)wiki-", path.name)
    return m.group(1).replace("_", "-") if m else None


# ------------------------------------------------------------------ dump reader
def read(inputs: list[Path], opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono | RawPage]:
    per_lang: Counter[str] = Counter()
    for path in _dumps(inputs):
        yield from _read_dump(path, opts, errors, per_lang)


def _dumps(inputs: list[Path]) -> list[Path]:
    """The dumps among the inputs (a multistream index is read with its dump, not as one)."""
    return [p for p in data_files(expand_inputs(inputs)) if not multistream.is_index(p)]


def plan(inputs: list[Path], opts: SourceOptions, split_size: int) -> list[Split]:
    """A multistream dump with its index beside it: runs of its bz2 streams; any other dump: the whole file."""
    out: list[Split] = []
    for path in _dumps(inputs):
        index = multistream.index_for(path)
        if index is not None and compression(path) == "bz2":
            out.extend(multistream.plan_dump(path, index, split_size))
        else:
            out.append(Split(NAME, "file", [str(path)]))
    return out


def read_split(split: Split, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono | RawPage]:
    opener = (lambda: multistream.open_streams(split)) if split.kind == "range" else None
    yield from _read_dump(Path(split.path), opts, errors, Counter(), opener)


def _read_dump(path: Path, opts: SourceOptions, errors: ErrorPolicy, per_lang: Counter,
               opener: Callable[[], BinaryIO] | None = None) -> Iterator[Mono | RawPage]:
    lang: str | None = None
    link_ns = set(DEFAULT_LINK_NAMESPACES)
    context: frozenset[str] | None = None  # link_ns as the pages get it (one object: pickled once per chunk)
    prose_ns_names: set[str] = set()  # localized names of non-article namespaces (for dumps without <ns>)
    defer = opts.defer_pages and not opts.max_records  # --max-records stops after exactly N paragraphs: count here
    pages = 0
    stream: Any
    kind = compression(path) if opts.read_ahead and opener is None else ""
    if kind == "bz2":
        # --workers N: N // 2 threads decode its blocks (two decoders beside two workers on two cores took ~5% more
        # CPU, sharing the caches, for ~3% less wall time: docs/benchmarks.md)
        stream = ParallelBz2(path, threads=max(1, opts.read_ahead // 2))
    else:
        stream = opener() if opener is not None else open_binary(path)
        if opts.read_ahead and (opener is not None or kind):
            stream = ReadAhead(stream)  # (with --workers N: the main thread parses while another decompresses)
    reader = TolerantStream(stream)
    events = DumpEvents()

    def resolve_lang() -> str:
        nonlocal lang
        if lang is None:
            lang = lang_from_filename(path) or events.root_lang
            if lang is None:
                if len(opts.langs) == 1:
                    lang = opts.langs[0]
                else:
                    raise BadInput("cannot tell the dump's language (no <dbname>, no 'xxwiki-' file name): give one --lang",
                                   path=path)
        return lang

    try:
        while True:
            block = reader.read(BLOCK)
            for item in events.feed(block, final=not block):
                if isinstance(item, SiteInfo):
                    if item.dbname:
                        lang = lang_from_dbname(item.dbname)
                    for key, name in item.namespaces:
                        if key in NON_PROSE_NS_KEYS and name:
                            link_ns.add(name.strip().lower())
                            prose_ns_names.add(name.strip().lower())
                    context = None
                    continue
                page_lang = resolve_lang()
                if opts.langs and page_lang not in opts.langs:
                    ui.info(f"{path}: language {page_lang} is not among --lang {','.join(opts.langs)}; skipped")
                    return
                pages += 1
                if opts.max_records and per_lang[page_lang] >= opts.max_records:
                    return  # an earlier dump of this language gave N already
                found = _article(item, prose_ns_names)
                if found is None:
                    continue
                title, text = found
                if context is None:
                    context = frozenset(link_ns)
                page = RawPage(page_lang, text, NAME, str(path), f"#{title}", page_lines, context)
                if defer:
                    yield page
                    continue
                try:
                    records = page.monos()
                except RecordProblem as e:
                    errors.bad(str(e), path=path, position=page.position)
                    continue
                for rec in records:
                    per_lang[page_lang] += 1
                    yield rec
                    if opts.max_records and per_lang[page_lang] >= opts.max_records:
                        return
            if events.error is not None:
                raise events.error
            if not block:
                break
        if reader.error is not None:  # damage right after a complete document: still report it
            errors.bad(f"{archive_problem(reader.error)} after the end of the XML", path=path,
                       position=f"byte {reader.bytes} of the decompressed stream")
    except expat.ExpatError as e:
        line, col = e.lineno, e.offset
        problem = str(e).split(":")[0]
        damaged = reader.error
        if damaged is not None and not isinstance(damaged, EOFError):
            errors.bad(f"{archive_problem(damaged)}; kept the {pages} complete pages before it", path=path,
                       position=f"byte {reader.bytes} of the decompressed stream")
        elif damaged is not None:
            errors.warn(f"{path}: truncated dump ({archive_problem(damaged)}); kept the {pages} complete pages")
        elif reader.eof and e.code in _TRUNCATED_CODES:
            errors.warn(f"{path}: truncated dump ({problem} at line {line}); kept the {pages} complete pages")
        else:
            errors.bad(f"malformed XML: {problem} (after {pages} complete pages)", path=path, position=f"{line}:{col}")
    finally:
        stream.close()
    if pages == 0:
        errors.bad("no <page> found: not a MediaWiki pages-articles dump, or empty", path=path)


def _article(page: Page, prose_ns_names: set[str]) -> tuple[str, bytes] | None:
    """(title, wikitext as UTF-8) of a main-namespace article with text; None for other pages and redirects."""
    title = (page.title or "").strip()
    if page.ns is not None:
        if page.ns.strip() != "0":
            return None
    elif ":" in title and title.split(":", 1)[0].strip().lower() in (prose_ns_names | DEFAULT_LINK_NAMESPACES):
        return None
    if page.redirect or not page.revision:
        return None
    text = page.text
    if not text:
        return None
    first = text.lstrip(_ASCII_SPACE)[:1]  # (a redirect's `#` comes after spaces; some are not ASCII: decoded)
    if first == b"#" or first >= b"\x80":
        m = _REDIRECT.match(text.decode("utf-8"))
        if m and (m.group(1).lower() == "redirect" or m.group(1).isupper()):  # localised magic words are upper case
            return None
    return title, text
