"""Configs of `xlp bpe learn` and `xlp bpe apply` (every field is a flag and a recipe key)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xlp_cli.core.config import BATCH_MAX, CODES_MAX, COUNT_MAX, FORCE_HELP, SEED_MAX, THREADS_MAX, opt
from xlp_cli.core.errors import BadInput

TOKENIZERS = ("fastbpe", "sentencepiece")
SPM_TYPES = ("unigram", "bpe", "word")  # word: the most frequent whole words, the rest <unk> (VLE Table 4)


@dataclass
class BpeLearnConfig:
    data: list[Path] = opt(factory=list, help="Output folder of `xlp prepare` (its train split is read).")
    out: Path = opt(Path("bpe"), help="Output folder: codes, vocab, dict.txt (or spm.model + dict.txt), manifest.json.")
    lang: list[str] = opt(factory=list, help="Languages to learn from (comma list); default: every language of the split.")
    tokenizer: str = opt("fastbpe", help="fastbpe (merge codes on the tokenized `text`) or sentencepiece (on the raw text).",
                         choices=TOKENIZERS)
    codes: int = opt(30000, help="Number of BPE merge operations to learn (fastbpe).", lo=1, hi=CODES_MAX)
    spm_vocab_size: int = opt(32000, help="SentencePiece vocabulary size.", lo=20, hi=CODES_MAX)
    spm_model_type: str = opt("unigram", help="SentencePiece model type (word: a word-level vocabulary of --spm-vocab-size words).", choices=SPM_TYPES)
    spm_character_coverage: float = opt(0.9995, help="SentencePiece character coverage.", lo=0.98, hi=1)
    alpha: float = opt(0.5, help="Language sampling exponent: p_l proportional to n_l^alpha (XLM).", lo=0, hi=1)
    sample_sentences: int = opt(0, help="Sentences in the sampled learning corpus; 0 = as many as the split holds.", lo=0, hi=COUNT_MAX)
    seed: int = opt(0, help="Seed of the language sampling.", lo=0, hi=SEED_MAX)
    split: str = opt("train", help="Split to learn from.")
    parallel: bool = opt(False, help="Also learn from both sides of parallel (<l1>-<l2>) folders.")
    max_vocab: int = opt(0, help="Keep dictionary ids below this (specials included, as XLM's --max_vocab); 0 = all.", lo=0, hi=CODES_MAX)
    min_count: int = opt(0, help="Drop dictionary tokens seen fewer times; 0 = keep all.", lo=0, hi=COUNT_MAX)
    force: bool = opt(False, help=FORCE_HELP, volatile=True)

    def validate(self) -> None:
        if not self.data:
            raise BadInput("--data is required: the output folder of `xlp prepare`", path="--data")
        if self.codes <= 0:
            raise BadInput("--codes must be a positive number of merges", path="--codes")
        if self.spm_vocab_size < 20:
            raise BadInput("--spm-vocab-size must be at least 20", path="--spm-vocab-size")
        if not self.alpha >= 0:
            raise BadInput("--alpha must be >= 0", path="--alpha")
        if self.sample_sentences < 0 or self.max_vocab < 0 or self.min_count < 0:
            raise BadInput("--sample-sentences, --max-vocab and --min-count must be >= 0", path="config")


@dataclass
class BpeApplyConfig:
    inputs: list[str] = opt(factory=list, argument=True,
                            help="Filter mode (no --data): INPUT [OUTPUT] text files, '-' or none for stdin / stdout; "
                                 "writes what `fast applybpe OUTPUT INPUT CODES [VOCAB]` writes.")
    data: list[Path] = opt(factory=list, help="Output of `xlp prepare` and of `xlp bpe learn` (or give --codes).")
    out: Path = opt(Path("ids"), help="Output folder: token-id shards, dict.txt, manifest.json.")
    lang: list[str] = opt(factory=list, help="Languages to apply to (comma list); default: all.")
    split: list[str] = opt(factory=list, help="Splits to apply to (comma list); default: all of train, valid, test.")
    codes: Path | None = opt(None, help="A fastBPE codes file to use instead of a `xlp bpe learn` folder (e.g. XLM's codes_xnli_15).")
    vocab: Path | None = opt(None, help="The fastBPE/XLM vocab that goes with --codes (limits subwords and gives the ids).")
    spm_model: Path | None = opt(None, help="A SentencePiece model to use instead of a `xlp bpe learn` folder.")
    max_vocab: int = opt(0, help="With --vocab: keep ids below this (XLM-15 uses 95000); 0 = all.", lo=0, hi=CODES_MAX)
    min_count: int = opt(0, help="With --vocab: drop tokens seen fewer times.", lo=0, hi=COUNT_MAX)
    batch_rows: int = opt(4096, help="Rows per batch while applying.", volatile=True, lo=1, hi=BATCH_MAX)
    workers: int = opt(2, help="Threads that segment and encode (filter mode: that segment new words); the output "
                       "does not depend on it.", volatile=True, lo=1, hi=THREADS_MAX)
    on_error: str = opt("raise", help="Filter mode: a bad line (invalid UTF-8, a NUL byte, too long): raise (exit 2) "
                        "or skip (write an empty line, count it).", choices=("raise", "skip"))
    max_line_bytes: int = opt(100_000, help="Filter mode: longest line accepted, in bytes (0: no limit).", lo=0, hi=1 << 30)
    force: bool = opt(False, help=FORCE_HELP, volatile=True)

    # keys of the filter mode alone: not part of an ids folder's config
    FILTER_KEYS = ("inputs", "workers", "on_error", "max_line_bytes")

    @property
    def filter_mode(self) -> bool:
        return not self.data

    def validate(self) -> None:
        if self.workers < 1:
            raise BadInput("--workers must be at least 1", path="--workers")
        if self.filter_mode:
            if self.codes is None:
                raise BadInput("give --data (prepared shards to turn into ids) or --codes (to filter text: "
                               "`xlp bpe apply --codes C --vocab V INPUT OUTPUT`)", path="--data")
            if self.spm_model is not None or self.max_vocab or self.min_count:
                raise BadInput("--spm-model, --max-vocab and --min-count need --data (they shape token ids)")
            if self.max_line_bytes < 0:
                raise BadInput("--max-line-bytes must be >= 0")
        elif self.inputs:
            raise BadInput("give --data (prepared shards) or INPUT [OUTPUT] text files, not both")
        if self.vocab is not None and self.codes is None:
            raise BadInput("--vocab needs --codes", path="--vocab")
        if self.codes is not None and self.spm_model is not None:
            raise BadInput("give --codes or --spm-model, not both", path="--codes")
        if self.batch_rows <= 0:
            raise BadInput("--batch-rows must be positive", path="--batch-rows")
