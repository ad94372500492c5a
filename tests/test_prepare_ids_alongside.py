"""`xlp prepare --bpe-from`: the id shards made while the text shards are written (bpe/alongside.py) are the bytes
`xlp bpe apply` writes from the finished text shards, on real text with XLM's codes, for mono and pair folders,
several shards and row groups; a shard the alongside path cannot make is made the usual way."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

from xlp_cli.artifacts.files import data_dir
from xlp_cli.bpe import run as bpe_run

XLM = data_dir() / "xlm_bpe_xnli15"
IWSLT = data_dir() / "iwslt14_de_en"
XLM_ARGS = ["--tokenize", "xlm", "--lowercase", "xlm", "--shard-size", "9000", "--no-dedup"]

pytestmark = pytest.mark.integration


def _sentences(tmp: Path, counts: tuple[tuple[str, int], ...]) -> list[Path]:
    """The first n Common Voice sentence-collector sentences of each (lang, n), as tmp/cv.<lang>.txt."""
    paths = []
    for lang, n in counts:
        src = data_dir() / "commonvoice_sentences" / f"{lang}.sentence-collector.txt.gz"
        if not src.is_file():
            pytest.skip(f"{src} not found")
        with gzip.open(src, "rt", encoding="utf-8") as f:
            lines = [line for _, line in zip(range(n), f)]
        paths.append(tmp / f"cv.{lang}.txt")
        paths[-1].write_text("".join(lines), encoding="utf-8")
    return paths


def _hashes(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.glob("*/*/*/part-*.parquet"))}


def _made_usual_way(monkeypatch) -> list[str]:
    """The id shards `bpe apply` made itself (a spy around the real function; it still runs)."""
    calls: list[str] = []
    real = bpe_run._apply_shard

    def spy(tok, shard, *args, **kw):
        calls.append(Path(shard).relative_to(Path(shard).parents[3]).as_posix())
        return real(tok, shard, *args, **kw)

    monkeypatch.setattr(bpe_run, "_apply_shard", spy)
    return calls


def _same_as_bpe_apply(tmp_path: Path, out: Path, inputs: list[str]) -> None:
    """`xlp prepare` of the same input without BPE, then `xlp bpe apply`: the same id shards and counts."""
    plain = tmp_path / "plain"
    assert run_cli("prepare", "--out", plain, *inputs, *XLM_ARGS).exit_code == 0
    assert _hashes(plain) == _hashes(out)
    r = run_cli("bpe", "apply", "--data", plain, "--codes", XLM / "codes_xnli_15", "--out", tmp_path / "apply")
    assert r.exit_code == 0, r.stderr
    ids = out.with_name(out.name + "-ids")
    assert _hashes(ids) == _hashes(tmp_path / "apply") and len(_hashes(ids)) >= 3
    want, got = (json.loads((d / "manifest.json").read_text()) for d in (tmp_path / "apply", ids))
    for key in ("counts", "tokens", "outputs", "dictionary_sha256"):
        assert got[key] == want[key], key
    assert {k: v for k, v in got["summary"].items() if k not in ("out", "seconds")} == \
           {k: v for k, v in want["summary"].items() if k not in ("out", "seconds")}


def test_ids_made_alongside_are_the_bytes_of_bpe_apply(tmp_path, monkeypatch):
    if not (XLM / "codes_xnli_15").is_file():
        pytest.skip(f"XLM's codes not found under {XLM}")
    files = _sentences(tmp_path, (("de", 12000), ("ru", 7000)))
    inputs = ["--source", "text", "--lang", "de,ru", *map(str, files)]
    usual = _made_usual_way(monkeypatch)
    out = tmp_path / "p"
    r = run_cli("prepare", "--out", out, *inputs, *XLM_ARGS, "--bpe-from", XLM / "codes_xnli_15")
    assert r.exit_code == 0, r.stderr
    assert usual == [], "every id shard should have been made along its text shard"
    assert not (out / ".work").exists()
    _same_as_bpe_apply(tmp_path, out, inputs)


def test_pair_ids_made_alongside_are_the_bytes_of_bpe_apply(tmp_path, monkeypatch):
    if not (XLM / "codes_xnli_15").is_file() or not IWSLT.is_dir():
        pytest.skip(f"XLM's codes or IWSLT14 not found under {data_dir()}")
    inputs = ["--source", "opus", "--lang", "de,en", str(IWSLT / "IWSLT14.TED.tst2010.de-en.de"),
              str(IWSLT / "IWSLT14.TED.tst2010.de-en.en")]
    usual = _made_usual_way(monkeypatch)
    out = tmp_path / "p"
    r = run_cli("prepare", "--out", out, *inputs, *XLM_ARGS, "--bpe-from", XLM / "codes_xnli_15")
    assert r.exit_code == 0, r.stderr
    assert usual == []
    _same_as_bpe_apply(tmp_path, out, inputs)


def test_a_shard_that_cannot_be_made_alongside_is_made_by_apply(tmp_path, monkeypatch):
    """A text shard already on disk (a rerun after a kill) gets no rows from the finalizer: apply makes its ids."""
    if not (XLM / "codes_xnli_15").is_file():
        pytest.skip(f"XLM's codes not found under {XLM}")
    files = _sentences(tmp_path, (("de", 12000),))
    inputs = ["--source", "text", "--lang", "de", *map(str, files)]
    out, bpe = tmp_path / "p", ["--bpe-from", XLM / "codes_xnli_15"]
    assert run_cli("prepare", "--out", out, *inputs, *XLM_ARGS, *bpe).exit_code == 0
    shutil.rmtree(tmp_path / "p-ids")  # as a run killed once its first text shard was written
    (out / "manifest.json").unlink()
    for p in out.glob("*/*/*/part-*.parquet"):
        if p.relative_to(out).as_posix() != "mono/train/de/part-00000.parquet":
            p.unlink()
    usual = _made_usual_way(monkeypatch)
    r = run_cli("prepare", "--out", out, *inputs, *XLM_ARGS, *bpe)
    assert r.exit_code == 0, r.stderr
    assert usual == ["mono/train/de/part-00000.parquet"]
    _same_as_bpe_apply(tmp_path, out, inputs)


def test_worker_processes_make_the_same_ids_the_usual_way(tmp_path, monkeypatch):
    """With worker processes (forked as the text step starts) nothing runs alongside: apply makes every id shard,
    the same bytes as with worker threads."""
    if not (XLM / "codes_xnli_15").is_file():
        pytest.skip(f"XLM's codes not found under {XLM}")
    files = _sentences(tmp_path, (("de", 12000),))
    inputs = ["--source", "text", "--lang", "de", *map(str, files)]
    bpe = ["--bpe-from", XLM / "codes_xnli_15"]
    assert run_cli("prepare", "--out", tmp_path / "t", *inputs, *XLM_ARGS, *bpe).exit_code == 0
    usual = _made_usual_way(monkeypatch)
    r = run_cli("prepare", "--out", tmp_path / "p", *inputs, *XLM_ARGS, *bpe, "--worker-mode", "processes")
    assert r.exit_code == 0, r.stderr
    assert sorted(usual) == sorted(_hashes(tmp_path / "p-ids")) and len(usual) >= 3
    assert _hashes(tmp_path / "p-ids") == _hashes(tmp_path / "t-ids")


def test_ids_made_alongside_with_a_sentencepiece_learn_folder(tmp_path, monkeypatch):
    """`--bpe-from` an `xlp bpe learn --tokenizer sentencepiece` folder: its id shards (from the `raw` column) are
    made along the text too, the bytes `xlp bpe apply` writes."""
    files = _sentences(tmp_path, (("de", 12000),))
    inputs = ["--source", "text", "--lang", "de", *map(str, files), "--shard-size", "5000"]
    assert run_cli("prepare", "--out", tmp_path / "plain", *inputs).exit_code == 0
    r = run_cli("bpe", "learn", "--data", tmp_path / "plain", "--out", tmp_path / "spm", "--tokenizer", "sentencepiece",
                "--spm-vocab-size", "2000")
    assert r.exit_code == 0, r.stderr
    usual = _made_usual_way(monkeypatch)
    r = run_cli("prepare", "--out", tmp_path / "p", *inputs, "--bpe-from", tmp_path / "spm")
    assert r.exit_code == 0, r.stderr
    assert usual == []
    r = run_cli("bpe", "apply", "--data", tmp_path / "plain", "--data", tmp_path / "spm", "--out", tmp_path / "apply")
    assert r.exit_code == 0, r.stderr
    assert _hashes(tmp_path / "p-ids") == _hashes(tmp_path / "apply") and len(_hashes(tmp_path / "apply")) >= 3
