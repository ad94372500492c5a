"""The artifact format's self-description: its version, the key-value metadata of every Parquet shard (stage,
version, split, language, column meanings), the dictionary's id layout, file modes, sibling stage folders.

docs/artifacts.md is the human description, docs/manifest.schema.json the manifest's JSON Schema.
Format versions: 1 = xlp 0.1 (manifests without `format_version`; `xlp prepare --bpe-codes` kept `bpe/` and `ids/`
inside its folder); 2 = every stage folder stands alone (siblings), shards and manifests describe themselves;
3 = shards in two datasets beside the sidecar files, `OUT/mono/<split>/<lang>/` and `OUT/pairs/<split>/<l1-l2>/`,
every row carrying its `split` and `lang` / `pair` as columns (`shard_dir`, THE path of a shard folder).
A reader accepts 1-3 (`read_dir` finds the shards of a version 1-2 folder at `OUT/<split>/<group>/`) and refuses
a newer version with one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xlp_cli.artifacts.files import inside
from xlp_cli.artifacts.special_ids import N_SPECIAL, SPECIAL_TOKENS
from xlp_cli.core.errors import BadInput

FORMAT_VERSION = 3
SPLITS = ("train", "valid", "test")
# The two datasets of a stage folder that holds text shards: one table each, nothing but shards below them, so
# every whole-folder reader (pandas, pyarrow, HF datasets, duckdb, polars) reads OUT/mono or OUT/pairs in one call.
# The sidecar files (manifest.json, dict.txt, codes, vocab, spm.model) stay at OUT's top, beside the datasets.
MONO, PAIRS = "mono", "pairs"
DATASETS = (MONO, PAIRS)
# The columns every text shard carries so that a reader that ignores paths loses nothing: (mono) split, lang;
# (pairs) split, pair. Not Hive folder names: pandas and pyarrow.dataset infer a Hive key's type differently
# (dictionary / string), so no column type lets both read a Hive folder whose files hold the column, and
# polars' glob scan and HF datasets read no Hive keys at all (docs/artifacts.md).
PARTITION_COLUMNS = {MONO: ("split", "lang"), PAIRS: ("split", "pair")}
META_PREFIX = "xlp."  # Parquet key-value metadata keys: xlp.stage, xlp.format_version, xlp.columns, ...

_TEXT = "processed text (normalized, Moses-tokenized, lowercased per --lowercase); tokens separated by one space"
_RAW = "cleaned, untokenized text"
_SUB = "BPE subwords of the processed text ('@@' ends a subword that continues), separated by one space"
_IDS = "token ids into the folder's dict.txt: id = line index (0-based) + 14; specials 0-13; no </s>"
_SPLIT = "the split: train, valid or test (the shard's folder <split>)"
_PAIR = "the language pair l1-l2 (the shard's folder)"
COLUMNS: dict[str, dict[str, str]] = {
    "prepare": {
        "id": "stable record id: sha1(source + lang + text), 16 hex chars", "source": "input source name",
        "split": _SPLIT, "pair": _PAIR, "lang": "ISO language code", "raw": _RAW, "text": _TEXT,
        "lang1": "language of side 1", "lang2": "language of side 2", "raw1": _RAW + " (side 1)",
        "raw2": _RAW + " (side 2)", "text1": _TEXT + " (side 1)", "text2": _TEXT + " (side 2)"},
    "bpe-apply": {
        "id": "the prepare record id", "split": _SPLIT, "pair": _PAIR, "lang": "ISO language code", "text": _SUB,
        "ids": _IDS,
        "lang1": "language of side 1", "lang2": "language of side 2", "text1": _SUB + " (side 1)",
        "text2": _SUB + " (side 2)", "ids1": _IDS + " (side 1)", "ids2": _IDS + " (side 2)"},
    "vocab-score": {
        "token": "the dictionary token", "id": "its id in the dictionary (line index + 14)",
        "lang": "the language it is scored for", "count_l": "its count in that language",
        "count_other": "its count in all other languages", "m": "the VLE score m(x) (inf: seen only in lang)",
        "rank": "rank of the token for lang, 1 = best"},
}


def shard_metadata(stage: str, columns: list[str], **extra: Any) -> dict[bytes, bytes]:
    """The key-value metadata every Parquet shard of `stage` carries (docs/artifacts.md)."""
    meanings = COLUMNS.get(stage, {})
    meta = {"stage": stage, "format_version": str(FORMAT_VERSION),
            "columns": json.dumps({c: meanings.get(c, "") for c in columns}, ensure_ascii=False)}
    if any(c.startswith("ids") for c in columns):
        meta["first_word_id"] = str(N_SPECIAL)
    meta.update({k: str(v) for k, v in extra.items() if v is not None})
    return {(META_PREFIX + k).encode(): v.encode("utf-8") for k, v in meta.items()}


def dataset_of(group: str) -> str:
    """The dataset of a language (`mono`) or a pair `l1-l2` (`pairs`: a pair has a "-", a language code never)."""
    return PAIRS if "-" in group else MONO


def shard_dir(folder: str | Path, split: str, group: str) -> Path:
    """THE folder of the shards of (split, language or pair) in a stage folder: `folder/<mono|pairs>/<split>/<group>`.
    Every writer names its shards here, every reader finds them with `read_dir`."""
    return Path(folder) / dataset_of(group) / split / group


def shard_rel(split: str, group: str, name: str) -> str:
    """A shard's path relative to its stage folder (the manifest's key): `<mono|pairs>/<split>/<group>/<name>`."""
    return (shard_dir(".", split, group) / name).as_posix()


def is_legacy(folder: str | Path) -> bool:
    """A format 1-2 folder: shards at `<split>/<group>/`, no `mono/` or `pairs/` dataset."""
    folder = Path(folder)
    return (not any((folder / d).is_dir() for d in DATASETS)
            and any((folder / s).is_dir() for s in SPLITS))


def read_dir(folder: str | Path, split: str, group: str) -> Path:
    """Where a reader finds the shards of (split, group): `shard_dir`, or `folder/<split>/<group>` in a format 1-2
    folder."""
    return Path(folder) / split / group if is_legacy(folder) else shard_dir(folder, split, group)


def splits(folder: str | Path) -> list[str]:
    """The split folders (`train`, `valid`, `test`, or any other name found) of a stage folder, in name order."""
    folder = Path(folder)
    parents = [folder] if is_legacy(folder) else [folder / d for d in DATASETS]
    return sorted({p.name for parent in parents if parent.is_dir() for p in parent.iterdir()
                   if p.is_dir() and not p.name.startswith(".") and (parent != folder or p.name in SPLITS)})


def groups(folder: str | Path, split: str) -> list[str]:
    """The languages and pairs with a shard folder in `split` (both datasets; format 1-2 too), in name order."""
    folder = Path(folder)
    parents = [folder / split] if is_legacy(folder) else [folder / d / split for d in DATASETS]
    return sorted(p.name for parent in parents if parent.is_dir() for p in parent.iterdir() if p.is_dir())


def partition_of(rel: Path) -> dict[str, str]:
    """{split, lang | pair} of a shard path relative to its folder: `<mono|pairs>/<split>/<group>/part-N.parquet`
    (format 1-2: `<split>/<group>/part-N.parquet`)."""
    parts = Path(rel).parts
    if len(parts) == 4 and parts[0] in DATASETS:
        parts = parts[1:]
    if len(parts) != 3:
        return {}
    return {"split": parts[0], "pair" if "-" in parts[1] else "lang": parts[1]}


def dictionary_layout() -> dict[str, Any]:
    """What the manifest says about dict.txt, so that nobody reads line numbers as ids."""
    return {"file_format": "one 'token count' per line, in id order", "first_word_id": N_SPECIAL,
            "rule": f"id = line index (0-based) + {N_SPECIAL}",
            "specials": {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}}


def check_format(manifest: dict[str, Any], path: Path) -> int:
    """The manifest's format version (1 when it has none); a version this xlp does not know is one line."""
    v = manifest.get("format_version", 1)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise BadInput(f"manifest format_version {v!r} is not a positive integer", path=path)
    if v > FORMAT_VERSION:
        raise BadInput(f"written by a newer xlp (artifact format {v}; this xlp reads 1-{FORMAT_VERSION}): "
                       "upgrade xlp to read it", path=path)
    return v


def _named(folder: Path) -> Path:
    """`folder`, or its absolute path when it has no name of its own (`.`, `..`), so that `.parent` is beside it."""
    folder = Path(folder)
    return folder if folder.name not in ("", ".", "..") else folder.resolve()


def sibling(out: Path, stage: str) -> Path:
    """The folder `xlp prepare --bpe-codes/--bpe-from` writes a sub-stage into: OUT-bpe / OUT-ids beside OUT."""
    out = _named(out)
    return out.parent / f"{out.name}-{stage}"


def linked_folder(folder: Path, rel: Any, what: str, source: Path) -> Path:
    """A stage folder named by a manifest's `outputs.bpe/ids`: `../NAME` (format 2: a sibling of `folder`, one plain
    name, never further) or a relative path inside `folder` (format 1)."""
    if isinstance(rel, str) and rel.startswith("../"):
        name = rel[3:]
        if not name or "/" in name or name in (".", ".."):
            raise BadInput(f"{what} {rel!r} is not a sibling folder name; refused", path=source)
        return _named(folder).parent / name
    return inside(folder, rel, what, source)
