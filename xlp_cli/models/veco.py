"""VECO (Luo et al., 2021): the two streams of an encoder with plug-and-play cross-attention, plugging it out, and
initialising an encoder-decoder from it.

    pair = stack_pair(x, y)                    # x, y: Side(ids, langs, positions, pad_mask); one [2B, T] batch
    h, s = streams(model, pair)                # h: self-attention only; s: + cross-attention to the other side's h^L
    plain = plug_out(model)                    # the same weights without the cross-attention sub-layers
    mapping = init_decoder(seq2seq, model)     # decoder self-/cross-attention and FFN from a VECO encoder

The encoder (`encoder.TransformerEncoder` with `cross_attention=True`) has in every layer a cross-attention
sub-layer (`blocks.Block(cross_attn=True)`) that runs only when `memory` is passed. VECO Eq. 2-9:
    h^l = Block_l(h^{l-1})                              (self-attention, FFN)
    s^l = Block_l(s^{l-1}, memory = sg(h^L_other))      (self-attention, cross-attention, FFN)
with h^0 = s^0 the embeddings of the side itself and sg the stop-gradient (VECO section 2.2: h^L is a constant
in the s-terms, so no gradient crosses into the other side's h stream; that keeps the backward pass L layers deep).
x and y run as one batch of 2B rows, padded to the longer side; row i attends to row i+B and vice versa.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.nn as nn

from xlp_cli.artifacts.special_ids import PAD
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder


@dataclasses.dataclass
class Side:
    """One side of a pair batch; pad_mask True at padding."""
    ids: torch.Tensor                 # [B, T]
    langs: torch.Tensor               # [B, T]
    positions: torch.Tensor | None    # [B, T] or None (0..T-1)
    pad_mask: torch.Tensor            # [B, T]
    present: tuple[int, ...] | None = None  # the language indices in `langs`, when the host knows them


def _pad_to(t: torch.Tensor, length: int, value: Any) -> torch.Tensor:
    if t.shape[1] == length:
        return t
    fill = t.new_full((t.shape[0], length - t.shape[1], *t.shape[2:]), value)
    return torch.cat([t, fill], dim=1)


def stack_pair(x: Side, y: Side) -> Side:
    """[x; y] as one Side of 2B rows, both padded to the longer length."""
    t = max(x.ids.shape[1], y.ids.shape[1])
    pos = None
    if x.positions is not None or y.positions is not None:
        def p(s: Side) -> torch.Tensor:
            return s.positions if s.positions is not None else torch.arange(s.ids.shape[1])[None].expand_as(s.ids)
        pos = torch.cat([_pad_to(p(x), t, 0), _pad_to(p(y), t, 0)])
    return Side(torch.cat([_pad_to(x.ids, t, PAD), _pad_to(y.ids, t, PAD)]),
                torch.cat([_pad_to(x.langs, t, 0), _pad_to(y.langs, t, 0)]), pos,
                torch.cat([_pad_to(x.pad_mask, t, True), _pad_to(y.pad_mask, t, True)]))


def swap_halves(t: torch.Tensor) -> torch.Tensor:
    """Rows [a; b] -> [b; a]: each side's partner."""
    b = t.shape[0] // 2
    return torch.cat([t[b:], t[:b]])


def streams(model: nn.Module, pair: Side, *, stop_gradient: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, s) hidden states [2B, prefix + T, d] of a stacked pair (`stack_pair`): h with the cross-attention
    unplugged, s with every layer attending to the partner row's h^L (a constant when `stop_gradient`)."""
    h = model(pair.ids, pair.langs, pair.positions, pair.pad_mask, present=pair.present)
    memory = swap_halves(h)
    if stop_gradient:
        memory = memory.detach()
    s = model(pair.ids, pair.langs, pair.positions, pair.pad_mask, memory=memory,
              memory_pad_mask=swap_halves(pair.pad_mask), present=pair.present)
    return h, s


def is_veco(model: nn.Module) -> bool:
    return bool(getattr(getattr(model, "config", None), "cross_attention", False))


def _plain_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in state.items() if ".cross." not in k and ".ln_cross." not in k}


def plug_out(model: nn.Module) -> nn.Module:
    """The plain encoder with a VECO encoder's weights, its cross-attention sub-layers removed (plug-out
    fine-tuning, VECO 3.1); any other encoder is returned as it is."""
    if not is_veco(model):
        return model

    plain = TransformerEncoder(ModelConfig.from_dict({**model.config.to_dict(), "cross_attention": False}))
    plain.load_state_dict(_plain_state(model.state_dict()), strict=True)
    return plain.to(next(model.parameters()).device).train(model.training)


# ---------------------------------------------------------------- encoder-decoder initialisation (VECO 3.2)
def decoder_sources(n_enc: int, n_dec: int) -> list[int]:
    """Which encoder layer initialises each decoder layer: the last `n_dec` (VECO Table 4: last-n beats first-n)."""
    if n_dec > n_enc:
        raise ValueError(f"a decoder of {n_dec} layers cannot start from a {n_enc}-layer VECO encoder")
    return list(range(n_enc - n_dec, n_enc))


def tie_self_attention(decoder: nn.ModuleList, encoder_layers: nn.ModuleList) -> None:
    """Share each decoder layer's self-attention (and its LayerNorm) with its source encoder layer."""
    for i, j in enumerate(decoder_sources(len(encoder_layers), len(decoder))):
        decoder[i].attn = encoder_layers[j].attn
        decoder[i].ln_attn = encoder_layers[j].ln_attn


def init_decoder(seq2seq: nn.Module, veco: nn.Module, tied: bool) -> list[dict[str, Any]]:
    """Copy a VECO encoder's weights into the decoder side of `seq2seq` (built with `decoder_layout="encoder"`):
    decoder layer i <- encoder layer j (self-attention, cross-attention -> encoder-decoder attention, FFN, their
    LayerNorms); the decoder's learned positions, embedding LayerNorm and target-language encoding <- the
    encoder's. Returns one entry per module: {"module", "from", "how" ("copied" | "tied"), "tensors"}."""
    done: list[dict[str, Any]] = []
    src = dict(veco.named_parameters())

    def copy(dst_mod: nn.Module, dst: str, src_prefix: str, how: str = "copied") -> None:
        names = []
        for name, p in dst_mod.named_parameters():
            s = src[f"{src_prefix}.{name}"]
            if how == "copied":
                with torch.no_grad():
                    rows = min(p.shape[0], s.shape[0])  # positions: the decoder may have fewer
                    p[:rows].copy_(s[:rows])
            names.append(name)
        done.append({"module": dst, "from": src_prefix, "how": how, "tensors": names})

    for i, j in enumerate(decoder_sources(len(veco.layers), len(seq2seq.decoder))):
        layer = seq2seq.decoder[i]
        for part in ("attn", "ln_attn"):
            copy(getattr(layer, part), f"decoder.{i}.{part}", f"layers.{j}.{part}", "tied" if tied else "copied")
        for part in ("cross", "ln_cross", "ffn", "ln_ffn"):
            copy(getattr(layer, part), f"decoder.{i}.{part}", f"layers.{j}.{part}")
    copy(seq2seq.pos_embed, "pos_embed", "pos_embed")
    copy(seq2seq.emb_norm, "emb_norm", "ln_emb")
    if seq2seq.dec_norm is not None and isinstance(veco.ln_final, nn.LayerNorm):
        copy(seq2seq.dec_norm, "dec_norm", "ln_final")
    own = dict(seq2seq.tgt_encoding.named_parameters())
    theirs = dict(veco.lang_encoding.named_parameters())
    if own and own.keys() == theirs.keys() and all(own[k].shape == theirs[k].shape for k in own):
        copy(seq2seq.tgt_encoding, "tgt_encoding", "lang_encoding")
    return done


def describe_init(mapping: list[dict[str, Any]], run: str) -> list[str]:
    """One line per module: `decoder.0.attn.{qkv.weight,...} <- RUN layers.1.attn (tied)`."""
    return [f"{m['module']}.{{{','.join(m['tensors'])}}} <- {run} {m['from']}" + (" (tied)" if m["how"] == "tied" else "")
            for m in mapping]
