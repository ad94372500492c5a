"""The configs of the NER task: `xlp finetune --task ner` and `xlp evaluate --task ner` (same flag names)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import BATCH_MAX, COUNT_MAX, Default, STEPS_MAX, TOKENS_MAX, defaults, opt
from xlp_cli.tasks.common import EvaluateCommon, FinetuneCommon, validate_head_training

# XTREME's PAN-X defaults (Hu et al. 2020, their run_tag.py): lr 2e-5, batch size 32, 128 subwords, 10 epochs
DEFAULT_LR = [2e-5]
DEFAULT_BATCH_SIZE = [32]


@dataclasses.dataclass
@defaults(warmup=Default(0, "Linear warm-up steps, then inverse square root decay (0: a constant learning rate; "
                            "ner default, XTREME has no warm-up)."))
class NerConfig(FinetuneCommon):
    epochs: int = opt(10, "Passes over the training set (ner: 10, as XTREME).", lo=0, hi=10**6)
    batch_size: list[int] = opt(factory=list, help="ner: batch sizes to search (default: 32, as XTREME). "
                                                   "--lr takes several values too (default 2e-5).", lo=1, hi=BATCH_MAX)
    dropout: float = opt(0.1, "ner: dropout during fine-tuning (XTREME keeps the model's 0.1).", lo=0, lt=1)
    save_every: int = opt(1000, "ner: also write checkpoints/last every N steps within an epoch (0: only at epoch ends).",
                          volatile=True, lo=0, hi=STEPS_MAX)
    panx_dir: Path | None = opt(None, "ner: the PAN-X folder (default: DATA/panx): XTREME's released files "
                                      "<lang>-<split> (lines `lang:token<TAB>TAG`) or their processed "
                                      "<split>-<lang>.tsv (docs/evaluate.md says where to get them).")
    train_lang: str = opt("en", "ner: the language of the training file (English, as XTREME).")
    epoch_size: int = opt(0, "ner: training sentences per epoch (0: all).", lo=0, hi=COUNT_MAX)
    max_train_sentences: int = opt(0, "ner: read at most this many training sentences (0: all).", lo=0, hi=COUNT_MAX)
    max_eval_sentences: int = opt(0, "ner: select on / test at most this many sentences per language (0: all).",
                                  lo=0, hi=COUNT_MAX)
    max_len: int = opt(128, "ner: maximum subwords per sentence including </s> markers (XTREME: 128); words "
                            "past it are tagged O.", lo=8, hi=TOKENS_MAX)
    unfreeze_projections: bool = opt(False, "ner: also train the language parameters of an encoding that keeps them "
                                            "frozen when fine-tuning (XLP's projections).")
    eval_batch_size: int = opt(64, "ner: batch size for evaluation.", volatile=True, lo=1, hi=BATCH_MAX)

    def validate(self) -> None:
        super().validate()
        validate_head_training(self, "ner")


@dataclasses.dataclass
class NerEvalConfig(EvaluateCommon):
    split: str = opt("test", "ner: which split's predictions to score (dev: the English selection set).",
                     choices=("test", "dev"))
