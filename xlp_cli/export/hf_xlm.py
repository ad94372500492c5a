"""An xlp encoder as a stock transformers `XLMWithLMHeadModel` (no remote code): config.json + renamed weights.

xlp's encoder is XLM's TransformerModel: word embeddings + positions (+ a language embedding: `additive`), then
LayerNorm, then post-LN layers of self-attention and a GELU feed-forward net, and an output layer tied to the
word embeddings plus a bias. The stock class expresses exactly that when

    the encoding's registry line says `hf_xlm` (none, additive), the layers are post-LN, d_ff = 4 * d_model
    (XLM hard-codes it) and the model has no VECO cross-attention (a VECO encoder exports its plain stream).

`why_not(cfg)` says why a model cannot be expressed (None: it can). Tensor names: xlp's fused `qkv` projection
is cut into XLM's q_lin/k_lin/v_lin; the rest is a renaming. A one-language `additive` model folds its single
language vector into the position embeddings (XLM adds language embeddings only when n_langs > 1).
"""

from __future__ import annotations

from typing import Any

import torch

from xlp_cli.artifacts import special_ids
from xlp_cli.models.encoding_registry import spec



def why_not(cfg: Any) -> str | None:
    """None when the stock XLMWithLMHeadModel expresses the encoder `cfg` (a ModelConfig), else the reason."""
    if not spec(cfg.lang_encoding).hf_xlm:
        return f"the {cfg.lang_encoding} encoding has no counterpart in transformers' XLM"
    if cfg.pre_ln:
        return "pre-LN layers (XLM's layers are post-LN)"
    if cfg.d_ff != 4 * cfg.d_model:
        return f"d_ff {cfg.d_ff} != 4 * d_model {cfg.d_model} (XLM fixes the feed-forward width to 4 * d_model)"
    return None


def config_json(cfg: Any, langs: list[str]) -> dict[str, Any]:
    n_langs = len(langs) if spec(cfg.lang_encoding).hf_xlm_langs else 1
    return {
        "architectures": ["XLMWithLMHeadModel"],
        "model_type": "xlm",
        "vocab_size": cfg.vocab_size,
        "emb_dim": cfg.d_model,
        "n_layers": cfg.n_layers,
        "n_heads": cfg.n_heads,
        "dropout": cfg.dropout,
        "attention_dropout": cfg.attention_dropout,
        "gelu_activation": True,
        "sinusoidal_embeddings": False,
        "causal": False,
        "asm": False,
        "n_langs": max(1, n_langs),
        "use_lang_emb": n_langs > 1,
        "lang2id": {l: i for i, l in enumerate(langs)},
        "id2lang": {str(i): l for i, l in enumerate(langs)},
        "max_position_embeddings": cfg.n_positions,
        "layer_norm_eps": 1e-12,
        "embed_init_std": cfg.d_model ** -0.5,
        "unk_index": special_ids.UNK,
        "mask_index": special_ids.MASK,
        "mask_token_id": special_ids.MASK,
        "pad_token_id": special_ids.PAD,
        "bos_token_id": special_ids.BOS,
        "eos_token_id": special_ids.EOS,
        "is_encoder": True,
        "tie_word_embeddings": True,
        "lang_id": 0,
    }


def state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """XLMWithLMHeadModel's tensors from an xlp TransformerEncoder (the tied output weight is not stored)."""
    src = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    cfg = model.config
    t = "transformer."
    out = {t + "embeddings.weight": src["embed.weight"], "pred_layer.proj.bias": src["pred_bias"],
           t + "layer_norm_emb.weight": src["ln_emb.weight"], t + "layer_norm_emb.bias": src["ln_emb.bias"]}
    pos = src["pos_embed.weight"]
    lang = src.get("lang_encoding.lang_emb.weight")
    if lang is not None and lang.shape[0] > 1:
        out[t + "lang_embeddings.weight"] = lang
    elif lang is not None:  # one language: its vector is a constant, folded into every position
        pos = pos + lang[0]
    out[t + "position_embeddings.weight"] = pos
    d = cfg.d_model
    for i in range(cfg.n_layers):
        p = f"layers.{i}."
        for kind in ("weight", "bias"):
            q, k, v = src[f"{p}attn.qkv.{kind}"].split(d, dim=0)
            out.update({f"{t}attentions.{i}.q_lin.{kind}": q.contiguous(), f"{t}attentions.{i}.k_lin.{kind}": k.contiguous(),
                        f"{t}attentions.{i}.v_lin.{kind}": v.contiguous(),
                        f"{t}attentions.{i}.out_lin.{kind}": src[f"{p}attn.out.{kind}"],
                        f"{t}layer_norm1.{i}.{kind}": src[f"{p}ln_attn.{kind}"],
                        f"{t}ffns.{i}.lin1.{kind}": src[f"{p}ffn.lin1.{kind}"],
                        f"{t}ffns.{i}.lin2.{kind}": src[f"{p}ffn.lin2.{kind}"],
                        f"{t}layer_norm2.{i}.{kind}": src[f"{p}ln_ffn.{kind}"]})
    return out
