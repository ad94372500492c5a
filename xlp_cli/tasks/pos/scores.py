"""`xlp evaluate --task pos`: word accuracy per language, average and transfer gap, mean +- std over seeds.

Input: `xlp finetune --task pos` folders. Accuracy is recomputed from `predictions/seed<S>/<split>.<lang>.jsonl`
(one sentence per line: {"id", "lang", "gold": [UPOS...], "pred": [UPOS...]}), never copied from results.json.
A word counts when its gold tag is annotated (not "_"); a word left untagged ("" past --max-len) is an error.
The table, the seed pooling and the marking (`xnli.scores.MARK_RULE`: a two-sided Welch t-test) are XNLI's
(`tasks/xnli/scores.py`, `tasks/xnli/report.py`): the transfer gap is English minus the mean of the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.xnli import report
from xlp_cli.tasks.xnli.report import rich_table
from xlp_cli.tasks.xnli.scores import MARK_RULE, collect, prediction_rows, score

NOTE = ("Word accuracy (%) of zero-shot POS tagging (17 UD v2 tags, the label on each word's first subword) per "
        "language, then the average and the transfer gap (English minus the average of the other languages; "
        "lower is better). Cells are mean ± std over seeds. " + MARK_RULE + ".")


def token_accuracy(pairs: Iterable[tuple[list[str], list[str]]]) -> tuple[float, int]:
    """(accuracy in %, scored words) over (gold tags, predicted tags) per sentence; gold "_" is not scored."""
    correct = total = 0
    for gold, pred in pairs:
        for g, p in zip(gold, pred):
            if g != "_":
                total += 1
                correct += int(g == p)
    return (100.0 * correct / total if total else float("nan")), total


def same_length_tag_lists(gold: Any, pred: Any) -> None:
    """The row check of a tagging predictions file (POS, NER): `gold` and `pred` are tag lists of one length."""
    if not isinstance(gold, list) or not isinstance(pred, list) or len(gold) != len(pred):
        raise TypeError("'gold' and 'pred' must be tag lists of the same length")


def accuracy_of_file(path: Path) -> tuple[float, int]:
    """(word accuracy in %, scored words) of one POS predictions file."""

    acc, n = token_accuracy(prediction_rows(path, same_length_tag_lists))
    if n == 0:
        raise BadInput("predictions file has no scored word", path=path)
    return acc, n


def scores_of(data: list[Path], names: list[str], split: str, langs: list[str], baseline: str) -> dict[str, Any]:
    return score(collect(data, names, split, task="pos", accuracy=accuracy_of_file), langs, baseline)


def run(cfg: Any) -> dict[str, Any]:
    scores = scores_of(cfg.data, cfg.name, cfg.split, cfgmod.parse_langs(cfg.lang), cfg.baseline)
    title = cfg.title or "Zero-shot POS tagging: " + " vs ".join(scores["runs"])
    paths = report.write_report(cfg.out, scores, title=title, split=cfg.split, task="pos", label="UD POS",
                                note=NOTE, chance=None)
    return {"task": "pos", "out": str(cfg.out), "title": title, "scores": scores, **paths}


def print_summary(summary: dict[str, Any]) -> None:
    ui.out.print(rich_table(summary["scores"], summary.get("title", "POS"), gap_label="transfer gap"))
    ui.out.print(NOTE, style="dim", soft_wrap=True)
    ui.report_paths(summary)
