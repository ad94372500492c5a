"""`xlp finetune --task pawsx`: PAWS-X paraphrase identification on XNLI's code path (a sentence-pair classifier
on the first position, `xnli/objective.Classify`, `tasks/finetuning.search`), with 2 labels.

Data (`pawsx/data.py`): the shared PAWS-X has labelled dev rows only (2,000 per language, parallel across
languages; the test files carry no labels). The rows are cut by a hash of the row index into a test part
(`--test-fraction`, default half) and the rest, of which 90% train and 10% select the checkpoint.
    transfer         train on --train-lang's training rows (English), select on its selection rows, test every
                     language on its test part (zero-shot: no test pair was trained on in any language).
    translate-train  one model per language, trained on that language's own training rows (human translations of
                     the English pairs, the substitute for XTREME's machine-translated training set), selected on its
                     selection rows, tested on its test part. With `--veco plug-in` every example is paired with
                     its translation in --plug-in-lang: machine-translated by --plug-in-translator (`xnli/pairs.py`)
                     or, with --plug-in-pairs oracle, the human row of the same index.
Outputs as XNLI's: `predictions/seed<S>/{dev,test}.<lang>.jsonl` ({"id", "lang", "gold", "pred"} with labels
paraphrase / not_paraphrase), results.json, runs/<group>/lr<lr>-bs<bs>-seed<S>/.
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
from xlp_cli.models.heads import PlugInClassifier, SequenceClassifier, freeze_language_parameters
from xlp_cli.reporting.render import order_langs
from xlp_cli.tasks.common import print_seed_table
from xlp_cli.tasks.finetuning import Pretrained, fit_point, accuracy, prediction_scores, search, start, transfer
from xlp_cli.tasks.pawsx import data as px
from xlp_cli.tasks.pawsx.config import DEFAULT_BATCH_SIZE, DEFAULT_LR, PawsxConfig
from xlp_cli.tasks.xnli import data as xd
from xlp_cli.tasks.xnli.objective import Classify, LangIds, predict
from xlp_cli.tasks.xnli.pairs import Translator, translated
from xlp_cli.train import engine
from xlp_cli.train.runtime import Runtime

OWNS = ("results.json", "predictions", "runs", "encoded", "plug_in_pairs")


def new_model(pre: Pretrained, cfg: PawsxConfig, device: torch.device) -> torch.nn.Module:
    if cfg.veco == "plug-in":  # the encoder keeps its cross-attention (VECO 3.1)
        return PlugInClassifier(ckpt.load_pretrained(pre.run, pre.which), n_labels=2, dropout=cfg.dropout).to(device)
    return pre.new_head(SequenceClassifier, cfg.dropout, device, n_labels=2)


def train_one(run_dir: Path, pre: Pretrained, train: list[xd.Encoded], select: dict[str, xd.Encoded],
              lr: float, bs: int, seed: int, cfg: PawsxConfig, rt: Runtime) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = new_model(pre, cfg, rt.device)
    frozen = [] if cfg.unfreeze_projections else freeze_language_parameters(model, model.encoder)
    objective = Classify(train, select, pre.lang_index, bs, seed, cfg.epoch_size, cfg.eval_batch_size, rt)
    total = cfg.epochs * objective.steps_per_epoch
    if cfg.max_steps:
        total = min(total, cfg.max_steps)
    settings = engine.Settings.from_config(cfg, max_steps=total, lr=lr, betas=(0.9, 0.999), eps=1e-8, seed=seed,
                                           eval_every=objective.steps_per_epoch, save_every=cfg.save_every,
                                           label=f"pawsx/{run_dir.parent.name}/{run_dir.name}")
    return fit_point(run_dir, model, objective, settings, rt, {"lr": lr, "batch_size": bs, "seed": seed,
                     "frozen": frozen, "train_examples": len(objective.seqs)})


def pair_language(cfg: PawsxConfig, lang: str, langs: list[str]) -> str:
    if lang != cfg.plug_in_lang:
        return cfg.plug_in_lang
    others = [l for l in langs if l != lang]
    if not others:
        raise BadInput(f"--veco plug-in: '{lang}' is the --plug-in-lang and no other language is left to pair its "
                       "examples with; add one to --lang")
    return others[0]


def groups(cfg: PawsxConfig, langs: list[str], parts: dict[str, dict[str, list[xd.Example]]], files: dict[str, Path],
           enc: Any, translate: Translator | None) -> list[dict[str, Any]]:
    """[{name, source, train, select, predict}] of the setting (as `xnli/groups.py`)."""
    cap = (lambda rows: rows[: cfg.max_train_rows]) if cfg.max_train_rows else (lambda rows: rows)
    if cfg.setting == "transfer":
        tl = cfg.train_lang
        sel = enc("select", tl, parts[tl]["select"])
        return [{"name": "transfer", "source": f"{tl} training part", "train": [enc("train", tl, cap(parts[tl]["train"]))],
                 "select": {tl: sel}, "predict": {l: {"test": enc("test", l, parts[l]["test"]),
                                                      **({"dev": sel} if l == tl else {})} for l in langs}}]
    out = []
    for lang in langs:
        rows = {"train": cap(parts[lang]["train"]), "select": parts[lang]["select"], "test": parts[lang]["test"]}
        e = {name: enc(name, lang, r) for name, r in rows.items()}
        source = f"{lang} training part" + ("" if lang == "en" else " (human translations of the English pairs)")
        if cfg.veco == "plug-in":
            plang = pair_language(cfg, lang, langs)
            for name, mine in rows.items():
                if translate is not None:
                    partner = translated(mine, lang, plang, translate, cfg.out / "plug_in_pairs" / name)
                else:
                    partner = xd.pair_examples(mine, parts[plang][name], files[plang])
                e[name].pair = enc(f"{name}-pair-of-{lang}", plang, partner)
            source += f"; plug-in pairs: {plang}, " + ("machine-translated" if translate else "oracle (human rows)")
        out.append({"name": lang, "source": source, "train": [e["train"]], "select": {lang: e["select"]},
                    "predict": {lang: {"dev": e["select"], "test": e["test"]}}})
    return out


@outdir.scoped
def run(cfg: PawsxConfig) -> dict[str, Any]:
    rt = Runtime.create(cfg.device, cfg.amp, cfg.threads)
    pre = Pretrained(Path(cfg.data[0]), cfg.which)
    folder = Path(cfg.pawsx_dir) if cfg.pawsx_dir else data_dir() / "pawsx"
    if not folder.is_dir():
        raise BadInput("no PAWS-X folder", path=folder)
    requested = cfgmod.parse_langs(cfg.lang)
    for lang in requested:
        pre.lang_index(lang)
        if px.dev_file(folder, lang) is None:
            raise BadInput(f"no PAWS-X file dev-{lang}.tsv[.gz] under {folder}")
    langs = order_langs(requested or [l for l in pre.langs if px.dev_file(folder, l) is not None])
    if not langs:
        raise BadInput(f"none of the run's languages ({', '.join(pre.langs)}) has a PAWS-X dev file", path=folder)
    plug_in = cfg.veco == "plug-in"
    if plug_in and not pre.cross_attention:
        raise BadInput("--veco plug-in needs a VECO pre-training run (an encoder with cross-attention)", path=pre.run)
    need = set(langs) | ({cfg.train_lang} if cfg.setting == "transfer" else set())
    if plug_in:
        need |= {pair_language(cfg, l, langs) for l in langs}
    for lang in need:
        pre.lang_index(lang)
        if px.dev_file(folder, lang) is None:
            raise BadInput(f"no PAWS-X file dev-{lang}.tsv[.gz] under {folder}")
    translate = Translator(cfg.plug_in_translator, rt.device) if plug_in and cfg.plug_in_pairs == "translated" else None

    config, finished = start(cfg, OWNS)
    if finished is not None:
        return finished

    files = {l: px.dev_file(folder, l) for l in sorted(need)}
    parts = {l: px.split_rows(px.read_tsv(p, l), cfg.test_fraction) for l, p in files.items()}
    if cfg.max_eval_rows:
        for p in parts.values():
            p["test"] = p["test"][: cfg.max_eval_rows]
    cache = cfg.out / "encoded"
    max_total = pre.config.n_positions - pre.prefix_len

    def enc(split: str, lang: str, rows: list[xd.Example]) -> xd.Encoded:
        if not rows:
            raise BadInput(f"no {lang} rows in the {split} part (--test-fraction {cfg.test_fraction})", path=files[lang])
        return xd.cached_encode(cache / f"{split}.{lang}", rows, pre.text_encoder, lang, cfg.max_len, max_total)

    ui.info("finetune pawsx: encoding sentence pairs with the run's text pipeline ...")
    results: dict[str, Any] = {"groups": {}}
    for g in groups(cfg, langs, parts, files, enc, translate):
        found = search(cfg.out / "runs" / g["name"], cfg.lr or DEFAULT_LR, cfg.batch_size or DEFAULT_BATCH_SIZE,
                       cfg.seeds, lambda d, lr, bs, seed: train_one(d, pre, g["train"], g["select"], lr, bs, seed, cfg, rt))
        results["groups"][g["name"]] = {"grid": found["grid"], "selected": found["selected"], "source": g["source"]}
        for seed in cfg.seeds:
            model = ckpt.load_model(found["best"][seed], rt.device)
            for lang, splits in g["predict"].items():
                for split, e in splits.items():
                    write_predictions(cfg.out / "predictions" / f"seed{seed}" / f"{split}.{lang}.jsonl", model, e,
                                      LangIds([e], pre.lang_index), rt.device, cfg.eval_batch_size)

    summary = summarize(cfg, pre, langs, results)
    summary["rows"] = {l: {k: len(v) for k, v in p.items()} for l, p in parts.items()}
    write_json_atomic(cfg.out / "results.json", summary)
    manifest = new_manifest("finetune", config, upstream=pre.upstream(), encoding=pre.config.lang_encoding,
                            langs=langs, task="pawsx")
    manifest["inputs"] = [{"path": str(p), "sha256": sha256_file(p)} for p in files.values()]
    manifest["outputs"] = {"results": "results.json", "predictions": "predictions"}
    write_manifest(cfg.out, manifest)
    return summary


def write_predictions(path: Path, model: torch.nn.Module, enc: xd.Encoded, langs: LangIds, device: torch.device,
                      bs: int) -> None:
    pred = predict(model, enc, langs, device, bs)
    lines = [json.dumps({"id": i, "lang": enc.lang, "gold": px.LABELS[int(g)], "pred": px.LABELS[int(p)]},
                        ensure_ascii=False) for i, g, p in zip(enc.example_ids, enc.labels, pred)]
    write_text_atomic(path, "\n".join(lines) + "\n")


def summarize(cfg: PawsxConfig, pre: Pretrained, langs: list[str], results: dict[str, Any]) -> dict[str, Any]:
    """Accuracy per seed, split and language, recomputed from the prediction files just written."""
    acc = prediction_scores(cfg.out, cfg.seeds, langs, accuracy, ("dev", "test"))
    test = {seed: per.get("test", {}) for seed, per in acc.items()}
    return {"task": "pawsx", "setting": cfg.setting, "veco": cfg.veco if pre.cross_attention else None,
            "encoding": pre.config.lang_encoding, "pretrain_run": str(pre.run), "langs": langs, "seeds": cfg.seeds,
            "accuracy": acc, **transfer(test, langs, cfg.train_lang),
            "frozen_projections": pre.frozen_when_finetuning and not cfg.unfreeze_projections,
            "out": str(cfg.out), **results}


def print_summary(summary: dict[str, Any]) -> None:
    print_seed_table(f"xlp finetune pawsx ({summary['setting']}, {summary['encoding']}): test accuracy",
                     summary["langs"], {seed: per.get("test", {}) for seed, per in summary["accuracy"].items()})
    for name, g in summary.get("groups", {}).items():
        ui.out.print(f"{name}: selected lr={g['selected']['lr']:g} batch size={g['selected']['batch_size']}")
    ui.out.print(f"out: {summary['out']}")
