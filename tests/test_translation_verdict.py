"""pipelines/translation_verdict.py: paired verdicts between two translation systems over seeds (the rule of
docs/results/README.md), on small results.json files written here in finetune's format."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "pipelines" / "translation_verdict.py"
sys.path.insert(0, str(SCRIPT.parent))

import translation_verdict as tv  # noqa: E402


def _run(folder: Path, seed: int, bleu: dict[str, float]) -> Path:
    """A translation run folder with one seed whose results.json holds these test BLEU scores."""
    d = folder / f"seed-{seed}"
    d.mkdir(parents=True)
    test = {k: {"bleu": v, "tok_bleu": v, "n": 400} for k, v in bleu.items()}
    (d / "results.json").write_text(json.dumps({"seed": seed, "bleu": {"valid": {}, "test": test}}))
    return folder


def test_paired_verdicts_with_holm_and_power_lines(tmp_path):
    a = [_run(tmp_path / f"a{s}", s, {"de-fr": 1.0 + s / 10, "fr-de": 0.5, "de-en": 20.0 + s}) for s in (1, 2, 3)]
    b = [_run(tmp_path / f"b{s}", s, {"de-fr": 9.0 + s / 5, "fr-de": 9.5, "de-en": 20.0 + s - (0.3, 0.4, 0.35)[s - 1]})
         for s in (1, 2, 3)]
    res = tv.verdicts(a, b, {"zero-shot": ["de-fr", "fr-de"], "supervised": ["de-en"]})
    zs, sup = res["zero-shot"], res["supervised"]
    assert zs["a"] == [0.8, 0.85, 0.9] and zs["b"] == [9.35, 9.45, 9.55]
    assert zs["verdict"] == "reproduced in direction" and zs["p_holm"] == pytest.approx(min(1.0, 2 * zs["p"]))
    assert sup["mean_diff"] == pytest.approx(-0.35) and sup["verdict"] == "not reproduced"
    assert sup["p_against_holm"] < 0.05 < sup["p_holm"]
    # the power line: (t_.95 + t_.8) * sd / sqrt(n) with 2 df, larger at alpha / m
    assert zs["mde"] == pytest.approx((2.919986 + 1.060660) * zs["sd_diff"] / math.sqrt(3), rel=1e-4)
    assert zs["mde_holm"] > zs["mde"]


def test_one_seed_is_inconclusive_and_unequal_arms_are_refused(tmp_path):
    a, b = _run(tmp_path / "a", 1, {"de-fr": 1.0}), _run(tmp_path / "b", 1, {"de-fr": 9.0})
    res = tv.verdicts([a], [b], {"zero-shot": ["de-fr"]})["zero-shot"]
    assert res["verdict"] == "inconclusive at this scale" and math.isnan(res["p"]) and math.isnan(res["mde"])
    done = subprocess.run([sys.executable, str(SCRIPT), "--a", "A", str(a), "--b", "B", str(b), str(b),
                           "--claim", "zero-shot=de-fr"], capture_output=True, text=True)
    assert done.returncode == 2 and "as many folders each" in done.stderr
    done = subprocess.run([sys.executable, str(SCRIPT), "--a", "A", str(a), "--b", "B", str(b),
                           "--claim", "zero-shot=de-fr,fr-de"], capture_output=True, text=True)
    assert done.returncode == 2 and "no test BLEU for fr-de" in done.stderr
