"""Prepare-shaped folders for the bpe/vocab tests: real zstd Parquet shards + a `prepare` manifest,
written through xlp_cli.artifacts exactly as `xlp prepare` lays them out (docs/architecture.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa

from xlp_cli.artifacts.files import data_dir
from xlp_cli.artifacts.manifest import new_manifest, write_manifest
from xlp_cli.artifacts.shards import write_shard

PARITY_LANGS = "en fr es de el bg ru tr ar vi th zh hi sw ur".split()


def _id(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def make_prepared(root: Path, mono: dict[str, list[str]] | None = None, *, raw: dict[str, list[str]] | None = None,
                  pairs: dict[str, list[tuple[str, str]]] | None = None, split: str = "train",
                  shard_rows: int = 0, config: dict | None = None) -> Path:
    """Write OUT/<split>/<lang>/part-*.parquet (id, source, lang, raw, text) and pair folders; return OUT."""
    root = Path(root)
    shards: dict[str, dict] = {}
    counts: dict[str, dict[str, int]] = {split: {}}
    for lang, lines in (mono or {}).items():
        raws = (raw or {}).get(lang, lines)
        step = shard_rows or max(1, len(lines))
        for k, start in enumerate(range(0, max(1, len(lines)), step)):
            part = lines[start:start + step]
            rpart = raws[start:start + step]
            t = pa.table({"id": [_id("fixture", lang, x) for x in part], "source": ["fixture"] * len(part),
                          "lang": [lang] * len(part), "raw": rpart, "text": part},
                         schema=pa.schema([("id", pa.string()), ("source", pa.string()), ("lang", pa.string()),
                                           ("raw", pa.string()), ("text", pa.string())]))
            rel = f"{split}/{lang}/part-{k:05d}.parquet"
            shards[rel] = {"sha256": write_shard(root / rel, t), "rows": t.num_rows}
        counts[split][lang] = len(lines)
    for name, rows in (pairs or {}).items():
        l1, l2 = name.split("-")
        t = pa.table({"id": [_id("fixture", name, a, b) for a, b in rows], "source": ["fixture"] * len(rows),
                      "lang1": [l1] * len(rows), "lang2": [l2] * len(rows), "raw1": [a for a, _ in rows],
                      "raw2": [b for _, b in rows], "text1": [a for a, _ in rows], "text2": [b for _, b in rows]})
        rel = f"{split}/{name}/part-00000.parquet"
        shards[rel] = {"sha256": write_shard(root / rel, t), "rows": t.num_rows}
        counts[split][name] = len(rows)
    cfg = config or {"lowercase": "xlm", "out": str(root)}
    m = new_manifest("prepare", cfg, outputs={"shards": shards}, counts=counts)
    write_manifest(root, m)
    return root


def parity_lines(lang: str, name: str = "xlm.txt") -> list[str]:
    path = data_dir() / "xlm_parity" / lang / name
    return path.read_bytes().decode("utf-8").split("\n")[:-1]
