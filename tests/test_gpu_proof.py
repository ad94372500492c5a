"""The GPU proof and the data it carries, run in CI on the CPU (`--smoke`) so that neither can rot before a GPU is
lent (issue 26): the same script, sections and JSON as on an H100, at the `tiny` preset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xlp_cli.artifacts import layout

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.integration
@pytest.mark.slow
def test_gpu_proof_smoke_on_the_cpu_from_the_carried_data(shared_data, tmp_path) -> None:
    env = {**os.environ, "XLP_DATA_DIR": str(shared_data), "XLP_QUIET": "1", "OMP_NUM_THREADS": "1"}
    data = tmp_path / "gpu-data"
    build = subprocess.run([sys.executable, "benchmarks/gpu_data.py", "--out", str(data), "--max-records", "3000",
                            "--codes", "2000"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    assert layout.groups(data / "ids", "train") == ["de", "de-en", "de-fr", "en", "en-fr", "fr"]
    assert not (data / "work").exists()  # only what training reads travels
    p = subprocess.run([sys.executable, "benchmarks/gpu_proof.py", "--device", "cpu", "--smoke", "--data", str(data),
                        "--out", str(tmp_path / "out")], cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    r = json.loads((tmp_path / "out" / "gpu_proof.json").read_text())
    assert not r.get("errors") and r["env"]["smoke"]
    rows = r["throughput"]
    assert {x["encoding"] for x in rows} == {"none", "additive", "attaching", "xlp", "vle"}
    assert all(x["tokens_per_s"] > 0 and x["step_s"] > 0 and x["preset"] == "tiny" for x in rows)
    assert {x["objective"] for x in r["syncs"]} == {"mlm+tlm", "tlm+ca-mlm", "mass"}
    curve = r["pretrain"]["train_loss"]
    assert r["pretrain"]["steps"] == 20 and len(curve) >= 2 and curve[-1][1] < curve[0][1]  # it learns
    assert r["resume"]["resumed"] and r["resume"]["bitwise"]  # on the CPU, resume is exact
