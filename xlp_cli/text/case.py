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

Both modes run natively (csrc/case.cpp), with CPython 3.11's own tables for `str.lower` (Final_Sigma
included), NFD and the Mn category, generated into csrc/unicode_tables.inc.
"""

from __future__ import annotations

from xlp_cli.text import native

MODES = ("xlm", "safe", "none")


def lowercase_xlm(text: str) -> str:
    """Exactly XLM's lowercase_and_remove_accent.py on one line (without the newline)."""
    if text.isascii():
        return text.rstrip().lower()
    return native.module().lowercase(text, "xlm")


def lowercase_safe(text: str) -> str:
    if text.isascii():
        return text.lower()
    return native.module().lowercase(text, "safe")


def apply_case(text: str, mode: str) -> str:
    if mode == "safe":
        return lowercase_safe(text)
    if mode == "xlm":
        return lowercase_xlm(text)
    if mode == "none":
        return text
    raise ValueError(f"lowercase mode must be one of {MODES}, not {mode!r}")
