"""`xlp prepare --source wikipedia` against XLM's own Wikipedia chain (get-data-wiki.sh), per dump: speed and text quality.

Both read the same file per shared dump (../shared/data/wikipedia_dumps): a UTF-8 .bz2, as Wikimedia serves
dumps and as get-data-wiki.sh reads them. The en samples are used as they are; the xz samples (el, vi) are
recompressed to bz2 and the UTF-16 bg sample re-encoded to UTF-8 first (untimed: WikiExtractor reads neither).
  XLM chain  WikiExtractor 3.1.0 (`wikiextractor --processes W -q -o - DUMP`), get-data-wiki.sh's
             `sed '/^\\s*$/d' | grep -v '^<doc id=' | grep -v '</doc>$'` (an empty result is not a failure), then tools/tokenize.sh's perl scripts of
             ../shared/tools/reference (replace-unicode-punctuation | normalize-punctuation -l L |
             remove-non-printing-char | tokenizer.perl -no-escape -threads W -l L), then
             lowercase_and_remove_accent.py; one bash pipeline
  xlp        `xlp prepare --source wikipedia DUMP --lang L --workers W --tokenize xlm --lowercase xlm --no-dedup`
             (zstd Parquet shards, splits, manifest), a fresh process
Each is timed with os.wait4 on its process tree: wall, CPU (user + sys of every process, children included)
and the peak RSS of its largest process; the best of --repeat interleaved runs counts. Speed per core is
compressed MB per CPU second. The machine may be shared: the load average is printed; CPU ratios are the
robust ones under load, wall ratios are not.
Quality, on the paragraphs before tokenization (xlp: what its reader gives the text pipeline; WikiExtractor:
its lines after get-data-wiki.sh's filters): rows per 1,000 that still carry markup (`{{`/`}}`, `[[`/`]]`,
`|`, `<ref`, a `=` heading line, `&nbsp;`); then, after the same normalization of both (xlp's native XLM
tokenize + lowercase), the share of WikiExtractor's paragraphs that xlp also gives and the share of xlp's rows
that WikiExtractor lacks, with examples.

    .venv/bin/python benchmarks/wikipedia_throughput.py [--repeat 2] [--workers 2] [--examples 3] [--timeout 600] [DUMP ...]
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xlp_cli.artifacts.files import data_dir  # noqa: E402
from xlp_cli.prepare.records import ErrorPolicy, SourceOptions  # noqa: E402
from xlp_cli.prepare.sources import SOURCES  # noqa: E402
from xlp_cli.text import native  # noqa: E402

REFERENCE = data_dir().parent / "tools" / "reference"
TOKENIZER = REFERENCE / "mosesdecoder" / "scripts" / "tokenizer"
XLM_TOOLS = REFERENCE / "XLM" / "tools"
BIN = Path(sys.executable).parent
LEAKS = {
    "{{": re.compile(r"\{\{|\}\}"), "[[": re.compile(r"\[\[|\]\]"), "|": re.compile(r"\|"),
    "<ref": re.compile(r"<ref", re.IGNORECASE), "= heading": re.compile(r"^\s*=.*=\s*$"), "&nbsp;": re.compile(r"&nbsp;"),
}


def lang_of(path: Path) -> str:
    m = re.match(r"^([a-z_]+?)wiki-", path.name)
    if not m:
        raise SystemExit(f"{path}: cannot tell the language from the name (xxwiki-...)")
    return m.group(1)


def as_utf8_bz2(path: Path, tmp: Path) -> Path:
    """The dump as a UTF-8 .bz2 (the file itself when it already is one)."""
    head = path.read_bytes()[:3]
    if head == b"BZh":
        import bz2
        with bz2.open(path) as f:
            bom = f.read(2)
        if bom not in (b"\xff\xfe", b"\xfe\xff"):
            return path
        decode = f"bzcat {shlex.quote(str(path))} | iconv -f UTF-16 -t UTF-8 | sed '1s/encoding=\"UTF-16\"/encoding=\"UTF-8\"/'"
    else:
        decode = f"xzcat {shlex.quote(str(path))}"
    out = tmp / (path.name.split(".xml")[0] + ".xml.bz2")
    subprocess.run(["bash", "-o", "pipefail", "-c", f"{decode} | bzip2 -9 > {shlex.quote(str(out))}"], check=True)
    return out


TIMEOUT = 600.0  # seconds a command may run (WikiExtractor's process pool has been seen to hang, idle, for good)


def timed(cmd: list[str], env: dict | None = None) -> dict:
    """Run cmd; wall, CPU of its whole process tree and the peak RSS of its largest process (os.wait4). A command
    still running after TIMEOUT seconds is killed with its process group, and the benchmark stops saying so."""
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    expired = threading.Event()

    def kill() -> None:
        expired.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(TIMEOUT, kill)
    timer.start()
    try:
        err = proc.stderr.read()
        _, status, ru = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    wall = time.perf_counter() - t
    if expired.is_set():
        raise SystemExit(f"timed out after {TIMEOUT:.0f} s (killed): {' '.join(cmd)[:300]}")
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)[:300]}\n{err.decode(errors='replace')[-1500:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "load": load}


def xlm_chain(dump: Path, lang: str, workers: int, out: Path) -> list[str]:
    t = TOKENIZER
    q = shlex.quote
    script = (
        f"{q(str(BIN / 'wikiextractor'))} --processes {workers} -q -o - {q(str(dump))}"
        " | sed '/^\\s*$/d' | { grep -v '^<doc id=' || true; } | { grep -v '</doc>$' || true; }"
        f" | tee {q(str(out / 'we.txt'))}"
        f" | perl {t}/replace-unicode-punctuation.perl | perl {t}/normalize-punctuation.perl -l {lang}"
        f" | perl {t}/remove-non-printing-char.perl | perl {t}/tokenizer.perl -no-escape -threads {workers} -l {lang}"
        f" | {q(sys.executable)} {q(str(XLM_TOOLS / 'lowercase_and_remove_accent.py'))} > {q(str(out / 'xlm.txt'))}")
    return ["bash", "-o", "pipefail", "-c", script]


def xlp_cmd(dump: Path, lang: str, workers: int, out: Path) -> list[str]:
    return [str(BIN / "xlp"), "prepare", "--source", "wikipedia", str(dump), "--lang", lang, "--workers", str(workers),
            "--tokenize", "xlm", "--lowercase", "xlm", "--no-dedup", "--out", str(out)]


def xlp_rows(dump: Path) -> list[str]:
    """The paragraphs xlp's reader gives its text pipeline (what its shards hold, before tokenization)."""
    return [r.text for r in SOURCES["wikipedia"]([dump], SourceOptions(langs=[]), ErrorPolicy(mode="skip"))]


def leaks(rows: list[str]) -> dict[str, float]:
    n = max(len(rows), 1)
    return {k: 1000 * sum(1 for r in rows if p.search(r)) / n for k, p in LEAKS.items()}


def quality(dump: Path, lang: str, we_raw: list[str], examples: int) -> None:
    ours = xlp_rows(dump)
    pipe = native.pipeline(lang, True, True, "xlm", "xlm")
    norm = lambda rows: [r for r in pipe.run(rows, native.ALL) if r.strip()]  # noqa: E731
    we_n, ours_n = norm(we_raw), norm(ours)
    ours_set, we_set = set(ours_n), set(we_n)
    shared = [r for r in we_n if r in ours_set]
    extra = [r for r in ours_n if r not in we_set]
    missing = [r for r in we_n if r not in ours_set]
    fmt = lambda d: ", ".join(f"{k} {v:.1f}" for k, v in d.items())  # noqa: E731
    print(f"  leaks per 1,000 rows  xlp ({len(ours)} rows): {fmt(leaks(ours))}")
    print(f"                        WikiExtractor ({len(we_raw)} rows): {fmt(leaks(we_raw))}")
    print(f"  WikiExtractor paragraphs xlp also gives: {100 * len(shared) / max(len(we_n), 1):.1f}%;"
          f" xlp rows WikiExtractor lacks: {100 * len(extra) / max(len(ours_n), 1):.1f}%")
    loose = lambda r: " ".join(r.replace('"', " ").replace("'", " ").split())  # noqa: E731  (italics: WE quotes them)
    ours_l, we_l = {loose(r) for r in ours_n}, {loose(r) for r in we_n}
    print(f"  the same, quote marks ignored: {100 * sum(loose(r) in ours_l for r in we_n) / max(len(we_n), 1):.1f}%;"
          f" {100 * sum(loose(r) not in we_l for r in ours_n) / max(len(ours_n), 1):.1f}%")
    prose = [r for r in we_n if len(r.split()) >= 5]  # without the page titles and headings WikiExtractor writes
    print(f"  WikiExtractor paragraphs of 5+ tokens xlp also gives (quote marks ignored):"
          f" {100 * sum(loose(r) in ours_l for r in prose) / max(len(prose), 1):.1f}% of {len(prose)}")
    step = lambda xs: xs[:: max(1, len(xs) // examples)][:examples]  # noqa: E731
    for r in step(missing):
        print(f"    only WikiExtractor: {r[:110]}")
    for r in step(extra):
        print(f"    only xlp:           {r[:110]}")


def main() -> None:
    global TIMEOUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", nargs="*", type=Path, help="dumps (default: all in the shared wikipedia_dumps)")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved repetitions; the best run counts")
    ap.add_argument("--workers", type=int, default=2, help="WikiExtractor --processes, tokenizer.perl -threads, xlp --workers")
    ap.add_argument("--examples", type=int, default=3, help="examples of each kind of difference per dump")
    ap.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds a command may run before it is killed")
    args = ap.parse_args()
    TIMEOUT = args.timeout
    # xlp as installed: its modules' bytecode written, as `make setup` and pip do (where PYTHONDONTWRITEBYTECODE is
    # set, every xlp process would otherwise compile its ~80 modules again, ~0.1 s of CPU a run)
    compileall.compile_dir(ROOT / "xlp_cli", quiet=1)
    dumps = args.dumps or sorted((data_dir() / "wikipedia_dumps").glob("*wiki*"), key=lambda p: p.stat().st_size)
    if not dumps:
        raise SystemExit(f"no dump found under {data_dir() / 'wikipedia_dumps'}")
    env = {**os.environ, "XLP_QUIET": "1", "LC_ALL": "C.UTF-8"}
    env.pop("PERL_UNICODE", None)
    print(f"{len(dumps)} dumps; cpus {os.cpu_count()}; load average before {os.getloadavg()[0]:.1f}; --workers {args.workers}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for n, dump in enumerate(dumps):
            lang = lang_of(dump)
            src = as_utf8_bz2(dump, tmp)
            mb = src.stat().st_size / 1e6
            runs: dict[str, list[dict]] = {"xlm": [], "xlp": []}
            for i in range(args.repeat):  # interleaved: the machine is shared
                runs["xlm"].append(timed(xlm_chain(src, lang, args.workers, tmp), env))
                runs["xlp"].append(timed(xlp_cmd(src, lang, args.workers, tmp / f"xlp-{n}-{i}"), env))
            best = {k: min(v, key=lambda r: r["cpu"]) for k, v in runs.items()}
            wall = {k: min(r["wall"] for r in v) for k, v in runs.items()}
            xlm_rows = sum(1 for _ in open(tmp / "xlm.txt", encoding="utf-8"))
            kept = json.loads((tmp / f"xlp-{n}-0" / "manifest.json").read_text(encoding="utf-8"))["records"]["kept"]
            print(f"{dump.name} ({lang}): {mb:.2f} MB bz2")
            for k, name, rows in (("xlm", "XLM chain", xlm_rows), ("xlp", "xlp prepare", kept)):
                r = best[k]
                print(f"  {name:11s}  wall {wall[k]:6.2f} s  cpu {r['cpu']:6.2f} s  {mb / r['cpu']:5.2f} MB/s per core"
                      f"  peak RSS {r['rss_mb']:4.0f} MB  {rows} rows  (load {r['load']:.1f})")
            print(f"  xlp vs XLM chain: cpu {best['xlm']['cpu'] / best['xlp']['cpu']:.2f}x, wall {wall['xlm'] / wall['xlp']:.2f}x")
            we_raw = (tmp / "we.txt").read_text(encoding="utf-8").splitlines()
            quality(src, lang, we_raw, args.examples)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
