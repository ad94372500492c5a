"""`--tokenize xlm --lowercase xlm` against XLM's real chain, run here (tests/xlm_chain.py), byte for byte.

- held-in real text of the 15 XNLI languages (tests/text_samples.py), stage by stage: tokenize.sh, then
  lowercase_and_remove_accent.py;
- generated lines made of the hard cases (no-break spaces, guillemets, quotes, abbreviations, dots, the
  DOTMULTI markers, control and format characters, Devanagari, Thai, CJK, Final_Sigma), in the languages
  whose rules differ (en, fr/it/ga/ca, fi/sv, so/tdt, cs, de/es, and the English fall-back);
- the committed fixtures (tests/fixtures/text_xlm) are what the tools print today.
Skipped, with the reason, where perl or the reference scripts are missing.
"""

from __future__ import annotations

import random

import pytest
from text_samples import LANGS, held_in
from xlm_chain import fixtures_dir, lowercase_and_remove_accent, tokenize_sh, unavailable

from xlp_cli.text.pipeline import TextPipeline

pytestmark = pytest.mark.integration

XLM = TextPipeline(tokenize="xlm", lowercase="xlm")
XLM_TOKENIZE = TextPipeline(tokenize="xlm", lowercase="none")


@pytest.fixture(scope="module", autouse=True)
def _reference_tools():
    reason = unavailable()
    if reason:
        pytest.skip(f"XLM's reference chain cannot run: {reason}")


def _diff(inputs: list[str], want: list[str], got: list[str]) -> str:
    bad = [(i, w, g) for i, (w, g) in enumerate(zip(want, got)) if w != g]
    return f"{len(bad)} of {len(inputs)} lines differ, e.g. " + "; ".join(
        f"in={inputs[i]!r} want={w!r} got={g!r}" for i, w, g in bad[:3])


@pytest.mark.parametrize("lang", LANGS)
def test_held_in_text_is_byte_identical_stage_by_stage(lang):
    lines = held_in(lang)
    assert len(lines) > 500
    moses = tokenize_sh(lines, lang)
    got = XLM_TOKENIZE.process_batch(lines, lang)
    assert got == moses, _diff(lines, moses, got)
    want = lowercase_and_remove_accent(moses)
    got = XLM.process_batch(lines, lang)
    assert got == want, _diff(lines, want, got)


ATOMS = list("abcxyzABCXYZ019 ,.;:!?'\"`-()[]{}<>%&/\\@#$*+=_|~^") + [
    "\u00a0", "\u202f", "\u2009", "\u3000", "«", "»", "’", "‘", "“", "”", "„", "‚", "…", "–", "—", "´", "´´", "''", "``",
    "DOTMULTI", "DOTDOTMULTI", "MULTI", "DOT", "...", "..", ". ", " .", "Dr.", "No.", "No", "Nr.", "art.", "p.", "U.S.",
    "nº", "ºC", "cm", "\u00a0%", "1\u00a02", "\t", "\r", "\x01", "\x7f", "\x85", "\u200b", "\ufeff", "\u2028", "\ue000",
    "\u0378", "\U000e0001", "é", "É", "e\u0301", "Σ", "ΌΣ", "İ", "ß", "ﬁ", "Ⅻ", "ǅ", "ª", "º", "\u0345", "\u0300\u0301",
    "मुस्लिम", "क़", "ที่นี่", "中文", "社蓄", "한국어", "が", "أحمد", "٣", "१२", "😀", "，", "。", "、", "：", "？", "！", "（",
    "）", "；", "１", "「", "」", "．", "～", "％", "【", "】", "〈", "〉", "━", "《", "》", "∶", "·", "Â·", ":n", "'s", "l'",
    "'90s", "n't", " ' ", ",\"", ".\"", "\"<", ".' ", ".'", "5,300", ",a", "a,", "1,", "Fil.", "Arch.", "Pf.", "all.", " x",
]
FUZZ_LANGS = "en fr it ga ca fi sv so tdt cs de es el pt nl ru hi ar xx sk".split()


def test_generated_hard_cases_are_byte_identical():
    rng = random.Random(18)
    for lang in FUZZ_LANGS:
        lines = ["".join(rng.choice(ATOMS) for _ in range(rng.randint(0, 24))) for _ in range(250)]
        moses = tokenize_sh(lines, lang)
        assert XLM_TOKENIZE.process_batch(lines, lang) == moses, (lang, _diff(lines, moses, XLM_TOKENIZE.process_batch(lines, lang)))
        want = lowercase_and_remove_accent(moses)
        assert XLM.process_batch(lines, lang) == want, (lang, _diff(lines, want, XLM.process_batch(lines, lang)))


def test_committed_fixtures_are_what_the_tools_print():
    for path in sorted(fixtures_dir().glob("input.*.txt")):
        lang = path.name.split(".")[1]
        lines = path.read_text(encoding="utf-8").split("\n")[:-1]
        moses = tokenize_sh(lines, lang)
        assert (fixtures_dir() / f"tokenize_sh.{lang}.txt").read_text(encoding="utf-8") == "\n".join(moses) + "\n", lang
        assert (fixtures_dir() / f"xlm.{lang}.txt").read_text(encoding="utf-8") == \
            "\n".join(lowercase_and_remove_accent(moses)) + "\n", lang
