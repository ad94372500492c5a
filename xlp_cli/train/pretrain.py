"""`xlp pretrain`: check the inputs, build the model and the objective, train on the engine (resuming when the
run folder has a checkpoint), and keep the run's manifest current."""

from __future__ import annotations

import dataclasses
import importlib
import shutil
from pathlib import Path
from typing import Any

import torch

from xlp_cli.artifacts import layout, outdir
from xlp_cli.artifacts.files import atomic_path, sha256_file, write_json_atomic
from xlp_cli.artifacts.manifest import new_manifest, write_manifest as write_manifest_file
from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.models.encoder import TransformerEncoder
from xlp_cli.models.encoding_registry import spec as encoding_spec
from xlp_cli.train import engine
from xlp_cli.train.config import PretrainConfig
from xlp_cli.train.inputs import PretrainInputs, resolve
from xlp_cli.train.objectives import PRETRAIN_OBJECTIVES
from xlp_cli.train.objectives.encoder import model_config
from xlp_cli.train.runtime import Runtime

STAGE = "pretrain"
OWNS = ("dict.txt", ckpt.CONFIG, "metrics.jsonl", "checkpoints")


def objective_class(name: str) -> Any:
    module, _, attr = PRETRAIN_OBJECTIVES[name].cls.partition(":")
    return getattr(importlib.import_module(module), attr)


def inputs(cfg: PretrainConfig) -> PretrainInputs:
    """What the run reads: the id shards (and vocab scores) of --data, for the objective's train folders."""
    return resolve(cfg.data, cfg.lang, PRETRAIN_OBJECTIVES[cfg.objective].needs, cfg.lang_encoding,
                   encoding_spec(cfg.lang_encoding).options_from(cfg), cfg.objective)


def build_model(cfg: PretrainConfig, inp: PretrainInputs, device: torch.device) -> torch.nn.Module:
    """The model the run trains, initialised from --seed: the encoder, or what the objective builds instead
    (`build_model`: MASS's encoder-decoder)."""
    torch.manual_seed(cfg.seed)
    builder = getattr(objective_class(cfg.objective), "build_model", None)
    if builder is not None:
        return builder(cfg, inp).to(device)
    return TransformerEncoder(model_config(cfg, len(inp.dictionary), inp.langs), vocab_ids=inp.vocab_ids).to(device)


def settings(cfg: PretrainConfig) -> engine.Settings:
    return engine.Settings.from_config(cfg, max_steps=cfg.max_steps, lr=cfg.lr, accumulate=cfg.accumulate,
                                       seed=cfg.seed, eval_every=cfg.eval_every, compile=cfg.compile,
                                       prefetch=cfg.prefetch, label="pretrain")


def write_manifest(cfg: PretrainConfig, inp: PretrainInputs, mcfg: Any, n_params: int,
                   progress: dict[str, Any]) -> None:
    manifests = {"bpe-apply": {k: v for k, v in inp.ids_manifest.items() if k != "outputs"}}
    if inp.vocab_manifest:
        manifests["vocab-score"] = {k: v for k, v in inp.vocab_manifest.items() if k != "outputs"}
    m = new_manifest(STAGE, cfgmod.to_dict(cfg), upstream=inp.upstream(), upstream_manifests=manifests,
                     langs=inp.langs, model=mcfg.to_dict(), parameters=n_params,
                     dictionary_sha256=inp.dict_sha, dictionary_layout=layout.dictionary_layout(),
                     last_step=progress["step"],
                     best_step=progress.get("best_step"), done=progress["step"] >= cfg.max_steps)
    write_manifest_file(cfg.out, m)


def resolved(cfg: PretrainConfig, inp: PretrainInputs, rt: Runtime, run_dir: Path) -> PretrainConfig:
    """The config that runs: the automatic values for this device (`PretrainConfig.resolved`), and a --bptt the
    validation data allows (the objective's `data_bptt`), each said in one line."""
    cfg, notice = cfg.resolved(rt.device.type, outdir.read_marker(run_dir).get("config"))
    if notice and rt.main:
        ui.info(f"xlp pretrain {notice}")
    fit = getattr(objective_class(cfg.objective), "data_bptt", None)
    if fit is not None:
        bptt, notice = fit(cfg, inp)
        if notice and rt.main:
            ui.warn(notice)
        cfg = dataclasses.replace(cfg, bptt=bptt)
    return cfg


@outdir.scoped
def run(cfg: PretrainConfig) -> dict[str, Any]:
    inp = inputs(cfg)
    run_dir = Path(cfg.out)
    rt = Runtime.create(cfg.device, cfg.amp, cfg.num_threads)
    cfg = resolved(cfg, inp, rt, run_dir)
    fresh = not outdir.read_marker(run_dir)
    if rt.main:
        outdir.guard_out_dir(run_dir, STAGE, cfgmod.identity(cfg), force=cfg.force, owns=OWNS)
    rt.barrier()
    try:
        return _train(cfg, inp, rt, run_dir)
    except BaseException:  # refused, out of memory or interrupted before its first checkpoint
        if rt.main and fresh and ckpt.read_meta(run_dir / "checkpoints" / "last") is None:
            outdir.unclaim(run_dir, OWNS)  # nothing to resume: the folder is not this config's
        raise


def _train(cfg: PretrainConfig, inp: PretrainInputs, rt: Runtime, run_dir: Path) -> dict[str, Any]:
    last = run_dir / "checkpoints" / "last"
    resuming = ckpt.read_meta(last) is not None
    if cfg.resume and not resuming:
        raise BadInput("--resume: no checkpoint to resume (checkpoints/last/meta.json is missing)", path=run_dir)
    if resuming and (run_dir / "dict.txt").is_file() and sha256_file(run_dir / "dict.txt") != inp.dict_sha:
        raise BadInput("the dictionary of the id shards changed since this run started; use another --out or --force",
                       path=inp.dict_path)
    model = build_model(cfg, inp, rt.device)
    mcfg = model.config
    if resuming and (run_dir / ckpt.CONFIG).is_file():
        recorded = {k: v for k, v in ckpt.read_config(run_dir).items() if k != "kind"}  # (bounded JSON)
        try:
            prev = type(mcfg).from_dict(recorded).to_dict()
        except BadInput as e:  # a recorded value outside its declared range
            raise BadInput(e.message, path=run_dir / ckpt.CONFIG) from None
        if prev != mcfg.to_dict():
            raise BadInput("resume with an incompatible model config (model.json differs); use another --out or --force",
                           path=run_dir / ckpt.CONFIG)
    objective = objective_class(cfg.objective).create(cfg, inp, model, rt)
    n_params = sum(p.numel() for p in model.parameters())
    if rt.main:
        if not (run_dir / "dict.txt").is_file():
            with atomic_path(run_dir / "dict.txt") as tmp:
                shutil.copyfile(inp.dict_path, tmp)
        write_json_atomic(run_dir / ckpt.CONFIG, ckpt.model_json(model))
    summary = engine.fit(objective, model, settings(cfg), run_dir, rt,
                         on_checkpoint=lambda p: write_manifest(cfg, inp, mcfg, n_params, p))
    if rt.main:
        if resuming:
            ui.info(f"resumed {run_dir} at step {summary['steps'] - summary['steps_this_run']}")
        write_manifest(cfg, inp, mcfg, n_params, {"step": summary["steps"], "best_step": summary["best_step"]})
    rt.barrier()
    return {"out": str(run_dir), "langs": ",".join(inp.langs), "lang_encoding": cfg.lang_encoding,
            "parameters": n_params, "device": str(rt.device), "world_size": rt.world, "resumed": resuming,
            "steps": summary["steps"], "steps_this_run": summary["steps_this_run"], "tokens": summary["tokens"],
            "tokens_per_s": summary["tokens_per_s"], "best_step": summary["best_step"],
            "best_valid_loss": summary["best_score"], "valid": summary["valid"]}
