"""A killed `xlp prepare` resumes to exactly the output of an uninterrupted run (real Common Voice text)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import REPO, run_cli, write_commonvoice
from kill_helpers import kill_group

pytestmark = pytest.mark.integration


def _write_input(shared: Path, tmp: Path) -> list[Path]:
    return write_commonvoice(shared, tmp, (("en", 8000), ("fr", 6000)))


def _hashes(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.glob("*/*/*/part-*.parquet"))}


def test_killed_run_resumes_to_the_same_output(shared_data, tmp_path):
    inputs = _write_input(shared_data, tmp_path)
    args = ["prepare", "--source", "text", "--lang", "en,fr", *map(str, inputs), "--shard-size", "2000",
            "--chunk-size", "250"]
    ref = tmp_path / "ref"
    r = run_cli(*args, "--out", ref)
    assert r.exit_code == 0, r.stderr

    out = tmp_path / "killed"
    env = {**os.environ, "XLP_QUIET": "1"}
    cmd = [sys.executable, "-c", "from xlp_cli.cli.app import main; main()", *args, "--workers", "2", "--out"]
    proc = subprocess.Popen(cmd + [str(out)], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while len(list((out / ".work").glob("chunk-*.parquet"))) < 16:
            assert proc.poll() is None, "the run finished before it could be killed"
            assert time.time() < deadline
            time.sleep(0.01)
    finally:
        kill_group(proc)  # the CLI and its workers, mid-run: all of them gone before the rerun
    assert not (out / "manifest.json").exists()
    partial = _hashes(out)
    # finished shards are final (with 2 workers the shards are written once every chunk is in, so a run killed
    # while reading has none yet; test_prepare_parallel_finalize.py kills one while it writes them)
    assert all(_hashes(ref).get(k) == v for k, v in partial.items())

    r = run_cli(*args, "--out", out, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "resumed and finished"
    assert _hashes(out) == _hashes(ref)
    m, mref = (json.loads((d / "manifest.json").read_text()) for d in (out, ref))
    for key in ("counts", "dropped", "records", "skipped", "config_hash"):
        assert m[key] == mref[key], key
    assert m["outputs"]["shards"] == mref["outputs"]["shards"]
    assert not (out / ".work").exists() and not list(out.rglob("*.tmp"))

    # a worker process that dies (say, the OOM killer) fails the run with one line, exit 1; a rerun resumes
    # (the killed run above ran worker threads: --worker-mode auto, every step native)
    out = tmp_path / "worker-died"
    cmd = cmd[:-1] + ["--worker-mode", "processes", "--out"]
    proc = subprocess.Popen(cmd + [str(out)], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while len(list((out / ".work").glob("chunk-*.parquet"))) < 4:
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.01)
        psutil.Process(proc.pid).children()[0].kill()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1 and "worker process died" in err and "Traceback" not in err, err
    r = run_cli(*args, "--out", out, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["status"] == "resumed and finished", r.stderr
    assert _hashes(out) == _hashes(ref)
