"""tokenizer.json (the `tokenizers` library's format) for a run whose subwords are fastBPE codes.

What it expresses exactly: the BPE merges of `codes` (fastBPE marks a word end with `</w>`, so the model is
`BPE(end_of_word_suffix="</w>")`), XLM's vocabulary with its ids (dict.txt: `hel@@` becomes `hel`, a word-final
`lo` becomes `lo</w>`, the 14 specials keep ids 0-13 and are added special tokens), `</s> A </s>` (and
`</s> A </s> B </s>`) around a sentence as xlp's streams and XNLI do, and `--lowercase xlm` (lowercase, NFD,
strip the Mn marks, lowercase).

What it cannot express (written into the export's README and the manifest): the Moses steps (punctuation
normalization, non-printing characters, Moses tokenization and its language rules, jieba/pythainlp word
segmentation): give it text tokenized as xlp's `text` column is, or use `TextEncoder.load(OUT)`, which runs the
whole pipeline; `--lowercase safe` accent stripping (only the lowercasing is written); fastBPE's vocab limit
(a subword missing from the BPE vocab is split again by fastBPE; tokenizers keeps it). `tokenizers` needs every
merge's result in its vocabulary with an id of its own: those dict.txt lacks get ids after dict.txt's, and the
export gives the model rows for them (`extra_rows`): the embedding of `<unk>` (what xlp reads for a subword
outside its dictionary) and an output bias of -1e4 (never predicted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xlp_cli.artifacts import special_ids
from xlp_cli.bpe.codes import read_merges

SUFFIX = "</w>"
NOT_EXPRESSED = [
    "Moses steps (punctuation normalization, non-printing characters, tokenization, jieba/pythainlp segmentation): "
    "give text tokenized like xlp's `text` column, or run xlp_cli.bpe.encoder.TextEncoder.load(OUT)",
    "fastBPE's vocabulary limit (a subword missing from the BPE vocab is split again by fastBPE, not here)",
]
NORMALIZERS = {
    "xlm": [{"type": "Lowercase"}, {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}],
    "safe": [{"type": "Lowercase"}],
    "none": [],
}


def hf_token(word: str) -> str:
    """An XLM dictionary entry as the BPE model's token: `hel@@` -> `hel`, `lo` -> `lo</w>`."""
    return word[:-2] if word.endswith("@@") else word + SUFFIX


def _special(token: str) -> dict[str, Any]:
    return {"SpecialToken": {"id": token, "type_id": 0}}


def _seq(name: str, type_id: int) -> dict[str, Any]:
    return {"Sequence": {"id": name, "type_id": type_id}}


def build(codes: Path, words: list[str], lowercase: str) -> tuple[dict[str, Any], list[str], int]:
    """(tokenizer.json as a dict, what it does not express, how many ids it adds after dict.txt's). `words`:
    dict.txt's entries in id order, specials first (the XLM layout)."""
    specials = list(special_ids.SPECIAL_TOKENS)
    assert words[: len(specials)] == specials, "dictionary without XLM's special ids"
    vocab: dict[str, int] = {tok: i for i, tok in enumerate(specials)}
    for i, w in enumerate(words[len(specials):], start=len(specials)):
        vocab.setdefault(hf_token(w), i)
    merges = read_merges(codes)
    missing = 0
    for a, b in merges:  # the BPE model needs every merge's parts and result (each with its own id)
        for tok in (a, b, a + b):
            if tok not in vocab:
                vocab[tok] = len(words) + missing
                missing += 1
    eos = specials[special_ids.EOS]
    notes = list(NOT_EXPRESSED)
    if lowercase == "safe":
        notes.append("--lowercase safe: only the lowercasing is written, not its accent rules")
    if missing:
        notes.append(f"{missing} merge results that are not in dict.txt get ids {len(words)}-{len(words) + missing - 1} "
                     "(tokenizers needs them); the exported model embeds them as <unk> and never predicts them")
    norm = NORMALIZERS.get(lowercase, [])
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(specials)],
        "normalizer": {"type": "Sequence", "normalizers": norm} if norm else None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [_special(eos), _seq("A", 0), _special(eos)],
            "pair": [_special(eos), _seq("A", 0), _special(eos), _seq("B", 1), {"SpecialToken": {"id": eos, "type_id": 1}}],
            "special_tokens": {eos: {"id": eos, "ids": [special_ids.EOS], "tokens": [eos]}},
        },
        "decoder": {"type": "BPEDecoder", "suffix": SUFFIX},
        "model": {"type": "BPE", "dropout": None, "unk_token": specials[special_ids.UNK],
                  "continuing_subword_prefix": None, "end_of_word_suffix": SUFFIX, "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": [[a, b] for a, b in merges]},
    }
    return tokenizer, notes, missing


def tokenizer_config(langs: list[str]) -> dict[str, Any]:
    """tokenizer_config.json: which token plays which role, for AutoTokenizer."""
    s = special_ids.SPECIAL_TOKENS
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": s[special_ids.BOS],
            "eos_token": s[special_ids.EOS], "sep_token": s[special_ids.EOS], "cls_token": s[special_ids.EOS],
            "pad_token": s[special_ids.PAD], "unk_token": s[special_ids.UNK], "mask_token": s[special_ids.MASK],
            "model_max_length": 512, "langs": list(langs)}


NEVER = -1e4  # output bias of the added rows: exp(-1e4) is 0 in float32 and float16


def extra_rows(tensors: dict[str, Any], embedding: str, bias: str, n: int) -> None:
    """Append `n` rows to the exported embedding (copies of `<unk>`'s) and output bias (NEVER), in place."""
    import torch

    if n:
        emb, b = tensors[embedding], tensors[bias]
        tensors[embedding] = torch.cat([emb, emb[special_ids.UNK].expand(n, -1)]).contiguous()
        tensors[bias] = torch.cat([b, b.new_full((n,), NEVER)]).contiguous()
