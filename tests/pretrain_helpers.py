"""Build `xlp bpe apply` / `xlp vocab-score` output folders (real Parquet, real manifests) for pretrain tests.

Either from real BPE'd text (`/work/shared/data/xlm_parity/<lang>/bpe.txt`, read at test time, never copied into
the repo) with a dictionary counted from it, or from small synthetic id sequences.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa

from xlp_cli.artifacts.files import sha256_file, write_json_atomic
from xlp_cli.artifacts.manifest import new_manifest, write_manifest
from xlp_cli.artifacts.shards import write_shard
from xlp_cli.bpe.dictionary import Dictionary


def write_ids(root: Path, dico: Dictionary, mono: dict[str, dict[str, list[list[int]]]],
              pairs: dict[str, dict[str, list[tuple[list[int], list[int]]]]] | None = None,
              rows_per_shard: int = 10_000, row_group_size: int = 64 * 1024) -> Path:
    """mono[split][lang] = list of id sentences; pairs[split]["en-fr"] = [(ids1, ids2)]."""
    root.mkdir(parents=True, exist_ok=True)
    dico.write(root / "dict.txt")
    counts: dict[str, dict[str, int]] = {}
    shards = {}
    for split, by_lang in mono.items():
        for lang, sents in by_lang.items():
            for k in range(0, max(len(sents), 1), rows_per_shard):
                part = sents[k:k + rows_per_shard]
                table = pa.table({
                    "id": [f"{lang}{split}{k + i:08d}" for i in range(len(part))],
                    "lang": [lang] * len(part),
                    "text": [" ".join(dico.decode(s)) for s in part],
                    "ids": pa.array([np.asarray(s, dtype=np.int32) for s in part], type=pa.list_(pa.int32())),
                })
                rel = f"{split}/{lang}/part-{k // rows_per_shard:05d}.parquet"
                shards[rel] = {"sha256": write_shard(root / rel, table, row_group_size=row_group_size),
                               "rows": len(part)}
            counts.setdefault(split, {})[lang] = len(sents)
    for split, by_pair in (pairs or {}).items():
        for pair, rows in by_pair.items():
            l1, l2 = pair.split("-")
            table = pa.table({
                "id": [f"{pair}{i:08d}" for i in range(len(rows))],
                "lang1": [l1] * len(rows), "lang2": [l2] * len(rows),
                "text1": [" ".join(dico.decode(a)) for a, _ in rows],
                "text2": [" ".join(dico.decode(b)) for _, b in rows],
                "ids1": pa.array([np.asarray(a, dtype=np.int32) for a, _ in rows], type=pa.list_(pa.int32())),
                "ids2": pa.array([np.asarray(b, dtype=np.int32) for _, b in rows], type=pa.list_(pa.int32())),
            })
            rel = f"{split}/{pair}/part-00000.parquet"
            shards[rel] = {"sha256": write_shard(root / rel, table, row_group_size=row_group_size),
                           "rows": len(rows)}
            counts.setdefault(split, {})[pair] = len(rows)
    m = new_manifest("bpe-apply", {"test": True}, dictionary="dict.txt", counts=counts,
                     outputs={"shards": shards}, upstream=[])
    write_manifest(root, m)
    return root


def write_vocab(root: Path, ids_dir: Path, vle: dict[str, dict[int, list[int]]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    obj = {"k": sorted({k for v in vle.values() for k in v}),
           "langs": {lang: {str(k): ids for k, ids in by_k.items()} for lang, by_k in vle.items()},
           "dictionary_sha256": sha256_file(ids_dir / "dict.txt")}
    write_json_atomic(root / "vle_vocab.json", obj)
    write_manifest(root, new_manifest("vocab-score", {"test": True},
                                                          upstream=[{"path": str(ids_dir), "stage": "bpe-apply"}]))
    return root


def synthetic(root: Path, langs=("en", "fr"), n_words: int = 200, n_sent: int = 300, seed: int = 0,
              pairs: bool = False, rows_per_shard: int = 10_000, row_group_size: int = 64 * 1024) -> Path:
    """Random sentences over a made-up dictionary, each language drawing from its own half of the words."""
    rng = np.random.default_rng(seed)
    dico = Dictionary.from_counts([(f"w{i}", 1000 - i) for i in range(n_words)])
    V = len(dico)
    half = (V - 14) // len(langs)
    def sents(li: int, n: int) -> list[list[int]]:
        lo = 14 + li * half
        return [rng.integers(lo, lo + half, size=int(rng.integers(3, 20))).tolist() for _ in range(n)]
    mono = {"train": {l: sents(i, n_sent) for i, l in enumerate(langs)},
            "valid": {l: sents(i, 40) for i, l in enumerate(langs)}}
    par = None
    if pairs:
        par = {"train": {f"{langs[0]}-{langs[1]}": list(zip(sents(0, n_sent // 2), sents(1, n_sent // 2)))}}
    return write_ids(root, dico, mono, par, rows_per_shard=rows_per_shard, row_group_size=row_group_size)


def real_text(root: Path, data_dir: Path, langs=("en", "fr", "de"), n_valid: int = 25) -> Path:
    """Real XLM BPE'd sentences of xlm_parity, a dictionary counted from them (XLM layout)."""
    lines = {l: (data_dir / "xlm_parity" / l / "bpe.txt").read_text(encoding="utf-8").split("\n") for l in langs}
    lines = {l: [s for s in v if s.strip()] for l, v in lines.items()}
    counter: Counter[str] = Counter()
    for l in langs:
        for s in lines[l][:-n_valid]:
            counter.update(s.split())
    dico = Dictionary.from_counts(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))
    mono = {"train": {l: [dico.encode(s.split()).tolist() for s in lines[l][:-n_valid]] for l in langs},
            "valid": {l: [dico.encode(s.split()).tolist() for s in lines[l][-n_valid:]] for l in langs}}
    return write_ids(root, dico, mono)
