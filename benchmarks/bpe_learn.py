"""Benchmark `xlp bpe learn` / `xlp bpe apply` against the reference fastBPE binary, in the same run.

    .venv/bin/python benchmarks/bpe_learn.py [--merges 10000] [--lines 0]

1. Builds the reference `fast` binary from the fastBPE 0.1.0 sdist (pip download into .bench/, g++ -O3 -pthread;
   never committed).
2. Corpus: every Common Voice sentence of the 14 languages in ../shared/data/commonvoice_sentences (plus the
   GlobalVoices sw side), lowercased, punctuation split off by a regex (a cheap stand-in for Moses, enough for
   a speed test; zh and th, written without spaces, are split into characters), written as a prepare-shaped
   folder (Parquet shards + manifest).
3. learn: the full `xlp bpe learn` stage (Parquet -> XLM sampling -> native learner -> codes, vocab, dict) and the
   native learner alone on the dumped learning corpus, vs `fast learnbpe N corpus.txt` on that same file.
   Prints times, the speed ratio and whether the codes are byte-identical.
4. apply: `fast applybpe` vs xlp's per-unique-word application through fastBPE's Python API vs fastBPE's
   plain `apply` on every sentence; outputs must be byte-identical.
"""

from __future__ import annotations

import argparse
import gzip
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xlp_cli.artifacts.files import data_dir  # noqa: E402

BENCH = ROOT / ".bench" / "bpe"


def build_fast() -> Path:
    exe = BENCH / "fast"
    if exe.is_file():
        return exe
    BENCH.mkdir(parents=True, exist_ok=True)
    sdists = list(BENCH.glob("fastBPE-0.1.0.tar.gz"))
    if not sdists:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        "fastBPE==0.1.0", "-d", str(BENCH)], check=True)
        sdists = list(BENCH.glob("fastBPE-0.1.0.tar.gz"))
    with tarfile.open(sdists[0]) as tar:
        tar.extractall(BENCH, filter="data")
    src = BENCH / "fastBPE-0.1.0" / "fastBPE"
    subprocess.run(["g++", "-std=c++11", "-O3", "-pthread", str(src / "main.cc"), "-I", str(src), "-o", str(exe)], check=True)
    return exe


PUNCT = re.compile(r"([^\w\s'])")


def corpus_lines(limit: int) -> dict[str, list[str]]:
    data = data_dir()
    out: dict[str, list[str]] = {}
    files = sorted((data / "commonvoice_sentences").glob("*.txt.gz")) + [data / "opus_globalvoices_en_sw" / "GlobalVoices.en-sw.sw.gz"]
    for f in files:
        lang = f.name.split(".")[0].split("-")[0] if "GlobalVoices" not in f.name else "sw"
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                t = " ".join(PUNCT.sub(r" \1 ", line.strip().lower()).split())
                if lang in ("zh", "th"):  # no spaces between words: one character per token (a crude stand-in)
                    t = " ".join(ch for ch in t if not ch.isspace())
                if t:
                    out.setdefault(lang, []).append(t)
    if limit:
        out = {k: v[:limit] for k, v in out.items()}
    return out


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the machine is shared: wall time is noisy)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, *a, **k):
    """(result, CPU seconds); wall seconds are printed alongside in WALL[-1]."""
    t, c = time.perf_counter(), _cpu()
    r = fn(*a, **k)
    WALL.append(time.perf_counter() - t)
    return r, _cpu() - c


WALL: list[float] = []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--merges", type=int, default=10000)
    ap.add_argument("--lines", type=int, default=0, help="cap per language (0: all)")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT / "tests"))
    from bpe_fixtures import make_prepared

    from xlp_cli.bpe import corpus
    from xlp_cli.bpe.codes import BpeCodec, learn_merges
    from xlp_cli.bpe.config import BpeLearnConfig
    from xlp_cli.bpe.run import learn

    fast = build_fast()
    work = BENCH / "work"
    shutil.rmtree(work, ignore_errors=True)
    lines = corpus_lines(args.lines)
    prep = make_prepared(work / "prep", lines, shard_rows=50000)
    n_lines = sum(map(len, lines.values()))
    print(f"corpus: {n_lines:,} sentences, {len(lines)} languages; merges: {args.merges}")

    # ---- learn: the whole stage, from Parquet
    summary, t_stage = timed(learn, BpeLearnConfig(data=[prep], out=work / "bpe", codes=args.merges))
    print(f"xlp bpe learn (stage: Parquet, sampling, learn, vocab, dict): {t_stage:.2f} s CPU ({WALL[-1]:.2f} s wall), "
          f"{summary['learning_words']:,} running words")

    # the same learning corpus as a text file, in the order the stage fed it
    cfg = BpeLearnConfig(data=[prep], out=work / "bpe")
    sources = corpus.language_sources(prep, "train", [], False, "text")
    plan = corpus.sampling_plan({l: corpus.rows([s for s, _ in v]) for l, v in sources.items()}, cfg.alpha, 0)
    text_path = work / "learn.txt"
    with open(text_path, "w", encoding="utf-8") as f:
        for _lang, batch in corpus.sampled_lines(sources, plan, cfg.seed):
            f.write("\n".join(batch) + "\n")

    blob = text_path.read_bytes()
    (merges, _, _), t_ours = timed(learn_merges, [blob], args.merges)
    with open(work / "codes.ref", "w") as out:
        _, t_ref = timed(subprocess.run, [str(fast), "learnbpe", str(args.merges), str(text_path)], stdout=out,
                         stderr=subprocess.DEVNULL, check=True)
    ours_text = "".join(f"{m.left} {m.right} {m.count}\n" for m in merges)
    ref_text = (work / "codes.ref").read_text(encoding="utf-8")
    same = ours_text == ref_text
    stage_same = (work / "bpe" / "codes").read_text(encoding="utf-8") == ref_text
    print(f"learn, same text file, CPU seconds: fast learnbpe {t_ref:.2f} s | xlp native learner {t_ours:.2f} s | "
          f"speed ratio (fast / xlp) {t_ref / t_ours:.1f}x")
    print(f"codes identical to fast learnbpe: learner {same}, stage output {stage_same}")
    if not same:
        diff = next(i for i, (a, b) in enumerate(zip(ours_text.splitlines(), ref_text.splitlines())) if a != b)
        print(f"  first difference at merge {diff + 1}: {ours_text.splitlines()[diff]!r} vs {ref_text.splitlines()[diff]!r}")

    # ---- apply: binary vs per-unique-word Python API vs plain Python API
    codes, vocab = work / "bpe" / "codes", work / "bpe" / "vocab"
    src = work / "apply.txt"
    all_lines = [l for v in lines.values() for l in v]
    src.write_text("\n".join(all_lines) + "\n", encoding="utf-8")
    _, t_bin = timed(subprocess.run, [str(fast), "applybpe", str(work / "applied.ref"), str(src), str(codes), str(vocab)],
                     stderr=subprocess.DEVNULL, check=True)
    codec = BpeCodec(codes, vocab)
    out_lines, t_xlp = timed(codec.apply_lines, all_lines)
    import fastBPE

    plain = fastBPE.fastBPE(str(codes), str(vocab))
    plain_lines, t_plain = timed(plain.apply, all_lines)
    ref = (work / "applied.ref").read_text(encoding="utf-8")
    print(f"apply {len(all_lines):,} sentences, CPU seconds: fast applybpe {t_bin:.2f} s (all its threads) | "
          f"xlp per-unique-word {t_xlp:.2f} s | fastBPE.apply per sentence {t_plain:.2f} s")
    nl = "\n"
    ok_xlp = nl.join(out_lines) + nl == ref
    ok_plain = nl.join(plain_lines) + nl == ref
    print(f"apply byte-identical to fast applybpe: {ok_xlp}; plain API identical: {ok_plain}; "
          f"xlp speed-up over plain API {t_plain / t_xlp:.1f}x")


if __name__ == "__main__":
    main()
