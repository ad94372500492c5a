"""Sentence vectors from a pre-trained encoder, and cosine nearest-neighbour retrieval (XTREME's Tatoeba protocol).

    enc = load_encoder(FOLDER, "best")                 # a pretrain run, any checkpoint folder whose model is
                                                       # an encoder or has one (classifier, tagger), or an HF
                                                       # model folder (`xlp export --format hf`, XLM's layout)
    vecs = sentence_vectors(enc, texts, "fr", layer)   # [n, d] float32
    hits = nearest(src, tgt)                           # index of each src row's nearest tgt row (cosine)
    accuracy(src, tgt) -> %                            # src[i]'s gold is tgt[i]

A sentence is `</s> subwords </s>` (XLM's sentence input, cut to the model's positions), run with its own
language id; its vector is the mean of the hidden states of `layer` over its tokens (markers included,
padding and the prefix slot of attaching / vle-padding excluded), as XTREME mean-pools a middle layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlp_cli.artifacts.manifest import read_manifest, try_read_manifest
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.artifacts.special_ids import EOS
from xlp_cli.bpe import hf_xlm_vocab
from xlp_cli.bpe.encoder import TOKENIZER_DIR, TextEncoder
from xlp_cli.core.errors import BadInput
from xlp_cli.models import checkpoint as ckpt, hf_folder
from xlp_cli.models.encoder import TransformerEncoder
from xlp_cli.tasks.xnli.data import encode_texts, eval_batches


@dataclass
class Encoder:
    folder: Path
    model: TransformerEncoder
    text_encoder: Any
    manifest: dict[str, Any]   # of the run the text pipeline came from

    @property
    def langs(self) -> list[str]:
        return list(self.model.config.langs)

    def lang_index(self, lang: str) -> int:
        if lang not in self.langs:
            raise BadInput(f"language {lang!r} has no pre-training data in this run (its languages: "
                           f"{', '.join(self.langs)})", path=self.folder)
        return self.langs.index(lang)

    def layer(self, requested: int) -> int:
        n = self.model.config.n_layers
        if requested > n:
            raise BadInput(f"--layer {requested}: the model has {n} layers (0 is the embedding output)", path=self.folder)
        return n // 2 if requested < 0 else requested


def _run_folder(folder: Path) -> Path:
    """The nearest folder at or above `folder` with a manifest (a checkpoint sits inside its run)."""
    for p in [folder, *folder.parents]:
        if (p / MANIFEST).is_file():
            return p
    raise BadInput("no manifest.json in this folder or above it: cannot find the run's text pipeline", path=folder)


def load_hf(folder: Path, manifest: dict[str, Any] | None) -> Encoder:
    """An HF model folder: its weights in xlp's encoder (models/hf_folder.py), its text pipeline from the xlp
    tokenizer `xlp export` writes beside them (tokenizer/ + dict.txt: the run's whole pipeline), or else from
    XLMTokenizer's files (bpe/hf_xlm_vocab.py)."""

    model = hf_folder.load_encoder(folder)
    if (folder / TOKENIZER_DIR).is_dir() and (folder / "dict.txt").is_file():
        te = TextEncoder.load(folder)
    elif hf_xlm_vocab.found(folder):
        te = hf_xlm_vocab.text_encoder(folder)
    else:
        raise BadInput(f"an HF model folder without a tokenizer xlp runs (xlp's {TOKENIZER_DIR}/ + dict.txt, as `xlp "
                       "export` writes them, or XLMTokenizer's vocab.json + merges.txt)", path=folder)
    if len(te.dictionary) != model.config.vocab_size:
        raise BadInput(f"the model's vocabulary ({model.config.vocab_size} ids) does not match dict.txt "
                       f"({len(te.dictionary)} ids)", path=folder)
    return Encoder(folder, model, te, {**(manifest or {}), "encoding": hf_folder.encoding_of(hf_folder.read_config(folder))})


def load_encoder(folder: Path, which: str = "best") -> Encoder:
    folder = Path(folder)
    m = try_read_manifest(folder)
    if (m is None or m.get("stage") == "export") and (folder / hf_folder.CONFIG).is_file():
        return load_hf(folder, m)
    if m is not None and m.get("stage") == "pretrain":
        model = ckpt.load_pretrained(folder, which)
        run = folder
    else:
        if not (folder / ckpt.CONFIG).is_file():
            read_manifest(folder, stage="pretrain")  # the precise message for a non-run folder
            raise BadInput("not a pretrain run (stage pretrain), a checkpoint folder (model.json) or an HF model "
                           "folder (config.json)", path=folder)
        model = ckpt.load_model(folder)
        run = _run_folder(folder)
        m = read_manifest(run)
    encoder = model if isinstance(model, TransformerEncoder) else getattr(model, "encoder", None)
    if not isinstance(encoder, TransformerEncoder):
        raise BadInput(f"a {getattr(model, 'KIND', type(model).__name__)} checkpoint has no pre-trained encoder to "
                       "retrieve with (sentence retrieval reads an `xlp pretrain` encoder)", path=folder)
    te = TextEncoder.from_folder(run)
    if len(te.dictionary) != encoder.config.vocab_size:
        raise BadInput(f"checkpoint vocabulary ({encoder.config.vocab_size} ids) does not match the run's dictionary "
                       f"({len(te.dictionary)} ids)", path=folder)
    return Encoder(folder, encoder.eval(), te, m)


class _Ids:
    def __init__(self, ids: list[np.ndarray]):
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)


def sentence_ids(enc: Encoder, texts: list[str], lang: str) -> list[np.ndarray]:
    room = enc.model.config.n_positions - enc.model.prefix_len - 2
    return [np.asarray([EOS, *list(x)[:room], EOS], np.int32) for x in encode_texts(enc.text_encoder, texts, lang)]


@torch.no_grad()
def sentence_vectors(enc: Encoder, texts: list[str], lang: str, layer: int, batch_size: int = 64,
                     device: torch.device | str = "cpu", ids: list[np.ndarray] | None = None) -> np.ndarray:
    """[len(texts), d] mean-pooled hidden states of `layer` (already resolved: 0..n_layers)."""
    model = enc.model.to(device)
    seqs = _Ids(ids if ids is not None else sentence_ids(enc, texts, lang))
    out = np.zeros((len(seqs), model.config.d_model), np.float32)
    li = enc.lang_index(lang)
    for rows, x, pad in eval_batches(seqs, batch_size):
        x, pad = x.to(device), pad.to(device)
        langs = torch.full((len(rows),), li, dtype=torch.long, device=device)
        h = model.token_states(model(x, langs, pad_mask=pad, upto=layer)).float()
        keep = (~pad).unsqueeze(-1).float()
        out[rows] = ((h * keep).sum(1) / keep.sum(1).clamp(min=1.0)).cpu().numpy()
    return out


def nearest(src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """For each row of src, the index of the tgt row with the highest cosine (ties: the first)."""
    a = src / np.maximum(np.linalg.norm(src, axis=1, keepdims=True), 1e-12)
    b = tgt / np.maximum(np.linalg.norm(tgt, axis=1, keepdims=True), 1e-12)
    return (a @ b.T).argmax(axis=1)


def accuracy(src: np.ndarray, tgt: np.ndarray) -> float:
    """% of rows i whose nearest target is tgt[i]."""
    if len(src) == 0:
        return float("nan")
    return float(100.0 * (nearest(src, tgt) == np.arange(len(src))).mean())
