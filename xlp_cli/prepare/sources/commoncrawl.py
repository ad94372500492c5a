"""`--source commoncrawl`: CommonCrawl WET files (text) and WARC files (HTML responses), via warcio.

- Records: WET `conversion` records (text/plain) and WARC `response` records whose HTTP Content-Type
  is HTML (other responses, requests, metadata and warcinfo records are passed over). Plain or gzip
  (per-record gzip as CommonCrawl ships it); warcio recognises both.
- HTML -> text: `HtmlText`, a small `html.parser` extractor: drops script/style/noscript/template/svg/
  head/nav/footer/form contents, starts a new line at block elements, collapses whitespace. The charset
  comes from the HTTP header, else `<meta charset>`, else UTF-8; undecodable bytes become U+FFFD.
- Language: py3langid (its shipped model, normalised probabilities) on the whole document. A document is
  kept when its language is requested (`--lang`; empty: any) and the confidence is at least
  `--lid-threshold`. An unknown `--lang` code is bad input.
- Unit: one Mono per non-empty line of a kept document (WET puts one paragraph per line).
  Origin: "file#target-uri".
- A file that is not WARC, or is cut inside a record, is bad input with the record's byte offset
  (`--on-error skip`: the records before it are kept and the file counts as a skip).
"""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator

from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.records import ErrorPolicy, Mono, SourceOptions, Split
from xlp_cli.prepare.sources import expand_inputs
from xlp_cli.prepare.sources._files import (
    ARCHIVE_ERRORS,
    TolerantStream,
    archive_problem,
    bounded_lines,
    compression,
    data_files,
    open_binary,
)

NAME = "commoncrawl"

SKIP_TAGS = {"script", "style", "noscript", "template", "svg", "head", "nav", "footer", "form", "iframe", "object",
             "canvas", "select", "button", "textarea", "math"}
BLOCK_TAGS = {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "td", "th", "table",
              "section", "article", "header", "aside", "blockquote", "pre", "dd", "dt", "dl", "hr", "title",
              "main", "figure", "figcaption", "address", "caption"}
VOID_TAGS = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr",
             "param", "keygen"}
_WS = re.compile(r"[ \t\r\f\v\u00a0]+")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", re.IGNORECASE)


class HtmlText(HTMLParser):
    """Visible text of an HTML page, one line per block element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip_depth = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in SKIP_TAGS and tag not in VOID_TAGS:
            self.skip_depth += 1
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs) -> None:
        if tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIP_TAGS and tag not in VOID_TAGS:
            self.skip_depth = max(0, self.skip_depth - 1)
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skip_depth:
            self.parts.append(data)

    def text(self) -> str:
        lines = (_WS.sub(" ", line).strip() for line in "".join(self.parts).split("\n"))
        return "\n".join(line for line in lines if line)


def html_to_text(html: str) -> str:
    parser = HtmlText()
    parser.feed(html)
    parser.close()
    return parser.text()


def decode_html(body: bytes, content_type: str | None) -> str:
    charset = None
    if content_type:
        m = _HEADER_CHARSET.search(content_type)
        if m:
            charset = m.group(1)
    if charset is None:
        m = _META_CHARSET.search(body[:4096])
        if m:
            charset = m.group(1).decode("ascii", "replace")
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name
        return body.decode("utf-8", errors="replace")


_IDENTIFIER = None


def identifier():
    """py3langid's shipped model with normalised probabilities (loaded once per process)."""
    global _IDENTIFIER
    if _IDENTIFIER is None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        _IDENTIFIER = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    return _IDENTIFIER


def identify(text: str) -> tuple[str, float]:
    lang, conf = identifier().classify(text)
    return lang, conf


def read(inputs: list[Path], opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono]:
    inputs = _files(inputs, opts)
    per_lang: Counter[str] = Counter()
    for path in inputs:
        yield from _read_file(path, opts, errors, per_lang)


def _files(inputs: list[Path], opts: SourceOptions) -> list[Path]:
    inputs = data_files(expand_inputs(inputs))
    known = set(identifier().labels)
    unknown = [lang for lang in opts.langs if lang not in known]
    if unknown:
        raise BadInput(f"unknown language code(s) for the language identifier: {','.join(unknown)}")
    return inputs


def plan(inputs: list[Path], opts: SourceOptions, split_size: int) -> list[Split]:
    """One split per WET/WARC file (a crawl ships tens of thousands of them), read record by record."""
    return [Split(NAME, "file", [str(p)]) for p in _files(inputs, opts)]


def read_split(split: Split, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono]:
    yield from _read_file(Path(split.path), opts, errors, Counter())


def _read_file(path: Path, opts: SourceOptions, errors: ErrorPolicy, per_lang: Counter[str]) -> Iterator[Mono]:
    if ".wat" in path.name:
        ui.info(f"{path}: a WAT file holds metadata, no text; skipped")
        return
    docs = 0
    for uri, text in _documents(path, errors):
        docs += 1
        text = text.strip()
        if not text:
            continue
        lang, conf = identify(text)
        if (opts.langs and lang not in opts.langs) or conf < opts.lid_threshold:
            continue
        if opts.max_records and per_lang[lang] >= opts.max_records:
            continue
        for line in text.split("\n"):
            line = line.strip()
            if line:
                per_lang[lang] += 1
                yield Mono(lang, line, NAME, f"{path}#{uri}")
    if docs == 0:
        errors.bad("no WET conversion or WARC HTML response record found (empty or not CommonCrawl)", path=path)


def _documents(path: Path, errors: ErrorPolicy) -> Iterator[tuple[str, str]]:
    """(target URI, text) of each document record, read with warcio.

    A WET file whose Content-Length fields do not match its records, as hand-made files often are, is
    re-read from the failing record on by its `WARC/1.x` separator lines, with a warning. Anything else
    warcio cannot read is bad input with the byte offset of the last good record.
    """
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    done = 0  # records fully read
    offset = resync = 0
    try:
        with open_binary(path) as raw:  # decompressed here: whole-file gzip, bz2 and xz work too
            head = raw.peek(6)[:6]
            if head and not head.startswith(b"WARC/"):
                errors.bad(f"not a WARC/WET file: it starts with {head!r}, not 'WARC/'", path=path, position="byte 0")
                return
            stream = TolerantStream(raw)
            it = ArchiveIterator(stream)
            for record in it:
                if problem := _length_problem(record):  # (warcio reads such a record as empty, or to the end)
                    errors.bad(f"{problem} (record {done + 1})", path=path)
                    resync = done = done + 1  # (skipped: the rest is read by its WARC/1.x separator lines)
                    break
                text = _record_text(record)
                offset = it.get_record_offset()  # (reads the record to its end: after the content)
                if _cut_short(record):
                    if stream.error is not None:  # a damaged compressed stream: reported as such below
                        raise stream.error
                    errors.bad(f"the file ends inside record {done + 1} (fewer bytes than its Content-Length): "
                               "truncated; the documents before it are kept", path=path, position=f"byte {offset}")
                    return
                done += 1
                if text is not None:
                    uri = record.rec_headers.get_header("WARC-Target-URI") or f"offset {offset}"
                    yield uri, text
        if resync:
            yield from _resync(path, done, errors)
            return
        if stream.error is None:
            return
        raise stream.error
    except OverflowError:  # (warcio: a Content-Length beyond any file size)
        errors.bad(f"{LENGTH_ABSURD} (record {done + 1})", path=path)
        return
    except (ArchiveLoadFailed, *ARCHIVE_ERRORS, ValueError) as e:
        problem_exc = e
        if isinstance(e, ARCHIVE_ERRORS):
            problem = archive_problem(e)
        else:
            problem = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else 'bad record'}"
    if done > 0 and not isinstance(problem_exc, ARCHIVE_ERRORS):
        errors.warn(f"{path}: record {done + 1} does not match its Content-Length ({problem}); "
                    "read the rest by WARC/1.x separator lines")
        yield from _resync(path, done, errors)
        return
    errors.bad(f"not a readable WARC/WET file or cut inside a record ({problem})", path=path,
               position=f"byte {offset}" + (" (decompressed)" if compression(path) else ""))


MAX_RECORD_BYTES = 256 << 20  # a larger Content-Length is absurd for a WET/WARC text record (CommonCrawl cuts at 1 MiB)
LENGTH_ABSURD = f"Content-Length is absurd (more than {MAX_RECORD_BYTES:,} bytes); a damaged or forged record"


def _length_problem_of(value: str | None) -> str | None:
    """What is wrong with a record's Content-Length header value, or None."""
    if value is None:
        return "no Content-Length header"
    value = value.strip()
    if not re.fullmatch(r"[0-9]+", value):
        kind = "negative" if re.fullmatch(r"-[0-9]+", value) else "not a number"
        return f"Content-Length {value[:30]!r} is {kind}"
    if len(value) > 12 or int(value) > MAX_RECORD_BYTES:
        return LENGTH_ABSURD
    return None


def _length_problem(record) -> str | None:
    return _length_problem_of(record.rec_headers.get_header("Content-Length"))


def _resync(path: Path, done: int, errors: ErrorPolicy) -> Iterator[tuple[str, str]]:
    """The conversion records after the first `done`, read by their WARC/1.x separator lines; a record whose
    Content-Length is missing, negative, not a number or absurd is bad input (a counted skip)."""
    for i, (headers, body) in enumerate(_split_plain_warc(path)):
        if i < done:
            continue
        if problem := _length_problem_of(headers.get("content-length")):
            errors.bad(f"{problem} (record {i + 1})", path=path)
            continue
        if headers.get("warc-type") != "conversion":
            continue
        yield headers.get("warc-target-uri", f"record {i + 1}"), body


def _cut_short(record) -> bool:
    """The record's stream ended before its Content-Length (a file cut inside a record)."""
    raw = record.raw_stream
    while raw.read(1 << 16):
        pass
    return getattr(raw, "limit", 0) > 0


def _split_plain_warc(path: Path) -> Iterator[tuple[dict[str, str], str]]:
    """Records of an uncompressed WARC text file split at `WARC/1.x` lines that follow a blank line."""
    headers: dict[str, str] | None = None
    body: list[str] = []
    in_headers = False
    prev_blank = True
    with open_binary(path) as f:
        for raw in bounded_lines(f):
            line = (raw or b"").decode("utf-8", errors="replace").rstrip("\r\n")
            if prev_blank and re.fullmatch(r"WARC/1\.[01]", line):
                if headers is not None:
                    yield headers, "\n".join(body).strip("\n")
                headers, body, in_headers = {}, [], True
            elif headers is not None and in_headers:
                if line == "":
                    in_headers = False
                elif ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            elif headers is not None:
                body.append(line)
            prev_blank = line == ""
    if headers is not None:
        yield headers, "\n".join(body).strip("\n")


def _record_text(record) -> str | None:
    """The document text of a WET conversion or WARC HTML response record; None for other records."""
    kind = record.rec_type
    if kind == "conversion":
        return record.content_stream().read().decode("utf-8", errors="replace")
    if kind == "response" and record.http_headers is not None:
        ctype = record.http_headers.get_header("Content-Type") or ""
        if "html" not in ctype.lower():
            return None
        return html_to_text(decode_html(record.content_stream().read(), ctype))
    return None
