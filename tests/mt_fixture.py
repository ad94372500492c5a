"""Build small real parallel data for translation tests, in the prepare / bpe-apply contract
(docs/architecture.md), from Multi30k in the shared corpora: real sentences, the real text pipeline
(Moses tokenizer), real fastBPE codes (XLM's codes_xnli_15), a dictionary of the slice's subwords.

Nothing is copied into the repository: the folders are written under pytest's tmp_path.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa

from xlp_cli.artifacts.manifest import new_manifest, write_manifest
from xlp_cli.artifacts.shards import write_shard
from xlp_cli.bpe.codes import BpeCodec
from xlp_cli.bpe.dictionary import Dictionary
from xlp_cli.text.pipeline import TextPipeline

PIPELINE = {"clean": True, "normalize": True, "tokenize": "moses", "lowercase": "none"}


def multi30k_lines(data: Path, split: str, lang: str, start: int, n: int) -> list[str]:
    with gzip.open(data / "multi30k" / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[start:start + n]


def build(tmp: Path, data: Path, pairs: dict[str, dict[str, tuple]], max_words: int = 0) -> Path:
    """pairs: {"de-en": {"train": ("train", start, n[, limit]), "valid": (...), "test": (...)}} -> the IDS folder.

    Each split entry names the Multi30k file split and a line range; `max_words` drops pairs with a longer
    side, then at most `limit` pairs are kept.
    """
    pipe = TextPipeline.from_config(PIPELINE)
    codes = data / "xlm_bpe_xnli15" / "codes_xnli_15"
    bpe = BpeCodec(codes, None, check=False)
    prep, ids_dir = tmp / "prep", tmp / "ids"
    rows: dict[tuple[str, str], dict[str, list]] = {}
    counts: Counter = Counter()
    for pair, splits in pairs.items():
        l1, l2 = pair.split("-")
        for split, (mfile, start, n, *limit) in splits.items():
            raw1 = [pipe.raw(t) for t in multi30k_lines(data, mfile, l1, start, n)]
            raw2 = [pipe.raw(t) for t in multi30k_lines(data, mfile, l2, start, n)]
            text1, text2 = pipe.process_batch(raw1, l1), pipe.process_batch(raw2, l2)
            keep = [i for i in range(len(raw1)) if not max_words or max(len(text1[i].split()), len(text2[i].split())) <= max_words]
            keep = keep[: limit[0]] if limit else keep
            sub1 = bpe.apply_lines([text1[i] for i in keep])
            sub2 = bpe.apply_lines([text2[i] for i in keep])
            rid = [hashlib.sha1(f"multi30k|{pair}|{text1[i]}|{text2[i]}".encode()).hexdigest()[:16] for i in keep]
            rows[(split, pair)] = {"id": rid, "raw1": [raw1[i] for i in keep], "raw2": [raw2[i] for i in keep],
                                   "text1": [text1[i] for i in keep], "text2": [text2[i] for i in keep],
                                   "sub1": sub1, "sub2": sub2, "l1": l1, "l2": l2}
            if split == "train":
                for s in sub1 + sub2:
                    counts.update(s.split())
    dico = Dictionary.from_counts(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    prep_counts: dict[str, dict[str, int]] = {}
    # the manifests list every shard (the whole truth), without sha256: tests damage these shards on purpose to
    # reach the checks of the readers behind verify_shards
    shards: dict[Path, dict[str, dict]] = {prep: {}, ids_dir: {}}
    for (split, pair), r in rows.items():
        n = len(r["id"])
        rel = f"{split}/{pair}/part-00000.parquet"
        shards[prep][rel] = shards[ids_dir][rel] = {"rows": n}
        write_shard(prep / rel, pa.table({
            "id": r["id"], "source": ["multi30k"] * n, "lang1": [r["l1"]] * n, "lang2": [r["l2"]] * n,
            "raw1": r["raw1"], "raw2": r["raw2"], "text1": r["text1"], "text2": r["text2"]}))
        write_shard(ids_dir / rel, pa.table({
            "id": r["id"], "lang1": [r["l1"]] * n, "lang2": [r["l2"]] * n, "text1": r["sub1"], "text2": r["sub2"],
            "ids1": pa.array([dico.encode(s.split()).tolist() for s in r["sub1"]], pa.list_(pa.int32())),
            "ids2": pa.array([dico.encode(s.split()).tolist() for s in r["sub2"]], pa.list_(pa.int32()))}))
        prep_counts.setdefault(split, {})[pair] = n
    write_manifest(prep, new_manifest("prepare", dict(PIPELINE, source="multi30k-test-slice"),
                                                           counts=prep_counts, outputs={"shards": shards[prep]}))
    dico.write(ids_dir / "dict.txt")
    shutil.copyfile(codes, ids_dir / "codes")  # an `xlp bpe apply` folder holds the tokenizer files it names
    m = new_manifest("bpe-apply", {"codes": str(codes)}, counts=prep_counts, dictionary="dict.txt",
                     tokenizer={"kind": "fastbpe", "codes": "codes", "vocab": None, "dict": "dict.txt"},
                     upstream=[{"path": str(prep), "stage": "prepare"}], outputs={"shards": shards[ids_dir]})
    write_manifest(ids_dir, m)
    return ids_dir
