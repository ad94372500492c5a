"""Word tokenization per language: the Moses tokenizer (csrc/tokenize.cpp), jieba for zh, pythainlp for th.

Modes (`--tokenize`):
- `moses` (default): the output of sacremoses 0.2.0's `MosesTokenizer(lang).tokenize(escape=False)`, with
  sacremoses' character tables (Indic viramas and nuktas count as letters, so `मुस्लिम` stays one word) and
  its rules (a sentence-final period stays on a word that holds a period, `LiverpoolFC.com.`).
- `xlm`: mosesdecoder's tokenizer.perl `-no-escape` under perl 5.36, rule for rule: what XLM's tokenize.sh
  does. perl's `\\p{IsAlnum}` (Alphabetic + decimal digits) splits viramas and nuktas off (`मुस ् लिम`); the
  last word of a line always loses its final period; fi/sv keep `:` and ca keeps `·` inside words;
  whitespace-only lines come back unchanged.
- `none`: split on whitespace only.
docs/prepare.md lists every difference between `moses` and `xlm`.

zh and th do not go through the Moses tokenizer (as in XLM): `moses` drops whitespace tokens of jieba /
pythainlp, `xlm` keeps them as XLM's scripts do (xlp_cli/text/segment.py). Tokenizers are built once per
(language, mode) and cached.
"""

from __future__ import annotations

import functools
from typing import Callable

from xlp_cli.text import native
from xlp_cli.text.langs import base_lang
from xlp_cli.text.segment import segmenter

MODES = ("moses", "xlm", "none")
SEGMENTED = ("zh", "th")


@functools.lru_cache(maxsize=None)
def get_tokenizer(lang: str, mode: str = "moses") -> Callable[[str], str]:
    """A function str -> str (tokens joined by spaces) for `lang`, built once and cached."""
    if mode not in MODES:
        raise ValueError(f"tokenize mode must be one of {MODES}, not {mode!r}")
    if mode == "none":
        return lambda text: " ".join(text.split())
    base = base_lang(lang)
    if base in SEGMENTED:
        return segmenter(base, keep_spaces=mode == "xlm")
    pipe = native.pipeline(base, False, False, mode, "none")
    return lambda text: pipe.run([text], native.TOKENIZE)[0]


def tokenize(text: str, lang: str, mode: str = "moses") -> str:
    return get_tokenizer(lang, mode)(text)
