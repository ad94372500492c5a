"""The registry of pre-training objectives (`xlp pretrain --objective NAME`), without importing torch.

A new objective is one module in this package (a subclass of `base.Objective` with a `create` classmethod) plus
one line here; the engine (`train/engine.py`) does not change. `needs` says which train folders of the id
shards it reads: "mono" (`train/<lang>`) and/or "pairs" (`train/<l1>-<l2>`).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ObjectiveSpec:
    cls: str                 # "module:Class"
    needs: frozenset[str]    # {"mono"}, {"pairs"} or both
    doc: str


PRETRAIN_OBJECTIVES: dict[str, ObjectiveSpec] = {
    "mlm": ObjectiveSpec("xlp_cli.train.objectives.mlm:MaskedLM", frozenset({"mono"}),
                         "masked language modelling on monolingual streams (XLM)"),
    "tlm": ObjectiveSpec("xlp_cli.train.objectives.mlm:MaskedLM", frozenset({"pairs"}),
                         "translation language modelling on parallel pairs (XLM)"),
    "mlm+tlm": ObjectiveSpec("xlp_cli.train.objectives.mlm:MaskedLM", frozenset({"mono", "pairs"}),
                             "MLM and TLM on alternating steps"),
}
