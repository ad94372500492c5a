"""`xlp evaluate --task lexicon`: the VLE paper's cross-lingual embedding test (section 4.6, Table 2).

For each language l with a dictionary `<dict-dir>/<l>-en.<dict-split>` (tab-separated `word<TAB>english`,
several lines per word; space-separated MUSE files work too) and each pre-trained run:
    mean cosine   over the dictionary pairs whose two words are covered (no <unk> subword), between the
                  mean subword vector of the source word (processed as language l) and of the English word;
    P@1, P@5      nearest-neighbour translation: each covered source word ranks every covered English word
                  of that dictionary by cosine; a hit when a gold translation is among the top k.
                  (MUSE ranks a 200k-word vocabulary with CSLS; this test's candidates are the dictionary's
                  English side, so compare runs with each other, not with MUSE numbers.)
Vectors are the raw embedding rows by default (`--embedding encoded` applies each side's language encoding).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xlp_cli.artifacts.files import data_dir, write_json_atomic, write_text_atomic
from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.reporting.embeddings import cosine_matrix, load_run, word_vectors
from xlp_cli.reporting.figures import pyplot, save_png
from xlp_cli.reporting.render import order_langs
from xlp_cli.tasks.evaluate_configs import LexiconConfig  # noqa: F401 (the config: its home is evaluate_configs.py)

if TYPE_CHECKING:  # the config is read by `xlp --help`: torch and the models are imported only to run
    from xlp_cli.reporting.embeddings import LoadedRun


@dataclasses.dataclass
class Dictionary:
    """The word pairs of a dictionary file and the lines that could not be read (counted, not fatal)."""
    pairs: list[tuple[str, str]]
    skipped: int = 0            # lines without two non-empty fields (real files have them: es-en.test:2886)
    first_skipped: int = 0      # the line number of the first one
    lines: int = 0              # non-empty lines read


def read_dictionary(path: Path, max_pairs: int = 0) -> Dictionary:
    """`word<TAB>translation` lines (space-separated also works), duplicates once. Unreadable lines are
    skipped and counted; a file that is mostly unreadable (more than half of its lines) is bad input."""
    if not path.is_file():
        raise BadInput("no such dictionary file", path=path)
    d = Dictionary([])
    seen: set[tuple[str, str]] = set()
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                d.lines += 1
                parts = line.split("\t") if "\t" in line else line.split()
                if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
                    d.skipped += 1
                    d.first_skipped = d.first_skipped or n
                    continue
                pair = (parts[0].strip(), parts[1].strip())
                if pair not in seen:
                    seen.add(pair)
                    d.pairs.append(pair)
                if max_pairs and len(d.pairs) >= max_pairs:
                    break
    except UnicodeDecodeError as e:
        raise BadInput(f"not UTF-8 text ({e.reason} at byte {e.start})", path=path) from None
    if d.skipped * 2 > d.lines:
        raise BadInput(f"mostly unreadable: {d.skipped} of {d.lines} lines are not 'word<TAB>translation'",
                       path=path, position=d.first_skipped)
    if not d.pairs:
        raise BadInput("dictionary is empty", path=path)
    if d.skipped:
        ui.warn(f"{path}: skipped {ui.plural(d.skipped, 'line')} without two words (first: line {d.first_skipped})")
    return d


def score_pairs(run: LoadedRun, lang: str, pairs: list[tuple[str, str]], kind: str) -> dict[str, Any]:
    src_words = sorted({s for s, _ in pairs})
    tgt_words = sorted({t for _, t in pairs})
    sv, sc = word_vectors(run, src_words, lang, kind=kind)
    tv, tc = word_vectors(run, tgt_words, "en", kind=kind)
    s_idx = {w: i for i, w in enumerate(src_words)}
    t_idx = {w: i for i, w in enumerate(tgt_words)}
    cov_pairs = [(s_idx[s], t_idx[t]) for s, t in pairs if sc[s_idx[s]] and tc[t_idx[t]]]
    res: dict[str, Any] = {"pairs": len(pairs), "covered_pairs": len(cov_pairs),
                           "source_words": len(src_words), "covered_source_words": int(sc.sum()),
                           "mean_cos": math.nan, "p1": math.nan, "p5": math.nan}
    if not cov_pairs:
        return res
    cand = np.flatnonzero(tc)                         # covered English words = the candidate set
    sims = cosine_matrix(sv, tv[cand])                # [n_src, n_cand]
    col = {int(c): j for j, c in enumerate(cand)}
    res["mean_cos"] = float(np.mean([sims[s, col[t]] for s, t in cov_pairs]))
    gold: dict[int, set[int]] = {}
    for s, t in cov_pairs:
        gold.setdefault(s, set()).add(col[t])
    k = min(5, len(cand))
    hits1 = hits5 = 0
    for s, g in gold.items():
        top = np.argsort(-sims[s], kind="stable")[:k]
        hits1 += int(top[0] in g)
        hits5 += int(any(int(x) in g for x in top))
    res["p1"] = 100.0 * hits1 / len(gold)
    res["p5"] = 100.0 * hits5 / len(gold)
    res["queries"] = len(gold)
    res["candidates"] = int(len(cand))
    return res


def run(cfg: LexiconConfig) -> dict[str, Any]:
    dict_dir = Path(cfg.dict_dir) if cfg.dict_dir else data_dir() / "bilingual_dict_wiktionary"
    if not dict_dir.is_dir():
        raise BadInput("no dictionary folder (give --dict-dir)", path=dict_dir)
    names = cfg.name or []
    runs = []
    for i, folder in enumerate(cfg.data):
        run = load_run(Path(folder), "", cfg.which)
        run.name = names[i] if names else run.encoding
        runs.append(run)
    if len({r.name for r in runs}) != len(runs):
        raise BadInput("two runs have the same name; give --name for each --data")
    requested = cfgmod.parse_langs(cfg.lang)
    table: dict[str, dict[str, Any]] = {}
    bar = ui.progress()
    task = bar.add_task("lexicon", total=sum(len(requested or [l for l in r.langs if l != "en"]) for r in runs))
    for run in runs:  # checked before any work: English and every requested language must be in each run
        for lang in ["en", *requested]:
            run.lang_index(lang)
        for lang in requested:
            if not (dict_dir / f"{lang}-en.{cfg.dict_split}").is_file():
                raise BadInput(f"no dictionary for {lang}", path=dict_dir / f"{lang}-en.{cfg.dict_split}")
    with bar:
        for run in runs:
            for lang in requested or [l for l in run.langs if l != "en"]:
                path = dict_dir / f"{lang}-en.{cfg.dict_split}"
                if not path.is_file():
                    ui.warn(f"no dictionary {path.name} in {dict_dir}; {lang} is not evaluated")
                    continue
                d = read_dictionary(path, cfg.max_pairs)
                table.setdefault(run.name, {})[lang] = {**score_pairs(run, lang, d.pairs, cfg.embedding),
                                                        "skipped_lines": d.skipped}
                bar.update(task, advance=1, info=f"{run.name} {lang}-en")
    if not table:
        raise BadInput("no language pair to evaluate (the runs know only English, or no dictionary matched)")
    langs_all = order_langs({l for per in table.values() for l in per})
    for name, per in table.items():
        vals = [per[l] for l in langs_all if l in per and not math.isnan(per[l]["mean_cos"])]
        per["avg"] = {k: float(np.mean([v[k] for v in vals])) if vals else math.nan for k in ("mean_cos", "p1", "p5")}
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    plot = plot_lexicon(table, langs_all, out / "lexicon_cosine.png")
    results = {"task": "lexicon", "embedding": cfg.embedding, "dict_dir": str(dict_dir), "dict_split": cfg.dict_split,
               "langs": langs_all, "runs": table, "plots": [plot.name]}
    write_json_atomic(out / "results.json", results)
    write_text_atomic(out / "report.md", markdown(results))
    return {"task": "lexicon", "out": str(out), "table": results, "results": str(out / "results.json"),
            "report_md": str(out / "report.md"), "plots": [str(plot)]}


def plot_lexicon(table: dict[str, dict[str, Any]], langs: list[str], path: Path) -> Path:
    plt = pyplot()

    cols = langs + ["avg"]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.7 * len(cols) + 2), 3.8), dpi=110)
    width = 0.8 / max(1, len(table))
    for i, (name, per) in enumerate(table.items()):
        xs = [j + (i - (len(table) - 1) / 2) * width for j in range(len(cols))]
        ys = [per.get(l, {}).get("mean_cos", math.nan) for l in cols]
        ax.bar(xs, [0 if math.isnan(y) else y for y in ys], width, label=name)
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels([f"{l}-en" if l != "avg" else l for l in cols], rotation=45)
    ax.set_ylabel("mean cosine")
    ax.set_title("Bilingual dictionary cosine (VLE Table 2)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)
    return path


def _f(v: float, nd: int = 1) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{nd}f}"


def _pairs_cell(results: dict[str, Any], lang: str) -> str:
    """'2,955 (1 line skipped)': the dictionary pairs of a language (the same for every run)."""
    v = next((results["runs"][r][lang] for r in results["runs"] if lang in results["runs"][r]), None)
    if not v or lang == "avg":
        return ""
    skipped = v.get("skipped_lines", 0)
    return f"{v['pairs']:,}" + (f" ({ui.plural(skipped, 'line')} skipped)" if skipped else "")


def _cell(v: dict[str, Any] | None) -> str:
    if not v:
        return "-"
    n = f" (n={v['covered_pairs']:,})" if "covered_pairs" in v else ""
    return f"{_f(v['mean_cos'], 3)} / {_f(v['p1'])} / {_f(v['p5'])}{n}"


def markdown(results: dict[str, Any]) -> str:
    runs = list(results["runs"])
    header = ["pair", "dictionary pairs"] + [f"{r} cos / P@1 / P@5 (n = pairs covered)" for r in runs]
    lines = ["# Bilingual dictionary test (VLE 4.6, Table 2)", "",
             f"Dictionaries `{results['dict_dir']}/xx-en.{results['dict_split']}`; {results['embedding']} embeddings; "
             "split words average their subwords; the cosine is the mean over the pairs whose two words have no "
             "<unk> subword (n); P@k ranks the dictionary's English words by cosine. Lines of a dictionary without "
             "two words are skipped and counted.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for l in results["langs"] + ["avg"]:
        cells = [f"{l}-en" if l != "avg" else "avg", _pairs_cell(results, l)]
        cells += [_cell(results["runs"][r].get(l)) for r in runs]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "![mean cosine](lexicon_cosine.png)", ""]
    return "\n".join(lines)


def rich_table(results: dict[str, Any]):
    from rich.table import Table

    t = Table(title=f"Bilingual dictionary test ({results['embedding']} embeddings): cos / P@1 / P@5")
    t.add_column("pair")
    for r in results["runs"]:
        t.add_column(r, justify="right")
    for l in results["langs"] + ["avg"]:
        row = [f"{l}-en" if l != "avg" else "avg"]
        for r in results["runs"]:
            v = results["runs"][r].get(l)
            row.append(_cell(v))
        t.add_row(*row)
    return t


def print_summary(summary: dict[str, Any]) -> None:
    ui.out.print(rich_table(summary["table"]))
    ui.report_paths(summary)
