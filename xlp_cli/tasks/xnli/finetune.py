"""`xlp finetune --task xnli`: the XLP paper's XNLI fine-tuning (section 4.1, appendix A.2/B.1).

Settings
    transfer         train on English (MNLI), select on English dev (or the dev average), test on every language.
    translate-train  one model per language: train on that language's translated training file
                     (`--translated-train 'path/{lang}.tsv'`) or, when none is given, on 90% of its XNLI dev set
                     (the other 10%, split by premise hash, selects the checkpoint); test on its test set.

VECO (`--veco`, docs/veco.md): plug-out (default) fine-tunes a VECO run's encoder without its cross-attention;
plug-in (translate-train only) pairs every example with its translation in `--plug-in-lang` and classifies it
from [h_x; s_x]: by default its machine translation by `--plug-in-translator` (`pairs.py`), with `--plug-in-pairs
oracle` the human example of the same XNLI index (or the same row of the translated file).

Runs: the grid --lr x --batch-size x --seeds. The (lr, batch size) with the best mean selection accuracy over
seeds is kept; its best checkpoint per seed writes `predictions/seed<S>/{dev,test}.<lang>.jsonl`.
Each grid point trains in `runs/<group>/lr<lr>-bs<bs>-seed<seed>/` with `checkpoints/{last,best}`,
`metrics.jsonl` and `done.json`; a rerun skips finished points and resumes an interrupted one at its last
checkpoint (same data order: each epoch's permutation comes from (seed, epoch)).
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
from xlp_cli.models.heads import SequenceClassifier, freeze_language_parameters
from xlp_cli.reporting.render import XNLI_LANGS
from xlp_cli.tasks.common import print_seed_table
from xlp_cli.tasks.finetuning import Pretrained, fit_point, accuracy, prediction_scores, search, start, transfer
from xlp_cli.tasks.xnli import data as xd
from xlp_cli.tasks.xnli.config import DEFAULT_BATCH_SIZE, DEFAULT_LR, XnliConfig
from xlp_cli.tasks.xnli.groups import build as build_groups
from xlp_cli.tasks.xnli.objective import Classify, LangIds, predict
from xlp_cli.tasks.xnli.pairs import Translator
from xlp_cli.train import engine
from xlp_cli.train.runtime import Runtime


def train_one(run_dir: Path, pre: Pretrained, train: list[xd.Encoded], select: dict[str, xd.Encoded],
              lr: float, bs: int, seed: int, cfg: XnliConfig, rt: Runtime) -> dict[str, Any]:
    """Fine-tune one grid point on the engine (resuming its `last` checkpoint); returns done.json's content."""
    torch.manual_seed(seed)
    model = pre.new_classifier(cfg.dropout, rt.device, cfg.veco)
    frozen = [] if cfg.unfreeze_projections else freeze_language_parameters(model, model.encoder)
    objective = Classify(train, select, pre.lang_index, bs, seed, cfg.epoch_size, cfg.eval_batch_size, rt)
    if not objective.seqs:
        raise BadInput("no training examples")
    total = cfg.epochs * objective.steps_per_epoch
    if cfg.max_steps:
        total = min(total, cfg.max_steps) if cfg.epochs else cfg.max_steps
    settings = engine.Settings.from_config(cfg, max_steps=total, lr=lr, betas=(0.9, 0.999), eps=1e-8, seed=seed,
                                           eval_every=objective.steps_per_epoch, save_every=cfg.save_every,
                                           label=f"{run_dir.parent.name}/{run_dir.name}")
    return fit_point(run_dir, model, objective, settings, rt, {"lr": lr, "batch_size": bs, "seed": seed,
                     "frozen": frozen, "train_examples": len(objective.seqs)})


# ---------------------------------------------------------------- the stage
def _resolve(path: Path | None, default: str) -> Path:
    return Path(path) if path is not None else data_dir() / default


OWNS = ("results.json", "predictions", "runs", "encoded", "plug_in_pairs")  # what XNLI fine-tuning writes in FT (outdir.py)


@outdir.scoped
def run(cfg: XnliConfig) -> dict[str, Any]:
    rt = Runtime.create(cfg.device, cfg.amp, cfg.threads)
    run = Path(cfg.data[0])
    pre = Pretrained(run, cfg.which)
    lrs = cfg.lr or DEFAULT_LR
    bss = cfg.batch_size or DEFAULT_BATCH_SIZE
    dev_file = _resolve(cfg.dev_file, "xnli/xnli.dev.tsv")
    test_file = _resolve(cfg.test_file, "xnli/xnli.test.tsv")
    train_file = _resolve(cfg.train_file, "mnli_en/mnli_train.tsv")

    # languages: requested ones must have pre-training data; default = XNLI languages the model knows
    requested = cfgmod.parse_langs(cfg.lang)
    if requested:
        for lang in requested:
            pre.lang_index(lang)
        langs = requested
    else:
        langs = [l for l in XNLI_LANGS if l in pre.langs] + [l for l in pre.langs if l not in XNLI_LANGS]
    if cfg.setting == "transfer":
        pre.lang_index(cfg.train_lang)
    plug_in = cfg.veco == "plug-in"
    if plug_in and not pre.cross_attention:
        raise BadInput("--veco plug-in needs a VECO pre-training run (an encoder with cross-attention: --objective "
                       "ca-mlm, tlm+ca-mlm or mlm+ca-mlm)", path=run)
    oracle = plug_in and cfg.plug_in_pairs == "oracle"
    read_langs = set(langs) | ({cfg.plug_in_lang} if oracle else set())
    translate = Translator(cfg.plug_in_translator, rt.device) if plug_in and not oracle else None

    config, finished = start(cfg, OWNS)
    if finished is not None:
        return finished

    # data
    # a dev/test file without a language column (e.g. MNLI's validation set) is English
    dev, _ = xd.read_tsv(dev_file, default_lang="en", langs=read_langs | {cfg.train_lang}, max_rows_per_lang=cfg.max_eval_rows)
    test, _ = xd.read_tsv(test_file, default_lang="en", langs=read_langs, max_rows_per_lang=cfg.max_eval_rows)
    missing = [l for l in langs if l not in test]
    if missing:
        ui.warn(f"no XNLI test rows for {', '.join(missing)} in {test_file}; they are not evaluated")
        langs = [l for l in langs if l in test]
    if not langs:
        raise BadInput("none of the languages has test rows", path=test_file)
    cache = cfg.out / "encoded"
    max_total = pre.config.n_positions - pre.prefix_len

    bar = ui.progress()
    encoding = bar.add_task("xnli: encoding examples", total=None)

    def enc(split: str, lang: str, rows: list[xd.Example]) -> xd.Encoded:
        e = xd.cached_encode(cache / f"{split}.{lang}", rows, pre.text_encoder, lang, cfg.max_len, max_total)
        bar.update(encoding, advance=len(rows), info=f"{split} {lang}")
        return e

    with bar:
        groups, skipped_rows = build_groups(cfg, langs, dev, test, {"train": train_file, "dev": dev_file, "test": test_file},
                                            enc, lambda n: bar.update(encoding, total=n), translate)

    # grid x seeds
    results: dict[str, Any] = {"groups": {}}
    for g in groups:
        found = search(cfg.out / "runs" / g["name"], lrs, bss, cfg.seeds,
                       lambda d, lr, bs, seed: train_one(d, pre, g["train"], g["select"], lr, bs, seed, cfg, rt))
        results["groups"][g["name"]] = {"grid": found["grid"], "selected": found["selected"],
                                        "source": g.get("source", str(train_file))}
        # predictions of the selected point's best checkpoint, per seed
        sets = [(lang, split, e) for lang, splits in g["predict"].items() for split, e in splits.items() if e is not None]
        with ui.progress() as bar:
            task = bar.add_task(f"xnli: predicting ({g['name']})", total=len(cfg.seeds) * sum(len(e) for *_, e in sets))
            for seed in cfg.seeds:
                model = ckpt.load_model(found["best"][seed], rt.device)
                for lang, split, e in sets:
                    write_predictions(cfg.out / "predictions" / f"seed{seed}" / f"{split}.{lang}.jsonl",
                                      model, e, LangIds([e], pre.lang_index), rt.device, cfg.eval_batch_size)
                    bar.update(task, advance=len(e), info=f"seed {seed} {split} {lang}")

    summary = summarize(cfg, pre, langs, results, skipped_rows)
    write_json_atomic(cfg.out / "results.json", summary)
    manifest = new_manifest("finetune", config, upstream=pre.upstream(), encoding=pre.config.lang_encoding,
                            langs=langs)
    manifest["inputs"] = [{"path": str(p), "sha256": sha256_file(p)}
                          for p in ([train_file] if cfg.setting == "transfer" else []) + [dev_file, test_file] if p.is_file()]
    manifest["outputs"] = {"results": "results.json", "predictions": "predictions"}
    manifest["counts"] = {"skipped_unlabelled_rows": skipped_rows}
    write_manifest(cfg.out, manifest)
    return summary


def write_predictions(path: Path, model: SequenceClassifier, enc: xd.Encoded, langs: LangIds, device: torch.device, bs: int) -> None:
    pred = predict(model, enc, langs, device, bs)
    lines = [json.dumps({"id": i, "lang": enc.lang, "gold": xd.LABELS[int(g)], "pred": xd.LABELS[int(p)]}, ensure_ascii=False)
             for i, g, p in zip(enc.example_ids, enc.labels, pred)]
    write_text_atomic(path, "\n".join(lines) + "\n")


def summarize(cfg: XnliConfig, pre: Pretrained, langs: list[str], results: dict[str, Any], skipped: int) -> dict[str, Any]:
    """Accuracy per seed, split and language, recomputed from the prediction files just written."""
    acc = prediction_scores(cfg.out, cfg.seeds, langs, accuracy, ("dev", "test"))
    means = transfer({seed: per.get("test", {}) for seed, per in acc.items()}, langs, cfg.train_lang)
    return {
        "task": "xnli", "setting": cfg.setting, "veco": cfg.veco if pre.cross_attention else None,
        "encoding": pre.config.lang_encoding, "pretrain_run": str(pre.run),
        "langs": langs, "seeds": cfg.seeds, "accuracy": acc, "test_mean": means["test_mean"],
        "test_avg": means["test_avg"],
        "frozen_projections": pre.frozen_when_finetuning and not cfg.unfreeze_projections,
        "skipped_unlabelled_rows": skipped, "out": str(cfg.out), **results,
    }


def print_summary(summary: dict[str, Any]) -> None:
    print_seed_table(f"xlp finetune xnli ({summary['setting']}, {summary['encoding']}): test accuracy", summary["langs"],
                     {seed: per.get("test", {}) for seed, per in summary["accuracy"].items()})
    for name, g in summary.get("groups", {}).items():
        ui.out.print(f"{name}: selected lr={g['selected']['lr']:g} batch size={g['selected']['batch_size']}")
    ui.out.print(f"out: {summary['out']}")
