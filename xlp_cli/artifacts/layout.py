"""The artifact format's self-description: its version, the key-value metadata of every Parquet shard (stage,
version, split, language, column meanings), the dictionary's id layout, file modes, sibling stage folders.

docs/artifacts.md is the human description, docs/manifest.schema.json the manifest's JSON Schema.
Format versions: 1 = xlp 0.1 (manifests without `format_version`; `xlp prepare --bpe-codes` kept `bpe/` and `ids/`
inside its folder); 2 = every stage folder stands alone (siblings), shards and manifests describe themselves.
A reader accepts 1 and 2 and refuses a newer version with one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xlp_cli.artifacts.files import inside
from xlp_cli.artifacts.special_ids import N_SPECIAL, SPECIAL_TOKENS
from xlp_cli.core.errors import BadInput

FORMAT_VERSION = 2
# The files a shard folder holds beside its shards (prepare: manifest.json; bpe-apply: also the tokenizer files).
# pyarrow (so pandas) skips names starting with "." or "_" only: `pd.read_parquet(OUT, ignore_prefixes=[...])`.
NON_SHARD_PREFIXES = (".", "_", "manifest.json", "dict.txt", "codes", "vocab", "spm.model")
META_PREFIX = "xlp."  # Parquet key-value metadata keys: xlp.stage, xlp.format_version, xlp.columns, ...

_TEXT = "processed text (normalized, Moses-tokenized, lowercased per --lowercase); tokens separated by one space"
_RAW = "cleaned, untokenized text"
_SUB = "BPE subwords of the processed text ('@@' ends a subword that continues), separated by one space"
_IDS = "token ids into the folder's dict.txt: id = line index (0-based) + 14; specials 0-13; no </s>"
COLUMNS: dict[str, dict[str, str]] = {
    "prepare": {
        "id": "stable record id: sha1(source + lang + text), 16 hex chars", "source": "input source name",
        "lang": "ISO language code", "raw": _RAW, "text": _TEXT,
        "lang1": "language of side 1", "lang2": "language of side 2", "raw1": _RAW + " (side 1)",
        "raw2": _RAW + " (side 2)", "text1": _TEXT + " (side 1)", "text2": _TEXT + " (side 2)"},
    "bpe-apply": {
        "id": "the prepare record id", "lang": "ISO language code", "text": _SUB, "ids": _IDS,
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


def partition_of(rel: Path) -> dict[str, str]:
    """{split, lang | pair} of a shard path `<split>/<lang or l1-l2>/part-N.parquet` relative to its folder."""
    parts = rel.parts
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
