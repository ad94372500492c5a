"""`xlp evaluate --task xnli` on hand-made prediction files with known numbers, the report, and bad input."""

from __future__ import annotations

import base64
import io
import json
import math
import re
import shutil
from pathlib import Path

import pytest

from xlp_cli.artifacts.manifest import read_manifest
from xlp_cli.core.errors import BadInput
from xlp_cli.evaluate.run import run
from xlp_cli.tasks.common import EVALUATE
from xlp_cli.tasks.xnli import report, scores as xnli

FIX = Path(__file__).parent / "fixtures" / "evaluate"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _eval(tmp_path: Path, **kw) -> dict:
    values = {"task": "xnli", "data": [str(FIX / "ft_a"), str(FIX / "ft_b")], "out": str(tmp_path / "ev")}
    values.update(kw)
    return run(EVALUATE.build(values))


def test_known_numbers(tmp_path):
    s = _eval(tmp_path)["scores"]
    assert s["langs"] == ["en", "fr"]
    assert s["baseline"] == "xlp"  # default names come from the manifests' encoding; first run is the baseline
    a, b = s["runs"]["xlp"], s["runs"]["additive"]
    # ft_a: en 80, 90 / fr 60, 50 ; ft_b: en 50, 50 / fr 40, 40 (see the fixture files)
    assert a["acc"]["en"]["mean"] == pytest.approx(85.0)
    assert a["acc"]["en"]["std"] == pytest.approx(math.sqrt(50))  # sample std of 80, 90
    assert a["acc"]["fr"]["mean"] == pytest.approx(55.0)
    assert a["avg"]["mean"] == pytest.approx(70.0) and a["avg"]["std"] == pytest.approx(0.0)
    assert a["gap"]["seeds"] == pytest.approx([20.0, 40.0])  # en minus mean of the others, per seed
    assert a["gap"]["mean"] == pytest.approx(30.0)
    assert b["acc"]["en"]["mean"] == pytest.approx(50.0) and b["acc"]["en"]["std"] == 0
    assert b["gap"]["mean"] == pytest.approx(10.0)
    # marks: additive vs the xlp baseline
    vs = b["vs_baseline"]
    # Welch, two-sided: en 80, 90 vs 50, 50: t = 35 / (7.07 / sqrt 2) = 7 on 1 df, p = 0.091: no mark at 0.05
    assert vs["en"]["diff"] == pytest.approx(-35.0) and not vs["en"]["marked"]
    assert vs["en"]["p"] == pytest.approx(2 * (0.5 - math.atan(7.0) / math.pi))   # Student t with 1 df = Cauchy
    assert vs["avg"]["diff"] == pytest.approx(-25.0) and vs["avg"]["marked"]      # 70, 70 vs 45, 45: no spread
    assert vs["gap"]["diff"] == pytest.approx(-20.0) and not vs["gap"]["marked"]  # t = 2 on 1 df: p = 0.30
    assert not any(v["marked"] for v in a["vs_baseline"].values())                  # never against itself


def test_difference_within_spread_is_not_marked():
    r1 = xnli.RunScores("a", acc={"s1": {"en": 50.0}, "s2": {"en": 60.0}})
    r2 = xnli.RunScores("b", acc={"s1": {"en": 52.0}, "s2": {"en": 62.0}})
    r3 = xnli.RunScores("c", acc={"s1": {"en": 90.0}})  # one seed: no spread known, never marked
    s = xnli.score([r1, r2, r3])
    assert s["runs"]["b"]["vs_baseline"]["en"]["diff"] == pytest.approx(2.0)
    assert s["runs"]["b"]["vs_baseline"]["en"]["marked"] is False
    assert s["runs"]["c"]["vs_baseline"]["en"]["marked"] is False
    assert xnli.fmt_cell(s["runs"]["a"]["acc"]["en"]) == "55.0 ± 7.1"
    assert xnli.fmt_cell(s["runs"]["c"]["acc"]["en"]) == "90.0"


def test_table1_order():
    assert xnli.order_langs({"ur", "en", "zh", "fr", "xx"}) == ["en", "fr", "zh", "ur", "xx"]


def test_report_renders_valid_pngs(tmp_path):
    summary = _eval(tmp_path, name=["A", "B"], baseline="B", title="demo")
    out = tmp_path / "ev"
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| A | 85.0 ± 7.1 | 55.0 ± 7.1 | 70.0 ± 0.0 ▲ | 30.0 ± 14.1 |" in md  # Welch p < 0.05 only for avg
    assert "| B (baseline) | 50.0 ± 0.0 | 40.0 ± 0.0 | 45.0 ± 0.0 | 10.0 ± 0.0 |" in md
    html = (out / "report.html").read_text(encoding="utf-8")
    uris = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(uris) == 1  # accuracy plot; the fixtures have no pre-training metrics
    assert "src='http" not in html and "<script" not in html  # self-contained
    from PIL import Image

    for blob in [base64.b64decode(uris[0]), (out / "xnli_accuracy.png").read_bytes()]:
        assert blob.startswith(PNG_MAGIC)
        img = Image.open(io.BytesIO(blob))
        img.verify()
    import matplotlib.image as mpimg

    arr = mpimg.imread(out / "xnli_accuracy.png")
    assert arr.ndim == 3 and arr.shape[0] > 100 and arr.shape[1] > 100 and arr.std() > 0
    res = json.loads((out / "results.json").read_text())
    assert res["runs"]["A"]["acc"]["en"]["mean"] == pytest.approx(85.0)
    assert summary["report_html"].endswith("report.html")


def test_validation_loss_curves_from_pretrain_metrics(tmp_path):
    # a finetune folder whose upstream pretrain run has a metrics.jsonl (the format `xlp pretrain` writes)
    ft = tmp_path / "ft"
    shutil.copytree(FIX / "ft_a", ft)
    pre = tmp_path / "pre"
    pre.mkdir()
    lines = [{"event": "train", "step": 10, "loss": 9.0}, {"event": "valid", "step": 10, "loss": 7.5, "ppl": 1808.0},
             {"event": "valid", "step": 20, "loss": 6.0}]
    (pre / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"cut', encoding="utf-8")
    m = json.loads((ft / "manifest.json").read_text())
    m["upstream"] = [{"path": str(pre), "stage": "pretrain"}]
    (ft / "manifest.json").write_text(json.dumps(m))
    assert report.read_valid_curve(pre) == [(10, 7.5), (20, 6.0)]
    run(EVALUATE.build({"data": [str(ft)], "out": str(tmp_path / "ev")}))
    png = tmp_path / "ev" / "pretrain_valid_loss.png"
    assert png.read_bytes().startswith(PNG_MAGIC)
    html = (tmp_path / "ev" / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 2


def test_bad_inputs(tmp_path):
    with pytest.raises(BadInput, match="no manifest.json"):
        _eval(tmp_path, data=[str(tmp_path)])
    bad = tmp_path / "bad"
    shutil.copytree(FIX / "ft_b", bad)
    p = bad / "predictions" / "seed1" / "test.en.jsonl"
    p.write_text(p.read_text() + '{"gold": "neutral"}\n')
    with pytest.raises(BadInput, match=r"test\.en\.jsonl:11: .*'pred'"):
        _eval(tmp_path, data=[str(bad)])
    with pytest.raises(BadInput, match="no predictions for language"):
        _eval(tmp_path, lang=["de"])
    with pytest.raises(BadInput, match="baseline"):
        _eval(tmp_path, baseline="nope")
    with pytest.raises(BadInput, match="2 names for 1"):
        EVALUATE.build({"data": [str(FIX / "ft_a")], "name": ["a", "b"]})
    with pytest.raises(BadInput, match="no dev predictions"):
        _eval(tmp_path, split="dev")


def test_cli_one_line_error_and_table(tmp_path):
    from typer.testing import CliRunner

    from xlp_cli.cli.app import app

    r = CliRunner().invoke(app, ["evaluate", "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "e")])
    assert r.exit_code == 2
    assert r.stderr.strip().count("\n") == 0 and "no such folder" in r.stderr and "Traceback" not in r.stderr
    r = CliRunner().invoke(app, ["evaluate", "--data", str(FIX / "ft_a"), "--data", str(FIX / "ft_b"),
                                 "--out", str(tmp_path / "e")])
    assert r.exit_code == 0, r.stderr
    assert "85.0 ± 7.1" in r.stdout and "additive" in r.stdout
    assert read_manifest(tmp_path / "e", stage="evaluate")["config"]["task"] == "xnli"
