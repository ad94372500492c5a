"""`xlp evaluate --task NAME`: run the task's evaluation (the registry in `xlp_cli/tasks`), then record what was
evaluated in the manifest, so `xlp run` can tell a finished evaluation from a stale one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xlp_cli import tasks
from xlp_cli.artifacts import outdir
from xlp_cli.artifacts.manifest import (
    config_hash,
    new_manifest,
    try_read_manifest,
    write_manifest as write_manifest_file,
)
from xlp_cli.core import config as cfgmod

OWNS = ("report.md", "report.html", "results.json", "*.png")  # what the evaluate tasks write in EVAL (outdir.py)


@outdir.scoped
def run(cfg: Any) -> dict[str, Any]:
    # an evaluation is cheap to redo: another config replaces the outputs (never files xlp did not write)
    previous = outdir.read_marker(cfg.out) if Path(cfg.out).is_dir() else {}
    config = cfgmod.identity(cfg)
    changed = bool(previous) and previous.get("config_hash") != config_hash(config)
    outdir.guard_out_dir(cfg.out, "evaluate", config, force=cfg.force or changed, owns=OWNS)
    summary = tasks.run("evaluate", cfg)
    write_manifest(cfg, summary)
    return summary


def write_manifest(cfg: Any, summary: dict[str, Any]) -> None:
    upstream = []
    for d in cfg.data:
        m = try_read_manifest(d) or {}
        upstream.append({"path": str(d), "stage": m.get("stage"), "config_hash": m.get("config_hash"),
                         "created": m.get("created")})
    manifest = new_manifest("evaluate", cfgmod.to_dict(cfg), upstream=upstream, task=cfg.task)

    def rel(p: Any) -> Any:
        return [rel(x) for x in p] if isinstance(p, list) else Path(p).name

    manifest["outputs"] = {k: rel(v) for k, v in summary.items() if k in ("report_md", "report_html", "results", "plots")}
    write_manifest_file(cfg.out, manifest)


def print_summary(summary: dict[str, Any]) -> None:
    tasks.print_summary("evaluate", summary)
