"""PretrainConfig: every `xlp pretrain` flag (also a `--config`/recipe key). Defaults: XLP paper Table 6 / XLM.

Shared sections, declared once (`train/sections.py`): the optimizer (--warmup, --weight-decay, --clip-norm), Adam
(--adam-betas, --adam-eps) and --amp, with pretrain's defaults named in `@defaults`; --lang-encoding and each
encoding's options (--xlp-bias, --vle-style, --vle-k, ...) come from the encoding registry
(`models/encoding_registry.EncodingFlags`); the objective choices from `train/objectives`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import FORCE_HELP, Default, defaults, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.models.encoding_registry import EncodingFlags, check_encoding_options
from xlp_cli.models.presets import ENCODER_PRESETS
from xlp_cli.train.objectives import PRETRAIN_OBJECTIVES
from xlp_cli.train.sections import Adam, Optimizer, Precision


@dataclasses.dataclass
@defaults(warmup=16_000, weight_decay=Default(1e-4, "Decoupled weight decay (AdamW, as fairseq's Adam)."),
          clip_norm=Default(help="Clip the gradient norm to this (0: no clipping)."),
          amp=Default(help="Mixed precision on GPU (auto: bf16 if supported, else fp16; CPU: none)."))
class PretrainConfig(Optimizer, Adam, Precision, EncodingFlags):
    data: list[Path] = opt(factory=list, help="Input folders: the `xlp bpe apply` output (ids + dict.txt) and, for VLE, the `xlp vocab-score` output; upstream manifests are followed.")
    out: Path = opt(Path("out/pretrain"), "Run folder (checkpoints, metrics, manifest).")
    lang: list[str] = opt(factory=list, help="Languages, comma list (order = language index). Empty: every language with train data.")
    preset: str = opt("xlm15", "Model size preset (tiny, small, xlm15); the fields below override it.", choices=tuple(ENCODER_PRESETS))
    n_layers: int = opt(0, "Override the preset's number of layers (0: keep).")
    d_model: int = opt(0, "Override the preset's hidden size (0: keep).")
    n_heads: int = opt(0, "Override the preset's attention heads (0: keep).")
    d_ff: int = opt(0, "Override the preset's feed-forward size (0: keep).")
    pre_ln: bool = opt(False, "Pre-LayerNorm Transformer layers (default post-LN, as XLM).")
    objective: str = opt("mlm", "Training objective: MLM on monolingual streams, TLM on parallel pairs, or both (alternating steps).", choices=tuple(PRETRAIN_OBJECTIVES))
    bptt: int = opt(256, "Tokens per stream window (MLM); TLM pairs are cut to bptt/2 per side; MASS sentences to bptt.")
    batch_size: int = opt(64, "Windows (or pairs, or MASS sentences) per micro-batch per data slot (= per process by default).")
    data_slots: int = opt(0, "Read each global batch as this many parts, each process reading only its own "
                             "share of the row groups (0: one per process). A 1-process run with the same "
                             "value replays a multi-process run's batches; a resumed run keeps its slots; MLM/TLM only).")
    accumulate: int = opt(4, "Micro-batches per optimizer step (gradient accumulation).")
    max_steps: int = opt(750_000, "Optimizer steps to train for (a resumed run continues up to this).", resumable=True)
    lr: float = opt(1e-4, "Peak learning rate.")
    dropout: float = opt(0.1, "Dropout.")
    attention_dropout: float = opt(0.1, "Attention dropout.")
    word_pred: float = opt(0.15, "Share of tokens to predict (MLM/TLM).")
    mask_probs: list[float] = opt(factory=lambda: [0.8, 0.1, 0.1], help="Of the predicted tokens: share masked, kept, replaced by a random token.")
    word_mass: float = opt(0.5, "MASS: the masked span's share of the sentence (one contiguous span; the decoder predicts it).")
    sample_alpha: float = opt(0.0, "XLM frequency smoothing of which tokens to mask: P(mask x) ~ count(x)^-alpha (0: uniform).")
    lang_alpha: float = opt(0.7, "Language sampling: p_l ~ n_l^alpha.")
    seed: int = opt(0, "Random seed (data order, masking, dropout, init).")
    eval_every: int = opt(2000, "Validate (and checkpoint) every N steps.", resumable=True)
    eval_batches: int = opt(20, "Validation micro-batches per language.", resumable=True)
    log_every: int = opt(10, "Write a train line to metrics.jsonl every N steps.", volatile=True)
    compile: bool = opt(False, "torch.compile the model.", volatile=True)
    device: str = opt("auto", "auto, cpu, cuda or cuda:N (under torchrun each process uses its LOCAL_RANK GPU).", volatile=True)
    num_threads: int = opt(0, "CPU threads for torch (0: torch's default).", volatile=True)
    resume: bool = opt(False, "Require an existing checkpoint in --out and continue it (a rerun with the same config resumes anyway).", volatile=True)
    force: bool = opt(False, FORCE_HELP, volatile=True)

    def validate(self) -> None:
        def positive(name: str, v: float) -> None:
            if v <= 0:
                raise BadInput(f"--{name} must be positive, got {v}")

        for name in ("bptt", "batch_size", "accumulate", "max_steps", "eval_every", "log_every", "eval_batches"):
            positive(name.replace("_", "-"), getattr(self, name))
        positive("lr", self.lr)
        check_encoding_options(self)
        self.check_optimizer()
        if not 0 < self.word_mass <= 1:
            raise BadInput(f"--word-mass must be in (0, 1], got {self.word_mass}")
        if not 0 < self.word_pred < 1:
            raise BadInput(f"--word-pred must be in (0, 1), got {self.word_pred}")
        if len(self.mask_probs) != 3 or any(p < 0 for p in self.mask_probs) or abs(sum(self.mask_probs) - 1) > 1e-6:
            raise BadInput(f"--mask-probs needs three non-negative shares summing to 1, got {self.mask_probs}")
        self.check_adam()
        if not 0 <= self.dropout < 1 or not 0 <= self.attention_dropout < 1:
            raise BadInput("--dropout and --attention-dropout must be in [0, 1)")
        if self.sample_alpha < 0 or self.lang_alpha < 0:
            raise BadInput("--sample-alpha and --lang-alpha must be >= 0")
        if self.bptt < 8:
            raise BadInput("--bptt must be at least 8")
        if not self.data:
            raise BadInput("--data is required: the output folder of `xlp bpe apply` (and `xlp vocab-score` for VLE)")
