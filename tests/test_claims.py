"""`xlp evaluate --task claims`: the paired test over seeds, and a real (tiny) study through the stages."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from ft_helpers import build_runs

from xlp_cli.core.config import from_dict
from xlp_cli.tasks.claims import paired_test, t_sf

pytestmark = [pytest.mark.integration]


def test_student_t_tail_matches_the_tables() -> None:
    # one-sided 5% critical values of Student's t (any statistics table): df 2, 4, 10
    for df, t in ((2, 2.919986), (4, 2.131847), (10, 1.812461)):
        assert abs(t_sf(t, df) - 0.05) < 1e-6
    assert t_sf(0.0, 3) == 0.5 and abs(t_sf(-2.0, 4) - (1 - t_sf(2.0, 4))) < 1e-12


def test_verdicts_follow_the_claimed_direction() -> None:
    lower = -1  # e.g. "XLP lowers the validation loss": differences run - baseline should be negative
    assert paired_test([-0.10, -0.20, -0.15], lower, 0.05)["verdict"] == "reproduced in direction"
    assert paired_test([0.10, 0.20, 0.15], lower, 0.05)["verdict"] == "not reproduced"
    assert paired_test([-0.10, 0.20, -0.15], lower, 0.05)["verdict"] == "inconclusive at this scale"
    assert paired_test([-0.1], lower, 0.05)["verdict"] == "inconclusive at this scale"  # one seed: no spread


@pytest.mark.slow
def test_a_tiny_two_seed_study(tmp_path_factory, shared_data) -> None:
    from xlp_cli.evaluate.run import run as evaluate
    from xlp_cli.tasks.common import EVALUATE, FINETUNE
    from xlp_cli.tasks.xnli.finetune import run as finetune
    from xlp_cli.train.config import PretrainConfig
    from xlp_cli.train.pretrain import run as pretrain

    base = build_runs(tmp_path_factory.getbasetemp(), shared_data)
    tmp = tmp_path_factory.mktemp("claims")
    fts, names = [], []
    for enc in ("additive", "xlp"):
        for seed in (1, 2):
            pt = tmp / f"pt-{enc}-{seed}"
            pretrain(from_dict(PretrainConfig, {
                "data": [str(base["ids"])], "out": str(pt), "lang-encoding": enc, "preset": "tiny", "seed": seed,
                "max-steps": 8, "batch-size": 8, "accumulate": 1, "bptt": 32, "warmup": 2, "lr": 1e-3,
                "eval-every": 4, "eval-batches": 1, "num-threads": 1}))
            ft = tmp / f"ft-{enc}-{seed}"
            finetune(FINETUNE.build({
                "task": "xnli", "data": [str(pt)], "out": str(ft), "lang": ["en", "fr"], "lr": [1e-3],
                "batch-size": [8], "max-steps": 3, "epochs": 1, "max-train-rows": 48, "max-eval-rows": 16,
                "warmup": 1, "threads": 1}))
            fts.append(str(ft))
            names.append(enc)
    out = tmp / "claims"
    s = evaluate(EVALUATE.build({"task": "claims", "data": fts, "name": names, "out": str(out), "max-pairs": 40,
                                 "words": ["the"], "topic-words": ["happy", "glad", "sad", "car"]}))
    res = json.loads((out / "results.json").read_text())
    assert set(res["runs"]) == {"additive", "xlp"} and set(res["runs"]["xlp"]) == {"1", "2"}
    assert res["valid_loss_step"] == 8
    got = {c["metric"]: c for c in s["claims"]}
    assert {"valid_loss", "xnli_avg", "xnli_gap", "lang_sim", "topic_sep"} <= set(got)  # (dict_cos: vle runs)
    assert all("dict_cos" in r for r in res["runs"]["xlp"].values())
    for c in s["claims"]:
        diffs = np.subtract(c["run_values"], c["baseline_values"])
        assert c["seeds"] == [1, 2] and math.isclose(c["mean_diff"], float(diffs.mean()), rel_tol=1e-9)
        assert c["verdict"] in ("reproduced in direction", "not reproduced", "inconclusive at this scale")
    assert (out / "report.md").read_text().count("|") > 20 and (out / "claims_valid_loss.png").is_file()
    assert json.loads((out / "manifest.json").read_text())["task"] == "claims"
