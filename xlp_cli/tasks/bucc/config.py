"""The config of `xlp evaluate --task bucc` (and the BUCC part of `--task xtreme`). No torch here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import BATCH_MAX, COUNT_MAX, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.common import EvaluateCommon
from xlp_cli.train.sections import Runtime


@dataclasses.dataclass
class BuccOptions(Runtime):
    """The BUCC flags (shared by --task bucc and --task xtreme)."""
    bucc_dir: Path | None = opt(None, "bucc: folder of BUCC 2018 files <xx>-en.<split>.<xx|en|gold>[.gz] (default: "
                                      "DATA/bucc2018).")
    bucc_split: str = opt("dev", "bucc: the file set to mine (XTREME calls BUCC's gold-annotated sample set 'dev'; "
                                 "BUCC's own names: sample, training).")
    margin_k: int = opt(4, "bucc: neighbours of the ratio margin (LASER and XTREME: 4).", lo=1, hi=1024)
    threshold_fraction: float = opt(0.5, "bucc: the share of source sentences (by a hash of their id) whose gold "
                                         "pairs choose the margin threshold (the training part); F1 is measured on "
                                         "the rest at that threshold.", gt=0, lt=1)
    bucc_max_sentences: int = opt(0, "bucc: mine among at most N sentences per side (0: all): every gold-paired "
                                     "sentence, then the first others (an easier task than the whole corpus).",
                                  lo=0, hi=COUNT_MAX)

    def validate_bucc(self) -> None:
        if self.margin_k < 1:
            raise BadInput(f"--margin-k must be at least 1, got {self.margin_k}")
        if not 0.0 < self.threshold_fraction < 1.0:
            raise BadInput(f"--threshold-fraction must be in (0, 1), got {self.threshold_fraction}")
        if self.bucc_max_sentences < 0:
            raise BadInput("--bucc-max-sentences must be >= 0")
        if not self.bucc_split or "/" in self.bucc_split:
            raise BadInput(f"--bucc-split {self.bucc_split!r}: a file name part (dev, sample, training)")


@dataclasses.dataclass
class BuccConfig(EvaluateCommon, BuccOptions):
    which: str = opt("best", "retrieval/bucc: which checkpoint of a pretrain run to read.", choices=("best", "last"))
    layer: int = opt(-1, "retrieval/bucc: hidden layer to mean-pool (0: the embedding output, k: after block k; "
                         "-1: the middle layer n_layers // 2, as XTREME).", lo=-1, hi=256)
    batch_size: int = opt(64, "retrieval/bucc: sentences per forward pass.", volatile=True, lo=1, hi=BATCH_MAX)

    def validate(self) -> None:
        EvaluateCommon.validate(self)
        self.validate_bucc()
        if self.layer < -1 or self.batch_size < 1:
            raise BadInput("--layer must be >= -1 and --batch-size >= 1")
