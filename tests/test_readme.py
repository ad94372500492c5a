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
  `<!-- readme-test: check -->` on the line before its fence, and say next to it how long it takes here (a time
  such as "~15 min here", or "GPU"). Such a block is run with `xlp` replaced by a recorder, then every
  recorded command is parsed against the real CLI, flags, values and config checks (tests/readme_check.py),
  and `make X` is run as `make -n X`; nothing else may run in it.
- Every later command may only read folders an earlier block wrote (the run proves it).
- The capped run is this test's share of `make test`: it took 222 s in the parallel suite on 2 cores (2026-11-23,
  the slowest single test; each `xlp` process costs ~1-2 s of start-up, a stage at capped size a few more). Keep
  it under ~4 minutes, so that the suite stays under its 15-minute budget.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
CHECK = "<!-- readme-test: check -->"
FENCE = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def blocks(text: str) -> list[tuple[str, str]]:
    """("run" | "check", code) for each ```bash block of the README, in order."""
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").splitlines()
        kind = "check" if before and before[-1].strip() == CHECK else "run"
        out.append((kind, m.group(1)))
    return out


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
        assert re.search(r"~\s*\d+\s*(s|min|h)\b|GPU|internet|days|hours", context), \
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
    r = subprocess.run(["bash", "-c", script("run", README.read_text(encoding="utf-8"))], cwd=tmp_path,
                       env=_env(), capture_output=True, text=True, timeout=1800)  # 36 min at load 20
    log = r.stdout[-4000:] + "\n--- stderr ---\n" + r.stderr[-6000:]
    assert r.returncode == 0, log
    assert "Traceback" not in r.stderr, log
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
