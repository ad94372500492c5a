"""The configs of the PAWS-X task: `xlp finetune --task pawsx` and `xlp evaluate --task pawsx` (same flag names)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import BATCH_MAX, COUNT_MAX, STEPS_MAX, TOKENS_MAX, Default, defaults, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.common import EvaluateCommon, FinetuneCommon, validate_head_training
from xlp_cli.tasks.xnli.config import PAIR_SOURCES, SETTINGS, VECO_MODES

# XTREME's PAWS-X defaults (Hu et al. 2020, their run_classify.py): lr 2e-5, batch size 32, 5 epochs
DEFAULT_LR = [2e-5]
DEFAULT_BATCH_SIZE = [32]


@dataclasses.dataclass
@defaults(warmup=Default(0, "Linear warm-up steps, then inverse square root decay (0: a constant learning rate; "
                            "pawsx default, XTREME has no warm-up)."))
class PawsxConfig(FinetuneCommon):
    epochs: int = opt(5, "Passes over the training set (pawsx: 5, as XTREME).", lo=0, hi=10**6)
    batch_size: list[int] = opt(factory=list, help="pawsx: batch sizes to search (default: 32, as XTREME). "
                                                   "--lr takes several values too (default 2e-5).", lo=1, hi=BATCH_MAX)
    dropout: float = opt(0.1, "pawsx: dropout during fine-tuning (XTREME keeps the model's 0.1).", lo=0, lt=1)
    save_every: int = opt(1000, "pawsx: also write checkpoints/last every N steps within an epoch (0: only at epoch "
                                "ends).", volatile=True, lo=0, hi=STEPS_MAX)
    setting: str = opt("transfer", "pawsx: transfer (train on English, test on all) or translate-train (one model per "
                                   "language on its own rows of the training part).", choices=SETTINGS)
    pawsx_dir: Path | None = opt(None, "pawsx: folder of XTREME's PAWS-X files dev-<lang>.tsv[.gz] (default: DATA/pawsx).")
    test_fraction: float = opt(0.5, "pawsx: the rows (by a hash of the row index; rows are parallel across languages) "
                                    "held out as the test part in every language; the rest of --train-lang's dev "
                                    "rows train (90%) and select (10%).", gt=0, lt=1)
    train_lang: str = opt("en", "pawsx transfer: the language of the training rows (English, as XTREME).")
    epoch_size: int = opt(0, "pawsx: training examples per epoch (0: the whole training set).", lo=0, hi=COUNT_MAX)
    max_train_rows: int = opt(0, "pawsx: use at most this many training rows (0: all).", lo=0, hi=COUNT_MAX)
    max_eval_rows: int = opt(0, "pawsx: test at most this many rows per language (0: all of the test part).",
                             lo=0, hi=COUNT_MAX)
    max_len: int = opt(128, "pawsx: maximum subword tokens per sentence (XTREME: 128 for the pair); longer ones are "
                            "truncated.", lo=8, hi=TOKENS_MAX)
    unfreeze_projections: bool = opt(False, "pawsx: also train the language parameters of an encoding that keeps them "
                                            "frozen when fine-tuning (XLP's projections).")
    eval_batch_size: int = opt(64, "pawsx: batch size for evaluation.", volatile=True, lo=1, hi=BATCH_MAX)
    veco: str = opt("plug-out", "pawsx: VECO fine-tuning as xnli's (docs/veco.md): plug-out drops a VECO run's "
                                "cross-attention; plug-in classifies x from [h_x; s_x], s_x attending to x's translation "
                                "(translate-train only).", choices=VECO_MODES)
    plug_in_lang: str = opt("en", "pawsx --veco plug-in: the language of each example's paired translation y (for this "
                                  "language's own model: the first other test language).")
    plug_in_pairs: str = opt("translated", "pawsx --veco plug-in: translated (x machine-translated by "
                                           "--plug-in-translator, the paper's setting) or oracle (the human PAWS-X "
                                           "row of the same index: an upper bound).", choices=PAIR_SOURCES)
    plug_in_translator: Path | None = opt(None, "pawsx --veco plug-in --plug-in-pairs translated: an `xlp finetune "
                                                "--task translation` run into --plug-in-lang.")

    def validate(self) -> None:
        super().validate()
        validate_head_training(self, "pawsx")
        if not 0.0 < self.test_fraction < 1.0:
            raise BadInput(f"--test-fraction must be in (0, 1), got {self.test_fraction}")
        if self.veco == "plug-in" and self.setting == "transfer":
            raise BadInput("--veco plug-in needs every example's translation y beside x, and zero-shot transfer has "
                           "no such pairs (VECO paper, footnote 4): use --setting translate-train or --veco plug-out")
        if self.veco == "plug-in" and self.plug_in_pairs == "translated" and self.plug_in_translator is None:
            raise BadInput("--veco plug-in --plug-in-pairs translated (the default) needs --plug-in-translator RUN (an "
                           f"`xlp finetune --task translation` run into {self.plug_in_lang!r}), or --plug-in-pairs "
                           "oracle for the human PAWS-X translations (an upper bound)")


@dataclasses.dataclass
class PawsxEvalConfig(EvaluateCommon):
    split: str = opt("test", "pawsx: which split's predictions to score (test: the held-out part of every language's "
                             "dev file; dev: the selection rows).", choices=("test", "dev"))
