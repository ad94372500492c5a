"""`xlp evaluate --task retrieval` on runs pre-trained without English says that English is missing (issue 32),
instead of "no language has retrieval pairs" while Tatoeba has fra-eng and deu-eng."""

from __future__ import annotations

from conftest import run_cli


def test_runs_without_english_name_english_as_missing(tmp_path) -> None:
    def xlp(*args):
        return run_cli(*map(str, args))

    prep = tmp_path / "gettext"
    assert xlp("prepare", "--source", "gettext", "--lang", "en,de,fr", "--mono-from-parallel", "--max-records", 300,
               "--bpe-codes", 500, "--out", prep).exit_code == 0
    run = tmp_path / "run"
    r = xlp("pretrain", "--data", f"{prep}-ids", "--out", run, "--lang", "de,fr", "--preset", "tiny", "--max-steps", 2,
            "--bptt", 16, "--batch-size", 2, "--eval-batches", 1, "--num-threads", 1)
    assert r.exit_code == 0, r.stderr
    r = xlp("evaluate", "--task", "retrieval", "--data", run, "--out", tmp_path / "ev", "--threads", 1)
    err = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(err) == 1, r.stderr
    assert "English is missing" in err[0] and "fr, de" in err[0] and "en among --lang" in err[0], err[0]
