"""Task heads on a pre-trained encoder: one shared body, one small head per task (as HF's `...ForX` classes).

    model = SequenceClassifier(encoder, n_labels=3, dropout=0.0)     # XNLI: XLM's first-position classifier
    logits = model(ids, langs, pad_mask)                             # [B, n_labels]
    tagger = TokenClassifier(encoder, n_labels=17)                   # POS: a label per input token
    logits = tagger(ids, langs, pad_mask)                            # [B, T, n_labels]
    qa = SpanExtractor(encoder)                                      # QA: start and end logits per token
    logits = qa(ids, langs, pad_mask)                                # [B, T, 2]
    model = PlugInClassifier(veco_encoder)                           # VECO plug-in: x and its translation y
    logits = model(ids, langs, pad_mask, y_ids, y_langs, y_pad)      # [B, n_labels] from [h_x; s_x]

`freeze_language_parameters(model)` freezes the encoding's language parameters when its registry line says
`frozen_when_finetuning` (XLP's projections, XLP paper appendix B.1).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.nn as nn

from xlp_cli.models.encoder import ModelConfig, TransformerEncoder
from xlp_cli.models.encodings import expand_langs
from xlp_cli.models.veco import Side, stack_pair, streams


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


class TokenClassifier(SequenceClassifier):
    """A token classifier (XTREME's POS tagger): the same body and Linear(d, n_labels) on every input token's
    last hidden state (prefix slots of attaching / vle-padding dropped), so logits line up with `ids`."""

    KIND = "tagger"

    def forward(self, ids: torch.Tensor, langs: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.encoder(ids, langs, None, pad_mask)
        return self.head(self.drop(self.encoder.token_states(hidden)))


class SpanExtractor(TokenClassifier):
    """Extractive QA's span head (XTREME's SQuAD model): Linear(d, 2) on every input token, logits[..., 0] the
    answer's start and logits[..., 1] its end."""

    KIND = "span"

    def __init__(self, encoder: TransformerEncoder, n_labels: int = 2, dropout: float = 0.0):
        super().__init__(encoder, n_labels, dropout)


class PlugInClassifier(SequenceClassifier):
    """VECO plug-in fine-tuning (section 3.1): x and its translation y run as VECO's two streams
    (`models/veco.py`: s attends to the partner's h^L, a constant as in pre-training); the label of x comes from
    the first positions of [h_x; s_x], that of y (`both=True`, training) from [h_y; s_y]."""

    KIND = "veco-classifier"

    def __init__(self, encoder: TransformerEncoder, n_labels: int = 3, dropout: float = 0.0):
        if not encoder.config.cross_attention:
            raise ValueError("plug-in fine-tuning needs an encoder with cross-attention (a VECO pre-training)")
        super().__init__(encoder, n_labels, dropout)
        self.head = nn.Linear(2 * encoder.config.d_model, n_labels)

    def forward(self, ids: torch.Tensor, langs: torch.Tensor, pad_mask: torch.Tensor, pair_ids: torch.Tensor,
                pair_langs: torch.Tensor, pair_pad_mask: torch.Tensor, both: bool = False) -> torch.Tensor:
        x = Side(ids, expand_langs(langs, ids.shape[1]), None, pad_mask)
        y = Side(pair_ids, expand_langs(pair_langs, pair_ids.shape[1]), None, pair_pad_mask)
        h, s = streams(self.encoder, stack_pair(x, y))
        logits = self.head(self.drop(torch.cat([self.encoder.pooled(h), self.encoder.pooled(s)], dim=-1)))
        return logits if both else logits[: ids.shape[0]]


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
