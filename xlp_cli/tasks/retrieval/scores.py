"""`xlp evaluate --task retrieval`: Tatoeba (and PUD) sentence retrieval of pre-trained runs, no fine-tuning.

For each run and each language xx it knows (besides English) that a set covers: the sentence vectors of both
sides (`encode.py`), then accuracy xx->en (each xx sentence's nearest English sentence is its translation) and
en->xx, per language and averaged. Chance is 1/N (N = the pairs of that language: 0.1% for 1,000).
Folders that share a name (`--name`; default: the language encoding) are pooled like seeds: mean ± std over them,
and the XNLI marking (`xnli.scores.MARK_RULE`: a two-sided Welch t-test, which needs 2+ runs per name).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from xlp_cli.artifacts.files import data_dir, write_json_atomic, write_text_atomic
from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.reporting.render import html_page, markdown_table, order_langs
from xlp_cli.tasks.retrieval import data as rd
from xlp_cli.tasks.retrieval.encode import Encoder, accuracy, load_encoder, sentence_vectors
from xlp_cli.tasks.xnli.report import plot_accuracy
from xlp_cli.tasks.xnli.scores import MARK_RULE, RunScores, default_name, fmt_cell, score
from xlp_cli.train.runtime import Runtime

DIRECTIONS = ("xx->en", "en->xx")
NOTE = ("Sentence retrieval accuracy (%) without fine-tuning: each sentence's cosine nearest neighbour among the "
        "other language's sentences must be its translation (xx->en: xx queries, English candidates). Sentence "
        "vector: the mean of one layer's hidden states. Chance is 1/N (0.1% for 1,000 pairs). Cells are mean ± std "
        "over runs of the same name. " + MARK_RULE + ".")


def pairs_of(cfg: Any, lang: str, which: str) -> rd.Pairs | None:
    data = data_dir()
    if which == "tatoeba":
        return rd.tatoeba(Path(cfg.tatoeba_dir) if cfg.tatoeba_dir else data / "tatoeba_laser", lang, cfg.max_sentences)
    return rd.pud(Path(cfg.ud_dir) if cfg.ud_dir else data / "ud_treebanks", lang, cfg.max_sentences)


def measure(enc: Encoder, cfg: Any, langs: list[str], device: Any = "cpu") -> dict[str, Any]:
    """{set: {lang: {"xx->en": %, "en->xx": %, "pairs": N}}} for one encoder, and the layer read."""
    layer = enc.layer(cfg.layer)
    out: dict[str, Any] = {"layer": layer, "sets": {}}
    vectors: dict[tuple[str, tuple[str, ...]], Any] = {}  # a side shared by several languages (PUD's English) once

    def vecs(texts: list[str], lang: str) -> Any:
        key = (lang, tuple(texts))
        if key not in vectors:
            vectors[key] = sentence_vectors(enc, texts, lang, layer, cfg.batch_size, device)
        return vectors[key]

    for which in cfg.sets:
        per: dict[str, Any] = {}
        for lang in langs or [l for l in enc.langs if l != "en"]:
            if lang == "en" or "en" not in enc.langs or lang not in enc.langs:
                continue
            pairs = pairs_of(cfg, lang, which)
            if pairs is None or not len(pairs):
                continue
            xx, en = vecs(pairs.xx, lang), vecs(pairs.en, "en")
            per[lang] = {"xx->en": accuracy(xx, en), "en->xx": accuracy(en, xx), "pairs": len(pairs)}
        out["sets"][which] = per
    return out


def measure_runs(cfg: Any, folders: list[Path], names: list[str]) -> list[dict[str, Any]]:
    """One measurement per folder: {"folder", "name", "encoding", "layer", "sets"}."""

    rt = Runtime.create(cfg.device, "none", cfg.threads)
    langs = cfgmod.parse_langs(cfg.lang)
    found = []
    for i, folder in enumerate(folders):
        t0 = time.time()
        enc = load_encoder(Path(folder), cfg.which)
        m = measure(enc, cfg, langs, rt.device)
        name = names[i] if names else default_name(enc.manifest, Path(folder))
        found.append({"folder": str(folder), "name": name, "encoding": enc.model.config.lang_encoding, "langs": enc.langs,
                      "seconds": round(time.time() - t0, 1), **m})
        ui.info(f"retrieval: {folder} ({name}, layer {m['layer']}) in {found[-1]['seconds']} s")
    return found


def tables(found: list[dict[str, Any]], baseline: str = "") -> dict[str, Any]:
    """{"<set> <direction>": score()-layout scores (per language, avg, marking)} from measure_runs' output."""
    out = {}
    for which in dict.fromkeys(s for f in found for s in f["sets"]):
        for direction in DIRECTIONS:
            runs: dict[str, RunScores] = {}
            for f in found:
                per = {l: v[direction] for l, v in f["sets"].get(which, {}).items()}
                r = runs.setdefault(f["name"], RunScores(name=f["name"], encoding=f["encoding"]))
                r.folders.append(Path(f["folder"]))
                r.acc[f"{f['folder']}#{len(r.acc)}"] = per
                r.rows[f"{f['folder']}#{len(r.rows)}"] = {l: v["pairs"] for l, v in f["sets"].get(which, {}).items()}
            if any(r.langs() for r in runs.values()):
                out[f"{which} {direction}"] = score(list(runs.values()), None, baseline)
    return out


def table_rows(scores: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """run, languages..., avg (retrieval has no transfer gap)."""
    header = ["run"] + scores["langs"] + ["avg"]
    rows = []
    for name, r in scores["runs"].items():
        vs = r["vs_baseline"]
        rows.append([name + (" (baseline)" if name == scores["baseline"] else "")]
                    + [fmt_cell(r["acc"][l], vs[l]) for l in scores["langs"]] + [fmt_cell(r["avg"], vs["avg"])])
    return header, rows


def run(cfg: Any) -> dict[str, Any]:
    found = measure_runs(cfg, cfg.data, cfg.name)
    no_english = [f for f in found if "en" not in f.get("langs", [])]  # retrieval pairs are xx<->en
    if found and len(no_english) == len(found):
        raise BadInput("English is missing: retrieval pairs are xx<->en, and no run was pre-trained with English "
                       f"(the runs know: {', '.join(order_langs({l for f in found for l in f.get('langs', [])}))}); "
                       "pre-train with en among --lang")
    for f in no_english:
        ui.warn(f"{f['folder']} has no English (its languages: {', '.join(f.get('langs', []))}): retrieval pairs are "
                "xx<->en, so it is not scored")
    result = tables(found, cfg.baseline)
    if not result:
        raise BadInput("no language of these runs (besides English) has retrieval pairs in --sets "
                       f"{', '.join(cfg.sets)}; the runs know: {', '.join(order_langs({l for f in found for l in f.get('langs', [])}))}")
    title = cfg.title or "Sentence retrieval: " + " vs ".join(dict.fromkeys(f["name"] for f in found))
    cfg.out.mkdir(parents=True, exist_ok=True)
    md, tabs, pngs = [f"# {title}", "", NOTE, ""], [], []
    for key, scores in result.items():
        header, rows = table_rows(scores)
        md += [f"## {key}", "", markdown_table(header, rows), ""]
        tabs.append((key, header, rows))
        png = plot_accuracy(scores, cfg.out / f"retrieval_{key.replace(' ', '_').replace('->', '2')}.png",
                            f"{key} retrieval accuracy", chance=None, ylabel="retrieval accuracy (%)")
        pngs.append((f"{key} per language", png))
    layers = [f"<code>{f['folder']}</code>: {f['name']}, layer {f['layer']}" for f in found]
    md += ["## Runs", ""] + [f"- `{f['folder']}`: {f['name']}, layer {f['layer']}, {f['seconds']} s" for f in found]
    md += [""] + [f"![{c}]({p.name})" for c, p in pngs]
    write_text_atomic(cfg.out / "report.md", "\n".join(md) + "\n")
    write_text_atomic(cfg.out / "report.html", html_page(title, NOTE, tabs, [("Runs", layers)], pngs))
    write_json_atomic(cfg.out / "results.json", {"task": "retrieval", "runs": found, "tables": result})
    return {"task": "retrieval", "out": str(cfg.out), "title": title, "tables": result,
            "report_md": str(cfg.out / "report.md"), "report_html": str(cfg.out / "report.html"),
            "results": str(cfg.out / "results.json"), "plots": [str(p) for _, p in pngs]}


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    for key, scores in summary["tables"].items():
        header, rows = table_rows(scores)
        t = Table(title=f"{summary['title']}: {key}")
        t.add_column("lang")
        for r in rows:
            t.add_column(r[0], justify="right")
        for i, h in enumerate(header[1:], 1):
            t.add_row(h, *[r[i] for r in rows], style="bold" if h == "avg" else None)
        ui.out.print(t)
    ui.out.print(NOTE, style="dim", soft_wrap=True)
    ui.report_paths(summary)


def avg_cell(scores: dict[str, Any] | None, name: str) -> dict[str, Any]:
    """The avg statistic of run `name` in one table (an empty statistic when it is absent)."""
    if not scores or name not in scores["runs"]:
        return {"mean": math.nan, "std": math.nan, "n": 0, "seeds": []}
    return scores["runs"][name]["avg"]
