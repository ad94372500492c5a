"""Throughput of `xlp prepare --source wikipedia` against a plain single-process loop over the same dumps.

Both run in this session on the same real dumps (default: every dump in ../shared/data/wikipedia_dumps):
  reference  one process: stream each dump with ElementTree.iterparse, keep main-namespace non-redirect
             pages, `mwparserfromhell.parse(wikitext).strip_code()`, then XLM's chain on every non-empty
             line (MosesPunctNormalizer, MosesTokenizer(escape=False), lowercase_and_remove_accent), write it
  xlp        `xlp prepare --source wikipedia` (XML streaming in the main process; wikitext -> paragraphs,
             clean, normalize, tokenize, lowercase in the workers; filter, dedup, split, zstd Parquet,
             manifest) with --workers 1 and 2, each in a fresh subprocess
The ratio printed is reference wall time / xlp wall time (best of --repeat interleaved runs). CPU seconds are
split into the main process and the workers: the main process (XML, decompression, finalizing) bounds the
speed-up that more workers can give, (main + workers) / main. The machine may be shared: the load average
is printed with each run.

    .venv/bin/python benchmarks/wikipedia_throughput.py [--repeat 2] [--xlp-root DIR] [DUMP ...]
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prepare_throughput import _RUN, xlm_lowercase_and_remove_accent  # noqa: E402

from xlp_cli.artifacts.files import data_dir  # noqa: E402


def _open(path: Path):
    head = path.open("rb").read(6)
    if head.startswith(b"BZh"):
        return bz2.open(path, "rb")
    if head.startswith(b"\xfd7zXZ"):
        return lzma.open(path, "rb")
    if head.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")
    return path.open("rb")


def _pages(path: Path):
    """(lang, wikitext) of the main-namespace, non-redirect pages; stops quietly at a truncation."""
    lang = path.name.split("wiki", 1)[0]
    with _open(path) as f:
        try:
            for _, elem in ET.iterparse(f):
                if elem.tag.rsplit("}", 1)[-1] != "page":
                    continue
                fields = {c.tag.rsplit("}", 1)[-1]: c for c in elem}
                rev = fields.get("revision")
                text = None
                if rev is not None:
                    text = next((c.text for c in rev if c.tag.rsplit("}", 1)[-1] == "text"), None)
                ns = fields.get("ns")
                if text and (ns is None or (ns.text or "").strip() == "0") and "redirect" not in fields \
                        and not text.lstrip().lower().startswith("#redirect"):
                    yield lang, text
                elem.clear()
        except (ET.ParseError, EOFError, lzma.LZMAError, OSError):
            return


def reference(dumps: list[Path], out: Path) -> tuple[float, float, int]:
    """(wall, cpu, lines) of the plain loop."""
    import mwparserfromhell
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    t = time.perf_counter()
    c = time.process_time()
    tools: dict[str, tuple] = {}
    n = 0
    with open(out / "ref.txt", "w", encoding="utf-8") as fout:
        for path in dumps:
            for lang, text in _pages(path):
                if lang not in tools:
                    tools[lang] = (MosesPunctNormalizer(lang, pre_replace_unicode_punct=True), MosesTokenizer(lang))
                norm, tok = tools[lang]
                for line in mwparserfromhell.parse(text).strip_code().split("\n"):
                    line = line.strip()
                    if line:
                        line = tok.tokenize(norm.normalize(line), escape=False, return_str=True)
                        fout.write(xlm_lowercase_and_remove_accent(line) + "\n")
                        n += 1
    return time.perf_counter() - t, time.process_time() - c, n


def xlp(dumps: list[Path], out: Path, workers: int, xlp_root: Path) -> dict:
    args = {"inputs": [str(p) for p in dumps], "source": "wikipedia", "out": str(out), "workers": workers}
    env = {**os.environ, "XLP_QUIET": "1", "PYTHONPATH": str(xlp_root)}
    load = os.getloadavg()[0]
    r = subprocess.run([sys.executable, "-c", _RUN, json.dumps(args)], capture_output=True, text=True, env=env,
                       cwd=xlp_root)  # `-c` puts the working folder first on sys.path
    if r.returncode:
        raise SystemExit(f"xlp prepare failed: {r.stderr.strip().splitlines()[-1:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["load"] = load
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    res["read"] = manifest["records"]["read"]
    res["shards"] = {k: v["sha256"] for k, v in manifest["outputs"]["shards"].items()}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", nargs="*", type=Path, help="dumps (default: all in the shared wikipedia_dumps)")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved repetitions; the best wall time counts")
    ap.add_argument("--xlp-root", type=Path, default=ROOT, help="the xlp checkout to time (e.g. an older one)")
    args = ap.parse_args()
    dumps = args.dumps or sorted((data_dir() / "wikipedia_dumps").glob("*wiki*"))
    if not dumps:
        raise SystemExit(f"no dump found under {data_dir() / 'wikipedia_dumps'}")
    size = sum(p.stat().st_size for p in dumps)
    print(f"input: {len(dumps)} dumps, {size / 1e6:.2f} MB compressed  (cpus: {os.cpu_count()}, "
          f"load average before: {os.getloadavg()[0]:.1f}; xlp from {args.xlp_root})")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        refs, runs = [], {1: [], 2: []}
        for i in range(args.repeat):  # interleaved, best of N: the machine is shared
            load = os.getloadavg()[0]
            refs.append((*reference(dumps, tmp), load))
            for w in runs:
                runs[w].append(xlp(dumps, tmp / f"w{w}-{i}", w, args.xlp_root))
        ref_wall, ref_cpu, ref_lines, ref_load = min(refs)
        print(f"reference strip_code + sacremoses loop: {ref_wall:7.2f} s  {ref_lines} lines, {ref_lines / ref_wall:7.0f} lines/s"
              f"  cpu {ref_cpu:.2f} s  (load {ref_load:.1f})")
        best = {}
        for w, rs in runs.items():
            r = best[w] = min(rs, key=lambda x: x["wall"])
            cpu = r["cpu_main"] + r["cpu_workers"]
            print(f"xlp prepare --workers {w}: {r['wall']:7.2f} s  {r['read'] / r['wall']:7.0f} paragraphs/s"
                  f"  ratio {ref_wall / r['wall']:.2f}x  cpu main {r['cpu_main']:.2f} s + workers"
                  f" {r['cpu_workers']:.2f} s (bound on the speed-up from more workers: {cpu / r['cpu_main']:.1f}x)"
                  f"  peak RSS main {r['rss_main_mb']:.0f} MB, worker {r['rss_worker_mb']:.0f} MB  (load {r['load']:.1f})")
        print(f"--workers 2 vs 1: {best[1]['wall'] / best[2]['wall']:.2f}x wall; same shards: "
              f"{all(r['shards'] == best[1]['shards'] for rs in runs.values() for r in rs)}")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
