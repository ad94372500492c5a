"""`xlp finetune --task NAME`: run the task's fine-tuning (the registry in `xlp_cli/tasks`)."""

from __future__ import annotations

from typing import Any

from xlp_cli import tasks


def run(cfg: Any) -> dict[str, Any]:
    return tasks.run("finetune", cfg)


def print_summary(summary: dict[str, Any]) -> None:
    if summary.get("rank", 0) != 0:  # torchrun: one table, from rank 0 (`--json` prints every process's summary)
        return
    tasks.print_summary("finetune", summary)
