"""`xlp run --jobs 2`: independent stages at once, each in its own process, with the same outputs as one at a time.

Real Common Voice sentences (XLP_DATA_DIR), a real recipe of two tiny pre-trainings, run through the console script
so the stage processes are real spawned interpreters.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent

RECIPE = """
[recipe]
out = "{out}"
[prepare]
inputs = ["{src}/cv.en.gz", "{src}/cv.fr.gz"]
source = "text"
lang = ["en", "fr"]
max-records = 300
[bpe]
codes = 200
{pretrain}
"""
PRETRAIN = """
[[pretrain]]
name = "{name}"
lang-encoding = "{enc}"
lang = {lang}
preset = "tiny"
max-steps = {steps}
batch-size = 8
accumulate = 1
bptt = 32
warmup = 2
eval-every = 4
eval-batches = 1
num-threads = 1
"""


def _xlp(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XLP_QUIET": "1"}
    return subprocess.run([sys.executable, "-m", "xlp_cli", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=600)


def _recipe(tmp_path: Path, src: Path, name: str, runs: list[tuple[str, str, int, list[str]]]) -> Path:
    pretrain = "".join(PRETRAIN.format(name=n, enc=e, steps=s, lang=json.dumps(lang)) for n, e, s, lang in runs)
    path = tmp_path / f"{name}.toml"
    path.write_text(RECIPE.format(out=tmp_path / name, src=src, pretrain=pretrain), encoding="utf-8")
    return path


def _digest(folder: Path) -> dict[str, str]:
    """sha256 of every checkpoint and shard file (not logs, manifests or metrics with times in them)."""
    keep = (".safetensors", ".parquet")
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name.endswith(keep)}


@pytest.fixture(scope="module")
def src(tmp_path_factory, shared_data):
    d = tmp_path_factory.mktemp("cv")
    for lang, name in (("en", "en.sentence-collector.txt.gz"), ("fr", "fr.issue2259_deleted_export_readd_fixed.txt.gz")):
        path = shared_data / "commonvoice_sentences" / name
        if not path.is_file():
            pytest.skip(f"Common Voice sentences not found at {path}")
        os.symlink(path, d / f"cv.{lang}.gz")
    return d


def test_jobs_2_writes_what_jobs_1_writes(tmp_path, src):
    runs = [("additive", "additive", 6, ["en", "fr"]), ("xlp", "xlp", 6, ["en", "fr"])]
    serial = _xlp("run", str(_recipe(tmp_path, src, "serial", runs)), "--json")
    assert serial.returncode == 0, serial.stderr
    par = _xlp("run", str(_recipe(tmp_path, src, "par", runs)), "--jobs", "2", "--json")
    assert par.returncode == 0, par.stderr
    a, b = _digest(tmp_path / "serial"), _digest(tmp_path / "par")
    assert any(k.startswith("pretrain/xlp/") for k in a) and a == b
    summary = json.loads(par.stdout)
    assert {s["stage"]: s["status"] for s in summary["stages"]} == {
        "prepare": "ran", "bpe": "ran", "bpe-apply": "ran", "pretrain.additive": "ran", "pretrain.xlp": "ran"}
    log = tmp_path / "par" / "logs" / "pretrain.xlp.log"
    assert log.is_file() and "100%" in log.read_text(encoding="utf-8")
    again = _xlp("run", str(tmp_path / "par.toml"), "--jobs", "2", "--json")  # done: nothing runs again
    assert again.returncode == 0 and {s["status"] for s in json.loads(again.stdout)["stages"]} == {"skipped (done)"}


def test_a_failing_stage_is_one_line_and_the_others_finish(tmp_path, src):
    # a language the prepared data does not hold: that pre-training fails when it reads its data (in its own
    # process, after the recipe's config checks passed); the other one runs to the end
    runs = [("bad", "xlp", 4, ["en", "de"]), ("xlp", "xlp", 4, ["en", "fr"])]
    r = _xlp("run", str(_recipe(tmp_path, src, "fail", runs)), "--jobs", "2")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("xlp: ")]
    assert len(lines) == 1 and "stage pretrain.bad failed (exit 2)" in lines[0]
    assert "Traceback" not in r.stderr and str(tmp_path / "fail" / "logs" / "pretrain.bad.log") in lines[0]
    assert (tmp_path / "fail" / "pretrain" / "xlp" / "manifest.json").is_file()  # the independent stage finished


def test_stage_processes_end_when_xlp_run_is_killed_alone(tmp_path, src):
    """A SIGKILL to `xlp run` alone (not its group) once left its stage processes training on, orphaned."""
    import signal
    import time

    import psutil

    runs = [("additive", "additive", 100_000, ["en", "fr"]), ("xlp", "xlp", 100_000, ["en", "fr"])]
    parent = subprocess.Popen([sys.executable, "-m", "xlp_cli", "run", str(_recipe(tmp_path, src, "orphans", runs)),
                               "--jobs", "2"], cwd=REPO, env={**os.environ, "XLP_QUIET": "1"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    try:
        while not (tmp_path / "orphans" / "logs" / "pretrain.xlp.log").is_file():
            assert parent.poll() is None and time.time() < deadline, "the pre-trainings did not start"
            time.sleep(0.1)
        stages = [c for c in psutil.Process(parent.pid).children() if "spawn_main" in " ".join(c.cmdline())]
        assert stages, "no stage process found"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    gone, alive = psutil.wait_procs(stages, timeout=30)
    for p in alive:
        p.kill()
    assert not alive, f"stage processes outlived xlp run: {[p.pid for p in alive]}"


def test_jobs_must_be_positive(tmp_path):
    r = _xlp("run", str(tmp_path / "r.toml"), "--jobs", "0")
    assert r.returncode == 2 and "--jobs" in r.stderr and "Traceback" not in r.stderr
