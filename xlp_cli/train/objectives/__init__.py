"""The registry of pre-training objectives (`xlp pretrain --objective NAME`), without importing torch.

A new objective is one module in this package (a subclass of `base.Objective` with a `create` classmethod) plus
one line here; the engine (`train/engine.py`) does not change. `needs` says which train folders of the id
shards it reads: "mono" (`train/<lang>`) and/or "pairs" (`train/<l1>-<l2>`). The capabilities that the data
layer (`train/data.py`) and the objectives read, so that no module compares an objective's name:
    adjacent         its pairs are neighbouring sentences of the monolingual folders (VECO section 7)
    alternates       it reads monolingual windows on even steps and pairs on odd steps (MLM and TLM)
    cross_attention  the encoder gets VECO's plug-and-play cross-attention sub-layers (`models/veco.py`)
    with_tlm         VECO's CA-MLM adds TLM's loss on the same masked pairs (VECO section 4)
`reads(step)` is the stream kind a step of the streamed objectives reads ("mono" or "pairs").
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
    alternates: bool = False
    with_tlm: bool = False

    def reads(self, step: int) -> str:
        """What update `step` reads: "mono" (windows of one language's stream) or "pairs" (the pair layout of
        parallel or adjacent sentences)."""
        if self.alternates:
            return "mono" if step % 2 == 0 else "pairs"
        return "mono" if "mono" in self.needs and not self.adjacent else "pairs"


PRETRAIN_OBJECTIVES: dict[str, ObjectiveSpec] = {
    "mlm": ObjectiveSpec("xlp_cli.train.objectives.mlm:MaskedLM", frozenset({"mono"}),
                         "masked language modelling on monolingual streams (XLM)"),
    "tlm": ObjectiveSpec("xlp_cli.train.objectives.mlm:MaskedLM", frozenset({"pairs"}),
                         "translation language modelling on parallel pairs (XLM)"),
    "mlm+tlm": ObjectiveSpec("xlp_cli.train.objectives.mlm:MaskedLM", frozenset({"mono", "pairs"}),
                             "MLM and TLM on alternating steps", alternates=True),
    "ca-mlm": ObjectiveSpec("xlp_cli.train.objectives.veco:CrossAttentionMLM", frozenset({"pairs"}),
                            "VECO cross-attention MLM on parallel pairs (Eq. 1)", cross_attention=True),
    "tlm+ca-mlm": ObjectiveSpec("xlp_cli.train.objectives.veco:CrossAttentionMLM", frozenset({"pairs"}),
                                "VECO: TLM plus CA-MLM on the same masked parallel pairs", cross_attention=True,
                                with_tlm=True),
    "mlm+ca-mlm": ObjectiveSpec("xlp_cli.train.objectives.veco:CrossAttentionMLM", frozenset({"mono"}),
                                "VECO on monolingual text: MLM and CA-MLM of adjacent sentences (section 7)",
                                cross_attention=True, adjacent=True),
    "mass": ObjectiveSpec("xlp_cli.train.objectives.mass:Mass", frozenset({"mono"}),
                          "MASS: an encoder-decoder predicts a masked span of half the sentence (Song et al.)"),
}
