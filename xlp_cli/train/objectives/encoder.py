"""The encoder a pre-training run trains, from the flags of `xlp pretrain`: the preset and its size overrides, the
language encoding and its options, and the cross-attention sub-layers that the objective's registry line asks
for. The stage (`train/pretrain.py`) builds it, and so does an objective that builds its own model around it
(MASS: an encoder-decoder of the encoder's shape).
"""

from __future__ import annotations

from xlp_cli.models.encoder import ModelConfig
from xlp_cli.models.encoding_registry import spec as encoding_spec
from xlp_cli.train.config import PretrainConfig
from xlp_cli.train.objectives import PRETRAIN_OBJECTIVES


def model_config(cfg: PretrainConfig, vocab_size: int, langs: list[str]) -> ModelConfig:
    overrides = {k: getattr(cfg, k) or None for k in ("n_layers", "d_model", "n_heads", "d_ff")}
    options = encoding_spec(cfg.lang_encoding).options_from(cfg)
    return ModelConfig.from_preset(cfg.preset, vocab_size=vocab_size, langs=langs, lang_encoding=cfg.lang_encoding,
                                   encoding_options=options, pre_ln=cfg.pre_ln, dropout=cfg.dropout,
                                   attention_dropout=cfg.attention_dropout, n_positions=max(512, cfg.bptt) + 8,
                                   cross_attention=PRETRAIN_OBJECTIVES[cfg.objective].cross_attention, **overrides)
