"""QA metrics (F1 / exact match with each dataset's official normalization) and `xlp evaluate --task qa`.

Normalization, written from the official scripts' rules:
- SQuAD v1.1 (`evaluate-v1.1.py`; XTREME scores XQuAD and TyDiQA-GoldP with it): lowercase, drop ASCII
  punctuation (`string.punctuation`), replace the words a/an/the by a space, split on whitespace.
- MLQA (`mlqa_evaluation_v1.py`), by the answer's (= the context's) language: lowercase, drop every character
  of a Unicode P* category and ASCII punctuation, replace the language's articles by a space (en a/an/the;
  es un una unos unas el la los las; de ein eine einen einem eines einer der die das den dem des; vi của là cái
  chiếc những; ar every "ال"; hi and zh none), then split: on whitespace (en es de vi ar hi), or zh's mixed
  segmentation (each CJK character U+4E00-U+9FA5 a token of its own, whitespace-split runs in between).
F1 is the token-bag F1 of the normalized prediction and answer; both metrics take the best over a question's
answers and are averaged over questions (x 100); an empty or missing prediction scores 0.

Input of `xlp evaluate --task qa`: `xlp finetune --task qa` folders. Scores are recomputed from
`predictions/seed<S>/<set>.<lang>.jsonl` (one question per line: {"id", "lang", "gold": [answer texts], "pred":
answer text}), never copied from results.json; the set (xquad, mlqa, tydiqa; dev = the selection questions)
picks the normalization. Tables, seed pooling and marks are XNLI's (`tasks/xnli/scores.py`).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

from xlp_cli.artifacts.files import write_json_atomic, write_text_atomic
from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.reporting.render import html_page, markdown_table
from xlp_cli.tasks.xnli.report import rich_table, table_rows
from xlp_cli.tasks.xnli.scores import MARK_RULE, collect, prediction_rows, score

ASCII_PUNCT = frozenset(string.punctuation)
SQUAD_ARTICLES = re.compile(r"\b(a|an|the)\b")
MLQA_ARTICLES = {
    "en": re.compile(r"\b(a|an|the)\b"),
    "es": re.compile(r"\b(un|una|unos|unas|el|la|los|las)\b"),
    "vi": re.compile(r"\b(của|là|cái|chiếc|những)\b"),
    "de": re.compile(r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b"),
    "ar": re.compile("ال"),   # the script's '\sال^|ال': its first branch never matches, so every ال goes
    "hi": None, "zh": None,
}
MLQA_LANGS = tuple(MLQA_ARTICLES)
METRICS = ("f1", "em")
NOTE = ("{metric} (%) of zero-shot extractive QA (a span head trained on English) per language, then the average and "
        "the transfer gap (English minus the average of the other languages; lower is better). Cells are mean ± std "
        "over seeds. " + MARK_RULE + ".")


def _mlqa_punct(ch: str) -> bool:
    return ch in ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def _mixed_segmentation(text: str) -> list[str]:
    out, run = [], []
    for ch in text:
        if "\u4e00" <= ch <= "\u9fa5" or _mlqa_punct(ch):
            out.extend("".join(run).split())
            run = []
            out.append(ch)
        else:
            run.append(ch)
    out.extend("".join(run).split())
    return out


def squad_tokens(text: str) -> list[str]:
    """SQuAD v1.1's normalize_answer, split into its tokens."""
    text = "".join(ch for ch in text.lower() if ch not in ASCII_PUNCT)
    return SQUAD_ARTICLES.sub(" ", text).split()


def mlqa_tokens(text: str, lang: str) -> list[str]:
    """MLQA's normalize_answer for the answer language `lang`, split into its tokens."""
    if lang not in MLQA_ARTICLES:
        raise ValueError(f"MLQA's evaluation knows no language {lang!r} (it has {', '.join(MLQA_LANGS)})")
    text = "".join(ch for ch in text.lower() if not _mlqa_punct(ch))
    articles = MLQA_ARTICLES[lang]
    if articles is not None:
        text = articles.sub(" ", text)
    tokens = _mixed_segmentation(text) if lang == "zh" else text.split()
    return [t for t in tokens if t.strip()]


def normalizer(qa_set: str, lang: str) -> Callable[[str], list[str]]:
    """The official normalization of a test set: MLQA's per language, SQuAD v1.1's for the others."""
    if qa_set == "mlqa":
        mlqa_tokens("", lang)  # (an unknown language fails here, once)
        return lambda text: mlqa_tokens(text, lang)
    return squad_tokens


def f1(pred: list[str], gold: list[str]) -> float:
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def question_scores(pred: str, golds: list[str], norm: Callable[[str], list[str]]) -> tuple[float, float]:
    """(exact match, F1) of one prediction: the best over the question's answers (0, 0 without an answer)."""
    p = norm(pred or "")
    em = f = 0.0
    for g in golds:
        gt = norm(g)
        em = max(em, float(" ".join(p) == " ".join(gt)))
        f = max(f, f1(p, gt))
    return em, f


def qa_scores(pairs: Iterable[tuple[list[str], str]], norm: Callable[[str], list[str]]) -> dict[str, Any]:
    """{"f1", "em" (both %), "n"} over (answers, prediction) pairs."""
    em = f = 0.0
    n = 0
    for golds, pred in pairs:
        e, s = question_scores(pred, golds, norm)
        em, f, n = em + e, f + s, n + 1
    return {"f1": 100.0 * f / n if n else float("nan"), "em": 100.0 * em / n if n else float("nan"), "n": n}


def _shape(gold: Any, pred: Any) -> None:
    if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold) or not isinstance(pred, str):
        raise TypeError("'gold' must be a list of answer texts and 'pred' a text")


def scores_of_file(path: Path) -> dict[str, Any]:
    """F1 / EM of one predictions file `<set>.<lang>.jsonl` with its set's normalization."""
    path = Path(path)
    qa_set, _, rest = path.name.partition(".")
    lang = rest.removesuffix(".jsonl")
    try:
        norm = normalizer(qa_set, lang)
    except ValueError as e:
        raise BadInput(str(e), path=path) from None
    out = qa_scores(((g, p) for g, p in prediction_rows(path, _shape)), norm)
    if out["n"] == 0:
        raise BadInput("predictions file has no question", path=path)
    return out


def metric_of_file(metric: str) -> Callable[[Path], tuple[float, int]]:
    """(score in %, questions) of a predictions file: the reader `xnli.scores.collect` takes as `accuracy`."""
    def read(path: Path) -> tuple[float, int]:
        s = scores_of_file(path)
        return s[metric], s["n"]
    return read


def scores_of(data: list[Path], names: list[str], qa_set: str, langs: list[str], baseline: str,
              metric: str = "f1") -> dict[str, Any]:
    """One test set's table (XNLI's layout: per language, avg, gap; mean ± std over seeds) for F1 or EM."""
    return score(collect(data, names, qa_set, task="qa", accuracy=metric_of_file(metric)), langs or None, baseline)


def run(cfg: Any) -> dict[str, Any]:
    langs = cfgmod.parse_langs(cfg.lang)
    tables: dict[str, dict[str, Any]] = {}
    for qa_set in cfg.qa_sets:
        for metric in METRICS:
            try:
                tables[f"{qa_set} {metric}"] = scores_of(cfg.data, cfg.name, qa_set, langs, cfg.baseline, metric)
            except BadInput as e:
                if "no " + qa_set + " predictions" not in str(e):
                    raise
    if not tables:
        raise BadInput(f"no predictions of {', '.join(cfg.qa_sets)} in the --data folders")
    title = cfg.title or "Zero-shot QA: " + " vs ".join(next(iter(tables.values()))["runs"])
    cfg.out.mkdir(parents=True, exist_ok=True)
    tabs = [(key, *table_rows(s)) for key, s in tables.items()]
    note = NOTE.format(metric="F1 and exact match")
    md = [f"# {title}", "", note, ""] + [f"## {k}\n\n{markdown_table(h, r)}\n" for k, h, r in tabs]
    write_text_atomic(cfg.out / "report.md", "\n".join(md))
    write_text_atomic(cfg.out / "report.html", html_page(title, note, tabs, [], []))
    write_json_atomic(cfg.out / "results.json", {"task": "qa", "tables": tables})
    return {"task": "qa", "out": str(cfg.out), "title": title, "tables": tables,
            "report_md": str(cfg.out / "report.md"), "report_html": str(cfg.out / "report.html"),
            "results": str(cfg.out / "results.json")}


def print_summary(summary: dict[str, Any]) -> None:
    for key, scores in summary["tables"].items():
        ui.out.print(rich_table(scores, f"{summary['title']}: {key}", gap_label="transfer gap"))
    ui.out.print(NOTE.format(metric="F1 and exact match"), style="dim", soft_wrap=True)
    ui.report_paths(summary)
