"""An xlp encoder as a `trust_remote_code=True` folder: config.json with an `auto_map`, modeling_xlp.py beside it,
and xlp's own tensor names under `xlp.` (the MLM bias as `pred_bias`). Every encoding whose registry line says
`hf_remote` (its twin is in modeling_xlp.py) is expressed; a VECO encoder's cross-attention sub-layers are left out
(without a memory stream the encoder never runs them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from xlp_cli.artifacts import special_ids
from xlp_cli.models.encoding_registry import spec

MODELING = Path(__file__).with_name("modeling_xlp.py")
AUTO_MAP = {"AutoConfig": "modeling_xlp.XlpConfig", "AutoModel": "modeling_xlp.XlpModel",
            "AutoModelForMaskedLM": "modeling_xlp.XlpForMaskedLM"}



def why_not(cfg: Any) -> str | None:
    """None when modeling_xlp.py expresses the encoder `cfg` (a ModelConfig), else the reason."""
    if not spec(cfg.lang_encoding).hf_remote:
        return f"modeling_xlp.py has no twin of the {cfg.lang_encoding} encoding (its registry line says hf_remote=False)"
    return None


def config_json(cfg: Any, langs: list[str]) -> dict[str, Any]:
    opts = cfg.encoding_options
    return {
        "architectures": ["XlpForMaskedLM"], "model_type": "xlp", "auto_map": AUTO_MAP,
        "vocab_size": cfg.vocab_size, "d_model": cfg.d_model, "n_layers": cfg.n_layers, "n_heads": cfg.n_heads,
        "d_ff": cfg.d_ff, "n_positions": cfg.n_positions, "dropout": cfg.dropout,
        "attention_dropout": cfg.attention_dropout, "pre_ln": cfg.pre_ln, "lang_encoding": cfg.lang_encoding,
        "langs": list(langs), "xlp_bias": bool(opts.get("xlp_bias", True)),
        "vle_style": opts.get("vle_style", "adding"), "vle_sizes": opts.get("vle_sizes"),
        "layer_norm_eps": 1e-12, "pad_token_id": special_ids.PAD, "bos_token_id": special_ids.BOS,
        "eos_token_id": special_ids.EOS,
    }


def state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in model.state_dict().items():
        if ".cross." in key or ".ln_cross." in key:
            continue
        out[key if key == "pred_bias" else "xlp." + key] = value.detach().cpu().contiguous()
    return out
