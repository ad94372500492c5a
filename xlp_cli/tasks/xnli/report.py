"""The comparison report: report.md, a self-contained report.html (PNG plots inlined as base64),
the PNG files themselves, and the rich table for the terminal.

Plots: accuracy per language per run (mean with a +-std error bar over seeds), and the pre-training
validation-loss curves of the compared runs (XLP paper, Figure 3a), read from each pretrain run's
`metrics.jsonl` (found through the finetune manifest's `upstream`).
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from rich.table import Table

from xlp_cli.artifacts.files import write_json_atomic, write_text_atomic
from xlp_cli.core import textfile
from xlp_cli.core.errors import BadInput
from xlp_cli.reporting.figures import plot_curves, pyplot, save_png
from xlp_cli.reporting.render import html_page, markdown_table
from xlp_cli.tasks.xnli.scores import MARK_RULE, fmt_cell, rows_note, toy_note


# ---------------------------------------------------------------- pre-training curves
def _valid_loss(rec: dict[str, Any]) -> float | None:
    """The overall validation loss of one metrics.jsonl record, or None if it is not a validation event."""
    for key in ("valid_loss", "valid_mlm_loss", "val_loss"):
        v = rec.get(key)
        if isinstance(v, (int, float)):
            return float(v)
    kind = str(rec.get("event", rec.get("kind", rec.get("split", ""))))
    if kind.startswith("val"):
        for key in ("loss", "mlm_loss"):
            v = rec.get(key)
            if isinstance(v, (int, float)):
                return float(v)
        v = rec.get("valid")
        if isinstance(v, dict) and isinstance(v.get("loss"), (int, float)):
            return float(v["loss"])
    return None


def read_valid_curve(run_folder: Path) -> list[tuple[int, float]]:
    """(step, validation loss) points of a pretrain run; [] when it has none."""
    path = Path(run_folder) / "metrics.jsonl"
    if not path.is_file():
        return []
    points: dict[int, float] = {}
    with open(path, encoding="utf-8", errors="replace") as f:  # a log: unreadable lines are passed over
        for line in f:
            try:
                rec = textfile.json_value(line, path)
            except BadInput:
                continue  # a line cut by an interrupted run
            if not isinstance(rec, dict):
                continue
            loss = _valid_loss(rec)
            step = rec.get("step")
            if loss is not None and isinstance(step, int) and math.isfinite(loss):
                points[step] = loss  # a resumed run may repeat a step: keep the last
    return sorted(points.items())


# ---------------------------------------------------------------- plots
def plot_accuracy(scores: dict[str, Any], path: Path, title: str = "XNLI accuracy per language",
                  chance: float | None = 100 / 3, ylabel: str = "accuracy (%)", extra: tuple[str, ...] = ("avg",)) -> Path:
    langs = scores["langs"] + list(extra)
    runs = list(scores["runs"].items())
    fig, ax = pyplot().subplots(figsize=(max(6.0, 0.6 * len(langs) * max(1, len(runs)) * 0.6 + 3), 4.0), dpi=110)
    width = 0.8 / max(1, len(runs))
    for i, (name, r) in enumerate(runs):
        means = [r["acc"][l]["mean"] if l != "avg" else r["avg"]["mean"] for l in langs]
        stats = [r["acc"][l] if l != "avg" else r["avg"] for l in langs]
        stds = [s["std"] if s["n"] >= 2 and not math.isnan(s["std"]) else 0.0 for s in stats]
        xs = [j + (i - (len(runs) - 1) / 2) * width for j in range(len(langs))]
        ax.bar(xs, [0 if math.isnan(m) else m for m in means], width,
               yerr=stds if any(stds) else None, capsize=2, label=name)
    ax.set_xticks(range(len(langs)))
    ax.set_xticklabels(langs)
    ax.set_ylabel(ylabel)
    if chance is not None:
        ax.axhline(chance, color="grey", lw=0.8, ls="--", label="chance")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)
    return path


def plot_valid_curves(curves: dict[str, list[tuple[int, float]]], path: Path) -> Path | None:
    return plot_curves(curves, path, xlabel="pre-training step", ylabel="validation MLM loss",
                       title="Pre-training validation loss (XLP Fig. 3a)")


# ---------------------------------------------------------------- tables
def table_rows(scores: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the Table 1 + Table 3 layout: run, languages..., avg, gap."""
    header = ["run"] + scores["langs"] + ["avg", "gap"]
    rows = []
    for name, r in scores["runs"].items():
        vs = r["vs_baseline"]
        cells = [fmt_cell(r["acc"][l], vs[l]) for l in scores["langs"]]
        cells.append(fmt_cell(r["avg"], vs["avg"]))
        cells.append(fmt_cell(r["gap"], vs["gap"], lower_is_better=True))
        rows.append([name + (" (baseline)" if name == scores["baseline"] else "")] + cells)
    return header, rows


def rich_table(scores: dict[str, Any], title: str, gap_label: str = "gap (Table 3)") -> Table:
    """The terminal view: Table 1 transposed (a row per language, a column per run) so 15 languages fit."""
    header, rows = table_rows(scores)
    t = Table(title=title)
    t.add_column("lang")
    for r in rows:
        t.add_column(r[0], justify="right")
    for i, h in enumerate(header[1:], 1):
        t.add_row(h if h != "gap" else gap_label, *[r[i] for r in rows],
                  style="bold" if h in ("avg", "gap") else None, end_section=h == header[-3])
    return t


NOTE = ("Accuracy (%) per language in the XLP paper's Table 1 order, then the average and the cross-lingual "
        "transfer gap (Table 3: English minus the average of the other languages; lower is better). "
        "Cells are mean ± std over seeds. For the gap, ▲ is a smaller gap. " + MARK_RULE + ".")


def notes(scores: dict[str, Any], split: str, label: str = "XNLI", note: str = NOTE) -> list[str]:
    """The paragraphs above the table: the toy-scale warning (if any), the split and rows (XNLI's scores say how
    many), the legend."""
    if label != "XNLI":  # another task with this layout (POS): its own legend
        return ["", f"{label} {split} split.", note]
    return [toy_note(scores), f"XNLI {split} split. " + rows_note(scores, split), note]


# ---------------------------------------------------------------- report
def write_report(out: Path, scores: dict[str, Any], *, title: str, split: str, extra_md: str = "", task: str = "xnli",
                 label: str = "XNLI", note: str = NOTE, chance: float | None = 100 / 3) -> dict[str, Any]:
    """Write the PNGs, report.md, report.html and results.json into `out`. Returns the paths written.
    (`task`, `label`, `note`, `chance`: another task with the same layout, e.g. POS.)"""
    out.mkdir(parents=True, exist_ok=True)
    pngs: list[tuple[str, Path]] = []
    pngs.append(("Accuracy per language", plot_accuracy(scores, out / f"{task}_accuracy.png",
                                                        f"{label} {split} accuracy per language", chance)))
    curves: dict[str, list[tuple[int, float]]] = {}
    for name, r in scores["runs"].items():
        for i, run_dir in enumerate(dict.fromkeys(r.get("pretrain_runs", []))):
            curve = name if i == 0 else f"{name} ({Path(run_dir).name})"
            curves[curve] = read_valid_curve(Path(run_dir))
    loss_png = plot_valid_curves(curves, out / "pretrain_valid_loss.png")
    if loss_png:
        pngs.append(("Pre-training validation loss", loss_png))
    scores["valid_curves"] = {k: v for k, v in curves.items()}

    header, rows = table_rows(scores)
    intro = notes(scores, split, label, note)
    md = [f"# {title}", ""] + ([f"**{intro[0]}**", ""] if intro[0] else []) + [" ".join(intro[1:]), "",
                                                                               markdown_table(header, rows), ""]
    md += ["## Runs", ""]
    for name, r in scores["runs"].items():
        md.append(f"- **{name}**: {r['n_seeds']} seed(s); " + ", ".join(f"`{f}`" for f in r["folders"]))
    md.append("")
    for caption, p in pngs:
        md += [f"## {caption}", "", f"![{caption}]({p.name})", ""]
    if extra_md:
        md += [extra_md, ""]
    write_text_atomic(out / "report.md", "\n".join(md))

    esc = html.escape
    runs = [f"<b>{esc(n)}</b>: {r['n_seeds']} seed(s); " + ", ".join(f"<code>{esc(f)}</code>" for f in r["folders"])
            for n, r in scores["runs"].items()]
    html_doc = html_page(title, " ".join(p for p in intro if p), [("", header, rows)], [("Runs", runs)], pngs)
    write_text_atomic(out / "report.html", html_doc)
    results = {"task": task, "split": split, **scores, "plots": [p.name for _, p in pngs]}
    write_json_atomic(out / "results.json", results)
    return {"report_md": str(out / "report.md"), "report_html": str(out / "report.html"),
            "results": str(out / "results.json"), "plots": [str(p) for _, p in pngs]}
