"""The README is a tested script: this test extracts the README's own command blocks and runs them.

How to keep it passing when you add a README section (the convention):
- Every ```bash block is run, in file order, in ONE bash process (`set -euo pipefail`, so variables carry over
  from block to block), from a fresh temporary folder (outputs land there; `$D` points at XLP_DATA_DIR), with
  the repository's `xlp` first on PATH and XLP_README_CAP=1 in the environment.
- Sizes that take minutes at full scale are shell variables (STEPS, RECORDS, ROWS, ...) set in the README's
  first bash block, with their real values and, when XLP_README_CAP is set, tiny ones. Use them (or add one
  there); never give the test other flags than a reader gets. A warm-up is written as a share of the run
  (`--warmup $((STEPS / 10))`), so that it shrinks with it.
- A block meant for a GPU, for hours, for the internet, or that is `make demo` / `make test` itself: put
  `<!-- readme-test: check -->` on the line before its fence, and say before it or in it how long it takes here
  (its `# measured:` line, where the docs measured it, or "GPU"). Such a block is run with `xlp` replaced by a recorder, then every
  recorded command is parsed against the real CLI, flags, values and config checks (tests/readme_check.py),
  and `make X` is run as `make -n X`; nothing else may run in it.
- Every later command may only read folders an earlier block wrote (the run proves it).
- Times: never by hand. `make readme-times` (tests/readme_times.py) runs these blocks at their full sizes and
  writes a `# measured:` line above each command from docs/readme_times.json; `test_readme_times_are_measured`
  fails on a time written by hand in a block and on a measured command whose text changed since.
- The capped run is this test's share of `make test`: 85-91 s on an idle machine (2026-11-27; 650 s when the
  2 cores were shared with many other jobs: it is CPU-bound, each `xlp` process costs ~1-2 s of start-up and a
  stage at capped size a few more). Keep it under ~4 minutes idle, so that the suite stays within its budget.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import readme_times

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"


def blocks(text: str) -> list[tuple[str, str]]:
    """("run" | "check", code) for each ```bash block of the README, in order."""
    return [(kind, code) for kind, code, _ in readme_times.blocks(text)]


def script(kind: str, text: str) -> str:
    """The bash script of the README's blocks of one kind (check blocks get `xlp` and `make` replaced)."""
    found = blocks(text)
    sizes = next(code for k, code in found if k == "run")  # the first run block: $D and the sizes only
    body = "\n".join(code for k, code in found if k == kind or (kind == "check" and code is sizes))
    head = "set -euo pipefail\n"
    if kind == "check":  # record every xlp command (parsed afterwards), dry-run every make target
        head += ('xlp() { printf "%s\\037" "$@" >> xlp-commands; printf "\\036" >> xlp-commands; }\n'
                 f'make() {{ command make -C "{REPO}" -n "$@" > /dev/null; }}\n')
    return head + body


def _env() -> dict[str, str]:
    from xlp_cli.artifacts.files import data_dir

    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["XLP_DATA_DIR"] = str(data_dir())
    env["XLP_README_CAP"] = "1"
    env.pop("XLP_QUIET", None)  # the README's commands as a user sees them (progress lines go to the log)
    return env


def test_readme_blocks_follow_the_convention():
    text = README.read_text(encoding="utf-8")
    found = blocks(text)
    sizes = next(code for k, code in found if k == "run")
    assert "XLP_README_CAP" in sizes and "xlp " not in sizes, "the first run block sets the sizes (and runs nothing)"
    for kind, code in found:
        if kind != "check":
            continue
        start = text.index(code)
        context = text[max(0, start - 400): start + len(code)]
        assert re.search(r"~\s*\d+\s*(s|min|h)\b|# measured:|docs/benchmarks.md|GPU|internet|days|hours", context), \
            f"a check-only block says how long it takes here (or that it needs a GPU / the internet):\n{code}"
        for line in code.splitlines():
            s = line.strip()
            assert not s or s.startswith(("#", "xlp ", "make ")), f"a check-only block holds only xlp/make lines: {s}"


def test_readme_check_blocks_parse(tmp_path):
    """GPU / hours / internet commands: every flag and value must be what the CLI accepts."""
    from readme_check import check

    r = subprocess.run(["bash", "-c", script("check", README.read_text(encoding="utf-8"))], cwd=tmp_path,
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    recorded = [c.split("\x1f")[:-1] for c in (tmp_path / "xlp-commands").read_text().split("\x1e")[:-1]]
    assert len(recorded) >= 3
    for args in recorded:
        check(args)  # raises on an unknown command or flag, a bad value, a config the stage would refuse


@pytest.mark.integration
def test_readme_runs_as_written(tmp_path, shared_data):
    """The README's commands, as written, in order, capped only by XLP_README_CAP (see the module doc)."""
    text = README.read_text(encoding="utf-8")
    times = tmp_path / "times.log"  # the run is timed as `make readme-times` times it
    r = subprocess.run(["bash", "-c", readme_times.instrumented(text, None, times)], cwd=tmp_path,
                       env=_env(), capture_output=True, text=True, timeout=1800)  # 36 min at load 20
    log = r.stdout[-4000:] + "\n--- stderr ---\n" + r.stderr[-6000:]
    assert r.returncode == 0, log
    assert "Traceback" not in r.stderr, log
    measured = readme_times.parse_log(times.read_text())
    timed = readme_times.timed_statements(text)
    assert {s.digest for s in timed} == set(measured), "every command of the run blocks was timed"
    assert all(m["wall_s"] > 0 and m["cpu_s"] >= 0 for m in measured.values())
    # what the chain promises: each report exists and says what it is computed on
    report = (tmp_path / "out" / "xnli-report" / "report.md").read_text(encoding="utf-8")
    assert "rows per language" in report and "▼ a worse one" in report
    assert (tmp_path / "out" / "lexicon" / "report.md").is_file()
    assert (tmp_path / "out" / "analysis" / "report.md").is_file()
    assert (tmp_path / "out" / "mt-report" / "results.json").is_file()
    assert (tmp_path / "ft" / "veco-in" / "results.json").is_file() and (tmp_path / "mt" / "veco").is_dir()
    assert (tmp_path / "out" / "unmt-report" / "results.json").is_file()  # UNMT vs the copy baseline
    assert "inconclusive at this scale" in (tmp_path / "out" / "claims" / "report.md").read_text(encoding="utf-8")
    assert "no pre-training data" not in r.stderr


def test_readme_times_are_measured():
    """Every time in the README's blocks is the last `make readme-times` measurement of the command below it."""
    text = README.read_text(encoding="utf-8")
    assert readme_times.check(text, readme_times.load_store()) == []
    assert readme_times.render(text, readme_times.load_store()) == text, "make readme-times --render is a no-op"


def test_readme_times_catch_stale_and_hand_written_times():
    text = ("intro\n```bash\nD=x\nfor e in a b; do\n  xlp pretrain --out runs/$e \\\n    --max-steps 3\ndone\n"
            "xlp bpe learn --data d --out out/bpe\n```\n")
    found = readme_times.timed_statements(text)
    assert [s.key for s in found] == ["runs/$e", "out/bpe"] and found[0].text.endswith("done")
    m = {"digest": found[1].digest, "date": "2026-11-27", "wall_s": 65.4, "cpu_s": 61.0, "load_start": 0.25,
         "load_end": 1.0}
    store = {"out/bpe": m}
    shown = readme_times.render(text, store)
    assert "# measured: 1 min 05 s wall, 1 min 01 s CPU, load 0.2 -> 1.0, 2026-11-27\nxlp bpe learn" in shown
    assert readme_times.check(shown, store) == [] and readme_times.render(shown, store) == shown
    assert readme_times.unmeasured(shown, store) == ["runs/$e"]
    changed = shown.replace("--out out/bpe", "--out out/bpe --codes 9")
    assert "changed since its measurement" in readme_times.check(changed, store)[0]
    assert "not its last measurement" in readme_times.check(shown.replace("1 min 05 s", "50 s"), store)[0]
    hand = text.replace("--out out/bpe", "--out out/bpe   # ~30 s here")
    assert "written by hand" in readme_times.check(hand, store)[0]
    log = ("begin abc 100.0 0.5\n0m0.01s 0m0.00s\n0m2.00s 0m1.00s\n"
           "end abc 112.5 0.7\n0m0.02s 0m0.00s\n1m9.00s 0m2.00s\n")
    assert readme_times.parse_log(log) == {"abc": {"wall_s": 12.5, "cpu_s": 68.0, "load_start": 0.5, "load_end": 0.7}}
