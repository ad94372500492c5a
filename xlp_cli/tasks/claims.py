"""`xlp evaluate --task claims`: does a set of runs show the effects the XLP and VLE papers claim?

Input (`--data`, repeatable): `xlp pretrain` runs, and XNLI or POS fine-tunings of them (`xlp finetune --task xnli |
pos`; a fine-tuning leads to its pre-training run through its manifest's `upstream`). Everything that leads to one
pre-training run is one run; runs sharing a `--name` (default: the language encoding) are seeds of one
configuration, and the pre-training `seed` pairs a run with the runs of the other configurations. Per run, this
task measures (each only where its input is given):
    valid_loss   validation MLM loss (mean over languages, as `xlp pretrain` logs it) at the last evaluation step
                 that every run reached: with equal --max-steps, the evaluation of the last checkpoint (XLP Fig. 3a)
    xnli_avg     XNLI test accuracy (%) averaged over the test languages, English included (XLP Table 1), of the
                 first fine-tuning seed of the XNLI folder
    xnli_gap     English minus the mean of the other languages, same predictions (XLP Table 3)
    pos_avg      zero-shot POS word accuracy (%) averaged over the test languages, English included, of the first
                 fine-tuning seed of the POS folder (`tasks/pos/scores.py`)
    tatoeba      Tatoeba retrieval accuracy (%), mean over the run's languages with Tatoeba pairs and both directions
    pud          the same on the 1,000 parallel UD PUD sentences (`tasks/retrieval`: mean-pooled middle layer; on a
                 GPU when there is one)
    dict_cos     mean over the non-English languages of the mean cosine between the raw word embeddings of each
                 Wiktionary xx-en.<--dict-split> pair (the first --max-pairs pairs; a word is the mean of its
                 subwords' rows; pairs with an <unk> subword are left out) (VLE Table 2, VLE 4.6)
    lang_sim     for each of the --words (default 4 English words), its subword embedding rows after each
                 language's encoding (no positions, no Transformer layer: `reporting/embeddings.encoded_rows`),
                 averaged per language; the mean off-diagonal cosine of that language x language matrix, then the
                 mean over the words (XLP Fig. 4: lower = one word is encoded more differently per language)
    topic_sep    within-topic minus across-topic cosine of the --topic-words (groups of three, encoded as English)
                 (XLP Fig. 5: higher = better grouped)
Every pre-training checkpoint is read as `--which` says (default `last`: VLE 4.6 reads the model at the end of
pre-training, and the valid loss is read at the last evaluation too).

The test of a claim (`reporting/stats.py`): a one-sided paired t-test over the seeds both configurations have,
p in the claimed direction and p against it; Holm's correction over each paper's family of claims (the claims of
one paper that were measured: the `family` column), separately for the two directions; then
    "reproduced in direction"        Holm-adjusted p (claimed direction) < alpha
    "not reproduced"                 Holm-adjusted p (against the claim) < alpha
    "inconclusive at this scale"     anything else (fewer than 2 seeds, spread larger than the difference)
and a power line: the smallest true mean difference that a one-sided paired t-test of that many seeds, with the
observed standard deviation of the differences, detects with probability 0.8 at level alpha (uncorrected) and at
alpha / m (Holm's first step for a family of m claims). An inconclusive claim thus says which effect it makes
unlikely: a true difference of that size or more would have been detected 4 times in 5.
"""

from __future__ import annotations

import json
import math
import os
import platform
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from xlp_cli.artifacts.files import data_dir, write_json_atomic, write_text_atomic
from xlp_cli.artifacts.manifest import read_manifest
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput
from xlp_cli.reporting import stats
from xlp_cli.reporting.embeddings import load_run
from xlp_cli.reporting.figures import pyplot, save_png
from xlp_cli.reporting.render import html_page, markdown_table
from xlp_cli.tasks.analysis import fig4, fig5
from xlp_cli.tasks.evaluate_configs import ClaimsConfig  # noqa: F401 (the config: its home is evaluate_configs.py)
from xlp_cli.tasks.lexicon import read_dictionary, score_pairs
from xlp_cli.tasks.pos.scores import accuracy_of_file as pos_accuracy
from xlp_cli.tasks.retrieval import scores as retrieval
from xlp_cli.tasks.retrieval.encode import load_encoder
from xlp_cli.tasks.xnli import scores as xnli
from xlp_cli.tasks.xnli.report import read_valid_curve
from xlp_cli.train.runtime import pick_device

POWER = 0.8
# (family, claim, paper, metric, configuration, baseline, +1: the configuration's value is claimed higher / -1 lower)
CLAIMS = [
    ("XLP", "XLP lowers the validation MLM loss", "XLP Fig. 3a", "valid_loss", "xlp", "additive", -1),
    ("XLP", "XLP improves XNLI transfer accuracy", "XLP Table 1", "xnli_avg", "xlp", "additive", +1),
    ("XLP", "XLP narrows the cross-lingual transfer gap", "XLP Table 3", "xnli_gap", "xlp", "additive", -1),
    ("XLP", "XLP encodes one word differently per language", "XLP Fig. 4", "lang_sim", "xlp", "additive", -1),
    ("XLP", "XLP groups topic words better", "XLP Fig. 5", "topic_sep", "xlp", "additive", +1),
    ("XLP", "XLP improves zero-shot POS transfer", "XLP (transfer; POS is not in the paper)", "pos_avg", "xlp",
     "additive", +1),
    ("XLP", "XLP aligns translations better (Tatoeba retrieval)", "XLP (alignment; retrieval is not in the paper)",
     "tatoeba", "xlp", "additive", +1),
    ("XLP", "XLP aligns translations better (PUD retrieval)", "XLP (alignment; retrieval is not in the paper)",
     "pud", "xlp", "additive", +1),
    ("VLE", "VLE aligns dictionary pairs better", "VLE Table 2", "dict_cos", "vle", "additive", +1),
    ("VLE", "VLE improves XNLI transfer accuracy", "VLE (XNLI, not in the paper's tables)", "xnli_avg", "vle",
     "additive", +1),
    ("VLE", "VLE improves zero-shot POS transfer", "VLE (transfer; POS is not in the paper)", "pos_avg", "vle",
     "additive", +1),
    ("VLE", "VLE aligns translations better (Tatoeba retrieval)", "VLE (alignment; retrieval is not in the paper)",
     "tatoeba", "vle", "additive", +1),
    ("VLE", "VLE aligns translations better (PUD retrieval)", "VLE (alignment; retrieval is not in the paper)",
     "pud", "vle", "additive", +1),
]


def judge(claims: list[dict[str, Any]], alpha: float) -> None:
    """Holm over each family, both directions; the verdict and the power line of every claim (in place)."""
    for family in dict.fromkeys(c["family"] for c in claims):
        members = [c for c in claims if c["family"] == family]
        m = sum(not math.isnan(c["p"]) for c in members)
        for c, p_for, p_against in zip(members, stats.holm([c["p"] for c in members]),
                                       stats.holm([c["p_against"] for c in members])):
            c.update(p_holm=p_for, p_against_holm=p_against, family_size=m,
                     verdict=stats.verdict(p_for, p_against, alpha),
                     mde=stats.mde(c["sd_diff"], c["n"], alpha, POWER),
                     mde_holm=stats.mde(c["sd_diff"], c["n"], alpha / max(m, 1), POWER))


# ---------------------------------------------------------------- measuring one run
def _first_seed_accuracy(folder: Path, task: str) -> dict[str, float]:
    """Accuracy per language of the first fine-tuning seed of an XNLI or POS folder (test split)."""
    reader = pos_accuracy if task == "pos" else xnli.accuracy_of_file
    acc, _, _ = xnli.read_finetune_folder(folder, "test", task, reader)
    return acc[sorted(acc)[0]]


def measure_finetune(m: dict[str, Any], task: str, folder: Path) -> None:
    per_lang = _first_seed_accuracy(folder, task)
    m[f"{task}_avg"] = float(np.mean(list(per_lang.values())))
    m[task] = per_lang
    others = [v for l, v in per_lang.items() if l != "en"]
    if task == "xnli" and "en" in per_lang and others:
        m["xnli_gap"] = per_lang["en"] - float(np.mean(others))


def measure_pretrain(cfg: ClaimsConfig, m: dict[str, Any], pre: Path, dict_dir: Path, out: Path, label: str) -> None:
    loaded = load_run(pre, label, cfg.which)
    cos = {}
    for lang in [l for l in loaded.langs if l != "en"]:
        path = dict_dir / f"{lang}-en.{cfg.dict_split}"
        if path.is_file():
            r = score_pairs(loaded, lang, read_dictionary(path, cfg.max_pairs).pairs, "raw")
            if not math.isnan(r["mean_cos"]):
                cos[lang] = r["mean_cos"]
    if cos:
        m["dict_cos"] = float(np.mean(list(cos.values())))
        m["dict_cos_langs"] = cos
    f4 = fig4(loaded, cfg.words, out)
    if "mean_offdiag" in f4:
        m["lang_sim"] = f4["mean_offdiag"]
        m["lang_sim_words"] = {w: v["mean_offdiag"] for w, v in f4["words"].items()}
    f5 = fig5(loaded, cfg.topic_words, out)
    if "within_topic" in f5:
        m["topic_sep"] = f5["within_topic"] - f5["across_topic"]
    if cfg.retrieval_sets:
        opts = SimpleNamespace(layer=-1, sets=cfg.retrieval_sets, tatoeba_dir=None, ud_dir=None,
                               max_sentences=cfg.max_sentences, batch_size=64)
        found = retrieval.measure(load_encoder(pre, cfg.which), opts, [], pick_device("auto"))
        for which, per in found["sets"].items():
            if per:
                m[which] = float(np.mean([v[d] for v in per.values() for d in retrieval.DIRECTIONS]))
                m[f"{which}_langs"] = per


def _pretrain_of(folder: Path) -> tuple[Path, str | None, dict[str, Any]]:
    """(the pre-training run, the fine-tuning task or None, the folder's manifest) of one --data folder."""
    manifest = read_manifest(folder)
    if manifest.get("stage") == "pretrain":
        return folder, None, manifest
    if manifest.get("stage") != "finetune":
        raise BadInput("not an `xlp pretrain` run or an XNLI / POS fine-tuning of one", path=folder)
    task = manifest.get("config", {}).get("task", "xnli")
    if task not in ("xnli", "pos"):
        raise BadInput(f"claims reads XNLI and POS fine-tunings, not {task!r}", path=folder)
    pre = next((Path(u["path"]) for u in manifest.get("upstream", []) if isinstance(u, dict)
                and u.get("stage") == "pretrain"), None)
    if pre is None:
        raise BadInput(f"not a {task} fine-tuning of an `xlp pretrain` run (no pretrain upstream)", path=folder)
    return pre, task, manifest


def gather(cfg: ClaimsConfig) -> dict[Path, dict[str, Any]]:
    """{pre-training run: {"name", "seed", "config", "finetune": {task: (folder, config)}}} from --data."""
    found: dict[Path, dict[str, Any]] = {}
    for i, folder in enumerate(map(Path, cfg.data)):
        pre, task, manifest = _pretrain_of(folder)
        pm = manifest if task is None else read_manifest(pre, stage="pretrain")
        name = cfg.name[i] if cfg.name else xnli.default_name(pm, pre)
        seed = pm["config"].get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise BadInput(f"the pre-training config's seed is {seed!r}, not an integer", path=pre / MANIFEST)
        key = pre.resolve()
        run = found.setdefault(key, {"folder": pre, "name": name, "seed": seed, "config": pm["config"], "finetune": {}})
        if run["name"] != name:
            raise BadInput(f"one pre-training run is named both {run['name']!r} and {name!r}", path=folder)
        if task is not None:
            if task in run["finetune"]:
                raise BadInput(f"two {task} fine-tunings of one pre-training run; give one per run", path=folder)
            run["finetune"][task] = (folder, manifest.get("config"))
    seen: dict[tuple[str, int], Path] = {}
    for key, r in found.items():
        if (r["name"], r["seed"]) in seen:
            raise BadInput(f"two runs of {r['name']!r} have pre-training seed {r['seed']}; give each its own seed",
                           path=r["folder"])
        seen[(r["name"], r["seed"])] = key
    return found


def compare(runs: dict[str, dict[int, dict[str, Any]]], alpha: float) -> list[dict[str, Any]]:
    """Every claim whose two configurations were measured on its metric, tested and judged."""
    claims = []
    for family, text, paper, metric, a, b, sign in CLAIMS:
        if a not in runs or b not in runs:
            continue
        seeds = sorted(s for s in set(runs[a]) & set(runs[b]) if metric in runs[a][s] and metric in runs[b][s])
        if not seeds:
            continue
        diffs = [runs[a][s][metric] - runs[b][s][metric] for s in seeds]
        claims.append({"family": family, "claim": text, "paper": paper, "metric": metric, "run": a, "baseline": b,
                       "seeds": seeds, "claimed": "higher" if sign > 0 else "lower",
                       "run_values": [runs[a][s][metric] for s in seeds],
                       "baseline_values": [runs[b][s][metric] for s in seeds], "diffs": diffs,
                       **stats.paired_test(diffs, sign)})
    judge(claims, alpha)
    return claims


def run(cfg: ClaimsConfig) -> dict[str, Any]:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    dict_dir = Path(cfg.dict_dir) if cfg.dict_dir else data_dir() / "bilingual_dict_wiktionary"
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    info: dict[str, dict[str, Any]] = {}
    curves: dict[tuple[str, int], dict[int, float]] = {}
    for r in gather(cfg).values():
        name, seed, pre = r["name"], r["seed"], r["folder"]
        ui.info(f"claims: measuring {name} seed {seed} ({pre})")
        m: dict[str, Any] = {"pretrain": str(pre)}
        for task, (folder, _) in sorted(r["finetune"].items()):
            measure_finetune(m, task, folder)
            m[f"{task}_folder"] = str(folder)
        measure_pretrain(cfg, m, pre, dict_dir, out, f"{name}-s{seed}")
        runs.setdefault(name, {})[seed] = m
        curves[(name, seed)] = dict(read_valid_curve(pre))
        i = info.setdefault(name, {"pretrain": r["config"], "finetune": {}, "folders": []})
        i["finetune"].update({t: c for t, (_, c) in r["finetune"].items() if t not in i["finetune"]})
        i["folders"].append(str(pre))
    common = set.intersection(*(set(c) for c in curves.values())) if curves else set()
    step = max(common) if common else None
    for (name, seed), c in curves.items():
        if step is not None:
            runs[name][seed]["valid_loss"] = c[step]
    claims = compare(runs, cfg.alpha)
    results = {"task": "claims", "runs": {n: {str(s): v for s, v in sorted(r.items())} for n, r in runs.items()},
               "claims": claims, "valid_loss_step": step, "alpha": cfg.alpha, "power": POWER,
               "which_checkpoint": cfg.which, "config": info,
               "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count()}}
    plots = [_plot(curves, out / "claims_valid_loss.png")] if step is not None else []
    write_json_atomic(out / "results.json", results)
    _write_report(cfg, out, results, plots)
    return {"task": "claims", "out": str(out), "claims": claims, "results": str(out / "results.json"),
            "report_md": str(out / "report.md"), "report_html": str(out / "report.html"), "plots": [str(p) for p in plots]}


def _g(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.4g}"


def _p(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.3f}"


def _fmt(values: list[float]) -> str:
    if not values:
        return "-"
    m, s = xnli.mean_std(list(values))
    return f"{m:.4g} ± {s:.2g}" if len(values) > 1 else f"{m:.4g}"


def power_line(c: dict[str, Any]) -> str:
    """One sentence: what this claim's seeds could detect, and what the result rules out."""
    if math.isnan(c["mde"]):
        return f"{c['claim']}: {c['n']} seed(s) with no spread of the differences: no power statement possible."
    unit = f" ({c['metric']})"
    head = (f"{c['claim']}: with {c['n']} seeds and sd(Δ) = {_g(c['sd_diff'])}, a true mean difference of "
            f"{_g(c['mde'])}{unit} in the claimed direction is detected with probability {POWER} at alpha "
            f"(one-sided, uncorrected), {_g(c['mde_holm'])} at alpha/{c['family_size']} (Holm's first step)")
    if c["verdict"] == stats.INCONCLUSIVE:
        return head + (f"; observed {c['mean_diff']:+.4g}, inconclusive: a true effect of {_g(c['mde_holm'])} or "
                       "more in the claimed direction is ruled out at power 0.8 (it would have been detected).")
    return head + f"; observed {c['mean_diff']:+.4g}."


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


def claims_table(claims: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["family", "claim", "paper", "metric", "run", "baseline", "claimed", "seeds", "mean Δ", "sd Δ", "p",
              "p Holm", "p against (Holm)", "MDE (α / Holm)", "verdict"]
    rows = [[c["family"], c["claim"], c["paper"], c["metric"], _fmt(c["run_values"]), _fmt(c["baseline_values"]),
             c["claimed"], ",".join(map(str, c["seeds"])), f"{c['mean_diff']:+.4g}", _g(c["sd_diff"]), _p(c["p"]),
             _p(c["p_holm"]), _p(c["p_against_holm"]), f"{_g(c['mde'])} / {_g(c['mde_holm'])}", c["verdict"]]
            for c in claims]
    return header, rows


def intro_text(cfg: ClaimsConfig, results: dict[str, Any]) -> str:
    families = {c["family"]: c["family_size"] for c in results["claims"]}
    fam = ", ".join(f"{f}: {m} claims" for f, m in families.items())
    return (f"One-sided paired t-test over pre-training seeds, alpha {cfg.alpha}; p is the raw p in the claimed "
            f"direction, p Holm its Holm-adjusted value within the paper's family ({fam}), p against (Holm) the "
            f"adjusted p of the opposite direction. Verdict: reproduced in direction when p Holm < alpha, not "
            f"reproduced when p against (Holm) < alpha, else inconclusive. MDE: the smallest true mean difference "
            f"detected with probability {POWER} at alpha (uncorrected) / at alpha/m (Holm's first step), from the "
            f"seed count and the observed sd of the differences. Checkpoint read: `{results['which_checkpoint']}`; "
            f"validation loss at step {results['valid_loss_step']}, the last evaluation every run reached. "
            f"Cells: mean ± std over seeds; per-seed values in results.json.")


def _write_report(cfg: ClaimsConfig, out: Path, results: dict[str, Any], plots: list[Path]) -> None:
    header, rows = claims_table(results["claims"])
    title = cfg.title or "Do these runs show the papers' claims?"
    intro = intro_text(cfg, results)
    lines = [power_line(c) for c in results["claims"]]
    md = [f"# {title}", "", intro, "", markdown_table(header, rows), "", "## Power", ""]
    md += [f"- {line}" for line in lines] + ["", "## Runs and hyper-parameters", ""]
    for name, i in results["config"].items():
        md += [f"### {name}", "", "```json", json.dumps({"pretrain": i["pretrain"], "finetune": i["finetune"]},
                                                          indent=1, default=str), "```", ""]
    md += [f"Machine: {results['machine']}", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    write_text_atomic(out / "report.md", "\n".join(md) + "\n")
    page = html_page(title, intro, [("", header, rows)], [("Power", lines), ("Machine", [str(results["machine"])])],
                     [(p.stem, p) for p in plots])
    write_text_atomic(out / "report.html", page)


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title="Claims")
    for c in ("claim", "paper", "mean Δ", "p", "p Holm", "MDE", "verdict"):
        t.add_column(c)
    for c in summary["claims"]:
        t.add_row(c["claim"], c["paper"], f"{c['mean_diff']:+.4g}", _p(c["p"]), _p(c["p_holm"]), _g(c["mde"]),
                  c["verdict"])
    ui.out.print(t)
    ui.report_paths(summary)
