"""The XNLI classifier (XLM's: pretrained encoder, first position pooled, dropout, Linear(d, 3)) and its
checkpoints (safetensors weights + an optimizer/RNG state read with `weights_only=True` + meta.json).

A checkpoint is a folder written whole into a temporary sibling and renamed into place, so `last` and
`best` are always complete: an interrupted write leaves the previous checkpoint untouched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from safetensors.torch import save_file

from xlp_cli import artifacts
from xlp_cli.errors import BadInput
from xlp_cli.models.checkpoint import load_weights
from xlp_cli.models.encoder import TransformerEncoder

N_LABELS = 3


class Classifier(nn.Module):
    def __init__(self, encoder: TransformerEncoder, n_labels: int = N_LABELS, dropout: float = 0.0):
        super().__init__()
        self.encoder = encoder
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.config.d_model, n_labels)
        set_dropout(encoder, dropout)

    def forward(self, ids: torch.Tensor, langs: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.encoder(ids, langs, None, pad_mask)
        return self.head(self.drop(self.encoder.pooled(hidden)))


def set_dropout(module: nn.Module, p: float) -> None:
    """Fine-tuning dropout (Table 6: 0) for every dropout layer and the attention dropout."""
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = p
        elif hasattr(m, "dropout") and isinstance(getattr(m, "dropout"), float):
            m.dropout = p


def freeze_projections(model: Classifier) -> list[str]:
    """Freeze the XLP projection matrices (appendix B.1). Returns the names of the frozen parameters."""
    enc = model.encoder.lang_encoding
    if enc.name != "xlp":
        return []
    frozen = []
    ids = {id(p) for p in enc.language_parameters()}
    for name, p in model.named_parameters():
        if id(p) in ids:
            p.requires_grad_(False)
            frozen.append(name)
    return frozen


# ---------------------------------------------------------------- checkpoints
WEIGHTS = "classifier.safetensors"
STATE = "state.pt"
META = "meta.json"


def save_checkpoint(folder: Path, model: Classifier, optimizer: torch.optim.Optimizer | None,
                    meta: dict[str, Any]) -> None:
    with artifacts.atomic_folder(folder) as tmp:
        state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
        save_file(state, str(tmp / WEIGHTS), metadata={"format": "pt"})
        if optimizer is not None:
            torch.save({"optimizer": optimizer.state_dict(), "rng": torch.get_rng_state()}, tmp / STATE)
        (tmp / "model.json").write_text(json.dumps(model.encoder.config.to_dict(), indent=2) + "\n", encoding="utf-8")
        (tmp / META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def read_meta(folder: Path) -> dict[str, Any] | None:
    path = Path(folder) / META
    if not path.is_file() or not (Path(folder) / WEIGHTS).is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        raise BadInput("corrupt checkpoint meta.json; delete the checkpoint folder or rerun with --force", path=path) from None


def load_checkpoint(folder: Path, model: Classifier, optimizer: torch.optim.Optimizer | None = None,
                    device: str | torch.device = "cpu") -> dict[str, Any]:
    folder = Path(folder)
    meta = read_meta(folder)
    if meta is None:
        raise BadInput("no checkpoint here", path=folder)
    state = load_weights(folder / WEIGHTS, device)
    own = model.state_dict()
    bad = sorted(set(own) ^ set(state)) or [k for k in own if own[k].shape != state[k].shape]
    if bad:
        raise BadInput(f"checkpoint does not match the model ({bad[0]}); rerun with --force", path=folder / WEIGHTS)
    model.load_state_dict(state, strict=True)
    if optimizer is not None and (folder / STATE).is_file():
        try:
            st = torch.load(folder / STATE, map_location=device, weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unreadable state is a corrupt checkpoint
            raise BadInput(f"corrupt optimizer state ({type(e).__name__})", path=folder / STATE) from None
        optimizer.load_state_dict(st["optimizer"])
        torch.set_rng_state(st["rng"].cpu())
    return meta


def write_done(folder: Path, info: dict[str, Any]) -> None:
    artifacts.write_json_atomic(Path(folder) / "done.json", info)


def read_done(folder: Path) -> dict[str, Any] | None:
    path = Path(folder) / "done.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None
