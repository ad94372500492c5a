"""xlp's TextEncoder for an HF folder with transformers' `XLMTokenizer` files (vocab.json + merges.txt), the
tokenizer of stock XLM checkpoints; the inverse of what `export/hf_tokenizer.py` maps.

    found(FOLDER) -> bool                 vocab.json and merges.txt are there
    text_encoder(FOLDER) -> TextEncoder   XLM's text pipeline + these merges and ids

What it runs, as XLMTokenizer does: XLM's `tokenize.sh` chain (xlp's `--tokenize xlm`: punctuation
normalization, non-printing characters, Moses tokenization; jieba for zh, pythainlp for th), then
`lowercase_and_remove_accent` when tokenizer_config.json's `do_lowercase_and_remove_accent` is true (its default),
then the merges by rank. vocab.json's `tok</w>` is xlp's word-final `tok`, its `tok` xlp's `tok@@`; the first 14
ids must be XLM's specials. merges.txt (`a b[ count]` per line, `#version` headers skipped) becomes a fastBPE codes
file in a temporary folder (removed at exit); nothing is written into the model folder. Not expressed: the
per-language exceptions XLMTokenizer takes from sacremoses rather than Moses perl, and its `ja` (KyTea) path.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from xlp_cli.artifacts.special_ids import SPECIAL_TOKENS
from xlp_cli.bpe.codes import BpeCodec
from xlp_cli.bpe.dictionary import Dictionary
from xlp_cli.bpe.encoder import TextEncoder
from xlp_cli.bpe.tokenizer import Tokenizer
from xlp_cli.core.errors import BadInput
from xlp_cli.core.textfile import json_object
from xlp_cli.text.pipeline import TextPipeline

VOCAB, MERGES, CONFIG = "vocab.json", "merges.txt", "tokenizer_config.json"
SUFFIX = "</w>"


def found(folder: Path) -> bool:
    return (Path(folder) / VOCAB).is_file() and (Path(folder) / MERGES).is_file()


def words_of(vocab: dict, path: Path) -> list[str]:
    """xlp's dictionary entries in id order from vocab.json's {token: id}."""
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise BadInput("its ids are not 0..N-1, each once", path=path)
    words = [""] * len(vocab)
    for tok, i in vocab.items():
        words[i] = tok
    if tuple(words[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
        raise BadInput(f"ids 0-{len(SPECIAL_TOKENS) - 1} are not XLM's special tokens ({', '.join(SPECIAL_TOKENS[:4])}, "
                       "<special0>...)", path=path)
    out = list(SPECIAL_TOKENS) + [w[: -len(SUFFIX)] if w.endswith(SUFFIX) else w + "@@" for w in words[len(SPECIAL_TOKENS):]]
    if len(set(out)) != len(out):
        raise BadInput("two tokens map to one subword (a token ending in @@?)", path=path)
    return out


def _codes(merges: Path, dest: Path) -> Path:
    try:
        text = merges.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"not UTF-8 text ({e})", path=merges) from None
    rows = [(i, line.rstrip("\r").split(" ")) for i, line in enumerate(text.split("\n"), 1)  # (fastBPE splits on " ")
            if line.strip() and not line.startswith("#version")]
    lines = []
    for n, (lineno, parts) in enumerate(rows):
        if len(parts) not in (2, 3):
            raise BadInput(f"expected `left right[ count]`, got {' '.join(parts)[:60]!r}", path=merges, position=lineno)
        lines.append(f"{parts[0]} {parts[1]} {len(rows) - n}\n")  # fastBPE ranks merges by their order
    path = dest / "codes"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def text_encoder(folder: Path):
    """The TextEncoder of an XLMTokenizer folder (see the module docstring)."""

    folder = Path(folder)
    words = words_of(json_object(folder / VOCAB), folder / VOCAB)
    conf = json_object(folder / CONFIG) if (folder / CONFIG).is_file() else {}
    lower = bool(conf.get("do_lowercase_and_remove_accent", True))
    tmp = Path(tempfile.mkdtemp(prefix="xlp-hf-bpe-"))
    atexit.register(shutil.rmtree, tmp, True)
    codes = _codes(folder / MERGES, tmp)
    dico = Dictionary(words, [0] * len(words))
    pipeline = TextPipeline(clean=True, normalize=True, tokenize="xlm", lowercase="xlm" if lower else "none")
    return TextEncoder(pipeline, Tokenizer("fastbpe", dico, BpeCodec(codes)), None, {"codes": codes})
