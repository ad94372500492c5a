"""Word tokenization per language: Moses (sacremoses, escape=False), jieba for zh, pythainlp for th.

Modes (`--tokenize`):
- `moses` (default): sacremoses' MosesTokenizer as is. sacremoses deliberately counts Indic viramas and
  nuktas as alphanumeric, so Devanagari words stay whole (`मुस्लिम`).
- `xlm`: the same tokenizer with the character classes of perl 5.36 (Unicode 14), i.e. what XLM's
  `tokenize.sh` actually does with Moses' tokenizer.perl: `\\p{IsAlnum}` is Alphabetic + decimal digits,
  which excludes viramas and nuktas (`मुस ् लिम`) and includes every CJK ideograph. Byte-identical to XLM
  on the parity vectors; use it with `--lowercase xlm` to reproduce XLM's data exactly.
- `none`: split on whitespace only.

zh is segmented with jieba (accurate mode, HMM on) and th with pythainlp's `word_tokenize` (newmm), and
neither goes through the Moses tokenizer (as in XLM). Whitespace tokens are dropped, so every output is
tokens joined by single spaces. Tokenizer objects are built once per (language, mode) and cached.
"""

from __future__ import annotations

import functools
import logging
import re
try:  # CPython's own regex parser: private, stable in 3.11 (pinned: requires-python <3.12); tests/test_deps.py
    import re._parser as _sre
except ImportError:  # pragma: no cover  (only the speed-up is lost: every substitution is tried)
    _sre = None  # type: ignore[assignment]
from typing import Callable

import regex
from sacremoses import MosesTokenizer

from xlp_cli.text.langs import base_lang

MODES = ("moses", "xlm", "none")


def _trigger(rx) -> str:
    """A character string that every match of `rx` contains ("" if none is known): a substitution whose
    trigger does not occur in the text cannot change it and is skipped."""
    if _sre is None or not isinstance(rx, re.Pattern):
        return ""
    for op, av in _sre.parse(rx.pattern):
        if op is _sre.LITERAL:
            return chr(av)
    return ""


class _MosesTokenizer(MosesTokenizer):
    """sacremoses' MosesTokenizer (escape=False), faster with the same output.

    `fast_tokenize` runs sacremoses' own steps and regexes in sacremoses' order, but skips a substitution
    when a character every match needs is absent (most lines have no apostrophe, many no comma), and the
    non-breaking-prefix step tests sets instead of lists, only for tokens that end in a period.
    tests/test_text_parity.py checks that the output equals sacremoses' `tokenize` on real text.
    """

    _SETS: dict[str, frozenset] = {}

    def __init__(self, lang: str):
        super().__init__(lang)
        self._prefixes = frozenset(self.NONBREAKING_PREFIXES)
        self._numeric_only = frozenset(self.NUMERIC_ONLY_PREFIXES)
        if not self._SETS:
            self._SETS["alpha"] = frozenset(self.IsAlpha)
            self._SETS["lower"] = frozenset(self.IsLower)
        self._alpha, self._lower = self._SETS["alpha"], self._SETS["lower"]
        if lang == "en":
            apostrophe = list(self.ENGLISH_SPECIFIC_APOSTROPHE)
        elif lang in ("fr", "it"):
            apostrophe = list(self.FR_IT_SPECIFIC_APOSTROPHE)
        else:
            apostrophe = [self.NON_SPECIFIC_APOSTROPHE]
        steps = [self.COMMA_SEPARATE_1, self.COMMA_SEPARATE_2, self.COMMA_SEPARATE_3] + apostrophe
        self._middle = [(_trigger(rx), rx, sub) for rx, sub in steps]

    def fast_tokenize(self, text: str) -> str:
        for rx, sub in (self.DEDUPLICATE_SPACE, self.ASCII_JUNK):
            text = rx.sub(sub, text)
        text = text.strip()
        rx, sub = self.PAD_NOT_ISALNUM
        text = rx.sub(sub, text)
        if ".." in text:
            text = self.replace_multidots(text)
        for trigger, rx, sub in self._middle:
            if trigger in text:
                text = rx.sub(sub, text)
        text = self.handles_nonbreaking_prefixes(text)
        rx, sub = self.DEDUPLICATE_SPACE
        text = rx.sub(sub, text).strip()
        if ".'" in text:
            rx, sub = self.TRAILING_DOT_APOSTROPHE
            text = rx.sub(sub, text)
        if "DOTMULTI" in text:
            text = self.restore_multidots(text)
        return text

    def handles_nonbreaking_prefixes(self, text: str) -> str:
        tokens = text.split()
        last = len(tokens) - 1
        for i, token in enumerate(tokens):
            if len(token) < 2 or token[-1] != ".":  # the rule is for "<something>." tokens only
                continue
            prefix = token[:-1]
            if ("." in prefix and not self._alpha.isdisjoint(prefix)) or (
                    prefix in self._prefixes and prefix not in self._numeric_only) or (
                    i != last and tokens[i + 1][0] in self._lower):
                continue  # a known abbreviation, or the next word starts in lower case: keep the period
            if prefix in self._numeric_only and i != last and tokens[i + 1][0] in "0123456789":
                continue  # e.g. "No. 5"
            tokens[i] = prefix + " ."
        return " ".join(tokens)


class _PerlClassesMosesTokenizer(_MosesTokenizer):
    """The tokenizer whose 'pad everything that is not alphanumeric' rule uses perl's \\p{IsAlnum}."""

    PAD_NOT_ISALNUM = regex.compile(r"([^\p{Alphabetic}\p{Nd}\s\.'\`\,\-])"), r" \1 "


def _jieba() -> Callable[[str], str]:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    tok = jieba.Tokenizer()
    tok.initialize()

    def cut(text: str) -> str:
        return " ".join(t for t in tok.cut(text) if not t.isspace() and t)

    return cut


def _thai() -> Callable[[str], str]:
    from pythainlp.tokenize import word_tokenize

    def cut(text: str) -> str:
        return " ".join(t.strip() for t in word_tokenize(text, keep_whitespace=False) if t.strip())

    return cut


def _moses(lang: str, mode: str) -> Callable[[str], str]:
    cls = _PerlClassesMosesTokenizer if mode == "xlm" else _MosesTokenizer
    tok = cls(lang)  # sacremoses falls back to the English prefixes for languages it has none for, as perl does

    return tok.fast_tokenize

    return cut


@functools.lru_cache(maxsize=None)
def get_tokenizer(lang: str, mode: str = "moses") -> Callable[[str], str]:
    """A function str -> str (tokens joined by single spaces) for `lang`, built once and cached."""
    if mode not in MODES:
        raise ValueError(f"tokenize mode must be one of {MODES}, not {mode!r}")
    if mode == "none":
        return lambda text: " ".join(text.split())
    base = base_lang(lang)
    if base == "zh":
        return _jieba()
    if base == "th":
        return _thai()
    return _moses(base, mode)


def tokenize(text: str, lang: str, mode: str = "moses") -> str:
    return get_tokenizer(lang, mode)(text)
