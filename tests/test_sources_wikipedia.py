"""`--source wikipedia`: streaming XML, encodings, compression, truncation, article filtering, wikitext -> text."""

from __future__ import annotations

import bz2
import functools
import gzip
import lzma
import random
import re

import pytest
from sources_helpers import SRC_FIXTURES, read_all

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.sources.wikipedia_text import wikitext_to_lines

TINY = SRC_FIXTURES / "wiki_tiny.xml"
EXPECTED = [
    "Die Hauskatze ist ein Haustier aus der Familie der Katzenartigen. Sie lebt seit Jahrtausenden mit dem Menschen zusammen.",
    "Katzen schlafen bis zu sechzehn Stunden am Tag und jagen in der Dämmerung.",
    "Sie sind gute Jäger.",
    "Sie putzen sich oft.",
    "Mehr steht auf einer Seite über Katzen und.",
    "Der Haushund ist ein Säugetier und der älteste Begleiter des Menschen.",
    "Hunde bellen, wenn ein Fremder kommt.",
]
MARKUP = re.compile(r"\{\{|\}\}|\[\[|\]\]|<ref|\|-|\{\||'''|Kategorie:|Datei:|mini\|")


def test_plain_dump_articles_only_and_clean_text():
    recs, errors = read_all("wikipedia", [TINY])
    assert [r.text for r in recs] == EXPECTED  # no redirect page, no ns-4 page, no table/ref/template/file/category
    assert {r.lang for r in recs} == {"de"}  # from <dbname>dewiki
    assert recs[0].origin == f"{TINY}#Katze" and recs[-1].origin == f"{TINY}#Hund"
    assert not any(MARKUP.search(r.text) for r in recs)
    assert errors.warnings == [] and not errors.skipped


@pytest.mark.parametrize("read_ahead", [0, 2], ids=["inline", "read-ahead"])
@pytest.mark.parametrize("compress", [bz2.compress, lzma.compress, gzip.compress], ids=["bz2", "xz", "gz"])
def test_compressed_dumps(tmp_path, compress, read_ahead):
    path = tmp_path / "dewiki-20240101-pages-articles.xml.cmp"
    path.write_bytes(compress(TINY.read_bytes()))
    recs, _ = read_all("wikipedia", [path], read_ahead=read_ahead)
    assert [r.text for r in recs] == EXPECTED


def test_utf16_dump_with_bom(tmp_path):
    text = TINY.read_text(encoding="utf-8")
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(bz2.compress(text.encode("utf-16")))  # BOM + UTF-16 LE, no XML declaration
    recs, _ = read_all("wikipedia", [path])
    assert [r.text for r in recs] == EXPECTED


def test_truncated_dump_keeps_complete_pages_and_warns(tmp_path):
    raw = TINY.read_bytes()
    cut = raw.index(b"Hunde bellen")  # inside the last page
    path = tmp_path / "dewiki-cut.xml.xz"
    path.write_bytes(lzma.compress(raw[:cut]))
    recs, errors = read_all("wikipedia", [path])
    assert [r.text for r in recs] == EXPECTED[:5]  # the Hund page is incomplete: dropped
    assert len(errors.warnings) == 1 and "truncated dump" in errors.warnings[0] and "dewiki-cut.xml.xz" in errors.warnings[0]


@pytest.mark.parametrize("compress", [lzma.compress, lambda b: bz2.compress(b, 1)], ids=["xz", "bz2"])
@pytest.mark.parametrize("read_ahead", [0, 2], ids=["inline", "read-ahead"])
def test_truncated_compressed_stream_is_a_truncated_dump(tmp_path, read_ahead, compress):
    raw = TINY.read_text(encoding="utf-8")
    head, rest = raw.split("  <page>", 1)
    pages = "  <page>" + rest.rsplit("</mediawiki>", 1)[0]
    rng = random.Random(0)  # incompressible filler, so that half the stream holds whole pages
    many = head + "".join(pages.replace("<title>Katze", f"<title>Katze {i}").replace(
        "<id>11</id>", f"<id>11</id><sha1>{rng.randbytes(3000).hex()}</sha1>") for i in range(100)) + "</mediawiki>\n"
    data = compress(many.encode("utf-8"))
    path = tmp_path / "dewiki-cut.xml.cmp"
    path.write_bytes(data[: len(data) // 2])
    recs, errors = read_all("wikipedia", [path], read_ahead=read_ahead)
    assert len(errors.warnings) == 1 and "truncated dump" in errors.warnings[0]
    assert 0 < len(recs) < 100 * len(EXPECTED) and {r.text for r in recs} <= set(EXPECTED)


def test_malformed_xml_is_bad_input_with_position():
    path = SRC_FIXTURES / "wiki_malformed.xml"
    with pytest.raises(BadInput) as e:
        read_all("wikipedia", [path])
    assert re.search(r"wiki_malformed\.xml:\d+:\d+: malformed XML: mismatched tag", e.value.one_line())
    recs, errors = read_all("wikipedia", [path], mode="skip")
    assert [r.text for r in recs] == EXPECTED[:5] and sum(errors.skipped.values()) == 1


def test_not_a_dump(tmp_path):
    (tmp_path / "x.xml").write_text("<root><item>no pages</item></root>")
    with pytest.raises(BadInput, match="no <page> found"):
        read_all("wikipedia", [tmp_path / "x.xml"], langs=["de"])


def test_language_filter_and_fallbacks(tmp_path):
    recs, _ = read_all("wikipedia", [TINY], langs=["en"])
    assert recs == []  # a German dump is not what --lang en asked for
    no_site = re.sub(r"<siteinfo>.*</siteinfo>", "", TINY.read_text(), flags=re.S)
    (tmp_path / "dump.xml").write_text(no_site.replace(' xml:lang="de"', ""))
    with pytest.raises(BadInput, match="cannot tell the dump's language"):
        read_all("wikipedia", [tmp_path / "dump.xml"], langs=["de", "en"])
    recs, _ = read_all("wikipedia", [tmp_path / "dump.xml"], langs=["de"])
    assert recs and {r.lang for r in recs} == {"de"}
    (tmp_path / "frwiki-latest-pages-articles.xml").write_text(no_site)
    recs, _ = read_all("wikipedia", [tmp_path / "frwiki-latest-pages-articles.xml"])
    assert {r.lang for r in recs} == {"fr"}  # the file name wins over the root's xml:lang


def test_max_records():
    recs, _ = read_all("wikipedia", [TINY], max_records=3)
    assert len(recs) == 3


@pytest.mark.parametrize("wikitext,expected", [
    ("A [[b|c]] d [[e]].", ["A c d e."]),
    ("Text<ref>cite</ref> more<ref name=x/>.", ["Text more."]),
    ("{{lang|fr|chat}} Start {{cite web|url=u}}end.", ["chat Start end."]),  # {{lang}} shows its text
    ("[[File:X.png|thumb|Caption]]Word.", ["Word."]),
    ("[[Εικόνα:X.jpg|thumb|right|Λεζάντα]]Λέξη.", ["Λέξη."]),  # a localised alias the siteinfo does not list
    ("== Heading ==\nBody text.", ["Body text."]),
    ("{|\n|-\n| a || b\n|}\nAfter the table.", ["After the table."]),
    ("x &amp; y &lt;z&gt; &nbsp;w", ["x & y <z> w"]),
    ("<nowiki>[[kept]]</nowiki> plain", []),  # literal brackets: the markup net drops the line
    ("Before <math>x^2</math> after.", ["Before after."]),
    ("__NOTOC__\nText.", ["Text."]),
    ("[[:Category:Cats|cat list]] here.", ["cat list here."]),
    ("[[fr:Chat]]\nOnly this.", ["Only this."]),
])
def test_wikitext_to_lines(wikitext, expected):
    ns = {"file", "image", "category"}
    assert wikitext_to_lines(wikitext, ns) == expected


def test_redirect_text_without_redirect_element(tmp_path):
    page = "<page><title>{t}</title><ns>0</ns><revision><text>{x}</text></revision></page>"
    xml = ("<mediawiki><siteinfo><dbname>dewiki</dbname></siteinfo>"
           + page.format(t="Mieze", x="#WEITERLEITUNG [[Katze]]")
           + page.format(t="Alt", x="#redirect [[Katze]]")
           + page.format(t="Liste", x="# Paris [[Frankreich|liegt in Frankreich]].\n# Rom liegt in Italien.")
           + "</mediawiki>")
    (tmp_path / "d.xml").write_text(xml)
    recs, _ = read_all("wikipedia", [tmp_path / "d.xml"])
    assert [r.text for r in recs] == ["Paris liegt in Frankreich.", "Rom liegt in Italien."]


def _dump_with_pages(tmp_path, n: int):
    raw = TINY.read_text(encoding="utf-8")
    head, rest = raw.split("  <page>", 1)
    pages = "  <page>" + rest.rsplit("</mediawiki>", 1)[0]
    path = tmp_path / f"dewiki-{n}.xml.bz2"
    path.write_bytes(bz2.compress((head + "".join(pages.replace("<title>Katze", f"<title>Katze {i}")
                                                  for i in range(n)) + "</mediawiki>\n").encode()))
    return path


def test_memory_stays_flat_with_dump_size(tmp_path):
    import tracemalloc

    from xlp_cli.prepare.records import ErrorPolicy, SourceOptions
    from xlp_cli.prepare.sources import SOURCES

    peaks = []
    for n in (100, 400):
        path = _dump_with_pages(tmp_path, n)
        tracemalloc.start()
        count = sum(1 for _ in SOURCES["wikipedia"]([path], SourceOptions(langs=[]), ErrorPolicy()))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert count == n * len(EXPECTED)
    assert peaks[1] < 1.3 * peaks[0], peaks  # 4x the pages, not 4x the memory: pages are cleared as read


def test_read_ahead_gives_the_same_bytes_and_the_error_where_the_data_breaks(tmp_path):
    """sources/_files.ReadAhead: the decompressed bytes of a stream read in a thread ahead of the reader are the
    bytes read inline; a corrupt stream raises after exactly the bytes it gave inline; closing it half-way
    stops its thread."""
    from xlp_cli.prepare.sources._files import ReadAhead, open_binary

    rng = random.Random(1)
    data = b"".join(rng.randbytes(1000) + bytes(3000) for _ in range(300))  # 1.2 MB, partly compressible
    good = tmp_path / "good.bz2"
    good.write_bytes(bz2.compress(data))
    bad = tmp_path / "bad.bz2"
    blob = bytearray(bz2.compress(data))
    blob[len(blob) // 2] ^= 0xFF
    bad.write_bytes(bytes(blob))

    def drain(f):
        got, error = bytearray(), None
        try:
            while block := f.read1(1 << 14):
                got += block
        except OSError as e:
            error = type(e)
        finally:
            f.close()
        return bytes(got), error

    assert drain(ReadAhead(open_binary(good))) == drain(open_binary(good)) == (data, None)
    inline, ahead = drain(open_binary(bad)), drain(ReadAhead(open_binary(bad)))
    assert inline[1] is OSError and ahead == inline and 0 < len(ahead[0]) < len(data)
    f = ReadAhead(open_binary(good), depth=2)
    assert f.read1() and f.thread.is_alive()
    f.close()
    assert not f.thread.is_alive()


@functools.lru_cache(maxsize=1)
def _bz2_cases() -> dict[str, bytes]:
    rng = random.Random(3)
    text = "\n".join(f"line {i} " + " ".join(rng.choice(["alpha", "beta", "gamma", "\u03b4\u03ad\u03bb\u03c4\u03b1", "e"])
                                             for _ in range(rng.randint(1, 30))) for i in range(60000)).encode("utf-8")
    one = bz2.compress(text, 1)  # 100 kB blocks: 64 of them
    cases = {"whole": one, "two streams": bz2.compress(text[:50000], 2) + bz2.compress(text[50000:], 1),
             "runs": bz2.compress(b"z" * 300000 + text[:1000], 1), "one byte": bz2.compress(b"x"),
             "a block over the limit": bz2.compress(text[:300000] + bytes(10 << 20) + text[:300000], 9),
             "empty": bz2.compress(b""), "zero padding": one + bytes(5), "trailing garbage": one + b"junk!",
             "truncated": one[: len(one) * 2 // 3], "end CRC flipped": one[:-2] + bytes([one[-2] ^ 4]) + one[-1:]}
    for k in (3, 4, 5, 6):  # damage in a block (the sequential decoder loses what it was making: up to 64 KiB)
        at = len(one) * k // 10
        cases[f"damaged at {k}/10"] = one[:at] + bytes([one[at] ^ 0x55]) + rng.randbytes(k - 3) + one[at + 1 + k - 3:]
    return cases


@pytest.mark.parametrize("case", list(_bz2_cases()))
def test_parallel_bz2_gives_the_bytes_and_the_error_of_the_sequential_decoder(tmp_path, case):
    """sources/bz2_blocks.ParallelBz2 (a .bz2 file's blocks decoded on 2 threads): the bytes the sequential decoder
    (sources/compressed.py) gives, and on a damaged, truncated or padded file its error after the same bytes."""
    from xlp_cli.prepare.sources import compressed
    from xlp_cli.prepare.sources.bz2_blocks import ParallelBz2

    path = tmp_path / "data.bz2"
    path.write_bytes(_bz2_cases()[case])

    def drain(f):
        got, error = bytearray(), None
        try:
            while block := f.read1(1 << 16):
                got += block
        except (OSError, EOFError) as e:
            error = (type(e), str(e))
        finally:
            f.close()
        return bytes(got), error

    sequential = drain(compressed.decompressed(open(path, "rb"), "bz2", str(path)))
    parallel = drain(ParallelBz2(path, threads=2))
    assert parallel == sequential
    assert (sequential[1] is None) == (case in ("whole", "two streams", "runs", "one byte", "empty", "zero padding",
                                                "a block over the limit"))
    assert case != "whole" or len(sequential[0]) > 6_000_000
    f = ParallelBz2(path, threads=2, ahead=1)
    f.read1()
    f.close()  # half-way: its threads stop
    assert not f.thread.is_alive()


def test_parallel_bz2_holds_a_few_mb_however_far_a_block_expands(tmp_path):
    """A bzip2 block may decode to ~46 MB (its run-length step): such a block goes to the sequential decoder,
    64 KiB at a time, so the parallel reader never holds it whole."""
    import tracemalloc

    from xlp_cli.prepare.sources.bz2_blocks import ParallelBz2

    path = tmp_path / "zeros.bz2"
    path.write_bytes(bz2.compress(bytes(100 << 20), 9))  # 3 blocks of ~40 MB of zeros each
    tracemalloc.start()
    try:
        f, total = ParallelBz2(path, threads=2), 0
        while block := f.read1():
            total += len(block)
        f.close()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total == 100 << 20 and peak < 32 << 20, peak
