"""Parity of xlp's text modes with XLM's real chain on an evaluation set that development never looked at.

The set: every sentence1 and sentence2 of XNLI's test split (../shared/data/xnli/xnli.test.tsv), per language,
for the 15 XNLI languages (the parity tests use other text: tests/text_samples.py). The reference is XLM's chain
run here (tests/xlm_chain.py: the Moses perl scripts, segment_th.py, jieba for zh, lowercase_and_remove_accent.py).
Per language it prints the share of lines that are
  tok.sh     byte-identical to tokenize.sh's output       (`--tokenize xlm --lowercase none`)
  xlm        byte-identical to the full chain's output     (`--tokenize xlm --lowercase xlm`)
  bpe        byte-identical after BPE with codes_xnli_15 + vocab_xnli_15 (xlp's applier on xlp's text against
             `fast applybpe` on the reference text; needs .bench/fastbpe/fast from benchmarks/text_pipeline.py)
  default    the default mode (`--tokenize moses --lowercase safe`) against the full chain: bytes / tokens
             (what its documented differences amount to on this text)

    .venv/bin/python benchmarks/text_parity_eval.py [--langs en,fr,...] [--limit N]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from xlm_chain import unavailable, xlm_chain  # noqa: E402

from xlp_cli.artifacts.files import data_dir  # noqa: E402
from xlp_cli.text.pipeline import TextPipeline  # noqa: E402

LANGS = "en fr es de el bg ru tr ar vi th zh hi sw ur".split()
FAST = ROOT / ".bench" / "fastbpe" / "fast"


def xnli_test(lang: str, limit: int) -> list[str]:
    with open(data_dir() / "xnli" / "xnli.test.tsv", encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if r["language"] == lang]
    lines = [s for r in rows for s in (r["sentence1"], r["sentence2"])]
    lines = [s.replace("\n", " ") for s in lines]
    return lines[:limit] if limit else lines


def bpe_rate(ours: list[str], ref: list[str]) -> float | None:
    if not FAST.is_file():
        return None
    from xlp_cli.bpe.filter import load_applier

    xlm = data_dir() / "xlm_bpe_xnli15"
    applier = load_applier(xlm / "codes_xnli_15", xlm / "vocab_xnli_15")
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "ref.txt", Path(tmp) / "ref.bpe"
        src.write_text("\n".join(ref) + "\n", encoding="utf-8")
        subprocess.run([str(FAST), "applybpe", str(out), str(src), str(xlm / "codes_xnli_15"), str(xlm / "vocab_xnli_15")],
                       check=True, capture_output=True)
        want = out.read_text(encoding="utf-8").split("\n")[:-1]
    got = applier.apply_block(("\n".join(ours) + "\n").encode("utf-8"), 2).decode("utf-8").split("\n")[:-1]
    return sum(a == b for a, b in zip(got, want)) / len(want)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--limit", type=int, default=0, help="at most N lines per language (0: all)")
    args = ap.parse_args()
    reason = unavailable()
    if reason:
        raise SystemExit(f"XLM's reference chain cannot run here: {reason}")
    results = {}
    print(f"{'lang':5} {'lines':>6} {'tok.sh':>8} {'xlm':>8} {'bpe':>8} {'default bytes/tokens':>22}")
    for lang in args.langs.split(","):
        t0 = time.time()
        lines = xnli_test(lang, args.limit)
        moses, xlm = xlm_chain(lines, lang)
        tok = TextPipeline(tokenize="xlm", lowercase="none").process_batch(lines, lang)
        full = TextPipeline(tokenize="xlm", lowercase="xlm").process_batch(lines, lang)
        default = TextPipeline().process_batch(lines, lang)
        n = len(lines)
        r = {"lines": n, "tokenize_sh": sum(a == b for a, b in zip(tok, moses)) / n,
             "xlm": sum(a == b for a, b in zip(full, xlm)) / n, "bpe": bpe_rate(full, xlm),
             "default_bytes": sum(a == b for a, b in zip(default, xlm)) / n,
             "default_tokens": sum(a.split() == b.split() for a, b in zip(default, xlm)) / n,
             "examples": [{"input": lines[i], "reference": xlm[i], "xlp": full[i]} for i in range(n) if full[i] != xlm[i]][:5],
             "seconds": round(time.time() - t0, 1)}
        results[lang] = r
        bpe = "n/a" if r["bpe"] is None else f"{100 * r['bpe']:.2f}%"
        print(f"{lang:5} {n:>6} {100 * r['tokenize_sh']:>7.2f}% {100 * r['xlm']:>7.2f}% {bpe:>8} "
              f"{100 * r['default_bytes']:>10.2f}% / {100 * r['default_tokens']:.2f}%", flush=True)
    out = ROOT / ".bench" / "text" / "parity_eval.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    print(f"details (with the first differing lines): {out}")


if __name__ == "__main__":
    main()
