"""What `xlp run` shows at the end: the table of stages, the last comparison report, and where every report is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xlp_cli.core import textfile, ui
from xlp_cli.evaluate.run import print_summary as eval_summary


def report_of(folder: Path) -> Path | None:
    """The report an evaluate stage wrote (report.html, else report.md, else results.json)."""
    return next((folder / f for f in ("report.html", "report.md", "results.json") if (folder / f).is_file()), None)


def xnli_summary_from_disk(out: Path) -> dict[str, Any] | None:
    path = out / "results.json"
    if not path.is_file():
        return None
    res = textfile.json_object(path)
    return {"task": "xnli", "title": "XNLI comparison: " + " vs ".join(res.get("runs", {})), "scores": res,
            "report_html": str(out / "report.html"), "report_md": str(out / "report.md"), "results": str(path)}


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title=f"xlp run {summary['recipe']}" + (" (dry run)" if summary.get("dry_run") else ""))
    for c in ("stage", "status", "seconds", "out"):
        t.add_column(c, justify="right" if c == "seconds" else "left")
    for s in summary["stages"]:
        t.add_row(s["stage"], s["status"], f"{s['seconds']:.1f}" if s["status"] == "ran" else "", s["out"])
    ui.out.print(t)
    ui.out.print(f"total {summary['seconds']:.1f} s")
    if summary.get("comparison"):
        eval_summary(summary["comparison"])
    if summary.get("reports"):
        ui.out.print("reports:\n" + "\n".join(f"  {r}" for r in summary["reports"]), markup=False)
