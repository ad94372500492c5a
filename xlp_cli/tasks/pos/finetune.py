"""`xlp finetune --task pos`: XTREME's zero-shot POS tagging on a pre-trained encoder.

Train a token classifier (`models/heads.TokenClassifier`, 17 UD v2 tags) on English UD, select the checkpoint
on English, tag the test sets of every UD language the run knows. The shared EWT copy has no train file, so the
default training set is EWT **dev** (90% of its sentences; the other 10%, split by a hash of the sentence id,
select the checkpoint) and English is tested on EWT test + PUD, never seen in training (docs/evaluate.md).

Runs: the grid --lr x --batch-size x --seeds (`tasks/finetuning.search`), each point in
`runs/transfer/lr<lr>-bs<bs>-seed<S>/`; the selected point's best checkpoint per seed writes
`predictions/seed<S>/test.<lang>.jsonl` (one sentence per line: {"id", "lang", "gold": [UPOS...],
"pred": [UPOS... or "" past --max-len]}) and `predictions/seed<S>/dev.<train-lang>.jsonl` (the selection set).
The objective (`Tag`) and the tagger's predictions (`predict`) are in `objective.py`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from xlp_cli.artifacts import outdir
from xlp_cli.artifacts.files import data_dir, sha256_file, write_json_atomic, write_text_atomic
from xlp_cli.artifacts.manifest import new_manifest, write_manifest
from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.models.heads import TokenClassifier, freeze_language_parameters
from xlp_cli.reporting.render import order_langs
from xlp_cli.tasks import conllu
from xlp_cli.tasks.common import print_seed_table
from xlp_cli.tasks.finetuning import Pretrained, fit_point, prediction_scores, search, start, transfer
from xlp_cli.tasks.pos import data as pd
from xlp_cli.tasks.pos.config import DEFAULT_BATCH_SIZE, DEFAULT_LR, EWT_DEV, PosConfig
from xlp_cli.tasks.pos.objective import Tag, predict
from xlp_cli.tasks.pos.scores import token_accuracy
from xlp_cli.train import engine
from xlp_cli.train.runtime import Runtime


# ---------------------------------------------------------------- training
def train_one(run_dir: Path, pre: Pretrained, train: pd.Tagged, select: pd.Tagged, lr: float, bs: int, seed: int,
              cfg: PosConfig, rt: Runtime) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = pre.new_head(TokenClassifier, cfg.dropout, rt.device, n_labels=len(conllu.UPOS))
    frozen = [] if cfg.unfreeze_projections else freeze_language_parameters(model, model.encoder)
    objective = Tag(train, select, pre.lang_index, bs, seed, cfg.epoch_size, cfg.eval_batch_size, rt)
    total = cfg.epochs * objective.steps_per_epoch
    if cfg.max_steps:
        total = min(total, cfg.max_steps)
    settings = engine.Settings.from_config(cfg, max_steps=total, lr=lr, betas=(0.9, 0.999), eps=1e-8, seed=seed,
                                           eval_every=objective.steps_per_epoch, save_every=cfg.save_every,
                                           label=f"pos/{run_dir.name}")
    return fit_point(run_dir, model, objective, settings, rt, {"lr": lr, "batch_size": bs, "seed": seed,
                     "frozen": frozen, "train_sentences": len(train)})


# ---------------------------------------------------------------- the data
def test_files(ud_dir: Path, exclude: set[Path]) -> dict[str, list[Path]]:
    """Per language: its test files (every treebank), or its unsplit files when it has no test file (sw)."""
    by_lang: dict[str, dict[str, list[Path]]] = {}
    for lang, split, path in conllu.treebank_files(ud_dir):
        if path.resolve() not in exclude:
            by_lang.setdefault(lang, {}).setdefault(split, []).append(path)
    return {l: s.get("test") or s.get("other") for l, s in by_lang.items() if s.get("test") or s.get("other")}


OWNS = ("results.json", "predictions", "runs", "encoded")  # what POS fine-tuning writes in FT (outdir.py)


@outdir.scoped
def run(cfg: PosConfig) -> dict[str, Any]:
    rt = Runtime.create(cfg.device, cfg.amp, cfg.threads)
    pre = Pretrained(Path(cfg.data[0]), cfg.which)
    data = data_dir()
    ud_dir = Path(cfg.ud_dir) if cfg.ud_dir else data / "ud_treebanks"
    train_file = Path(cfg.ud_train) if cfg.ud_train else data / EWT_DEV
    if not ud_dir.is_dir():
        raise BadInput("no UD treebank folder", path=ud_dir)
    pre.lang_index(cfg.train_lang)
    exclude = {train_file.resolve()} | ({Path(cfg.ud_dev).resolve()} if cfg.ud_dev else set())
    tests = test_files(ud_dir, exclude)
    requested = cfgmod.parse_langs(cfg.lang)
    for lang in requested:
        pre.lang_index(lang)
        if lang not in tests:
            raise BadInput(f"no UD test file for {lang!r} under {ud_dir}")
    langs = order_langs(requested or [l for l in tests if l in pre.langs])
    if not langs:
        raise BadInput(f"none of the run's languages ({', '.join(pre.langs)}) has a UD test file", path=ud_dir)
    room = pre.config.n_positions - pre.prefix_len
    if cfg.max_len > room:  # (the range of --max-len is the flag's; this bound is the model's)
        raise BadInput(f"--max-len {cfg.max_len} is longer than the pre-trained model's {room} positions; "
                       f"give at most {room}", path=pre.run)

    config, finished = start(cfg, OWNS)
    if finished is not None:
        return finished

    ui.info("finetune pos: reading UD and encoding words with the run's text pipeline ...")
    cache = cfg.out / "encoded"
    sents = pd.read_sentences([train_file], cfg.max_train_sentences)
    if cfg.ud_dev:
        train_s, select_s = sents, pd.read_sentences([Path(cfg.ud_dev)])
    else:
        train_s, select_s = pd.holdout(sents)
    if not train_s or not select_s:
        raise BadInput(f"too few sentences to train and select on ({len(train_s)} / {len(select_s)})", path=train_file)
    train = pd.cached_encode(cache / f"train.{cfg.train_lang}", train_s, pre.text_encoder, cfg.train_lang, cfg.max_len)
    select = pd.cached_encode(cache / f"dev.{cfg.train_lang}", select_s, pre.text_encoder, cfg.train_lang, cfg.max_len)
    test = {l: pd.cached_encode(cache / f"test.{l}", pd.read_sentences(tests[l], cfg.max_eval_sentences),
                                pre.text_encoder, l, cfg.max_len) for l in langs}

    found = search(cfg.out / "runs" / "transfer", cfg.lr or DEFAULT_LR, cfg.batch_size or DEFAULT_BATCH_SIZE, cfg.seeds,
                   lambda d, lr, bs, seed: train_one(d, pre, train, select, lr, bs, seed, cfg, rt))
    for seed in cfg.seeds:
        model = ckpt.load_model(found["best"][seed], rt.device)
        for split, lang, enc in [("dev", cfg.train_lang, select)] + [("test", l, test[l]) for l in langs]:
            pred = predict(model, enc, pre.lang_index(lang), rt.device, cfg.eval_batch_size)
            lines = [json.dumps({"id": i, "lang": lang, "gold": g, "pred": p}, ensure_ascii=False)
                     for i, g, p in zip(enc.sent_ids, enc.gold, pred)]
            write_text_atomic(cfg.out / "predictions" / f"seed{seed}" / f"{split}.{lang}.jsonl", "\n".join(lines) + "\n")

    summary = summarize(cfg, pre, langs, {"grid": found["grid"], "selected": found["selected"]})
    summary["files"] = {"train": str(train_file), "select": str(cfg.ud_dev or f"10% of {train_file}"),
                        "test": {l: [str(p) for p in tests[l]] for l in langs},
                        "sentences": {"train": len(train), "select": len(select), **{l: len(test[l]) for l in langs}}}
    write_json_atomic(cfg.out / "results.json", summary)
    manifest = new_manifest("finetune", config, upstream=pre.upstream(), encoding=pre.config.lang_encoding,
                            langs=langs, task="pos")
    inputs = [train_file] + ([Path(cfg.ud_dev)] if cfg.ud_dev else []) + [p for l in langs for p in tests[l]]
    manifest["inputs"] = [{"path": str(p), "sha256": sha256_file(p)} for p in inputs]
    manifest["outputs"] = {"results": "results.json", "predictions": "predictions"}
    write_manifest(cfg.out, manifest)
    return summary


def summarize(cfg: PosConfig, pre: Pretrained, langs: list[str], found: dict[str, Any]) -> dict[str, Any]:
    """Word accuracy per seed and language, recomputed from the prediction files just written."""
    scores = prediction_scores(cfg.out, cfg.seeds, langs, lambda rows: token_accuracy((r["gold"], r["pred"]) for r in rows)[0])
    acc = {seed: per["test"] for seed, per in scores.items()}
    return {"task": "pos", "encoding": pre.config.lang_encoding, "pretrain_run": str(pre.run), "langs": langs,
            "train_lang": cfg.train_lang, "seeds": cfg.seeds, "accuracy": acc, **transfer(acc, langs, cfg.train_lang),
            "frozen_projections": pre.frozen_when_finetuning and not cfg.unfreeze_projections,
            "out": str(cfg.out), **found}


def print_summary(summary: dict[str, Any]) -> None:
    print_seed_table(f"xlp finetune pos ({summary['encoding']}): test word accuracy (zero-shot from "
                     f"{summary['train_lang']})", summary["langs"], summary["accuracy"])
    ui.out.print(f"transfer gap {summary['gap']:.1f}; selected lr={summary['selected']['lr']:g} "
                 f"batch size={summary['selected']['batch_size']}; out: {summary['out']}")
