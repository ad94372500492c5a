"""The configs of the translation task: `xlp finetune --task translation`, `xlp evaluate --task translation` and
`xlp translate` (every field is a flag and a `--config`/recipe key of the same name).

Defaults follow the XLP paper (4.2, appendix B.2, Table 7): label-smoothed cross-entropy (0.1), Adam
(0.9, 0.98, eps 1e-8) with decoupled weight decay 1e-4, peak lr 5e-4 with 4k warm-up steps then inverse square
root, dropout 0.3, batches of 4096 tokens, beam 5 and length penalty 1.2 when decoding.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import BATCH_MAX, BEAM_MAX, COUNT_MAX, Default, SEED_MAX, STEPS_MAX, TOKENS_MAX, defaults, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.models.encoding_registry import TARGET_ENCODINGS, EncodingFlags, check_encoding_options
from xlp_cli.models.presets import INTERLINGUA_LOSS_TERMS as LOSS_TERMS, SEQ2SEQ_PRESETS
from xlp_cli.tasks.common import EvaluateCommon, FinetuneCommon
from xlp_cli.train.sections import Runtime

DEFAULT_LR = 5e-4


@dataclasses.dataclass
@defaults(weight_decay=Default(1e-4, "Decoupled (AdamW) weight decay (translation: XLP B.2: 1e-4)."),
          lang_encoding=Default(help="translation: source language in the encoder, target language in the decoder "
                                     "(docs/translation.md).", choices=TARGET_ENCODINGS))
class TranslationConfig(FinetuneCommon, EncodingFlags):
    # --data is the `xlp bpe apply` output with parallel pair folders; --lr is one value (default 5e-4)
    ALIASES = {"mt_dropout": "dropout", "mt_weight_decay": "weight_decay"}  # names before xlp 0.2

    # more steps, epochs or seeds continue a run folder (translation resumes each seed from `last`)
    seeds: list[int] = opt(factory=lambda: [1], help="Seeds; one fine-tuning run per seed (e.g. 1,2,3).", resumable=True, lo=0, hi=SEED_MAX)
    epochs: int = opt(3, "Passes over the training set.", resumable=True, lo=0, hi=10**6)
    max_steps: int = opt(0, "Stop after this many optimizer steps per run (0: no limit).", resumable=True, lo=0, hi=STEPS_MAX)
    dropout: float = opt(0.3, "Dropout (translation: Table 7: 0.3).", lo=0, lt=1)
    arch: str = opt("transformer", "translation: encoder-decoder (transformer) or Encoder-Interlingua-Decoder (interlingua).",
                    choices=("transformer", "interlingua"))
    preset: str = opt("iwslt", "translation: model size (iwslt = XLP Table 7: 6+6 layers, d 512, FFN 1024, 4 heads; small; tiny).",
                      choices=tuple(SEQ2SEQ_PRESETS))
    init_encoder: Path | None = opt(None, "translation: start the encoder from this `xlp pretrain` run (--which checkpoint); "
                                          "from a VECO run, the decoder too (docs/veco.md).")
    tie_self_attention: bool = opt(True, "translation from a VECO run: each decoder layer shares its encoder layer's "
                                         "self-attention (VECO 6.1); off: a copy trained apart.")
    directions: list[str] = opt(factory=list, help="translation: training directions SRC-TGT (default: from --mix and --target-lang).")
    mix: str = opt("many-to-one", "translation: many-to-one (every X-target pair as X->target) or many-to-many (both ways).",
                   choices=("many-to-one", "many-to-many"))
    target_lang: str = opt("en", "translation: the target language of --mix many-to-one.")
    zero_shot: list[str] = opt(factory=list, help="translation: directions never trained on, evaluated separately (e.g. de-fr,fr-de).")
    temperature: float = opt(1.0, "translation: direction sampling p ~ (n/N)^(1/T) (1: proportional, as concatenating).", gt=0, hi=100)
    max_tokens: int = opt(4096, "translation: tokens per batch, padding included (Table 7: 4096).", lo=1, hi=1 << 24)
    label_smoothing: float = opt(0.1, "translation: label smoothing epsilon (Table 7: 0.1).", lo=0, lt=1)
    max_positions: int = opt(256, "translation: longest sentence in subword tokens (</s> and language slots included).", lo=8, hi=TOKENS_MAX)
    overflow: str = opt("truncate", "translation: a longer sentence is truncated with a warning, or is an error (fail).",
                        choices=("truncate", "fail"))
    intl_positions: int = opt(10, "interlingua: r, the number of interlingua states.", lo=1, hi=4096)
    intl_layers: int = opt(3, "interlingua: N, the number of interlingua layers.", lo=1, hi=256)
    intl_losses: list[str] = opt(factory=lambda: list(LOSS_TERMS),
                                 help="interlingua: loss terms (INTL = s2t,t2s; +REC adds s2s,t2t; +SIM adds sim).")
    valid_every: int = opt(1000, "translation: validate and checkpoint every N steps (and at the end).", resumable=True, lo=1, hi=STEPS_MAX)
    beam: int = opt(5, "translation: beam size for the final valid/test decoding (1: greedy).", resumable=True, lo=1, hi=BEAM_MAX)
    length_penalty: float = opt(1.2, "translation: beam length penalty alpha, score = logprob / length^alpha.", resumable=True, lo=0, hi=10)
    max_eval_sentences: int = opt(0, "translation: decode at most this many sentences per direction and split (0: all).",
                                  resumable=True, lo=0, hi=COUNT_MAX)
    max_train_pairs: int = opt(0, "translation: use at most this many training pairs per pair folder (0: all).", lo=0, hi=COUNT_MAX)

    def validate(self) -> None:
        super().validate()
        check_encoding_options(self)
        if not self.data:
            raise BadInput("translation needs --data: an `xlp bpe apply` output with parallel pair folders")
        if len(self.lr) > 1:
            raise BadInput("translation trains one learning rate per run; give a single --lr")
        if self.max_tokens < 16:
            raise BadInput("--max-tokens must be at least 16")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise BadInput("--label-smoothing must be in [0, 1)")
        if not 0.0 <= self.dropout < 1.0:
            raise BadInput("--dropout must be in [0, 1)")
        if self.temperature <= 0:
            raise BadInput("--temperature must be positive")
        if self.beam < 1:
            raise BadInput("--beam must be at least 1")
        if self.max_positions < 8:
            raise BadInput("--max-positions must be at least 8")
        if self.valid_every < 1:
            raise BadInput("--valid-every must be at least 1")
        bad = [t for t in self.intl_losses if t not in LOSS_TERMS]
        if bad:
            raise BadInput(f"unknown --intl-losses {bad} (choose from {', '.join(LOSS_TERMS)})")
        if self.arch == "interlingua" and "s2t" not in self.intl_losses and "t2s" not in self.intl_losses:
            raise BadInput("--intl-losses needs a translation term (s2t or t2s)")
        both = set(self.directions) & set(self.zero_shot)
        if both:
            raise BadInput(f"direction(s) {', '.join(sorted(both))} cannot be both trained and zero-shot")


@dataclasses.dataclass
class TranslationEvalConfig(EvaluateCommon):
    split: str = opt("test", "xnli/translation: which split's predictions to score.", choices=("test", "dev"))
    bleu_tokenize: str = opt("13a", "translation: sacreBLEU tokenizer for detokenized BLEU (13a, intl, zh, ...).",
                             choices=("13a", "intl", "zh", "ja-mecab", "ko-mecab", "char", "flores101", "flores200", "none"))
    copy_baseline: bool = opt(True, "translation: add a 'copy' row, the source sentence given back as the translation "
                                    "(the bar a zero-shot direction must clear: a model that only copies scores it).")


@dataclasses.dataclass
class TranslateConfig(Runtime):  # --device, --threads: train/sections.py
    inputs: list[str] = opt(factory=list, argument=True,
                            help="Input files, one sentence per line (none or '-': standard input).")
    model: Path = opt(Path("out/finetune"), "An `xlp finetune --task translation` folder, or one of its seed-<S> folders.")
    seed: int = opt(-1, "Which seed's model of a multi-seed folder (-1: the first).", lo=-1, hi=SEED_MAX)
    which: str = opt("best", "Which checkpoint.", choices=("best", "last"))
    src_lang: str = opt("", "Language of the input lines (required).")
    tgt_lang: str = opt("en", "Language to translate into.")
    output: Path | None = opt(None, "Write the translations to this file (default: standard output).")
    format: str = opt("text", "text (detokenized), tokenized (BPE undone, Moses tokens) or jsonl (all fields).",
                      choices=("text", "tokenized", "jsonl"))
    beam: int = opt(5, "Beam size (Table 7: 5).", lo=1, hi=BEAM_MAX)
    length_penalty: float = opt(1.2, "Length penalty alpha: score = logprob / length^alpha (Table 7: 1.2).", lo=0, hi=10)
    greedy: bool = opt(False, "Greedy decoding (the same as --beam 1).")
    batch_size: int = opt(64, "Sentences decoded together (sorted by length).", lo=1, hi=BATCH_MAX)
    max_len_a: float = opt(1.2, "Output length limit a * source length + b: a.", lo=0, hi=100)
    max_len_b: int = opt(10, "Output length limit a * source length + b: b.", lo=0, hi=TOKENS_MAX)
    overflow: str = opt("truncate", "A line longer than the model's positions is truncated with a warning, or is an error (fail).",
                        choices=("truncate", "fail"))

    def validate(self) -> None:
        if not self.src_lang:
            raise BadInput("give --src-lang, the language of the input")
        if self.beam < 1:
            raise BadInput("--beam must be at least 1")
        if self.batch_size < 1:
            raise BadInput("--batch-size must be at least 1")
        if self.max_len_a < 0 or self.max_len_b < 1:
            raise BadInput("--max-len-a must be >= 0 and --max-len-b >= 1")
