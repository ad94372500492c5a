"""TextConfig: the flags of `xlp text`, the line filter (same names and defaults as `xlp prepare`'s)."""

from __future__ import annotations

import dataclasses

from xlp_cli.core.config import THREADS_MAX, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.text.langs import is_known

TOKENIZE_MODES = ("moses", "xlm", "none")
LOWERCASE_MODES = ("xlm", "safe", "none")


@dataclasses.dataclass
class TextConfig:
    inputs: list[str] = opt(factory=list, argument=True,
                            help="INPUT [OUTPUT]: text files, one sentence per line ('-' or none: stdin / stdout).")
    lang: str = opt("", "Language of the lines (ISO 639-1, e.g. de); chooses the tokenizer and its prefixes.")
    clean: bool = opt(True, "Remove non-printing characters.")
    normalize: bool = opt(True, "Moses punctuation normalization (per language).")
    tokenize: str = opt("moses", "moses (sacremoses' output), xlm (byte-identical to XLM's tokenize.sh) or none.",
                        choices=TOKENIZE_MODES)
    lowercase: str = opt("safe", "xlm (lowercase_and_remove_accent.py), safe (keeps Thai/Devanagari/Arabic marks) or none.",
                         choices=LOWERCASE_MODES)
    workers: int = opt(2, "Threads processing blocks of lines (the output does not depend on it).", volatile=True, lo=1, hi=THREADS_MAX)
    on_error: str = opt("raise", "A bad line (invalid UTF-8, a NUL byte, too long): raise (exit 2) or skip "
                        "(write an empty line, count it).", choices=("raise", "skip"))
    max_line_bytes: int = opt(100_000, "Longest line accepted, in bytes (0: no limit).", lo=0, hi=1 << 30)

    def validate(self) -> None:
        if not self.lang:
            raise BadInput("--lang is required: the language of the input lines (e.g. --lang de)")
        if not is_known(self.lang):
            raise BadInput(f"unknown language code {self.lang!r} in --lang: use ISO 639-1 codes such as en, fr, zh")
        if self.workers < 1:
            raise BadInput("--workers must be at least 1")
        if self.max_line_bytes < 0:
            raise BadInput("--max-line-bytes must be >= 0")
