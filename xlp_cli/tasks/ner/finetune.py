"""`xlp finetune --task ner`: XTREME's zero-shot NER (PAN-X / WikiANN) on a pre-trained encoder.

Train a token classifier (`models/heads.TokenClassifier`, 7 BIO tags over PER, ORG, LOC) on the English PAN-X
train file, select the checkpoint by entity F1 on English dev, tag the test file of every language the run knows
(XTREME's protocol). Words are encoded one by one with the run's own pipeline and labelled on their first subword
(`pos/data.py`). Runs: the grid --lr x --batch-size x --seeds (`tasks/finetuning.search`); the selected point's
best checkpoint per seed writes `predictions/seed<S>/test.<lang>.jsonl` ({"id", "lang", "gold": [BIO...],
"pred": [BIO... or "" past --max-len]}) and `predictions/seed<S>/dev.<train-lang>.jsonl`.
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
from xlp_cli.tasks.common import print_seed_table
from xlp_cli.tasks.finetuning import Pretrained, fit_point, prediction_scores, search, start, transfer
from xlp_cli.tasks.ner import data as nd
from xlp_cli.tasks.ner.config import DEFAULT_BATCH_SIZE, DEFAULT_LR, NerConfig
from xlp_cli.tasks.ner.objective import TagEntities, predict
from xlp_cli.tasks.ner.scores import entity_f1
from xlp_cli.train import engine
from xlp_cli.train.runtime import Runtime

OWNS = ("results.json", "predictions", "runs", "encoded")  # what NER fine-tuning writes in FT (outdir.py)


def train_one(run_dir: Path, pre: Pretrained, train: nd.NerTagged, select: nd.NerTagged, lr: float, bs: int, seed: int,
              cfg: NerConfig, rt: Runtime) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = pre.new_head(TokenClassifier, cfg.dropout, rt.device, n_labels=len(nd.TAGS))
    frozen = [] if cfg.unfreeze_projections else freeze_language_parameters(model, model.encoder)
    objective = TagEntities(train, select, pre.lang_index, bs, seed, cfg.epoch_size, cfg.eval_batch_size, rt)
    total = cfg.epochs * objective.steps_per_epoch
    if cfg.max_steps:
        total = min(total, cfg.max_steps)
    settings = engine.Settings.from_config(cfg, max_steps=total, lr=lr, betas=(0.9, 0.999), eps=1e-8, seed=seed,
                                           eval_every=objective.steps_per_epoch, save_every=cfg.save_every,
                                           label=f"ner/{run_dir.name}")
    return fit_point(run_dir, model, objective, settings, rt, {"lr": lr, "batch_size": bs, "seed": seed,
                     "frozen": frozen, "train_sentences": len(train)})


def _read(path: Path | None, what: str, lang: str, limit: int) -> nd.Read:
    if path is None:
        raise BadInput(f"no PAN-X {what} file for {lang!r} (<lang>-<split> or <split>-<lang>.tsv); see "
                       "docs/evaluate.md for where to get PAN-X")
    read = nd.read_panx(path, lang, limit)
    if not read.sentences:
        raise BadInput("no sentences", path=path)
    return read


@outdir.scoped
def run(cfg: NerConfig) -> dict[str, Any]:
    rt = Runtime.create(cfg.device, cfg.amp, cfg.threads)
    pre = Pretrained(Path(cfg.data[0]), cfg.which)
    panx = Path(cfg.panx_dir) if cfg.panx_dir else data_dir() / "panx"
    if not panx.is_dir():
        raise BadInput("no PAN-X folder (XTREME's panx_dataset; docs/evaluate.md says where to get it)", path=panx)
    tl = cfg.train_lang
    pre.lang_index(tl)
    requested = cfgmod.parse_langs(cfg.lang)
    for lang in requested:
        pre.lang_index(lang)
        if nd.panx_file(panx, lang, "test") is None:
            raise BadInput(f"no PAN-X test file for {lang!r} under {panx}")
    langs = order_langs(requested or [l for l in pre.langs if nd.panx_file(panx, l, "test") is not None])
    if not langs:
        raise BadInput(f"none of the run's languages ({', '.join(pre.langs)}) has a PAN-X test file", path=panx)

    config, finished = start(cfg, OWNS)
    if finished is not None:
        return finished

    ui.info("finetune ner: reading PAN-X and encoding words with the run's text pipeline ...")
    reads = {"train": _read(nd.panx_file(panx, tl, "train"), "train", tl, cfg.max_train_sentences),
             "dev": _read(nd.panx_file(panx, tl, "dev"), "dev", tl, cfg.max_eval_sentences)}
    reads.update({f"test.{l}": _read(nd.panx_file(panx, l, "test"), "test", l, cfg.max_eval_sentences) for l in langs})
    for name, r in reads.items():
        if r.i_starts:
            ui.warn(f"ner: {r.i_starts} {name} sentence(s) of {r.files[0]} open an entity with I- (first at "
                    f"{r.first_i_start}); scored as seqeval does: the I- starts an entity")
    cache = cfg.out / "encoded"
    train = nd.cached_encode(cache / f"train.{tl}", reads["train"].sentences, pre.text_encoder, tl, cfg.max_len)
    select = nd.cached_encode(cache / f"dev.{tl}", reads["dev"].sentences, pre.text_encoder, tl, cfg.max_len)
    test = {l: nd.cached_encode(cache / f"test.{l}", reads[f"test.{l}"].sentences, pre.text_encoder, l, cfg.max_len)
            for l in langs}

    found = search(cfg.out / "runs" / "transfer", cfg.lr or DEFAULT_LR, cfg.batch_size or DEFAULT_BATCH_SIZE, cfg.seeds,
                   lambda d, lr, bs, seed: train_one(d, pre, train, select, lr, bs, seed, cfg, rt))
    for seed in cfg.seeds:
        model = ckpt.load_model(found["best"][seed], rt.device)
        for split, lang, enc in [("dev", tl, select)] + [("test", l, test[l]) for l in langs]:
            pred = predict(model, enc, pre.lang_index(lang), rt.device, cfg.eval_batch_size)
            lines = [json.dumps({"id": i, "lang": lang, "gold": g, "pred": p}, ensure_ascii=False)
                     for i, g, p in zip(enc.sent_ids, enc.gold, pred)]
            write_text_atomic(cfg.out / "predictions" / f"seed{seed}" / f"{split}.{lang}.jsonl", "\n".join(lines) + "\n")

    summary = summarize(cfg, pre, langs, {"grid": found["grid"], "selected": found["selected"]})
    summary["files"] = {name: str(r.files[0]) for name, r in reads.items()}
    summary["sentences"] = {name: len(r.sentences) for name, r in reads.items()}
    summary["i_starts"] = {name: {"sentences": r.i_starts, "first": r.first_i_start}
                           for name, r in reads.items() if r.i_starts}
    write_json_atomic(cfg.out / "results.json", summary)
    manifest = new_manifest("finetune", config, upstream=pre.upstream(), encoding=pre.config.lang_encoding,
                            langs=langs, task="ner")
    manifest["inputs"] = [{"path": str(r.files[0]), "sha256": sha256_file(r.files[0])} for r in reads.values()]
    manifest["outputs"] = {"results": "results.json", "predictions": "predictions"}
    write_manifest(cfg.out, manifest)
    return summary


def summarize(cfg: NerConfig, pre: Pretrained, langs: list[str], found: dict[str, Any]) -> dict[str, Any]:
    """Entity F1 per seed and language, recomputed from the prediction files just written."""
    scores = prediction_scores(cfg.out, cfg.seeds, langs, lambda rows: entity_f1((r["gold"], r["pred"]) for r in rows)[0])
    f1 = {seed: per["test"] for seed, per in scores.items()}
    return {"task": "ner", "encoding": pre.config.lang_encoding, "pretrain_run": str(pre.run), "langs": langs,
            "train_lang": cfg.train_lang, "seeds": cfg.seeds, "f1": f1, **transfer(f1, langs, cfg.train_lang),
            "frozen_projections": pre.frozen_when_finetuning and not cfg.unfreeze_projections,
            "out": str(cfg.out), **found}


def print_summary(summary: dict[str, Any]) -> None:
    print_seed_table(f"xlp finetune ner ({summary['encoding']}): test entity F1 (zero-shot from "
                     f"{summary['train_lang']})", summary["langs"], summary["f1"])
    ui.out.print(f"transfer gap {summary['gap']:.1f}; selected lr={summary['selected']['lr']:g} "
                 f"batch size={summary['selected']['batch_size']}; out: {summary['out']}")
