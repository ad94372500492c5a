"""Unit tests of xlp_cli.text: cleaning, normalization, tokenization, case modes, languages, the pipeline."""

from __future__ import annotations

import unicodedata

import pytest

from xlp_cli.text import case, langs
from xlp_cli.text.clean import remove_non_printing
from xlp_cli.text.normalize import normalize
from xlp_cli.text.pipeline import TextPipeline
from xlp_cli.text.tokenize import get_tokenizer, tokenize


def test_remove_non_printing_replaces_category_c_with_space():
    assert remove_non_printing("a\tb\u200bc\x07d\ue000e") == "a b c d e"
    assert remove_non_printing("plain text") == "plain text"
    assert remove_non_printing("no\u00a0break") == "no\u00a0break"  # Zs is not category C


def test_normalize_unicode_punctuation_and_quotes():
    assert normalize("„Hallo“ – sagte er…", "de") == '"Hallo" - sagte er...'
    assert normalize("Il a dit « oui » !", "fr") == 'Il a dit " oui " !'
    # perl's "quotation followed by period" rule applies to every language but en and cs, line end included
    assert normalize('Mwisho."', "sw") == 'Mwisho".'
    assert normalize('End."', "en") == 'End."'
    assert normalize('Konec."', "cs") == 'Konec."'


def test_moses_and_xlm_tokenizer_modes():
    assert tokenize("Hello, world! It's 3.5% more.", "en") == "Hello , world ! It 's 3.5 % more ."
    word = "मुस्लिम"
    assert tokenize(word, "hi", "moses") == word  # sacremoses keeps the virama inside the word
    assert tokenize(word, "hi", "xlm") == "मुस ् लिम"  # perl's \p{IsAlnum} does not: XLM's data
    assert tokenize("社蓄 shachiku", "sw", "xlm") == "社蓄 shachiku"
    assert tokenize("a   b\tc", "en", "none") == "a b c"
    assert get_tokenizer("en", "moses") is get_tokenizer("en", "moses")  # built once per language


def test_zh_and_th_segmenters_drop_whitespace_tokens():
    zh = tokenize("我爱北京天安门 , 你好", "zh")
    assert "  " not in zh and zh.split()[0] == "我" and "北京" in zh.split()
    th = tokenize("สวัสดีครับ ผมชื่อสมชาย", "th")
    assert "  " not in th and "สวัสดี" in th.split() and len(th.split()) >= 4


def test_xlm_case_is_xlm_lowercase_and_remove_accent():
    assert case.lowercase_xlm("Élève À Noël  ") == "eleve a noel"
    assert case.lowercase_xlm("ที่นี่") == "ทน"  # Thai vowels and tone marks are Mn: deleted
    assert case.lowercase_xlm("मुस ् लिम") == "मस  लिम"  # virama and vowel sign u (Mn) deleted, i (Mc) kept, a double space left
    assert case.lowercase_xlm("أحمد") == "احمد"  # hamza above removed
    assert case.lowercase_xlm("Йод") == "иод"


def test_safe_case_keeps_letters_of_abugidas_and_arabic():
    for text in ("ที่นี่มีร้านอาหาร", "मुस्लिम", "मुस ् लिम", "أحمد يقرأ", "שָׁלוֹם", "がくせい", "한국어"):
        assert case.lowercase_safe(text) == text.lower()
        assert case.lowercase_safe(text).encode() == text.encode()  # not even re-normalized
    assert "\u094d" in case.lowercase_safe("मुस्लिम") and "\u094d" not in case.lowercase_xlm("मुस्लिम")
    assert "\u0e35" in case.lowercase_safe("ที่") and "\u0e35" not in case.lowercase_xlm("ที่")


def test_safe_case_strips_latin_greek_accents_like_xlm():
    for text in ("Élève à Noël, crème brûlée", "Ünlü şarkıcı İstanbul'da", "Tiếng Việt có dấu", "Ελληνικά ΆΈΉ ϊΐ"):
        assert case.lowercase_safe(text) == case.lowercase_xlm(text)
    # decomposed input too
    assert case.lowercase_safe(unicodedata.normalize("NFD", "Crème")) == "creme"


def test_safe_case_keeps_cyrillic_letters_strips_stress_marks():
    assert case.lowercase_safe("Йошкар-Ола и Ёлка") == "йошкар-ола и ёлка"
    assert case.lowercase_safe("молоко\u0301") == "молоко"
    assert case.lowercase_safe("и\u0306\u0301") == "и\u0306"  # decomposed й keeps its breve, loses the stress


def test_case_none_and_bad_mode():
    assert case.apply_case("ÀB", "none") == "ÀB"
    with pytest.raises(ValueError):
        case.apply_case("x", "upper")


def test_language_codes():
    for code in ("en", "fr", "zh", "pt-BR", "zh_TW", "sr-Latn", "sr@latin", "yue", "mni"):
        assert langs.is_known(code), code
    for code in ("english", "eng", "xx", "e", "", "en/../x", "EN"):
        assert not langs.is_known(code), code
    assert langs.base_lang("pt-BR") == "pt" and langs.base_lang("zh_TW") == "zh"
    assert not langs.safe_folder_name("../en") and langs.safe_folder_name("en-sw")


def test_pipeline_steps_and_config():
    pipe = TextPipeline()
    assert pipe.process("  „Hello“,\tWorld!\u200b ", "en") == '" hello , " world !'  # en moves the comma inside the quotes
    assert pipe.raw("  a\tb\u200bc ") == "a b c"
    assert pipe.process(pipe.raw("Crème\u00a0brûlée\t!"), "fr") == pipe.process("Crème\u00a0brûlée\t!", "fr")
    raw_only = TextPipeline(clean=False, normalize=False, tokenize="none", lowercase="none")
    assert raw_only.process("A  „b“", "en") == "A „b“"
    cfg = {"clean": True, "normalize": False, "tokenize": "xlm", "lowercase": "xlm", "out": "x"}
    assert TextPipeline.from_config(cfg) == TextPipeline(True, False, "xlm", "xlm")
    assert TextPipeline.from_config({}) == TextPipeline()
    texts = ["Hello, world!", "Dr. Smith left."]
    assert pipe.process_batch(texts, "en") == [pipe.process(t, "en") for t in texts]
    with pytest.raises(ValueError):
        TextPipeline(tokenize="spacy")


@pytest.mark.parametrize("lang", ["en", "fr", "it", "de", "fi", "hi", "xx"])
def test_fast_moses_tokenizer_equals_sacremoses_on_edge_cases(lang):
    from sacremoses import MosesTokenizer

    ref = MosesTokenizer(lang)
    cases = ["Wait... what?!", "He said 'no.'", "It's John's, isn't it?", "l'homme d'affaires", "5,300 and 1,5 ,x",
             "No. 5 is here. No. more", "Mr. Smith vs. U.S.A. e.g. this", "DOTMULTI and DOTDOTMULTI ..", "a.'",
             "end.' ", "tab\there \x07junk", "''quoted''", "rock 'n' roll '90s", "x...y....z", "A.B.C. d.", ".",
             "'", ",", "..", "$5 & 10% #tag @user", "don't CAN'T y'all o'clock", "hello , world", "(a) [b] {c}"]
    tok = get_tokenizer(lang, "moses")
    for text in cases:
        assert tok(text) == ref.tokenize(text, escape=False, return_str=True), text
