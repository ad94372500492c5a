"""A tokenizer rebuilt from a manifest: text lines -> subword lines -> XLM-layout ids (fastBPE or SentencePiece)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from xlp_cli.artifacts.files import inside, sha256_file
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.bpe.codes import BpeCodec
from xlp_cli.bpe.dictionary import UNK_ID, Dictionary
from xlp_cli.bpe.spm import SpmCodec
from xlp_cli.core.errors import BadInput


def column_of(kind: str, model_type: str = "") -> str:
    """Which prepare column a tokenizer learns from and reads (see `Tokenizer.column`)."""
    return "raw" if kind == "sentencepiece" and model_type != "word" else "text"


class Tokenizer:
    """What apply (and encoder.py) needs: text lines -> subword lines, subwords -> ids."""

    def __init__(self, kind: str, dico: Dictionary, codec: Any, model_type: str = ""):
        self.kind, self.dico, self.codec, self.model_type = kind, dico, codec, model_type

    @property
    def column(self) -> str:
        """The prepare column it reads: `raw` for SentencePiece (XLM-R style), the Moses-tokenized `text` for
        fastBPE and for SentencePiece's word model (a word-level vocabulary of tokenized words, VLE Table 4)."""
        return column_of(self.kind, self.model_type)

    def subwords(self, lines: list[str]) -> list[str]:
        return self.codec.apply_lines(lines)

    def encode(self, lines: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(subword lines, flat int32 ids, int32 offsets with len(lines)+1 entries)."""
        if self.kind == "fastbpe":
            return self.codec.encode_lines(lines, self.dico.index, UNK_ID)
        sub = self.subwords(lines)
        flat, offsets = self.ids(sub)
        return sub, flat, offsets

    def encode_arrow(self, lines: Any) -> tuple[Any, Any]:
        """(Arrow string array of subword lines, Arrow list<int32> array of ids): what an id shard stores.
        `lines`: a list of str or an Arrow string array (nulls read as "")."""
        if self.kind == "fastbpe":
            return self.codec.encode_arrow(lines, self.dico.words, UNK_ID)
        import pyarrow as pa

        if isinstance(lines, (pa.Array, pa.ChunkedArray)):
            lines = [x or "" for x in lines.to_pylist()]
        sub, flat, offsets = self.encode(lines)
        return pa.array(sub, pa.string()), pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.int32()))

    def ids(self, sub: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Flat int32 ids and int32 offsets (len(sub)+1) for subword lines."""
        get = self.dico.index.get
        lens = np.zeros(len(sub) + 1, dtype=np.int64)
        flat: list[int] = []
        for i, s in enumerate(sub):
            toks = s.split()
            flat.extend(get(t, UNK_ID) for t in toks)
            lens[i + 1] = len(toks)
        return np.asarray(flat, dtype=np.int32), np.cumsum(lens).astype(np.int32)


def load_tokenizer(info: dict[str, Any], base: Path) -> Tokenizer:
    """Rebuild a tokenizer from a manifest's `tokenizer` entry (paths relative to `base`, the folder of that
    manifest, and confined to it), checking hashes."""
    def file(key: str) -> Path:
        if isinstance(info.get(key), str) and Path(info[key]).is_absolute():
            raise BadInput(f"the manifest names the {key} file by an absolute path ({info[key]}), as xlp 0.1 did; "
                           "only files inside the folder are read: rerun `xlp bpe apply` with --force",
                           path=base / MANIFEST)
        p = inside(base, info.get(key), f"tokenizer {key} file", base / MANIFEST)
        want = info.get(f"{key}_sha256")
        if not p.is_file():
            raise BadInput(f"the {key} file recorded in the manifest is missing", path=p)
        if want and sha256_file(p) != want:
            raise BadInput(f"the {key} file changed since it was recorded (sha256 differs)", path=p)
        return p

    dico = Dictionary.read(file("dict"))
    if info.get("kind") == "sentencepiece":
        return Tokenizer("sentencepiece", dico, SpmCodec(file("model")), str(info.get("model_type") or ""))
    return Tokenizer("fastbpe", dico, BpeCodec(file("codes"), file("vocab") if info.get("vocab") else None))
