"""Model size presets, without importing torch (the CLI's --preset choices read these names).

Encoder (`xlp pretrain --preset`): tiny fits the test suite, cpu a run of minutes on a CPU (what `--preset auto`,
the default, picks there; `train/config.py` gives it a CPU-sized run length), small a CPU experiment of hours, xlm15
is the XLM15 / XLP Table 6 model (what `--preset auto` picks on a GPU). Encoder-decoder (`xlp finetune --task
translation --preset`): iwslt is XLP Table 7.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from xlp_cli.core.config import check_config
from xlp_cli.core.errors import BadInput


class PresetConfig:
    """A model config dataclass built from a preset table (`PRESETS`), to/from the dict in model.json."""

    PRESETS: dict[str, dict[str, Any]] = {}
    PRESET_FIELD: str | None = None  # the field that records the preset's name, if any

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> Any:
        if name not in cls.PRESETS:
            raise BadInput(f"unknown model preset {name!r} (choose from {', '.join(cls.PRESETS)})")
        values = {**cls.PRESETS[name], **{k: v for k, v in overrides.items() if v is not None}}
        cfg = cls(**values, **({cls.PRESET_FIELD: name} if cls.PRESET_FIELD else {}))
        check_config(cfg)
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Any:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        cfg = cls(**{k: v for k, v in d.items() if k in names})
        check_config(cfg, "model config")  # the declared ranges (a damaged or hand-made model.json)
        return cfg

ENCODER_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(n_layers=2, d_model=32, n_heads=2, d_ff=64, n_positions=272),
    "cpu": dict(n_layers=2, d_model=64, n_heads=4, d_ff=256, n_positions=272),  # the README's demo model
    "small": dict(n_layers=4, d_model=256, n_heads=4, d_ff=1024, n_positions=520),
    "xlm15": dict(n_layers=12, d_model=1024, n_heads=8, d_ff=4096, n_positions=520),
}

SEQ2SEQ_PRESETS: dict[str, dict[str, Any]] = {
    # Table 7 of the XLP paper (IWSLT): 6+6 layers, d=512, FFN 1024, 4 heads, dropout 0.3.
    "iwslt": dict(d_model=512, enc_layers=6, dec_layers=6, heads=4, ffn=1024, dropout=0.3),
    # a CPU-sized model for the demo recipe (minutes, not days)
    "small": dict(d_model=256, enc_layers=3, dec_layers=3, heads=4, ffn=512, dropout=0.1),
    # unit tests
    "tiny": dict(d_model=64, enc_layers=2, dec_layers=2, heads=4, ffn=128, dropout=0.0),
}

# the interlingua's loss terms (models/interlingua.py): s2t/t2s translation, s2s/t2t reconstruction, sim
INTERLINGUA_LOSS_TERMS = ("s2t", "t2s", "s2s", "t2t", "sim")
