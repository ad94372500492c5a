"""Runs XLM's real preprocessing chain, the oracle of xlp's `--tokenize xlm --lowercase xlm` (tests, benchmarks).

The scripts are the originals in ../shared/tools/reference (its README): tools/tokenize.sh's commands
  replace-unicode-punctuation.perl | normalize-punctuation.perl -l L | remove-non-printing-char.perl
    | tokenizer.perl -no-escape -l L                 (th: | python segment_th.py instead of the tokenizer;
                                                      zh: jieba first, in the place of the Stanford segmenter)
then lowercase_and_remove_accent.py, run with this Python (which has six, jieba and pythainlp).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from xlp_cli.artifacts.files import data_dir

REFERENCE = data_dir().parent / "tools" / "reference"
TOKENIZER = REFERENCE / "mosesdecoder" / "scripts" / "tokenizer"
XLM_TOOLS = REFERENCE / "XLM" / "tools"
_JIEBA = ("import sys, logging, jieba; jieba.setLogLevel(logging.WARNING)\n"
          "for line in sys.stdin: print(' '.join(jieba.cut(line.rstrip(chr(10)))))")


def unavailable() -> str | None:
    """Why the chain cannot run here (None if it can)."""
    if shutil.which("perl") is None:
        return "perl is not installed"
    for p in (TOKENIZER / "tokenizer.perl", XLM_TOOLS / "lowercase_and_remove_accent.py", XLM_TOOLS / "segment_th.py"):
        if not p.is_file():
            return f"reference tool not found: {p}"
    try:
        import six  # noqa: F401  (lowercase_and_remove_accent.py imports it)
    except ImportError:
        return "six is not installed (make setup installs it)"
    return None


def _run(cmd: str, lines: list[str]) -> list[str]:
    assert not any("\n" in x for x in lines)
    data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    env = dict(os.environ, LC_ALL="C.UTF-8")
    env.pop("PERL_UNICODE", None)
    res = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], input=data, capture_output=True, env=env)
    if res.returncode:
        raise RuntimeError(f"reference chain failed: {cmd}\n{res.stderr.decode(errors='replace')[-2000:]}")
    out = res.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) == len(lines) + 1, (len(out), len(lines))
    return out[:-1]


def tokenize_sh(lines: list[str], lang: str) -> list[str]:
    """What XLM's tools/tokenize.sh LANG prints for these lines."""
    py, t = sys.executable, TOKENIZER
    norm = (f"perl {t}/replace-unicode-punctuation.perl | perl {t}/normalize-punctuation.perl -l {lang} "
            f"| perl {t}/remove-non-printing-char.perl")
    if lang == "zh":
        return _run(f"{py} -c \"{_JIEBA}\" | {norm}", lines)
    if lang == "th":
        return _run(f"{norm} | {py} {XLM_TOOLS}/segment_th.py", lines)
    return _run(f"{norm} | perl {t}/tokenizer.perl -no-escape -l {lang} 2>/dev/null", lines)


def lowercase_and_remove_accent(lines: list[str]) -> list[str]:
    return _run(f"{sys.executable} {XLM_TOOLS}/lowercase_and_remove_accent.py", lines)


def xlm_chain(lines: list[str], lang: str) -> tuple[list[str], list[str]]:
    """(tokenize.sh output, then lowercase_and_remove_accent.py output)."""
    moses = tokenize_sh(lines, lang)
    return moses, lowercase_and_remove_accent(moses)


def fixtures_dir() -> Path:
    return Path(__file__).parent / "fixtures" / "text_xlm"
