"""`xlp evaluate --task translation`: BLEU per direction across translation runs (XLP Table 2 layout),
with zero-shot directions in their own table (interlingua paper, Table 1).

    xlp evaluate --task translation --data ft_attaching --data ft_additive --data ft_xlp --out eval_mt

Reads each run's `predictions/<split>.<src>-<tgt>.jsonl` (written by `xlp finetune --task translation`
with the best checkpoint) and scores them with sacreBLEU:
- detokenized BLEU: the detokenized hypothesis against the raw reference, sacreBLEU's default 13a
  tokenization (`--bleu-tokenize`), printed with its signature;
- tokenized BLEU (the papers' number): the Moses-tokenized hypothesis (BPE undone) against the tokenized
  reference of `xlp prepare`, as Moses' multi-bleu.perl computes it: whitespace tokens, case-sensitive, no
  smoothing (a corpus without any matching 4-gram scores 0), i.e. sacreBLEU `tokenize=none smooth=none`.
`xlp finetune --task unmt` runs are read the same way (VLE Table 1: rows = runs, columns = directions).
If the data were lowercased by `xlp prepare`, detokenized BLEU is computed case-insensitively (the signature
says `case:lc`). Cells are mean ± std (sample std) over the seeds of a run; runs sharing a `--name` are
pooled as seeds of one configuration. A run's zero-shot directions (from its manifest) go to a second table.
Outputs: report.md, report.html, bleu.png (bars with ± std), valid_nll.png (XLP Fig. 3b), results.json.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import numpy as np

from xlp_cli.artifacts.files import inside, write_json_atomic, write_text_atomic
from xlp_cli.artifacts.manifest import read_manifest
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.bpe.encoder import saved_tokenizer
from xlp_cli.core import config as cfgmod, textfile, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.reporting import figures
from xlp_cli.reporting.figures import pyplot, save_png
from xlp_cli.reporting.render import html_page, markdown_table
from xlp_cli.text.pipeline import TextPipeline


def _stat(vals: list[float]) -> dict[str, Any]:
    vals = [v for v in vals if v is not None and not math.isnan(v)]
    if not vals:
        return {"mean": math.nan, "std": math.nan, "n": 0, "values": []}
    std = float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0
    return {"mean": float(np.mean(vals)), "std": std, "n": len(vals), "values": [round(v, 2) for v in vals]}


def fmt(stat: dict[str, Any]) -> str:
    if not stat or stat["n"] == 0:
        return "-"
    return f"{stat['mean']:.1f}" + (f" ± {stat['std']:.1f}" if stat["n"] >= 2 else "")


def read_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for i, line in textfile.text_lines(path):
        r = textfile.json_value(line, path, i)
        for k in ("hyp", "ref", "hyp_tok", "ref_tok"):
            if not isinstance(r, dict) or not isinstance(r.get(k), str):
                raise BadInput(f"prediction row has no text field '{k}'", path=path, position=i)
        rows.append(r)
    return rows


def multi_bleu():
    """sacreBLEU configured as Moses' multi-bleu.perl: whitespace tokens, case-sensitive, no smoothing."""
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize="none", smooth_method="none", force=True)


def score_rows(rows: list[dict[str, Any]], lowercase: bool, tokenize: str = "13a") -> dict[str, Any]:
    from sacrebleu.metrics import BLEU

    detok = BLEU(tokenize=tokenize, lowercase=lowercase)
    d = detok.corpus_score([r["hyp"] for r in rows], [[r["ref"] for r in rows]])
    tok = multi_bleu()
    t = tok.corpus_score([r["hyp_tok"] for r in rows], [[r["ref_tok"] for r in rows]])
    return {"bleu": d.score, "tok_bleu": t.score, "n": len(rows), "signature": str(detok.get_signature()),
            "tok_signature": str(tok.get_signature())}


def collect(data: list[Path], names: list[str], split: str, tokenize: str) -> dict[str, Any]:
    """{name: {"folders", "seeds": [{direction: scores}], "zero_shot", "directions", "curves"}}."""
    runs: dict[str, Any] = {}
    for i, folder in enumerate(data):
        folder = Path(folder)
        m = read_manifest(folder, stage="finetune")
        if m.get("task") not in ("translation", "unmt"):
            raise BadInput(f"not a translation or unmt run (task {m.get('task')!r})", path=folder)
        cfg = m.get("config", {})
        default = cfg.get("lang-encoding", "?") if cfg.get("arch") != "interlingua" else \
            "interlingua[" + ",".join(cfg.get("intl-losses", [])) + "]"
        default = "copy" if cfg.get("copy-baseline") else default
        name = names[i] if names else default
        r = runs.setdefault(name, {"folders": [], "seeds": [], "zero_shot": set(), "directions": [], "curves": {},
                                   "tasks": set()})
        r["tasks"].add(m.get("task"))
        r["folders"].append(str(folder))
        r["zero_shot"].update(m.get("zero_shot", []))
        for d in m.get("directions", []):
            if d not in r["directions"]:
                r["directions"].append(d)
        lowercased = _lowercases(folder)
        runs_listed = (m.get("outputs") or {}).get("runs", []) if isinstance(m.get("outputs"), dict) else []
        for run in runs_listed if isinstance(runs_listed, list) else []:
            rdir = inside(folder, run, "run folder", folder / MANIFEST)
            res_path = rdir / "results.json"
            if res_path.is_file():
                lowercased = bool(textfile.json_object(res_path).get("lowercased", lowercased))
            per_dir = {}
            for p in sorted((rdir / "predictions").glob(f"{split}.*.jsonl")):
                direction = p.name[len(split) + 1:-len(".jsonl")]
                rows = read_rows(p)
                if rows:
                    per_dir[direction] = score_rows(rows, lowercased, tokenize)
            if not per_dir:
                ui.warn(f"{rdir}: no {split} predictions (an unfinished run?); skipped")
                continue
            r["seeds"].append({"run": str(rdir), "scores": per_dir})
            r["curves"][f"{name} ({run})"] = read_valid_curve(rdir / "metrics.jsonl")
        if not r["seeds"]:
            raise BadInput(f"no {split} predictions in any seed of this run (did `xlp finetune` finish?)", path=folder)
    return runs


def copy_baseline(runs: dict[str, Any], split: str, tokenize: str) -> dict[str, Any]:
    """The 'copy' pseudo-run: each direction's source sentences given back as the translation, scored against
    the references of the first run (and seed) that has the direction. Tokenized BLEU needs the source's Moses
    tokens: they are the `ref_tok` of the reverse direction's row of the same id (multi-way test sets); a
    direction without its reverse gets detokenized BLEU only."""
    scores: dict[str, Any] = {}
    for r in runs.values():
        for s in r["seeds"]:
            pred = Path(s["run"]) / "predictions"
            for d in s["scores"]:
                if d in scores:
                    continue
                rows = read_rows(pred / f"{split}.{d}.jsonl")
                src, tgt = d.split("-", 1)
                reverse = pred / f"{split}.{tgt}-{src}.jsonl"
                src_tok = {x["id"]: x["ref_tok"] for x in read_rows(reverse)} if reverse.is_file() else {}
                lowercased = s["scores"][d]["signature"].find("case:lc") >= 0
                copied = [{**x, "hyp": x.get("source", ""), "hyp_tok": src_tok.get(x.get("id"), "")} for x in rows]
                sc = score_rows(copied, lowercased, tokenize)
                if not all(x.get("id") in src_tok for x in rows):
                    sc["tok_bleu"] = math.nan
                scores[d] = sc
    zero = set().union(*(r["zero_shot"] for r in runs.values())) if runs else set()
    return {"folders": [], "seeds": [{"run": "copy", "scores": scores}], "zero_shot": zero, "directions": list(scores),
            "curves": {}}


def _lowercases(folder: Path) -> bool:
    """Whether the run's text pipeline lowercased (its tokenizer/ copy says; results.json may say too)."""

    try:
        meta, _ = saved_tokenizer(folder)
    except BadInput:
        return False
    return TextPipeline.from_config(meta.get("pipeline") or {}).lowercase != "none"


def read_valid_curve(path: Path) -> list[tuple[int, float]]:
    pts: dict[int, float] = {}
    if not path.is_file():
        return []
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():  # a log: bad lines are passed over
        try:
            rec = textfile.json_value(line, path)
        except BadInput:
            continue
        if isinstance(rec, dict) and rec.get("event") == "valid" and isinstance(rec.get("valid_nll"), (int, float)) and math.isfinite(rec["valid_nll"]):
            pts[int(rec["step"])] = float(rec["valid_nll"])
    return sorted(pts.items())


def table(runs: dict[str, Any], directions: list[str], metric: str) -> tuple[list[str], list[list[str]], dict]:
    header = ["run"] + directions + ["Avg"]
    rows, stats = [], {}
    for name, r in runs.items():
        cells, st = [], {}
        for d in directions:
            st[d] = _stat([s["scores"][d][metric] for s in r["seeds"] if d in s["scores"]])
            cells.append(fmt(st[d]))
        # the average over directions, per seed, then mean ± std over seeds (only seeds that have them all)
        avgs = [float(np.mean([s["scores"][d][metric] for d in directions])) for s in r["seeds"]
                if all(d in s["scores"] for d in directions)]
        st["Avg"] = _stat(avgs)
        cells.append(fmt(st["Avg"]))
        rows.append([name] + cells)
        stats[name] = st
    return header, rows, stats


def plot(runs: dict[str, Any], stats: dict[str, Any], directions: list[str], path: Path, title: str) -> Path:
    plt = pyplot()

    cols = directions + ["Avg"]
    names = list(runs)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(cols) * max(1, len(names)) * 0.5 + 3), 4.0), dpi=110)
    width = 0.8 / max(1, len(names))
    for i, n in enumerate(names):
        means = [stats[n][c]["mean"] for c in cols]
        stds = [stats[n][c]["std"] for c in cols]
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(cols))]
        ax.bar(xs, [0 if math.isnan(m) else m for m in means], width,
               yerr=[0 if math.isnan(s) else s for s in stds], capsize=2, label=n)
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols)
    ax.set_ylabel("BLEU")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)
    return path


def plot_curves(curves: dict[str, list[tuple[int, float]]], path: Path) -> Path | None:
    return figures.plot_curves(curves, path, xlabel="step", ylabel="validation NLL per token",
                               title="Translation validation loss (XLP Fig. 3b)")


def run(cfg: Any) -> dict[str, Any]:
    split = "valid" if cfg.split == "dev" else cfg.split
    tokenize = getattr(cfg, "bleu_tokenize", "13a")
    runs = collect(cfg.data, cfg.name, split, tokenize)
    if getattr(cfg, "copy_baseline", False) and "copy" not in runs:
        runs["copy"] = copy_baseline(runs, split, tokenize)
    keep = set(cfgmod.parse_langs(cfg.lang))
    all_dirs: list[str] = []
    zero: list[str] = []
    for r in runs.values():
        for s in r["seeds"]:
            for d in s["scores"]:
                if keep and not set(d.split("-")) <= keep:
                    continue
                target = zero if d in r["zero_shot"] else all_dirs
                if d not in target:
                    target.append(d)
    supervised = [d for d in all_dirs if d not in zero]
    if not supervised and not zero:
        raise BadInput("no directions to report (check --lang)")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    title = cfg.title or "Translation BLEU: " + " vs ".join(runs)
    md = [f"# {title}", "", f"Split: {split}. Cells are mean ± std over seeds (sample std), BLEU on a 0-100 scale.", ""]
    html_parts = []
    results: dict[str, Any] = {"task": "translation", "split": split, "runs": {}, "supervised": supervised, "zero_shot": zero}
    pngs: list[tuple[str, Path]] = []
    # UNMT runs never saw a pair: their directions are "unsupervised", not "supervised"
    trained = "Unsupervised directions" if all(r.get("tasks") == {"unmt"} for r in runs.values()
                                               if r.get("tasks")) else "Supervised directions"
    results["trained"] = trained.split()[0].lower()  # the terminal tables' title (print_summary) says the same
    for label, dirs in ((trained, supervised), ("Zero-shot directions", zero)):
        if not dirs:
            continue
        for metric, what in (("bleu", "detokenized sacreBLEU"), ("tok_bleu", "tokenized BLEU (the papers' metric)")):
            header, rows, stats = table(runs, dirs, metric)
            md += [f"## {label}: {what}", "", markdown_table(header, rows), ""]
            html_parts.append((f"{label}: {what}", header, rows))
            for name, st in stats.items():
                results["runs"].setdefault(name, {}).setdefault(metric, {}).update(
                    {("zero-shot " if label.startswith("Zero") else "") + k: v for k, v in st.items()})
            if metric == "bleu":
                fname = "bleu.png" if label.startswith("Super") else "bleu_zero_shot.png"
                pngs.append((f"{label} (detokenized BLEU)", plot(runs, stats, dirs, out / fname, f"{label}: detokenized BLEU")))
    curves: dict[str, list] = {}
    for r in runs.values():
        curves.update(r["curves"])
    cp = plot_curves(curves, out / "valid_nll.png")
    if cp:
        pngs.append(("Validation NLL per token", cp))
    sigs = sorted({sc["signature"] for r in runs.values() for s in r["seeds"] for sc in s["scores"].values()})
    tsigs = sorted({sc["tok_signature"] for r in runs.values() for s in r["seeds"] for sc in s["scores"].values()})
    md += ["## Signatures", ""] + [f"- detokenized: `{s}`" for s in sigs] + [f"- tokenized: `{s}`" for s in tsigs] + [""]
    md += ["## Runs", ""] + [f"- **{n}**: {len(r['seeds'])} seed(s); " + ", ".join(f"`{f}`" for f in r["folders"])
                            + (f"; zero-shot: {', '.join(sorted(r['zero_shot']))}" if r["zero_shot"] else "")
                            for n, r in runs.items() if n != "copy" or r["folders"]] + [""]
    if "copy" in runs and not runs["copy"]["folders"]:
        md += ["- **copy**: the source sentence given back as the translation (`--copy-baseline`), on the first run's "
               "test sentences of each direction; tokenized BLEU from the reverse direction's tokenized references.", ""]
    for caption, p in pngs:
        md += [f"## {caption}", "", f"![{caption}]({p.name})", ""]
    write_text_atomic(out / "report.md", "\n".join(md))
    esc = html.escape
    page = html_page(title, f"Split: {split}. Mean ± std over seeds.", html_parts,
                     [("Signatures", [f"<code>{esc(s)}</code>" for s in sigs + tsigs])], pngs)
    write_text_atomic(out / "report.html", page)
    for name, r in runs.items():
        results["runs"].setdefault(name, {})["folders"] = r["folders"]
        results["runs"][name]["per_seed"] = r["seeds"]
    results["signatures"] = sigs + tsigs
    results["plots"] = [p.name for _, p in pngs]
    write_json_atomic(out / "results.json", results)
    summary_table = {name: {d: round(st["bleu"][d]["mean"], 2) for d in supervised + ["Avg"] if d in st["bleu"]}
                     for name, st in results["runs"].items() if "bleu" in st}
    return {"task": "translation", "out": str(out), "title": title, "split": split, "bleu": summary_table,
            "zero_shot": zero, "report_md": str(out / "report.md"), "report_html": str(out / "report.html"),
            "results": str(out / "results.json"), "plots": [str(p) for _, p in pngs],
            "signature": sigs[0] if sigs else ""}


def print_summary(summary: dict[str, Any]) -> None:
    """The terminal view: the (un)supervised and zero-shot detokenized BLEU tables (mean ± std over seeds)."""
    from rich.table import Table

    res = textfile.json_object(Path(summary["results"]))
    trained = res.get("trained", "supervised")  # "unsupervised" for UNMT runs, as in report.md
    for label, dirs, prefix in ((trained, res["supervised"], ""), ("zero-shot", res["zero_shot"], "zero-shot ")):
        for metric, what in (("bleu", "detokenized sacreBLEU"), ("tok_bleu", "tokenized BLEU, multi-bleu.perl")):
            if not dirs:
                continue
            t = Table(title=f"{summary['title']} ({label}, {what}, {summary['split']})")
            t.add_column("run")
            for d in dirs + ["Avg"]:
                t.add_column(d, justify="right")
            for name, r in res["runs"].items():
                st = r.get(metric, {})
                t.add_row(name, *[fmt(st.get(prefix + d, {"n": 0})) for d in dirs + ["Avg"]])
            ui.out.print(t)
    for sig in res.get("signatures", []):
        ui.out.print(f"signature: {sig}")
    ui.report_paths(summary)
