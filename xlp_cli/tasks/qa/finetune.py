"""`xlp finetune --task qa`: XTREME's zero-shot extractive QA on a pre-trained encoder.

Train a span head (`models/heads.SpanExtractor`: start and end logits per subword) on English SQuAD-format
questions, select the checkpoint on 10% of them (held out by a hash of the question id), answer the test sets
of every language the run knows: XQuAD (11 languages), MLQA dev (context and question in the same language)
and the labelled TyDiQA-GoldP train files of the other languages (sw, ko). The shared data has no SQuAD train,
so the default training set is TyDiQA-GoldP English train (3,696 questions, about 24x fewer than the 87,599 of
SQuAD v1.1 train that XTREME trains on for XQuAD and MLQA; docs/evaluate.md).

Runs: the grid --lr x --batch-size x --seeds (`tasks/finetuning.search`), each point in
`runs/transfer/lr<lr>-bs<bs>-seed<S>/`; the selected point's best checkpoint per seed writes
`predictions/seed<S>/<set>.<lang>.jsonl` (one question per line: {"id", "lang", "gold": [answer texts],
"pred": answer text}) and `predictions/seed<S>/dev.<train-lang>.jsonl` (the selection questions). results.json
holds F1 / EM per set, seed and language, recomputed from those files (`scores.py`); report.md the tables.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlp_cli.artifacts import outdir
from xlp_cli.artifacts.files import data_dir, sha256_file, write_json_atomic, write_text_atomic
from xlp_cli.artifacts.manifest import new_manifest, write_manifest
from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.models.heads import SpanExtractor, freeze_language_parameters
from xlp_cli.reporting.render import markdown_table, order_langs
from xlp_cli.tasks.common import print_seed_table
from xlp_cli.tasks.finetuning import Pretrained, fit_point, search, start
from xlp_cli.tasks.qa import data as qd
from xlp_cli.tasks.qa.config import DEFAULT_BATCH_SIZE, DEFAULT_LR, TYDIQA_EN_TRAIN, QaConfig
from xlp_cli.tasks.qa.objective import Span, predict
from xlp_cli.tasks.qa.scores import scores_of_file
from xlp_cli.train import engine
from xlp_cli.train.runtime import Runtime

XQUAD_LANGS = ("en", "es", "de", "el", "ru", "tr", "ar", "vi", "th", "zh", "hi")  # XQuAD's 11 (ro came later)
MLQA_LANGS = ("en", "ar", "de", "es", "hi", "vi", "zh")
TYDIQA_LABELLED = ("en", "ko", "sw")  # the TyDiQA-GoldP train files of the shared data (dev has no answers)


# ---------------------------------------------------------------- training
def train_one(run_dir: Path, pre: Pretrained, train: qd.Encoded, select: qd.Encoded, lr: float, bs: int, seed: int,
              cfg: QaConfig, rt: Runtime) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = pre.new_head(SpanExtractor, cfg.dropout, rt.device)
    frozen = [] if cfg.unfreeze_projections else freeze_language_parameters(model, model.encoder)
    objective = Span(train, select, pre.lang_index, bs, seed, cfg.epoch_size, cfg.eval_batch_size, cfg.n_best,
                     cfg.max_answer_len, rt)
    total = cfg.epochs * objective.steps_per_epoch
    if cfg.max_steps:
        total = min(total, cfg.max_steps)
    settings = engine.Settings.from_config(cfg, max_steps=total, lr=lr, betas=(0.9, 0.999), eps=1e-8, seed=seed,
                                           eval_every=objective.steps_per_epoch, save_every=cfg.save_every,
                                           label=f"qa/{run_dir.name}")
    return fit_point(run_dir, model, objective, settings, rt, {"lr": lr, "batch_size": bs, "seed": seed,
                     "frozen": frozen, "train_questions": len(train.questions), "train_windows": len(train)})


# ---------------------------------------------------------------- the data
def test_files(data: Path, qa_set: str, exclude: set[Path]) -> dict[str, Path]:
    """Per language: the test file of `qa_set` under the shared data folder (files in `exclude` left out)."""
    if qa_set == "xquad":
        found = {l: data / "xquad" / f"xquad.{l}.json.gz" for l in XQUAD_LANGS}
    elif qa_set == "mlqa":
        found = {l: data / "mlqa" / "dev" / f"dev-context-{l}-question-{l}.json.gz" for l in MLQA_LANGS}
    else:
        found = {l: data / "tydiqa_goldp" / "train" / f"tydiqa.goldp.{l}.train.json.gz" for l in TYDIQA_LABELLED}
    return {l: p for l, p in found.items() if p.is_file() and p.resolve() not in exclude}


OWNS = ("results.json", "report.md", "predictions", "runs")  # what QA fine-tuning writes in FT (outdir.py)


@outdir.scoped
def run(cfg: QaConfig) -> dict[str, Any]:
    rt = Runtime.create(cfg.device, cfg.amp, cfg.threads)
    pre = Pretrained(Path(cfg.data[0]), cfg.which)
    data = data_dir()
    train_files = [Path(p) for p in cfg.qa_train] or [data / TYDIQA_EN_TRAIN]
    pre.lang_index(cfg.train_lang)
    exclude = {p.resolve() for p in train_files}
    requested = cfgmod.parse_langs(cfg.lang)
    for lang in requested:
        pre.lang_index(lang)
    bad: dict[str, qd.BadAnswers] = {}

    def read(path: Path, limit: int) -> list[qd.Question]:
        bad[str(path)] = qd.BadAnswers()
        return qd.read_squad(path, bad[str(path)], limit)

    questions = [q for p in train_files for q in read(p, 0)]  # (bad input fails before --out is claimed)
    sets: dict[str, dict[str, Path]] = {}
    for qa_set in cfg.qa_sets:
        files = test_files(data, qa_set, exclude)
        langs = [l for l in order_langs(requested or [l for l in files if l in pre.langs]) if l in files]
        if langs:
            sets[qa_set] = {l: files[l] for l in langs}
    if not sets:
        raise BadInput(f"no test file of {', '.join(cfg.qa_sets)} under {data} for the run's languages "
                       f"({', '.join(requested or pre.langs)})")

    config, finished = start(cfg, OWNS)
    if finished is not None:
        return finished

    ui.info("finetune qa: encoding the questions with the run's text pipeline ...")
    if cfg.max_train_questions:
        questions = questions[: cfg.max_train_questions]
    train_q, select_q = qd.holdout(questions)
    train_q = [q for q in train_q if q.span is not None]
    if not train_q or not select_q:
        raise BadInput(f"too few questions to train and select on ({len(train_q)} with an answer / {len(select_q)})",
                       path=train_files[0])
    shape = (cfg.max_seq_len, cfg.doc_stride, cfg.max_query_len)
    train = qd.encode(train_q, pre.text_encoder, cfg.train_lang, *shape)
    select = qd.encode(select_q, pre.text_encoder, cfg.train_lang, *shape)
    test = {(s, l): qd.encode(read(p, cfg.max_eval_questions), pre.text_encoder, l, *shape)
            for s, files in sets.items() for l, p in files.items()}
    for path, b in bad.items():
        if b.count:
            ui.warn(f"{path}: {ui.plural(b.count, 'answer')} not at their answer_start (first: {b.first})")

    found = search(cfg.out / "runs" / "transfer", cfg.lr or DEFAULT_LR, cfg.batch_size or DEFAULT_BATCH_SIZE, cfg.seeds,
                   lambda d, lr, bs, seed: train_one(d, pre, train, select, lr, bs, seed, cfg, rt))
    for seed in cfg.seeds:
        model = ckpt.load_model(found["best"][seed], rt.device)
        for (qa_set, lang), enc in [(("dev", cfg.train_lang), select)] + list(test.items()):
            pred = predict(model, enc, pre.lang_index(lang), rt.device, cfg.eval_batch_size, cfg.n_best,
                           cfg.max_answer_len)
            lines = [json.dumps({"id": q.id, "lang": lang, "gold": q.answers, "pred": p}, ensure_ascii=False)
                     for q, p in zip(enc.questions, pred)]
            write_text_atomic(cfg.out / "predictions" / f"seed{seed}" / f"{qa_set}.{lang}.jsonl", "\n".join(lines) + "\n")

    summary = summarize(cfg, pre, {s: list(f) for s, f in sets.items()},
                        {"grid": found["grid"], "selected": found["selected"]})
    summary["bad_answers"] = {p: b.to_dict() for p, b in bad.items() if b.count}
    summary["unplaced_answers"] = train.unplaced + select.unplaced
    summary["files"] = {"train": [str(p) for p in train_files], "select": f"10% of {', '.join(map(str, train_files))}",
                        "test": {s: {l: str(p) for l, p in f.items()} for s, f in sets.items()},
                        "questions": {"train": len(train_q), "select": len(select_q),
                                      **{f"{s}.{l}": len(e.questions) for (s, l), e in test.items()}},
                        "windows": {"train": len(train)}}
    write_json_atomic(cfg.out / "results.json", summary)
    write_text_atomic(cfg.out / "report.md", report_md(summary))
    manifest = new_manifest("finetune", config, upstream=pre.upstream(), encoding=pre.config.lang_encoding,
                            langs=sorted({l for f in sets.values() for l in f}), task="qa")
    inputs = train_files + [p for f in sets.values() for p in f.values()]
    manifest["inputs"] = [{"path": str(p), "sha256": sha256_file(p)} for p in inputs]
    manifest["outputs"] = {"results": "results.json", "report": "report.md", "predictions": "predictions"}
    write_manifest(cfg.out, manifest)
    return summary


def summarize(cfg: QaConfig, pre: Pretrained, sets: dict[str, list[str]], found: dict[str, Any]) -> dict[str, Any]:
    """F1 / EM per set, seed and language, recomputed from the prediction files just written."""
    per_set: dict[str, Any] = {}
    for qa_set, langs in sets.items():
        f1: dict[str, dict[str, float]] = {}
        em: dict[str, dict[str, float]] = {}
        n: dict[str, int] = {}
        for seed in cfg.seeds:
            for lang in langs:
                s = scores_of_file(cfg.out / "predictions" / f"seed{seed}" / f"{qa_set}.{lang}.jsonl")
                f1.setdefault(str(seed), {})[lang], em.setdefault(str(seed), {})[lang], n[lang] = s["f1"], s["em"], s["n"]
        f1_mean = {l: float(np.mean([f1[s][l] for s in f1])) for l in langs}
        em_mean = {l: float(np.mean([em[s][l] for s in em])) for l in langs}
        others = [f1_mean[l] for l in langs if l != cfg.train_lang]
        per_set[qa_set] = {"langs": langs, "f1": f1, "em": em, "f1_mean": f1_mean, "em_mean": em_mean,
                           "f1_avg": float(np.mean(list(f1_mean.values()))),
                           "em_avg": float(np.mean(list(em_mean.values()))),
                           "f1_gap": (f1_mean[cfg.train_lang] - float(np.mean(others))
                                      if cfg.train_lang in f1_mean and others else math.nan),
                           "questions": n}
    dev = [scores_of_file(cfg.out / "predictions" / f"seed{s}" / f"dev.{cfg.train_lang}.jsonl") for s in cfg.seeds]
    return {"task": "qa", "encoding": pre.config.lang_encoding, "pretrain_run": str(pre.run),
            "train_lang": cfg.train_lang, "seeds": cfg.seeds, "sets": per_set,
            "select": {"f1": float(np.mean([d["f1"] for d in dev])), "em": float(np.mean([d["em"] for d in dev])),
                       "questions": dev[0]["n"]},
            "frozen_projections": pre.frozen_when_finetuning and not cfg.unfreeze_projections,
            "out": str(cfg.out), **found}


def report_md(summary: dict[str, Any]) -> str:
    md = [f"# Zero-shot QA ({summary['encoding']}), trained on {summary['train_lang']}", "",
          f"F1 / EM (%) per language, mean over seeds {', '.join(map(str, summary['seeds']))}; selection "
          f"({summary['train_lang']}, held out): F1 {summary['select']['f1']:.1f}, EM {summary['select']['em']:.1f}. "
          "Trained on TyDiQA-GoldP English train by default (3,696 questions): about 24x less than the SQuAD v1.1 "
          "train (87,599) XTREME uses for XQuAD and MLQA, so the scores are not comparable to its tables.", ""]
    for qa_set, s in summary["sets"].items():
        rows = [[l, f"{s['f1_mean'][l]:.1f}", f"{s['em_mean'][l]:.1f}", str(s["questions"][l])] for l in s["langs"]]
        rows.append(["avg", f"{s['f1_avg']:.1f}", f"{s['em_avg']:.1f}", ""])
        md += [f"## {qa_set}", "", markdown_table(["lang", "F1", "EM", "questions"], rows), ""]
    for path, b in summary.get("bad_answers", {}).items():
        md.append(f"- {path}: {b['count']} answers not at their answer_start (first: {b['first']})")
    return "\n".join(md) + "\n"


def print_summary(summary: dict[str, Any]) -> None:
    for qa_set, s in summary["sets"].items():
        print_seed_table(f"xlp finetune qa ({summary['encoding']}): {qa_set} F1 (zero-shot from "
                         f"{summary['train_lang']})", s["langs"], s["f1"])
    ui.out.print(f"selection F1 {summary['select']['f1']:.1f}; selected lr={summary['selected']['lr']:g} "
                 f"batch size={summary['selected']['batch_size']}; out: {summary['out']}")
