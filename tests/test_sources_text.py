"""`--source text` and input expansion: languages from --lang or file names, compression, bad input."""

from __future__ import annotations

import bz2
import gzip
import lzma

import pytest
from sources_helpers import SRC_FIXTURES, read_all

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.sources import expand_inputs


def test_one_lang_plain_and_compressed(tmp_path):
    body = "Erste Zeile.\n\n  Zweite Zeile.  \r\nDritte Zeile.\n".encode("utf-8")
    (tmp_path / "a.txt").write_bytes(body)
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(body))
    (tmp_path / "c.bz2").write_bytes(bz2.compress(body))
    (tmp_path / "d.xz").write_bytes(lzma.compress(body))
    recs, _ = read_all("text", [tmp_path], langs=["de"])
    assert [r.text for r in recs] == ["Erste Zeile.", "Zweite Zeile.", "Dritte Zeile."] * 4
    assert {r.lang for r in recs} == {"de"} and {r.source for r in recs} == {"text"}
    assert recs[1].origin.endswith("a.txt:3")  # line numbers count the blank line


def test_several_langs_from_file_names(tmp_path):
    (tmp_path / "train.de.gz").write_bytes(gzip.compress(b"Hallo Welt.\n"))
    (tmp_path / "train.en.gz").write_bytes(gzip.compress(b"Hello world.\n"))
    recs, _ = read_all("text", [tmp_path / "train.*.gz"], langs=["de", "en"])
    assert {(r.lang, r.text) for r in recs} == {("de", "Hallo Welt."), ("en", "Hello world.")}


def test_common_voice_names_declare_the_language_first(tmp_path):
    """Common Voice's sentence files are `<lang>[-REGION].<name>.txt.gz`; a region subtag maps to the base code."""
    (tmp_path / "en.sentence-collector.txt.gz").write_bytes(gzip.compress(b"Hello world.\n"))
    (tmp_path / "zh-CN.wiki.zh-cn.txt.gz").write_bytes(gzip.compress("\u4f60\u597d\u3002\n".encode()))
    (tmp_path / "GlobalVoices.en-sw.sw.gz").write_bytes(gzip.compress(b"Habari.\n"))
    recs, _ = read_all("text", [tmp_path / "*.gz"], langs=["en", "sw", "zh"])
    assert {(r.lang, r.text) for r in recs} == {("en", "Hello world."), ("zh", "\u4f60\u597d\u3002"), ("sw", "Habari.")}


def test_file_name_in_another_language_is_refused(tmp_path):
    (tmp_path / "train.fr").write_text("Bonjour.\n")
    (tmp_path / "notes.txt").write_text("Hallo.\n")
    with pytest.raises(BadInput, match=r"train\.fr: the file name says language 'fr'"):
        read_all("text", [tmp_path / "train.fr"], langs=["de", "en"])
    with pytest.raises(BadInput, match=r"notes\.txt: cannot tell the language"):
        read_all("text", [tmp_path / "notes.txt"], langs=["de", "en"])


def test_invalid_utf8_names_file_and_line():
    with pytest.raises(BadInput) as e:
        read_all("text", [SRC_FIXTURES / "bad_utf8.de.txt"], langs=["de"])
    assert "bad_utf8.de.txt:2: invalid UTF-8" in e.value.one_line()
    recs, errors = read_all("text", [SRC_FIXTURES / "bad_utf8.de.txt"], langs=["de"], mode="skip")
    assert [r.text for r in recs] == ["Dies ist eine Zeile.", "Noch eine gute Zeile."]
    assert sum(errors.skipped.values()) == 1 and "bad_utf8.de.txt:2" in errors.examples[0]


def test_empty_file_is_bad_input_or_a_counted_skip():
    with pytest.raises(BadInput, match=r"empty\.de\.txt: empty file"):
        read_all("text", [SRC_FIXTURES / "empty.de.txt"], langs=["de"])
    recs, errors = read_all("text", [SRC_FIXTURES / "empty.de.txt"], langs=["de"], mode="skip")
    assert recs == [] and sum(errors.skipped.values()) == 1


def test_truncated_gzip_keeps_lines_and_reports(tmp_path):
    data = gzip.compress(("".join(f"Zeile Nummer {i}.\n" for i in range(2000))).encode())
    (tmp_path / "cut.de.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInput, match=r"cut\.de\.gz:\d+: truncated compressed file"):
        read_all("text", [tmp_path / "cut.de.gz"], langs=["de"])
    recs, errors = read_all("text", [tmp_path / "cut.de.gz"], langs=["de"], mode="skip")
    assert 0 < len(recs) < 2000 and sum(errors.skipped.values()) == 1


def test_max_records_per_language(tmp_path):
    (tmp_path / "x.txt").write_text("".join(f"line {i}\n" for i in range(50)))
    recs, _ = read_all("text", [tmp_path / "x.txt"], langs=["en"], max_records=7)
    assert len(recs) == 7


def test_expand_inputs(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("sub/b.txt", "sub/a.txt", "sub/.hidden", "c.txt"):
        (tmp_path / name).write_text("x\n")
    got = expand_inputs([str(tmp_path / "sub"), str(tmp_path / "*.txt"), str(tmp_path / "sub" / "a.txt")])
    assert [p.name for p in got] == ["a.txt", "b.txt", "c.txt"]  # folder sorted, hidden skipped, once each
    with pytest.raises(BadInput, match=r"nope\.txt: no such file or folder"):
        expand_inputs([str(tmp_path / "nope.txt")])
    with pytest.raises(BadInput, match=r"no file matches"):
        expand_inputs([str(tmp_path / "*.xml")])


def test_documentation_files_are_not_data(tmp_path):
    from xlp_cli.prepare.sources._files import data_files

    names = ["SOURCE.md", "README", "LICENSE.txt", "notes.html", "enwiki.xml.bz2", "train.de.gz", "readme_corpus.de"]
    assert [p.name for p in data_files([tmp_path / n for n in names])] == ["enwiki.xml.bz2", "train.de.gz",
                                                                          "readme_corpus.de"]
