"""Throughput of `xlp prepare` against XLM's chain as a plain single-process sacremoses loop.

Both run in this process's session on the same real input (Common Voice sentences, several languages):
  reference  for each line: MosesPunctNormalizer(lang, pre_replace_unicode_punct=True).normalize,
             MosesTokenizer(lang).tokenize(escape=False), XLM's lowercase_and_remove_accent, write the line
  xlp        `xlp prepare --source text` (clean, normalize, tokenize, lowercase, length filter, dedup, split,
             zstd Parquet shards, manifest) with --workers 1 and 2, each in a fresh subprocess
The ratio printed is reference wall time / xlp wall time. Peak memory (RSS, largest process) of xlp is
measured for 1x and 4x input (4x = four times as many distinct lines per language).

    .venv/bin/python benchmarks/prepare_throughput.py [--lines 10000] [--langs en,fr,de,ru,ar]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xlp_cli.artifacts.files import data_dir  # noqa: E402

_RUN = r"""
import json, resource, sys, time
from pathlib import Path
from xlp_cli.prepare.config import PrepareConfig
from xlp_cli.prepare.run import run
args = json.loads(sys.argv[1])
t = time.perf_counter()
summary = run(PrepareConfig(**{**args, "out": Path(args["out"])}))
wall = time.perf_counter() - t
own = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "rss_main_mb": own.ru_maxrss / 1024, "rss_worker_mb": kids.ru_maxrss / 1024,
                  "cpu_main": own.ru_utime + own.ru_stime, "cpu_workers": kids.ru_utime + kids.ru_stime,
                  "kept": summary["kept"]}))
"""


def corpus_lines(lang: str, n: int) -> list[str]:
    folder = data_dir() / "commonvoice_sentences"
    files = sorted(folder.glob(f"{lang}.*.txt.gz")) or sorted(folder.glob(f"{lang}-*.txt.gz"))
    out: list[str] = []
    for f in files:
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    out.append(line)
                    if len(out) >= n:
                        return out
    return out


def xlm_lowercase_and_remove_accent(line: str) -> str:
    line = unicodedata.normalize("NFD", line.rstrip().lower())
    return "".join(c for c in line if unicodedata.category(c) != "Mn").lower()


def reference(files: dict[str, Path], out: Path) -> tuple[float, float]:
    """(wall, cpu) seconds of XLM's chain as a plain sacremoses loop."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    t = time.perf_counter()
    c = time.process_time()
    for lang, path in files.items():
        norm = MosesPunctNormalizer(lang, pre_replace_unicode_punct=True)
        tok = MosesTokenizer(lang)
        with open(path, encoding="utf-8") as fin, open(out / f"ref.{lang}", "w", encoding="utf-8") as fout:
            for line in fin:
                text = tok.tokenize(norm.normalize(line.rstrip("\n")), escape=False, return_str=True)
                fout.write(xlm_lowercase_and_remove_accent(text) + "\n")
    return time.perf_counter() - t, time.process_time() - c


def xlp(files: dict[str, Path], out: Path, workers: int) -> dict:
    args = {"inputs": [str(p) for p in files.values()], "source": "text", "lang": list(files), "out": str(out),
            "workers": workers, "max_tokens": 0}
    env = {**os.environ, "XLP_QUIET": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", _RUN, json.dumps(args)], capture_output=True, text=True, env=env)
    if r.returncode:
        raise SystemExit(f"xlp prepare failed: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def write_input(tmp: Path, langs: list[str], n: int, tag: str) -> tuple[dict[str, Path], int]:
    files, size = {}, 0
    for lang in langs:
        lines = corpus_lines(lang, n)
        p = tmp / f"{tag}.{lang}.txt"
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files[lang] = p
        size += p.stat().st_size
    return files, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10000, help="lines per language at 1x")
    ap.add_argument("--langs", default="en,fr,de,ru,ar")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repetitions; the best wall time counts")
    args = ap.parse_args()
    langs = args.langs.split(",")
    if not (data_dir() / "commonvoice_sentences").is_dir():
        raise SystemExit(f"commonvoice_sentences not found under {data_dir()}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        files, size = write_input(tmp, langs, args.lines, "x1")
        lines = sum(1 for p in files.values() for _ in open(p, encoding="utf-8"))
        print(f"input 1x: {lines} lines, {size / 1e6:.2f} MB, languages {','.join(langs)}  "
              f"(cpus: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f})")
        refs, w1s, w2s = [], [], []
        for i in range(args.repeat):  # interleaved, best of N: the machine is shared
            refs.append(reference(files, tmp))
            w1s.append(xlp(files, tmp / f"w1-{i}", 1))
            w2s.append(xlp(files, tmp / f"w2-{i}", 2))
        ref_wall = min(w for w, _ in refs)
        ref_cpu = min(c for _, c in refs)
        print(f"reference sacremoses loop : {ref_wall:7.2f} s  {lines / ref_wall:8.0f} lines/s  {size / 1e6 / ref_wall:.2f} MB/s"
              f"  cpu {ref_cpu:.2f} s")
        for name, runs in (("xlp prepare --workers 1", w1s), ("xlp prepare --workers 2", w2s)):
            r = min(runs, key=lambda x: x["wall"])
            print(f"{name:26s}: {r['wall']:7.2f} s  {lines / r['wall']:8.0f} lines/s  {size / 1e6 / r['wall']:.2f} MB/s"
                  f"  ratio {ref_wall / r['wall']:.2f}x  cpu main {r['cpu_main']:.2f} s + workers {r['cpu_workers']:.2f} s"
                  f"  peak RSS main {r['rss_main_mb']:.0f} MB, worker {r['rss_worker_mb']:.0f} MB")
        r2 = min(w2s, key=lambda x: x["wall"])
        files4, size4 = write_input(tmp, langs, 4 * args.lines, "x4")
        lines4 = sum(1 for p in files4.values() for _ in open(p, encoding="utf-8"))
        r4 = xlp(files4, tmp / "w2x4", 2)
        print(f"input 4x: {lines4} lines, {size4 / 1e6:.2f} MB: xlp --workers 2 {r4['wall']:.2f} s, "
              f"peak RSS main {r4['rss_main_mb']:.0f} MB (1x: {r2['rss_main_mb']:.0f} MB), "
              f"worker {r4['rss_worker_mb']:.0f} MB (1x: {r2['rss_worker_mb']:.0f} MB)")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
