"""Terminal output details a user copies from."""

from __future__ import annotations

import io

from rich.console import Console

from xlp_cli.core import ui


def test_report_paths_are_never_wrapped_inside(monkeypatch):
    """A narrow terminal (or a log at rich's default 80 columns) once got `report: ...html  (...md,` broken mid-path."""
    buf = io.StringIO()
    monkeypatch.setattr(ui, "out", Console(file=buf, width=40, highlight=False))
    deep = "out/a-rather-long-folder-name/for-the-xnli-report"
    ui.report_paths({"report_html": f"{deep}/report.html", "report_md": f"{deep}/report.md",
                     "results": f"{deep}/results.json"})
    assert buf.getvalue() == (f"report: {deep}/report.html  ({deep}/report.md, {deep}/results.json)\n")
    buf.truncate(0), buf.seek(0)
    ui.report_paths({"report_md": "out/claims/report.md"})
    assert buf.getvalue() == "report: out/claims/report.md\n"
