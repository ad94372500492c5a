"""The config of `xlp finetune --task unmt` (every field is a flag and a `--config`/recipe key of the same name).

Defaults follow XLM's UNMT recipe (noise: word shuffle k=3, word drop 0.1, word blank 0.1; lambda_ae
0:1,100000:0.1,300000:0; greedy back-translation of at most 1.3 x length + 5 tokens; --max-len 100) and the VLE
paper's appendix A.2 for training (Adam beta2 0.997, eps 1e-9, warm-up 8000 steps up to 7e-4, dropout 0.1, label
smoothing 0.1). docs/unmt.md says where each comes from.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import BATCH_MAX, BEAM_MAX, COUNT_MAX, Default, SEED_MAX, STEPS_MAX, TOKENS_MAX, defaults, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.models.encoding_registry import TARGET_ENCODINGS, EncodingFlags, check_encoding_options
from xlp_cli.models.presets import ENCODER_PRESETS
from xlp_cli.tasks.common import FinetuneCommon
from xlp_cli.train.sections import Adam

DEFAULT_LR = 7e-4


def parse_lambda(spec: str) -> list[tuple[int, float]]:
    """XLM's loss-weight schedule: "1" (constant) or "step:value,step:value,..." (piecewise linear, then flat)."""
    try:
        if ":" not in spec:
            return [(0, float(spec))]
        pts = [(int(a), float(b)) for a, b in (p.split(":") for p in spec.split(","))]
    except ValueError:
        raise BadInput(f"bad loss weight {spec!r}: give a number or step:value pairs like 0:1,100000:0.1") from None
    if [s for s, _ in pts] != sorted({s for s, _ in pts}) or pts[0][0] != 0 or any(v < 0 for _, v in pts):
        raise BadInput(f"bad loss weight {spec!r}: steps must start at 0 and increase, values be >= 0")
    return pts


def lambda_at(pts: list[tuple[int, float]], step: int) -> float:
    for (s0, v0), (s1, v1) in zip(pts, pts[1:]):
        if s0 <= step < s1:
            return v0 + (v1 - v0) * (step - s0) / (s1 - s0)
    return pts[-1][1]


@dataclasses.dataclass
@defaults(warmup=8000, weight_decay=Default(help="unmt: decoupled (AdamW) weight decay."),
          adam_betas=Default([0.9, 0.997], "unmt: Adam beta1,beta2 (VLE A.2: 0.9, 0.997)."),
          adam_eps=Default(1e-9, "unmt: Adam epsilon (VLE A.2: 1e-9)."),
          lang_encoding=Default(help="translation/unmt: source language in the encoder, target language in the decoder "
                                     "(docs/translation.md).", choices=TARGET_ENCODINGS))
class UnmtConfig(FinetuneCommon, Adam, EncodingFlags):
    # --data: the `xlp bpe apply` output with train/<l1> and train/<l2> (and `xlp vocab-score` for vle from scratch)
    max_steps: int = opt(0, "Stop after this many optimizer steps per run (0: no limit).", resumable=True, lo=0, hi=STEPS_MAX)
    seeds: list[int] = opt(factory=lambda: [1], help="Seeds; one fine-tuning run per seed (e.g. 1,2,3).", resumable=True, lo=0, hi=SEED_MAX)
    init: Path | None = opt(None, "unmt: start from this `xlp pretrain` run: MLM (encoder and decoder both start from its encoder, as XLM) or MASS; none: random (the paper's 'Random' rows).")
    encoder_preset: str = opt("tiny", "unmt without --init: size of the encoder, and of the decoder, its twin.",
                              choices=tuple(ENCODER_PRESETS))
    dropout: float = opt(0.1, "unmt without --init: dropout (VLE A.2: 0.1).", lo=0, lt=1)
    batch_sentences: int = opt(32, "unmt: sentences per language for each loss (denoising, back-translation, MLM) per step.", lo=1, hi=BATCH_MAX)
    max_len: int = opt(100, "unmt: sentences are cut to this many subword tokens (XLM's --max_len).", lo=4, hi=TOKENS_MAX)
    word_shuffle: float = opt(3.0, "unmt: denoising: local shuffle, each token moves less than k positions (0: off).", lo=0, hi=TOKENS_MAX)
    word_dropout: float = opt(0.1, "unmt: denoising: drop each token with this probability.", lo=0, lt=1)
    word_blank: float = opt(0.1, "unmt: denoising: replace each token by <mask> with this probability.", lo=0, lt=1)
    lambda_ae: str = opt("0:1,100000:0.1,300000:0", "unmt: weight of denoising auto-encoding: a number or step:value,... (XLM's).")
    lambda_bt: str = opt("1", "unmt: weight of back-translation (number or schedule).")
    lambda_mlm: str = opt("1", "unmt: weight of MLM on the encoder (number or schedule; VLE A.2 keeps MLM).")
    word_pred: float = opt(0.15, "unmt: MLM: share of the tokens to predict (80% <mask>, 10% kept, 10% random).", gt=0, lt=1)
    bt_temperature: float = opt(0.0, "unmt: back-translation: 0 = greedy (XLM); > 0 samples at this temperature.", lo=0, hi=100)
    label_smoothing: float = opt(0.1, "translation/unmt: label smoothing epsilon.", lo=0, lt=1)
    test_data: list[Path] = opt(factory=list, help="unmt: test set: two line-aligned raw text files NAME.<lang>[.gz] (e.g. Multi30k test_2016_flickr.{de,en}.gz); default: the ids' test/<l1>-<l2>.")
    valid_data: list[Path] = opt(factory=list, help="unmt: validation set, as --test-data; picks the best checkpoint by BLEU (default: the ids' valid/<l1>-<l2>; none: the last).")
    valid_sentences: int = opt(200, "unmt: validate on at most this many sentences per direction.", lo=1, hi=COUNT_MAX)
    valid_every: int = opt(1000, "translation/unmt: validate and checkpoint every N steps (and at the end).", resumable=True, lo=1, hi=STEPS_MAX)
    beam: int = opt(1, "translation/unmt: beam size for the final valid/test decoding (1: greedy).", resumable=True, lo=1, hi=BEAM_MAX)
    length_penalty: float = opt(1.0, "translation/unmt: beam length penalty alpha, score = logprob / length^alpha.", resumable=True, lo=0, hi=10)
    max_eval_sentences: int = opt(0, "translation/unmt: decode at most this many sentences per direction and split (0: all).",
                                  resumable=True, lo=0, hi=COUNT_MAX)
    copy_baseline: bool = opt(False, "unmt: train nothing; 'translate' by copying the source word for word (the baseline a trained model must beat).")

    def validate(self) -> None:
        super().validate()
        check_encoding_options(self)
        if not self.data:
            raise BadInput("unmt needs --data: an `xlp bpe apply` output with monolingual train/<lang> folders")
        if len(self.lr) > 1:
            raise BadInput("unmt trains one learning rate per run; give a single --lr")
        for name in ("batch_sentences", "max_len", "valid_every", "beam", "valid_sentences"):
            if getattr(self, name) < 1:
                raise BadInput(f"--{name.replace('_', '-')} must be at least 1")
        if self.word_shuffle != 0 and self.word_shuffle <= 1:
            raise BadInput(f"--word-shuffle must be 0 (off) or above 1 (XLM's k), got {self.word_shuffle}")
        for name in ("word_dropout", "word_blank", "dropout", "label_smoothing"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise BadInput(f"--{name.replace('_', '-')} must be in [0, 1)")
        if not 0 < self.word_pred < 1:
            raise BadInput(f"--word-pred must be in (0, 1), got {self.word_pred}")
        if self.bt_temperature < 0:
            raise BadInput("--bt-temperature must be >= 0")
        self.check_adam()
        for name in ("lambda_ae", "lambda_bt", "lambda_mlm"):
            parse_lambda(getattr(self, name))
        for name in ("test_data", "valid_data"):
            if getattr(self, name) and len(getattr(self, name)) != 2:
                raise BadInput(f"--{name.replace('_', '-')} needs exactly two files, one per language "
                               "(NAME.<lang>, line-aligned)")
