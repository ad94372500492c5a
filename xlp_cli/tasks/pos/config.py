"""The configs of the POS task: `xlp finetune --task pos` and `xlp evaluate --task pos` (same flag names)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import BATCH_MAX, COUNT_MAX, Default, STEPS_MAX, TOKENS_MAX, defaults, opt
from xlp_cli.tasks.common import EvaluateCommon, FinetuneCommon, validate_head_training

# XTREME's UD-POS defaults (Hu et al. 2020, their run_tag.py): lr 2e-5, batch size 32, 128 subwords
DEFAULT_LR = [2e-5]
DEFAULT_BATCH_SIZE = [32]
EWT_DEV = "ud_treebanks/UD_English-EWT/en_ewt-ud-dev.conllu.gz"


@dataclasses.dataclass
@defaults(warmup=Default(0, "Linear warm-up steps, then inverse square root decay (0: a constant learning rate; "
                            "pos default, XTREME has no warm-up)."))
class PosConfig(FinetuneCommon):
    epochs: int = opt(10, "Passes over the training set (pos: 10, as XTREME).", lo=0, hi=10**6)
    batch_size: list[int] = opt(factory=list, help="pos: batch sizes to search (default: 32, as XTREME). "
                                                   "--lr takes several values too (default 2e-5).", lo=1, hi=BATCH_MAX)
    dropout: float = opt(0.1, "pos: dropout during fine-tuning (XTREME keeps the model's 0.1).", lo=0, lt=1)
    save_every: int = opt(1000, "pos: also write checkpoints/last every N steps within an epoch (0: only at epoch ends).",
                          volatile=True, lo=0, hi=STEPS_MAX)
    ud_dir: Path | None = opt(None, "pos: folder of UD treebanks, one sub-folder each (default: DATA/ud_treebanks); "
                                    "every *-ud-test file is a test set of its language.")
    ud_train: Path | None = opt(None, "pos: CoNLL-U training file in --train-lang (default: English EWT dev, "
                                      "DATA/" + EWT_DEV + ": the shared copy of EWT has no train file).")
    ud_dev: Path | None = opt(None, "pos: CoNLL-U file that selects the checkpoint (default: 10% of the --ud-train "
                                    "sentences, held out by a hash of the sentence id).")
    train_lang: str = opt("en", "pos: the language of the training file (English, as XTREME).")
    epoch_size: int = opt(0, "pos: training sentences per epoch (0: all).", lo=0, hi=COUNT_MAX)
    max_train_sentences: int = opt(0, "pos: read at most this many --ud-train sentences (0: all); the held-out "
                                      "selection sentences come out of them.", lo=0, hi=COUNT_MAX)
    max_eval_sentences: int = opt(0, "pos: test at most this many sentences per language (0: all).", lo=0, hi=COUNT_MAX)
    max_len: int = opt(128, "pos: maximum subwords per sentence including </s> markers (XTREME: 128); words "
                            "past it are not tagged and count as errors.", lo=8, hi=TOKENS_MAX)
    unfreeze_projections: bool = opt(False, "pos: also train the language parameters of an encoding that keeps them "
                                            "frozen when fine-tuning (XLP's projections).")
    eval_batch_size: int = opt(64, "pos: batch size for evaluation.", volatile=True, lo=1, hi=BATCH_MAX)

    def validate(self) -> None:
        super().validate()
        validate_head_training(self, "pos")


@dataclasses.dataclass
class PosEvalConfig(EvaluateCommon):
    split: str = opt("test", "pos: which split's predictions to score (dev: the English selection set).",
                     choices=("test", "dev"))
