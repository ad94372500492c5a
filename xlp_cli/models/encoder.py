"""An XLM-style Transformer encoder with a switchable language encoding and an MLM head.

    cfg = ModelConfig.from_preset("tiny", vocab_size=len(dico), langs=["en", "fr"], lang_encoding="xlp")
    model = TransformerEncoder(cfg)
    hidden = model(ids, langs)                 # [B, prefix_len + T, d]; langs [B] or [B, T] (language indices)
    tokens = model.token_states(hidden)        # [B, T, d] (prefix slots dropped)
    pooled = model.pooled(hidden)              # [B, d]   first position (XLM's sentence representation)
    logits = model.mlm_logits(tokens[mask])    # [N, V]   tied output embedding + bias (XLM's PredLayer)

Architecture (XLM's TransformerModel): word embeddings -> language encoding hook `on_words` -> + learned
positions -> `on_positions` -> LayerNorm -> dropout -> n_layers x (self-attention, FFN with GELU), post-LN by
default (`pre_ln=True` for pre-LN, which adds a final LayerNorm). Attention uses
torch.nn.functional.scaled_dot_product_attention. Embeddings ~ N(0, d^-1/2), the <pad> row zero.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from xlp_cli.models.encodings import (build_encoding, expand_langs, extend_langs, extend_pad_mask,
                                      extend_positions)

# XLM dictionary layout: <s>=0 </s>=1 <pad>=2 <unk>=3 <special0..9>=4..13; MASK is <special1>.
BOS_INDEX, EOS_INDEX, PAD_INDEX, UNK_INDEX, MASK_INDEX, N_SPECIAL = 0, 1, 2, 3, 5, 14

PRESETS: dict[str, dict[str, Any]] = {
    # fits the test suite
    "tiny": dict(n_layers=2, d_model=32, n_heads=2, d_ff=64, n_positions=272),
    # a CPU experiment in under 30 minutes (docs/pretrain.md)
    "small": dict(n_layers=4, d_model=256, n_heads=4, d_ff=1024, n_positions=520),
    # XLM15 / XLP paper Table 6
    "xlm15": dict(n_layers=12, d_model=1024, n_heads=8, d_ff=4096, n_positions=520),
}


@dataclass
class ModelConfig:
    vocab_size: int
    langs: list[str] = field(default_factory=list)
    lang_encoding: str = "additive"
    n_layers: int = 2
    d_model: int = 32
    n_heads: int = 2
    d_ff: int = 64
    n_positions: int = 520
    dropout: float = 0.1
    attention_dropout: float = 0.1
    pre_ln: bool = False
    xlp_bias: bool = True
    vle_style: str = "adding"
    vle_sizes: list[int] | None = None
    pad_index: int = PAD_INDEX
    preset: str | None = None

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> "ModelConfig":
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r} (choose from {', '.join(PRESETS)})")
        values = dict(PRESETS[name])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(preset=name, **values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @property
    def n_langs(self) -> int:
        return max(1, len(self.langs))


class SelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.lin1 = nn.Linear(d_model, d_ff)
        self.lin2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin2(F.gelu(self.lin1(x)))


class TransformerLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, attention_dropout: float,
                 pre_ln: bool):
        super().__init__()
        self.attn = SelfAttention(d_model, n_heads, attention_dropout)
        self.ln_attn = nn.LayerNorm(d_model, eps=1e-12)
        self.ffn = FeedForward(d_model, d_ff)
        self.ln_ffn = nn.LayerNorm(d_model, eps=1e-12)
        self.drop = nn.Dropout(dropout)
        self.pre_ln = pre_ln

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.drop(self.attn(self.ln_attn(x), attn_mask))
            return x + self.drop(self.ffn(self.ln_ffn(x)))
        x = self.ln_attn(x + self.drop(self.attn(x, attn_mask)))
        return self.ln_ffn(x + self.drop(self.ffn(x)))


class TransformerEncoder(nn.Module):
    def __init__(self, cfg: ModelConfig, vle_vocab: list[list[int]] | None = None):
        super().__init__()
        self.config = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d, padding_idx=cfg.pad_index)
        self.pos_embed = nn.Embedding(cfg.n_positions, d)
        for emb in (self.embed, self.pos_embed):
            nn.init.normal_(emb.weight, mean=0.0, std=d ** -0.5)
        with torch.no_grad():
            self.embed.weight[cfg.pad_index].zero_()
        self.lang_encoding = build_encoding(cfg.lang_encoding, d, cfg.n_langs, xlp_bias=cfg.xlp_bias,
                                            vle_style=cfg.vle_style, vle_vocab=vle_vocab, vle_sizes=cfg.vle_sizes)
        if cfg.lang_encoding == "vle" and cfg.vle_sizes is None:
            cfg.vle_sizes = list(self.lang_encoding.sizes)  # type: ignore[attr-defined]
        self.ln_emb = nn.LayerNorm(d, eps=1e-12)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(
            TransformerLayer(d, cfg.n_heads, cfg.d_ff, cfg.dropout, cfg.attention_dropout, cfg.pre_ln)
            for _ in range(cfg.n_layers))
        self.ln_final = nn.LayerNorm(d, eps=1e-12) if cfg.pre_ln else nn.Identity()
        self.pred_bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    @property
    def prefix_len(self) -> int:
        return self.lang_encoding.prefix_len

    def forward(self, ids: torch.Tensor, langs: torch.Tensor, positions: torch.Tensor | None = None,
                pad_mask: torch.Tensor | None = None, pred_mask: torch.Tensor | None = None) -> torch.Tensor:
        """ids [B, T]; langs [B] or [B, T]; positions [B, T] (default 0..T-1); pad_mask [B, T] True at padding.

        Returns hidden states [B, prefix_len + T, d]; with `pred_mask` [B, T] bool, the MLM logits [N, V] of
        the N masked positions instead (so DDP / torch.compile see the head inside forward).
        """
        b, t = ids.shape
        langs = expand_langs(langs, t)
        if positions is None:
            positions = torch.arange(t, device=ids.device)[None].expand(b, -1)
        p = self.prefix_len
        x = self.lang_encoding.on_words(self.embed(ids), langs, self.embed)
        positions, langs = extend_positions(positions, p), extend_langs(langs, p)
        pad_mask = extend_pad_mask(pad_mask, p)
        if positions.shape[1] and int(positions.max()) >= self.config.n_positions:
            raise ValueError(f"position {int(positions.max())} >= n_positions {self.config.n_positions}")
        x = x + self.pos_embed(positions).to(x.dtype)
        x = self.lang_encoding.on_positions(x, langs)
        x = self.drop(self.ln_emb(x))
        attn_mask = None
        if pad_mask is not None:
            attn_mask = ~pad_mask[:, None, None, :]
            x = x.masked_fill(pad_mask[..., None], 0.0)
        for layer in self.layers:
            x = layer(x, attn_mask)
            if pad_mask is not None:
                x = x.masked_fill(pad_mask[..., None], 0.0)
        x = self.ln_final(x)
        if pred_mask is not None:
            return self.mlm_logits(self.token_states(x)[pred_mask])
        return x

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
