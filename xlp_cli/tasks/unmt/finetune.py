"""`xlp finetune --task unmt`: unsupervised translation of a language pair from monolingual data only.

    xlp finetune --task unmt --data IDS --lang de,en --init PRETRAIN_RUN --lang-encoding vle --out FT \
        --test-data multi30k/test_2016_flickr.de.gz --test-data multi30k/test_2016_flickr.en.gz

Output (as `xlp finetune --task translation`, so `xlp evaluate --task translation` scores it):
    FT/manifest.json                  stage "finetune", task "unmt", directions, langs, runs, model
    FT/dict.txt, FT/tokenizer/        the text codec (`xlp translate --model FT` works on it)
    FT/results.json                   BLEU per seed, split and direction
    FT/seed-<S>/checkpoints/{last,best}/, metrics.jsonl, model.json, results.json
    FT/seed-<S>/predictions/<split>.<src>-<tgt>.jsonl
With --copy-baseline nothing is trained and FT/copy/predictions/ holds the source copied word for word.
Training is `engine.fit` with the `Unmt` objective; a rerun resumes each seed from `last`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlp_cli.artifacts import outdir
from xlp_cli.artifacts.files import write_json_atomic
from xlp_cli.artifacts.manifest import new_manifest, write_manifest
from xlp_cli.core import config as cfgmod, textfile, ui
from xlp_cli.core.errors import WorkFailed
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.models.seq2seq import Seq2Seq
from xlp_cli.tasks.translation.data import Pairs
from xlp_cli.tasks.translation.finetune import (
    _read_results,
    decode_pairs,
    prediction_rows,
    quick_bleu,
    write_predictions,
)
from xlp_cli.tasks.unmt import model as unmt_model
from xlp_cli.tasks.unmt.config import DEFAULT_LR, UnmtConfig
from xlp_cli.tasks.unmt.data import UnmtData
from xlp_cli.tasks.unmt.objective import KINDS, Unmt
from xlp_cli.train import engine
from xlp_cli.train.runtime import Runtime
from xlp_cli.train.sentences import SentenceStream


def translate_set(model: Seq2Seq | None, data: UnmtData, pairs: Pairs, refs: Any, index: dict[str, int],
                  device: torch.device, cfg: UnmtConfig, beam: int | None = None, done: Any = None) -> list[dict[str, Any]]:
    """Prediction rows of one direction (`model` None: the word-for-word copy of the source)."""
    if model is None:  # the source text itself (not its ids, which may hold <unk>) is the hypothesis
        rows = prediction_rows(data.codec, pairs, [list(map(int, s)) for s in pairs.src], refs)
        for r in rows:
            src = refs.get(r["id"], pairs.src_lang)
            if src is not None:
                r["hyp"], r["hyp_tok"] = src
        return rows
    else:
        limit = min(cfg.max_len, model.max_source_len() - 1)
        src = Pairs(pairs.src_lang, pairs.tgt_lang, pairs.ids, [s[:limit] for s in pairs.src], pairs.tgt)
        hyps = decode_pairs(model, src, index[pairs.src_lang], index[pairs.tgt_lang], device,
                            beam=cfg.beam if beam is None else beam, length_penalty=cfg.length_penalty, done=done)
    return prediction_rows(data.codec, pairs, hyps, refs)


def validator(data: UnmtData, index: dict[str, int], cfg: UnmtConfig, rt: Runtime):
    """model -> {"bleu": mean detokenized BLEU over both directions, "per_direction"} (greedy), or None."""
    valid = {d: (p.take(cfg.valid_sentences), refs) for d, (p, refs) in data.valid.items()}
    if not valid:
        return None

    def validate(model: Seq2Seq) -> dict[str, Any]:
        model.eval()
        per = {d: quick_bleu(translate_set(model, data, p, refs, index, rt.device, cfg, beam=1), data.codec.lowercases)
               for d, (p, refs) in valid.items()}
        return {"bleu": float(np.mean([v["bleu"] for v in per.values()])),
                "per_direction": {d: v["bleu"] for d, v in per.items()},
                "tok_bleu": {d: v["tok_bleu"] for d, v in per.items()}}

    return validate


def score_splits(model: Seq2Seq | None, data: UnmtData, run_dir: Path, index: dict[str, int], device: torch.device,
                 cfg: UnmtConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sets = [(split, d, pairs.take(cfg.max_eval_sentences), refs)
            for split, by_direction in (("valid", data.valid), ("test", data.test))
            for d, (pairs, refs) in by_direction.items()]
    with ui.progress() as bar:
        task = bar.add_task(f"unmt: decoding ({run_dir.name})", total=sum(len(p) for _, _, p, _ in sets))
        for split, d, pairs, refs in sets:
            bar.update(task, info=f"{split} {d}")
            rows = translate_set(model, data, pairs, refs, index, device, cfg, done=lambda n: bar.advance(task, n))
            if model is None:
                bar.advance(task, len(pairs))
            write_predictions(run_dir / "predictions" / f"{split}.{d}.jsonl", rows)
            out.setdefault(split, {})[d] = quick_bleu(rows, data.codec.lowercases)
    return out


def train_one(cfg: UnmtConfig, data: UnmtData, seed: int, run_dir: Path, rt: Runtime) -> dict[str, Any]:
    done = run_dir / "results.json"
    torch.manual_seed(seed)
    model = unmt_model.build(cfg, data).to(rt.device)
    index = {lang: model.config.langs.index(lang) for lang in data.langs}
    V = len(data.dico)
    streams = {kind: {lang: SentenceStream(data.paths[lang], lang, seed, 10 * k + i, V, cfg.max_len)
                      for i, lang in enumerate(data.langs)} for k, kind in enumerate(KINDS)}
    epoch = max(math.ceil(s.n_rows / cfg.batch_sentences) for s in streams["ae"].values())
    total = cfg.max_steps if cfg.max_steps > 0 else cfg.epochs * epoch
    res = _read_results(done)
    if res is not None and int(res.get("steps", 0)) >= total:
        if rt.main:
            ui.info(f"seed {seed}: finished earlier, skipping ({run_dir})")
        return res
    rt.barrier()
    if res is not None and rt.main:
        done.unlink()  # asked for more steps: continue from `last`
    objective = Unmt(cfg, seed, data.langs, index, streams, V, rt, validator(data, index, cfg, rt))
    settings = engine.Settings.from_config(cfg, max_steps=total, lr=cfg.lr[0] if cfg.lr else DEFAULT_LR, seed=seed,
                                           eval_every=cfg.valid_every, label=f"unmt seed {seed}")
    if rt.main:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_dir / ckpt.CONFIG, ckpt.model_json(model))
    result = engine.fit(objective, model, settings, run_dir, rt, meta={"seed": seed, "total": total})
    if rt.main:
        ckpt.load_weights(model, ckpt.checkpoint_dir(run_dir, "best"), rt.device)
        res = {"seed": seed, "steps": result["steps"], "best_step": result["best_step"],
               "best_valid_bleu": result["best_score"], "seconds": result["seconds"],
               "lowercased": data.codec.lowercases, "directions": data.directions,
               "bleu": score_splits(model, data, run_dir, index, rt.device, cfg)}
        write_json_atomic(done, res)
    rt.barrier()
    res = _read_results(done)
    if res is None:
        raise WorkFailed("rank 0 wrote no results.json", path=done)
    return res


def copy_run(cfg: UnmtConfig, data: UnmtData, run_dir: Path) -> dict[str, Any]:
    index = {lang: i for i, lang in enumerate(data.langs)}
    res = {"seed": None, "steps": 0, "copy_baseline": True, "lowercased": data.codec.lowercases,
           "directions": data.directions, "bleu": score_splits(None, data, run_dir, index, torch.device("cpu"), cfg)}
    write_json_atomic(run_dir / "results.json", res)
    return res


OWNS = ("dict.txt", "tokenizer", "results.json", "seed-*", "copy")  # what a UNMT run writes in FT (outdir.py)


@outdir.scoped
def run(cfg: UnmtConfig) -> dict[str, Any]:
    rt = Runtime.create(cfg.device, cfg.amp, cfg.threads)
    data = UnmtData(cfg)
    if rt.main:
        outdir.guard_out_dir(cfg.out, "finetune", cfgmod.identity(cfg), force=cfg.force, owns=OWNS)
        data.codec.save(cfg.out)
    rt.barrier()
    if not data.test:
        ui.warn("no test set (give --test-data, or prepare test/<l1>-<l2> pairs): only training happens")
    runs = ["copy"] if cfg.copy_baseline else [f"seed-{s}" for s in cfg.seeds]
    per_seed: dict[str, Any] = {}
    if cfg.copy_baseline:
        if rt.main:
            per_seed["copy"] = copy_run(cfg, data, cfg.out / "copy")
    else:
        for seed in cfg.seeds:
            per_seed[str(seed)] = train_one(cfg, data, seed, cfg.out / f"seed-{seed}", rt)
    if rt.main:
        write_outputs(cfg, data, per_seed, runs)
    rt.barrier()
    test = {s: r["bleu"].get("test", {}) for s, r in per_seed.items()}
    mean = {d: round(float(np.mean([t[d]["bleu"] for t in test.values() if d in t])), 2)
            for d in data.directions if any(d in t for t in test.values())}
    tok = {d: round(float(np.mean([t[d]["tok_bleu"] for t in test.values() if d in t])), 2)
           for d in data.directions if any(d in t for t in test.values())}
    return {"task": "unmt", "out": str(cfg.out), "lang_encoding": cfg.lang_encoding, "langs": ",".join(data.langs),
            "init": str(cfg.init) if cfg.init else "random", "copy_baseline": cfg.copy_baseline, "runs": runs,
            "test_bleu_mean": mean, "test_tok_bleu_mean": tok, "device": str(rt.device), "world_size": rt.world}


def write_outputs(cfg: UnmtConfig, data: UnmtData, per_seed: dict[str, Any], runs: list[str]) -> None:
    write_json_atomic(cfg.out / "results.json", {"task": "unmt", "lang_encoding": cfg.lang_encoding,
                                                          "directions": data.directions, "seeds": per_seed})
    upstream = [{"path": str(data.ids_dir.resolve()), "stage": "bpe-apply",
                 "config_hash": data.ids_manifest.get("config_hash")}]
    if cfg.init:
        upstream.append({"path": str(Path(cfg.init).resolve()), "stage": "pretrain"})
    m = new_manifest("finetune", cfgmod.to_dict(cfg), task="unmt", upstream=upstream)
    m["outputs"] = {"runs": runs, "results": "results.json", "dict": "dict.txt", "tokenizer": "tokenizer"}
    m["directions"], m["zero_shot"], m["langs"] = data.directions, [], data.langs
    model_json = cfg.out / runs[0] / ckpt.CONFIG
    if model_json.is_file():
        m["model"] = textfile.json_object(model_json)
    write_manifest(cfg.out, m)


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    what = "copy baseline" if summary["copy_baseline"] else f"{summary['lang_encoding']}, init {summary['init']}"
    t = Table(title=f"xlp finetune --task unmt ({summary['langs']}: {what})")
    t.add_column("direction")
    t.add_column("test BLEU (detok, sacreBLEU)", justify="right")
    t.add_column("test BLEU (tokenized, multi-bleu)", justify="right")
    for d, v in summary.get("test_bleu_mean", {}).items():
        t.add_row(d, f"{v:.2f}", f"{summary['test_tok_bleu_mean'][d]:.2f}")
    ui.out.print(t)
    ui.out.print(f"run folder: {summary['out']}")
