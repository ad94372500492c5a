"""Terminal output: one stderr console for progress and warnings, stdout for summaries.

Progress: on a terminal, a rich bar (count or bytes, percentage when the total is known, "elapsed, ETA" once);
when stderr is a file or a pipe (CI logs, `nohup`), one plain line per task every `XLP_PROGRESS_EVERY` seconds
(default 30) and when it ends; `XLP_QUIET=1` silences both.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TaskID, TextColumn
from rich.table import Table
from rich.text import Text

err = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def quiet() -> bool:
    return bool(os.environ.get("XLP_QUIET")) or not sys.stderr.isatty()


def duration(seconds: float | None) -> str:
    """'42 s', '3 min 05 s', '2 h 10 min' ('?' when unknown)."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def eta(task: Any) -> float | None:
    """Seconds left from the average rate so far (None while nothing is done or the total is unknown)."""
    if not task.total or not task.completed or not task.elapsed:
        return None
    return task.elapsed * (task.total - task.completed) / task.completed


class TimeColumn(ProgressColumn):
    """'1 min 05 s elapsed, ETA 3 min 10 s': the only time column of every bar (one ETA, labelled)."""

    def render(self, task: Any) -> Text:
        text = f"{duration(task.elapsed or 0)} elapsed"
        if task.total and not task.finished:
            text += f", ETA {duration(eta(task))}"
        return Text(text, style="progress.remaining")


class Bar(Progress):
    """A rich Progress that, when stderr is no terminal, writes a plain line per task now and then instead."""

    def __init__(self, *columns: Any, lines_every: float = 0.0, **kwargs: Any):
        super().__init__(*columns, **kwargs)
        self.lines_every = lines_every
        self._last_line: dict[TaskID, float] = {}

    def update(self, task_id: TaskID, **kwargs: Any) -> None:  # type: ignore[override]
        super().update(task_id, **kwargs)
        self._line(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._line(task_id)

    def stop(self) -> None:
        super().stop()
        for task_id in list(self._last_line):
            self._line(task_id, final=True)

    def _line(self, task_id: TaskID, final: bool = False) -> None:
        if not self.lines_every:
            return
        now = time.monotonic()
        last = self._last_line.setdefault(task_id, now)
        if not final and now - last < self.lines_every:
            return
        self._last_line[task_id] = now
        task = self._tasks[task_id]
        err.print(line_of(task), soft_wrap=True, highlight=False)


def size(n: float) -> str:
    """Bytes as people read them: '812 B', '45 KB', '3.2 MB', '1.4 GB'."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}" if n < 100 * scale else f"{n / scale:,.0f} {unit}"
    return f"{n:,.0f} B"


def line_of(task: Any) -> str:
    """The plain-text form of a task's progress: 'pretrain: 300/1,500 (20%), loss ..., 1 min elapsed, ETA 4 min'."""
    in_bytes = task.fields.get("unit") == "bytes"
    fmt = size if in_bytes else (lambda n: f"{n:,.0f}")
    done = fmt(task.completed)
    if task.total:
        done += f"/{fmt(task.total)} ({100 * task.completed / task.total:.0f}%)"
    elif task.fields.get("unit") and not in_bytes:
        done += " " + task.fields["unit"]
    info = task.fields.get("info", "")
    parts = [f"{task.description}: {done}"] + ([info] if info else []) + [f"{duration(task.elapsed or 0)} elapsed"]
    if task.total and task.completed < task.total:
        parts.append(f"ETA {duration(eta(task))}")
    return ", ".join(parts)


def progress(*extra_columns: Any, counts: Any = None) -> Bar:
    """A progress bar on stderr (see the module doc). `counts`: the column that shows done/total (default M/N)."""
    lines = 0.0
    if not os.environ.get("XLP_QUIET") and not sys.stderr.isatty():
        lines = float(os.environ.get("XLP_PROGRESS_EVERY") or 30)
    return Bar(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        counts if counts is not None else MofNCompleteColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        *extra_columns,
        TimeColumn(),
        console=err,
        disable=quiet(),
        transient=False,
        lines_every=lines,
    )


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {message}", soft_wrap=True)


def info(message: str) -> None:
    if not os.environ.get("XLP_QUIET"):
        err.print(message, markup=False)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def number(v: Any) -> str:
    """A summary value as people read it: floats rounded (4 significant digits, whole numbers above 1,000),
    thousands separated; anything else as is."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if not math.isfinite(v):
        return str(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 shard', '3 shards'."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def report_paths(summary: dict[str, Any]) -> None:
    """Where an evaluation wrote its report: `report: HTML  (MD, results.json)`, whichever it has. Never wrapped by
    rich (a path broken over two lines cannot be copied); the terminal wraps it if it must."""
    first, *rest = [str(summary[k]) for k in ("report_html", "report_md", "results") if summary.get(k)] or ["-"]
    out.print(f"report: {first}" + (f"  ({', '.join(rest)})" if rest else ""), soft_wrap=True, markup=False)


def print_summary(title: str, summary: dict[str, Any]) -> None:
    """Generic summary: scalar fields as a two-column table, numbers rounded."""
    t = Table(title=title, show_header=False)
    t.add_column("key", style="bold")
    t.add_column("value")
    for k, v in summary.items():
        if isinstance(v, (dict, list)):
            continue
        t.add_row(str(k), number(v))
    out.print(t)


def text_column(fmt: str) -> Any:
    """A progress column that renders `fmt` with the task's fields (e.g. "{task.fields[info]}")."""
    return TextColumn(fmt)
