"""`--source opus`: Moses pairs, TMX, XCES (sentence XML + cesAlign), zips, and their bad inputs."""

from __future__ import annotations

import gzip
import io
import zipfile

import pytest
from sources_helpers import SRC_FIXTURES, monos, pairs, read_all

from xlp_cli.core.errors import BadInput

MOSES = SRC_FIXTURES / "moses"
XCES = SRC_FIXTURES / "xces"


def test_moses_opus_naming_skips_empty_sides():
    recs, _ = read_all("opus", [MOSES / "tiny.de-en.de", MOSES / "tiny.de-en.en"])
    assert [(r.lang1, r.lang2, r.text1, r.text2) for r in recs] == [
        ("de", "en", "Guten Morgen.", "Good morning."),
        ("de", "en", "Wie geht es dir?", "How are you?"),
        ("de", "en", "Danke, gut.", "Thanks, fine."),  # line 3 has an empty German side
    ]
    assert recs[2].origin.endswith("tiny.de-en.de:4")


def test_moses_mono_from_parallel():
    recs, _ = read_all("opus", [MOSES / "tiny.de-en.de", MOSES / "tiny.de-en.en"], mono_from_parallel=True)
    assert len(pairs(recs)) == 3
    assert sorted((m.lang, m.text) for m in monos(recs))[:2] == [("de", "Danke, gut."), ("de", "Guten Morgen.")]
    assert len(monos(recs)) == 6


def test_moses_different_lengths_is_one_line_error():
    with pytest.raises(BadInput) as e:
        read_all("opus", [MOSES / "unequal.de-en.de", MOSES / "unequal.de-en.en"])
    msg = e.value.one_line()
    assert "\n" not in msg and "parallel files differ in length" in msg
    assert "unequal.de-en.en ends at line 2" in msg and "unequal.de-en.de:3" in msg


def test_moses_plain_names_and_explicit_pairing(tmp_path):
    (tmp_path / "train.de.gz").write_bytes(gzip.compress("Ein Hund.\nZwei Katzen.\n".encode()))
    (tmp_path / "train.en.gz").write_bytes(gzip.compress(b"A dog.\nTwo cats.\n"))
    (tmp_path / "train.fr.gz").write_bytes(gzip.compress("Un chien.\nDeux chats.\n".encode()))
    recs, _ = read_all("opus", [tmp_path / "train.de.gz", tmp_path / "train.en.gz"], langs=["de", "en"])
    assert [(r.lang1, r.lang2, r.text1, r.text2) for r in recs][0] == ("de", "en", "Ein Hund.", "A dog.")
    recs, _ = read_all("opus", [tmp_path], langs=["en", "fr"])  # the de file is not asked for
    assert {(r.lang1, r.lang2) for r in recs} == {("en", "fr")}
    recs, _ = read_all("opus", [tmp_path])  # three languages of one name: every pair
    assert {(r.lang1, r.lang2) for r in recs} == {("de", "en"), ("de", "fr"), ("en", "fr")}
    (tmp_path / "a.txt").write_text("Hallo.\n")
    (tmp_path / "b.txt").write_text("Hello.\n")
    recs, _ = read_all("opus", [tmp_path / "a.txt", tmp_path / "b.txt"], langs=["de", "en"])
    assert [(r.lang1, r.lang2, r.text1, r.text2) for r in recs] == [("de", "en", "Hallo.", "Hello.")]
    with pytest.raises(BadInput, match=r"a\.txt: cannot pair this text file"):
        read_all("opus", [tmp_path / "a.txt"], langs=["de", "en"])


def test_moses_invalid_utf8_names_the_file(tmp_path):
    (tmp_path / "c.de-en.de").write_bytes(b"gut\nschlecht \xff\nauch gut\n")
    (tmp_path / "c.de-en.en").write_bytes(b"good\nbad\nalso good\n")
    with pytest.raises(BadInput, match=r"c\.de-en\.de:2: invalid UTF-8"):
        read_all("opus", [tmp_path])
    recs, errors = read_all("opus", [tmp_path], mode="skip")
    assert [r.text2 for r in recs] == ["good", "also good"] and sum(errors.skipped.values()) == 1


def test_tmx_pairs_inline_codes_and_lang_attributes():
    recs, _ = read_all("opus", [SRC_FIXTURES / "tiny.tmx"])
    got = [(r.lang1, r.lang2, r.text1, r.text2) for r in recs]
    assert got[0] == ("en", "de", "Open the file.", "Öffne die Datei.")
    assert ("en", "de", "Click Save to keep your changes.", "Klicke auf Speichern, um die Änderungen zu behalten.") in got
    assert ("en", "fr", "Click Save to keep your changes.", "Cliquez sur Enregistrer pour garder vos modifications.") in got
    assert ("en", "de", "Good night.", "Gute Nacht.") in got  # TMX 1.1 `lang="EN"`
    assert len(got) == 5  # the one-sided <tu> gives nothing
    recs, _ = read_all("opus", [SRC_FIXTURES / "tiny.tmx"], langs=["de", "fr"])
    assert [(r.lang1, r.lang2) for r in recs] == [("de", "fr")]


def test_xces_alignment_pairs():
    recs, _ = read_all("opus", [XCES])
    assert [(r.lang1, r.lang2, r.text1, r.text2) for r in recs] == [
        ("de", "en", "Der Hund bellte.", "The dog barked."),
        ("de", "en", "„Wer ist da?“, fragte sie.", '"Who is there?" she asked.'),  # detokenized
        ("de", "en", "Es war spät. Und es war kalt.", "It was late, and it was cold."),  # 2:1 link; the 1:0 link is skipped
    ]


def test_xces_sentence_xml_alone_is_mono():
    recs, _ = read_all("opus", [XCES / "en" / "story.xml"])
    assert [(r.lang, r.text) for r in recs][:2] == [("en", "The dog barked."), ("en", '"Who is there?" she asked.')]
    assert len(recs) == 4 and recs[0].origin.endswith("story.xml#s1")


def test_xces_inside_zips_and_gz_members(tmp_path):
    for lang in ("de", "en"):
        with zipfile.ZipFile(tmp_path / f"Story_v1_xml_{lang}.zip", "w") as zf:
            zf.writestr("README", "about the corpus")
            zf.writestr(f"Story/xml/{lang}/story.xml.gz", gzip.compress((XCES / lang / "story.xml").read_bytes()))
    (tmp_path / "de-en.xml").write_bytes((XCES / "de-en.xml").read_bytes())
    recs, _ = read_all("opus", [tmp_path])
    assert len(recs) == 3 and recs[0].text2 == "The dog barked."
    assert "Story_v1_xml_de.zip!Story/xml/de/story.xml.gz" not in recs[0].origin  # origin is the alignment
    recs, _ = read_all("opus", [tmp_path / "Story_v1_xml_de.zip"])
    assert {r.lang for r in recs} == {"de"} and len(recs) == 5


def test_alignment_without_its_documents(tmp_path):
    (tmp_path / "de-en.xml").write_bytes((XCES / "de-en.xml").read_bytes())
    with pytest.raises(BadInput, match=r"aligned document 'de/story\.xml\.gz' is not among the inputs"):
        read_all("opus", [tmp_path / "de-en.xml"])


def test_zip_member_escaping_is_refused(tmp_path):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("../../outside.de-en.de", "x\n")
        zf.writestr("ok/c.de-en.de", "Hallo.\n")
        zf.writestr("ok/c.de-en.en", "Hello.\n")
    with pytest.raises(BadInput, match=r"evil\.zip: zip member '\.\./\.\./outside\.de-en\.de' points outside"):
        read_all("opus", [path])
    recs, errors = read_all("opus", [path], mode="skip")
    assert [(r.text1, r.text2) for r in recs] == [("Hallo.", "Hello.")] and sum(errors.skipped.values()) == 1
    assert not (tmp_path.parent / "outside.de-en.de").exists()


def test_corrupt_zip_and_malformed_xml(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("x/story.xml", (XCES / "en" / "story.xml").read_text())
    data = buf.getvalue()
    (tmp_path / "cut.zip").write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInput, match=r"cut\.zip"):
        read_all("opus", [tmp_path / "cut.zip"], langs=["en"])
    (tmp_path / "bad.xml").write_text('<text><s id="s1">ok</s><s id="s2">broken</x></text>')
    with pytest.raises(BadInput, match=r"bad\.xml:1:\d+: malformed XML"):
        read_all("opus", [tmp_path / "bad.xml"], langs=["en"])
