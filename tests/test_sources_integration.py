"""Every source on the real shared corpora: every Wikipedia dump, CommonCrawl file and OPUS XCES zip,
Multi30k train as Moses files, GlobalVoices en-sw, and the machine's gettext catalogs."""

from __future__ import annotations

import gettext as stdlib_gettext
import re
import unicodedata
from collections import Counter

import pytest
from sources_helpers import monos, pairs, read_all

from xlp_cli.prepare.sources.gettext import DEFAULT_ROOTS, find_catalogs, parse_mo

pytestmark = pytest.mark.integration

WIKI_MARKUP = re.compile(r"\{\{|\}\}|\[\[|\]\]|<ref|</ref|\|-|\{\||\|\}|'''|thumb\||\d+px\|")
SCRIPT = {"en": "LATIN", "bg": "CYRILLIC", "el": "GREEK", "vi": "LATIN", "ru": "CYRILLIC", "zh": "CJK",
          "de": "LATIN", "fi": "LATIN", "sw": "LATIN", "es": "LATIN", "an": "LATIN", "th": "THAI", "ar": "ARABIC",
          "hi": "DEVANAGARI", "fr": "LATIN", "tr": "LATIN"}


def script_share(texts, script: str) -> float:
    """Share of the letters in `texts` whose Unicode name starts with `script`."""
    letters = [ch for t in texts for ch in t if ch.isalpha()]
    hits = sum(1 for ch in letters if unicodedata.name(ch, "").startswith(script))
    return hits / max(1, len(letters))


WIKI_EXPECT = {  # file -> (language, at least this many articles, truncated?)
    "bgwiki-latest-pages-articles-shortened.xml.bz2": ("bg", 1, False),
    "elwiki-truncated-100k.xml.xz": ("el", 400, True),
    "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2": ("en", 100, False),
    "enwiki-table-markup.xml.bz2": ("en", 5, False),
    "viwiki-truncated-100k.xml.xz": ("vi", 200, True),
}


def test_every_wikipedia_dump(shared_data):
    folder = shared_data / "wikipedia_dumps"
    files = sorted(p for p in folder.iterdir() if p.name != "SOURCE.md")
    assert {p.name for p in files} == set(WIKI_EXPECT)
    for path in files:
        lang, min_articles, truncated = WIKI_EXPECT[path.name]
        recs, errors = read_all("wikipedia", [path])
        articles = {r.origin for r in recs}
        assert len(articles) >= min_articles, path.name
        assert {r.lang for r in recs} == {lang}, path.name
        assert script_share([r.text for r in recs[:500]], SCRIPT[lang]) > 0.8, path.name
        leftovers = [r.text for r in recs if WIKI_MARKUP.search(r.text)]
        assert leftovers == [], (path.name, leftovers[:3])
        assert not any(r.origin.split("#", 1)[1].startswith(("Category:", "File:", "Template:", "Wikipedia:"))
                       for r in recs)
        if truncated:
            assert len(errors.warnings) == 1 and "truncated dump" in errors.warnings[0] and path.name in errors.warnings[0]
        else:
            assert errors.warnings == [], path.name


def test_table_markup_dump_keeps_prose_not_tables(shared_data):
    recs, _ = read_all("wikipedia", [shared_data / "wikipedia_dumps" / "enwiki-table-markup.xml.bz2"])
    texts = [r.text for r in recs]
    assert any(t.startswith("The constructive vote of no confidence (in German: konstruktives Misstrauensvotum")
               for t in texts)
    assert not any("cellpadding" in t or "background:#" in t or "wikitable" in t for t in texts)


def test_every_commoncrawl_file(shared_data):
    folder = shared_data / "commoncrawl_wet"
    docs = {}
    for path in sorted(folder.iterdir()):
        if path.name == "SOURCE.md" or ".wat" in path.name:
            continue  # WAT holds metadata JSON, no text
        recs, errors = read_all("commoncrawl", [path])
        docs[path.name] = (recs, errors)
    en = docs["cc_net_sample.warc.wet"][0]
    assert Counter(r.lang for r in en) == {"en": 5, "zh": 5, "ru": 5}
    assert script_share([r.text for r in en if r.lang == "zh"], "CJK") > 0.9
    assert script_share([r.text for r in en if r.lang == "ru"], "CYRILLIC") > 0.9
    assert any("Content-Length" in w for w in docs["cc_net_sample.warc.wet"][1].warnings)  # hand-made lengths
    for name in ("whirlwind.warc.wet", "whirlwind.warc.wet.gz", "whirlwind.warc.gz"):
        recs = docs[name][0]
        # the page is the Aragonese Wikipedia's "Escopete" (CommonCrawl's own LID said "spa")
        assert recs and {r.lang for r in recs} == {"an"}, name
        assert any("Escopete" in r.text for r in recs) and all("<" not in r.text[:1] for r in recs)
    html_text = " ".join(r.text for r in docs["whirlwind.warc.gz"][0])
    assert "function(" not in html_text and "{display" not in html_text  # no script/style
    recs, _ = read_all("commoncrawl", [folder / "cc_net_sample.warc.wet"], langs=["ru"])
    assert {r.lang for r in recs} == {"ru"} and len(recs) == 5
    recs, _ = read_all("commoncrawl", [folder])  # the whole folder: SOURCE.md and the WAT file are passed over
    assert len(recs) == sum(len(r) for r, _ in docs.values())


def test_every_opus_xces_zip(shared_data):
    folder = shared_data / "opus_xces_books"
    recs, errors = read_all("opus", [folder])
    by = Counter(r.lang for r in monos(recs))
    assert by == {"en": 3831, "fi": 3757}  # every <s> of both books (no cesAlign in the release: Mono)
    en = [r.text for r in recs if r.lang == "en"]
    assert "The Hound of the Baskervilles" in en
    assert not any(" ." in t[-3:] for t in en[:200])  # detokenized, not "word ."


def test_opus_xces_with_own_alignment(shared_data, tmp_path):
    """The release zips plus a hand-made cesAlign (the release has none; OpusTools' tests do the same)."""
    align = tmp_path / "en-fi.xml"
    align.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<cesAlign version="1.0">\n'
        '<linkGrp targType="s" fromDoc="en/Doyle_Arthur_Conan-Hound_of_the_Baskervilles.xml.gz" '
        'toDoc="fi/Doyle_Arthur_Conan-Hound_of_the_Baskervilles.xml.gz">\n'
        '<link xtargets="s2;s2" />\n</linkGrp>\n</cesAlign>\n')
    folder = shared_data / "opus_xces_books"
    recs, _ = read_all("opus", [folder / "Books_v1_xml_en.zip", folder / "Books_v1_xml_fi.zip", align])
    assert len(pairs(recs)) == 1 and pairs(recs)[0].text1 == "The Hound of the Baskervilles"
    assert (pairs(recs)[0].lang1, pairs(recs)[0].lang2) == ("en", "fi")
    assert monos(recs) == []  # both documents were used by the alignment


def test_multi30k_train_as_moses(shared_data):
    folder = shared_data / "multi30k"
    recs, _ = read_all("opus", [folder / "train.de.gz", folder / "train.en.gz"], langs=["de", "en"])
    assert len(recs) == 29000 and {(r.lang1, r.lang2) for r in recs} == {("de", "en")}
    assert recs[0].text2.startswith("Two young, White males")
    assert sum("ä" in r.text1 or "ü" in r.text1 or "ö" in r.text1 for r in recs) > 1000


def test_globalvoices_en_sw(shared_data):
    recs, _ = read_all("opus", [shared_data / "opus_globalvoices_en_sw"], mono_from_parallel=True)
    assert len(pairs(recs)) == 29698 and {(r.lang1, r.lang2) for r in pairs(recs)} == {("en", "sw")}
    assert Counter(r.lang for r in monos(recs)) == {"en": 29698, "sw": 29698}


def test_text_source_on_multi30k(shared_data):
    folder = shared_data / "multi30k"
    recs, _ = read_all("text", [folder / "val.*.gz"], langs=["cs", "de", "en", "fr"])
    assert Counter(r.lang for r in recs) == {"cs": 1014, "de": 1014, "en": 1014, "fr": 1014}


def test_gettext_on_this_machine():
    roots = [r for r in DEFAULT_ROOTS if r.is_dir()]
    if not roots:
        pytest.skip(f"no gettext catalogs on this machine (looked in {', '.join(map(str, DEFAULT_ROOTS))})")
    langs = ["de", "ru", "zh", "el"]
    recs, errors = read_all("gettext", [], langs=langs, max_records=4000)
    counts = Counter(r.lang2 for r in recs)
    assert set(counts) <= set(langs) and all(counts[l] > 100 for l in langs), counts
    assert {r.lang1 for r in recs} == {"en"}
    for lang, script in (("ru", "CYRILLIC"), ("zh", "CJK"), ("el", "GREEK")):
        assert script_share([r.text2 for r in recs if r.lang2 == lang], script) > 0.6, lang
    assert script_share([r.text1 for r in recs], "LATIN") > 0.95
    placeholder = re.compile(r"%[sd]\b|%\d\$|\{\d\}")
    assert not [r for r in recs if placeholder.search(r.text1) or placeholder.search(r.text2)][:3]
    assert not errors.skipped


def test_gettext_mo_parser_agrees_with_stdlib():
    cats = [c for c in find_catalogs([]) if c[2].suffix == ".mo"]
    if not cats:
        pytest.skip("no .mo catalogs on this machine")
    for _lang, _loc, path in cats[:: max(1, len(cats) // 25)][:25]:
        ours = {k: v for k, v in parse_mo(path.read_bytes(), path) if k}
        with open(path, "rb") as f:
            ref = stdlib_gettext.GNUTranslations(f)
        cs = ref.charset() or "utf-8"
        for key, value in list(ours.items())[:200]:
            k, v = key.decode(cs), value.decode(cs)
            if "\x00" in k:  # plural entries: the stdlib keys them by (msgid, n)
                assert ref._catalog[(k.split("\x00")[0], 0)] == v.split("\x00")[0], path
            else:
                assert ref._catalog[k] == v, path
