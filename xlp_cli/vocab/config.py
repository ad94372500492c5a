"""Config of `xlp vocab-score` (every field is a flag and a recipe key)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xlp_cli.core.config import CODES_MAX, COUNT_MAX, FORCE_HELP, opt
from xlp_cli.core.errors import BadInput


@dataclass
class VocabConfig:
    data: list[Path] = opt(factory=list, help="Output folder of `xlp bpe apply` (token-id shards).")
    out: Path = opt(Path("vocab"), help="Output folder: scores/vocab_scores.parquet, vle_vocab.json, manifest.json.")
    lang: list[str] = opt(factory=list, help="Languages to score (comma list); default: every language of the split.")
    k: list[int] = opt(factory=lambda: [100], help="Tokens per language; a list (20,50,100) writes one vocabulary per K.", lo=1, hi=CODES_MAX)
    split: str = opt("train", help="Split to count on.")
    min_count: int = opt(1, help="A token needs at least this many occurrences in a language to be one of its candidates.", lo=1, hi=COUNT_MAX)
    words_only: bool = opt(False, help="Leave out tokens made only of digits, punctuation and symbols.")
    parallel: bool = opt(False, help="Also count both sides of parallel (<l1>-<l2>) folders.")
    show: int = opt(12, help="Top tokens per language shown in the terminal table.", lo=0, hi=10**4)
    engine: str = opt("local", help="Where the counting runs: local (this process) or ray (one Ray task per shard; needs the `ray` extra). Same result.", choices=("local", "ray"), volatile=True)
    ray_address: str = opt("", help="With --engine ray: the Ray cluster to join (HOST:PORT, or auto); empty: start a local Ray cluster for this run.", volatile=True)
    force: bool = opt(False, help=FORCE_HELP, volatile=True)

    def validate(self) -> None:
        if not self.data:
            raise BadInput("--data is required: the output folder of `xlp bpe apply`", path="--data")
        if not self.k or any(k <= 0 for k in self.k):
            raise BadInput("--k must be one or more positive numbers", path="--k")
        if self.min_count < 1:
            raise BadInput("--min-count must be at least 1", path="--min-count")
        if self.ray_address and self.engine != "ray":
            raise BadInput("--ray-address needs --engine ray", path="--ray-address")
        self.k = sorted(set(self.k))
