"""PrepareConfig: every `xlp prepare` flag, which is also a `--config`/recipe key of the same name."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xlp_cli.core.config import CODES_MAX, COUNT_MAX, FORCE_HELP, THREADS_MAX, TOKENS_MAX, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.sources import NAMES as SOURCES
from xlp_cli.text.langs import base_lang, is_known
from xlp_cli.text.tokenize import SEGMENTED

LOWERCASE_MODES = ("xlm", "safe", "none")
ENGINES = ("local", "ray")
WORKER_MODES = ("auto", "threads", "processes")


@dataclasses.dataclass
class PrepareConfig:
    inputs: list[str] = opt(factory=list, help="Input files, folders or globs (not needed for gettext, which scans the system).", argument=True)
    source: str = opt("text", "Source format.", choices=SOURCES)
    out: Path = opt(Path("out/prepare"), "Output folder.")
    lang: list[str] = opt(factory=list, help="Languages to keep, comma list (empty: all the source has; required for --source text).")
    download: bool = opt(False, "Fetch the inputs for --lang from their public URLs (wikipedia; opus where practical).")
    mirror: str = opt("", "Base URL to download from (default: the source's public site).")
    dump_date: str = opt("latest", "Wikipedia dump date (YYYYMMDD or latest).")
    opus_corpus: str = opt("", "OPUS corpus name for --download with --source opus (e.g. GlobalVoices).")
    workers: int = opt(1, "Workers of the local engine (threads or processes, see --worker-mode): they process the chunks (worker processes may also read whole input splits).", volatile=True, lo=1, hi=THREADS_MAX)
    worker_mode: str = opt("auto", "How the local engine runs its --workers: threads (one process; the native text core runs without the GIL), processes (forked; for pure-Python steps: the zh/th segmenters) or auto (threads when every step is native). The output is the same.", choices=WORKER_MODES, volatile=True)
    engine: str = opt("local", "Where the work runs: local (this machine, --workers) or ray (Ray tasks over the input splits; needs the `ray` extra). The output is the same.", choices=ENGINES, volatile=True)
    ray_address: str = opt("", "With --engine ray: the Ray cluster to join (HOST:PORT, or auto); empty: start a local Ray cluster for this run.", volatile=True)
    split_size: int = opt(64 << 20, "Bytes of an input file one reader takes: plain text is cut at line boundaries, Wikipedia multistream dumps at bz2 streams (the output does not depend on it).", volatile=True, lo=1, hi=1 << 40)
    chunk_size: int = opt(2000, "Records per work unit sent to a worker, and the resume granularity (the output does not depend on it).", volatile=True, lo=1, hi=10**7)
    on_error: str = opt("raise", "What a bad record does: raise (stop with an error) or skip (count it in the manifest).", choices=("raise", "skip"))
    clean: bool = opt(True, "Remove non-printing characters.")
    normalize: bool = opt(True, "Moses punctuation normalization (per language).")
    tokenize: str = opt("moses", "Tokenizer: moses (sacremoses; jieba for zh, pythainlp for th), xlm (Moses with perl's character classes: byte-identical to XLM's tokenize.sh, splits Indic viramas) or none.", choices=("moses", "xlm", "none"))
    lowercase: str = opt("safe", "Lowercase and strip accents: xlm (byte-compatible with XLM), safe (keeps Thai/Devanagari/Arabic intact) or none.", choices=LOWERCASE_MODES)
    min_tokens: int = opt(1, "Drop records with fewer tokens.", lo=0, hi=TOKENS_MAX)
    max_tokens: int = opt(512, "Drop records with more tokens (0: no limit).", lo=0, hi=10**6)
    dedup: bool = opt(True, "Drop exact duplicates (per language / pair).")
    valid_fraction: float = opt(0.01, "Share of records (by content hash) in the valid split.", lo=0, lt=1)
    test_fraction: float = opt(0.01, "Share of records (by content hash) in the test split.", lo=0, lt=1)
    split_by: str = opt("pair", "What decides a parallel record's split: pair (its own content hash) or sentences (every pair that shares a sentence with it, in any language, goes to the same split, and overflow past --max-valid/--max-test is dropped, not trained on: no valid/test sentence is ever a training sentence; for zero-shot tests on multi-way corpora such as Multi30k). Reads the source twice.", choices=("pair", "sentences"))
    max_valid: int = opt(5000, "Cap on valid records per language (0: no cap), as XLM's 5000.", lo=0, hi=COUNT_MAX)
    max_test: int = opt(5000, "Cap on test records per language (0: no cap).", lo=0, hi=COUNT_MAX)
    max_records: int = opt(0, "Read at most this many records per language/pair from the source, and keep at most this many (0: all).", lo=0, hi=COUNT_MAX)
    mono_from_parallel: bool = opt(False, "Also write each side of parallel data as monolingual records.")
    unpair: bool = opt(False, "Write each parallel record as ONE monolingual record (pairs that share a sentence give the same language; about half give each), and no pairs: no sentence has its translation in the output (unsupervised MT on a parallel corpus, Lample et al. 2018). Reads the source twice.")
    lid_threshold: float = opt(0.5, "Language-ID confidence needed to keep a CommonCrawl document.", lo=0, hi=1)
    max_expansion: float = opt(200.0, "Bounded decompression: a .gz/.bz2/.xz file or zip member may decompress to at most this many times its compressed size (counted from 1 MiB); more is refused as a possible decompression bomb.", volatile=True, lo=1, hi=1e6)
    max_member_bytes: int = opt(64 << 30, "Bounded decompression: the most bytes one .gz/.bz2/.xz file or zip member may decompress to.", volatile=True, lo=1, hi=1 << 50)
    shard_size: int = opt(100_000, "Records per Parquet shard.", lo=1, hi=10**9)
    bpe_codes: int = opt(0, "Also learn this many BPE merges on the train split and apply them (0: no BPE).", lo=0, hi=CODES_MAX)
    bpe_from: Path | None = opt(None, "Apply an existing BPE (a codes file, or an `xlp bpe learn` folder) instead of learning one.")
    force: bool = opt(False, FORCE_HELP, volatile=True)

    def validate(self) -> None:
        if self.workers < 1:
            raise BadInput("--workers must be at least 1")

        for lang in self.lang:
            if not is_known(lang):
                raise BadInput(f"unknown language code {lang!r} in --lang: use ISO 639-1 codes such as en, fr, zh "
                               "(a region or script may follow: pt-BR, zh_TW, sr-Latn)")
        for name in ("min_tokens", "max_tokens", "max_valid", "max_test", "max_records"):
            if getattr(self, name) < 0:
                raise BadInput(f"--{name.replace('_', '-')} must be >= 0")
        if self.shard_size < 1 or self.chunk_size < 1 or self.split_size < 1:
            raise BadInput("--shard-size, --chunk-size and --split-size must be at least 1")
        if self.ray_address and self.engine != "ray":
            raise BadInput("--ray-address needs --engine ray")
        if self.worker_mode != "auto" and self.engine != "local":
            raise BadInput("--worker-mode is for --engine local")
        if self.max_tokens and self.min_tokens > self.max_tokens:
            raise BadInput("--min-tokens is larger than --max-tokens")
        for name in ("valid_fraction", "test_fraction"):
            v = getattr(self, name)
            if not 0.0 <= v < 1.0:
                raise BadInput(f"--{name.replace('_', '-')} must be in [0, 1), got {v}")
        if self.valid_fraction + self.test_fraction >= 1.0:
            raise BadInput("--valid-fraction plus --test-fraction must be below 1")
        if self.source == "text" and not self.lang:
            raise BadInput("--source text needs --lang (the language of the input lines)")
        if self.source != "gettext" and not self.inputs and not self.download:
            raise BadInput(f"--source {self.source} needs input paths (or --download)")
        if self.unpair and self.mono_from_parallel:
            raise BadInput("--unpair keeps one side of each pair; --mono-from-parallel would keep both: give one")
        if self.unpair and self.source not in ("opus", "gettext"):
            raise BadInput(f"--unpair needs a parallel source (opus, gettext), not --source {self.source}")
        if self.unpair and len(self.lang) != 2:
            raise BadInput("--unpair works on one language pair: give --lang l1,l2")
        if self.split_by == "sentences" and (self.source not in ("opus", "gettext") or self.unpair):
            raise BadInput("--split-by sentences is for parallel data (--source opus or gettext, without --unpair)")
        if self.bpe_codes and self.bpe_from:
            raise BadInput("give --bpe-codes (learn) or --bpe-from (reuse), not both")

    def uses_threads(self) -> bool:
        """Whether the local engine runs its workers as threads: --worker-mode threads, or auto where every
        step of the work is native (no zh/th segmenter, known languages; Wikipedia's wikitext conversion is native)."""
        if self.worker_mode != "auto":
            return self.worker_mode == "threads"

        segmented = self.tokenize != "none" and any(base_lang(lang) in SEGMENTED for lang in self.lang)
        return bool(self.lang) and not segmented
