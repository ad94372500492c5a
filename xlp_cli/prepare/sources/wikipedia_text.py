"""Wikitext -> plain-text paragraphs for `--source wikipedia`, by the native converter (xlp_cli/text/csrc/wikitext.cpp).

One pass over the article's UTF-8 bytes, without the GIL. Dropped: templates, parser functions and template
arguments (`{{...}}`, `{{{...}}}`), tables (`{| ... |}`), comments, `<ref>` and the other non-prose tags
(`<math>`, `<gallery>`, `<small>`, ...: csrc/wikitext.cpp's DROP_TAGS), headings, the sections named in
`DROP_SECTIONS` (references, external links, see also, ... in the languages listed), file/image/category and
interlanguage links, links with two or more `|` (images under an alias), bare URLs, magic words, bold and italic
quotes. Kept: link texts (`[[a|b]]` -> b), external link titles, list items and indented lines (their markers
removed), the contents of formatting tags (`<span>`, `<b>`, ...), `<nowiki>` text, HTML entities (decoded).
A few inline templates show their text ({{lang|xx|text}}, {{nowrap|text}}, {{convert|4|kg}} -> 4 kg), and a piped
link to a sister project its label. Markup that never closes stays text, and a last net drops a line that still
holds `{{`, `}}`, `[[`, `]]`, `|`, `<ref`, a `=...=` line, a line starting with `!` or with the `, ; . )` left
where markup was removed, and a line without a letter or digit. docs/sources.md compares this with WikiExtractor.
"""

from __future__ import annotations

import functools
import html.entities
from typing import Any

from xlp_cli.prepare.records import RecordProblem
from xlp_cli.text import native

# Canonical (English) names of the namespaces whose links are not prose: File (6), Category (14), ...
DEFAULT_LINK_NAMESPACES = {"file", "image", "media", "category", "template", "wikipedia", "help", "portal",
                           "special", "user", "talk", "module", "draft", "mediawiki", "wp", "wikt", "wiktionary",
                           "commons", "s", "q", "n", "b", "v", "voy", "species", "d", "mw", "meta", "m", "w"}

# Headings (compared lower-cased) whose section is lists of sources and links, not prose; the section ends at
# the next heading of the same or a higher level.
DROP_SECTIONS = (
    # en
    "references", "external links", "see also", "further reading", "notes", "bibliography", "sources",
    "footnotes", "citations", "notes and references", "works cited", "general references", "other websites",
    # de, fr, es, it, pt, nl
    "einzelnachweise", "weblinks", "literatur", "siehe auch", "anmerkungen", "quellen",
    "références", "notes et références", "liens externes", "voir aussi", "bibliographie", "articles connexes",
    "referencias", "enlaces externos", "véase también", "bibliografía", "notas",
    "note", "collegamenti esterni", "voci correlate", "bibliografia", "altri progetti",
    "referências", "ligações externas", "ver também",
    "referenties", "externe links", "zie ook", "bronnen",
    # ru, bg, el, vi
    "примечания", "ссылки", "литература", "см. также", "источники",
    "източници", "външни препратки", "вижте също", "бележки",
    "παραπομπές", "εξωτερικοί σύνδεσμοι", "δείτε επίσης", "βιβλιογραφία", "πηγές", "σημειώσεις",
    "tham khảo", "liên kết ngoài", "xem thêm", "chú thích", "đọc thêm", "ghi chú",
)


@functools.lru_cache(maxsize=8)
def converter(link_namespaces: frozenset[str]) -> Any:
    """The native converter for one dump's link namespaces (built once per process and dump)."""
    entities = {name: text for name, text in html.entities.html5.items() if name.endswith(";")}
    return native.module().Wikitext(sorted(link_namespaces), DROP_SECTIONS, entities)


def wikitext_to_lines(wikitext: str, link_namespaces: set[str] | frozenset[str]) -> list[str]:
    """Plain-text paragraphs of an article's wikitext (see the module docstring for what is kept)."""
    return converter(frozenset(link_namespaces)).lines(wikitext)


def page_lines(wikitext: str | bytes, link_namespaces: frozenset[str]) -> list[str]:
    """`wikitext_to_lines` as a `RawPage.extract` function (runs in the worker processes); the dump reader gives
    the text as UTF-8 bytes (sources/wikipedia_xml.py)."""
    try:
        return converter(link_namespaces).lines(wikitext.decode("utf-8") if isinstance(wikitext, bytes) else wikitext)
    except (UnicodeError, MemoryError) as e:  # a lone surrogate from a character reference; a page too big
        raise RecordProblem(f"wikitext could not be converted ({type(e).__name__}: {e})") from None


page_lines.native = converter  # type: ignore[attr-defined]  # (the converter it runs: process.py's native path)
