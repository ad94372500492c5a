"""Parallel id data for translation: read `xlp bpe apply` pair folders, batch by token count, mix directions.

    corpus = read_pairs(IDS, "train", langs={"de", "en"})     # {"de-en": Pairs, ...} per pair folder
    dirs = directions_for(corpus, mix="many-to-one", target="en")
    batcher = MixedBatcher({d: corpus[d].direction(d) for d in dirs}, max_tokens=4096, temperature=1.0, seed=1)
    for step in ...: direction, x, y = batcher.next()       # DDP: batcher.next(rank, world)

A pair folder `<l1>-<l2>` (columns id, lang1, lang2, ids1, ids2; see docs/architecture.md) serves both
directions l1->l2 and l2->l1. Sentences are stored without `</s>`; `collate` right-pads and the model
adds `</s>` (`seq2seq.targets`).

Temperature sampling (many-to-one / many-to-many mixing): direction d is drawn with probability
p_d ~ (n_d / N) ** (1 / T), n_d its number of sentence pairs. T = 1 samples in proportion to size (the
paper's plain concatenation); larger T flattens towards uniform. Each direction's batches are reshuffled
on every pass (a pure function of seed, direction and pass, so a resumed run continues the same order).
Under DDP every process runs the same batcher and a step consumes `world` batches of that order, process r
training the r-th (`MixedBatcher.next(rank, world)`).
"""

from __future__ import annotations

import dataclasses
import zlib
from pathlib import Path

import numpy as np
import torch

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.shards import read_shard, shard_paths
from xlp_cli.core.errors import BadInput
from xlp_cli.train.sentences import collate  # noqa: F401  (re-exported: the translation code's batches)

MIXES = ("many-to-one", "many-to-many")


@dataclasses.dataclass
class Pairs:
    """The sentence pairs of one direction (or one pair folder: src = side 1)."""

    src_lang: str
    tgt_lang: str
    ids: list[str]
    src: list[np.ndarray]
    tgt: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.src)

    def reversed(self) -> "Pairs":
        return Pairs(self.tgt_lang, self.src_lang, self.ids, self.tgt, self.src)

    def direction(self, name: str) -> "Pairs":
        s, t = split_direction(name)
        if (s, t) == (self.src_lang, self.tgt_lang):
            return self
        if (t, s) == (self.src_lang, self.tgt_lang):
            return self.reversed()
        raise BadInput(f"direction {name} is not served by the pair {self.src_lang}-{self.tgt_lang}")

    def take(self, n: int) -> "Pairs":
        if n <= 0 or n >= len(self):
            return self
        return Pairs(self.src_lang, self.tgt_lang, self.ids[:n], self.src[:n], self.tgt[:n])


def split_direction(name: str) -> tuple[str, str]:
    parts = name.split("-")
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise BadInput(f"bad direction {name!r}: expected SRC-TGT like de-en")
    return parts[0], parts[1]


def pair_folders(ids_dir: Path, split: str) -> dict[str, Path]:
    return {g: p for g in layout.groups(ids_dir, split) if "-" in g
            for p in [layout.read_dir(ids_dir, split, g)] if shard_paths(p)}


def read_pair_folder(folder: Path, *, max_rows: int = 0) -> Pairs:
    """Read one `<l1>-<l2>` folder, checking that both sides are there on every row."""
    l1, l2 = split_direction(folder.name)
    ids: list[str] = []
    src: list[np.ndarray] = []
    tgt: list[np.ndarray] = []
    for shard in shard_paths(folder):
        table = read_shard(shard)
        missing = [c for c in ("ids1", "ids2") if c not in table.column_names]
        if missing:
            raise BadInput(f"not a parallel id shard: no column {', '.join(missing)} (run `xlp bpe apply` on a "
                           "prepared parallel corpus)", path=shard)
        cols = table.to_pydict()
        n = table.num_rows
        rid = cols.get("id") or [str(i) for i in range(n)]
        for side, lang in (("lang1", l1), ("lang2", l2)):
            vals = cols.get(side)
            if vals is not None:
                bad = next((i for i, v in enumerate(vals) if v != lang), None)
                if bad is not None:
                    raise BadInput(f"mismatched sides: row says {side}={vals[bad]!r} in folder {folder.name}",
                                   path=shard, position=f"row {bad}")
        for i, (a, b) in enumerate(zip(cols["ids1"], cols["ids2"])):
            if not a or not b:
                which = "ids1" if not a else "ids2"
                raise BadInput(f"mismatched sides: {which} is empty while the other side has "
                               f"{len(b or a or [])} tokens (id {rid[i]})", path=shard, position=f"row {i}")
            ids.append(str(rid[i]))
            src.append(np.asarray(a, dtype=np.int64))
            tgt.append(np.asarray(b, dtype=np.int64))
            if max_rows and len(src) >= max_rows:
                return Pairs(l1, l2, ids, src, tgt)
    return Pairs(l1, l2, ids, src, tgt)


def read_pairs(ids_dir: Path, split: str, langs: set[str] | None = None, *, max_rows: int = 0) -> dict[str, Pairs]:
    out = {}
    for name, folder in pair_folders(ids_dir, split).items():
        l1, l2 = split_direction(name)
        if langs and not (l1 in langs and l2 in langs):
            continue
        out[name] = read_pair_folder(folder, max_rows=max_rows)
    return out


def serve(corpus: dict[str, Pairs], direction: str) -> Pairs | None:
    """The pairs for `direction` from whichever pair folder holds it (either orientation), or None."""
    s, t = split_direction(direction)
    for name in (f"{s}-{t}", f"{t}-{s}"):
        if name in corpus and len(corpus[name]):
            return corpus[name].direction(direction)
    return None


def directions_for(corpus: dict[str, Pairs], mix: str, target: str, exclude: set[str] = frozenset()) -> list[str]:
    """Training directions: many-to-one = every X-target pair as X->target; many-to-many = both ways."""
    out: list[str] = []
    for name in corpus:
        l1, l2 = split_direction(name)
        if mix == "many-to-one":
            if target not in (l1, l2):
                continue
            other = l2 if l1 == target else l1
            cands = [f"{other}-{target}"]
        else:
            cands = [f"{l1}-{l2}", f"{l2}-{l1}"]
        for d in cands:
            if d not in exclude and d not in out:
                out.append(d)
    return out


# ----------------------------------------------------------------------------------------------- batches
def token_batches(pairs: Pairs, max_tokens: int, order: np.ndarray | None = None) -> list[np.ndarray]:
    """Index batches with n * (longest side + 1) <= max_tokens (padding included), sentences sorted by length."""
    lens = np.array([max(len(a), len(b)) + 1 for a, b in zip(pairs.src, pairs.tgt)], dtype=np.int64)
    idx = np.argsort(lens, kind="stable") if order is None else order
    batches, cur, longest = [], [], 0
    for i in idx:
        L = int(lens[i])
        if cur and max(longest, L) * (len(cur) + 1) > max_tokens:
            batches.append(np.array(cur))
            cur, longest = [], 0
        cur.append(int(i))
        longest = max(longest, L)
    if cur:
        batches.append(np.array(cur))
    return batches


def _stable_seed(*parts: object) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode()) & 0x7FFFFFFF


class MixedBatcher:
    """Batches from several directions, a direction drawn per step with temperature sampling."""

    def __init__(self, data: dict[str, Pairs], max_tokens: int, temperature: float = 1.0, seed: int = 0):
        if not data:
            raise BadInput("no training directions")
        self.data, self.seed = data, seed
        self.names = list(data)
        self.batches = {d: token_batches(p, max_tokens) for d, p in data.items()}
        sizes = np.array([len(data[d]) for d in self.names], dtype=np.float64)
        w = (sizes / sizes.sum()) ** (1.0 / max(temperature, 1e-6))
        self.probs = w / w.sum()
        self.state = {"draws": 0, "pos": {d: [0, 0] for d in self.names}}  # pos[d] = [pass, index]
        self.last_tokens = 0

    def steps_per_epoch(self, world: int = 1) -> int:
        """Steps for one pass over every direction's batches when each step trains `world` batches."""
        return -(-sum(len(b) for b in self.batches.values()) // max(world, 1))

    def _order(self, d: str, epoch: int) -> np.ndarray:
        return np.random.default_rng(_stable_seed(self.seed, d, epoch)).permutation(len(self.batches[d]))

    def _draw(self) -> tuple[str, np.ndarray]:
        """The next (direction, sentence indices) of the global order; advances the state."""
        rng = np.random.default_rng(_stable_seed(self.seed, "mix", self.state["draws"]))
        d = self.names[int(rng.choice(len(self.names), p=self.probs))] if len(self.names) > 1 else self.names[0]
        self.state["draws"] += 1
        epoch, i = self.state["pos"][d]
        order = self._order(d, epoch)
        b = self.batches[d][order[i]]
        i += 1
        if i >= len(order):
            epoch, i = epoch + 1, 0
        self.state["pos"][d] = [epoch, i]
        return d, b

    def next(self, rank: int = 0, world: int = 1) -> tuple[str, torch.Tensor, torch.Tensor]:
        """The batch process `rank` of `world` trains this step.

        A step takes the next `world` batches of the global order (a function of the seed only) and process r
        trains the r-th: the processes' shares are disjoint, every process keeps the same state (so any
        process's checkpoint resumes all of them), and `world = 1` is the single-process order.
        `last_tokens` is then the step's target tokens (`</s>` included) over all `world` batches.
        """
        picked: tuple[str, np.ndarray] | None = None
        self.last_tokens = 0
        for r in range(max(world, 1)):
            d, b = self._draw()
            self.last_tokens += sum(len(self.data[d].tgt[j]) + 1 for j in b)
            if r == rank:
                picked = (d, b)
        assert picked is not None, (rank, world)
        d, b = picked
        p = self.data[d]
        return d, collate([p.src[j] for j in b]), collate([p.tgt[j] for j in b])
