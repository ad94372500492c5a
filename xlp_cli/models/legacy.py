"""Reading checkpoints written by xlp 0.1 (before the one checkpoint layout): the only place that knows them.

- model.json had no "kind": a translation model has `enc_layers`; an XNLI classifier stored its weights as
  `classifier.safetensors` beside the encoder's config; anything else is a pre-trained encoder.
- Translation models had their own Transformer layer with separate q/k/v projections and fairseq-style names;
  `rename_tensors` maps them onto `blocks.Block` (q,k,v concatenated into `qkv`, k,v into `kv`).
- meta.json kept the data position under "data" (pretrain) or "batcher" (translation) and the best checkpoint as
  best_loss/best_step (pretrain), best.valid_nll (translation) or best.score (XNLI).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

_RENAMES = [  # (old sub-key, new sub-key) inside one layer
    (".self_attn.out.", ".attn.out."), (".self_norm.", ".ln_attn."), (".cross_attn.q.", ".cross.q."),
    (".cross_attn.out.", ".cross.out."), (".cross_norm.", ".ln_cross."), (".ffn.fc1.", ".ffn.lin1."),
    (".ffn.fc2.", ".ffn.lin2."), (".ffn_norm.", ".ln_ffn."),
]
_OLD = re.compile(r"^(.*)\.(self_attn|cross_attn)\.([qkv])\.(weight|bias)$")


def infer_kind(d: dict[str, Any], folder: Path) -> dict[str, Any]:
    if "enc_layers" in d:
        return {"kind": "seq2seq", **d}
    old = folder / "classifier.safetensors"
    if old.is_file():
        from safetensors import safe_open

        with safe_open(str(old), framework="pt") as f:
            n_labels = int(f.get_slice("head.bias").get_shape()[0]) if "head.bias" in f.keys() else 3
        return {"kind": "classifier", "encoder": d, "n_labels": n_labels}
    return {"kind": "encoder", **d}


def rename_tensors(state: dict[str, torch.Tensor], model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Map xlp 0.1 translation-layer tensor names onto the current Block; other state dicts pass unchanged."""
    if not any(_OLD.match(k) or ".ffn.fc1." in k for k in state):
        return state
    out: dict[str, torch.Tensor] = {}
    parts: dict[tuple[str, str, str], dict[str, torch.Tensor]] = {}
    for k, v in state.items():
        m = _OLD.match(k)
        if m:
            prefix, kind, which, param = m.groups()
            parts.setdefault((prefix, kind, param), {})[which] = v
            continue
        for old, new in _RENAMES:
            k = k.replace(old, new)
        out[k] = v
    for (prefix, kind, param), qkv in parts.items():
        if kind == "self_attn":
            out[f"{prefix}.attn.qkv.{param}"] = torch.cat([qkv["q"], qkv["k"], qkv["v"]], 0)
        else:
            out[f"{prefix}.cross.q.{param}"] = qkv["q"]
            out[f"{prefix}.cross.kv.{param}"] = torch.cat([qkv["k"], qkv["v"]], 0)
    return out


def normalize_meta(meta: dict[str, Any]) -> dict[str, Any]:
    if int(meta.get("format_version", 1)) >= 2:
        return meta
    meta = dict(meta)
    best = meta.get("best")
    if isinstance(best, dict):  # translation (valid_nll) or XNLI (score, dev)
        score = best.get("score", best.get("valid_nll"))
        metrics = {"dev": best["dev"]} if "dev" in best else {}
        meta["best"] = {"score": score, "step": best.get("step"), "metrics": metrics}
    else:  # pretrain
        meta["best"] = {"score": meta.get("best_loss"), "step": meta.get("best_step"), "metrics": meta.get("valid") or {}}
    meta["objective"] = meta.get("data", meta.get("batcher", {}))
    return meta
