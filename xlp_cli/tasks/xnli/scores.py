"""XNLI scoring: accuracy per language (Table 1 layout), transfer gap (Table 3), mean +- std over seeds.

Input: `xlp finetune --task xnli` folders. Accuracy is recomputed from the prediction files
(`FT/predictions/seed<S>/<split>.<lang>.jsonl`, one {"id", "lang", "gold", "pred"} object per line),
never copied from the fine-tuning summary, so a hand-made predictions file gives known numbers.

Several folders may share a run name (`--name`): their seeds are pooled. A difference to the baseline
run is marked (`MARK_RULE`) only when both runs have at least two seeds and a two-sided Welch t-test over
the seeds gives p < 0.05 (`reporting/stats.welch_two_sided`); the same test and level for every table of
xnli, pos, retrieval and xtreme. A mark is a per-cell screen, uncorrected for the many cells of a table:
the verdict on a paper's claim is `xlp evaluate --task claims` (paired by pre-training seed, Holm-corrected).

Honesty: each number says how many rows it was computed on (`rows`; `eval_caps`: a fine-tuning run's
--max-eval-rows), and a score inside the 95% binomial interval of chance (1/3, for its rows) is "at chance":
when that holds for at least half of a run's languages, the report calls the comparison toy-scale.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from xlp_cli.artifacts.manifest import read_manifest
from xlp_cli.core import textfile
from xlp_cli.core.errors import BadInput
from xlp_cli.reporting.render import order_langs
from xlp_cli.reporting.stats import welch_two_sided

LABELS = ["contradiction", "neutral", "entailment"]  # XLM's label ids 0, 1, 2
MARK_ALPHA = 0.05
MARK_RULE = ("▲ marks a result better than the baseline's, ▼ a worse one, only where a two-sided Welch t-test over "
             "seeds gives p < 0.05 (both runs with at least 2 seeds; uncorrected for the number of cells: a screen, "
             "not a verdict; the verdicts on the papers' claims come from `xlp evaluate --task claims`, paired by "
             "pre-training seed and Holm-corrected)")

_PRED_RE = re.compile(r"^(?P<split>[a-z]+)\.(?P<lang>[A-Za-z_-]+)\.jsonl$")


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    if not values:
        return math.nan, math.nan
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, 0.0
    var = sum((v - m) ** 2 for v in values) / (len(values) - 1)
    return m, math.sqrt(var)


def prediction_rows(path: Path, check: Any = None) -> Iterator[tuple[Any, Any]]:
    """(gold, pred) of every line of a predictions file (JSON objects with "gold" and "pred"); `check(gold, pred)`
    may raise TypeError for a task's own shape. A bad line is a one-line BadInput naming file and line."""
    for n, line in textfile.text_lines(path):
        if not line.strip():
            continue
        try:
            row = textfile.json_value(line, path, n)
            gold, pred = row["gold"], row["pred"]
            if check is not None:
                check(gold, pred)
        except (json.JSONDecodeError, KeyError, TypeError, IndexError) as e:
            raise BadInput(f"not a prediction line ({type(e).__name__}: {e}); expected JSON with 'gold' and 'pred'",
                           path=path, position=n) from None
        yield gold, pred


def accuracy_of_file(path: Path) -> tuple[float, int]:
    """(accuracy in %, rows) of one predictions file."""
    correct = total = 0
    for gold, pred in prediction_rows(path):
        total += 1
        correct += int(gold == pred)
    if total == 0:
        raise BadInput("predictions file is empty", path=path)
    return 100.0 * correct / total, total


def at_chance(accuracy: float, rows: int) -> bool:
    """Whether an accuracy (%) on `rows` three-way examples is within the 95% binomial interval of 1/3."""
    if rows <= 0 or math.isnan(accuracy):
        return False
    p = 1 / 3
    return abs(accuracy / 100 - p) <= 1.96 * math.sqrt(p * (1 - p) / rows)


@dataclass
class RunScores:
    """Accuracy per seed and language for one named run (possibly pooled from several folders)."""

    name: str
    folders: list[Path] = field(default_factory=list)
    acc: dict[str, dict[str, float]] = field(default_factory=dict)    # seed key -> lang -> acc
    rows: dict[str, dict[str, int]] = field(default_factory=dict)
    encoding: str = ""
    pretrain_runs: list[Path] = field(default_factory=list)
    eval_caps: list[int] = field(default_factory=list)   # --max-eval-rows of each folder (0: all rows)

    def langs(self) -> set[str]:
        return {l for per in self.acc.values() for l in per}


def read_finetune_folder(folder: Path, split: str, task: str = "xnli", accuracy: Any = accuracy_of_file
                         ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, int]], dict[str, Any]]:
    """Accuracy per seed and language from one finetune folder's prediction files (`accuracy(path)` ->
    (%, rows) reads one file; POS passes its word-level reader)."""
    manifest = read_manifest(folder, stage="finetune")
    if manifest.get("config", {}).get("task", "xnli") != task:
        raise BadInput(f"not an {task} fine-tuning run (task {manifest['config'].get('task')!r})", path=folder)
    pred_root = folder / "predictions"
    acc: dict[str, dict[str, float]] = {}
    rows: dict[str, dict[str, int]] = {}
    seed_dirs = sorted(p for p in pred_root.glob("seed*") if p.is_dir()) if pred_root.is_dir() else []
    for sd in seed_dirs:
        for p in sorted(sd.glob("*.jsonl")):
            m = _PRED_RE.match(p.name)
            if not m or m["split"] != split:
                continue
            a, n = accuracy(p)
            key = f"{folder.name}/{sd.name}"
            acc.setdefault(key, {})[m["lang"]] = a
            rows.setdefault(key, {})[m["lang"]] = n
    if not acc:
        raise BadInput(f"no {split} predictions (predictions/seed*/{split}.<lang>.jsonl)", path=folder)
    return acc, rows, manifest


def default_name(manifest: dict[str, Any], folder: Path) -> str:
    enc = manifest.get("encoding") or manifest.get("config", {}).get("lang-encoding")
    return str(enc) if enc else folder.name


def collect(data: list[Path], names: list[str], split: str, task: str = "xnli",
            accuracy: Any = accuracy_of_file) -> list[RunScores]:
    """Read every folder; group folders by name (in first-seen order)."""
    runs: dict[str, RunScores] = {}
    auto: list[tuple[str, Path]] = []
    for i, folder in enumerate(data):
        folder = Path(folder)
        acc, rows, manifest = read_finetune_folder(folder, split, task, accuracy)
        name = names[i] if names else default_name(manifest, folder)
        if not names:
            auto.append((name, folder))
        run = runs.setdefault(name, RunScores(name=name))
        run.folders.append(folder)
        run.encoding = run.encoding or str(manifest.get("encoding", ""))
        run.eval_caps.append(int(manifest.get("config", {}).get("max-eval-rows") or 0))
        for up in manifest.get("upstream", []) or []:
            if isinstance(up, dict) and up.get("stage") == "pretrain":
                run.pretrain_runs.append(Path(up["path"]))
        for key, per in acc.items():
            if key in run.acc:  # the same folder given twice
                raise BadInput(f"folder given twice for run {name!r}", path=folder)
            run.acc[key] = per
            run.rows[key] = rows[key]
    return list(runs.values())


def score(runs: list[RunScores], langs: list[str] | None = None, baseline: str = "") -> dict[str, Any]:
    """The numbers of Table 1 and Table 3 for each run, and the marked differences to the baseline."""
    if not runs:
        raise BadInput("no runs to score")
    all_langs = set().union(*(r.langs() for r in runs))
    if langs:
        missing = [l for l in langs if l not in all_langs]
        if missing:
            raise BadInput(f"no predictions for language(s) {', '.join(missing)}")
        table_langs = order_langs(langs)
    else:
        table_langs = order_langs(all_langs)
    base_name = baseline or runs[0].name
    if base_name not in {r.name for r in runs}:
        raise BadInput(f"--baseline {base_name!r} is not one of the runs ({', '.join(r.name for r in runs)})")

    out: dict[str, Any] = {"langs": table_langs, "baseline": base_name, "runs": {}}
    for r in runs:
        per_lang: dict[str, dict[str, Any]] = {}
        for lang in table_langs:
            vals = [per[lang] for per in r.acc.values() if lang in per]
            m, s = mean_std(vals)
            per_lang[lang] = {"mean": m, "std": s, "n": len(vals), "seeds": vals}
        # average and transfer gap per seed (only over languages that seed has), then across seeds
        avgs, gaps = [], []
        for per in r.acc.values():
            present = [l for l in table_langs if l in per]
            if present:
                avgs.append(sum(per[l] for l in present) / len(present))
            others = [l for l in present if l != "en"]
            if "en" in per and others:
                gaps.append(per["en"] - sum(per[l] for l in others) / len(others))
        am, asd = mean_std(avgs)
        gm, gsd = mean_std(gaps)
        out["runs"][r.name] = {
            "folders": [str(f) for f in r.folders],
            "pretrain_runs": [str(p) for p in dict.fromkeys(r.pretrain_runs)],
            "encoding": r.encoding,
            "n_seeds": len(r.acc),
            "acc": per_lang,
            "avg": {"mean": am, "std": asd, "n": len(avgs), "seeds": avgs},
            "gap": {"mean": gm, "std": gsd, "n": len(gaps), "seeds": gaps},
            "rows": {l: max((rw.get(l, 0) for rw in r.rows.values()), default=0) for l in table_langs},
            "eval_cap": max(r.eval_caps, default=0),
        }
        row = out["runs"][r.name]
        row["at_chance"] = [l for l in table_langs if row["acc"][l]["n"] and at_chance(row["acc"][l]["mean"], row["rows"][l])]
    out["toy_scale"] = [name for name, row in out["runs"].items() if len(row["at_chance"]) * 2 >= len(table_langs)]

    base = out["runs"][base_name]
    for name, r in out["runs"].items():
        diffs: dict[str, Any] = {}
        for key in table_langs + ["avg", "gap"]:
            a = r["acc"][key] if key in table_langs else r[key]
            b = base["acc"][key] if key in table_langs else base[key]
            d = a["mean"] - b["mean"]
            p = (welch_two_sided((a["mean"], a["std"], a["n"]), (b["mean"], b["std"], b["n"]))
                 if name != base_name else math.nan)
            marked = not math.isnan(d) and not math.isnan(p) and p < MARK_ALPHA
            diffs[key] = {"diff": d, "p": p, "marked": marked}
        r["vs_baseline"] = diffs
    return out


def fmt_cell(stat: dict[str, Any], mark: dict[str, Any] | None = None, *, lower_is_better: bool = False) -> str:
    """'72.7 ± 0.3' (+ an arrow where the difference to the baseline is marked: `MARK_RULE`)."""
    m, s, n = stat["mean"], stat["std"], stat["n"]
    if n == 0 or math.isnan(m):
        return "-"
    text = f"{m:.1f}" + (f" ± {s:.1f}" if n >= 2 else "")
    if mark and mark.get("marked"):
        better = (mark["diff"] < 0) if lower_is_better else (mark["diff"] > 0)
        text += " ▲" if better else " ▼"  # ▲ better than the baseline, ▼ worse (the gap: smaller is better)
    return text


def rows_note(scores: dict[str, Any], split: str) -> str:
    """How many rows each number is computed on, and whether that is the whole split."""
    counts = sorted({n for r in scores["runs"].values() for n in r["rows"].values() if n})
    if not counts:
        return ""
    n = f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,} to {counts[-1]:,}"
    caps = sorted({r["eval_cap"] for r in scores["runs"].values() if r.get("eval_cap")})
    text = f"Each accuracy is computed on {n} {split} rows per language and seed"
    if caps:
        text += (f": the first rows only, capped by --max-eval-rows {', '.join(map(str, caps))} at fine-tuning, not the "
                 f"whole {split} file (XNLI has 5,010 test and 2,490 dev rows per language; the default 0 scores all)")
    return text + "."


def toy_note(scores: dict[str, Any]) -> str:
    """A warning line when most scores of a run are at chance (empty otherwise)."""
    runs = scores.get("toy_scale") or []
    if not runs:
        return ""
    parts = [f"{name}: {len(scores['runs'][name]['at_chance'])} of {len(scores['langs'])} languages" for name in runs]
    return ("TOY SCALE: most scores are at chance level (33.3%, within the 95% binomial interval for their rows) ("
            + "; ".join(parts) + "). These numbers show that the pipeline runs, not which encoding is better; "
            "train longer and on more data (docs/recipes.md) for a real comparison.")
