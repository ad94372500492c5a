"""Raw text <-> token ids for a translation model, exactly as its training data was made.

Encoding runs the `xlp prepare` text pipeline recorded in the prepare manifest (clean, normalize, Moses
tokenize, case), then the run's fastBPE codes (or SentencePiece model) and the dictionary.
Decoding maps ids to subwords, undoes BPE (drops the `@@ ` continuation marks, or joins SentencePiece
pieces) and detokenizes with sacremoses' Moses detokenizer for the target language (zh, ja, th: no spaces).

A finetune run copies what it needs into `FT/tokenizer/` (codes or spm.model, `tokenizer.json` with the
text-pipeline config) and `FT/dict.txt`, so `xlp translate` needs nothing but the run folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from xlp_cli import artifacts
from xlp_cli.bpe.dictionary import N_SPECIALS, Dictionary
from xlp_cli.errors import BadInput

NO_SPACE_LANGS = {"zh", "ja", "th"}


def unbpe(subwords: str) -> str:
    """`hel@@ lo world` -> `hello world` (fastBPE/subword-nmt continuation marks)."""
    s = (subwords + " ").replace("@@ ", "")
    return s.rstrip(" ").removesuffix("@@")


_DETOK: dict[str, Any] = {}


def detokenize(tokenized: str, lang: str) -> str:
    if lang in NO_SPACE_LANGS:
        return tokenized.replace(" ", "")
    if lang not in _DETOK:
        from sacremoses import MosesDetokenizer

        _DETOK[lang] = MosesDetokenizer(lang=lang)
    return _DETOK[lang].detokenize(tokenized.split())


def find_tokenizer(ids_dir: Path, ids_manifest: dict[str, Any]) -> tuple[str, Path, Path | None]:
    """(kind, codes-or-spm-model path, vocab path) of an `xlp bpe apply` output, following its upstream."""
    tok = ids_manifest.get("tokenizer") or {}
    kind = tok.get("kind", "fastbpe")

    def resolve(p: str | None, bases: list[Path]) -> Path | None:
        if not p:
            return None
        for base in bases:
            cand = Path(p) if Path(p).is_absolute() else base / p
            if cand.is_file():
                return cand
        return None

    bases = [Path(ids_dir)]
    for up in ids_manifest.get("upstream", []) or []:
        if isinstance(up, dict) and up.get("path"):
            bases.append(Path(up["path"]))
    main = resolve(tok.get("model") if kind == "sentencepiece" else tok.get("codes"), bases)
    if main is None and kind == "sentencepiece":
        main = resolve("spm.model", bases)
    if main is None and kind == "fastbpe":
        main = resolve("codes", bases)
    if main is None:
        raise BadInput("cannot find the BPE codes / SentencePiece model of this id data (manifest `tokenizer`)",
                       path=ids_dir)
    vocab = resolve(tok.get("vocab"), bases) if kind == "fastbpe" else None
    return kind, main, vocab


class TextCodec:
    """The text side of one translation model."""

    def __init__(self, dico: Dictionary, kind: str = "fastbpe", model_path: Path | None = None,
                 vocab_path: Path | None = None, pipeline_config: dict[str, Any] | None = None):
        self.dico, self.kind = dico, kind
        self.model_path, self.vocab_path = model_path, vocab_path
        self.pipeline_config = dict(pipeline_config or {})
        self._pipeline = None
        self._bpe = None

    # ------------------------------------------------------------ persistence in a run folder
    def save(self, folder: Path) -> None:
        tdir = Path(folder) / "tokenizer"
        tdir.mkdir(parents=True, exist_ok=True)
        files = {}
        for key, p in (("model", self.model_path), ("vocab", self.vocab_path)):
            if p is not None:
                dest = tdir / ("spm.model" if self.kind == "sentencepiece" and key == "model" else
                               "codes" if key == "model" else "vocab")
                with artifacts.atomic_path(dest) as tmp:
                    shutil.copyfile(p, tmp)
                files[key] = dest.name
        self.dico.write(Path(folder) / "dict.txt")
        artifacts.write_json_atomic(tdir / "tokenizer.json", {"kind": self.kind, "files": files,
                                                               "pipeline": self.pipeline_config})

    @classmethod
    def load(cls, folder: Path) -> "TextCodec":
        folder = Path(folder)
        meta_path = folder / "tokenizer" / "tokenizer.json"
        if not meta_path.is_file():
            raise BadInput("not a translation run (no tokenizer/tokenizer.json)", path=folder)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise BadInput(f"corrupt tokenizer.json ({e})", path=meta_path) from None
        files = meta.get("files", {})
        tdir = folder / "tokenizer"
        return cls(Dictionary.read(folder / "dict.txt"), meta.get("kind", "fastbpe"),
                   tdir / files["model"] if files.get("model") else None,
                   tdir / files["vocab"] if files.get("vocab") else None, meta.get("pipeline"))

    # ------------------------------------------------------------ text -> ids
    @property
    def pipeline(self):
        if self._pipeline is None:
            from xlp_cli.text.pipeline import TextPipeline

            self._pipeline = TextPipeline.from_config(self.pipeline_config)
        return self._pipeline

    def _segmenter(self):
        if self._bpe is None:
            if self.model_path is None:
                raise BadInput("this run has no BPE codes / SentencePiece model to encode raw text with")
            if self.kind == "sentencepiece":
                import sentencepiece as spm

                self._bpe = spm.SentencePieceProcessor(model_file=str(self.model_path))
            else:
                from xlp_cli.bpe.codes import BpeCodec

                self._bpe = BpeCodec(self.model_path, self.vocab_path, check=False)
        return self._bpe

    def subwords(self, texts: list[str], lang: str) -> list[str]:
        """Raw lines of one language -> subword strings, as `xlp prepare` + `xlp bpe apply` made them."""
        seg = self._segmenter()
        if self.kind == "sentencepiece":
            return [" ".join(seg.encode(self.pipeline.raw(t), out_type=str)) for t in texts]
        return seg.apply_lines(self.pipeline.process_batch(texts, lang))

    def encode(self, texts: list[str], lang: str) -> list[np.ndarray]:
        return [self.dico.encode(s.split()) for s in self.subwords(texts, lang)]

    # ------------------------------------------------------------ ids -> text
    def to_subwords(self, ids: list[int]) -> str:
        return " ".join(self.dico.decode(i for i in ids if i >= N_SPECIALS or i == 3))

    def to_tokenized(self, ids: list[int]) -> str:
        """Tokenized text (BPE undone, not detokenized): what tokenized BLEU compares."""
        s = self.to_subwords(ids)
        if self.kind == "sentencepiece":
            return "".join(s.split()).replace("\u2581", " ").strip()
        return unbpe(s)

    def to_text(self, ids: list[int], lang: str) -> str:
        """Plain text for a reader."""
        if self.kind == "sentencepiece":
            return self.to_tokenized(ids)
        return detokenize(self.to_tokenized(ids), lang)
