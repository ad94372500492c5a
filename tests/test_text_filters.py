"""`xlp text` and `xlp bpe apply INPUT OUTPUT` as drop-in line filters, through the real `xlp` executable:
the committed XLM fixtures (made by the real perl chain) and fastBPE fixtures (made by `fast applybpe`), line
count and order, files vs stdin/stdout, threads, bad lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES
from xlm_chain import fixtures_dir

from xlp_cli.artifacts.files import data_dir
from xlp_cli.text.pipeline import TextPipeline

XLP = str(Path(sys.executable).with_name("xlp"))
BPE = FIXTURES / "bpe"
XLM_MODE = ["--tokenize", "xlm", "--lowercase", "xlm"]


def xlp(*args, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([XLP, *map(str, args)], input=stdin, capture_output=True)


def one_error(res: subprocess.CompletedProcess) -> str:
    err = res.stderr.decode().strip()
    assert res.returncode == 2 and len(err.splitlines()) == 1 and err.startswith("xlp: error: "), err
    return err


def test_text_filter_prints_exactly_the_xlm_chain_output():
    for lang in ("fr", "en", "hi", "th", "zh"):
        src = fixtures_dir() / f"input.{lang}.txt"
        res = xlp("text", "--lang", lang, *XLM_MODE, stdin=src.read_bytes())
        assert res.returncode == 0 and res.stdout == (fixtures_dir() / f"xlm.{lang}.txt").read_bytes(), (lang, res.stderr)
        assert res.stderr == b""  # stdout carries the text only; nothing to report


def test_text_filter_files_blocks_and_threads(tmp_path):
    lines = (fixtures_dir() / "input.en.txt").read_text(encoding="utf-8").split("\n")[:-1]
    big = [f"{i}: {line}" for i in range(2500) for line in lines]  # ~3 MB: several blocks
    src = tmp_path / "in.txt"
    src.write_text("\n".join(big), encoding="utf-8")  # no final newline: the last line still counts
    want = "\n".join(TextPipeline(tokenize="xlm", lowercase="xlm").process_batch(big, "en")) + "\n"
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}.txt"
        res = xlp("text", "--lang", "en", *XLM_MODE, "--workers", workers, src, out, "--json")
        assert res.returncode == 0, res.stderr
        assert out.read_text(encoding="utf-8") == want
        assert f'"lines": {len(big)}' in res.stdout.decode()
    assert len(want.split("\n")) == len(big) + 1


def test_text_filter_default_mode_and_empty_input(tmp_path):
    res = xlp("text", "--lang", "de", stdin="„Grüße“, sagte er…\n\n  \nEnde.".encode())
    assert res.returncode == 0 and res.stdout.decode() == '" gruße " , sagte er ...\n\n\nende .\n'
    assert xlp("text", "--lang", "de", stdin=b"").stdout == b""


@pytest.mark.parametrize("data, where, what", [
    (b"ok\nfine\n\xe9t\xe9\n", "stdin:3", "invalid UTF-8 at byte 0"),
    (b"ok\nNUL\x00byte\n", "stdin:2", "NUL byte at byte 3"),
    (b"ok\n" + b"x" * 1_000_000 + b"\nafter\n", "stdin:2", "line longer than 100000 bytes"),
])
def test_text_filter_bad_lines(tmp_path, data, where, what):
    err = one_error(xlp("text", "--lang", "en", stdin=data))
    assert f"{where}: {what}" in err
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_bytes(data)
    err = one_error(xlp("text", "--lang", "en", src, out))
    assert f"{src}:{where.split(':')[1]}: {what}" in err and not out.exists()  # nothing half-written
    res = xlp("text", "--lang", "en", "--on-error", "skip", src, out)
    assert res.returncode == 0 and "1 bad line(s)" in res.stderr.decode()
    got = out.read_text(encoding="utf-8").split("\n")
    assert len(got) == data.count(b"\n") + 1 and got[int(where.split(":")[1]) - 1] == ""


def test_text_filter_usage_errors(tmp_path):
    assert "--lang is required" in one_error(xlp("text", stdin=b"x\n"))
    assert "unknown language code 'english'" in one_error(xlp("text", "--lang", "english", stdin=b"x\n"))
    assert "no such file" in one_error(xlp("text", "--lang", "en", tmp_path / "missing.txt"))
    src = tmp_path / "a.txt"
    src.write_text("x\n")
    assert "OUTPUT is the INPUT" in one_error(xlp("text", "--lang", "en", src, src))


def test_bpe_filter_writes_what_fast_applybpe_writes(tmp_path):
    codes = ["--codes", BPE / "codes.ref", "--vocab", BPE / "vocab.ref"]
    want = (BPE / "apply_output.ref").read_bytes()
    res = xlp("bpe", "apply", *codes, stdin=(BPE / "apply_input.txt").read_bytes())
    assert res.returncode == 0 and res.stdout == want and res.stderr == b""
    out = tmp_path / "out.bpe"
    res = xlp("bpe", "apply", *codes, "--workers", "1", BPE / "apply_input.txt", out)
    assert res.returncode == 0 and out.read_bytes() == want
    res = xlp("bpe", "apply", *codes, stdin=b"lowest road\n\nthe  end")  # no final newline: fast drops "end"
    assert res.stdout.decode().split("\n")[1:] == ["", "the  e@@ n@@ d", ""]


def test_bpe_filter_bad_input(tmp_path):
    codes = ["--codes", BPE / "codes.ref", "--vocab", BPE / "vocab.ref"]
    assert "stdin:2: invalid UTF-8" in one_error(xlp("bpe", "apply", *codes, stdin=b"a\n\xff\n"))
    res = xlp("bpe", "apply", *codes, "--on-error", "skip", stdin=b"a\n\xff\nb\n")
    assert res.returncode == 0 and res.stdout.count(b"\n") == 3 and res.stdout.split(b"\n")[1] == b""
    bad = tmp_path / "codes"
    bad.write_text("a b 10\nb c\n", encoding="utf-8")
    assert f"{bad}:2: not a fastBPE codes line" in one_error(xlp("bpe", "apply", "--codes", bad, stdin=b"a b\n"))
    assert "give --data" in one_error(xlp("bpe", "apply", stdin=b"a\n"))
    assert "not both" in one_error(xlp("bpe", "apply", "--data", tmp_path, *codes, BPE / "apply_input.txt"))


@pytest.mark.integration
def test_bpe_filter_reproduces_xlm_parity_vectors(tmp_path):
    xlm = data_dir() / "xlm_bpe_xnli15"
    parity = data_dir() / "xlm_parity"
    if not (xlm / "codes_xnli_15").is_file() or not parity.is_dir():
        pytest.skip(f"XLM codes or parity vectors not found under {data_dir()}")
    langs = sorted(p.name for p in parity.iterdir() if p.is_dir())
    src, out = tmp_path / "xlm.txt", tmp_path / "bpe.txt"
    src.write_bytes(b"".join((parity / lang / "xlm.txt").read_bytes() for lang in langs))
    res = xlp("bpe", "apply", "--codes", xlm / "codes_xnli_15", "--vocab", xlm / "vocab_xnli_15", src, out)
    assert res.returncode == 0, res.stderr
    assert out.read_bytes() == b"".join((parity / lang / "bpe.txt").read_bytes() for lang in langs)


def test_filter_commands_start_without_torch():
    """A line filter in a shell script starts in well under a second: building the CLI (every stage's and task's
    flags) never imports torch (~3 s of CPU and ~300 MB per process), only running a model stage does."""
    code = ("import sys; from xlp_cli import cli, stages; from xlp_cli.tasks import common; "
            "[common.EVALUATE.fields(), common.FINETUNE.fields()]; "
            "print(sorted(m for m in ('torch', 'ray') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]", res.stdout
