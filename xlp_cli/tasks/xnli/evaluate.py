"""`xlp evaluate --task xnli`: collect the fine-tuning folders' predictions, score them (scores.py) and write the
report (report.py)."""

from __future__ import annotations

from typing import Any

from xlp_cli.core import config as cfgmod, ui
from xlp_cli.tasks.xnli import report, scores as scores_mod


def run(cfg: Any) -> dict[str, Any]:
    runs = scores_mod.collect(cfg.data, cfg.name, cfg.split)
    scores = scores_mod.score(runs, cfgmod.parse_langs(cfg.lang), cfg.baseline)
    title = cfg.title or "XNLI comparison: " + " vs ".join(scores["runs"])
    paths = report.write_report(cfg.out, scores, title=title, split=cfg.split)
    return {"task": "xnli", "out": str(cfg.out), "title": title, "split": cfg.split, "scores": scores, **paths}


def print_summary(summary: dict[str, Any]) -> None:
    """The terminal view: the comparison table, its note and where the report is."""
    scores = summary["scores"]
    if scores_mod.toy_note(scores):
        ui.out.print(scores_mod.toy_note(scores), style="bold yellow", soft_wrap=True, markup=False)
    ui.out.print(report.rich_table(scores, summary.get("title", "XNLI")))
    ui.out.print(" ".join(report.notes(scores, summary.get("split", "test"))[1:]), style="dim", soft_wrap=True, markup=False)
    ui.report_paths(summary)
