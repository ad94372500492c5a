"""Moses punctuation normalization per language (sacremoses), faithful to the perl scripts XLM runs.

XLM's tokenize.sh runs `replace-unicode-punctuation.perl | normalize-punctuation.perl -l L`. sacremoses'
`MosesPunctNormalizer(L, pre_replace_unicode_punct=True)` ports both, with two differences from the perl
script that we correct, both measured on the XLM parity vectors (docs/prepare.md):

1. perl applies the "quotation followed by comma" rules of de/es/fr to every language except en and cs
   (`else` branch); sacremoses applies them to de, es and fr only. We use perl's rule.
2. perl reads lines with their trailing newline, so `s/(\\.+)\\"(\\s*[^<])/\\"$1$2/` also moves a
   sentence-final `."` to `".`; we normalize `text + "\\n"` to get the same line semantics (Python's `$`,
   like perl's, matches before a final newline), then strip.

The regexes are compiled once per language (sacremoses re-looks them up on every call).
"""

from __future__ import annotations

import functools
import itertools
import re

from sacremoses import MosesPunctNormalizer

from xlp_cli.text.langs import base_lang

_NO_QUOTE_COMMA_RULES = ("cs", "cz")


class PunctNormalizer:
    def __init__(self, lang: str):
        lang = base_lang(lang)
        m = MosesPunctNormalizer(lang, pre_replace_unicode_punct=True)
        groups = [m.EXTRA_WHITESPACE, m.NORMALIZE_UNICODE_IF_NOT_PENN, m.NORMALIZE_UNICODE, m.FRENCH_QUOTES,
                  m.HANDLE_PSEUDO_SPACES]
        if lang == "en":
            groups.append(m.EN_QUOTATION_FOLLOWED_BY_COMMA)
        elif lang not in _NO_QUOTE_COMMA_RULES:
            groups.append(m.DE_ES_FR_QUOTATION_FOLLOWED_BY_COMMA)
        groups.append(m.DE_ES_CZ_CS_FR if lang in ("de", "es", "cz", "cs", "fr") else m.OTHER)
        self.lang = lang
        self._pre = [(re.compile(p), s) for p, s in m.REPLACE_UNICODE_PUNCTUATION]
        self._subs = [(re.compile(p), s) for p, s in itertools.chain(*groups)]

    def __call__(self, text: str) -> str:
        text += "\n"
        for rx, sub in self._pre:
            text = rx.sub(sub, text)
        for rx, sub in self._subs:
            text = rx.sub(sub, text)
        return text.strip()


@functools.lru_cache(maxsize=None)
def get_normalizer(lang: str) -> PunctNormalizer:
    return PunctNormalizer(lang)


def normalize(text: str, lang: str) -> str:
    return get_normalizer(lang)(text)
