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
from typing import Callable

import regex
from sacremoses import MosesTokenizer

from xlp_cli.text.langs import base_lang

MODES = ("moses", "xlm", "none")


class _PerlClassesMosesTokenizer(MosesTokenizer):
    """MosesTokenizer whose 'pad everything that is not alphanumeric' rule uses perl's \\p{IsAlnum}."""

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
    cls = _PerlClassesMosesTokenizer if mode == "xlm" else MosesTokenizer
    tok = cls(lang)  # sacremoses falls back to the English prefixes for languages it has none for, as perl does

    def cut(text: str) -> str:
        return tok.tokenize(text, escape=False, return_str=True)

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
