"""EvaluateConfig: every `xlp evaluate` flag, which is also a `--config`/recipe key of the same name.

Sections: fields shared by every task, then per task. `--data` is repeatable: several runs side by side.
Runs that share a `--name` are treated as seeds of one configuration (mean +- std).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.config import opt
from xlp_cli.errors import BadInput

TASKS = ("xnli", "lexicon", "analysis", "translation")
TOPIC_WORDS = ["happy", "glad", "sad", "car", "plane", "bike", "meat", "food", "rice"]


@dataclasses.dataclass
class EvaluateConfig:
    # ------------------------------------------------------------------ every task
    task: str = opt("xnli", "What to evaluate.", choices=TASKS)
    data: list[Path] = opt(factory=list, help="Run folders, repeatable (xnli: `xlp finetune` outputs; lexicon/analysis: `xlp pretrain` runs).")
    name: list[str] = opt(factory=list, help="A name per --data, same order (default: the run's language encoding). Equal names = seeds of one run.")
    out: Path = opt(Path("out/evaluate"), "Output folder (report.md, report.html, *.png, results.json).")
    lang: list[str] = opt(factory=list, help="Languages to report (default: all found, in the XLP paper's Table 1 order).")
    baseline: str = opt("", "Name of the run the others are compared with (default: the first).")
    title: str = opt("", "Report title.")

    # ------------------------------------------------------------------ xnli
    split: str = opt("test", "xnli: which split's predictions to score.", choices=("test", "dev"))

    # ------------------------------------------------------------------ lexicon and analysis (read pretrain runs)
    which: str = opt("best", "lexicon/analysis: which pre-training checkpoint to read.", choices=("best", "last"))
    dict_dir: Path | None = opt(None, "lexicon: folder with xx-en.<split> dictionaries (default: DATA/bilingual_dict_wiktionary).")
    dict_split: str = opt("test", "lexicon: dictionary file suffix (test, testsmall, trainsmall).")
    embedding: str = opt("raw", "lexicon: raw word embeddings (VLE 4.6) or encoded (after each language's encoding).",
                         choices=("raw", "encoded"))
    max_pairs: int = opt(0, "lexicon: use at most this many word pairs per language (0: all).")
    words: list[str] = opt(factory=lambda: ["the", "world", "house", "water"],
                           help="analysis: English words for the 15x15 language similarity (XLP Fig. 4).")
    topic_words: list[str] = opt(factory=lambda: list(TOPIC_WORDS), help="analysis: words for the topic similarity (XLP Fig. 5).")
    sentence: str = opt("the cat sat on the mat because it was tired .",
                        help="analysis: English sentence for the word-language correlation terms (XLP Fig. 2, Eq. 3).")
    head: int = opt(0, "analysis: attention head of the first layer for Fig. 2.")

    # ------------------------------------------------------------------ translation (issue 6)
    # (xlp_cli/evaluate/bleu.py; --data: `xlp finetune --task translation` folders; --split test|dev picks
    # the test or valid predictions; --lang keeps directions whose both languages are listed)
    bleu_tokenize: str = opt("13a", "translation: sacreBLEU tokenizer for detokenized BLEU (13a, intl, zh, ...).",
                             choices=("13a", "intl", "zh", "ja-mecab", "ko-mecab", "char", "flores101", "flores200", "none"))

    def validate(self) -> None:
        if not self.data:
            raise BadInput("give at least one --data run folder")
        if self.name and len(self.name) != len(self.data):
            raise BadInput(f"--name gives {len(self.name)} names for {len(self.data)} --data folders; give one per folder")
        if self.max_pairs < 0:
            raise BadInput("--max-pairs must be >= 0")
