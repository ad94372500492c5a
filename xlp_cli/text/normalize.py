"""Moses punctuation normalization per language (sacremoses), faithful to the perl scripts XLM runs.

XLM's tokenize.sh runs `replace-unicode-punctuation.perl | normalize-punctuation.perl -l L`. sacremoses'
`MosesPunctNormalizer(L, pre_replace_unicode_punct=True)` ports both, with two differences from the perl
script that we correct, both measured on the XLM parity vectors (docs/prepare.md):

1. perl applies the "quotation followed by comma" rules of de/es/fr to every language except en and cs
   (`else` branch); sacremoses applies them to de, es and fr only. We use perl's rule.
2. perl reads lines with their trailing newline, so `s/(\\.+)\\"(\\s*[^<])/\\"$1$2/` also moves a
   sentence-final `."` to `".`; we normalize `text + "\\n"` to get the same line semantics (Python's `$`,
   like perl's, matches before a final newline), then strip.

Speed (the result is the same as applying every substitution with `re.sub`): the regexes are compiled
once per language; a substitution whose pattern is a plain literal becomes `str.replace`, run only when
the literal occurs; a regex with a literal character it cannot match without runs only when that
character occurs; `" +" -> " "` runs only when there are two spaces in a row.
"""

from __future__ import annotations

import functools
import itertools
import re
try:  # CPython's own regex parser: private, stable in 3.11 (pinned: requires-python <3.12); tests/test_deps.py
    import re._parser as _sre
except ImportError:  # pragma: no cover  (only the speed-up is lost: every substitution is tried)
    _sre = None  # type: ignore[assignment]

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
        self._steps = [_step(p, s) for p, s in itertools.chain(m.REPLACE_UNICODE_PUNCTUATION, *groups)]

    def __call__(self, text: str) -> str:
        text += "\n"
        for trigger, rx, sub in self._steps:
            if trigger in text:
                text = text.replace(trigger, sub) if rx is None else rx.sub(sub, text)
        return text.strip()


def _step(pattern: str, sub: str) -> tuple[str, re.Pattern | None, str]:
    """(trigger, compiled regex or None for a literal, replacement): apply only if `trigger in text`."""
    if _sre is None:
        return "", re.compile(pattern), sub
    items = list(_sre.parse(pattern))
    if "\\" not in sub and items and all(op is _sre.LITERAL for op, _ in items):
        return "".join(chr(av) for _, av in items), None, sub
    rx = re.compile(pattern)
    if pattern == " +" and sub == " ":
        return "  ", rx, sub
    for op, av in items:  # the first literal the pattern must match, at top level
        if op is _sre.LITERAL:
            return chr(av), rx, sub
    return "", rx, sub  # "" is in every text: always apply


@functools.lru_cache(maxsize=None)
def get_normalizer(lang: str) -> PunctNormalizer:
    return PunctNormalizer(lang)


def normalize(text: str, lang: str) -> str:
    return get_normalizer(lang)(text)
