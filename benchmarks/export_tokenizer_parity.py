"""Do the tokenizers of an `xlp export` give xlp's ids on raw text? Share of identical id sequences per language.

The export's tokenizer files are written by the export's own code (`export/hf_tokenizer.write`) for XLM-15's
released BPE (../shared/data/xlm_bpe_xnli15: codes_xnli_15, the first 95,000 entries of vocab_xnli_15, fastBPE's
vocab limit) and a text mode, then loaded the way users load them:
  remote   AutoTokenizer.from_pretrained(OUT, trust_remote_code=True)(raw, lang=L)   (XlpTokenizer)
  stock    AutoTokenizer.from_pretrained(OUT)(raw)                                   (XLMTokenizer, no remote code)
  stock+L  XLMTokenizer's own `_tokenize(raw, lang=L)` (what transformers 4 did with lang=; transformers 5 drops
           the argument); zh needs rjieba, which is not installed here: "-"
each against xlp's ids: `TextEncoder.encode(raw, L)` framed `</s> ... </s>`. Sentences: the first N distinct
sentence1/sentence2 of XNLI's test split per language (held out; ../shared/data/xnli/xnli.test.tsv).

    .venv/bin/python benchmarks/export_tokenizer_parity.py [--mode xlm|default] [--n 1000] [--langs en,fr,...]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from xlp_cli.artifacts.files import data_dir  # noqa: E402
from xlp_cli.bpe.codes import BpeCodec  # noqa: E402
from xlp_cli.bpe.dictionary import Dictionary  # noqa: E402
from xlp_cli.bpe.encoder import TextEncoder  # noqa: E402
from xlp_cli.bpe.tokenizer import Tokenizer  # noqa: E402
from xlp_cli.export import hf_tokenizer  # noqa: E402
from xlp_cli.text.pipeline import TextPipeline  # noqa: E402

LANGS = "en fr es de el bg ru tr ar vi th zh hi sw ur".split()
MODES = {"xlm": {"tokenize": "xlm", "lowercase": "xlm"}, "default": {"tokenize": "moses", "lowercase": "safe"}}


def sentences(path: Path, n: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            got = out.setdefault(row["language"], [])
            for s in (row["sentence1"], row["sentence2"]):
                if len(got) < n and s not in got:
                    got.append(s)
    return out


def export_tokenizer(folder: Path, mode: str, langs: list[str]) -> TextEncoder:
    src = data_dir() / "xlm_bpe_xnli15"
    codes, vocab = src / "codes_xnli_15", src / "vocab_xnli_15"
    dico = Dictionary.read(vocab, max_vocab=95000)
    encoder = TextEncoder(TextPipeline.from_config(MODES[mode]), Tokenizer("fastbpe", dico, BpeCodec(codes, vocab)),
                          files={"codes": codes, "vocab": vocab})
    hf_tokenizer.write(folder, encoder, langs, 512)
    return TextEncoder.load(folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=list(MODES), default="xlm")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--langs", default=",".join(LANGS))
    args = ap.parse_args()
    langs = args.langs.split(",")
    with tempfile.TemporaryDirectory(prefix="xlp-tok-parity-") as tmp:
        os.environ.setdefault("HF_MODULES_CACHE", str(Path(tmp) / "modules"))
        from transformers import AutoTokenizer

        folder = Path(tmp) / "export"
        xlp = export_tokenizer(folder, args.mode, LANGS)
        remote = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        stock = AutoTokenizer.from_pretrained(folder)
        assert type(remote).__name__ == "XlpTokenizer" and type(stock).__name__ == "XLMTokenizer"
        assert remote.vocab_size == stock.vocab_size == len(xlp.dictionary)
        data = sentences(data_dir() / "xnli" / "xnli.test.tsv", args.n)
        print(f"mode {args.mode} ({MODES[args.mode]}), XLM-15 BPE, XNLI test, first {args.n} distinct sentences")
        print("| lang | n | remote (XlpTokenizer) | stock (XLMTokenizer) | stock, lang= to _tokenize |")
        print("|---|---|---|---|---|")
        totals = [0, 0, 0, 0]
        cpu = {"xlp": 0.0, "remote": 0.0, "stock": 0.0}
        for lang in langs:
            raw = data[lang]
            t = time.process_time()
            want = [[1, *ids.tolist(), 1] for ids in xlp.encode_batch(raw, lang)]
            cpu["xlp"] += time.process_time() - t
            t = time.process_time()
            got_remote = [remote(s, lang=lang)["input_ids"] for s in raw]
            cpu["remote"] += time.process_time() - t
            t = time.process_time()
            got_stock = [stock(s)["input_ids"] for s in raw]
            cpu["stock"] += time.process_time() - t
            try:
                got_lang = [[1, *stock.convert_tokens_to_ids(stock._tokenize(s, lang=lang)), 1] for s in raw]
                same_lang = sum(a == b for a, b in zip(got_lang, want))
            except ImportError:
                same_lang = None
            same = [sum(a == b for a, b in zip(got, want)) for got in (got_remote, got_stock)]
            totals = [totals[0] + len(raw), totals[1] + same[0], totals[2] + same[1], totals[3] + (same_lang or 0)]
            pct = lambda k: f"{k}/{len(raw)} ({100 * k / len(raw):.1f}%)"  # noqa: E731
            print(f"| {lang} | {len(raw)} | {pct(same[0])} | {pct(same[1])} | "
                  f"{'-' if same_lang is None else pct(same_lang)} |", flush=True)
        n = totals[0]
        print(f"| all | {n} | {100 * totals[1] / n:.2f}% | {100 * totals[2] / n:.2f}% | "
              f"{100 * totals[3] / n:.2f}% (zh counted 0) |")
        print("CPU seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()))


if __name__ == "__main__":
    main()
