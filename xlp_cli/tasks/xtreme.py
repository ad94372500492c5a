"""`xlp evaluate --task xtreme`: XNLI, POS and sentence retrieval of several runs side by side, in one report.

    xlp evaluate --task xtreme --data FT_XNLI_A --data FT_POS_A --data FT_XNLI_B --data FT_POS_B [--data RUN_C]

Each --data is an `xlp finetune` folder (task xnli or pos), an `xlp pretrain` run, or an HF model folder (`xlp
export --format hf`; retrieval only). Folders are grouped into
runs by name (`--name`, one per --data; default: the language encoding, as in `--task xnli`). Per run:
- XNLI and POS: accuracy per language, the average and the transfer gap, recomputed from the prediction files
  (`tasks/xnli/scores.py`, `tasks/pos/scores.py`), mean ± std over the fine-tuning seeds (and pooled folders);
- retrieval: Tatoeba and PUD xx->en / en->xx (`tasks/retrieval`), measured on each distinct pre-training run:
  the runs given directly and the `upstream` pre-training runs of the fine-tuning folders. Retrieval needs no
  fine-tuning, so its spread comes only from several pre-training runs of one name.
The headline table has one row per run and one column per task average (and the two transfer gaps), with
XNLI's marking (`xnli.scores.MARK_RULE`: a two-sided Welch t-test over seeds or runs, p < 0.05, both with 2+). Below it, each task's per-language tables. report.md, report.html (PNGs inlined),
xtreme_summary.png and a per-language PNG per table, results.json.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from xlp_cli.artifacts.files import write_json_atomic, write_text_atomic
from xlp_cli.artifacts.manifest import read_manifest, try_read_manifest
from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.models import hf_folder
from xlp_cli.reporting.figures import pyplot, save_png
from xlp_cli.reporting.render import html_page, markdown_table
from xlp_cli.tasks.evaluate_configs import XtremeConfig  # noqa: F401 (the config: its home is evaluate_configs.py)
from xlp_cli.tasks.pos.scores import scores_of as pos_scores
from xlp_cli.tasks.retrieval.scores import measure_runs, table_rows as retrieval_rows, tables
from xlp_cli.tasks.xnli.report import plot_accuracy, table_rows
from xlp_cli.tasks.xnli.scores import MARK_RULE, collect, default_name, fmt_cell, score

NOTE = ("One row per run. XNLI and POS: test accuracy (%) averaged over the languages, and the transfer gap "
        "(English minus the other languages; lower is better), mean ± std over fine-tuning seeds. Retrieval: "
        "Tatoeba / PUD accuracy (%) averaged over the languages, no fine-tuning (a spread only from several "
        "pre-training runs of one name). " + MARK_RULE + ".")


@dataclasses.dataclass
class Inputs:
    xnli: tuple[list[Path], list[str]] = dataclasses.field(default_factory=lambda: ([], []))
    pos: tuple[list[Path], list[str]] = dataclasses.field(default_factory=lambda: ([], []))
    pretrain: dict[Path, str] = dataclasses.field(default_factory=dict)   # resolved run -> name (first seen)
    names: list[str] = dataclasses.field(default_factory=list)            # run names, first-seen order


def sort_inputs(data: list[Path], names: list[str]) -> Inputs:
    found = Inputs()
    for i, folder in enumerate(map(Path, data)):
        m = try_read_manifest(folder)
        hf = hf_folder.read_config(folder) if m is None or m.get("stage") == "export" else None
        m = {**(m or {}), "stage": "export", "encoding": hf_folder.encoding_of(hf)} if hf else read_manifest(folder)
        name = names[i] if names else default_name(m, folder)
        found.names.append(name)
        if m["stage"] in ("pretrain", "export"):  # retrieval reads pre-training runs and HF model folders
            found.pretrain.setdefault(folder.resolve(), name)
            continue
        task = (m.get("config") or {}).get("task", "xnli")
        if m["stage"] != "finetune" or task not in ("xnli", "pos"):
            raise BadInput(f"expected an `xlp finetune --task xnli|pos` folder, an `xlp pretrain` run or an HF model "
                           f"folder (`xlp export`), found "
                           f"`xlp {m['stage']}`" + (f" --task {task}" if m["stage"] == "finetune" else ""), path=folder)
        folders, run_names = getattr(found, task)
        folders.append(folder)
        run_names.append(name)
        for up in m.get("upstream") or []:
            if isinstance(up, dict) and up.get("stage") == "pretrain":
                found.pretrain.setdefault(Path(up["path"]).resolve(), name)
    found.names = list(dict.fromkeys(found.names))
    return found


def _scored(scores: dict[str, Any], baseline: str) -> dict[str, Any]:
    """A task's scores, marks cleared when the baseline run has no result in that task."""
    if baseline not in scores["runs"]:
        for r in scores["runs"].values():
            for mark in r["vs_baseline"].values():
                mark["marked"] = False
        scores["baseline_missing"] = True
    return scores


def compute(cfg: Any) -> dict[str, Any]:
    inputs = sort_inputs(cfg.data, cfg.name)
    base = cfg.baseline or inputs.names[0]
    if base not in inputs.names:
        raise BadInput(f"--baseline {base!r} is not one of the runs ({', '.join(inputs.names)})")
    langs = cfgmod.parse_langs(cfg.lang)
    out: dict[str, Any] = {"runs": inputs.names, "baseline": base, "tasks": {}}

    def pick(runs: list[str]) -> str:
        return base if base in runs else runs[0]

    if inputs.xnli[0]:
        runs = collect(*inputs.xnli, cfg.split)
        out["tasks"]["xnli"] = _scored(score(runs, langs or None, pick([r.name for r in runs])), base)
    if inputs.pos[0]:
        names = list(dict.fromkeys(inputs.pos[1]))
        out["tasks"]["pos"] = _scored(pos_scores(*inputs.pos, cfg.split, langs, pick(names)), base)
    if inputs.pretrain:
        found = measure_runs(cfg, list(inputs.pretrain), list(inputs.pretrain.values()))
        out["retrieval_runs"] = found
        for key, scores in tables(found, pick([f["name"] for f in found])).items():
            out["tasks"][f"retrieval {key}"] = _scored(scores, base)
    return out


def columns(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(header, task key, statistic) of the headline table."""
    cols = []
    for task, scores in result["tasks"].items():
        label = {"xnli": "XNLI", "pos": "POS"}.get(task, task.replace("retrieval ", "").replace("tatoeba", "Tatoeba")
                                                    .replace("pud", "PUD").replace("->", "→"))
        cols.append((f"{label} avg" if task in ("xnli", "pos") else label, task, "avg"))
        if task in ("xnli", "pos"):
            cols.append((f"{label} gap", task, "gap"))
    return cols


def headline(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    cols = columns(result)
    rows = []
    for name in result["runs"]:
        cells = [name + (" (baseline)" if name == result["baseline"] else "")]
        for _, task, stat in cols:
            r = result["tasks"][task]["runs"].get(name)
            cells.append(fmt_cell(r[stat], r["vs_baseline"][stat], lower_is_better=stat == "gap") if r else "-")
        rows.append(cells)
    return ["run"] + [c[0] for c in cols], rows


def plot_summary(result: dict[str, Any], path: Path) -> Path:
    cols = [c for c in columns(result) if c[2] == "avg"]
    names = result["runs"]
    fig, ax = pyplot().subplots(figsize=(max(6.0, 1.2 * len(cols) * max(1, len(names)) * 0.5 + 3), 4.0), dpi=110)
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        stats = [result["tasks"][t]["runs"].get(name, {}).get("avg", {"mean": math.nan, "std": 0.0, "n": 0})
                 for _, t, _ in cols]
        means = [0.0 if math.isnan(s["mean"]) else s["mean"] for s in stats]
        stds = [s["std"] if s["n"] >= 2 and not math.isnan(s["std"]) else 0.0 for s in stats]
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(cols))]
        ax.bar(xs, means, width, yerr=stds if any(stds) else None, capsize=2, label=name)
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels([c[0] for c in cols], fontsize=8)
    ax.set_ylabel("accuracy (%), average over languages")
    ax.set_title("XTREME-style comparison (mean ± std)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_png(fig, path)


def run(cfg: Any) -> dict[str, Any]:
    result = compute(cfg)
    if not result["tasks"]:
        raise BadInput("nothing to compare: no XNLI/POS predictions and no retrieval language")
    title = cfg.title or "XTREME-style comparison: " + " vs ".join(result["runs"])
    cfg.out.mkdir(parents=True, exist_ok=True)
    header, rows = headline(result)
    tabs = [("Summary", header, rows)]
    pngs = [("Summary", plot_summary(result, cfg.out / "xtreme_summary.png"))]
    for task, scores in result["tasks"].items():
        h, r = table_rows(scores) if task in ("xnli", "pos") else retrieval_rows(scores)
        tabs.append((f"{task} per language", h, r))
        slug = task.replace(" ", "_").replace("->", "2")
        pngs.append((f"{task} per language", plot_accuracy(scores, cfg.out / f"xtreme_{slug}.png", f"{task} per language",
                                                           chance=100 / 3 if task == "xnli" else None)))
    md = [f"# {title}", "", NOTE, ""]
    for heading, h, r in tabs:
        md += [f"## {heading}", "", markdown_table(h, r), ""]
    md += [f"![{c}]({p.name})" for c, p in pngs]
    write_text_atomic(cfg.out / "report.md", "\n".join(md) + "\n")
    write_text_atomic(cfg.out / "report.html", html_page(title, NOTE, tabs, [], pngs))
    write_json_atomic(cfg.out / "results.json", {"task": "xtreme", "split": cfg.split, **result,
                                                 "plots": [p.name for _, p in pngs]})
    return {"task": "xtreme", "out": str(cfg.out), "title": title, "result": result, "headline": [header, rows],
            "report_md": str(cfg.out / "report.md"), "report_html": str(cfg.out / "report.html"),
            "results": str(cfg.out / "results.json"), "plots": [str(p) for _, p in pngs]}


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    header, rows = summary["headline"]
    t = Table(title=summary["title"])  # transposed: a row per metric, a column per run
    t.add_column("metric")
    for r in rows:
        t.add_column(r[0], justify="right")
    for i, h in enumerate(header[1:], 1):
        t.add_row(h, *[r[i] for r in rows])
    ui.out.print(t)
    ui.out.print(NOTE, style="dim", soft_wrap=True)
    ui.out.print(f"report: {summary['report_html']}  ({summary['report_md']}, {summary['results']})")
