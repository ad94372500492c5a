"""sources/wikipedia_xml.DumpEvents (C++ handlers on pyexpat's expat, text/csrc/dumpxml.cpp) against the Python
handlers it replaced (tests/dump_events_oracle.py): the same items, in the same feeds, and the same errors, on the
shared dumps, on hand-written edge cases, in several encodings, and on damaged copies."""

from __future__ import annotations

import random

import pytest
from dump_events_oracle import OracleEvents
from sources_helpers import shared_dumps

from xlp_cli.prepare.sources.wikipedia_xml import BLOCK, DumpEvents, Page

DUMP = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" xml:lang="{lang}">
  <siteinfo><sitename>W</sitename><dbname>{lang}wiki</dbname>
    <namespaces><namespace key="-2" case="first-letter">Media</namespace><namespace key="0" case="x" />
      <namespace>NoKey</namespace><namespace key="14">Th&#x1EC3; lo&#7841;i</namespace></namespaces>
  </siteinfo>
  <page><title>Alpha &amp; &#x1F600;</title><ns>0</ns><id>1</id>
    <revision><id>5</id><text xml:space="preserve">'''Alpha''' is &lt;b&gt; [[x|y]] {{{{t}}}}
second line <![CDATA[<raw> & stuff]]> end<!-- a comment --> tail</text></revision>
    <revision><text>second revision: not read</text></revision></page>
  <page><title>Redirected</title><ns>0</ns><redirect title="Alpha" /><revision><text>#REDIRECT [[Alpha]]</text></revision></page>
  <page><title>Talk:Beta<sub>x</sub> after</title><ns>1</ns><revision><text>talk</text></revision></page>
  <page><title>No revision</title><ns>0</ns></page>
  <page><title>Empty text</title><ns>0</ns><revision><text /></revision></page>
  <page><title>Text with a child</title><revision><text>before<b>inside</b>after</text></revision><title>2nd</title></page>
  <page><title>\u0394\u03ad\u03bb\u03c4\u03b1 \u0111\u1ea5t</title><ns>0</ns><revision><text>\u03ba\u03b5\u03af\u03bc\u03b5\u03bd\u03bf \u0111\u00e2y</text></revision></page>
</mediawiki>
"""


def _norm(item):
    """(kind, fields); a page's text as str (the oracle's is a str, DumpEvents' UTF-8 bytes)."""
    fields = {f: getattr(item, f) for f in item.__slots__}
    if isinstance(fields.get("text"), bytes):
        fields["text"] = fields["text"].decode("utf-8")
    return type(item).__name__, fields


def _error(e):
    return None if e is None else (type(e), str(e), e.code, e.lineno, e.offset)


def _run(cls, data: bytes, sizes: list[int]):
    """Per feed: its items; then the error and the root's xml:lang."""
    events, feeds, at, k = cls(), [], 0, 0
    while True:
        block = data[at:at + sizes[k % len(sizes)]]
        at, k = at + len(block), k + 1
        feeds.append([_norm(i) for i in events.feed(block, final=not block)])
        if events.error is not None or not block:
            break
    return feeds, _error(events.error), events.root_lang


def _same(data: bytes, sizes=(BLOCK,)):
    want = _run(OracleEvents, data, list(sizes))
    assert _run(DumpEvents, data, list(sizes)) == want
    return want


def test_edge_cases_give_the_oracles_items_in_the_same_feeds():
    data = DUMP.format(lang="vi").encode("utf-8")
    assert all(isinstance(i.text, bytes) for i in DumpEvents().feed(data, True) if isinstance(i, Page) and i.text)
    feeds, error, lang = _same(data)
    items = [i for f in feeds for i in f]
    assert error is None and lang == "vi" and len(items) == 8
    site = items[0][1]
    assert site["dbname"] == "viwiki" and site["namespaces"] == [("-2", "Media"), ("0", ""), (None, "NoKey"),
                                                                  ("14", "Th\u1ec3 lo\u1ea1i")]
    alpha = items[1][1]
    assert alpha["title"] == "Alpha & \U0001F600" and "<raw> & stuff" in alpha["text"] and "comment" not in alpha["text"]
    assert items[6][1]["text"] == "before" and items[6][1]["title"] == "Text with a child"
    for sizes in ([1], [7, 3, 50], [100, 1]):  # blocks that split tags, entities and characters
        _same(data, sizes)


@pytest.mark.parametrize("encoding", ["utf-16", "iso-8859-1", "windows-1251", "utf-8-sig"])
def test_declared_encodings_read_as_the_oracle_reads_them(encoding):
    """UTF-16 with its BOM, ISO-8859-1 (expat's own), windows-1251 (unknown to expat: pyexpat's codec handler,
    which the native parser calls with the GIL held), UTF-8 with a BOM."""
    text = DUMP.format(lang="bg").replace("\U0001F600", "x").replace("&#x1F600;", "x")
    if encoding in ("iso-8859-1", "windows-1251"):
        text = text.encode(encoding, "replace").decode(encoding)  # (what the encoding can hold)
        text = '<?xml version="1.0" encoding="%s"?>\n' % encoding + text
    feeds, error, _ = _same(text.encode(encoding), (BLOCK, 13))
    assert error is None and sum(map(len, feeds)) == 8


@pytest.mark.parametrize("bad", [
    "<mediawiki><page><title>a</title></mediawiki>",  # mismatched tag
    "<mediawiki><page><title>a &bogus; b</title></page></mediawiki>",  # undefined entity
    "<mediawiki><page><title>ok</title></page><page><title>cut",  # ends early (no `final` error until the end)
    "<mediawiki><page><title>a</title></page></mediawiki><after/>",  # junk after the document element
    "<mediawiki><page><title>\x01</title></page></mediawiki>",  # not an XML character
    "<mediawiki><page><title>&#xD800;</title></page></mediawiki>",  # reference to a surrogate
    "",  # no element found
])
def test_malformed_xml_gives_the_oracles_error_after_its_items(bad):
    feeds, error, _ = _same(bad.encode("utf-8"), (BLOCK, 5))
    assert error is not None


def test_invalid_utf8_gives_the_oracles_error():
    data = DUMP.format(lang="el").encode("utf-8")
    at = data.index(b"second line")
    _, error, _ = _same(data[:at] + b"\xff\xfe" + data[at:])
    assert error is not None and "not well-formed" in error[1]


def test_damaged_copies_give_the_oracles_items_and_errors():
    data = DUMP.format(lang="de").encode("utf-8")
    rng = random.Random(5)
    errors = 0
    for trial in range(300):
        damaged = bytearray(data)
        for _ in range(1 + trial % 4):
            damaged[rng.randrange(len(damaged))] = rng.choice(b"<>&;/\"'=!?[]\x00\xc3\xa9 ab")
        errors += _same(bytes(damaged), (rng.choice([BLOCK, 11, 64]),))[1] is not None
    assert errors > 150


@pytest.mark.integration
def test_the_shared_dumps_read_as_the_oracle_reads_them(shared_data):
    pages = 0
    for _, xml in shared_dumps(shared_data):
        feeds, _, _ = _same(xml)
        pages += sum(1 for f in feeds for kind, _ in f if kind == "Page")
    assert pages > 1000
