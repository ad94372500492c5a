"""xlp's text pipeline against XLM's real chain (Moses perl + lowercase_and_remove_accent.py + fastBPE), same run.

For each language (default en, de, ru), on >= --mb MB of real text (shared corpora, concatenated and repeated
into .bench/text/, never flores101_devtest or ntrex128):
  end to end  reference: tools/tokenize.sh's commands with `tokenizer.perl -threads 2` | lowercase_and_remove_accent.py,
                         then `fast applybpe` with XLM's codes_xnli_15 + vocab_xnli_15
              xlp:       `xlp prepare --source text --tokenize xlm --lowercase xlm --bpe-from codes_xnli_15
                         --workers 2 --no-dedup --max-tokens 0` (Parquet text shards + token-id shards written)
              wall time and CPU (--repeat interleaved runs: the best and the medians), and, in a run of its own
              per side, the peak over time of the RSS summed over every process (the probe reads /proc/PID/smaps
              every 20 ms and would slow the timed runs); the subword lines of both must be the same (as
              multisets: prepare splits the lines into train/valid/test)
  tokenizer   `tokenizer.perl -no-escape -l L` (one thread) vs `xlp text --workers 1 --no-clean --no-normalize
              --tokenize xlm --lowercase none` (start-up included) and vs the native tokenizer in-process (one
              thread, 1 MiB blocks), all on the normalized text, outputs compared byte for byte; per core =
              CPU seconds
  bpe apply   `fast applybpe OUT IN codes vocab` vs `xlp bpe apply --codes --vocab IN OUT` on the 10 MB lowercased
              text, start-up included, outputs compared byte for byte
  memory      xlp prepare again on 4x the input (4x the lines): peak summed RSS at 1x and 4x
fastBPE's `fast` binary is built from its PyPI sdist into .bench/fastbpe/ (pip download + g++), as XLM does.

    .venv/bin/python benchmarks/text_pipeline.py [--langs en,de,ru] [--mb 10] [--repeat 1] [--no-4x] [--xlp-root DIR]
"""

from __future__ import annotations

import argparse
import compileall
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / ".bench"
PY = sys.executable
XLP = str(Path(PY).with_name("xlp"))  # --xlp-root DIR: `python -m xlp_cli` from another source tree instead
DATA = Path(os.environ.get("XLP_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()  # commands may run elsewhere
REF = ROOT.parent / "shared" / "tools" / "reference"
TOK = REF / "mosesdecoder" / "scripts" / "tokenizer"
LOWER = REF / "XLM" / "tools" / "lowercase_and_remove_accent.py"
CODES = DATA / "xlm_bpe_xnli15" / "codes_xnli_15"
VOCAB = DATA / "xlm_bpe_xnli15" / "vocab_xnli_15"
ENV = dict(os.environ, LC_ALL="C.UTF-8", XLP_QUIET="1")
CWD = ROOT  # where the commands run (--xlp-root: that tree)


def build_fast() -> Path:
    """fastBPE's `fast` binary from the fastBPE==0.1.0 sdist, compiled as XLM's install-tools.sh does."""
    out = BENCH / "fastbpe"
    fast = out / "fast"
    if fast.is_file():
        return fast
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([PY, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "fastBPE==0.1.0", "-d", str(out)],
                   check=True, capture_output=True)
    subprocess.run(["tar", "xzf", str(next(out.glob("fastBPE-0.1.0.tar.*"))), "-C", str(out)], check=True)
    src = out / "fastBPE-0.1.0" / "fastBPE"
    subprocess.run(["g++", "-std=c++11", "-pthread", "-O3", str(src / "main.cc"), f"-I{src}", "-o", str(fast)], check=True)
    return fast


def _lines(path: str) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="\n") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def corpus(lang: str) -> list[str]:
    """Real sentences of one language from the shared corpora (Common Voice, UD, Tatoeba, XNLI dev, ...)."""
    tatoeba = {"de": "deu", "ru": "rus", "fr": "fra", "es": "spa"}
    pats = [f"commonvoice_sentences/{lang}.*.txt.gz", f"ud_treebanks/UD_*/{lang}_*.conllu.gz",
            f"iwslt14_de_en/IWSLT14.*.{lang}", f"multi30k/*.{lang}.gz"]
    pats += [f"tatoeba_laser/tatoeba.{tatoeba[lang]}-eng.{tatoeba[lang]}"] if lang in tatoeba else []
    pats += ["opus_globalvoices_en_sw/GlobalVoices.en-sw.en.gz"] if lang == "en" else []
    out: list[str] = []
    for pat in pats:
        for path in sorted(glob.glob(str(DATA / pat))):
            lines = _lines(path)
            if path.endswith(".conllu.gz"):
                lines = [x[len("# text = "):] for x in lines if x.startswith("# text = ")]
            out += lines
    return out


def distinct_lines(lang: str) -> list[str]:
    """Every distinct line of the language's shared text, in a fixed order (English adds MultiNLI's train
    sentences): no line twice, so no cache sees a line again."""
    lines = corpus(lang)
    if lang == "en":
        for row in _lines(str(DATA / "mnli_en" / "mnli_train.tsv"))[1:]:
            lines += row.split("\t")[:2]
    seen: set[str] = set()
    return [x for x in lines if x.strip() and not (x in seen or seen.add(x))]


def make_input(lang: str, mb: float, times: int, distinct: bool = False) -> Path:
    """`times` x `mb` MB of the language's text: its corpus repeated, or (`distinct`) its distinct lines only,
    as many as there are up to that size (the size reached is printed)."""
    if distinct:
        path = BENCH / "text" / f"in.{lang}.{mb:g}mb.x{times}.distinct.txt"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            out, size = [], 0
            for line in distinct_lines(lang):
                if size >= int(mb * 1e6) * times:
                    break
                out.append(line)
                size += len(line.encode("utf-8")) + 1
            path.write_text("\n".join(out) + "\n", encoding="utf-8")
        return path
    path = BENCH / "text" / f"in.{lang}.{mb:g}mb.x{times}.txt"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = corpus(lang)
    if not lines:
        raise SystemExit(f"no shared text for {lang} under {DATA}")
    data = ("\n".join(lines) + "\n").encode("utf-8")
    target = int(mb * 1e6) * times
    with open(path, "wb") as f:
        while f.tell() < target:
            rest = target - f.tell()
            f.write(data if len(data) <= rest else data[: data.index(b"\n", rest - 1) + 1])
    return path


def run_measured(cmd: str, memory: bool = False) -> dict:
    """Run a shell command; wall time and CPU of the whole tree; with `memory`, the peak of the RSS (and PSS)
    summed over its processes, sampled every 20 ms. The probe reads /proc/PID/smaps of every process: it costs a
    good part of a core, so the timed runs go without it (with it, xlp prepare's wall time was ~11% longer:
    2.34 vs 2.11 s, median of 4 interleaved runs, en 10 MB) and memory is measured in runs of its own."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    before = os.times()
    proc = subprocess.Popen(["bash", "-c", cmd], env=ENV, cwd=CWD, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0, 0]  # RSS summed over the processes; PSS summed (shared pages divided among their sharers)
    stop = threading.Event()

    def sample() -> None:
        root = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                procs = [root] + root.children(recursive=True)
                rss = pss = 0
                for p in procs:
                    try:
                        m = p.memory_full_info()
                        rss, pss = rss + m.rss, pss + m.pss
                    except psutil.Error:
                        pass
                peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            except psutil.Error:
                pass
            stop.wait(0.02)

    th = threading.Thread(target=sample, daemon=True)
    if memory:
        th.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    if memory:
        th.join()
    after = os.times()
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}): {cmd}\n{err.decode(errors='replace')[-2000:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"wall": round(wall, 3), "cpu": round(cpu, 2),
            **({"peak_rss_mb": round(peak[0] / 2**20, 1), "peak_pss_mb": round(peak[1] / 2**20, 1)} if memory else {}),
            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}


def reference_chain(lang: str, src: Path, work: Path, fast: Path, memory: bool = False) -> tuple[dict, Path]:
    xlm, bpe = work / f"ref.{lang}.xlm", work / f"ref.{lang}.bpe"
    cmd = (f"perl {TOK}/replace-unicode-punctuation.perl < {src} | perl {TOK}/normalize-punctuation.perl -l {lang} "
           f"| perl {TOK}/remove-non-printing-char.perl | perl {TOK}/tokenizer.perl -no-escape -threads 2 -l {lang} "
           f"2>/dev/null | {PY} {LOWER} > {xlm} && {fast} applybpe {bpe} {xlm} {CODES} {VOCAB} 2>/dev/null")
    return run_measured(cmd, memory), bpe


def ids_folder(out: Path) -> Path:
    """Where `xlp prepare --bpe-from` writes the token ids: the sibling OUT-ids (xlp 0.1 and older trees: OUT/ids)."""
    sibling = out.parent / f"{out.name}-ids"
    return sibling if sibling.is_dir() or not (out / "ids").is_dir() else out / "ids"


def xlp_prepare(lang: str, src: Path, out: Path, memory: bool = False) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out.parent / f"{out.name}-ids", ignore_errors=True)  # (else a rerun finds it applied already)
    cmd = (f"{XLP} prepare --source text --lang {lang} {src} --out {out} --tokenize xlm --lowercase xlm "
           f"--bpe-from {CODES} --workers 2 --no-dedup --max-tokens 0")
    return run_measured(cmd, memory)


def same_subwords(out: Path, ref_bpe: Path) -> bool:
    import pyarrow.parquet as pq

    shards = sorted(ids_folder(out).rglob("part-*.parquet"))
    if not shards:
        raise SystemExit(f"no token-id shards beside {out}")
    got = sorted(t for p in shards for t in pq.read_table(p, columns=["text"]).column(0).to_pylist())
    want = sorted(x for x in ref_bpe.read_text(encoding="utf-8").split("\n")[:-1] if x.strip())
    return got == want


_TOKENIZE_ONLY = r"""
import resource, sys, time
from xlp_cli.text import native
lang, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
pipe = native.pipeline(lang, False, False, "xlm", "none")
t, r = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
out, start = [], 0
while start < len(data):  # 1 MiB blocks, one thread
    end = data.find(b"\n", start + (1 << 20))
    end = len(data) if end < 0 else end + 1
    out.append(pipe.run_bytes(data[start:end], native.TOKENIZE, 0)[0])
    start = end
r2 = resource.getrusage(resource.RUSAGE_SELF)
open(sys.argv[3], "wb").write(b"".join(out))
print(time.perf_counter() - t, r2.ru_utime + r2.ru_stime - r.ru_utime - r.ru_stime)
"""


def tokenizer_alone(lang: str, src: Path, work: Path) -> dict:
    """tokenizer.perl (one thread) vs xlp's tokenizer on one core: the CLI (start-up included) and in-process."""
    norm = work / f"norm.{lang}.txt"
    subprocess.run(["bash", "-c", f"perl {TOK}/replace-unicode-punctuation.perl < {src} | perl {TOK}/normalize-punctuation.perl "
                    f"-l {lang} | perl {TOK}/remove-non-printing-char.perl > {norm}"], env=ENV, check=True)
    perl = run_measured(f"perl {TOK}/tokenizer.perl -no-escape -l {lang} < {norm} > {work}/tok.perl 2>/dev/null")
    cli = run_measured(f"{XLP} text --lang {lang} --workers 1 --no-clean --no-normalize --tokenize xlm --lowercase none "
                       f"< {norm} > {work}/tok.xlp")
    res = subprocess.run([PY, "-c", _TOKENIZE_ONLY, lang, str(norm), str(work / "tok.native")], env=ENV, cwd=CWD,
                         check=True, capture_output=True, text=True)
    wall, cpu = map(float, res.stdout.split())
    same = (work / "tok.perl").read_bytes() == (work / "tok.xlp").read_bytes() == (work / "tok.native").read_bytes()
    return {"perl": perl, "xlp_cli": cli, "xlp_native": {"wall": round(wall, 3), "cpu": round(cpu, 2)},
            "ratio_cpu_cli": round(perl["cpu"] / cli["cpu"], 2), "ratio_cpu_native": round(perl["cpu"] / cpu, 2),
            "ratio_wall_cli": round(perl["wall"] / cli["wall"], 2), "identical": same, "mb": round(norm.stat().st_size / 1e6, 2)}


def bpe_apply(ref_xlm: Path, work: Path, fast: Path) -> dict:
    f = run_measured(f"{fast} applybpe {work}/apply.fast {ref_xlm} {CODES} {VOCAB} 2>/dev/null")
    x = run_measured(f"{XLP} bpe apply --codes {CODES} --vocab {VOCAB} {ref_xlm} {work}/apply.xlp 2>/dev/null")
    same = (work / "apply.fast").read_bytes() == (work / "apply.xlp").read_bytes()
    return {"fast": f, "xlp": x, "ratio": round(f["wall"] / x["wall"], 2), "ratio_cpu": round(f["cpu"] / x["cpu"], 2),
            "identical": same,
            "mb": round(ref_xlm.stat().st_size / 1e6, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--langs", default="en,de,ru")
    ap.add_argument("--mb", type=float, default=10.0, help="MB of input per language (end to end)")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved runs; the best wall time of each side is kept")
    ap.add_argument("--no-4x", action="store_true", help="skip the 4x-input memory run")
    ap.add_argument("--distinct", action="store_true",
                    help="distinct lines only (no line repeated: repeated text flatters caches); smaller than --mb "
                         "where the shared text of a language is")
    ap.add_argument("--xlp-root", type=Path, help="time the xlp of another source tree (built extensions included)")
    args = ap.parse_args()
    # xlp as installed: its modules' bytecode written, as `make setup` and pip do (where PYTHONDONTWRITEBYTECODE is
    # set, every xlp process would otherwise compile its ~80 modules again, ~0.1 s of CPU a run)
    compileall.compile_dir(ROOT / "xlp_cli", quiet=1)
    global XLP, CWD
    if args.xlp_root:  # run from inside that tree: `python -m` and `-c` put the working directory first on sys.path
        CWD = args.xlp_root.resolve()
        if not (CWD / "xlp_cli").is_dir():
            raise SystemExit(f"--xlp-root {args.xlp_root}: no xlp_cli/ there")
        main_mod = "xlp_cli" if (CWD / "xlp_cli" / "__main__.py").is_file() else "xlp_cli.cli.app"  # (older trees)
        XLP = f"{PY} -m {main_mod}"
    for p in (TOK / "tokenizer.perl", LOWER, CODES, VOCAB):
        if not p.is_file():
            raise SystemExit(f"missing {p}: the reference tools and XLM's codes are needed")
    if not shutil.which("perl"):
        raise SystemExit("perl is needed to run the reference chain")
    fast = build_fast()
    work = BENCH / "text" / "work"
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": {"cpus": os.cpu_count(), "load_start": os.getloadavg()}, "langs": {}}
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} "
          f"(ratios of CPU seconds are less sensitive to other load than wall-clock ratios)", flush=True)
    for lang in args.langs.split(","):
        src = make_input(lang, args.mb, 1, args.distinct)
        mb = round(src.stat().st_size / 1e6, 2)
        print(f"[{lang}] {mb} MB, {sum(1 for _ in open(src, 'rb')):,} lines", flush=True)
        best: dict = {}
        runs: dict = {"reference": [], "xlp": []}
        for _ in range(args.repeat):  # timed runs, interleaved, without the memory probe
            ref, ref_bpe = reference_chain(lang, src, work, fast)
            xlp = xlp_prepare(lang, src, work / f"prep.{lang}")
            for k, v in (("reference", ref), ("xlp", xlp)):
                runs[k].append(v)
                if k not in best or v["wall"] < best[k]["wall"]:
                    best[k] = v
        same = same_subwords(work / f"prep.{lang}", ref_bpe)
        walls = {k: sorted(v["wall"] for v in vs) for k, vs in runs.items()}
        median = {k: w[len(w) // 2] for k, w in walls.items()}
        r = {"mb": mb, "reference": best["reference"], "xlp": best["xlp"], "same_subwords": same,
             "ratio": round(best["reference"]["wall"] / best["xlp"]["wall"], 2),
             "ratio_cpu": round(best["reference"]["cpu"] / best["xlp"]["cpu"], 2),
             "walls": walls, "ratio_median": round(median["reference"] / median["xlp"], 2)}
        print(f"  end to end: reference {r['reference']['wall']} s (CPU {r['reference']['cpu']} s), "
              f"xlp {r['xlp']['wall']} s (CPU {r['xlp']['cpu']} s): {r['ratio']}x wall (best of {args.repeat}; "
              f"medians {r['ratio_median']}x), {r['ratio_cpu']}x CPU; load {r['xlp']['load_before']}; "
              f"same subwords: {same}", flush=True)
        r["reference_memory"], _ = reference_chain(lang, src, work, fast, memory=True)
        r["xlp_memory"] = xlp_prepare(lang, src, work / f"prep.{lang}", memory=True)
        print(f"  peak summed RSS (a run of its own): reference {r['reference_memory']['peak_rss_mb']} MB, xlp "
              f"{r['xlp_memory']['peak_rss_mb']} MB (PSS {r['xlp_memory']['peak_pss_mb']} MB)", flush=True)
        r["tokenizer"] = tokenizer_alone(lang, src, work)
        t = r["tokenizer"]
        print(f"  tokenizer alone, 1 core, CPU s: perl {t['perl']['cpu']}, xlp text {t['xlp_cli']['cpu']} ({t['ratio_cpu_cli']}x), "
              f"native in-process {t['xlp_native']['cpu']} ({t['ratio_cpu_native']}x); wall: perl {t['perl']['wall']} s, "
              f"xlp text {t['xlp_cli']['wall']} s ({t['ratio_wall_cli']}x); identical: {t['identical']}", flush=True)
        r["bpe_apply"] = bpe_apply(work / f"ref.{lang}.xlm", work, fast)
        b = r["bpe_apply"]
        print(f"  bpe apply ({b['mb']} MB): fast {b['fast']['wall']} s (CPU {b['fast']['cpu']} s), xlp {b['xlp']['wall']} s "
              f"(CPU {b['xlp']['cpu']} s): {b['ratio']}x wall, {b['ratio_cpu']}x CPU, identical: {b['identical']}", flush=True)
        if not args.no_4x:
            big = make_input(lang, args.mb, 4, args.distinct)
            r["xlp_4x"] = xlp_prepare(lang, big, work / f"prep4.{lang}", memory=True)
            shutil.rmtree(work / f"prep4.{lang}", ignore_errors=True)
            shutil.rmtree(work / f"prep4.{lang}-ids", ignore_errors=True)
            print(f"  memory: xlp peak summed RSS {r['xlp_memory']['peak_rss_mb']} MB at 1x, {r['xlp_4x']['peak_rss_mb']} MB at 4x "
                  f"(PSS {r['xlp_memory']['peak_pss_mb']} / {r['xlp_4x']['peak_pss_mb']} MB; {round(big.stat().st_size / 1e6, 1)} MB, "
                  f"{r['xlp_4x']['wall']} s)", flush=True)
        results["langs"][lang] = r
    name = "results.json" if not args.xlp_root else f"results.{args.xlp_root.name}.json"
    (BENCH / "text" / name).write_text(json.dumps(results, indent=2))
    print(f"results: {BENCH / 'text' / name}")


if __name__ == "__main__":
    main()
