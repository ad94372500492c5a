"""The tokenizer files of an export: two tokenizers over one vocabulary, the model's (dict.txt, ids 0..V-1).

- `XlpTokenizer` (tokenization_xlp.py, copied into the export; `AutoTokenizer.from_pretrained(OUT,
  trust_remote_code=True)`): xlp's own pipeline read from OUT/tokenizer/ + OUT/dict.txt (TextEncoder.load), so
  its ids are xlp's for every --tokenize / --lowercase mode, fastBPE (with its vocab limit) and SentencePiece. It
  imports xlp_cli: the export then needs xlp installed. It also returns `langs` (the model's language input).
- Stock transformers `XLMTokenizer` (fastBPE runs; `AutoTokenizer.from_pretrained(OUT)`, no remote code):
  vocab.json + merges.txt + tokenizer_config.json with XLM's lowercasing, lang2id/id2lang. It runs sacremoses'
  Moses (not xlp's perl-exact one), cannot express `--lowercase safe` or fastBPE's vocab limit, and under
  transformers 5 tokenizes every language with the English rules; `stock_notes` says which of these apply, and
  the export writes them into README.md, tokenizer_config.json and the manifest.

No tokenizer.json is written: the `tokenizers` library's BPE needs every merge's result in its vocabulary
(ids the model does not have) and cannot express the Moses steps or the vocab limit, so it is exact on no
xlp text pipeline.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from xlp_cli.artifacts import special_ids
from xlp_cli.artifacts.files import atomic_path, write_json_atomic, write_text_atomic
from xlp_cli.bpe.codes import read_merges

SUFFIX = "</w>"
REMOTE = Path(__file__).with_name("tokenization_xlp.py")
AUTO_MAP = {"AutoTokenizer": ["tokenization_xlp.XlpTokenizer", None]}
STOCK_FILES = ("vocab.json", "merges.txt")


def hf_token(word: str) -> str:
    """An XLM dictionary entry as XLMTokenizer's token: `hel@@` -> `hel`, `lo` -> `lo</w>`."""
    return word[:-2] if word.endswith("@@") else word + SUFFIX


def xlm_vocab(words: list[str]) -> dict[str, int]:
    """vocab.json: dict.txt's ids, specials as they are, words as XLMTokenizer spells them."""
    n = special_ids.N_SPECIAL
    assert tuple(words[:n]) == special_ids.SPECIAL_TOKENS, "dictionary without XLM's special ids"
    vocab = {w: i for i, w in enumerate(words[:n])}
    for i, w in enumerate(words[n:], start=n):
        vocab.setdefault(hf_token(w), i)
    return vocab


def merges_txt(codes: Path) -> str:
    """merges.txt: fastBPE's merges in rank order, `a b` per line (XLMTokenizer reads no header)."""
    return "".join(f"{a} {b}\n" for a, b in read_merges(codes))


def stock_notes(pipeline: dict[str, Any], n_langs: int, vocab_collisions: int) -> list[str]:
    """What the stock XLMTokenizer does not reproduce of a run with text pipeline `pipeline` (TextPipeline.config())."""
    notes = ["fastBPE's vocabulary limit: a merged subword missing from dict.txt is split again by xlp, "
             "XLMTokenizer gives <unk> for it",
             "transformers 5's PreTrainedTokenizer does not pass `lang` to XLMTokenizer._tokenize: every language "
             "gets the English Moses rules, and zh/th/ja no word segmenter"
             + ("" if n_langs > 1 else " (one-language model: only that language's rules differ)"),
             "no `langs` output: pass langs= to a multilingual model yourself"]
    tokenize, lowercase = pipeline.get("tokenize"), pipeline.get("lowercase")
    if tokenize == "xlm":
        notes.append("--tokenize xlm: XLMTokenizer runs sacremoses, not tokenizer.perl (xlp's is perl-exact): "
                     "final periods, Indic marks, prefix lines and language rules differ (docs/prepare.md)")
    elif tokenize == "moses":
        notes.append("--tokenize moses: XLMTokenizer normalizes before removing non-printing characters "
                     "(xlp: clean, normalize, clean again)")
    else:
        notes.append("--tokenize none: XLMTokenizer runs Moses normalization and tokenization anyway")
    if lowercase == "safe":
        notes.append("--lowercase safe: XLMTokenizer applies XLM's lowercase_and_remove_accent instead (the same on "
                     "Latin and Greek; it strips Cyrillic й/ё, Arabic, Hebrew, Indic and Thai marks that safe keeps)")
    if not pipeline.get("normalize", True):
        notes.append("--no-normalize: XLMTokenizer always normalizes punctuation")
    if not pipeline.get("clean", True):
        notes.append("--no-clean: XLMTokenizer always removes non-printing characters")
    if vocab_collisions:
        notes.append(f"{vocab_collisions} dict.txt entries share their XLMTokenizer spelling with an earlier one "
                     "and are never produced")
    return notes


def tokenizer_config(langs: list[str], pipeline: dict[str, Any], max_length: int, stock: bool,
                     notes: list[str]) -> dict[str, Any]:
    """tokenizer_config.json: the stock class (fastBPE runs) or none, and XlpTokenizer through `auto_map`. Its
    `bos_token` is `</s>`: XLMTokenizer puts bos_token first, and xlp's sentences are `</s> ... </s>`."""
    s = special_ids.SPECIAL_TOKENS
    conf: dict[str, Any] = {
        "tokenizer_class": "XLMTokenizer" if stock else "XlpTokenizer", "auto_map": AUTO_MAP,
        "bos_token": s[special_ids.EOS], "eos_token": s[special_ids.EOS], "sep_token": s[special_ids.EOS],
        "cls_token": s[special_ids.EOS], "pad_token": s[special_ids.PAD], "unk_token": s[special_ids.UNK],
        "mask_token": s[special_ids.MASK], "model_max_length": max_length,
        "lang2id": {l: i for i, l in enumerate(langs)}, "id2lang": {i: l for i, l in enumerate(langs)},
        "default_lang": langs[0] if langs else "en",
        "do_lowercase_and_remove_accent": pipeline.get("lowercase") != "none",
        "xlp_pipeline": pipeline, "xlp_stock_tokenizer_differs": notes,
    }
    return conf


def write(out: Path, encoder: Any, langs: list[str], max_length: int) -> tuple[bool, list[str]]:
    """Write the tokenizer files of `encoder` (a TextEncoder) into `out`: dict.txt + tokenizer/ (xlp's pipeline),
    tokenization_xlp.py, and for fastBPE XLMTokenizer's vocab.json + merges.txt; tokenizer_config.json last.
    Returns (whether the stock XLMTokenizer is written, what it does not reproduce)."""
    out = Path(out)
    words, pipeline = list(encoder.dictionary.words), encoder.pipeline.config()
    stock = encoder.tokenizer.kind == "fastbpe"
    encoder.save(out)  # tokenizer/ + dict.txt: what XlpTokenizer runs
    with atomic_path(out / "tokenization_xlp.py") as tmp:
        shutil.copyfile(REMOTE, tmp)
    if stock:
        vocab = xlm_vocab(words)
        notes = stock_notes(pipeline, len(langs), len(words) - len(vocab))
        write_json_atomic(out / "vocab.json", vocab)
        write_text_atomic(out / "merges.txt", merges_txt(encoder.files["codes"]))
    else:
        notes = [f"the run's tokenizer is {encoder.tokenizer.kind}; transformers' XLMTokenizer reads fastBPE files only"]
    write_json_atomic(out / "tokenizer_config.json", tokenizer_config(langs, pipeline, max_length, stock, notes))
    return stock, notes
