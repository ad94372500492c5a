"""The one text codec of xlp: raw text <-> token ids exactly as a prepared + BPE'd run did it.

    enc = TextEncoder.from_folder(RUN_OR_IDS)       # rebuilt from the manifests of an `xlp bpe apply` folder or
                                                   # of any later stage's folder (upstream links followed)
    enc.encode("Hello, World!", "en")              # -> np.int32 ids (no </s>; streams add it)
    enc.save(FT); enc = TextEncoder.load(FT)       # self-contained copy in a run folder (FT/tokenizer/, FT/dict.txt)
    enc.to_tokenized(ids), enc.to_text(ids, "de")  # ids -> tokenized text (BPE undone) -> detokenized text

The chain: prepare's `TextPipeline` (config from the prepare manifest; for SentencePiece only its `raw()`
cleaning, as SentencePiece learns on the raw column) -> fastBPE codes (+ vocab limit) or the SentencePiece
model -> the XLM-layout dictionary of the id shards. Files are found through the `upstream` links and checked
against their recorded sha256, so nobody passes codes by hand for XNLI, translation or evaluation text.
Decoding undoes BPE (the `@@ ` marks, or joins SentencePiece pieces) and detokenizes with the Moses
detokenizer of the target language (zh, ja, th: no spaces).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from xlp_cli.artifacts.files import atomic_path, inside, write_json_atomic
from xlp_cli.artifacts.manifest import find_upstream, read_manifest
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.artifacts.special_ids import N_SPECIAL, UNK
from xlp_cli.bpe.tokenizer import Tokenizer, load_tokenizer
from xlp_cli.core.errors import BadInput
from xlp_cli.core.textfile import json_object
from xlp_cli.text.pipeline import TextPipeline

TOKENIZER_DIR, TOKENIZER_FILE = "tokenizer", "xlp_tokenizer.json"
LEGACY_TOKENIZER_FILE = "tokenizer.json"  # xlp 0.1's name (not a Hugging Face tokenizer.json)
NO_SPACE_LANGS = {"zh", "ja", "th"}
_DETOK: dict[str, Any] = {}


def unbpe(subwords: str) -> str:
    """`hel@@ lo world` -> `hello world` (fastBPE/subword-nmt continuation marks)."""
    s = (subwords + " ").replace("@@ ", "")
    return s.rstrip(" ").removesuffix("@@")


def detokenize(tokenized: str, lang: str) -> str:
    if lang in NO_SPACE_LANGS:
        return tokenized.replace(" ", "")
    if lang not in _DETOK:
        from sacremoses import MosesDetokenizer

        _DETOK[lang] = MosesDetokenizer(lang=lang)
    return _DETOK[lang].detokenize(tokenized.split())


def saved_tokenizer(folder: Path) -> tuple[dict[str, Any], Path]:
    """The tokenizer description a run folder keeps in tokenizer/ (see `TextEncoder.save`), and its path."""
    tdir = Path(folder) / TOKENIZER_DIR
    path = next((p for p in (tdir / TOKENIZER_FILE, tdir / LEGACY_TOKENIZER_FILE) if p.is_file()), None)
    if path is None:
        raise BadInput(f"not a translation run (no {TOKENIZER_DIR}/{TOKENIZER_FILE})", path=folder)
    return json_object(path), path


class TextEncoder:
    def __init__(self, pipeline: Any, tokenizer: Tokenizer, ids_dir: Path | None = None,
                 files: dict[str, Path] | None = None):
        self.pipeline = pipeline
        self.tokenizer = tokenizer
        self.dictionary = tokenizer.dico
        self.ids_dir = ids_dir
        self.files = files or {}   # the tokenizer's files (what `save` copies)

    @classmethod
    def from_folder(cls, folder: str | Path) -> "TextEncoder":
        found = find_upstream([Path(folder)], "bpe-apply", verify=False)  # (no shard is read here)
        if found is None:
            read_manifest(folder)  # precise message for a missing folder/manifest
            raise BadInput("no `xlp bpe apply` output upstream of this folder: cannot rebuild the tokenizer", path=folder)
        ids_dir, ids_m = found
        info = ids_m["tokenizer"]
        tok = load_tokenizer(info, ids_dir)
        prep = find_upstream([ids_dir], "prepare", verify=False)
        text_config = prep[1].get("config", {}) if prep else ids_m.get("text_config") or {}
        files = {key: inside(ids_dir, info[key], f"tokenizer {key} file", ids_dir / MANIFEST)
                 for key in ("model", "codes", "vocab") if info.get(key)}
        return cls(TextPipeline.from_config(text_config), tok, ids_dir, files)

    # ------------------------------------------------------------ a self-contained copy in a run folder
    def save(self, folder: Path) -> None:
        tdir = Path(folder) / TOKENIZER_DIR
        tdir.mkdir(parents=True, exist_ok=True)
        names = {}
        for key, src in self.files.items():
            dest = tdir / ("spm.model" if key == "model" else key)
            with atomic_path(dest) as tmp:
                shutil.copyfile(src, tmp)
            names[key] = dest.name
        self.dictionary.write(Path(folder) / "dict.txt")
        write_json_atomic(tdir / TOKENIZER_FILE, {"kind": self.tokenizer.kind, "files": names,
                                                             "pipeline": self.pipeline.config()})

    @classmethod
    def load(cls, folder: Path) -> "TextEncoder":
        folder = Path(folder).resolve()  # the paths below are joined to it again by load_tokenizer
        tdir = folder / TOKENIZER_DIR
        meta, meta_path = saved_tokenizer(folder)
        try:
            names = dict(meta.get("files", {}))
            kind = meta.get("kind", "fastbpe")
        except (AttributeError, TypeError, ValueError) as e:
            raise BadInput(f"corrupt {meta_path.name} ({e})", path=meta_path) from None
        files = {k: inside(tdir, v, f"tokenizer {k} file", meta_path) for k, v in names.items()}
        if "model" in files and kind == "fastbpe":  # xlp 0.1 stored the fastBPE codes under "model"
            files["codes"] = files.pop("model")
        info = {"kind": kind, "dict": "dict.txt",
                **{k: p.relative_to(folder).as_posix() for k, p in files.items()}}
        return cls(TextPipeline.from_config(meta.get("pipeline") or {}), load_tokenizer(info, folder), None, files)

    # ------------------------------------------------------------ text -> ids
    @property
    def lowercases(self) -> bool:
        return self.pipeline.lowercase != "none"

    def text(self, texts: list[str], lang: str) -> list[str]:
        """What the tokenizer reads: the `text` column (fastBPE, SentencePiece words) or the `raw` column
        (SentencePiece)."""
        if self.tokenizer.column == "raw":
            return [self.pipeline.raw(t) for t in texts]
        return self.pipeline.process_batch(texts, lang)

    def subwords(self, texts: list[str], lang: str) -> list[str]:
        return self.tokenizer.subwords(self.text(texts, lang))

    def encode_batch(self, texts: list[str], lang: str) -> list[np.ndarray]:
        _, flat, offsets = self.tokenizer.encode(self.text(texts, lang))
        return [flat[offsets[i]:offsets[i + 1]] for i in range(len(texts))]

    def encode(self, text: str, lang: str) -> np.ndarray:
        return self.encode_batch([text], lang)[0]

    # ------------------------------------------------------------ ids -> text
    def to_subwords(self, ids: Any) -> str:
        return " ".join(self.dictionary.decode(int(i) for i in ids if int(i) >= N_SPECIAL or int(i) == UNK))

    def to_tokenized(self, ids: Any) -> str:
        """Tokenized text (BPE undone, not detokenized): what tokenized BLEU compares."""
        s = self.to_subwords(ids)
        if self.tokenizer.kind == "sentencepiece":
            return "".join(s.split()).replace("\u2581", " ").strip()
        return unbpe(s)

    def to_text(self, ids: Any, lang: str) -> str:
        """Plain text for a reader."""
        if self.tokenizer.column == "raw":
            return self.to_tokenized(ids)
        return detokenize(self.to_tokenized(ids), lang)

    def decode(self, ids: Any) -> str:
        """Ids back to text: subwords joined, `@@ ` continuations removed (fastBPE) or SentencePiece decoded."""
        toks = self.dictionary.decode(int(i) for i in ids)
        if self.tokenizer.kind == "sentencepiece":
            return self.tokenizer.codec.sp.decode_pieces(toks)
        return " ".join(toks).replace("@@ ", "").removesuffix("@@")
