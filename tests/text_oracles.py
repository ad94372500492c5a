"""Pure-Python definitions that the native text pipeline must equal (test oracles, not used by xlp).

- `lowercase_xlm`: XLM's tools/lowercase_and_remove_accent.py, its three lines applied to one line;
- `lowercase_safe`: xlp's `safe` mode as it was written in Python (regex module) before it moved to C++;
- `remove_non_printing`: remove-non-printing-char.perl's \\p{C} (perl 5.36 and Python 3.11 share Unicode 14).
"""

from __future__ import annotations

import unicodedata

import regex

_GENERIC = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_LATIN_GREEK = regex.compile(r"[\p{Latin}\p{Greek}]")
_LG_MARKS = regex.compile(r"(?<=[\p{Latin}\p{Greek}])[" + _GENERIC + "]+")
_CY_STRESS = regex.compile(r"(?<=\p{Cyrillic}[\u0306\u0308]?)[\u0300\u0301]+")
_SAFE: dict[int, str] = {}


def lowercase_xlm(line: str) -> str:
    text = unicodedata.normalize("NFD", line.rstrip().lower())
    return "".join(c for c in text if unicodedata.category(c) != "Mn").lower()


def lowercase_safe(text: str) -> str:
    text = text.lower()
    if text.isascii():
        return text
    if not _SAFE:
        for cp in range(0x80, 0x2200):
            d = unicodedata.normalize("NFD", chr(cp))
            if d != chr(cp) and _LATIN_GREEK.match(d[0]):
                kept = d[0] + "".join(m for m in d[1:] if not regex.match("[" + _GENERIC + "]", m))
                if kept != chr(cp):
                    _SAFE[cp] = kept
    return _CY_STRESS.sub("", _LG_MARKS.sub("", text.translate(_SAFE)))


def remove_non_printing(text: str) -> str:
    return "".join(" " if unicodedata.category(c).startswith("C") else c for c in text)
