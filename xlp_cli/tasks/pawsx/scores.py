"""`xlp evaluate --task pawsx`: accuracy per language, average and transfer gap, mean ± std over seeds, from the
prediction files of `xlp finetune --task pawsx` folders (XNLI's scoring and report: `tasks/xnli/scores.py`,
`tasks/xnli/report.py`; chance is 50%, a constant "not paraphrase" scores about 57%)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xlp_cli.core import config as cfgmod, ui
from xlp_cli.tasks.xnli import report
from xlp_cli.tasks.xnli.report import rich_table
from xlp_cli.tasks.xnli.scores import MARK_RULE, accuracy_of_file, collect, score

NOTE = ("Accuracy (%) of PAWS-X paraphrase identification per language on the held-out part of each language's "
        "labelled dev file (rows parallel across languages; none of them trained on), then the average and the "
        "transfer gap (English minus the average of the other languages; lower is better). Chance is 50%; always "
        "answering 'not paraphrase' scores about 57%. Cells are mean ± std over seeds. " + MARK_RULE + ".")


def scores_of(data: list[Path], names: list[str], split: str, langs: list[str], baseline: str) -> dict[str, Any]:
    return score(collect(data, names, split, task="pawsx", accuracy=accuracy_of_file), langs, baseline)


def run(cfg: Any) -> dict[str, Any]:
    scores = scores_of(cfg.data, cfg.name, cfg.split, cfgmod.parse_langs(cfg.lang), cfg.baseline)
    title = cfg.title or "PAWS-X: " + " vs ".join(scores["runs"])
    paths = report.write_report(cfg.out, scores, title=title, split=cfg.split, task="pawsx", label="PAWS-X",
                                note=NOTE, chance=50.0)
    return {"task": "pawsx", "out": str(cfg.out), "title": title, "scores": scores, **paths}


def print_summary(summary: dict[str, Any]) -> None:
    ui.out.print(rich_table(summary["scores"], summary.get("title", "PAWS-X"), gap_label="transfer gap"))
    ui.out.print(NOTE, style="dim", soft_wrap=True)
    ui.report_paths(summary)
