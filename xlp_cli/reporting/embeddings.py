"""Word vectors from a pre-trained run, for the lexicon test and the analysis figures.

A word is processed by the run's own text pipeline for its language (normalize, tokenize, lowercase, BPE:
`TextEncoder`), and its vector is the mean of its subword vectors (VLE 4.6: "for words split into 2+
sub-tokens, we average all the sub-tokens"). Two kinds of vectors:

    raw       rows of the word-embedding table (what VLE's MUSE test reads)
    encoded   the rows after the language encoding of language l, without positions (XLP 4.4):
              additive  e + L[l];  xlp  e P_l^T + b_l;  vle (adding)  e + E_V[l];
              none / attaching / vle padding leave the word rows unchanged (their language signal is a
              separate prefix slot, not a change of the word vector).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlp_cli.artifacts.manifest import read_manifest
from xlp_cli.bpe.encoder import TextEncoder
from xlp_cli.core.errors import BadInput
from xlp_cli.models.checkpoint import checkpoint_dir, load_model
from xlp_cli.models.encoder import TransformerEncoder

UNK_INDEX = 3


@dataclass
class LoadedRun:
    name: str
    folder: Path
    model: TransformerEncoder
    text_encoder: Any
    langs: list[str]

    @property
    def encoding(self) -> str:
        return self.model.config.lang_encoding

    def lang_index(self, lang: str) -> int:
        if lang not in self.langs:
            raise BadInput(f"language {lang!r} has no pre-training data in this run (its languages: {', '.join(self.langs)})",
                           path=self.folder)
        return self.langs.index(lang)


def load_run(folder: Path, name: str, which: str) -> LoadedRun:
    """A pre-trained encoder with its text codec: an `xlp pretrain` run (MLM: its model; MASS: the encoder of its
    encoder-decoder) or an `xlp finetune --task unmt` run (the encoder of its first seed's model)."""

    folder = Path(folder)
    m = read_manifest(folder)
    if m.get("stage") == "finetune" and m.get("task") == "unmt" and (m.get("outputs") or {}).get("runs"):
        ckpt_dir = checkpoint_dir(folder / str(m["outputs"]["runs"][0]), which)
    elif m.get("stage") == "pretrain":
        ckpt_dir = checkpoint_dir(folder, which)
    else:
        raise BadInput("not an `xlp pretrain` run or an `xlp finetune --task unmt` run", path=folder)
    model = load_model(ckpt_dir)
    model = getattr(model, "xlm_encoder", None) or model  # an encoder-decoder: its (XLM) encoder
    if getattr(model, "KIND", "") != "encoder":
        raise BadInput(f"no pre-trained XLM encoder in this checkpoint (a {model.KIND})", path=ckpt_dir)
    model = model.eval()
    te = TextEncoder.from_folder(folder)
    n = len(te.dictionary)
    if n != model.config.vocab_size:
        raise BadInput(f"checkpoint vocabulary ({model.config.vocab_size} ids) does not match the run's dictionary ({n} ids)",
                       path=folder)
    return LoadedRun(name=name, folder=folder, model=model, text_encoder=te, langs=list(model.config.langs))


def subword_ids(run: LoadedRun, words: list[str], lang: str) -> list[np.ndarray]:
    return [np.asarray(x, dtype=np.int64) for x in run.text_encoder.encode_batch(words, lang)]


@torch.no_grad()
def encoded_rows(model: TransformerEncoder, ids: torch.Tensor, lang: int) -> torch.Tensor:
    """[N] ids -> [N, d] word rows after language `lang`'s encoding (no positions, no LayerNorm)."""
    enc = model.lang_encoding
    we = model.embed(ids)[None]                                      # [1, N, d]
    langs = torch.full((1, ids.shape[0]), lang, dtype=torch.long)
    x = enc.on_words(we, langs, model.embed)[:, enc.prefix_len:]     # prefix slots are not word rows
    x = enc.on_positions(x, langs)
    return x[0]


@torch.no_grad()
def word_vectors(run: LoadedRun, words: list[str], lang: str, *, kind: str = "raw",
                 encode_as: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(vectors [n, d] float32, covered [n] bool). A word is covered when it has at least one subword and
    none of them is <unk>. `encode_as` is the language whose encoding is applied (default: `lang`)."""
    ids = subword_ids(run, words, lang)
    d = run.model.config.d_model
    out = np.zeros((len(words), d), dtype=np.float32)
    covered = np.array([len(x) > 0 and not (x == UNK_INDEX).any() for x in ids])
    if not covered.any():
        return out, covered
    flat = torch.from_numpy(np.concatenate([x for x, c in zip(ids, covered) if c]))
    if kind == "raw":
        rows = run.model.embed(flat)
    else:
        rows = encoded_rows(run.model, flat, run.lang_index(encode_as or lang))
    rows = rows.float().numpy()
    pos = 0
    for i, (x, c) in enumerate(zip(ids, covered)):
        if c:
            out[i] = rows[pos: pos + len(x)].mean(0)
            pos += len(x)
    return out, covered


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    an = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    bn = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return an @ bn.T
