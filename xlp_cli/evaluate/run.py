"""`xlp evaluate`: dispatch on --task; each task writes into --out and returns a summary dict.

    xnli         accuracy per language + transfer gap across runs; report.md/.html, PNGs, results.json
    lexicon      bilingual-dictionary cosine and P@1/P@5 per language pair and run (VLE 4.6, Table 2)
    analysis     XLP Fig. 2/4/5 and VLE Fig. 2 as PNG + numbers
    translation  BLEU (issue 6: xlp_cli.evaluate.bleu)
"""

from __future__ import annotations

from typing import Any

from xlp_cli import artifacts, config as cfgmod
from xlp_cli.evaluate.config import EvaluateConfig


def run(cfg: EvaluateConfig) -> dict[str, Any]:
    if cfg.task == "xnli":
        summary = run_xnli_eval(cfg)
    elif cfg.task == "lexicon":
        from xlp_cli.evaluate.lexicon import run_lexicon_eval

        summary = run_lexicon_eval(cfg)
    elif cfg.task == "analysis":
        from xlp_cli.evaluate.analysis import run_analysis

        summary = run_analysis(cfg)
    elif cfg.task == "translation":
        from xlp_cli.evaluate.bleu import run_translation_eval

        return run_translation_eval(cfg)
    else:  # choices are checked when the config is built
        raise AssertionError(f"unhandled task {cfg.task!r}")
    write_manifest(cfg, summary)
    return summary


def write_manifest(cfg: EvaluateConfig, summary: dict[str, Any]) -> None:
    """Record what was evaluated, so `xlp run` can tell a finished evaluation from a stale one."""
    config = cfgmod.to_dict(cfg)
    upstream = []
    for d in cfg.data:
        m = artifacts.try_read_manifest(d) or {}
        upstream.append({"path": str(d), "stage": m.get("stage"), "config_hash": m.get("config_hash"),
                         "created": m.get("created")})
    manifest = artifacts.new_manifest("evaluate", config, upstream=upstream)
    manifest["outputs"] = {k: v for k, v in summary.items() if k in ("report_md", "report_html", "results", "plots")}
    artifacts.write_manifest(cfg.out, manifest)


def run_xnli_eval(cfg: EvaluateConfig) -> dict[str, Any]:
    from xlp_cli.evaluate import report, xnli

    runs = xnli.collect(cfg.data, cfg.name, cfg.split)
    scores = xnli.score(runs, cfgmod.parse_langs(cfg.lang), cfg.baseline)
    title = cfg.title or "XNLI comparison: " + " vs ".join(scores["runs"])
    paths = report.write_report(cfg.out, scores, title=title, split=cfg.split)
    return {"task": "xnli", "out": str(cfg.out), "title": title, "scores": scores, **paths}


def print_summary(summary: dict[str, Any]) -> None:
    """The terminal view: the comparison table (xnli), the lexicon table, or the generic summary."""
    from xlp_cli import ui

    task = summary.get("task")
    if task == "xnli":
        from xlp_cli.evaluate.report import NOTE, rich_table

        ui.out.print(rich_table(summary["scores"], summary.get("title", "XNLI")))
        ui.out.print(NOTE, style="dim", soft_wrap=True)
        ui.out.print(f"report: {summary['report_html']}  ({summary['report_md']}, {summary['results']})")
    elif task == "lexicon":
        from xlp_cli.evaluate.lexicon import rich_table as lex_table

        ui.out.print(lex_table(summary["table"]))
        ui.out.print(f"results: {summary['out']}/results.json")
    elif task == "translation":
        from xlp_cli.evaluate import bleu

        printer = getattr(bleu, "print_summary", None)
        printer(summary) if printer else ui.print_summary("xlp evaluate --task translation", summary)
    else:
        ui.print_summary(f"xlp evaluate --task {task}", summary)
