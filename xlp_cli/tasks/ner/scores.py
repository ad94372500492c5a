"""`xlp evaluate --task ner`: entity F1 per language (seqeval / conlleval semantics), average and transfer gap,
mean ± std over seeds.

Entities (`entities`) follow conlleval and seqeval's default mode: an entity starts at a B- tag, or at an I- tag
that follows O, the sentence start or a tag of another type; it ends before O, a B-, or a tag of another type.
Its type is the text after the dash. F1 is micro-averaged over every entity of a file: a predicted entity is
correct when its type, start and end equal a gold entity's (precision = correct / predicted, recall = correct /
gold, F1 = 2PR / (P + R); 0 when nothing is correct), in %. Input: `xlp finetune --task ner` folders;
F1 is recomputed from `predictions/seed<S>/<split>.<lang>.jsonl` (one sentence per line: {"id", "lang",
"gold": [BIO...], "pred": [BIO... or "" past --max-len, read as O]}). The table, the seed pooling and the marking
(`xnli.scores.MARK_RULE`) are XNLI's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.pos.scores import same_length_tag_lists
from xlp_cli.tasks.xnli import report
from xlp_cli.tasks.xnli.report import rich_table
from xlp_cli.tasks.xnli.scores import MARK_RULE, collect, prediction_rows, score

NOTE = ("Entity F1 (%) of zero-shot NER (PAN-X / WikiANN: PER, ORG, LOC in BIO tags, the label on each word's "
        "first subword) per language, seqeval's default mode (an I- after O or another type opens an entity), then "
        "the average and the transfer gap (English minus the average of the other languages; lower is better). "
        "Cells are mean ± std over seeds. " + MARK_RULE + ".")


def _split(tag: str) -> tuple[str, str]:
    if not tag or tag == "O":
        return "O", ""
    head, _, kind = tag.partition("-")
    return head, kind


def entities(tags: list[str]) -> list[tuple[str, int, int]]:
    """(type, first word, last word) of every entity, conlleval / seqeval default mode (IOB1/IOB2 alike)."""
    out = []
    start, kind = -1, ""
    for i, tag in enumerate(list(tags) + ["O"]):
        head, t = _split(tag)
        ends = start >= 0 and (head in ("O", "B") or t != kind)
        if ends:
            out.append((kind, start, i - 1))
            start, kind = -1, ""
        if head != "O" and (start < 0):
            start, kind = i, t
    return out


def f1_counts(pairs: Iterable[tuple[list[str], list[str]]]) -> tuple[int, int, int]:
    """(correct, predicted, gold) entities over (gold tags, predicted tags) sentences."""
    correct = n_pred = n_gold = 0
    for gold, pred in pairs:
        g = set(entities(gold))
        p = set(entities([t or "O" for t in pred]))
        correct += len(g & p)
        n_pred += len(p)
        n_gold += len(g)
    return correct, n_pred, n_gold


def entity_f1(pairs: Iterable[tuple[list[str], list[str]]]) -> tuple[float, int]:
    """(micro F1 in %, gold entities)."""
    correct, n_pred, n_gold = f1_counts(pairs)
    if correct == 0:
        return 0.0, n_gold
    p, r = correct / n_pred, correct / n_gold
    return 100.0 * 2 * p * r / (p + r), n_gold


def f1_of_file(path: Path) -> tuple[float, int]:
    """(entity F1 in %, gold entities) of one NER predictions file."""
    f1, n = entity_f1(prediction_rows(path, same_length_tag_lists))
    if n == 0:
        raise BadInput("predictions file has no gold entity to score", path=path)
    return f1, n


def scores_of(data: list[Path], names: list[str], split: str, langs: list[str], baseline: str) -> dict[str, Any]:
    return score(collect(data, names, split, task="ner", accuracy=f1_of_file), langs, baseline)


def run(cfg: Any) -> dict[str, Any]:
    scores = scores_of(cfg.data, cfg.name, cfg.split, cfgmod.parse_langs(cfg.lang), cfg.baseline)
    title = cfg.title or "Zero-shot NER: " + " vs ".join(scores["runs"])
    paths = report.write_report(cfg.out, scores, title=title, split=cfg.split, task="ner", label="PAN-X NER",
                                note=NOTE, chance=None)
    return {"task": "ner", "out": str(cfg.out), "title": title, "scores": scores, **paths}


def print_summary(summary: dict[str, Any]) -> None:
    ui.out.print(rich_table(summary["scores"], summary.get("title", "NER"), gap_label="transfer gap"))
    ui.out.print(NOTE, style="dim", soft_wrap=True)
    ui.report_paths(summary)
