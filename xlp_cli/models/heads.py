"""Task heads on a pre-trained encoder: one shared body, one small head per task (as HF's `...ForX` classes).

    model = SequenceClassifier(encoder, n_labels=3, dropout=0.0)     # XNLI: XLM's first-position classifier
    logits = model(ids, langs, pad_mask)                             # [B, n_labels]

`freeze_language_parameters(model)` freezes the encoding's language parameters when its registry line says
`frozen_when_finetuning` (XLP's projections, XLP paper appendix B.1).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.nn as nn

from xlp_cli.models.encoder import ModelConfig, TransformerEncoder


@dataclasses.dataclass
class ClassifierConfig:
    encoder: dict[str, Any]
    n_labels: int = 3

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ClassifierConfig":
        return cls(encoder=dict(d["encoder"]), n_labels=int(d.get("n_labels", 3)))


class SequenceClassifier(nn.Module):
    """XLM's XNLI classifier: the encoder, its first position pooled, dropout, Linear(d, n_labels)."""

    KIND = "classifier"

    def __init__(self, encoder: TransformerEncoder, n_labels: int = 3, dropout: float = 0.0):
        super().__init__()
        self.encoder = encoder
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.config.d_model, n_labels)
        self.config = ClassifierConfig(encoder.config.to_dict(), n_labels)
        set_dropout(encoder, dropout)

    @classmethod
    def from_config(cls, cfg: ClassifierConfig) -> "SequenceClassifier":
        return cls(TransformerEncoder(ModelConfig.from_dict(cfg.encoder)), cfg.n_labels)

    def forward(self, ids: torch.Tensor, langs: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.encoder(ids, langs, None, pad_mask)
        return self.head(self.drop(self.encoder.pooled(hidden)))


def set_dropout(module: nn.Module, p: float) -> None:
    """Fine-tuning dropout (XLP Table 6: 0) for every dropout layer and the attention dropout."""
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = p
        elif hasattr(m, "dropout") and isinstance(getattr(m, "dropout"), float):
            m.dropout = p


def freeze_language_parameters(model: nn.Module, encoder: TransformerEncoder) -> list[str]:
    """Freeze the encoding's language parameters if its registry line says so. Returns the frozen names."""
    enc = encoder.lang_encoding
    if not enc.spec.frozen_when_finetuning:
        return []
    ids = {id(p) for p in enc.language_parameters()}
    frozen = []
    for name, p in model.named_parameters():
        if id(p) in ids:
            p.requires_grad_(False)
            frozen.append(name)
    return frozen
