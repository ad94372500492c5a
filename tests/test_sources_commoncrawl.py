"""`--source commoncrawl`: WET and WARC/HTML records, language ID with a threshold, bad archives."""

from __future__ import annotations

import gzip

import pytest
from sources_helpers import SRC_FIXTURES, read_all

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.sources.commoncrawl import decode_html, html_to_text, identify

WET = SRC_FIXTURES / "sample.warc.wet"
WARC = SRC_FIXTURES / "sample.warc.gz"


def test_wet_documents_are_identified_and_split_into_lines():
    recs, errors = read_all("commoncrawl", [WET])
    by_lang = {}
    for r in recs:
        by_lang.setdefault(r.lang, []).append(r)
    assert sorted(by_lang) == ["de", "en"]  # the two-token "ok 42" page is below the threshold
    assert len(by_lang["en"]) == 3 and len(by_lang["de"]) == 3
    assert by_lang["de"][0].text.startswith("Der Fluss fließt") and by_lang["de"][0].origin == f"{WET}#http://example.org/de"
    assert errors.warnings == [] and not errors.skipped


def test_requested_languages_only():
    recs, _ = read_all("commoncrawl", [WET], langs=["de"])
    assert {r.lang for r in recs} == {"de"} and len(recs) == 3


def test_threshold_zero_keeps_every_document():
    recs, _ = read_all("commoncrawl", [WET], lid_threshold=0.0)
    assert any(r.text == "ok 42" for r in recs)


def test_gzipped_wet(tmp_path):
    path = tmp_path / "x.warc.wet.gz"
    path.write_bytes(gzip.compress(WET.read_bytes()))
    recs, _ = read_all("commoncrawl", [path])
    assert len(recs) == 6


def test_warc_html_response():
    recs, _ = read_all("commoncrawl", [WARC])
    texts = [r.text for r in recs]
    assert {r.lang for r in recs} == {"de"}  # the image/png response and the request are passed over
    assert texts[0] == "Der Fluss im Tal"
    assert "Jeden Sommer treffen sich die Menschen aus dem Tal an seinem Ufer zu einem Markt mit Brot, Käse und Musik." in texts
    joined = " ".join(texts)  # cp1252 decoded from <meta charset>; no script, style, nav, footer
    for junk in ("kein Text", "color: red", "Impressum", "Talverein", "Über den Fluss"):
        assert junk not in joined


def test_html_to_text_blocks_and_entities():
    html = "<p>A&amp;B<br/>C</p><script>x()</script><ul><li>one</li><li>two</li></ul>tail"
    assert html_to_text(html) == "A&B\nC\none\ntwo\ntail"
    assert decode_html("<meta charset='latin-1'>é".encode("latin-1"), None).endswith("é")
    assert decode_html("é".encode("utf-8"), "text/html; charset=UTF-8") == "é"


def test_identify_real_languages():
    assert identify("Это предложение написано на русском языке и довольно длинное.")[0] == "ru"
    lang, conf = identify("Ceci est une phrase écrite en français, assez longue pour être reconnue.")
    assert lang == "fr" and conf > 0.9


def test_unknown_language_code_is_bad_input():
    with pytest.raises(BadInput, match="unknown language code.*xx"):
        read_all("commoncrawl", [WET], langs=["de", "xx"])


def test_not_warc_and_empty_and_truncated(tmp_path):
    (tmp_path / "a.wet").write_text("this is not a WARC file\n")
    with pytest.raises(BadInput, match=r"a\.wet:byte 0: not a WARC/WET file"):
        read_all("commoncrawl", [tmp_path / "a.wet"])
    (tmp_path / "empty.wet").write_bytes(b"")
    with pytest.raises(BadInput, match=r"empty\.wet: no WET conversion"):
        read_all("commoncrawl", [tmp_path / "empty.wet"])
    data = WARC.read_bytes()
    (tmp_path / "cut.warc.gz").write_bytes(data[: len(data) - 300])
    with pytest.raises(BadInput, match=r"cut\.warc\.gz:byte \d+ \(decompressed\): not a readable WARC/WET file or cut inside a record "
                       r"\(truncated compressed file"):
        read_all("commoncrawl", [tmp_path / "cut.warc.gz"])
    recs, errors = read_all("commoncrawl", [tmp_path / "cut.warc.gz"], mode="skip")
    assert sum(errors.skipped.values()) == 1
    assert recs and recs[0].text == "Der Fluss im Tal"  # the HTML record before the cut is kept


def test_wet_with_wrong_content_length_is_read_by_separators(tmp_path):
    text = WET.read_text(encoding="utf-8")
    # a hand-made WET whose Content-Length fields are wrong (as in cc_net's test fixture)
    broken = text.replace("Content-Length: 264", "Content-Length: 200")
    assert broken != text
    (tmp_path / "hand.wet").write_text(broken, encoding="utf-8")
    recs, errors = read_all("commoncrawl", [tmp_path / "hand.wet"])
    assert sorted({r.lang for r in recs}) == ["de", "en"] and len(recs) == 6
    assert len(errors.warnings) == 1 and "Content-Length" in errors.warnings[0]
