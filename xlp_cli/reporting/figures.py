"""Matplotlib plumbing shared by every evaluate figure: headless backend, atomic PNG writes, curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xlp_cli.artifacts.files import atomic_path


def pyplot() -> Any:
    """matplotlib.pyplot on the headless Agg backend (imported on first use: it is slow to import)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig: Any, path: Path) -> Path:
    """Write `fig` to `path` atomically (temp file, then rename) and free it."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    pyplot().close(fig)
    return path


def plot_curves(curves: dict[str, list[tuple[int, float]]], path: Path, *, xlabel: str, ylabel: str,
                title: str) -> Path | None:
    """One line per run of (step, value) points; None when no run has any point."""
    curves = {k: v for k, v in curves.items() if v}
    if not curves:
        return None
    fig, ax = pyplot().subplots(figsize=(6.0, 4.0), dpi=110)
    for name, pts in curves.items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_png(fig, path)
