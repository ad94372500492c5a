"""The GPU study (pipelines/fidelity_gpu.sh + .toml) on CPU: its data fits the lease, its plan runs dry, and the
time estimate (benchmarks/gpu_study_budget.py) stays within 9 minutes for the recipe as it is."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ft_helpers import build_runs

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "pipelines"))

import gpu_data_eval  # noqa: E402
import gpu_study_budget as budget  # noqa: E402


def _script(cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "pipelines/fidelity_gpu.sh"], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHON": sys.executable, **env})


@pytest.mark.integration
def test_the_gpu_study_dry_runs_on_cpu_from_what_travels(tmp_path_factory, shared_data) -> None:
    ids = build_runs(tmp_path_factory.getbasetemp(), shared_data)["ids"]  # real text, as `make gpu-data` makes
    root = tmp_path_factory.mktemp("lease")
    shutil.copytree(REPO / "pipelines", root / "pipelines")
    r = _script(root, DRY_RUN="1")
    assert r.returncode == 2 and "no gpu-data/ids" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    shutil.copytree(ids, root / "gpu-data" / "ids")
    assert gpu_data_eval.main(["--src", str(shared_data), "--ids", str(root / "gpu-data" / "ids"),
                               "--out", str(root / "gpu-data" / "eval")]) == 0
    files = [p for p in (root / "gpu-data").rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= 40 * 2**20
    assert not any(part in ("flores101_devtest", "ntrex128") for p in files for part in p.parts)
    langs = gpu_data_eval.languages(root / "gpu-data" / "ids")
    eval_dir = root / "gpu-data" / "eval"
    assert (eval_dir / "ud_treebanks" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz").is_file()
    assert all((eval_dir / "bilingual_dict_wiktionary" / f"{l}-en.test").is_file() for l in langs if l != "en")
    r = _script(root, DRY_RUN="1")
    assert r.returncode == 0, r.stderr
    plan = [line for line in r.stdout.splitlines() if "to run" in line]
    assert sum("pretrain." in line for line in plan) == 15 and sum("-pos" in line for line in plan) == 15
    assert any("evaluate.claims" in line for line in plan) and any("vocab-score" in line for line in plan)


def test_the_flop_count_by_hand() -> None:
    cfg = budget.recipe_plan()["pretrain"][0]
    assert (cfg.preset, cfg.bptt, cfg.batch_size, cfg.accumulate, cfg.word_pred) == ("small", 128, 64, 1, 0.15)
    # small: 4 layers, d 256, FFN 1024; 64 x 128 = 8,192 tokens; ceil(0.15 x 8,192) = 1,229 predicted tokens
    non_emb = 4 * (4 * 256 * 256 + 2 * 256 * 1024)
    want = 6 * non_emb * 8192 + 6 * 256 * 10_000 * 1229 + 6 * 4 * 128 * 256 * 8192
    assert budget.step_flops(cfg, 10_000) == want


def test_the_recipe_fits_one_lease_by_the_recorded_measurements() -> None:
    """The inputs measured on this CPU (docs/results/fidelity_gpu/budget.json, `--measure`) against the recipe as
    it is now: more steps, seeds or stages than a lease holds make this fail."""
    recorded = json.loads((REPO / "docs" / "results" / "fidelity_gpu" / "budget.json").read_text())
    est = budget.estimate(recorded["inputs"])
    assert est["pretrain_runs"] == 15 and est["total_s"] <= budget.LEASE_S, est
    assert math.isclose(est["total_s"], recorded["estimate"]["total_s"], rel_tol=1e-9)  # the committed numbers
    # the H100 step is the launch floor here: FLOPs at 15% of the published peak take far less than 8 ms
    assert est["flops_per_step"] / (budget.PEAK * budget.MFU) < budget.FLOOR == est["h100_step_s"]
