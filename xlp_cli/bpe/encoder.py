"""Raw text -> token ids exactly as a prepared + BPE'd run did it, rebuilt from manifests alone.

    enc = TextEncoder.from_folder(RUN_OR_IDS)       # an `xlp bpe apply` folder, or any later stage's folder
    enc.encode("Hello, World!", "en")              # -> np.int32 ids (no </s>; streams add it)

The chain: prepare's `TextPipeline` (config from the prepare manifest; for SentencePiece only its `raw()`
cleaning, as SentencePiece learns on the raw column) -> fastBPE codes (+ vocab limit) or the SentencePiece
model -> the XLM-layout dictionary of the id shards. Files are found through the `upstream` links and
checked against their recorded sha256, so nobody passes codes by hand for XNLI or evaluation text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from xlp_cli import artifacts
from xlp_cli.bpe.tokenizer import Tokenizer, load_tokenizer
from xlp_cli.errors import BadInput


class TextEncoder:
    def __init__(self, pipeline: Any, tokenizer: Tokenizer, ids_dir: Path | None = None):
        self.pipeline = pipeline
        self.tokenizer = tokenizer
        self.dictionary = tokenizer.dico
        self.ids_dir = ids_dir

    @classmethod
    def from_folder(cls, folder: str | Path) -> "TextEncoder":
        from xlp_cli.text.pipeline import TextPipeline

        found = artifacts.find_upstream([Path(folder)], "bpe-apply")
        if found is None:
            artifacts.read_manifest(folder)  # precise message for a missing folder/manifest
            raise BadInput("no `xlp bpe apply` output upstream of this folder: cannot rebuild the tokenizer", path=folder)
        ids_dir, ids_m = found
        tok = load_tokenizer(ids_m["tokenizer"], ids_dir)
        prep = artifacts.find_upstream([ids_dir], "prepare")
        text_config = prep[1].get("config", {}) if prep else ids_m.get("text_config") or {}
        return cls(TextPipeline.from_config(text_config), tok, ids_dir)

    def text(self, texts: list[str], lang: str) -> list[str]:
        """What the tokenizer reads: the `text` column (fastBPE) or the `raw` column (SentencePiece)."""
        if self.tokenizer.kind == "sentencepiece":
            return [self.pipeline.raw(t) for t in texts]
        return self.pipeline.process_batch(texts, lang)

    def subwords(self, texts: list[str], lang: str) -> list[str]:
        return self.tokenizer.subwords(self.text(texts, lang))

    def encode_batch(self, texts: list[str], lang: str) -> list[np.ndarray]:
        _, flat, offsets = self.tokenizer.encode(self.text(texts, lang))
        return [flat[offsets[i]:offsets[i + 1]] for i in range(len(texts))]

    def encode(self, text: str, lang: str) -> np.ndarray:
        return self.encode_batch([text], lang)[0]

    def decode(self, ids: Any) -> str:
        """Ids back to text: subwords joined, `@@ ` continuations removed (fastBPE) or SentencePiece decoded."""
        toks = self.dictionary.decode(int(i) for i in ids)
        if self.tokenizer.kind == "sentencepiece":
            return self.tokenizer.codec.sp.decode_pieces(toks)
        return " ".join(toks).replace("@@ ", "").removesuffix("@@")
