"""`xlp evaluate --task bucc`: BUCC 2018 bitext mining with a pre-trained encoder, no fine-tuning.

For each run and each language xx it knows (besides English) with a complete `<xx>-en.<split>` set
(`bucc/data.py`): sentence vectors of both sides (`retrieval/encode.py`: the mean of one layer, the middle one by
default, as XTREME), candidates mined over the whole corpus with the ratio margin (k = 4, `bucc/mining.py`). The
source sentences are cut by a hash of their id into a training part (`--threshold-fraction`) and a test part:
the margin threshold with the best F1 on the training part's candidates and gold pairs is applied to the test
part's candidates, and F1 (%) there is the score (XTREME tunes the threshold on BUCC's sample set and reports
the official test set, whose gold is not public). Folders of one name are pooled like seeds (mean ± std,
`xnli.scores.MARK_RULE`).
"""

from __future__ import annotations

import hashlib
import math
import time
from pathlib import Path
from typing import Any

from xlp_cli.artifacts.files import data_dir, write_json_atomic, write_text_atomic
from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.reporting.render import html_page, markdown_table, order_langs
from xlp_cli.tasks.bucc import data as bd
from xlp_cli.tasks.bucc.mining import at_threshold, best_threshold, mine
from xlp_cli.tasks.retrieval.encode import Encoder, load_encoder, sentence_vectors
from xlp_cli.tasks.retrieval.scores import table_rows
from xlp_cli.tasks.xnli.report import plot_accuracy
from xlp_cli.tasks.xnli.scores import MARK_RULE, RunScores, default_name, score
from xlp_cli.train.runtime import Runtime

NOTE = ("BUCC 2018 bitext mining F1 (%) without fine-tuning: candidates mined with the ratio margin (k = 4) over "
        "mean-pooled sentence vectors of one layer, F1 on the test part of the source sentences at the margin "
        "threshold that is best on the training part (split by a hash of the sentence id). Cells are mean ± std "
        "over runs of the same name. " + MARK_RULE + ".")


def in_training_part(sid: str, fraction: float) -> bool:
    return int(hashlib.sha1(f"bucc:{sid}".encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF < fraction


def folder_of(cfg: Any) -> Path:
    return Path(cfg.bucc_dir) if cfg.bucc_dir else data_dir() / "bucc2018"


def score_corpus(corpus: bd.Corpus, src_vecs: Any, en_vecs: Any, k: int, fraction: float) -> dict[str, Any]:
    """Mine, choose the threshold on the training part, measure the test part."""
    cands = [(corpus.src.ids[a], corpus.en.ids[b], s) for a, b, s in mine(src_vecs, en_vecs, k)]
    parts: dict[bool, tuple[list, set]] = {True: ([], set()), False: ([], set())}
    for c in cands:
        parts[in_training_part(c[0], fraction)][0].append(c)
    for g in corpus.gold:
        parts[in_training_part(g[0], fraction)][1].add(g)
    (train_c, train_g), (test_c, test_g) = parts[True], parts[False]
    if not train_g or not test_g:
        raise BadInput(f"{len(train_g)} gold pairs in the training part and {len(test_g)} in the test part: too few "
                       "to choose a threshold and measure (--threshold-fraction, --bucc-max-sentences)",
                       path=corpus.gold_path)
    threshold, train_f1 = best_threshold(train_c, train_g)
    test = at_threshold(test_c, test_g, threshold)
    return {**test, "threshold": threshold if math.isfinite(threshold) else None, "train_f1": train_f1,
            "train_gold": len(train_g),
            "sentences": {corpus.lang: len(corpus.src), "en": len(corpus.en)},
            "missing_gold": corpus.missing_gold, "first_missing": corpus.first_missing}


def fmt_threshold(t: float | None) -> str:
    """None: no candidate of the training part was correct, so nothing is mined."""
    return "none (nothing mined)" if t is None else f"{t:.4f}"


def measure(enc: Encoder, cfg: Any, langs: list[str], device: Any = "cpu") -> dict[str, Any]:
    """{"layer", "langs": {xx: score_corpus(...)}} for one encoder."""
    layer = enc.layer(cfg.layer)
    folder = folder_of(cfg)
    per: dict[str, Any] = {}
    for xx in langs or [l for l in enc.langs if l != "en"]:
        if xx == "en" or "en" not in enc.langs or xx not in enc.langs:
            continue
        corpus = bd.read(folder, xx, cfg.bucc_split, cfg.bucc_max_sentences)
        if corpus is None:
            continue
        if corpus.missing_gold:
            ui.warn(f"bucc: {corpus.missing_gold} gold pair(s) name a sentence id missing from the sentence files "
                    f"(first at {corpus.first_missing}); left out of the gold set")
        src = sentence_vectors(enc, corpus.src.texts, xx, layer, cfg.batch_size, device)
        en = sentence_vectors(enc, corpus.en.texts, "en", layer, cfg.batch_size, device)
        per[xx] = score_corpus(corpus, src, en, cfg.margin_k, cfg.threshold_fraction)
    return {"layer": layer, "langs": per}


def measure_runs(cfg: Any, folders: list[Path], names: list[str]) -> list[dict[str, Any]]:
    """One measurement per folder: {"folder", "name", "encoding", "layer", "langs"}."""
    rt = Runtime.create(cfg.device, "none", cfg.threads)
    langs = cfgmod.parse_langs(cfg.lang)
    found = []
    for i, folder in enumerate(folders):
        t0 = time.time()
        enc = load_encoder(Path(folder), cfg.which)
        m = measure(enc, cfg, langs, rt.device)
        name = names[i] if names else default_name(enc.manifest, Path(folder))
        found.append({"folder": str(folder), "name": name, "encoding": enc.model.config.lang_encoding,
                      "run_langs": enc.langs, "seconds": round(time.time() - t0, 1), **m})
        ui.info(f"bucc: {folder} ({name}, layer {m['layer']}) in {found[-1]['seconds']} s")
    return found


def table(found: list[dict[str, Any]], baseline: str = "") -> dict[str, Any] | None:
    """The score()-layout table of F1 per language (None when no run measured a language)."""
    runs: dict[str, RunScores] = {}
    for f in found:
        r = runs.setdefault(f["name"], RunScores(name=f["name"], encoding=f["encoding"]))
        r.folders.append(Path(f["folder"]))
        r.acc[f"{f['folder']}#{len(r.acc)}"] = {l: v["f1"] for l, v in f["langs"].items()}
        r.rows[f"{f['folder']}#{len(r.rows)}"] = {l: v["gold"] for l, v in f["langs"].items()}
    if not any(r.langs() for r in runs.values()):
        return None
    return score(list(runs.values()), None, baseline if baseline in runs else "")


def run(cfg: Any) -> dict[str, Any]:
    folder = folder_of(cfg)
    if not folder.is_dir():
        raise BadInput("no BUCC folder", path=folder)
    found = measure_runs(cfg, cfg.data, cfg.name)
    result = table(found, cfg.baseline)
    if result is None:
        have = ", ".join(bd.langs_in(folder, cfg.bucc_split)) or "none"
        raise BadInput(f"no language of these runs (besides English) has a complete <xx>-en.{cfg.bucc_split} set in "
                       f"{folder} (sets there: {have}; the runs know: "
                       f"{', '.join(order_langs({l for f in found for l in f['run_langs']}))}; English is needed)")
    title = cfg.title or "BUCC 2018 bitext mining: " + " vs ".join(dict.fromkeys(f["name"] for f in found))
    cfg.out.mkdir(parents=True, exist_ok=True)
    header, rows = table_rows(result)
    png = plot_accuracy(result, cfg.out / "bucc_f1.png", "BUCC mining F1", chance=None, ylabel="F1 (%)")
    details = [f"`{f['folder']}` ({f['name']}, layer {f['layer']}): " + "; ".join(
        f"{l}: F1 {v['f1']:.1f} (P {v['precision']:.1f}, R {v['recall']:.1f}) at margin {fmt_threshold(v['threshold'])} "
        f"(training-part F1 {v['train_f1']:.1f}), {v['correct']}/{v['gold']} test gold pairs mined"
        for l, v in f["langs"].items()) for f in found]
    md = [f"# {title}", "", NOTE, "", markdown_table(header, rows), "", "## Runs", ""] + [f"- {d}" for d in details]
    md += ["", f"![BUCC F1]({png.name})"]
    write_text_atomic(cfg.out / "report.md", "\n".join(md) + "\n")
    write_text_atomic(cfg.out / "report.html", html_page(title, NOTE, [("BUCC F1", header, rows)],
                                                         [("Runs", details)], [("BUCC F1 per language", png)]))
    write_json_atomic(cfg.out / "results.json", {"task": "bucc", "runs": found, "table": result})
    return {"task": "bucc", "out": str(cfg.out), "title": title, "table": result, "runs": found,
            "report_md": str(cfg.out / "report.md"), "report_html": str(cfg.out / "report.html"),
            "results": str(cfg.out / "results.json"), "plots": [str(png)]}


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    header, rows = table_rows(summary["table"])
    t = Table(title=summary["title"])
    for h in header:
        t.add_column(h, justify="right")
    for r in rows:
        t.add_row(*r)
    ui.out.print(t)
    for f in summary["runs"]:
        for l, v in f["langs"].items():
            ui.out.print(f"{f['name']} {l}: P {v['precision']:.1f} R {v['recall']:.1f} at margin "
                         f"{fmt_threshold(v['threshold'])}", markup=False)
    ui.out.print(NOTE, style="dim", soft_wrap=True)
    ui.report_paths(summary)
