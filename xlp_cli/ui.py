"""Terminal output: one stderr console for progress and warnings, stdout for summaries."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

err = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def quiet() -> bool:
    return bool(os.environ.get("XLP_QUIET")) or not sys.stderr.isatty()


def progress(*extra_columns: Any) -> Progress:
    """A rich progress bar on stderr; disabled (but still usable) when stderr is not a terminal."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        *extra_columns,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet(),
        transient=False,
    )


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {message}", soft_wrap=True)


def info(message: str) -> None:
    if not os.environ.get("XLP_QUIET"):
        err.print(message, soft_wrap=True)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def print_summary(title: str, summary: dict[str, Any]) -> None:
    """Generic summary: scalar fields as a two-column table."""
    t = Table(title=title, show_header=False)
    t.add_column("key", style="bold")
    t.add_column("value")
    for k, v in summary.items():
        if isinstance(v, (dict, list)):
            continue
        t.add_row(str(k), str(v))
    out.print(t)


def text_column(fmt: str) -> Any:
    """A progress column that renders `fmt` with the task's fields (e.g. "{task.fields[info]}")."""
    from rich.progress import TextColumn

    return TextColumn(fmt)
