"""The config of `xlp evaluate --task retrieval` (and the retrieval part of `--task xtreme`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import BATCH_MAX, COUNT_MAX, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.common import EvaluateCommon
from xlp_cli.train.sections import Runtime

SETS = ("tatoeba", "pud")


@dataclasses.dataclass
class RetrievalOptions(Runtime):
    """The retrieval flags (shared by --task retrieval and --task xtreme), and --device, --threads (`Runtime`)."""
    which: str = opt("best", "retrieval: which checkpoint of a pretrain run to read.", choices=("best", "last"))
    layer: int = opt(-1, "retrieval: hidden layer to mean-pool (0: the embedding output, k: after block k; "
                         "-1: the middle layer n_layers // 2, as XTREME).", lo=-1, hi=256)
    sets: list[str] = opt(factory=lambda: list(SETS), help="retrieval: tatoeba (DATA/tatoeba_laser, xx<->en) and/or "
                                                            "pud (the 1,000 parallel UD PUD sentences, xx<->en).")
    tatoeba_dir: Path | None = opt(None, "retrieval: the LASER Tatoeba folder (default: DATA/tatoeba_laser).")
    ud_dir: Path | None = opt(None, "retrieval: folder of UD treebanks, for PUD (default: DATA/ud_treebanks).")
    max_sentences: int = opt(0, "retrieval: use at most the first N pairs per language and set (0: all).", lo=0, hi=COUNT_MAX)
    batch_size: int = opt(64, "retrieval: sentences per forward pass.", volatile=True, lo=1, hi=BATCH_MAX)

    def validate_retrieval(self) -> None:
        bad = [s for s in self.sets if s not in SETS]
        if bad or not self.sets:
            raise BadInput(f"--sets: unknown set(s) {', '.join(bad) or '(none)'} (choose from {', '.join(SETS)})")
        if self.layer < -1:
            raise BadInput(f"--layer must be -1 (middle) or a layer number >= 0, got {self.layer}")
        if self.max_sentences < 0 or self.batch_size < 1:
            raise BadInput("--max-sentences must be >= 0 and --batch-size >= 1")


@dataclasses.dataclass
class RetrievalConfig(EvaluateCommon, RetrievalOptions):
    def validate(self) -> None:
        EvaluateCommon.validate(self)
        self.validate_retrieval()
