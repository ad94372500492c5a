"""The configs of the QA task: `xlp finetune --task qa` and `xlp evaluate --task qa` (same flag names)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import BATCH_MAX, COUNT_MAX, Default, STEPS_MAX, TOKENS_MAX, defaults, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.common import EvaluateCommon, FinetuneCommon

# XTREME's QA defaults (Hu et al. 2020, scripts/train_qa.sh + run_squad.py): lr 3e-5, batch 4 x 8 accumulation
# steps = 32, 3 epochs, 384 subwords with a document stride of 128, questions cut to 64, answers of 30 at most,
# the best of 20 starts x 20 ends, 500 warm-up steps, weight decay 1e-4
DEFAULT_LR = [3e-5]
DEFAULT_BATCH_SIZE = [32]
TYDIQA_EN_TRAIN = "tydiqa_goldp/train/tydiqa.goldp.en.train.json.gz"
SETS = ("xquad", "mlqa", "tydiqa")   # the test sets (tasks/qa/data.py: test_files)


@dataclasses.dataclass
@defaults(warmup=Default(500, "Linear warm-up steps, then inverse square root decay (0: a constant learning rate; "
                              "qa default 500, as XTREME)."),
          weight_decay=Default(1e-4, "Decoupled (AdamW) weight decay (qa: 1e-4, as XTREME)."))
class QaConfig(FinetuneCommon):
    epochs: int = opt(3, "Passes over the training set (qa: 3, as XTREME).", lo=0, hi=10**6)
    batch_size: list[int] = opt(factory=list, help="qa: batch sizes to search (default: 32, XTREME's 4 x 8). "
                                                   "--lr takes several values too (default 3e-5).", lo=1, hi=BATCH_MAX)
    dropout: float = opt(0.1, "qa: dropout during fine-tuning (XTREME keeps the model's 0.1).", lo=0, lt=1)
    save_every: int = opt(1000, "qa: also write checkpoints/last every N steps within an epoch (0: only at epoch ends).",
                          volatile=True, lo=0, hi=STEPS_MAX)
    qa_train: list[Path] = opt(factory=list, help="qa: SQuAD-format JSON training file(s) in --train-lang (default: "
                                                  "DATA/" + TYDIQA_EN_TRAIN + "; there is no SQuAD train in the shared "
                                                  "data). Add DATA/mlqa/dev/dev-context-en-question-en.json.gz for more "
                                                  "(MLQA English is then not tested).")
    qa_sets: list[str] = opt(factory=lambda: list(SETS), help="qa: test sets: xquad (11 languages), mlqa (dev, "
                             "context and question in the same language), tydiqa (the labelled sw and ko train files).")
    train_lang: str = opt("en", "qa: the language of the training files (English, as XTREME).")
    epoch_size: int = opt(0, "qa: training windows per epoch (0: all).", lo=0, hi=COUNT_MAX)
    max_train_questions: int = opt(0, "qa: read at most this many training questions (0: all); the held-out "
                                      "selection questions (10%, by a hash of the question id) come out of them.",
                                  lo=0, hi=COUNT_MAX)
    max_eval_questions: int = opt(0, "qa: test at most this many questions per set and language (0: all).",
                                 lo=0, hi=COUNT_MAX)
    max_seq_len: int = opt(384, "qa: subwords per input window, </s> question </s> context </s> (XTREME: 384).", lo=16,
                           hi=TOKENS_MAX)
    doc_stride: int = opt(128, "qa: a long context is read in windows that start this many subwords apart "
                               "(XTREME: 128).", lo=1, hi=TOKENS_MAX)
    max_query_len: int = opt(64, "qa: questions are cut to this many subwords (XTREME: 64).", lo=1, hi=TOKENS_MAX)
    max_answer_len: int = opt(30, "qa: longest predicted answer in subwords (XTREME: 30).", lo=1, hi=TOKENS_MAX)
    n_best: int = opt(20, "qa: the best N start and N end positions of each window are paired (XTREME: 20).", lo=1,
                      hi=TOKENS_MAX)
    unfreeze_projections: bool = opt(False, "qa: also train the language parameters of an encoding that keeps them "
                                            "frozen when fine-tuning (XLP's projections).")
    eval_batch_size: int = opt(64, "qa: batch size for evaluation.", volatile=True, lo=1, hi=BATCH_MAX)

    def validate(self) -> None:
        super().validate()
        if any(v <= 0 for v in self.batch_size):
            raise BadInput("--batch-size values must be positive")
        if not 0.0 <= self.dropout < 1.0:
            raise BadInput(f"--dropout must be in [0, 1), got {self.dropout}")
        if len(self.data) != 1:
            raise BadInput("qa fine-tuning needs exactly one --data: an `xlp pretrain` run folder")
        for s in self.qa_sets:
            if s not in SETS:
                raise BadInput(f"--qa-sets: unknown test set {s!r} (choose from {', '.join(SETS)})")
        if self.max_query_len < 1 or self.max_answer_len < 1 or self.n_best < 1:
            raise BadInput("--max-query-len, --max-answer-len and --n-best must be at least 1")
        if self.max_seq_len < self.max_query_len + 8:
            raise BadInput(f"--max-seq-len {self.max_seq_len} leaves no room for the context after a question of "
                           f"--max-query-len {self.max_query_len} (needs at least {self.max_query_len + 8})")
        if self.doc_stride < 1:
            raise BadInput("--doc-stride must be at least 1")


@dataclasses.dataclass
class QaEvalConfig(EvaluateCommon):
    qa_sets: list[str] = opt(factory=lambda: list(SETS), help="qa: the test sets to report (those the runs have).")

    def validate(self) -> None:
        super().validate()
        for s in self.qa_sets:
            if s not in SETS:
                raise BadInput(f"--qa-sets: unknown test set {s!r} (choose from {', '.join(SETS)})")
