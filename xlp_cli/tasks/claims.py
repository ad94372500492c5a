"""`xlp evaluate --task claims`: does a set of runs show the effects the XLP and VLE papers claim?

Input: XNLI fine-tuning folders (`--data`, one per pre-training run); runs sharing a `--name` (default: the
encoding) are seeds of one configuration. Each folder leads (manifest `upstream`) to its pre-training run, whose
`seed` pairs it with the runs of the other configurations. For every run this task measures
    valid_loss   mean validation MLM loss over languages at the last evaluation step all runs reached (Fig. 3a)
    xnli_avg     XNLI test accuracy averaged over languages (XLP Table 1)
    xnli_gap     English minus the mean of the other languages (XLP Table 3)
    dict_cos     mean cosine of Wiktionary test-dictionary pairs, raw embeddings (VLE Table 2)
    lang_sim     mean off-diagonal cosine of a word encoded in every language (XLP Fig. 4: lower = more diverse)
    topic_sep    within-topic minus across-topic cosine of topic words (XLP Fig. 5: higher = better grouped)
and tests each claim with a one-sided paired t-test over seeds (pairs: equal pre-training seed):
    "reproduced in direction"        mean difference in the claimed direction, p < alpha
    "not reproduced"                 mean difference against the claim, p < alpha in that direction
    "inconclusive at this scale"     anything else (too few seeds, spread larger than the difference)
"""

from __future__ import annotations

import json
import math
import platform
from pathlib import Path
from typing import Any

import numpy as np

from xlp_cli.artifacts.files import data_dir, write_json_atomic, write_text_atomic
from xlp_cli.artifacts.manifest import read_manifest
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput
from xlp_cli.reporting.embeddings import load_run
from xlp_cli.reporting.figures import pyplot, save_png
from xlp_cli.reporting.render import html_page, markdown_table
from xlp_cli.tasks.analysis import fig4, fig5
from xlp_cli.tasks.evaluate_configs import ClaimsConfig  # noqa: F401 (the config: its home is evaluate_configs.py)
from xlp_cli.tasks.lexicon import read_dictionary, score_pairs
from xlp_cli.tasks.xnli import scores as xnli
from xlp_cli.tasks.xnli.report import read_valid_curve

# (claim, paper, metric, configuration, baseline, +1: the configuration's value is claimed higher / -1 lower)
CLAIMS = [
    ("XLP lowers the validation MLM loss", "XLP Fig. 3a", "valid_loss", "xlp", "additive", -1),
    ("XLP improves XNLI transfer accuracy", "XLP Table 1", "xnli_avg", "xlp", "additive", +1),
    ("XLP narrows the cross-lingual transfer gap", "XLP Table 3", "xnli_gap", "xlp", "additive", -1),
    ("XLP encodes one word differently per language", "XLP Fig. 4", "lang_sim", "xlp", "additive", -1),
    ("XLP groups topic words better", "XLP Fig. 5", "topic_sep", "xlp", "additive", +1),
    ("VLE aligns dictionary pairs better", "VLE Table 2", "dict_cos", "vle", "additive", +1),
    ("VLE improves XNLI transfer accuracy", "VLE (XNLI, not in the paper's tables)", "xnli_avg", "vle", "additive", +1),
]


# ---------------------------------------------------------------- statistics
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((qam + 2 * m) * (a + 2 * m)), -(a + m) * (qab + m) * x / ((a + 2 * m) * (qap + 2 * m))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def t_sf(t: float, df: int) -> float:
    """P(T > t) for Student's t with df degrees of freedom (via the regularised incomplete beta function)."""
    if t == 0:
        return 0.5
    x = df / (df + t * t)
    a, b = df / 2.0, 0.5
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    ibeta = front * _betacf(a, b, x) / a if x < (a + 1) / (a + b + 2) else 1.0 - front * _betacf(b, a, 1 - x) / b
    return ibeta / 2.0 if t > 0 else 1.0 - ibeta / 2.0


def paired_test(diffs: list[float], sign: int, alpha: float) -> dict[str, Any]:
    """One-sided paired t-test of `sign * diffs > 0`, and the verdict."""
    d = np.asarray(diffs, dtype=float) * sign
    n = len(d)
    out: dict[str, Any] = {"n": n, "mean_diff": float(np.mean(diffs)) if n else math.nan}
    if n < 2 or float(np.std(d, ddof=1)) == 0.0:
        out.update(t=math.nan, p=math.nan, verdict="inconclusive at this scale")
        return out
    t = float(d.mean() / (d.std(ddof=1) / math.sqrt(n)))
    p_for, p_against = t_sf(t, n - 1), t_sf(-t, n - 1)
    verdict = ("reproduced in direction" if p_for < alpha else "not reproduced" if p_against < alpha
               else "inconclusive at this scale")
    out.update(t=t, p=p_for, verdict=verdict)
    return out


# ---------------------------------------------------------------- measuring one run
def _valid_losses(run: Path) -> dict[int, float]:
    return dict(read_valid_curve(run))


def measure(cfg: ClaimsConfig, ft: Path, pre: Path, dict_dir: Path, out: Path, label: str) -> dict[str, Any]:
    acc, _, _ = xnli.read_finetune_folder(ft, "test")
    per_lang = next(iter(acc.values()))  # one fine-tuning seed per pre-training run in a study
    others = [v for l, v in per_lang.items() if l != "en"]
    m: dict[str, Any] = {"xnli_avg": float(np.mean(list(per_lang.values()))), "xnli": per_lang}
    if "en" in per_lang and others:
        m["xnli_gap"] = per_lang["en"] - float(np.mean(others))

    loaded = load_run(pre, label, cfg.which)
    cos = []
    for lang in [l for l in loaded.langs if l != "en"]:
        path = dict_dir / f"{lang}-en.{cfg.dict_split}"
        if path.is_file():
            r = score_pairs(loaded, lang, read_dictionary(path, cfg.max_pairs).pairs, "raw")
            if not math.isnan(r["mean_cos"]):
                cos.append(r["mean_cos"])
    if cos:
        m["dict_cos"] = float(np.mean(cos))
    f4 = fig4(loaded, cfg.words, out)
    if "mean_offdiag" in f4:
        m["lang_sim"] = f4["mean_offdiag"]
    f5 = fig5(loaded, cfg.topic_words, out)
    if "within_topic" in f5:
        m["topic_sep"] = f5["within_topic"] - f5["across_topic"]
    return m


def run(cfg: ClaimsConfig) -> dict[str, Any]:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    dict_dir = Path(cfg.dict_dir) if cfg.dict_dir else data_dir() / "bilingual_dict_wiktionary"
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    info: dict[str, dict[str, Any]] = {}
    curves: dict[tuple[str, int], dict[int, float]] = {}
    for i, ft in enumerate(cfg.data):
        ft = Path(ft)
        manifest = read_manifest(ft, stage="finetune")
        pre = next((Path(u["path"]) for u in manifest.get("upstream", []) if isinstance(u, dict)
                    and u.get("stage") == "pretrain"), None)
        if pre is None:
            raise BadInput("not an XNLI fine-tuning of an `xlp pretrain` run (no pretrain upstream)", path=ft)
        pm = read_manifest(pre, stage="pretrain")
        name = cfg.name[i] if cfg.name else xnli.default_name(manifest, ft)
        seed = pm["config"].get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise BadInput(f"the pre-training config's seed is {seed!r}, not an integer", path=pre / MANIFEST)
        if seed in runs.get(name, {}):
            raise BadInput(f"two runs of {name!r} have pre-training seed {seed}; give each its own seed", path=ft)
        ui.info(f"claims: measuring {name} seed {seed} ({pre})")
        runs.setdefault(name, {})[seed] = measure(cfg, ft, pre, dict_dir, out, f"{name}-s{seed}")
        curves[(name, seed)] = _valid_losses(pre)
        info.setdefault(name, {"pretrain": pm["config"], "finetune": manifest.get("config"), "folders": []})
        info[name]["folders"].append(str(ft))
    common = set.intersection(*(set(c) for c in curves.values())) if curves else set()
    step = max(common) if common else None
    for (name, seed), c in curves.items():
        if step is not None:
            runs[name][seed]["valid_loss"] = c[step]
    claims = []
    for text, paper, metric, a, b, sign in CLAIMS:
        if a not in runs or b not in runs:
            continue
        seeds = sorted(s for s in set(runs[a]) & set(runs[b]) if metric in runs[a][s] and metric in runs[b][s])
        diffs = [runs[a][s][metric] - runs[b][s][metric] for s in seeds]
        test = paired_test(diffs, sign, cfg.alpha)
        claims.append({"claim": text, "paper": paper, "metric": metric, "run": a, "baseline": b, "seeds": seeds,
                       "claimed": "higher" if sign > 0 else "lower",
                       "run_values": [runs[a][s][metric] for s in seeds],
                       "baseline_values": [runs[b][s][metric] for s in seeds], **test})
    results = {"task": "claims", "runs": {n: {str(s): v for s, v in r.items()} for n, r in runs.items()},
               "claims": claims, "valid_loss_step": step, "alpha": cfg.alpha, "config": info,
               "machine": {"platform": platform.platform(), "processor": platform.processor(),
                           "cpus": __import__("os").cpu_count()}}
    plots = [_plot(curves, out / "claims_valid_loss.png")]
    write_json_atomic(out / "results.json", results)
    _write_report(cfg, out, results, plots)
    return {"task": "claims", "out": str(out), "claims": claims, "results": str(out / "results.json"),
            "report_md": str(out / "report.md"), "report_html": str(out / "report.html"), "plots": [str(p) for p in plots]}


def _fmt(values: list[float]) -> str:
    if not values:
        return "-"
    m, s = xnli.mean_std(list(values))
    return f"{m:.4g} ± {s:.2g}" if len(values) > 1 else f"{m:.4g}"


def _plot(curves: dict[tuple[str, int], dict[int, float]], path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=110)
    for (name, seed), c in sorted(curves.items()):
        steps = sorted(c)
        ax.plot(steps, [c[s] for s in steps], label=f"{name} s{seed}", alpha=0.8)
    ax.set_xlabel("pre-training step")
    ax.set_ylabel("validation MLM loss (mean over languages)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    return save_png(fig, path)


def _write_report(cfg: ClaimsConfig, out: Path, results: dict[str, Any], plots: list[Path]) -> None:
    header = ["claim", "paper", "metric", "run", "baseline", "claimed", "seeds", "mean Δ", "p", "verdict"]
    rows = [[c["claim"], c["paper"], c["metric"], _fmt(c["run_values"]), _fmt(c["baseline_values"]), c["claimed"],
             ",".join(map(str, c["seeds"])), f"{c['mean_diff']:+.4g}", "-" if math.isnan(c["p"]) else f"{c['p']:.3f}",
             c["verdict"]] for c in results["claims"]]
    title = cfg.title or "Do these runs show the papers' claims?"
    intro = (f"One-sided paired t-test over pre-training seeds (alpha {cfg.alpha}); validation loss at step "
             f"{results['valid_loss_step']}, the last evaluation every run reached. Cells: mean ± std over seeds.")
    md = [f"# {title}", "", intro, "", markdown_table(header, rows), "", "## Runs and hyper-parameters", ""]
    for name, i in results["config"].items():
        md += [f"### {name}", "", "```json", json.dumps({"pretrain": i["pretrain"], "finetune": i["finetune"]},
                                                          indent=1, default=str), "```", ""]
    md += [f"Machine: {results['machine']}", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    write_text_atomic(out / "report.md", "\n".join(md) + "\n")
    page = html_page(title, intro, [("", header, rows)], [("Machine", [str(results["machine"])])],
                     [(p.stem, p) for p in plots])
    write_text_atomic(out / "report.html", page)


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title="Claims")
    for c in ("claim", "paper", "mean Δ", "p", "verdict"):
        t.add_column(c)
    for c in summary["claims"]:
        t.add_row(c["claim"], c["paper"], f"{c['mean_diff']:+.4g}", "-" if math.isnan(c["p"]) else f"{c['p']:.3f}",
                  c["verdict"])
    ui.out.print(t)
    ui.out.print(f"report: {summary['report_md']}")
