"""Remove non-printing characters, as Moses' `remove-non-printing-char.perl` (used by XLM's tokenize.sh) does.

The perl script replaces every character of Unicode category C (Cc control, Cf format, Cs surrogate,
Co private use, Cn unassigned, perl 5.36 = Unicode 14) with a space: `s/\\p{C}/ /g`. Tabs and newlines are
Cc, so they become spaces too; the tokenizer later collapses runs of spaces. Runs natively (csrc/normalize.cpp).
"""

from __future__ import annotations

from xlp_cli.text import native


def remove_non_printing(text: str) -> str:
    """Replace every \\p{C} character with a space (printable text is returned unchanged)."""
    if text.isprintable():  # no category C (nor Z other than ' ') in it: nothing to replace
        return text
    return native.module().remove_non_printing(text)


def collapse_spaces(text: str) -> str:
    """Runs of whitespace to one space, no leading or trailing space."""
    return " ".join(text.split())
