"""The configs of the evaluation tasks that are one module each (xtreme, lexicon, analysis, claims), apart from
their code: `xlp evaluate --help` reads every task's config at start-up, and these tasks' code loads torch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import COUNT_MAX, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.bucc.config import BuccOptions
from xlp_cli.tasks.common import EvaluateCommon
from xlp_cli.tasks.retrieval.config import RetrievalOptions

TOPIC_WORDS = ["happy", "glad", "sad", "car", "plane", "bike", "meat", "food", "rice"]


@dataclasses.dataclass
class XtremeConfig(EvaluateCommon, RetrievalOptions, BuccOptions):
    split: str = opt("test", "xtreme: which split's XNLI / PAWS-X / POS / NER / QA predictions to score.",
                     choices=("test", "dev"))

    def validate(self) -> None:
        EvaluateCommon.validate(self)
        self.validate_retrieval()
        self.validate_bucc()


@dataclasses.dataclass
class LexiconConfig(EvaluateCommon):
    which: str = opt("best", "lexicon/analysis: which pre-training checkpoint to read.", choices=("best", "last"))
    dict_dir: Path | None = opt(None, "lexicon: folder with xx-en.<split> dictionaries (default: DATA/bilingual_dict_wiktionary).")
    dict_split: str = opt("test", "lexicon: dictionary file suffix (test, testsmall, trainsmall).")
    embedding: str = opt("raw", "lexicon: raw word embeddings (VLE 4.6) or encoded (after each language's encoding).",
                         choices=("raw", "encoded"))
    max_pairs: int = opt(0, "lexicon: use at most this many word pairs per language (0: all).", lo=0, hi=COUNT_MAX)

    def validate(self) -> None:
        super().validate()
        if self.max_pairs < 0:
            raise BadInput("--max-pairs must be >= 0")


@dataclasses.dataclass
class AnalysisConfig(EvaluateCommon):
    which: str = opt("best", "lexicon/analysis: which pre-training checkpoint to read.", choices=("best", "last"))
    words: list[str] = opt(factory=lambda: ["the", "world", "house", "water"],
                           help="analysis: English words for the 15x15 language similarity (XLP Fig. 4).")
    topic_words: list[str] = opt(factory=lambda: list(TOPIC_WORDS), help="analysis: words for the topic similarity (XLP Fig. 5).")
    sentence: str = opt("the cat sat on the mat because it was tired .",
                        help="analysis: English sentence for the word-language correlation terms (XLP Fig. 2, Eq. 3).")
    head: int = opt(0, "analysis: attention head of the first layer for Fig. 2.", lo=0, hi=1023)


@dataclasses.dataclass
class ClaimsConfig(EvaluateCommon):
    which: str = opt("last", "claims: which pre-training checkpoint to read (last: as VLE 4.6, the model at the end "
                             "of pre-training).", choices=("best", "last"))
    dict_dir: Path | None = opt(None, "lexicon: folder with xx-en.<split> dictionaries (default: DATA/bilingual_dict_wiktionary).")
    dict_split: str = opt("test", "lexicon: dictionary file suffix (test, testsmall, trainsmall).")
    max_pairs: int = opt(0, "lexicon: use at most this many word pairs per language (0: all).", lo=0, hi=COUNT_MAX)
    words: list[str] = opt(factory=lambda: ["the", "world", "house", "water"],
                           help="analysis: English words for the language similarity (XLP Fig. 4).")
    topic_words: list[str] = opt(factory=lambda: list(TOPIC_WORDS), help="analysis: words for the topic similarity (XLP Fig. 5).")
    alpha: float = opt(0.05, "claims: significance level of the one-sided paired t-test over seeds (Holm-corrected "
                             "within each paper's claims).", gt=0, lt=1)
    retrieval_sets: list[str] = opt(factory=list, help="claims: also measure Tatoeba and/or PUD retrieval of each "
                                                       "pre-training run (tatoeba, pud; default: none).")
    max_sentences: int = opt(0, "retrieval: use at most the first N pairs per language and set (0: all).", lo=0, hi=COUNT_MAX)

    def validate(self) -> None:
        super().validate()
        bad = [s for s in self.retrieval_sets if s not in ("tatoeba", "pud")]
        if bad:
            raise BadInput(f"--retrieval-sets: unknown set(s) {', '.join(bad)} (choose from tatoeba, pud)")
        if self.max_sentences < 0 or not 0 < self.alpha < 1:
            raise BadInput("--max-sentences must be >= 0 and --alpha in (0, 1)")
