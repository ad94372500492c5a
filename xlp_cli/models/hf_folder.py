"""A Hugging Face model folder read back into xlp's own encoder: the inverse of `xlp export --format hf`.

    read_config(FOLDER) -> dict | None            config.json (None: the folder has none)
    encoding_of(config) -> str                    the xlp language encoding it describes
    load_encoder(FOLDER) -> TransformerEncoder    the weights in xlp's classes, eval mode

Two architectures are read (docs/export.md says how each is written):
- `model_type: "xlm"`: transformers' XLM (`XLMModel` / `XLMWithLMHeadModel`: an `xlp export` stock folder, or
  any XLM checkpoint folder of that shape). It is xlp's post-LN encoder with `d_ff = 4 * emb_dim`; language
  embeddings (`use_lang_emb` and n_langs > 1) make it `additive` over `id2lang`'s languages, otherwise `none`.
  XLM variants xlp has no counterpart for (sinusoidal positions, causal, ReLU, adaptive softmax) are refused.
  q_lin/k_lin/v_lin are fused back into xlp's `qkv`.
- `model_type: "xlp"`: the `trust_remote_code` folder of `xlp export`; its tensors are xlp's under `xlp.`.
  `modeling_xlp.py` is never imported or run: xlp builds its own classes from config.json.
Weights: `model.safetensors` (or a sharded `model.safetensors.index.json`), else `pytorch_model.bin` read with
`torch.load(weights_only=True)`. Rows past `xlp_dictionary_size` (the ids tokenizer.json needed beyond dict.txt)
are dropped. An MLM output weight stored apart from the embeddings is ignored (xlp ties them; only hidden states
are read here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from xlp_cli.core.config import check_config
from xlp_cli.core.errors import BadInput
from xlp_cli.core.textfile import json_object
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder
from xlp_cli.models.encoding_registry import ENCODINGS

CONFIG = "config.json"
XLM = "xlm"            # transformers' XLM; the other kind is `xlp export`'s remote-code model
KINDS = (XLM, "xlp")


def read_config(folder: Path) -> dict[str, Any] | None:
    """config.json of an HF model folder, or None when the folder has none."""
    path = Path(folder) / CONFIG
    return json_object(path) if path.is_file() else None


def _xlm_encoding(with_langs: bool) -> str:
    """The encoding transformers' XLM expresses with (or without) its language embeddings (the registry says)."""
    return next(n for n, s in ENCODINGS.items() if s.hf_xlm and s.hf_xlm_langs == with_langs)


def encoding_of(conf: dict[str, Any]) -> str:
    """The xlp language encoding an HF config.json describes (what names the folder in reports)."""
    if conf.get("model_type") != XLM:
        return str(conf.get("lang_encoding"))
    return _xlm_encoding(bool(conf.get("use_lang_emb", True)) and int(conf.get("n_langs", 1)) > 1)


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    index = folder / "model.safetensors.index.json"
    files = [folder / "model.safetensors"]
    if not files[0].is_file() and index.is_file():
        try:
            names = sorted(set(json_object(index)["weight_map"].values()))
        except (KeyError, TypeError, AttributeError) as e:
            raise BadInput(f"corrupt {index.name} (no weight_map: {e})", path=index) from None
        files = [folder / n for n in names]
        for f in files:
            if f.parent != folder or not f.is_file():
                raise BadInput(f"{index.name} names {f.name}, which is not a file in this folder", path=index)
    if files[0].is_file():
        out: dict[str, torch.Tensor] = {}
        for f in files:
            try:
                out.update(load_file(str(f)))
            except (SafetensorError, OSError) as e:
                raise BadInput(f"corrupt safetensors file ({e})", path=f) from None
        return out
    pt = folder / "pytorch_model.bin"
    if pt.is_file():
        try:
            state = torch.load(pt, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unreadable pickle is bad input, never executed
            raise BadInput(f"cannot read the weights ({type(e).__name__}: {e})", path=pt) from None
        if isinstance(state, dict):
            return {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    raise BadInput("an HF model folder without model.safetensors (or pytorch_model.bin)", path=folder)


def _need(conf: dict[str, Any], key: str, folder: Path) -> Any:
    if key not in conf:
        raise BadInput(f"{CONFIG} has no {key!r}", path=folder / CONFIG)
    return conf[key]


def _langs(conf: dict[str, Any]) -> list[str]:
    id2lang = conf.get("id2lang") or {}
    if id2lang:
        return [id2lang[k] for k in sorted(id2lang, key=int)]
    lang2id = conf.get("lang2id") or {}
    return sorted(lang2id, key=lambda l: lang2id[l])


def _xlm(conf: dict[str, Any], src: dict[str, torch.Tensor], folder: Path) -> tuple[ModelConfig, dict[str, Any]]:
    for key, want in (("sinusoidal_embeddings", False), ("causal", False), ("asm", False), ("gelu_activation", True)):
        if bool(conf.get(key, want)) != want:
            raise BadInput(f"{CONFIG}: an XLM model with {key}={conf.get(key)} has no counterpart in xlp", path=folder / CONFIG)
    if float(conf.get("layer_norm_eps", 1e-12)) != 1e-12:
        raise BadInput(f"{CONFIG}: layer_norm_eps {conf['layer_norm_eps']} (xlp's LayerNorms use 1e-12)", path=folder / CONFIG)
    src = {k.removeprefix("transformer."): v for k, v in src.items()}
    d, n_layers = int(_need(conf, "emb_dim", folder)), int(_need(conf, "n_layers", folder))
    langs = _langs(conf)
    additive = ENCODINGS[encoding_of(conf)].hf_xlm_langs
    if additive and len(langs) != int(conf["n_langs"]):
        raise BadInput(f"{CONFIG}: n_langs {conf['n_langs']} but {len(langs)} languages in id2lang/lang2id", path=folder / CONFIG)
    cfg = ModelConfig(vocab_size=0, langs=langs, lang_encoding=encoding_of(conf),
                      n_layers=n_layers, d_model=d, n_heads=int(_need(conf, "n_heads", folder)), d_ff=4 * d,
                      n_positions=int(conf.get("max_position_embeddings", 512)),
                      dropout=float(conf.get("dropout", 0.1)), attention_dropout=float(conf.get("attention_dropout", 0.1)),
                      pad_index=int(conf.get("pad_index", conf.get("pad_token_id", 2))))
    check_config(cfg, str(folder / CONFIG))  # the shape inside its declared ranges (n_heads divides emb_dim)
    out = {"embed.weight": src.pop("embeddings.weight", None), "pos_embed.weight": src.pop("position_embeddings.weight", None),
           "ln_emb.weight": src.pop("layer_norm_emb.weight", None), "ln_emb.bias": src.pop("layer_norm_emb.bias", None),
           "pred_bias": src.pop("pred_layer.proj.bias", None)}
    if additive:
        out["lang_encoding.lang_emb.weight"] = src.pop("lang_embeddings.weight", None)
    for i in range(n_layers):
        for k in ("weight", "bias"):
            a, p = f"attentions.{i}.", f"layers.{i}."
            qkv = [src.pop(f"{a}{n}_lin.{k}", None) for n in "qkv"]
            out[f"{p}attn.qkv.{k}"] = None if any(t is None for t in qkv) else torch.cat(qkv)
            for mine, theirs in (("attn.out", f"{a}out_lin"), ("ln_attn", f"layer_norm1.{i}"),
                                 ("ffn.lin1", f"ffns.{i}.lin1"), ("ffn.lin2", f"ffns.{i}.lin2"), ("ln_ffn", f"layer_norm2.{i}")):
                out[f"{p}{mine}.{k}"] = src.pop(f"{theirs}.{k}", None)
    if out["pred_bias"] is None and out["embed.weight"] is not None:  # an XLMModel folder (no LM head)
        out["pred_bias"] = torch.zeros(out["embed.weight"].shape[0])
    missing = sorted(k for k, v in out.items() if v is None)
    if missing:
        raise BadInput(f"an XLM folder without the tensor(s) of {', '.join(missing[:3])} (xlp's names)", path=folder)
    return cfg, out


def _xlp(conf: dict[str, Any], src: dict[str, torch.Tensor], folder: Path) -> tuple[ModelConfig, dict[str, Any]]:
    enc = str(_need(conf, "lang_encoding", folder))
    if enc not in ENCODINGS:
        raise BadInput(f"{CONFIG}: unknown lang_encoding {enc!r}", path=folder / CONFIG)
    s = ENCODINGS[enc]
    opts = {k: conf[k] for k in (*s.option_names(), *s.state_keys) if conf.get(k) is not None}
    cfg = ModelConfig(vocab_size=0, langs=list(conf.get("langs") or []), lang_encoding=enc, encoding_options=opts,
                      **{k: _need(conf, k, folder) for k in ("n_layers", "d_model", "n_heads", "d_ff", "n_positions")},
                      dropout=float(conf.get("dropout", 0.1)), attention_dropout=float(conf.get("attention_dropout", 0.1)),
                      pre_ln=bool(conf.get("pre_ln", False)), pad_index=int(conf.get("pad_token_id", 2)))
    check_config(cfg, str(folder / CONFIG))  # the shape inside its declared ranges (n_heads divides d_model)
    return cfg, {k.removeprefix("xlp."): v for k, v in src.items()}


def load_encoder(folder: str | Path) -> TransformerEncoder:
    """The encoder of an HF model folder (model_type xlm or xlp) as xlp's TransformerEncoder, in eval mode."""
    folder = Path(folder)
    conf = read_config(folder)
    if conf is None or conf.get("model_type") not in KINDS:
        found = "no config.json" if conf is None else f"model_type {conf.get('model_type')!r}"
        raise BadInput(f"not an HF model folder xlp reads ({found}; expected model_type xlm or xlp)", path=folder)
    cfg, tensors = (_xlm if conf["model_type"] == XLM else _xlp)(conf, _tensors(folder), folder)
    if not isinstance(tensors.get("embed.weight"), torch.Tensor) or tensors["embed.weight"].dim() != 2:
        raise BadInput("the weights have no word embedding matrix", path=folder)
    vocab = int(conf.get("xlp_dictionary_size") or tensors["embed.weight"].shape[0])
    for key in ("embed.weight", "pred_bias"):  # rows past dict.txt: ids only tokenizer.json uses
        if key in tensors:
            tensors[key] = tensors[key][:vocab]
    cfg.vocab_size = vocab
    model = TransformerEncoder(cfg)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as e:
        first = str(e).strip().splitlines()
        raise BadInput(f"the weights do not fit config.json: {' '.join(first[:2])[:300]}", path=folder) from None
    return model.eval()
