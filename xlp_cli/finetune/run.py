"""`xlp finetune`: dispatch on --task. Each task module has `run_<task>(cfg) -> summary dict`."""

from __future__ import annotations

from typing import Any

from xlp_cli.finetune.config import FinetuneConfig


def run(cfg: FinetuneConfig) -> dict[str, Any]:
    if cfg.task == "xnli":
        from xlp_cli.finetune.xnli import run_xnli

        return run_xnli(cfg)
    if cfg.task == "translation":
        from xlp_cli.finetune.translation import run_translation

        return run_translation(cfg)
    raise AssertionError(f"unhandled task {cfg.task!r}")  # choices are checked when the config is built


def print_summary(summary: dict[str, Any]) -> None:
    from xlp_cli import ui

    if summary.get("task") == "xnli":
        from xlp_cli.finetune.xnli import print_summary as xnli_summary

        xnli_summary(summary)
    elif summary.get("task") == "translation":
        from xlp_cli.finetune import translation

        printer = getattr(translation, "print_summary", None)
        printer(summary) if printer else ui.print_summary("xlp finetune --task translation", summary)
    else:
        ui.print_summary("xlp finetune", summary)
