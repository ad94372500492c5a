"""The Python-handler reader of MediaWiki dumps that xlp used before its handlers moved to C++
(text/csrc/dumpxml.cpp), kept as the test oracle of xlp_cli/prepare/sources/wikipedia_xml.py: the same items
(a page's text as str here, as UTF-8 bytes there) and the same errors, from pyexpat with Python handlers."""

from __future__ import annotations

from typing import Any
from xml.parsers import expat

from xlp_cli.prepare.sources.wikipedia_xml import BLOCK, XML_LANG, Page, SiteInfo


def _local(name: str) -> str:
    return name.rpartition("}")[2]


class OracleEvents:
    """Feed the dump's bytes in blocks; each `feed` returns the SiteInfo and Page items completed by that block.
    Raises expat.ExpatError for malformed XML (and, with `final`, for a document that ended early)."""

    def __init__(self) -> None:
        p = expat.ParserCreate(None, "}")  # the encoding from the XML declaration or the BOM, as ElementTree
        p.buffer_text = True
        p.buffer_size = BLOCK
        p.StartElementHandler = self._start
        p.EndElementHandler = self._end
        p.CharacterDataHandler = self._data
        self.parser = p
        self.root_lang: str | None = None
        self.items: list[SiteInfo | Page] = []
        self.error: expat.ExpatError | None = None
        self.depth = 0
        # the element being read: <page> or <siteinfo>, its depth, and the fields found so far
        self.page: dict[str, Any] | None = None
        self.site: SiteInfo | None = None
        self.top = 0  # depth of the open <page> / <siteinfo>
        self.revision = 0  # depth of the page's first <revision> while it is open (0: none open)
        self.namespaces = 0  # depth of <siteinfo>'s <namespaces> while it is open
        # the element whose text is being collected: where its text goes, its depth, its key attribute
        self.target: str | None = None
        self.target_depth = 0
        self.key: str | None = None
        self.parts: list[str] = []

    def feed(self, data: bytes, final: bool = False) -> list[SiteInfo | Page]:
        """The items completed by `data`. Malformed XML: the items completed before the error, and the error
        in `self.error` (the caller raises it once it has taken them)."""
        try:
            self.parser.Parse(data, final)
        except expat.ExpatError as e:
            self.error = e
        items, self.items = self.items, []
        return items

    def _collect(self, target: str, key: str | None = None) -> None:
        self.target, self.target_depth, self.key, self.parts = target, self.depth, key, []

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        depth = self.depth = self.depth + 1
        if self.target is not None:
            self._finish()  # a child element: the text before it is the whole `.text`
        local = _local(name)
        if depth == 1:
            self.root_lang = attrs.get(XML_LANG)
        page, site = self.page, self.site
        if page is not None:
            if depth == self.top + 1:
                if local in ("title", "ns") and local not in page:
                    self._collect(local)
                elif local == "redirect":
                    page["redirect"] = True
                elif local == "revision" and "revision" not in page:
                    page["revision"] = True
                    self.revision = depth
            elif self.revision and depth == self.revision + 1 and local == "text" and "text" not in page:
                self._collect("text")
        elif site is not None:
            if depth == self.top + 1:
                if local == "dbname" and site.dbname is None:
                    self._collect("dbname")
                elif local == "namespaces":
                    self.namespaces = depth
            elif self.namespaces and depth == self.namespaces + 1 and local == "namespace":
                self._collect("namespace", attrs.get("key"))
        elif local == "page":
            self.page, self.top = {}, depth
        elif local == "siteinfo":
            self.site, self.top = SiteInfo(None, []), depth

    def _data(self, text: str) -> None:
        if self.target is not None and self.depth == self.target_depth:
            self.parts.append(text)

    def _finish(self) -> None:
        """Store the text collected for the target element."""
        target, text, self.target, self.parts = self.target, "".join(self.parts), None, []
        if target == "namespace":
            assert self.site is not None
            self.site.namespaces.append((self.key, text))
        elif target == "dbname":
            assert self.site is not None
            self.site.dbname = text
        elif self.page is not None and target is not None:
            self.page[target] = text

    def _end(self, name: str) -> None:
        depth = self.depth
        self.depth -= 1
        if self.target is not None and depth == self.target_depth:
            self._finish()
        elif depth == self.revision:
            self.revision = 0
        elif depth == self.namespaces:
            self.namespaces = 0
        if depth != self.top:
            return
        if self.page is not None:
            p = self.page
            self.items.append(Page(p.get("title"), p.get("ns"), p.get("redirect", False), p.get("revision", False),
                                   p.get("text")))
            self.page = None
        elif self.site is not None:
            self.items.append(self.site)
            self.site = None
