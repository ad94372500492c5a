"""The `xlp vocab-score` stage: count tokens per language on the train id shards, score m(x), keep top-K.

Reads IDS/ (the output of `xlp bpe apply`), writes VOCAB/scores/vocab_scores.parquet (SCORES: a folder of
nothing but the Parquet table, so that whole-folder readers read it in one call), VOCAB/vle_vocab.json and a
manifest; the terminal gets a table of each language's top tokens.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xlp_cli.artifacts import datadirs, layout, outdir
from xlp_cli.artifacts.files import sha256_file, write_json_atomic
from xlp_cli.artifacts.manifest import find_upstream, ids_dictionary, new_manifest, read_manifest, write_manifest
from xlp_cli.artifacts.shards import shard_entry, shard_paths, write_shard
from xlp_cli.bpe.dictionary import Dictionary
from xlp_cli.core import ui
from xlp_cli.core.config import to_dict
from xlp_cli.core.errors import BadInput
from xlp_cli.vocab.config import VocabConfig
from xlp_cli.vocab.ray_count import count_languages
from xlp_cli.vocab.scoring import count_shards, is_nonword, rank

STAGE = "vocab-score"
SCORES = "scores/vocab_scores.parquet"
OWNS = ("scores", "vocab_scores.parquet", "vle_vocab.json")  # (format 1-2: vocab_scores.parquet at the top)
RULE = ("m(x) = C_l(x) / C_!=l(x); tokens with C_!=l(x) = 0 get m = inf and rank above all shared tokens, "
        "by C_l(x) desc; shared tokens by m desc, then C_l(x) desc; ties by id")


def _ids_folder(data: list[Path]) -> tuple[Path, dict[str, Any]]:
    datadirs.only_one(data, "bpe-apply", "`xlp vocab-score`")
    found = find_upstream(data, "bpe-apply")  # (also inside a `xlp prepare --bpe-codes` folder)
    if found is None:
        for d in data:
            m = read_manifest(d)
            raise BadInput(f"expected the output of `xlp bpe apply` (token-id shards), found `xlp {m['stage']}`", path=d)
        raise BadInput("no `xlp bpe apply` output among --data", path=data[0])
    return found


def language_shards(ids_dir: Path, split: str, langs: list[str], parallel: bool) -> dict[str, list[tuple[Path, str]]]:
    src: dict[str, list[tuple[Path, str]]] = {}
    pairs: list[tuple[list[Path], Path]] = []
    split_dir = ids_dir / split
    if split not in layout.splits(ids_dir):
        raise BadInput(f"no {split} split in the id shards", path=split_dir)
    for d in [layout.read_dir(ids_dir, split, g) for g in layout.groups(ids_dir, split)]:
        shards = shard_paths(d)
        if not shards:
            continue
        try:
            names = set(pq.read_schema(shards[0]).names)
        except Exception as e:
            raise BadInput(f"not a readable Parquet shard ({e})", path=shards[0]) from None
        if "ids" in names:
            src.setdefault(d.name, []).extend((s, "ids") for s in shards)
        elif {"ids1", "ids2"} <= names:
            pairs.append((shards, d))
            if parallel:
                for side, lang in zip(("1", "2"), d.name.split("-", 1)):
                    src.setdefault(lang, []).extend((s, "ids" + side) for s in shards)
        else:
            raise BadInput("shard has no ids column: text shards, not `xlp bpe apply` output", path=shards[0])
    if not src and pairs and not parallel:  # a parallel-only corpus: each side of a pair counts for its language
        ui.info(f"no monolingual {split} id shards: counting both sides of the parallel folders (as --parallel)")
        for shards, d in pairs:
            for side, lang in zip(("1", "2"), d.name.split("-", 1)):
                src.setdefault(lang, []).extend((s, "ids" + side) for s in shards)
    if langs:
        missing = [l for l in langs if l not in src]
        if missing:
            raise BadInput(f"no {split} data for language(s) {', '.join(missing)}", path=split_dir)
        src = {l: src[l] for l in langs}
    if not src:
        raise BadInput(f"no {split} id shards", path=split_dir)
    return src


@outdir.scoped
def run(cfg: VocabConfig) -> dict[str, Any]:
    t0 = time.time()
    ids_dir, ids_m = _ids_folder(cfg.data)
    dict_path, dict_sha = ids_dictionary(ids_dir, ids_m)
    dico = Dictionary.read(dict_path)

    config = to_dict(cfg)
    for key in ("force", "show", "engine", "ray-address"):  # they do not change the result
        config.pop(key)
    out = Path(cfg.out)
    sources = language_shards(ids_dir, cfg.split, cfg.lang, cfg.parallel)
    langs = sorted(sources)
    if cfg.engine == "ray":
        counts = count_languages([sources[lang] for lang in langs], len(dico), cfg.ray_address)
    else:
        counts = np.zeros((len(langs), len(dico)), dtype=np.int64)
        for li, lang in enumerate(langs):
            counts[li] = count_shards(sources[lang], len(dico))
    n_tokens = int(counts.sum())
    empty = [l for li, l in enumerate(langs) if counts[li].sum() == 0]
    if empty:
        raise BadInput(f"language(s) {', '.join(empty)} have no tokens in the {cfg.split} split", path=ids_dir / cfg.split)
    # counting is cheap: only now, with the input known good, touch --out (resume = nothing left to do)
    previous = outdir.guard_out_dir(out, STAGE, config, force=cfg.force, owns=OWNS)
    if previous and previous.get("complete") and (out / "vle_vocab.json").is_file():
        ui.info(f"{out}: already scored with this config; nothing to do")
        return dict(previous["summary"], skipped=True)
    warnings: list[str] = []
    if len(langs) == 1:
        warnings.append("only one language: every token is exclusive, so the ranking is by frequency")
    exclude = np.array([is_nonword(w) for w in dico.words]) if cfg.words_only else None
    ranks = rank(counts, langs, min_count=cfg.min_count, exclude=exclude)

    vle: dict[str, Any] = {"k": cfg.k, "langs": {}, "dictionary_sha256": dict_sha, "dictionary_size": len(dico),
                           "rule": RULE}
    for lang in langs:
        r = ranks[lang]
        vle["langs"][lang] = {str(k): r.ids[:k].astype(int).tolist() for k in cfg.k}
        if len(r.ids) < max(cfg.k):
            msg = f"{lang}: only {len(r.ids)} candidate tokens, fewer than K={max(cfg.k)}; keeping all of them"
            warnings.append(msg)
            ui.warn(msg)

    table = pa.table({
        "token": pa.array([dico.words[i] for l in langs for i in ranks[l].ids], pa.string()),
        "id": pa.array(np.concatenate([ranks[l].ids for l in langs]).astype(np.int32)),
        "lang": pa.array([l for l in langs for _ in ranks[l].ids], pa.string()),
        "count_l": pa.array(np.concatenate([ranks[l].count_l for l in langs])),
        "count_other": pa.array(np.concatenate([ranks[l].count_other for l in langs])),
        "m": pa.array(np.concatenate([ranks[l].m for l in langs]).astype(np.float64)),
        "rank": pa.array(np.concatenate([np.arange(1, len(ranks[l].ids) + 1) for l in langs]).astype(np.int32)),
    })
    sha = write_shard(out / SCORES, table, stage="vocab-score")
    write_json_atomic(out / "vle_vocab.json", vle)

    top = {l: [dico.words[i] for i in ranks[l].ids[: cfg.show]] for l in langs}
    summary = {"out": str(out), "languages": len(langs), "tokens_counted": n_tokens, "dictionary_size": len(dico),
               "k": ",".join(map(str, cfg.k)), "candidates": {l: int(len(ranks[l].ids)) for l in langs},
               "exclusive": {l: int(np.isinf(ranks[l].m).sum()) for l in langs},
               "seconds": round(time.time() - t0, 3), "top": top,
               "top_m": {l: [float(x) for x in ranks[l].m[: cfg.show]] for l in langs}}
    manifest = new_manifest(
        STAGE, config, upstream=[{"path": str(ids_dir.resolve()), "stage": "bpe-apply", "config_hash": ids_m.get("config_hash")}],
        outputs={SCORES: shard_entry(out / SCORES, table.num_rows, sha),
                 "vle_vocab.json": {"sha256": sha256_file(out / "vle_vocab.json")}},
        counts={l: int(counts[li].sum()) for li, l in enumerate(langs)}, warnings=warnings,
        dictionary_sha256=dict_sha, rule=RULE, summary=summary, complete=True,
    )
    write_manifest(out, manifest)
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title=f"xlp vocab-score: top tokens per language ({summary['tokens_counted']:,} tokens counted)")
    t.add_column("lang", style="bold")
    t.add_column("candidates", justify="right")
    t.add_column("exclusive", justify="right")
    t.add_column("top tokens (m)")
    for lang, toks in summary.get("top", {}).items():
        ms = summary.get("top_m", {}).get(lang, [])
        shown = "  ".join(f"{tok} ({'∞' if m == float('inf') else f'{m:.1f}'})" for tok, m in zip(toks, ms))
        t.add_row(lang, str(summary["candidates"][lang]), str(summary["exclusive"][lang]), shown)
    ui.out.print(t)
    ui.out.print(f"wrote {summary['out']}/vle_vocab.json (K = {summary['k']}) and {SCORES} "
                 f"in {summary['seconds']} s")
