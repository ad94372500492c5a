"""The one Transformer block of xlp: self-attention, an optional cross-attention sub-layer, a feed-forward net.

    block = Block(d_model, n_heads, d_ff, dropout=0.1, attention_dropout=0.1, cross_attn=True)
    x = block(x, mask)                                   # self-attention + FFN (cross-attention unplugged)
    x = block(x, mask, memory=m, memory_mask=mm)         # + cross-attention to `memory` between the two
    x = block(x, causal, memory=m, cache=c)              # incremental decoding: keys/values kept in `c`

Every Transformer of the project is an assembly of these blocks: the XLM-style encoder (`encoder.py`), the
translation encoder and decoder (`seq2seq.py`), the interlingua layers (`interlingua.py`: cross-attention and FFN,
no self-attention) and VECO's plug-and-play cross-attention (a block called with or without `memory`).

Sub-layers are residual with LayerNorm after (post-LN, XLM and fairseq's default) or before (pre-LN). Masks are
bool, True where attention is allowed, broadcast to [B, heads, T_query, T_key]. Attention is
`F.scaled_dot_product_attention`; self-attention projects q, k, v with one Linear (`qkv`), cross-attention
projects the query from the stream (`q`) and keys/values from the memory (`kv`).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float, *, cross: bool = False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.n_heads, self.dropout, self.cross = n_heads, dropout, cross
        if cross:
            self.q = nn.Linear(d_model, d_model)
            self.kv = nn.Linear(d_model, 2 * d_model)
        else:
            self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                cache: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """x [B, T, d]; memory [B, S, d] (cross-attention). With `cache`, self-attention appends this call's
        keys/values to the cached ones; cross-attention projects the memory once and reuses it."""
        b, t, d = x.shape
        h = self.n_heads
        if self.cross:
            q = self.q(x).view(b, t, h, d // h).transpose(1, 2)
            if cache is not None and "k" in cache:
                k, v = cache["k"], cache["v"]
            else:
                assert memory is not None, "cross-attention needs a memory"
                k, v = self.kv(memory).view(b, memory.shape[1], 2, h, d // h).permute(2, 0, 3, 1, 4)
                if cache is not None:
                    cache["k"], cache["v"] = k, v
        else:
            q, k, v = self.qkv(x).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
            if cache is not None:
                if "k" in cache:
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class FeedForward(nn.Module):
    """lin2(act(lin1(x))), with dropout after the activation when `activation_dropout` > 0 (fairseq's)."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "gelu", activation_dropout: float = 0.0):
        super().__init__()
        if activation not in ("gelu", "relu"):
            raise ValueError(f"unknown activation {activation!r}")
        self.lin1 = nn.Linear(d_model, d_ff)
        self.lin2 = nn.Linear(d_ff, d_model)
        self.act: Callable[[torch.Tensor], torch.Tensor] = F.gelu if activation == "gelu" else F.relu
        self.activation_dropout = activation_dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.lin1(x))
        if self.activation_dropout:
            h = F.dropout(h, self.activation_dropout, self.training)
        return self.lin2(h)


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, dropout: float, attention_dropout: float,
                 activation: str = "gelu", activation_dropout: float = 0.0, pre_ln: bool = False,
                 ln_eps: float = 1e-12, self_attn: bool = True, cross_attn: bool = False):
        super().__init__()
        self.attn = Attention(d_model, n_heads, attention_dropout) if self_attn else None
        self.ln_attn = nn.LayerNorm(d_model, eps=ln_eps) if self_attn else None
        self.cross = Attention(d_model, n_heads, attention_dropout, cross=True) if cross_attn else None
        self.ln_cross = nn.LayerNorm(d_model, eps=ln_eps) if cross_attn else None
        self.ffn = FeedForward(d_model, d_ff, activation, activation_dropout)
        self.ln_ffn = nn.LayerNorm(d_model, eps=ln_eps)
        self.drop = nn.Dropout(dropout)
        self.pre_ln = pre_ln

    def _sub(self, x: torch.Tensor, norm: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.pre_ln:
            return x + self.drop(fn(norm(x)))
        return norm(x + self.drop(fn(x)))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, memory: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, cache: dict[str, dict] | None = None) -> torch.Tensor:
        """The cross-attention sub-layer runs only when the block has one and `memory` is given."""
        if self.attn is not None:
            c = None if cache is None else cache.setdefault("self", {})
            x = self._sub(x, self.ln_attn, lambda h: self.attn(h, mask=mask, cache=c))
        if self.cross is not None and (memory is not None or (cache is not None and "cross" in cache)):
            c = None if cache is None else cache.setdefault("cross", {})
            x = self._sub(x, self.ln_cross, lambda h: self.cross(h, memory, memory_mask, c))
        return self._sub(x, self.ln_ffn, self.ffn)


def reorder_cache(cache: list[dict], order: torch.Tensor) -> None:
    """Beam search: keep the rows of every cached key/value named by `order` (in place)."""
    for layer in cache:
        for part in layer.values():
            for name in ("k", "v"):
                if name in part:
                    part[name] = part[name].index_select(0, order)
