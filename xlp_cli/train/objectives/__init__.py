"""The registry of pre-training objectives (`xlp pretrain --objective NAME`), without importing torch.

A new objective is one module in this package (a subclass of `base.Objective` with a `create` classmethod) plus
one line here; the engine (`train/engine.py`) does not change. `needs` says which train folders of the id
shards it reads: "mono" (`train/<lang>`) and/or "pairs" (`train/<l1>-<l2>`). `adjacent`: its pairs are
neighbouring sentences of the monolingual folders (VECO section 7). `cross_attention`: the encoder gets VECO's
plug-and-play cross-attention sub-layers (`models/veco.py`).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ObjectiveSpec:
    cls: str                 # "module:Class"
    needs: frozenset[str]    # {"mono"}, {"pairs"} or both
    doc: str
    cross_attention: bool = False
    adjacent: bool = False


PRETRAIN_OBJECTIVES: dict[str, ObjectiveSpec] = {
    "mlm": ObjectiveSpec("xlp_cli.train.objectives.mlm:MaskedLM", frozenset({"mono"}),
                         "masked language modelling on monolingual streams (XLM)"),
    "tlm": ObjectiveSpec("xlp_cli.train.objectives.mlm:MaskedLM", frozenset({"pairs"}),
                         "translation language modelling on parallel pairs (XLM)"),
    "mlm+tlm": ObjectiveSpec("xlp_cli.train.objectives.mlm:MaskedLM", frozenset({"mono", "pairs"}),
                             "MLM and TLM on alternating steps"),
    "ca-mlm": ObjectiveSpec("xlp_cli.train.objectives.veco:CrossAttentionMLM", frozenset({"pairs"}),
                            "VECO cross-attention MLM on parallel pairs (Eq. 1)", cross_attention=True),
    "tlm+ca-mlm": ObjectiveSpec("xlp_cli.train.objectives.veco:CrossAttentionMLM", frozenset({"pairs"}),
                                "VECO: TLM plus CA-MLM on the same masked parallel pairs", cross_attention=True),
    "mlm+ca-mlm": ObjectiveSpec("xlp_cli.train.objectives.veco:CrossAttentionMLM", frozenset({"mono"}),
                                "VECO on monolingual text: MLM and CA-MLM of adjacent sentences (section 7)",
                                cross_attention=True, adjacent=True),
    "mass": ObjectiveSpec("xlp_cli.train.objectives.mass:Mass", frozenset({"mono"}),
                          "MASS: an encoder-decoder predicts a masked span of half the sentence (Song et al.)"),
}
