"""`xlp evaluate --task xtreme`: XTREME's tasks of several runs side by side, in one report.

    xlp evaluate --task xtreme --data FT_XNLI_A --data FT_POS_A --data FT_XNLI_B --data FT_POS_B [--data RUN_C]

Each --data is an `xlp finetune` folder (task xnli, pawsx, pos, ner or qa), an `xlp pretrain` run, or an HF model
folder (`xlp export --format hf`; retrieval and BUCC only). Folders are grouped into runs by name (`--name`, one
per --data; default: the language encoding, as in `--task xnli`). Per run:
- XNLI, PAWS-X (accuracy), POS (word accuracy), NER (entity F1) and QA (F1 and exact match per set: xquad,
  mlqa, tydiqa): the score per language, the average and the transfer gap, recomputed from each folder's
  prediction files by the task's own scorer (`tasks/<task>/scores.py`), mean ± std over the fine-tuning seeds
  (and pooled folders);
- retrieval: Tatoeba and PUD xx->en / en->xx (`tasks/retrieval`), and BUCC mining F1 (`tasks/bucc`, where a
  BUCC set of a run's language is found), measured on each distinct pre-training run: the runs given directly
  and the `upstream` pre-training runs of the fine-tuning folders. They need no fine-tuning, so their spread
  comes only from several pre-training runs of one name.
- the XTREME average (`xtreme_average`): the mean of the run's task averages over XTREME's tasks in the report
  (`XTREME_TASKS`: XNLI, PAWS-X, POS, NER, the QA sets' F1, BUCC, Tatoeba xx->en; not PUD, not the gaps, not EM),
  "-" for a run missing one of them. Its spread: the average of seed i takes each task's seed i (a task with
  fewer values, such as retrieval, contributes its mean), so it varies with the fine-tuning seeds.
The headline table has one row per run and one column per task average (and the transfer gaps), then the XTREME
average, with XNLI's marking (`xnli.scores.MARK_RULE`: a two-sided Welch t-test over seeds or runs, p < 0.05,
both with 2+). Below it, each task's per-language tables. report.md, report.html (PNGs inlined),
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
from xlp_cli.reporting.stats import welch_two_sided
from xlp_cli.tasks.bucc import scores as bucc
from xlp_cli.tasks.evaluate_configs import XtremeConfig  # noqa: F401 (the config: its home is evaluate_configs.py)
from xlp_cli.tasks.ner.scores import scores_of as ner_scores
from xlp_cli.tasks.pawsx.scores import scores_of as pawsx_scores
from xlp_cli.tasks.pos.scores import scores_of as pos_scores
from xlp_cli.tasks.qa.scores import scores_of as qa_scores
from xlp_cli.tasks.retrieval.scores import measure_runs, table_rows as retrieval_rows, tables
from xlp_cli.tasks.xnli.report import plot_accuracy, table_rows
from xlp_cli.tasks.xnli.scores import MARK_ALPHA, MARK_RULE, collect, default_name, fmt_cell, mean_std, score

FINETUNED = ("xnli", "pawsx", "pos", "ner", "qa")      # the fine-tuning tasks the report reads, in column order
LABELS = {"xnli": "XNLI", "pawsx": "PAWS-X", "pos": "POS", "ner": "NER", "bucc": "BUCC"}
QA_LABELS = {"xquad": "XQuAD", "mlqa": "MLQA", "tydiqa": "TyDiQA"}
# the report's tasks that enter the XTREME average (XTREME's nine: QA by F1, Tatoeba xx->en)
XTREME_TASKS = ("xnli", "pawsx", "pos", "ner", "qa xquad f1", "qa mlqa f1", "qa tydiqa f1", "bucc",
                "retrieval tatoeba xx->en")
NOTE = ("One row per run. XNLI, PAWS-X, POS (accuracy, %), NER (entity F1) and QA (F1 / EM per set): test scores "
        "averaged over the languages, and the transfer gap (English minus the other languages; lower is better), "
        "mean ± std over fine-tuning seeds. Retrieval (Tatoeba / PUD accuracy) and BUCC (mining F1): averaged over "
        "the languages, no fine-tuning (a spread only from several pre-training runs of one name). XTREME avg: the "
        "mean of the XTREME tasks' averages in this report (XNLI, PAWS-X, POS, NER, QA F1, BUCC, Tatoeba xx→en; "
        "not PUD, gaps or EM), '-' for a run missing one; seed i's value takes each task's seed i (or its mean when "
        "it has fewer). " + MARK_RULE + ".")


@dataclasses.dataclass
class Inputs:
    finetune: dict[str, tuple[list[Path], list[str]]] = dataclasses.field(
        default_factory=lambda: {t: ([], []) for t in FINETUNED})            # task -> (folders, names)
    pretrain: dict[Path, str] = dataclasses.field(default_factory=dict)   # resolved run -> name (first seen)
    names: list[str] = dataclasses.field(default_factory=list)            # run names, first-seen order

    @property
    def xnli(self) -> tuple[list[Path], list[str]]:
        return self.finetune["xnli"]

    @property
    def pos(self) -> tuple[list[Path], list[str]]:
        return self.finetune["pos"]


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
        if m["stage"] != "finetune" or task not in FINETUNED:
            raise BadInput(f"expected an `xlp finetune --task {'|'.join(FINETUNED)}` folder, an `xlp pretrain` run or "
                           f"an HF model folder (`xlp export`), found "
                           f"`xlp {m['stage']}`" + (f" --task {task}" if m["stage"] == "finetune" else ""), path=folder)
        folders, run_names = found.finetune[task]
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

    scorers = {"xnli": lambda d, n, b: score(collect(d, n, cfg.split), langs or None, b),
               "pawsx": lambda d, n, b: pawsx_scores(d, n, cfg.split, langs, b),
               "pos": lambda d, n, b: pos_scores(d, n, cfg.split, langs, b),
               "ner": lambda d, n, b: ner_scores(d, n, cfg.split, langs, b)}
    for task in FINETUNED:
        folders, run_names = inputs.finetune[task]
        if not folders:
            continue
        names = list(dict.fromkeys(run_names))
        if task != "qa":
            out["tasks"][task] = _scored(scorers[task](folders, run_names, pick(names)), base)
            continue
        for qa_set in qa_sets(folders, cfg.split):  # QA: one column per test set (F1; EM in its own table)
            for metric in ("f1", "em"):
                out["tasks"][f"qa {qa_set} {metric}"] = _scored(
                    qa_scores(folders, run_names, qa_set, langs, pick(names), metric), base)
    if inputs.pretrain:
        found = measure_runs(cfg, list(inputs.pretrain), list(inputs.pretrain.values()))
        out["retrieval_runs"] = found
        for key, scores in tables(found, pick([f["name"] for f in found])).items():
            out["tasks"][f"retrieval {key}"] = _scored(scores, base)
        if bucc.folder_of(cfg).is_dir():
            mined = bucc.measure_runs(cfg, list(inputs.pretrain), list(inputs.pretrain.values()))
            table = bucc.table(mined, pick([f["name"] for f in mined]))
            if table is not None:
                out["bucc_runs"] = mined
                out["tasks"]["bucc"] = _scored(table, base)
    out["xtreme_average"] = xtreme_average(out)
    return out


def qa_sets(folders: list[Path], split: str) -> list[str]:
    """The QA test sets with predictions in every one of the folders (`<set>.<lang>.jsonl`; `--split dev`: the
    selection questions, `dev`)."""
    if split == "dev":
        return ["dev"]
    found = None
    for f in folders:
        here = {p.name.split(".", 1)[0] for p in Path(f).glob("predictions/seed*/*.jsonl")} - {"dev"}
        found = here if found is None else found & here
    return [s for s in QA_LABELS if s in (found or set())] + sorted((found or set()) - set(QA_LABELS))


def xtreme_average(result: dict[str, Any]) -> dict[str, Any]:
    """{"tasks": the averaged tasks, "runs": {name: {"avg": stat, "vs_baseline": {"avg": mark}}}}."""
    keys = [t for t in result["tasks"] if t in XTREME_TASKS or (t.startswith("qa ") and t.endswith(" f1")
                                                               and t != "qa dev f1")]
    runs: dict[str, Any] = {}
    for name in result["runs"]:
        stats = [result["tasks"][t]["runs"].get(name, {}).get("avg") for t in keys]
        if not keys or any(s is None or s["n"] == 0 or math.isnan(s["mean"]) for s in stats):
            runs[name] = {"avg": {"mean": math.nan, "std": math.nan, "n": 0, "seeds": []}}
            continue
        n = max(s["n"] for s in stats)
        seeds = [sum(s["seeds"][i] if i < len(s["seeds"]) else s["mean"] for s in stats) / len(stats) for i in range(n)]
        m, sd = mean_std(seeds)
        runs[name] = {"avg": {"mean": sum(s["mean"] for s in stats) / len(stats), "std": sd, "n": n, "seeds": seeds}}
    base = runs.get(result["baseline"], {}).get("avg")
    for name, r in runs.items():
        a = r["avg"]
        d = a["mean"] - base["mean"] if base else math.nan
        p = (welch_two_sided((a["mean"], a["std"], a["n"]), (base["mean"], base["std"], base["n"]))
             if base and name != result["baseline"] else math.nan)
        r["vs_baseline"] = {"avg": {"diff": d, "p": p, "marked": not math.isnan(d) and not math.isnan(p) and p < MARK_ALPHA}}
    return {"tasks": keys, "runs": runs}


def has_gap(task: str) -> bool:
    return task in LABELS and task != "bucc" or task.startswith("qa ")


def label(task: str) -> str:
    if task.startswith("qa "):
        _, qa_set, metric = task.split(" ")
        return f"{QA_LABELS.get(qa_set, qa_set)} {metric.upper()}"
    return LABELS.get(task) or (task.replace("retrieval ", "").replace("tatoeba", "Tatoeba").replace("pud", "PUD")
                                .replace("->", "→"))


def columns(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(header, task key, statistic) of the headline table (the XTREME average last: task key "xtreme")."""
    cols = []
    for task in result["tasks"]:
        if task.startswith("qa ") and task.endswith(" em"):  # QA's exact match: in its per-language table only
            continue
        cols.append((f"{label(task)} avg" if has_gap(task) else label(task), task, "avg"))
        if has_gap(task):
            cols.append((f"{label(task)} gap", task, "gap"))
    if result.get("xtreme_average", {}).get("tasks"):
        cols.append(("XTREME avg", "xtreme", "avg"))
    return cols


def _cell_source(result: dict[str, Any], task: str) -> dict[str, Any]:
    return result["xtreme_average"] if task == "xtreme" else result["tasks"][task]


def headline(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    cols = columns(result)
    rows = []
    for name in result["runs"]:
        cells = [name + (" (baseline)" if name == result["baseline"] else "")]
        for _, task, stat in cols:
            r = _cell_source(result, task)["runs"].get(name)
            cells.append(fmt_cell(r[stat], r["vs_baseline"][stat], lower_is_better=stat == "gap") if r else "-")
        rows.append(cells)
    return ["run"] + [c[0] for c in cols], rows


def plot_summary(result: dict[str, Any], path: Path) -> Path:
    cols = [c for c in columns(result) if c[2] == "avg"]
    names = result["runs"]
    fig, ax = pyplot().subplots(figsize=(max(6.0, 1.2 * len(cols) * max(1, len(names)) * 0.5 + 3), 4.0), dpi=110)
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        stats = [_cell_source(result, t)["runs"].get(name, {}).get("avg", {"mean": math.nan, "std": 0.0, "n": 0})
                 for _, t, _ in cols]
        means = [0.0 if math.isnan(s["mean"]) else s["mean"] for s in stats]
        stds = [s["std"] if s["n"] >= 2 and not math.isnan(s["std"]) else 0.0 for s in stats]
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(cols))]
        ax.bar(xs, means, width, yerr=stds if any(stds) else None, capsize=2, label=name)
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels([c[0] for c in cols], fontsize=8)
    ax.set_ylabel("score (%), average over languages")
    ax.set_title("XTREME-style comparison (mean ± std)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_png(fig, path)


def run(cfg: Any) -> dict[str, Any]:
    result = compute(cfg)
    if not result["tasks"]:
        raise BadInput("nothing to compare: no XNLI/PAWS-X/POS/NER/QA predictions and no retrieval or BUCC language")
    title = cfg.title or "XTREME-style comparison: " + " vs ".join(result["runs"])
    cfg.out.mkdir(parents=True, exist_ok=True)
    header, rows = headline(result)
    tabs = [("Summary", header, rows)]
    pngs = [("Summary", plot_summary(result, cfg.out / "xtreme_summary.png"))]
    for task, scores in result["tasks"].items():
        h, r = table_rows(scores) if has_gap(task) else retrieval_rows(scores)
        tabs.append((f"{task} per language", h, r))
        slug = task.replace(" ", "_").replace("->", "2")
        chance = {"xnli": 100 / 3, "pawsx": 50.0}.get(task)
        pngs.append((f"{task} per language", plot_accuracy(scores, cfg.out / f"xtreme_{slug}.png", f"{task} per language",
                                                           chance=chance, ylabel="score (%)")))
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
    ui.report_paths(summary)
