"""Word segmenters for the languages without spaces between words: jieba (zh) and pythainlp (th).

Two ways of joining their tokens:
- `keep_spaces=True`, XLM's: every token joined by one space, whitespace tokens included, as XLM's
  segment_th.py (`' '.join(word_tokenize(line))`) and the zh reference (`' '.join(jieba.cut(line))`) do, so
  an input space becomes three spaces;
- `keep_spaces=False`, xlp's default: whitespace tokens dropped, tokens joined by single spaces.
"""

from __future__ import annotations

import functools
import logging
from typing import Callable


@functools.lru_cache(maxsize=None)
def segmenter(lang: str, keep_spaces: bool) -> Callable[[str], str]:
    if lang == "zh":
        import jieba

        jieba.setLogLevel(logging.WARNING)
        tok = jieba.Tokenizer()
        tok.initialize()
        cut = tok.cut  # accurate mode, HMM on: jieba.cut's defaults
    elif lang == "th":
        from pythainlp.tokenize import word_tokenize

        cut = word_tokenize  # newmm, keep_whitespace=True: segment_th.py's call
    else:
        raise ValueError(f"no segmenter for {lang!r}")
    if keep_spaces:
        return lambda text: " ".join(cut(text))
    return lambda text: " ".join(t.strip() for t in cut(text) if t.strip())
