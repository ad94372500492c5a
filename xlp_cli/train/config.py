"""PretrainConfig: every `xlp pretrain` flag (also a `--config`/recipe key). The paper's values: XLP Table 6 / XLM.

Shared sections, declared once (`train/sections.py`): the optimizer (--warmup, --weight-decay, --clip-norm), Adam
(--adam-betas, --adam-eps) and --amp, with pretrain's defaults named in `@defaults`; --lang-encoding and each
encoding's options (--xlp-bias, --vle-style, --vle-k, ...) come from the encoding registry
(`models/encoding_registry.EncodingFlags`); the objective choices from `train/objectives`.

Defaults for the machine in front of the user: `--preset auto` (the default) is `xlm15`, the paper's model, on a GPU
and `cpu` on a CPU. The run's length and shape (--max-steps --bptt --batch-size --accumulate --lr --eval-every) left
at 0 are the preset's (`RUNS`): the `cpu` preset's run takes minutes on a CPU, every other preset gets the paper's
(Table 6 / XLM). `--warmup -1` (the default) is min(16000, the paper's, 10% of --max-steps), so a short run still
reaches its --lr; `--num-threads 0` is 1 for the `cpu` preset on a CPU. `PretrainConfig.resolved` turns these into
numbers before the run folder is claimed: the manifest records what ran."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from xlp_cli.core import config as cfgmod
from xlp_cli.core.config import (
    BATCH_MAX, Default, FORCE_HELP, Range, SEED_MAX, STEPS_MAX, THREADS_MAX, TOKENS_MAX, defaults, opt)
from xlp_cli.core.errors import BadInput
from xlp_cli.models.encoding_registry import EncodingFlags, check_encoding_options
from xlp_cli.models.presets import ENCODER_PRESETS
from xlp_cli.train.objectives import PRETRAIN_OBJECTIVES
from xlp_cli.train.sections import Adam, Optimizer, Precision, Tracking


AUTO_PRESET = "auto"
AUTO_WARMUP = -1        # --warmup: min(PAPER_WARMUP, 10% of --max-steps)
PAPER_WARMUP = 16_000   # XLM / XLP Table 6
# The run of a preset: what --max-steps --bptt --batch-size --accumulate --lr --eval-every are when left at 0.
PAPER_RUN = {"max_steps": 750_000, "bptt": 256, "batch_size": 64, "accumulate": 4, "lr": 1e-4, "eval_every": 2000}
CPU_RUN = {"max_steps": 500, "bptt": 64, "batch_size": 32, "accumulate": 1, "lr": 1e-3, "eval_every": 250}
RUNS = {"cpu": CPU_RUN}  # every other preset: PAPER_RUN


def preset_for(device_type: str) -> str:
    """What `--preset auto` is on this device: the paper's model on a GPU, a model of minutes on a CPU."""
    return "xlm15" if device_type == "cuda" else "cpu"


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def warmup_for(max_steps: int) -> int:
    """The default warm-up: the paper's, or 10% of a shorter run (at least 1 step)."""
    return min(PAPER_WARMUP, max(1, max_steps // 10))


@dataclasses.dataclass
@defaults(warmup=Default(AUTO_WARMUP, "Linear warm-up steps, then inverse square root decay (0: a constant learning "
                                      "rate). -1: min(16000, the paper's, and 10% of --max-steps).",
                                      range=Range(lo=AUTO_WARMUP, hi=STEPS_MAX)),
          weight_decay=Default(1e-4, "Decoupled weight decay (AdamW, as fairseq's Adam)."),
          clip_norm=Default(help="Clip the gradient norm to this (0: no clipping)."),
          amp=Default(help="Mixed precision on GPU (auto: bf16 if supported, else fp16; CPU: none)."))
class PretrainConfig(Optimizer, Adam, Precision, Tracking, EncodingFlags):
    data: list[Path] = opt(factory=list, help="Input folders: the `xlp bpe apply` output (ids + dict.txt) and, for VLE, the `xlp vocab-score` output; upstream manifests are followed.")
    out: Path = opt(Path("out/pretrain"), "Run folder (checkpoints, metrics, manifest).")
    lang: list[str] = opt(factory=list, help="Languages, comma list (order = language index). Empty: every language with train data.")
    preset: str = opt(AUTO_PRESET, "Model size preset: auto = xlm15 (the XLP paper's Table 6 model) on a GPU, cpu "
                                   "(2 layers, d 64: minutes) on a CPU; tiny, cpu, small, xlm15. The fields below "
                                   "override it.", choices=(AUTO_PRESET, *ENCODER_PRESETS))
    n_layers: int = opt(0, "Override the preset's number of layers (0: keep).", lo=0, hi=256)
    d_model: int = opt(0, "Override the preset's hidden size (0: keep).", lo=0, hi=1 << 16)
    n_heads: int = opt(0, "Override the preset's attention heads (0: keep).", lo=0, hi=1024, divides="d_model")
    d_ff: int = opt(0, "Override the preset's feed-forward size (0: keep).", lo=0, hi=1 << 18)
    pre_ln: bool = opt(False, "Pre-LayerNorm Transformer layers (default post-LN, as XLM).")
    objective: str = opt("mlm", "Training objective: MLM on monolingual streams, TLM on parallel pairs, or both (alternating steps).", choices=tuple(PRETRAIN_OBJECTIVES))
    bptt: int = opt(0, "Tokens per stream window (MLM); TLM pairs are cut to bptt/2 per side; MASS sentences to bptt. "
                       "0: the preset's (the paper's 256; cpu: 64). Longer than every language's valid split: lowered "
                       "to what the data allows, with a notice.", lo=0, hi=TOKENS_MAX)
    batch_size: int = opt(0, "Windows (or pairs, or MASS sentences) per micro-batch per data slot (= per process by "
                             "default). 0: the preset's (the paper's 64; cpu: 32).", lo=0, hi=BATCH_MAX)
    data_slots: int = opt(0, "Read each global batch as this many parts, each process reading only its own "
                             "share of the row groups (0: one per process). A 1-process run with the same "
                             "value replays a multi-process run's batches; a resumed run keeps its slots; MLM/TLM only).", lo=0, hi=THREADS_MAX)
    accumulate: int = opt(0, "Micro-batches per optimizer step (gradient accumulation). 0: the preset's (the paper's "
                             "4; cpu: 1).", lo=0, hi=10**4)
    max_steps: int = opt(0, "Optimizer steps to train for (a resumed run continues up to this). 0: the preset's (the "
                            "paper's 750000; cpu: 500).", resumable=True, lo=0, hi=STEPS_MAX)
    lr: float = opt(0.0, "Peak learning rate. 0: the preset's (the paper's 1e-4; cpu: 1e-3).", lo=0, hi=10)
    dropout: float = opt(0.1, "Dropout.", lo=0, lt=1)
    attention_dropout: float = opt(0.1, "Attention dropout.", lo=0, lt=1)
    word_pred: float = opt(0.15, "Share of tokens to predict (MLM/TLM).", gt=0, lt=1)
    pair_word_pred: float = opt(0.25, "CA-MLM on parallel pairs (--objective ca-mlm, tlm+ca-mlm): share of tokens to "
                                      "predict (VECO Table 8: 25% of bilingual tokens; mlm+ca-mlm keeps --word-pred).", gt=0, lt=1)
    mask_probs: list[float] = opt(factory=lambda: [0.8, 0.1, 0.1], help="Of the predicted tokens: share masked, kept, replaced by a random token.", lo=0, hi=1)
    word_mass: float = opt(0.5, "MASS: the masked span's share of the sentence (one contiguous span; the decoder predicts it).", gt=0, hi=1)
    sample_alpha: float = opt(0.0, "XLM frequency smoothing of which tokens to mask: P(mask x) ~ count(x)^-alpha (0: uniform).", lo=0, hi=1)
    lang_alpha: float = opt(0.7, "Language sampling: p_l ~ n_l^alpha.", lo=0, hi=1)
    seed: int = opt(0, "Random seed (data order, masking, dropout, init).", lo=0, hi=SEED_MAX)
    eval_every: int = opt(0, "Validate (and checkpoint) every N steps. 0: the preset's (the paper's 2000; cpu: 250).",
                          resumable=True, lo=0, hi=STEPS_MAX)
    eval_batches: int = opt(20, "Validation micro-batches per language.", resumable=True, lo=1, hi=10**6)
    log_every: int = opt(10, "Write a train line to metrics.jsonl every N steps.", volatile=True, lo=1, hi=STEPS_MAX)
    compile: str = opt("auto", "torch.compile the model: auto (on for CUDA, off on CPU), on or off. A failed compile "
                               "falls back to eager with one line.", choices=("auto", "on", "off"), volatile=True)
    prefetch: int = opt(2, "Steps of batches built ahead in a background thread (0: between steps).", volatile=True, lo=0, hi=64)
    device: str = opt("auto", "auto, cpu, cuda or cuda:N (under torchrun each process uses its LOCAL_RANK GPU).", volatile=True)
    num_threads: int = opt(0, "CPU threads for torch (0: torch's default; 1 for the cpu preset on a CPU).",
                           volatile=True, lo=0, hi=THREADS_MAX)
    resume: bool = opt(False, "Require an existing checkpoint in --out and continue it (a rerun with the same config resumes anyway).", volatile=True)
    force: bool = opt(False, FORCE_HELP, volatile=True)

    def validate(self) -> None:
        def positive(name: str, v: float) -> None:
            if v <= 0:
                raise BadInput(f"--{name} must be positive, got {v}")

        for name in ("log_every", "eval_batches"):
            positive(name.replace("_", "-"), getattr(self, name))
        for name in (*PAPER_RUN, "prefetch"):  # 0: the preset's value (prefetch: none)
            if getattr(self, name) < 0:
                raise BadInput(f"--{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}")
        check_encoding_options(self)
        if self.warmup != AUTO_WARMUP:
            self.check_optimizer()
        if not 0 < self.word_mass <= 1:
            raise BadInput(f"--word-mass must be in (0, 1], got {self.word_mass}")
        if not 0 < self.word_pred < 1:
            raise BadInput(f"--word-pred must be in (0, 1), got {self.word_pred}")
        if not 0 < self.pair_word_pred < 1:
            raise BadInput(f"--pair-word-pred must be in (0, 1), got {self.pair_word_pred}")
        if len(self.mask_probs) != 3 or any(p < 0 for p in self.mask_probs) or abs(sum(self.mask_probs) - 1) > 1e-6:
            raise BadInput(f"--mask-probs needs three non-negative shares summing to 1, got {self.mask_probs}")
        self.check_adam()
        if not 0 <= self.dropout < 1 or not 0 <= self.attention_dropout < 1:
            raise BadInput("--dropout and --attention-dropout must be in [0, 1)")
        if self.sample_alpha < 0 or self.lang_alpha < 0:
            raise BadInput("--sample-alpha and --lang-alpha must be >= 0")
        if 0 < self.bptt < 8:
            raise BadInput("--bptt must be at least 8")
        if not self.data:
            raise BadInput("--data is required: the output folder of `xlp bpe apply` (and `xlp vocab-score` for VLE)")
        if self.preset != AUTO_PRESET:
            self.check_shape(self.preset)

    def check_shape(self, preset: str) -> None:
        """The model's shape, the preset's with this config's overrides, inside the declared ranges (--n-heads
        divides --d-model): a one-line error before any file is written."""
        shape = {k: getattr(self, k) or ENCODER_PRESETS[preset][k] for k in ("n_layers", "d_model", "n_heads", "d_ff")}
        cfgmod.check_config(dataclasses.replace(self, **shape))

    def unresolved(self) -> set[str]:
        """Flag names still at their automatic value (`resolved` fills them in on the run's device)."""
        auto = {name.replace("_", "-") for name in PAPER_RUN if getattr(self, name) == 0}
        if self.preset == AUTO_PRESET:
            auto.add("preset")
        if self.warmup == AUTO_WARMUP:
            auto.add("warmup")
        return auto

    def resolved(self, device_type: str, previous: dict[str, Any] | None = None) -> tuple["PretrainConfig", str]:
        """This config with its automatic values filled in for `device_type`, and a one-line notice saying what
        they became ("" when none was automatic). `previous`: the identity the run folder was claimed with; a
        rerun that continues that run (everything but --warmup the same) keeps its warm-up, even with another
        --max-steps (the schedule of the steps already taken stays)."""
        preset = preset_for(device_type) if self.preset == AUTO_PRESET else self.preset
        run = RUNS.get(preset, PAPER_RUN)
        values = {name: getattr(self, name) or run[name] for name in PAPER_RUN}
        cfg = dataclasses.replace(self, preset=preset, **values)
        cfg.check_shape(preset)
        if self.warmup == AUTO_WARMUP:
            continued = self._continued_warmup(cfg, previous)
            cfg = dataclasses.replace(cfg, warmup=warmup_for(cfg.max_steps) if continued is None else continued)
            cfgmod.check_config(cfg)  # (a warm-up kept from the run folder's recorded config: inside its range too)
        auto = self.unresolved()
        if self.num_threads == 0 and preset == "cpu" and device_type == "cpu":
            # its small matrices gain nothing from more threads, and on a shared machine they lose (2 cores, load 4:
            # 30,000 tokens/s with 1 thread, 13,000-24,000 with torch's default of 2)
            cfg = dataclasses.replace(cfg, num_threads=1)
            auto.add("num-threads")
        if not auto:
            return cfg, ""
        order = ("preset", "max-steps", "warmup", "lr", "batch-size", "accumulate", "bptt", "eval-every", "num-threads")
        picked = ", ".join(f"--{flag} {_shown(getattr(cfg, flag.replace('-', '_')))}" for flag in order if flag in auto)
        paper = "" if cfg.preset == "xlm15" and cfg.max_steps == PAPER_RUN["max_steps"] else \
            " (the paper's run: --preset xlm15 with the other defaults)"
        return cfg, f"on {device_type}: {picked}{paper}"

    @staticmethod
    def _continued_warmup(cfg: "PretrainConfig", previous: dict[str, Any] | None) -> int | None:
        if not previous or not isinstance(previous.get("warmup"), int):
            return None
        same = cfgmod.identity(dataclasses.replace(cfg, warmup=previous["warmup"]))
        return previous["warmup"] if same == previous else None
