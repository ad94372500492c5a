"""Model weights on disk: safetensors + a model config JSON. Nothing here ever unpickles.

    save_model(folder, model)                       # folder/model.safetensors + folder/model.json (atomic)
    model = load_model(folder)                      # from such a folder
    model = load_pretrained(RUN, which="best")      # a pretrain run folder: RUN/checkpoints/<which>/
    model.config.langs                              # language order (index i = langs[i]); RUN/dict.txt the dictionary

Errors are `BadInput` with the file named (missing files, corrupt safetensors, shape mismatches).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from xlp_cli import artifacts
from xlp_cli.errors import BadInput
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder

WEIGHTS = "model.safetensors"
CONFIG = "model.json"


def save_model(folder: str | Path, model: torch.nn.Module, extra: dict[str, Any] | None = None) -> None:
    """Write the weights (contiguous CPU copies) and the model config, each atomically."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = getattr(model, "module", model)  # DDP / compiled wrappers
    model = getattr(model, "_orig_mod", model)
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    with artifacts.atomic_path(folder / WEIGHTS) as tmp:
        save_file(state, str(tmp), metadata={"format": "pt"})
    cfg = dict(model.config.to_dict())
    if extra:
        cfg.update(extra)
    artifacts.write_json_atomic(folder / CONFIG, cfg)


def read_model_config(path: str | Path) -> ModelConfig:
    path = Path(path)
    if not path.is_file():
        raise BadInput("model config not found", path=path)
    try:
        return ModelConfig.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as e:
        raise BadInput(f"unreadable model config ({e})", path=path) from None


def load_weights(path: str | Path, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    path = Path(path)
    if not path.is_file():
        raise BadInput("weights not found", path=path)
    try:
        return load_file(str(path), device=str(device))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise BadInput(f"corrupt or unreadable safetensors file ({str(e).splitlines()[0] if str(e) else e})",
                       path=path) from None


def load_into(model: torch.nn.Module, path: str | Path, device: str | torch.device = "cpu") -> None:
    """Load weights into an existing model; any missing/unexpected key or shape mismatch is BadInput."""
    state = load_weights(path, device)
    target = getattr(model, "module", model)
    target = getattr(target, "_orig_mod", target)
    own = target.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise BadInput(f"weights do not match the model (missing {missing[:3]}, unexpected {unexpected[:3]})", path=path)
    for k, v in state.items():
        if own[k].shape != v.shape:
            raise BadInput(f"weights do not match the model: {k} has shape {tuple(v.shape)}, "
                           f"model expects {tuple(own[k].shape)}", path=path)
    target.load_state_dict(state, strict=True)


def load_model(folder: str | Path, device: str | torch.device = "cpu", config: ModelConfig | None = None
               ) -> TransformerEncoder:
    folder = Path(folder)
    cfg = config or read_model_config(folder / CONFIG)
    model = TransformerEncoder(cfg)
    load_into(model, folder / WEIGHTS, device)
    return model.to(device)


def checkpoint_dir(run: str | Path, which: str = "best") -> Path:
    run = Path(run)
    if (run / WEIGHTS).is_file():  # already a checkpoint folder
        return run
    folder = run / "checkpoints" / which
    if not (folder / WEIGHTS).is_file():
        raise BadInput(f"no '{which}' checkpoint (expected {folder / WEIGHTS})", path=run)
    return folder


def load_pretrained(run: str | Path, which: str = "best", device: str | torch.device = "cpu") -> TransformerEncoder:
    """The pre-trained encoder of a `xlp pretrain` run folder (or a checkpoint folder), in eval mode."""
    folder = checkpoint_dir(run, which)
    cfg_path = folder / CONFIG if (folder / CONFIG).is_file() else Path(run) / CONFIG
    model = load_model(folder, device, read_model_config(cfg_path))
    return model.eval()
