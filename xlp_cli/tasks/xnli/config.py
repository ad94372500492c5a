"""The configs of the XNLI task: `xlp finetune --task xnli` and `xlp evaluate --task xnli` (same flag names)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import BATCH_MAX, COUNT_MAX, STEPS_MAX, TOKENS_MAX, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.common import EvaluateCommon, FinetuneCommon, validate_head_training

SETTINGS = ("transfer", "translate-train")
VECO_MODES = ("plug-out", "plug-in")
PAIR_SOURCES = ("translated", "oracle")
# XLP paper, appendix B.1 / Table 6, fine-tuning column
DEFAULT_LR = [5e-6]
DEFAULT_BATCH_SIZE = [16]


@dataclasses.dataclass
class XnliConfig(FinetuneCommon):
    batch_size: list[int] = opt(factory=list, help="xnli: batch sizes to search (default: 16; the paper searches 8,16). "
                                                   "--lr takes several values too (default 5e-6; the paper: 1e-6..8e-6).", lo=1, hi=BATCH_MAX)
    dropout: float = opt(0.0, "Dropout during fine-tuning (Table 6: 0).", lo=0, lt=1)
    save_every: int = opt(1000, "xnli: also write checkpoints/last every N steps within an epoch (0: only at epoch ends).",
                          volatile=True, lo=0, hi=STEPS_MAX)
    setting: str = opt("transfer", "xnli: transfer (train on English, test on all) or translate-train (train per language).",
                       choices=SETTINGS)
    train_file: Path | None = opt(None, "xnli: English training TSV (default: DATA/mnli_en/mnli_train.tsv).")
    dev_file: Path | None = opt(None, "xnli: XNLI dev TSV, all languages (default: DATA/xnli/xnli.dev.tsv).")
    test_file: Path | None = opt(None, "xnli: XNLI test TSV, all languages (default: DATA/xnli/xnli.test.tsv).")
    translated_train: str = opt("", "xnli translate-train: training TSV per language, with {lang} in the path "
                                    "(default: the language's dev set, see docs/finetune.md).")
    train_lang: str = opt("en", "xnli transfer: the language of the training rows (English, as in the paper).")
    select_on: str = opt("train", "xnli transfer: select the checkpoint on the training language's dev set (train: English dev) "
                                  "or on the average dev accuracy of the test languages (avg).", choices=("train", "avg"))
    epoch_size: int = opt(0, "xnli: training examples per epoch (0: the whole training set; XLM uses 20000).", lo=0, hi=COUNT_MAX)
    max_train_rows: int = opt(0, "xnli: use at most this many training rows (0: all).", lo=0, hi=COUNT_MAX)
    max_eval_rows: int = opt(0, "xnli: evaluate at most this many rows per language and split (0: all).", lo=0, hi=COUNT_MAX)
    max_len: int = opt(256, "xnli: maximum subword tokens per sentence (Table 6: 256); longer ones are truncated.", lo=8, hi=TOKENS_MAX)
    unfreeze_projections: bool = opt(False, "xnli: also train the language parameters of an encoding that keeps them "
                                            "frozen when fine-tuning (XLP's projections, appendix B.1).")
    eval_batch_size: int = opt(64, "xnli: batch size for evaluation.", volatile=True, lo=1, hi=BATCH_MAX)
    veco: str = opt("plug-out", "xnli: VECO fine-tuning (docs/veco.md): plug-out drops a VECO run's cross-attention "
                                "(the plain encoder); plug-in classifies x from [h_x; s_x], s_x attending to x's "
                                "translation (translate-train only).", choices=VECO_MODES)
    plug_in_lang: str = opt("en", "xnli --veco plug-in: the language of each example's paired translation y (for "
                                  "this language's own model: the first other test language).")
    plug_in_pairs: str = opt("translated", "xnli --veco plug-in: where y comes from. translated: x machine-translated "
                                           "into --plug-in-lang by --plug-in-translator (the paper's pairs are machine "
                                           "translations); oracle: the human XNLI example of the same index (an upper "
                                           "bound, not the paper's setting).", choices=PAIR_SOURCES)
    plug_in_translator: Path | None = opt(None, "xnli --veco plug-in --plug-in-pairs translated: an `xlp finetune "
                                                "--task translation` run (its first seed) that translates the test "
                                                "languages into --plug-in-lang, greedy.")

    def validate(self) -> None:
        super().validate()
        validate_head_training(self, "xnli")
        if self.veco == "plug-in" and self.setting == "transfer":
            raise BadInput("--veco plug-in needs every example's translation y beside x, and zero-shot transfer has "
                           "no such pairs (VECO paper, footnote 4): use --setting translate-train or --veco plug-out")
        if self.veco == "plug-in" and self.plug_in_pairs == "translated" and self.plug_in_translator is None:
            raise BadInput("--veco plug-in pairs each example with its machine translation (--plug-in-pairs "
                           "translated, the default): give --plug-in-translator RUN (an `xlp finetune --task "
                           f"translation` run into {self.plug_in_lang!r}), or --plug-in-pairs oracle for the human "
                           "XNLI translations (an upper bound, not the paper's setting)")


@dataclasses.dataclass
class XnliEvalConfig(EvaluateCommon):
    split: str = opt("test", "xnli/translation: which split's predictions to score.", choices=("test", "dev"))
