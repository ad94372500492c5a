"""Lowercasing and accent stripping, three modes (`--lowercase`).

`xlm`: byte-compatible with XLM's `tools/lowercase_and_remove_accent.py`: `rstrip`, `lower`, NFD, delete
every character of category Mn, `lower` again. On Thai it deletes vowel and tone marks, on Devanagari the
virama, nukta and most vowel signs, on Arabic the harakat and the hamza of `أ` (see docs/prepare.md).

`safe` (default): lowercase everything, strip accents only where the accent is a removable diacritic on a
letter and not part of the letter itself:
- Latin and Greek letters: every combining mark from the generic diacritic blocks (U+0300-036F,
  U+1AB0-1AFF, U+1DC0-1DFF, U+20D0-20FF, U+FE20-FE2F) is removed, precomposed or not. This is XLM's
  behaviour for these scripts, so European languages and Vietnamese get the same text as `xlm`.
- Cyrillic: letters are kept whole (`й`, `ё`, `ї`, `ў`, `ќ` are letters of their alphabets, not accented
  `и`, `е`, ...); only the stress marks U+0300 and U+0301 that dictionaries and learner texts add are
  removed.
- Every other script is left as it is apart from lowercasing: Arabic (hamza, harakat), Hebrew (niqqud),
  Thai/Lao (vowel and tone marks), all Indic abugidas (viramas, nuktas, vowel signs), Tibetan, Myanmar,
  Khmer, Japanese kana (dakuten), Hangul, CJK. Marks after digits, punctuation or spaces are kept too.
Unlike `xlm`, `safe` does not NFD-normalize text it does not change, so the bytes of untouched scripts are
exactly the input's.

`none`: the text is left as it is.
"""

from __future__ import annotations

import unicodedata

import regex

MODES = ("xlm", "safe", "none")

_GENERIC_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_LATIN_GREEK = regex.compile(r"[\p{Latin}\p{Greek}]")
# combining marks right after a Latin/Greek letter (or after marks that follow one)
_LG_MARKS = regex.compile(r"(?<=[\p{Latin}\p{Greek}])[" + _GENERIC_MARKS + "]+")
# Cyrillic stress marks (grave, acute), possibly after a kept breve/diaeresis of a decomposed й/ё
_CY_STRESS = regex.compile(r"(?<=\p{Cyrillic}[\u0306\u0308]?)[\u0300\u0301]+")


def strip_accents_xlm(text: str) -> str:
    """XLM's run_strip_accents: NFD, then drop every Mn character."""
    text = unicodedata.normalize("NFD", text)
    return "".join(c for c in text if unicodedata.category(c) != "Mn")


def lowercase_xlm(text: str) -> str:
    """Exactly XLM's lowercase_and_remove_accent.py on one line (without the newline)."""
    return strip_accents_xlm(text.rstrip().lower()).lower()


def _build_safe_table() -> dict[int, str]:
    """Precomposed Latin/Greek letters -> the letter without its generic-block diacritics."""
    table: dict[int, str] = {}
    for cp in range(0x80, 0x2200):
        c = chr(cp)
        d = unicodedata.normalize("NFD", c)
        if d == c or not _LATIN_GREEK.match(d[0]):
            continue
        kept = d[0] + "".join(m for m in d[1:] if not regex.match("[" + _GENERIC_MARKS + "]", m))
        if kept != c:
            table[cp] = kept
    return table


_SAFE_TABLE: dict[int, str] | None = None


def lowercase_safe(text: str) -> str:
    global _SAFE_TABLE
    text = text.lower()
    if text.isascii():
        return text
    if _SAFE_TABLE is None:
        _SAFE_TABLE = _build_safe_table()
    text = text.translate(_SAFE_TABLE)
    text = _LG_MARKS.sub("", text)
    return _CY_STRESS.sub("", text)


def apply_case(text: str, mode: str) -> str:
    if mode == "safe":
        return lowercase_safe(text)
    if mode == "xlm":
        return lowercase_xlm(text)
    if mode == "none":
        return text
    raise ValueError(f"lowercase mode must be one of {MODES}, not {mode!r}")
