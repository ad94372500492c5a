"""The native wikitext converter (xlp_cli/text/csrc/wikitext.cpp via prepare/sources/wikipedia_text.py): what it
keeps and drops on wikitext written in the real format, markup that never closes, and no markup left in the rows
it gives for the shared real dumps."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st
from sources_helpers import SRC_FIXTURES, read_all

from xlp_cli.prepare.sources.wikipedia_text import DEFAULT_LINK_NAMESPACES, wikitext_to_lines

NS = DEFAULT_LINK_NAMESPACES | {"kategorie"}
# What benchmarks/wikipedia_throughput.py counts as markup leaking into a row.
LEAK = re.compile(r"\{\{|\}\}|\[\[|\]\]|\||<ref|&nbsp;|^\s*=.*=\s*$", re.IGNORECASE)

ARTICLE = [
    "The cat (Felis catus) is a domestic species of small carnivorous mammals. It is the only domesticated species"
    " in the family Felidae.",
    "Cats weigh about 4 kg and water is H2O – as everyone knows today.",
    "The word cat comes from Old English catt. See the online dictionary or for more.",
    "A group of cats can be called a clowder or a glaring.",
    "Cats have flexible bodies and teeth adapted for killing small prey like mices.",
    "Cats sleep 12 to 16 hours a day.",
    "The cat is crepuscular.",
    "Indented remark about colour vision.",
    "Kittens are born blind.",
    "They open their eyes after a week.",
    "Entities: AT&T; ☺ ☃ été &bogus; \ufffd.",
    "Cats are très territorial.",
    "Text after a broken template.",
    "Normal sentence at the end.",
]


def test_an_article_in_the_real_format():
    text = (SRC_FIXTURES / "wikitext_article.wiki").read_text(encoding="utf-8")
    assert wikitext_to_lines(text, NS) == ARTICLE


@pytest.mark.parametrize("wikitext,expected", [
    # links: label, trail, colon links, files under an alias, interlanguage, sister projects
    ("A [[b|c]]s and [[d]].", ["A cs and d."]),
    ("[[:fr:Chat|le chat]] and [[fr:Chat]] here.", ["le chat and here."]),
    ("[[Hình:Mèo.png|nhỏ|Con mèo]]Mèo.", ["Mèo."]),
    ("See [[wikt:felid|felid]] and [[Category:Felids|sort key]].", ["See felid and."]),
    ("[[Link across\n\nparagraphs]] text", []),
    # templates: nested, multi-line, arguments, parser functions; the inline ones that show text
    ("{{Infobox\n| a = {{b|{{c}}}}\n| d = [[e|f]]\n}}\nBody.", ["Body."]),
    ("Value {{{1|default}}} and {{#if:x|yes|no}} end.", ["Value and end."]),
    ("{{lang|el|Γάτα}} means {{nowrap|the cat}}, {{convert|3|to|5|km}} away.", ["Γάτα means the cat, 3 to 5 km away."]),
    # tables, nested and indented; an HTML table
    ("{|\n| {|\n| inner\n|}\n| outer\n|}\nAfter.", ["After."]),
    (":{| class=x\n| cell\n|}\nAfter.", ["After."]),
    ("<table><tr><td>cell</td></tr></table>After.", ["After."]),
    # refs and other dropped tags, comments, magic words, formatting tags kept
    ("A<ref name=\"x\">cite {{y}}</ref> b<ref name=x /> c<REF>d</REF>.", ["A b c."]),
    ("Before <!-- hidden --> after.<!-- never closed\nlost", ["Before after."]),
    ("__TOC__ Text __NOEDITSECTION__ here.", ["Text here."]),
    ("<span class=\"x\">Kept</span> <b>bold</b> <gallery>\nA.jpg|x\n</gallery>ok", ["Kept bold ok"]),
    ("E = mc<sup>2</sup> in <small>small print</small>.", ["E = mc2 in small print."]),
    # headings (with a trailing comment) and dropped sections, in other languages too
    ("== Title == <!-- note -->\nBody.", ["Body."]),
    ("Intro.\n== Tham khảo ==\n* Sách.\n=== Con ===\nCũng bỏ.\n== Lịch sử ==\nGiữ lại.", ["Intro.", "Giữ lại."]),
    ("Intro.\n== Παραπομπές ==\nΠηγή.\n== Ιστορία ==\nΚείμενο.", ["Intro.", "Κείμενο."]),
    # lists and indents, a horizontal rule, breaks
    ("* One item.\n## Two items.\n; Term : definition\n----\nLine<br/>break", ["One item.", "Two items.",
                                                                             "Term: definition", "Line", "break"]),
    # external links and bare URLs
    ("[https://a.org Site A] and [https://b.org] and https://c.org/x.", ["Site A and and."]),
    # entities and white space
    ("x&nbsp;&nbsp;y &amp;amp; z&#160;( ) w", ["x y &amp; z w"]),
    # the net: markup that never closes, table residue, fragments, lines without letters
    ("{{never closed\nNext line.", ["Next line."]),
    ("| a cell\n! a header\n|}\nOK.", ["OK."]),
    ("{{a}}, a fragment.\n---\n123", ["123"]),
])
def test_wikitext_cases(wikitext, expected):
    assert wikitext_to_lines(wikitext, NS) == expected


MARKUP = st.sampled_from(["{{", "}}", "{{{", "}}}", "[[", "]]", "[", "]", "|", "{|", "|}", "|-", "\n", "\n\n", "==",
                          "<ref>", "</ref>", "<ref name=x/>", "<!--", "-->", "<nowiki>", "</nowiki>", "''", "'''",
                          "&nbsp;", "&amp;", "http://x.org", "[http://x.org t]", "File:", "Category:", ":", "*", "#",
                          "<div>", "</div>", "<br>", "__TOC__", "word", "Wörter", "λέξη", " ", ".", "="])


@settings(max_examples=400, deadline=None)
@given(st.lists(MARKUP, max_size=60))
def test_any_markup_soup_gives_rows_without_markup(parts):
    for row in wikitext_to_lines("".join(parts), NS):
        assert row and row == row.strip() and not LEAK.search(row), row


@pytest.mark.integration
@pytest.mark.parametrize("name", ["enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
                                  "enwiki-table-markup.xml.bz2", "bgwiki-latest-pages-articles-shortened.xml.bz2",
                                  "elwiki-truncated-100k.xml.xz", "viwiki-truncated-100k.xml.xz"])
def test_no_markup_leaks_from_the_real_dumps(shared_data, name):
    path = shared_data / "wikipedia_dumps" / name
    if not path.is_file():
        pytest.skip(f"not found: {path}")
    recs, _ = read_all("wikipedia", [path])
    assert len(recs) > 40
    leaks = [r.text for r in recs if LEAK.search(r.text)]
    assert leaks == []  # WikiExtractor leaves some: docs/sources.md, benchmarks/wikipedia_throughput.py


def test_text_the_converter_cannot_take_is_a_record_problem():
    from xlp_cli.prepare.records import RecordProblem
    from xlp_cli.prepare.sources.wikipedia_text import page_lines

    assert page_lines("Fine text.", frozenset(NS)) == ["Fine text."]
    with pytest.raises(RecordProblem, match="wikitext could not be converted"):
        page_lines("A lone surrogate \ud800 here.", frozenset(NS))


@pytest.mark.parametrize("wikitext", [
    "[[a|" * 30000 + "x" + "]]" * 30000,           # nesting deeper than any C stack would take unbounded
    "{{lang|x|" * 20000 + "y" + "}}" * 20000,
    "Text {{b " * 20000,                           # markup that never closes, many times over
    "Text [[b " * 20000,
    "<ref>a " * 20000,
    "[http://x.org a " * 20000,
    "{|\n" * 20000,
])
def test_pathological_wikitext_is_converted_without_markup(wikitext):
    """Scans for closing markup are bounded and nesting is capped: these finish, and leave no markup."""
    rows = wikitext_to_lines(wikitext, NS)
    assert not any(LEAK.search(r) for r in rows)
