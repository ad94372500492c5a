"""Build a translation model from its config: the plain encoder-decoder or the interlingua one.

Kept apart from `seq2seq.py` and `interlingua.py` so that neither imports the other's user (the interlingua
model extends `Seq2Seq`; this module is the only place that knows both).
"""

from __future__ import annotations

from torch import nn

from xlp_cli.models.interlingua import InterlinguaSeq2Seq
from xlp_cli.models.seq2seq import Seq2Seq, Seq2SeqConfig


def build_seq2seq(cfg: Seq2SeqConfig, pretrained_encoder: nn.Module | None = None,
                  vocab_ids: list[list[int]] | None = None) -> Seq2Seq:
    """`vocab_ids`: the top-K ids per language of an encoding built from `xlp vocab-score` (VLE)."""
    if cfg.arch == "interlingua":
        return InterlinguaSeq2Seq(cfg, vocab_ids)
    return Seq2Seq(cfg, pretrained_encoder, vocab_ids)
