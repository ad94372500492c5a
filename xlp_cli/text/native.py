"""The compiled text pipeline (`_native`, built from csrc/*.cpp by `pip install -e .` / `make setup`).

`pipeline(lang, clean, normalize, tokenize, lowercase)` gives a cached `_native.Pipeline`; its `run(texts,
stage)` processes a list of str and `run_bytes(block, stage, max_line)` a block of UTF-8 lines, both without
the GIL. Stages: ALL, or BEFORE (clean + normalize) and AFTER (lowercase + spacing) around a segmenter
(zh, th), or TOKENIZE (the tokenizer alone), or RAW (clean and collapse whitespace: the `raw` column).
`module().Wikitext(namespaces, drop_sections, entities).lines(wikitext)` is the wikitext -> paragraphs converter
of `--source wikipedia` (csrc/wikitext.cpp; prepare/sources/wikipedia_text.py builds it).
"""

from __future__ import annotations

import functools
from typing import Any

from xlp_cli.core.errors import WorkFailed

ALL, BEFORE, AFTER, TOKENIZE, RAW = 0, 1, 2, 3, 4
TOKENIZE_CODES = {"none": 0, "moses": 1, "xlm": 2}
LOWERCASE_CODES = {"none": 0, "safe": 1, "xlm": 2}


@functools.lru_cache(maxsize=1)
def module() -> Any:
    try:
        from xlp_cli.text import _native  # (the compiled extension: not built is a one-line error)
    except ImportError as e:  # pragma: no cover - depends on the install
        raise WorkFailed(f"the native text pipeline is not built ({e}); run `make setup` or `pip install -e .`") from None
    return _native


@functools.lru_cache(maxsize=None)
def pipeline(lang: str, clean: bool, normalize: bool, tokenize: str, lowercase: str) -> Any:
    """A native pipeline for one base language code, built once (its tokenizer parses the prefix list)."""
    return module().Pipeline(lang, clean, normalize, TOKENIZE_CODES[tokenize], LOWERCASE_CODES[lowercase])
