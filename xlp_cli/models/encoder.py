"""An XLM-style Transformer encoder with a switchable language encoding and an MLM head.

    cfg = ModelConfig.from_preset("tiny", vocab_size=len(dico), langs=["en", "fr"], lang_encoding="xlp")
    model = TransformerEncoder(cfg)
    hidden = model(ids, langs)                 # [B, prefix_len + T, d]; langs [B] or [B, T] (language indices)
    tokens = model.token_states(hidden)        # [B, T, d] (prefix slots dropped)
    pooled = model.pooled(hidden)              # [B, d]   first position (XLM's sentence representation)
    logits = model.mlm_logits(tokens[mask])    # [N, V]   tied output embedding + bias (XLM's PredLayer)

Architecture (XLM's TransformerModel): word embeddings -> language encoding hook `on_words` -> + learned
positions -> `on_positions` -> LayerNorm -> dropout -> n_layers x `blocks.Block` (self-attention, FFN with GELU),
post-LN by default (`pre_ln=True` for pre-LN, which adds a final LayerNorm). Embeddings ~ N(0, d^-1/2), the
<pad> row zero. The encoding's own options live in `encoding_options` (see `encoding_registry.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from xlp_cli.artifacts import special_ids
from xlp_cli.core.config import opt
from xlp_cli.models.blocks import Block
from xlp_cli.models.encoding_registry import ENCODINGS
from xlp_cli.models.encodings import build_encoding, expand_langs, extend_langs, extend_pad_mask, extend_positions
from xlp_cli.models.presets import ENCODER_PRESETS as PRESETS, PresetConfig


@dataclass
class ModelConfig(PresetConfig):
    vocab_size: int
    langs: list[str] = field(default_factory=list)
    lang_encoding: str = "additive"  # a bare config is XLM's model; stages pass theirs (DEFAULT_ENCODING: xlp)
    encoding_options: dict[str, Any] = field(default_factory=dict)
    # the shape's valid ranges, checked where a model config is read (model.json, an HF config.json, a preset)
    n_layers: int = opt(2, lo=1, hi=256)
    d_model: int = opt(32, lo=1, hi=1 << 16)
    n_heads: int = opt(2, lo=1, hi=1024, divides="d_model")
    d_ff: int = opt(64, lo=1, hi=1 << 18)
    n_positions: int = opt(520, lo=1, hi=1 << 17)
    dropout: float = opt(0.1, lo=0, lt=1)
    attention_dropout: float = opt(0.1, lo=0, lt=1)
    pre_ln: bool = False
    cross_attention: bool = False   # VECO: a plug-and-play cross-attention sub-layer in every layer (veco.py)
    pad_index: int = special_ids.PAD
    preset: str | None = None

    PRESETS, PRESET_FIELD = PRESETS, "preset"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelConfig":
        """From `to_dict()` output; also reads model.json files of xlp 0.1, whose encoding options were
        top-level keys (xlp_bias, vle_style, vle_sizes)."""
        if "encoding_options" not in d and d.get("lang_encoding") in ENCODINGS:
            s = ENCODINGS[d["lang_encoding"]]
            d = {**d, "encoding_options": {k: d[k] for k in (*s.option_names(), *s.state_keys) if d.get(k) is not None}}
        return super().from_dict(d)

    @property
    def n_langs(self) -> int:
        return max(1, len(self.langs))


class TransformerEncoder(nn.Module):
    KIND = "encoder"  # the checkpoint's model kind (models/checkpoint.py)

    def __init__(self, cfg: ModelConfig, vocab_ids: list[list[int]] | None = None):
        super().__init__()
        self.config = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d, padding_idx=cfg.pad_index)
        self.pos_embed = nn.Embedding(cfg.n_positions, d)
        for emb in (self.embed, self.pos_embed):
            nn.init.normal_(emb.weight, mean=0.0, std=d ** -0.5)
        with torch.no_grad():
            self.embed.weight[cfg.pad_index].zero_()
        self.lang_encoding = build_encoding(cfg.lang_encoding, d, cfg.n_langs, cfg.encoding_options, vocab_ids)
        cfg.encoding_options = {**cfg.encoding_options, **self.lang_encoding.config_state()}
        self.ln_emb = nn.LayerNorm(d, eps=1e-12)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(
            Block(d, cfg.n_heads, cfg.d_ff, dropout=cfg.dropout, attention_dropout=cfg.attention_dropout,
                  pre_ln=cfg.pre_ln, cross_attn=cfg.cross_attention) for _ in range(cfg.n_layers))
        self.ln_final = nn.LayerNorm(d, eps=1e-12) if cfg.pre_ln else nn.Identity()
        self.pred_bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    @property
    def prefix_len(self) -> int:
        return self.lang_encoding.prefix_len

    def forward(self, ids: torch.Tensor, langs: torch.Tensor, positions: torch.Tensor | None = None,
                pad_mask: torch.Tensor | None = None, pred_mask: torch.Tensor | None = None,
                memory: torch.Tensor | None = None, memory_pad_mask: torch.Tensor | None = None,
                upto: int | None = None, present: Sequence[int] | None = None) -> torch.Tensor:
        """ids [B, T]; langs [B] or [B, T]; positions [B, T] (default 0..T-1); pad_mask [B, T] True at padding.

        Returns hidden states [B, prefix_len + T, d]; with `pred_mask` [B, T] bool, the MLM logits [N, V] of
        the N masked positions instead (so DDP / torch.compile see the head inside forward); with `pred_mask` a
        long tensor [P] of flat positions in [0, B*T) (`train/masking.prediction_slots`), the logits [P, V] of
        those: a shape fixed per batch size, with no host sync (the training step's form).
        `present`: the language indices that occur in `langs`, when the caller knows them on the host (the
        input pipeline does); the XLP and VLE encodings then never ask the GPU which languages a batch holds.
        With `memory` [B, S, d] (a model with `cross_attention`), every layer also attends to it (VECO's s
        stream; `memory_pad_mask` [B, S - prefix_len] True at padding); without it the cross-attention is
        unplugged and the model is exactly the plain encoder.
        `upto` = k returns the states after the first k layers (0: the embedding output; sentence retrieval
        reads a middle layer); the final LayerNorm of pre-LN models belongs to the last layer's output only.
        """
        b, t = ids.shape
        langs = expand_langs(langs, t)
        if positions is None:
            positions = torch.arange(t, device=ids.device)[None].expand(b, -1)
        p = self.prefix_len
        x = self.lang_encoding.on_words(self.embed(ids), langs, self.embed, present)
        positions, langs = extend_positions(positions, p), extend_langs(langs, p)
        pad_mask = extend_pad_mask(pad_mask, p)
        if positions.shape[1] > self.config.n_positions:  # (from the shape: reading a position would be a host sync)
            raise ValueError(f"{positions.shape[1]} positions > n_positions {self.config.n_positions}")
        x = x + self.pos_embed(positions).to(x.dtype)
        x = self.lang_encoding.on_positions(x, langs)
        x = self.drop(self.ln_emb(x))
        attn_mask = None
        if pad_mask is not None:
            attn_mask = ~pad_mask[:, None, None, :]
            x = x.masked_fill(pad_mask[..., None], 0.0)
        memory_mask = None
        if memory is not None:
            if not self.config.cross_attention:
                raise ValueError("this encoder has no cross-attention (ModelConfig.cross_attention is False)")
            memory_pad_mask = extend_pad_mask(memory_pad_mask, p)
            memory_mask = None if memory_pad_mask is None else ~memory_pad_mask[:, None, None, :]
        n = len(self.layers) if upto is None else upto
        for layer in self.layers[:n]:
            x = layer(x, attn_mask, memory=memory, memory_mask=memory_mask)
            if pad_mask is not None:
                x = x.masked_fill(pad_mask[..., None], 0.0)
        if n == len(self.layers):
            x = self.ln_final(x)
        if pred_mask is None:
            return x
        states = self.token_states(x)
        if pred_mask.dtype == torch.bool:
            return self.mlm_logits(states[pred_mask])
        return self.mlm_logits(states.reshape(-1, states.shape[-1]).index_select(0, pred_mask))

    def token_states(self, hidden: torch.Tensor) -> torch.Tensor:
        """The hidden states of the input tokens (prefix slots of attaching / vle-padding dropped)."""
        return hidden[:, self.prefix_len:]

    def pooled(self, hidden: torch.Tensor) -> torch.Tensor:
        """First position: XLM's sentence representation for classifiers."""
        return hidden[:, 0]

    def mlm_logits(self, states: torch.Tensor) -> torch.Tensor:
        """[..., d] -> [..., V] through the tied input embedding plus a bias."""
        return F.linear(states, self.embed.weight.to(states.dtype), self.pred_bias.to(states.dtype))

    def mlm_loss(self, ids: torch.Tensor, langs: torch.Tensor, targets: torch.Tensor, pred_mask: torch.Tensor,
                 positions: torch.Tensor | None = None, pad_mask: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean cross-entropy over the masked positions, and the logits there ([N, V])."""
        logits = self(ids, langs, positions, pad_mask, pred_mask)
        loss = F.cross_entropy(logits.float(), targets[pred_mask])
        return loss, logits

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
