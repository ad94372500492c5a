"""The native text pipeline (xlp_cli/text/csrc) against its definitions, without perl: the committed XLM
fixtures, the Python oracles over every code point, sacremoses for the default `moses` mode, bad lines."""

from __future__ import annotations

import random
import sys
import threading

import pytest
import text_oracles as oracle
from xlm_chain import fixtures_dir

from xlp_cli.text import native
from xlp_cli.text.case import lowercase_safe, lowercase_xlm
from xlp_cli.text.clean import remove_non_printing
from xlp_cli.text.pipeline import TextPipeline
from xlp_cli.text.tokenize import get_tokenizer

ALL = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000]


def _fixture(name: str) -> list[str]:
    return (fixtures_dir() / name).read_text(encoding="utf-8").split("\n")[:-1]


def test_xlm_mode_reproduces_the_committed_fixtures():
    langs = sorted(p.name.split(".")[1] for p in fixtures_dir().glob("input.*.txt"))
    assert len(langs) >= 15
    for lang in langs:
        lines = _fixture(f"input.{lang}.txt")
        assert TextPipeline(tokenize="xlm", lowercase="none").process_batch(lines, lang) == _fixture(f"tokenize_sh.{lang}.txt"), lang
        assert TextPipeline(tokenize="xlm", lowercase="xlm").process_batch(lines, lang) == _fixture(f"xlm.{lang}.txt"), lang


def test_lowercase_modes_equal_their_python_definitions_on_every_code_point():
    assert [lowercase_xlm(c) for c in ALL] == [oracle.lowercase_xlm(c) for c in ALL]
    assert [lowercase_safe(c) for c in ALL] == [oracle.lowercase_safe(c) for c in ALL]
    assert [remove_non_printing(c) for c in ALL] == [oracle.remove_non_printing(c) for c in ALL]


def test_lowercase_modes_on_mixed_strings_final_sigma_and_mark_order():
    pieces = ["Σ", "σ", "ς", "'", "\u00ad", "\u0301", "\u0345", "\u0316", "\U0001D165", "\U0001D16D", "ΌΣ", "A", "a", " ",
              "İ", "é", "e\u0301", "й", "и\u0306\u0301", "ё\u0300", "ế", "ơ", "ş", "ΐ", "ที่", "मुस्लिम", "أ", "が", "가", "ǅ", "\u1e9e"]
    rng = random.Random(5)
    for _ in range(20000):
        s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        assert lowercase_xlm(s) == oracle.lowercase_xlm(s), repr(s)
        assert lowercase_safe(s) == oracle.lowercase_safe(s), repr(s)


def test_moses_mode_is_sacremoses_on_generated_hard_cases():
    from sacremoses import MosesTokenizer

    atoms = list("abAB09 ,.;:!?'\"`-()%&@#") + ["...", "..", "Dr.", "No.", "No", "U.S.", "e.g.", "DOTMULTI", "a.'", "'s",
                                                 "l'", "n't", "5,300", "\u00a0", "é", "मुस्लिम", "क़", "中文", "社蓄", "Σ"]
    rng = random.Random(7)
    for lang in ("en", "fr", "it", "de", "fi", "ca", "hi", "ru", "xx"):
        ref, tok = MosesTokenizer(lang), get_tokenizer(lang, "moses")
        for _ in range(400):
            text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 16)))
            assert tok(text) == ref.tokenize(text, escape=False, return_str=True), (lang, text)


def test_pipeline_keeps_xlm_spacing_but_moses_mode_single_spaces():
    th = "สวัสดีครับ ผมชื่อสมชาย"
    assert "   " in TextPipeline(tokenize="xlm", lowercase="xlm").process(th, "th")  # segment_th.py's whitespace token
    assert "  " not in TextPipeline(tokenize="moses", lowercase="xlm").process(th, "th")
    hi = "मुस्लिम"
    assert TextPipeline(tokenize="xlm", lowercase="xlm").process(hi, "hi") == "मस  लिम"  # virama split off, then deleted
    assert TextPipeline(tokenize="moses", lowercase="safe").process(hi, "hi") == hi
    assert TextPipeline(tokenize="xlm", lowercase="none").process("\u00a0\u2003", "en") == "\u00a0\u2003"  # as perl prints
    assert TextPipeline(tokenize="xlm", lowercase="xlm").process("\u00a0\u2003", "en") == ""


def test_nbsp_rules_see_the_input_not_the_raw_column():
    pipe = TextPipeline(tokenize="xlm", lowercase="xlm")
    assert pipe.process("le cas «\u00a0classique\u00a0».", "fr") == 'le cas " classique " .'
    assert pipe.process("3\u00a0000 euros", "fr") == "3,000 euros"
    assert pipe.process("3\u00a0000 euros", "en") == "3.000 euros"
    assert pipe.process("Vraiment\u00a0?", "fr") == "vraiment ?"
    assert pipe.process(pipe.raw("3\u00a0000 euros"), "fr") == "3 000 euros"  # raw() turned the U+00A0 into a space


def test_run_bytes_keeps_lines_and_reports_bad_ones():
    pipe = TextPipeline(tokenize="xlm", lowercase="xlm").native("en")
    block = b"Hello, World!\n\n\xff bad\nNUL\x00here\n" + b"x" * 50 + b"\nlast line"
    out, problems = pipe.run_bytes(block, native.ALL, 40)
    assert out == b"hello , world !\n\n\n\n\nlast line\n"
    assert problems == [(2, "invalid UTF-8 at byte 0 of the line"),
                        (3, "NUL byte at byte 3 of the line (binary or UTF-16 input?)"),
                        (4, "line longer than 40 bytes (--max-line-bytes)")]
    assert native.module().check_lines(block, 40) == problems
    assert pipe.run_bytes(b"", native.ALL, 0) == (b"", [])


def test_threads_share_the_native_pipelines():
    lines = [f"Line {i}: l'élève «\u00a0{i}\u00a0» — Σίσυφος." for i in range(3000)]
    pipe = TextPipeline(tokenize="xlm", lowercase="xlm")
    want = pipe.process_batch(lines, "fr")
    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(pipe.process_batch(lines, "fr"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [want] * 4


def test_a_one_megabyte_line_is_processed_whole():
    line = ("Mr. Smith paid 3\u00a0000 € (sic)... " * 30000)[:1_000_000]
    out = TextPipeline(tokenize="xlm", lowercase="xlm").process(line, "en")
    assert out.startswith("mr. smith paid 3.000 € ( sic ) ... mr. smith") and len(out.split()) > 200_000


@pytest.mark.parametrize("bad", [{"tokenize": "spacy"}, {"lowercase": "upper"}])
def test_bad_modes_are_refused(bad):
    with pytest.raises(ValueError):
        TextPipeline(**bad)


def test_raw_column_is_pythons_split_and_join():
    """The native `raw` stage (stage 4: non-printing characters to spaces, then white space collapsed) on lines
    of spaces, tabs, Unicode white space, control characters and letters, against " ".join(remove(s).split()),
    including lines that are collapsed already (the native code only scans those)."""
    module = native.module()
    rng = random.Random(9)
    atoms = ["a", "b", "\u00e9", "\u0111", " ", " ", "  ", "\t", "\n", "\u00a0", "\u3000", "\u2028", "\x1c", "\x01",
             "\u200b", "x y"]
    lines = ["", " ", "a", "a ", " a", "a b", "a  b", "a\tb"]
    lines += ["".join(rng.choice(atoms) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    lines += [" ".join(rng.choice(["ab", "c", "\u0111e"]) for _ in range(rng.randint(1, 9))) for _ in range(300)]
    for clean in (False, True):
        pipe = module.Pipeline("en", clean, False, 0, 0)
        want = [" ".join((remove_non_printing(s) if clean else s).split()) for s in lines]
        assert pipe.run(lines, 4) == want, clean
