"""`--source gettext`: .mo (own binary parser, checked against the stdlib's) and .po catalogs, cleaning, locales."""

from __future__ import annotations

import gettext as stdlib_gettext
import struct

import pytest
from sources_helpers import SRC_FIXTURES, monos, pairs, read_all

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.sources.gettext import clean_message, find_catalogs, locale_lang, message_pairs, parse_mo

HEADER = "Project-Id-Version: t 1\nLanguage: {lang}\nContent-Type: text/plain; charset={cs}\nPlural-Forms: nplurals=2; plural=(n != 1);\n"


def write_mo(path, entries: dict[str, str], *, lang="de", charset="UTF-8", order="<"):
    """A GNU .mo file (the layout msgfmt writes: header, two sorted string tables, no hash table)."""
    entries = {"": HEADER.format(lang=lang, cs=charset), **entries}
    keys = sorted(entries)
    ids = [k.encode(charset) for k in keys]
    strs = [entries[k].encode(charset) for k in keys]
    n = len(keys)
    orig_at, trans_at = 28, 28 + 8 * n
    data_at = trans_at + 8 * n
    blob = b""
    orig_tab, trans_tab = [], []
    for s in ids:
        orig_tab.append((len(s), data_at + len(blob)))
        blob += s + b"\0"
    for s in strs:
        trans_tab.append((len(s), data_at + len(blob)))
        blob += s + b"\0"
    out = struct.pack(order + "7I", 0x950412DE, 0, n, orig_at, trans_at, 0, 0)
    out += b"".join(struct.pack(order + "2I", *e) for e in orig_tab)
    out += b"".join(struct.pack(order + "2I", *e) for e in trans_tab)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(out + blob)
    return path


ENTRIES = {
    "_Open File": "Datei ö_ffnen",
    "Cannot read \u201c%s\u201d: %s": "\u201e%s\u201c kann nicht gelesen werden: %s",
    "menu\x04Save": "Speichern",
    "One file\x00%d files": "Eine Datei\x00%d Dateien",
    "Untranslated": "",
    "OK": "OK",
    "Usage: tiny [OPTION]\nPrint a greeting.\n": "Aufruf: tiny [OPTION]\nGibt einen Gruß aus.\n",
    "Set max_connections to %d": "max_connections auf %d setzen",
}
EXPECTED = {
    ("Open File", "Datei öffnen"),
    ("Cannot read", "kann nicht gelesen werden"),
    ("Save", "Speichern"),
    ("One file", "Eine Datei"),
    ("Usage: tiny [OPTION]", "Aufruf: tiny [OPTION]"),
    ("Print a greeting.", "Gibt einen Gruß aus."),
    ("Set max_connections to", "max_connections auf setzen"),
}


@pytest.mark.parametrize("order", ["<", ">"], ids=["little-endian", "big-endian"])
def test_mo_catalog_pairs(tmp_path, order):
    mo = write_mo(tmp_path / "locale" / "de_DE" / "LC_MESSAGES" / "tiny.mo", ENTRIES, order=order)
    # the stdlib's parser reads our file the same way (so the writer and our parser agree with a reference)
    with open(mo, "rb") as f:
        ref = stdlib_gettext.GNUTranslations(f)
    assert ref.gettext("_Open File") == "Datei ö_ffnen" and ref.pgettext("menu", "Save") == "Speichern"
    assert {(k.decode(), v.decode()) for k, v in parse_mo(mo.read_bytes(), mo) if k} == {
        (k, v) for k, v in ENTRIES.items()}
    recs, _ = read_all("gettext", [tmp_path / "locale"])
    assert {(r.text1, r.text2) for r in recs} == EXPECTED
    assert {(r.lang1, r.lang2, r.source) for r in recs} == {("en", "de", "gettext")}  # de_DE -> de


def test_latin1_catalog(tmp_path):
    write_mo(tmp_path / "fr" / "LC_MESSAGES" / "x.mo", {"File": "Fichier réseau"}, lang="fr", charset="ISO-8859-1")
    recs, _ = read_all("gettext", [tmp_path])
    assert [(r.lang2, r.text2) for r in recs] == [("fr", "Fichier réseau")]


def test_mono_from_parallel_gives_each_english_message_once(tmp_path):
    write_mo(tmp_path / "de" / "LC_MESSAGES" / "x.mo", {"File": "Datei", "Edit": "Bearbeiten"})
    write_mo(tmp_path / "fr" / "LC_MESSAGES" / "x.mo", {"File": "Fichier", "Edit": "Édition"}, lang="fr")
    recs, _ = read_all("gettext", [tmp_path], mono_from_parallel=True)
    assert len(pairs(recs)) == 4
    assert sorted((m.lang, m.text) for m in monos(recs)) == [
        ("de", "Bearbeiten"), ("de", "Datei"), ("en", "Edit"), ("en", "File"), ("fr", "Fichier"), ("fr", "Édition")]
    recs, _ = read_all("gettext", [tmp_path], langs=["fr"], mono_from_parallel=True)
    assert {r.lang for r in monos(recs)} == {"fr"} and {r.lang2 for r in pairs(recs)} == {"fr"}


def test_one_catalog_per_domain_and_language(tmp_path):
    for loc, word in (("pt_PT", "Ficheiro"), ("pt_BR", "Arquivo"), ("de_CH", "Dateii"), ("de", "Datei"),
                      ("sr@latin", "Datoteka"), ("en_GB", "Fyle")):
        write_mo(tmp_path / loc / "LC_MESSAGES" / "x.mo", {"File": word}, lang=loc)
    recs, _ = read_all("gettext", [tmp_path])
    assert sorted((r.lang2, r.text2) for r in recs) == [("de", "Datei"), ("pt", "Arquivo")]
    assert [c[:2] for c in find_catalogs([tmp_path])] == [("de", "de"), ("pt", "pt_BR")]


def test_po_file():
    recs, _ = read_all("gettext", [SRC_FIXTURES / "de.po"])
    assert {(r.text1, r.text2) for r in recs} == {
        ("Open File", "Datei öffnen"),
        ("Cannot read", "kann nicht gelesen werden"),
        ("Save", "Speichern"),
        ("One file", "Eine Datei"),
        ("Usage: tiny [OPTION]", "Aufruf: tiny [OPTION]"),
        ("Print a greeting.", "Gibt einen Gruß aus."),
    }  # no header, no fuzzy "Quit", no untranslated, no obsolete #~ entry
    assert {r.lang2 for r in recs} == {"de"}


def test_corrupt_mo_names_file_and_byte(tmp_path):
    good = write_mo(tmp_path / "de" / "LC_MESSAGES" / "x.mo", {"File": "Datei", "Edit": "Bearbeiten"}).read_bytes()
    bad = tmp_path / "bad" / "de" / "LC_MESSAGES" / "x.mo"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(good[:60])  # tables intact, strings cut off
    with pytest.raises(BadInput) as e:
        read_all("gettext", [bad])
    assert "x.mo:byte" in e.value.one_line() and "past the end of the file" in e.value.one_line()
    bad.write_bytes(b"\x00\x01\x02\x03" + good[4:])
    with pytest.raises(BadInput, match=r"x\.mo:byte 0: not a \.mo catalog: bad magic number"):
        read_all("gettext", [bad])
    bad.write_bytes(b"")
    with pytest.raises(BadInput, match=r"x\.mo:byte 0: not a \.mo catalog"):
        read_all("gettext", [bad])


def test_po_syntax_error_names_the_line(tmp_path):
    po = tmp_path / "de.po"
    po.write_text('msgid "File"\nmsgstr "Datei"\n\nmsgid "Edit"\nthis is not po\n')
    with pytest.raises(BadInput, match=r"de\.po:5: not \.po syntax"):
        read_all("gettext", [po])


def test_no_catalog(tmp_path):
    (tmp_path / "readme.txt").write_text("x")
    with pytest.raises(BadInput, match="no .mo/.po catalog"):
        read_all("gettext", [tmp_path])


@pytest.mark.parametrize("raw,clean", [
    ("_File", "File"), ("&Open && Save", "Open & Save"), ("保存(_S)", "保存"), ("%(count)d items", "items"),
    ("Copy {0} to {dest}", "Copy to"), ("Error %1: %2", "Error"), ("%-10s|%5.2f", "|"), ("Path: $HOME", "Path"),
    ("snake_case stays", "snake_case stays"), ("100% sure", "100% sure"), ("100%% done", "100% done"),
])
def test_clean_message(raw, clean):
    assert clean_message(raw) == clean


def test_message_pairs_rules():
    assert message_pairs("OK", "OK") == []  # identical: not a translation
    assert message_pairs("%s", "%s") == []
    assert message_pairs("A\nB", "Ein A B") == [("A B", "Ein A B")]  # line counts differ: joined
    assert locale_lang("zh_CN") == "zh" and locale_lang("sr@latin") is None and locale_lang("C") is None
