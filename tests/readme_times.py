"""`make readme-times`: run the README's command blocks, time every command, and write the times into the README.

The README's times cannot go stale by hand: each timed command has a `# measured: ...` comment line right above it,
and only this script writes those lines. It runs the README's run blocks (the same script the README test runs,
tests/test_readme.py) in one bash process from a fresh folder, with each command that calls `xlp` (a statement: a
line with its `\\` continuations, or a whole `for ... done` loop) wrapped in a timer that records its wall time,
the CPU time of the processes it ran (user + system), and `/proc/loadavg` at its start and end. The measurements
are kept in docs/readme_times.json, keyed by the command's `--out` folder (or its first words) together with a
hash of its text, and rendered into the README:

    # measured: 5 min 58 s wall, 5 min 40 s CPU, load 0.4 -> 1.1, 2026-11-27

Usage (from the repository's folder; the sizes are the README's full ones unless --cap):
    python tests/readme_times.py                   # every run block, in order (about an hour and a half here)
    python tests/readme_times.py --until 3          # the sections up to "### 3." only
    python tests/readme_times.py --from 4 --workdir W   # continue a run in W from section 4
    python tests/readme_times.py --make demo        # also time `make demo` (its line in the Quick start)
    python tests/readme_times.py --render           # only rewrite the README from docs/readme_times.json
A command not run this time keeps its last measurement (with that run's date and load). The README test checks
that every timed command has a measurement of its current text (tests/test_readme.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xlp_cli.core.ui import duration

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
STORE = REPO / "docs" / "readme_times.json"
CHECK = "<!-- readme-test: check -->"
FENCE = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
MEASURED = "# measured:"
SECTION = re.compile(r"^### (\d+)\.", re.M)
HAND_TIME = re.compile(r"\b\d+(\.\d+)?\s*(s|sec|seconds?|min|minutes?|h|hours?)\b")


@dataclasses.dataclass
class Statement:
    text: str            # the command as written (continuations and loop bodies included, `# measured` dropped)
    line: int            # the README line (0-based) of its first line
    section: int         # the "### N." section it is in (0: before the first)
    kind: str            # "run" | "check"

    @property
    def timed(self) -> bool:
        return bool(re.search(r"(^|[|;&(]\s*|\s)(xlp|make) ", " " + self.text))

    @property
    def key(self) -> str:
        """Stable name: the `--out` folder the command writes, else its first words (`make demo`, `xlp translate`)."""
        m = re.search(r"--out (\S+)", self.text)
        if m:
            return m.group(1)
        m = re.search(r"\b(xlp|make) ([\w-]+)", self.text)
        return f"{m.group(1)} {m.group(2)}" if m else self.text.split()[0]

    @property
    def digest(self) -> str:
        return digest(self.text)


def _code(line: str) -> str:
    """A line without its trailing comment (a `#` after a blank; the README's commands quote no `#`)."""
    return re.sub(r"(^|\s)#.*$", "", line)


def digest(text: str) -> str:
    """What a measurement is of: the command's words, comments and layout left out."""
    words = " ".join(_code(ln) for ln in text.replace("\\\n", " ").split("\n")).split()
    return hashlib.sha256(" ".join(words).encode()).hexdigest()[:12]


def blocks(text: str) -> list[tuple[str, str, int]]:
    """("run" | "check", code, start offset) for each ```bash block of the README, in order."""
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").splitlines()
        kind = "check" if before and before[-1].strip() == CHECK else "run"
        out.append((kind, m.group(1), m.start(1)))
    return out


def _opens(line: str) -> int:
    """How many compound commands a logical line opens minus those it closes (for/while ... done, if ... fi)."""
    words = re.findall(r"(?:^|;|\s)(for|while|until|if|do|done|then|fi)(?=\s|;|$)", _code(line))
    return sum(1 for w in words if w in ("for", "while", "until", "if")) - sum(1 for w in words if w in ("done", "fi"))


def statements(text: str) -> list[Statement]:
    """The README's statements, block by block; `# measured` lines are not part of them."""
    out: list[Statement] = []
    for kind, code, start in blocks(text):
        heads = SECTION.findall(text[:start])
        section = int(heads[-1]) if heads else 0
        first_line = text[:start].count("\n")
        lines = [(first_line + i, ln) for i, ln in enumerate(code.splitlines())
                 if not ln.strip().startswith(MEASURED)]
        current: list[str] = []
        at, depth, i = 0, 0, 0
        while i < len(lines):
            number, line = lines[i]
            logical = [line]
            while logical[-1].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                logical.append(lines[i][1])
            i += 1
            joined = "\n".join(logical)
            if not current and (not joined.strip() or joined.strip().startswith("#")):
                continue
            if not current:
                at = number
            current.append(joined)
            depth += _opens(joined.replace("\\\n", " "))
            if depth <= 0:
                out.append(Statement("\n".join(current), at, section, kind))
                current, depth = [], 0
        if current:
            out.append(Statement("\n".join(current), at, section, kind))
    return out


def timed_statements(text: str) -> list[Statement]:
    found = [s for s in statements(text) if s.timed and s.kind == "run"]
    keys = [s.key for s in found]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup:
        raise SystemExit(f"README.md: two timed commands write the same folder {sorted(dup)}: give each its own --out")
    return found


def instrumented(text: str, until: int | None, log: Path, start: int = 0) -> str:
    """The README's run blocks as one bash script, each timed statement of sections `start`..`until` between two
    timer calls (the earlier sections run untimed: in the same --workdir, their stages resume as finished)."""
    head = ("set -euo pipefail\n"
            # `times` in this shell (a pipe would run it in a subshell, whose children are not the commands')
            f'__t() {{ {{ printf "%s %s %s %s\\n" "$1" "$2" "$(date +%s.%N)" "$(cut -d" " -f1 /proc/loadavg)"; times; }}'
            f' >> "{log}"; }}\n')
    body = []
    for s in statements(text):
        if s.kind != "run" or (until is not None and s.section > until):
            continue
        if s.timed and s.section >= start:
            body += [f"__t begin {s.digest}", s.text, f"__t end {s.digest}"]
        else:
            body.append(s.text)
    return head + "\n".join(body) + "\n"


def _seconds(word: str) -> float:
    m = re.fullmatch(r"(\d+)m([\d.]+)s", word)
    return int(m.group(1)) * 60 + float(m.group(2)) if m else 0.0


def parse_log(log: str) -> dict[str, dict]:
    """digest -> {wall_s, cpu_s, load_start, load_end} from the timer's log."""
    lines = log.splitlines()  # per mark: "begin|end DIGEST TIME LOAD", the shell's CPU, its children's CPU
    marks: dict[tuple[str, str], tuple[float, float, float]] = {}
    for head, _shell, cpu in zip(lines[0::3], lines[1::3], lines[2::3]):
        what, digest, t, load = head.split()
        marks[(what, digest)] = (float(t), float(load), sum(_seconds(w) for w in cpu.split()))
    out = {}
    for (what, digest), (t0, l0, c0) in marks.items():
        if what == "begin" and ("end", digest) in marks:
            t1, l1, c1 = marks[("end", digest)]
            out[digest] = {"wall_s": round(t1 - t0, 1), "cpu_s": round(c1 - c0, 1), "load_start": l0, "load_end": l1}
    return out


def render_line(m: dict) -> str:
    return (f"{MEASURED} {duration(m['wall_s'])} wall, {duration(m['cpu_s'])} CPU, "
            f"load {m['load_start']:.1f} -> {m['load_end']:.1f}, {m['date']}")


def load_store() -> dict[str, dict]:
    return json.loads(STORE.read_text(encoding="utf-8")) if STORE.is_file() else {}


def render(text: str, store: dict[str, dict]) -> str:
    """The README with a `# measured` line above every command that has a measurement of its current text."""
    above: dict[int, str] = {}
    for s in statements(text):
        m = store.get(s.key)
        if s.timed and m and m["digest"] == s.digest:
            above[s.line] = render_line(m)
    out = []
    for number, line in enumerate(text.split("\n")):
        if line.strip().startswith(MEASURED):
            continue
        if number in above:
            out.append(line[: len(line) - len(line.lstrip())] + above[number])
        out.append(line)
    return "\n".join(out)


def check(text: str, store: dict[str, dict]) -> list[str]:
    """Every time the README states is the last measurement of the command below it (the README test's check)."""
    problems = []
    lines = text.split("\n")
    starts = {s.line: s for s in statements(text)}
    for i, line in enumerate(lines):
        if not line.strip().startswith(MEASURED):
            continue
        s = starts.get(i + 1)
        where = f"README.md:{i + 1}"
        if s is None or not s.timed:
            problems.append(f"{where}: a `# measured` line that is not right above an xlp or make command")
            continue
        m = store.get(s.key)
        if not m:
            problems.append(f"{where}: {s.key} has no measurement in docs/readme_times.json")
        elif m["digest"] != s.digest:
            problems.append(f"{where}: {s.key} changed since its measurement of {m['date']}: make readme-times "
                            "(or `python tests/readme_times.py --render`, which drops the stale time)")
        elif line.strip() != render_line(m):
            problems.append(f"{where}: the time of {s.key} is not its last measurement ({render_line(m)})")
    for _kind, code, start in blocks(text):
        first = text[:start].count("\n")
        for j, line in enumerate(code.splitlines()):
            comment = line[len(_code(line)):]
            if not line.strip().startswith(MEASURED) and HAND_TIME.search(comment):
                problems.append(f"README.md:{first + j + 1}: a time written by hand ({comment.strip()}): "
                                "only make readme-times writes times into the blocks")
    return problems


def unmeasured(text: str, store: dict[str, dict]) -> list[str]:
    """The run blocks' commands without a measurement of their current text."""
    return [s.key for s in statements(text) if s.timed and s.kind == "run"
            and store.get(s.key, {}).get("digest") != s.digest]


def measure(text: str, args: argparse.Namespace, store: dict[str, dict]) -> int:
    """Run the README (and `make` targets) once, adding what finished to `store`; the bash exit status."""
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="xlp-readme-times-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / "times.log"
    log.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("XLP_DATA_DIR", str((REPO.parent / "shared" / "data").resolve()))
    env.pop("XLP_README_CAP", None)
    if args.cap:
        env["XLP_README_CAP"] = "1"
    date = datetime.date.today().isoformat()
    print(f"running the README in {work} (load now {os.getloadavg()[0]:.1f})", flush=True)
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    script = instrumented(text, args.until, log, args.start)
    rc = subprocess.run(["bash", "-c", script], cwd=work, env=env).returncode
    got = parse_log(log.read_text() if log.is_file() else "")
    for s in timed_statements(text):
        if s.digest in got:
            m = {"digest": s.digest, "date": date, "section": s.section, "commit": commit, **got[s.digest]}
            print(f"{s.key:32s} {render_line(m)}", flush=True)
            if not args.cap:
                store[s.key] = m
    if rc:
        print(f"the README's commands stopped with exit {rc}; what finished is recorded", file=sys.stderr)
        return rc
    for target in args.make:
        t0, l0, c0 = time.time(), os.getloadavg()[0], _children_cpu()
        rc = subprocess.run(["make", "-C", str(REPO), target], env=env).returncode
        if rc:
            print(f"make {target} failed (exit {rc}); not recorded", file=sys.stderr)
            return rc
        m = {"digest": digest(f"make {target}"), "date": date, "commit": commit, "wall_s": round(time.time() - t0, 1),
             "cpu_s": round(_children_cpu() - c0, 1), "load_start": l0, "load_end": os.getloadavg()[0]}
        print(f"make {target:27s} {render_line(m)}", flush=True)
        if not args.cap:
            store[f"make {target}"] = m
    return 0


def run(args: argparse.Namespace) -> int:
    text = README.read_text(encoding="utf-8")
    store = load_store()
    timed_statements(text)  # refuses two commands writing one folder before anything runs
    rc = 0
    if not args.render:
        rc = measure(text, args, store)
        if args.cap:
            print("--cap: nothing recorded (the README's times are for its full sizes)")
            return rc
        STORE.write_text(json.dumps(store, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    README.write_text(render(text, store), encoding="utf-8")
    left = unmeasured(README.read_text(encoding="utf-8"), store)
    if left:
        print(f"not measured at the README's sizes yet ({len(left)}): {', '.join(left)}")
    return rc


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--until", type=int, default=None, help="run the sections up to this '### N.' number only")
    p.add_argument("--from", dest="start", type=int, default=0,
                   help="time the sections from this '### N.' number on (with --workdir of an earlier run: the "
                        "sections before it resume as finished)")
    p.add_argument("--make", action="append", default=[], help="also time `make TARGET` (demo, test)")
    p.add_argument("--render", action="store_true", help="only rewrite the README from docs/readme_times.json")
    p.add_argument("--cap", action="store_true", help="the README test's sizes (XLP_README_CAP=1); records nothing")
    p.add_argument("--workdir", default=None, help="where the commands run (default: a fresh temporary folder)")
    return run(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
