"""The parts of a MediaWiki XML dump that `--source wikipedia` reads, straight from expat's events.

    events = DumpEvents()
    for item in events.feed(block, final=not block):   # SiteInfo and Page, in document order
        ...
    if events.error: raise events.error                 # malformed XML, after the items before it

expat (the parser behind ElementTree) checks the XML and reports errors as `expat.ExpatError` with line,
column and code (after the items completed before the error, as ElementTree's iterparse). No element tree is
built; the handlers keep only
- `<siteinfo>`: the text of its first `<dbname>` and each `<namespaces>/<namespace>`'s key and text;
- each `<page>`: the texts of its first `<title>` and `<ns>`, whether it has a `<redirect>`, and the text of
  the first `<text>` of its first `<revision>`;
- the root's `xml:lang`.
An element's text is what ElementTree calls `.text`: its character data before its first child element.
Element names are compared without their namespace (dumps declare export-0.10, 0.11, ... as the default).

The handlers are C++ (text/csrc/dumpxml.cpp's DumpParser), on Python's own expat through the C API pyexpat
exports (as _elementtree uses it): the same checks, errors and encodings as xml.parsers.expat. A block parses
without the GIL, and a page's text comes out as UTF-8 bytes, which the native text pipeline takes as they are.
On the vi dump's 15 MB of XML: 0.10-0.11 s of CPU with Python handlers (tests/dump_events_oracle.py, the former
reader, now the test oracle) -> 0.064 s, and no str of 12 MB to make here and to encode again in the workers
(docs/prepare.md, "Speed"). Memory holds one page's fields at a time.
"""

from __future__ import annotations

import dataclasses
from xml.parsers import expat

from xlp_cli.text.native import module

XML_LANG = "http://www.w3.org/XML/1998/namespace}lang"  # (the name expat gives xml:lang with "}" as separator)
BLOCK = 1 << 16  # bytes given to expat at a time


@dataclasses.dataclass(slots=True)
class SiteInfo:
    dbname: str | None
    namespaces: list[tuple[str | None, str]]  # (key attribute, text) of each <namespace>


@dataclasses.dataclass(slots=True)
class Page:
    title: str | None
    ns: str | None
    redirect: bool
    revision: bool  # whether it has a <revision>
    text: bytes | None  # the first revision's <text>, UTF-8 (None: no such element)


class DumpEvents:
    """Feed the dump's bytes in blocks; each `feed` returns the SiteInfo and Page items completed by that block.
    Malformed XML (and, with `final`, a document that ended early): `self.error`, an expat.ExpatError."""

    def __init__(self) -> None:
        self.parser = module().DumpParser()
        self.error: expat.ExpatError | None = None

    @property
    def root_lang(self) -> str | None:
        return self.parser.root_lang

    def feed(self, data: bytes, final: bool = False) -> list[SiteInfo | Page]:
        """The items completed by `data`. Malformed XML: the items completed before the error, and the error
        in `self.error` (the caller raises it once it has taken them)."""
        found = self.parser.feed(data, final)
        if self.error is None and self.parser.error is not None:
            code, line, column = self.parser.error
            error = expat.ExpatError(f"{expat.ErrorString(code)}: line {line}, column {column}")  # (pyexpat's words)
            error.code, error.lineno, error.offset = code, line, column
            self.error = error
        return [Page(*t[1:]) if t[0] == "page" else SiteInfo(t[1], t[2]) for t in found]
