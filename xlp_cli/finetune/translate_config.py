"""TranslateConfig: every `xlp translate` flag (also a `--config` key of the same name)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.config import opt
from xlp_cli.errors import BadInput


@dataclasses.dataclass
class TranslateConfig:
    inputs: list[str] = opt(factory=list, argument=True,
                            help="Input files, one sentence per line (none or '-': standard input).")
    model: Path = opt(Path("out/finetune"), "An `xlp finetune --task translation` folder, or one of its seed-<S> folders.")
    seed: int = opt(-1, "Which seed's model of a multi-seed folder (-1: the first).")
    which: str = opt("best", "Which checkpoint.", choices=("best", "last"))
    src_lang: str = opt("", "Language of the input lines (required).")
    tgt_lang: str = opt("en", "Language to translate into.")
    output: Path | None = opt(None, "Write the translations to this file (default: standard output).")
    format: str = opt("text", "text (detokenized), tokenized (BPE undone, Moses tokens) or jsonl (all fields).",
                      choices=("text", "tokenized", "jsonl"))
    beam: int = opt(5, "Beam size (Table 7: 5).")
    length_penalty: float = opt(1.2, "Length penalty alpha: score = logprob / length^alpha (Table 7: 1.2).")
    greedy: bool = opt(False, "Greedy decoding (the same as --beam 1).")
    batch_size: int = opt(64, "Sentences decoded together (sorted by length).")
    max_len_a: float = opt(1.2, "Output length limit a * source length + b: a.")
    max_len_b: int = opt(10, "Output length limit a * source length + b: b.")
    overflow: str = opt("truncate", "A line longer than the model's positions is truncated with a warning, or is an error (fail).",
                        choices=("truncate", "fail"))
    device: str = opt("auto", "Device: auto (cuda when available), cpu or cuda.", choices=("auto", "cpu", "cuda"))
    threads: int = opt(0, "CPU threads for torch (0: torch's default).")

    def validate(self) -> None:
        if not self.src_lang:
            raise BadInput("give --src-lang, the language of the input")
        if self.beam < 1:
            raise BadInput("--beam must be at least 1")
        if self.batch_size < 1:
            raise BadInput("--batch-size must be at least 1")
        if self.max_len_a < 0 or self.max_len_b < 1:
            raise BadInput("--max-len-a must be >= 0 and --max-len-b >= 1")
