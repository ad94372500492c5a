"""Moses punctuation normalization per language, as XLM's tokenize.sh runs it (csrc/normalize.cpp).

`replace-unicode-punctuation.perl | normalize-punctuation.perl -l L`, rule by rule, with perl's semantics:
the scripts read bytes (`\\d` is [0-9], `\\s` ASCII whitespace, `[a-z]` with /i ASCII letters), each line
with its newline (so a sentence-final `."` becomes `".` in every language but en and cs), and the rules
that match U+00A0 (French quotes, `nº`, `ºC`, `cm`, `? ! ; : %`, digit groups) see the no-break spaces of
the input. `normalize(text, lang)` strips the result; the pipeline does not (XLM keeps the bytes).
"""

from __future__ import annotations

import functools
from typing import Callable

from xlp_cli.text import native
from xlp_cli.text.langs import base_lang


@functools.lru_cache(maxsize=None)
def get_normalizer(lang: str) -> Callable[[str], str]:
    """str -> str for `lang` (stripped), cached."""
    base = base_lang(lang)
    fn = native.module().normalize
    return lambda text: fn(text, base).strip()


def normalize(text: str, lang: str) -> str:
    return get_normalizer(lang)(text)
