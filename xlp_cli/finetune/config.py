"""FinetuneConfig: every `xlp finetune` flag, which is also a `--config`/recipe key of the same name.

Sections: fields shared by every task, then the XNLI fields, then the translation fields (issue 6).
A field used by one task only is ignored by the others. List fields that default to empty mean
"the task's default" (see `docs/finetune.md`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.config import opt
from xlp_cli.errors import BadInput

TASKS = ("xnli", "translation")
XNLI_SETTINGS = ("transfer", "translate-train")

# XNLI defaults (XLP paper, appendix B.1 / Table 6, fine-tuning column)
XNLI_DEFAULT_LR = [5e-6]
XNLI_DEFAULT_BATCH_SIZE = [16]


@dataclasses.dataclass
class FinetuneConfig:
    # ------------------------------------------------------------------ every task
    task: str = opt("xnli", "Fine-tuning task.", choices=TASKS)
    data: list[Path] = opt(factory=list, help="The `xlp pretrain` run folder to start from (xnli: required).")
    out: Path = opt(Path("out/finetune"), "Output folder.")
    lang: list[str] = opt(factory=list, help="Languages (xnli: test languages; default: every XNLI language the model was pre-trained on).")
    which: str = opt("best", "Which pre-training checkpoint to start from.", choices=("best", "last"))
    seeds: list[int] = opt(factory=lambda: [1], help="Seeds; one fine-tuning run per seed (e.g. 1,2,3).")
    lr: list[float] = opt(factory=list, help="Learning rates to search (xnli default: 5e-6; the paper searches 1e-6..8e-6).")
    batch_size: list[int] = opt(factory=list, help="Batch sizes to search (xnli default: 16; the paper searches 8,16).")
    epochs: int = opt(3, "Passes over the training set (an epoch may be shortened with --epoch-size).")
    max_steps: int = opt(0, "Stop after this many optimizer steps per run (0: no limit).")
    warmup: int = opt(4000, "Linear warm-up steps, then inverse square root decay (Table 6: 4k).")
    weight_decay: float = opt(0.0, "Adam weight decay.")
    clip_norm: float = opt(5.0, "Gradient clipping norm (0: off).")
    dropout: float = opt(0.0, "Dropout during fine-tuning (Table 6: 0).")
    device: str = opt("auto", "Device: auto (cuda when available), cpu or cuda.", choices=("auto", "cpu", "cuda"))
    threads: int = opt(0, "CPU threads for torch (0: torch's default).")
    log_every: int = opt(50, "Log the training loss every N steps (metrics.jsonl).")
    save_every: int = opt(1000, "Also write checkpoints/last every N steps within an epoch (0: only at epoch ends).")
    force: bool = opt(False, "Overwrite an output folder written with a different config.")

    # ------------------------------------------------------------------ xnli
    setting: str = opt("transfer", "xnli: transfer (train on English, test on all) or translate-train (train per language).",
                       choices=XNLI_SETTINGS)
    train_file: Path | None = opt(None, "xnli: English training TSV (default: DATA/mnli_en/mnli_train.tsv).")
    dev_file: Path | None = opt(None, "xnli: XNLI dev TSV, all languages (default: DATA/xnli/xnli.dev.tsv).")
    test_file: Path | None = opt(None, "xnli: XNLI test TSV, all languages (default: DATA/xnli/xnli.test.tsv).")
    translated_train: str = opt("", "xnli translate-train: training TSV per language, with {lang} in the path "
                                    "(default: the language's dev set, see docs/finetune.md).")
    train_lang: str = opt("en", "xnli transfer: the language of the training rows (English, as in the paper).")
    select_on: str = opt("train", "xnli transfer: select the checkpoint on the training language's dev set (train: English dev) "
                                  "or on the average dev accuracy of the test languages (avg).", choices=("train", "avg"))
    epoch_size: int = opt(0, "xnli: training examples per epoch (0: the whole training set; XLM uses 20000).")
    max_train_rows: int = opt(0, "xnli: use at most this many training rows (0: all).")
    max_eval_rows: int = opt(0, "xnli: evaluate at most this many rows per language and split (0: all).")
    max_len: int = opt(256, "xnli: maximum subword tokens per sentence (Table 6: 256); longer ones are truncated.")
    unfreeze_projections: bool = opt(False, "xnli: also train the XLP projections (frozen by default, appendix B.1).")
    eval_batch_size: int = opt(64, "xnli: batch size for evaluation.")

    # ------------------------------------------------------------------ translation (issue 6)
    # (owned by xlp_cli/finetune/translation.py; --data is the `xlp bpe apply` output with parallel pair
    # folders; --lr defaults to 5e-4; --batch-size is not used: batches are made by --max-tokens)
    arch: str = opt("transformer", "translation: encoder-decoder (transformer) or Encoder-Interlingua-Decoder (interlingua).",
                    choices=("transformer", "interlingua"))
    preset: str = opt("iwslt", "translation: model size (iwslt = XLP Table 7: 6+6 layers, d 512, FFN 1024, 4 heads; small; tiny).",
                      choices=("iwslt", "small", "tiny"))
    lang_encoding: str = opt("xlp", "translation: source language in the encoder, target language in the decoder (docs/translation.md).",
                             choices=("attaching", "additive", "xlp", "none"))
    init_encoder: Path | None = opt(None, "translation: start the encoder from this `xlp pretrain` run (--which checkpoint).")
    directions: list[str] = opt(factory=list, help="translation: training directions SRC-TGT (default: from --mix and --target-lang).")
    mix: str = opt("many-to-one", "translation: many-to-one (every X-target pair as X->target) or many-to-many (both ways).",
                   choices=("many-to-one", "many-to-many"))
    target_lang: str = opt("en", "translation: the target language of --mix many-to-one.")
    zero_shot: list[str] = opt(factory=list, help="translation: directions never trained on, evaluated separately (e.g. de-fr,fr-de).")
    temperature: float = opt(1.0, "translation: direction sampling p ~ (n/N)^(1/T) (1: proportional, as concatenating).")
    max_tokens: int = opt(4096, "translation: tokens per batch, padding included (Table 7: 4096).")
    label_smoothing: float = opt(0.1, "translation: label smoothing epsilon (Table 7: 0.1).")
    mt_dropout: float = opt(0.3, "translation: dropout (Table 7: 0.3).")
    mt_weight_decay: float = opt(1e-4, "translation: decoupled weight decay (XLP B.2: 1e-4).")
    max_positions: int = opt(256, "translation: longest sentence in subword tokens (</s> and language slots included).")
    overflow: str = opt("truncate", "translation: a longer sentence is truncated with a warning, or is an error (fail).",
                        choices=("truncate", "fail"))
    intl_positions: int = opt(10, "interlingua: r, the number of interlingua states.")
    intl_layers: int = opt(3, "interlingua: N, the number of interlingua layers.")
    intl_losses: list[str] = opt(factory=lambda: ["s2t", "t2s", "s2s", "t2t", "sim"],
                                 help="interlingua: loss terms (INTL = s2t,t2s; +REC adds s2s,t2t; +SIM adds sim).")
    valid_every: int = opt(1000, "translation: validate and checkpoint every N steps (and at the end).")
    beam: int = opt(5, "translation: beam size for the final valid/test decoding (1: greedy).")
    length_penalty: float = opt(1.2, "translation: beam length penalty alpha, score = logprob / length^alpha.")
    max_eval_sentences: int = opt(0, "translation: decode at most this many sentences per direction and split (0: all).")
    max_train_pairs: int = opt(0, "translation: use at most this many training pairs per pair folder (0: all).")
    amp: str = opt("auto", "translation: mixed precision on GPU (auto: bf16 if supported, else fp16 with loss scaling; "
                           "CPU: always fp32), as `xlp pretrain --amp`.", choices=("auto", "bf16", "fp16", "none"))

    def validate(self) -> None:
        if any(s < 0 for s in self.seeds) or not self.seeds:
            raise BadInput("--seeds needs at least one non-negative seed")
        if any(v <= 0 for v in self.lr):
            raise BadInput("--lr values must be positive")
        if any(v <= 0 for v in self.batch_size):
            raise BadInput("--batch-size values must be positive")
        if self.epochs < 1 and self.max_steps < 1:
            raise BadInput("give --epochs >= 1 or --max-steps >= 1")
        if not 0.0 <= self.dropout < 1.0:
            raise BadInput(f"--dropout must be in [0, 1), got {self.dropout}")
        if self.task == "xnli":
            if len(self.data) != 1:
                raise BadInput("xnli fine-tuning needs exactly one --data: an `xlp pretrain` run folder")
            if self.max_len < 8:
                raise BadInput("--max-len must be at least 8")
