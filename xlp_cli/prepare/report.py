"""What `xlp prepare` shows: the progress bar's columns, the summary dict and its table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.progress import ProgressColumn
from rich.table import Table
from rich.text import Text

from xlp_cli.artifacts import layout
from xlp_cli.core import ui
from xlp_cli.prepare.finalize import SPLITS


# ---------------------------------------------------------------- progress columns
class _Rate(ProgressColumn):
    def __init__(self, field: str | None, unit: str, scale: float = 1.0, digits: int = 1):
        super().__init__()
        self.field, self.unit, self.scale, self.digits = field, unit, scale, digits

    def render(self, task: Any) -> Text:
        elapsed = task.elapsed or 0.0
        value = task.completed if self.field is None else task.fields.get(self.field, 0)
        rate = value / elapsed / self.scale if elapsed > 0 else 0.0
        return Text(f"{rate:,.{self.digits}f} {self.unit}", style="progress.data.speed")


class _Done(ProgressColumn):
    """Input read so far: 'bytes read/total' when the inputs are files of known size, else the records read."""

    def render(self, task: Any) -> Text:
        if task.total:
            return Text(f"{ui.size(task.completed)}/{ui.size(task.total)}", style="progress.download")
        return Text(f"{task.fields.get('records', 0):,} records", style="progress.download")


def progress(total_bytes: int):
    """The bar of `xlp prepare`: bytes of the input files read (percentage, ETA) when their size is known;
    records read otherwise (gettext's catalog scan). Task fields: records, bytes (text bytes processed)."""
    return ui.progress(_Rate("records", "docs/s"), _Rate("bytes", "MB/s", 1e6, 2), counts=_Done())


# ---------------------------------------------------------------- summary
def summary(manifest: dict[str, Any], out: Path, seconds: float) -> dict[str, Any]:
    rec = manifest.get("records", {})
    counts = manifest.get("counts", {})
    kept = sum(n for per in counts.values() for n in per.values())
    return {
        "out": str(out),
        "records_read": rec.get("read", 0),
        "kept": kept,
        "dropped": manifest.get("dropped", {}),
        "skipped": sum(manifest.get("skipped", {}).values()),
        "warnings": len(manifest.get("warnings", [])),
        "shards": len(manifest.get("outputs", {}).get("shards", {})),
        "counts": counts,
        "seconds": round(seconds, 2),
        "docs_per_s": round(rec.get("read", 0) / seconds, 1) if seconds > 0 else 0.0,
        "mb_per_s": round(rec.get("bytes", 0) / 1e6 / seconds, 2) if seconds > 0 else 0.0,
        **{k: _linked(out, manifest, k) for k in ("bpe", "ids")},
    }


def _linked(out: Path, manifest: dict[str, Any], key: str) -> str | None:
    """The path of the sibling (or, xlp 0.1, child) stage folder prepare wrote, as a user types it."""
    rel = manifest.get("outputs", {}).get(key)
    return str(layout.linked_folder(out, rel, key, out)) if isinstance(rel, str) and rel else None


def print_summary(summary: dict[str, Any]) -> None:
    counts = summary.get("counts", {})
    groups = sorted({g for per in counts.values() for g in per})
    t = Table(title=f"xlp prepare: {summary.get('status', '')}")
    t.add_column("lang / pair", style="bold")
    for s in SPLITS:
        t.add_column(s, justify="right")
    t.add_column("total", justify="right")
    for g in groups:
        row = [counts.get(s, {}).get(g, 0) for s in SPLITS]
        t.add_row(g, *(f"{n:,}" for n in row), f"{sum(row):,}")
    totals = [sum(counts.get(s, {}).values()) for s in SPLITS]
    t.add_row("all", *(f"{n:,}" for n in totals), f"{sum(totals):,}", style="bold")
    ui.out.print(t)
    dropped = ", ".join(f"{k} {v:,}" for k, v in sorted(summary.get("dropped", {}).items())) or "none"
    ui.out.print(f"read {summary.get('records_read', 0):,} records, kept {summary.get('kept', 0):,}; dropped: {dropped}; "
                 f"skipped (bad input): {summary.get('skipped', 0):,}; warnings: {summary.get('warnings', 0)}")
    speed = (f"{summary.get('docs_per_s')} docs/s, {summary.get('mb_per_s')} MB/s"
             if summary.get("docs_per_s") is not None else "nothing to do")
    ui.out.print(f"{ui.plural(summary.get('shards', 0), 'shard')} in {summary.get('out')}  ({summary.get('seconds')} s, {speed})")
    if summary.get("ids"):
        ui.out.print(f"BPE: {summary.get('bpe') or 'reused'}; token ids in {summary.get('ids')}")
