"""What every evaluation report shares: the language order of its tables, Markdown tables, and one
self-contained HTML page (PNG plots inlined as base64), so each task writes only its own content."""

from __future__ import annotations

import base64
import html
from pathlib import Path

# the XLP paper's Table 1 order (resource magnitude)
XNLI_LANGS = ["en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur"]


def order_langs(langs: set[str] | list[str]) -> list[str]:
    """Table 1 order first, then any other language alphabetically."""
    langs = set(langs)
    return [l for l in XNLI_LANGS if l in langs] + sorted(langs - set(XNLI_LANGS))


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def html_page(title: str, intro: str, tables: list[tuple[str, list[str], list[list[str]]]],
              lists: list[tuple[str, list[str]]], figures: list[tuple[str, Path]]) -> str:
    """tables: (heading or "", header, rows); lists: (heading, items as HTML); figures: (caption, PNG path)."""
    esc = html.escape
    parts = []
    for heading, header, rows in tables:
        parts.append((f"<h2>{esc(heading)}</h2>" if heading else "") + "<table><thead><tr>"
                     + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr></thead><tbody>"
                     + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
                     + "</tbody></table>")
    for heading, items in lists:
        parts.append(f"<h2>{esc(heading)}</h2><ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>")
    parts += [f"<h2>{esc(c)}</h2><img alt='{esc(c)}' src='{png_data_uri(p)}'>" for c, p in figures]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 7px;text-align:right}}
td:first-child,th:first-child{{text-align:left}}img{{max-width:100%}}</style></head>
<body><h1>{esc(title)}</h1><p>{esc(intro)}</p>
{"".join(parts)}</body></html>
"""
