"""`xlp pretrain`: check the inputs, build the model, train (resuming when the run folder has a checkpoint)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from xlp_cli import artifacts, ui
from xlp_cli.bpe.dictionary import Dictionary
from xlp_cli.config import to_dict
from xlp_cli.errors import BadInput
from xlp_cli.models.checkpoint import CONFIG as MODEL_JSON
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder
from xlp_cli.train.config import RESUMABLE_KEYS, PretrainConfig
from xlp_cli.train.data import PretrainData, mask_scores, read_vle_vocab, valid_batches
from xlp_cli.train.loop import Trainer, init_distributed, probe_batch_size

STAGE = "pretrain"


def model_config(cfg: PretrainConfig, vocab_size: int, langs: list[str], vle_sizes: list[int] | None) -> ModelConfig:
    overrides = {k: getattr(cfg, k) or None for k in ("n_layers", "d_model", "n_heads", "d_ff")}
    return ModelConfig.from_preset(cfg.preset, vocab_size=vocab_size, langs=langs, lang_encoding=cfg.lang_encoding,
                                   pre_ln=cfg.pre_ln, xlp_bias=cfg.xlp_bias, vle_style=cfg.vle_style,
                                   vle_sizes=vle_sizes, dropout=cfg.dropout, attention_dropout=cfg.attention_dropout,
                                   n_positions=max(512, cfg.bptt) + 8, **overrides)


def resolve_inputs(cfg: PretrainConfig) -> dict[str, Any]:
    """Find the id shards, dictionary, languages and (VLE) vocabularies; every problem is one BadInput line."""
    found = artifacts.find_upstream(cfg.data, "bpe-apply")
    if found is None:  # `xlp prepare --bpe-codes/--bpe-from` keeps its ids in a sub-folder (outputs.ids)
        subs = []
        for d in cfg.data:
            m = artifacts.try_read_manifest(d) or {}
            ids_sub = (m.get("outputs") or {}).get("ids") if isinstance(m.get("outputs"), dict) else None
            if isinstance(ids_sub, str):
                subs.append(Path(d) / ids_sub)
        found = artifacts.find_upstream(subs, "bpe-apply") if subs else None
    if found is None:
        raise BadInput("no `xlp bpe apply` output (manifest stage 'bpe-apply') among --data or their upstream",
                       path=",".join(map(str, cfg.data)))
    ids_dir, ids_manifest = found
    dict_path = ids_dir / str(ids_manifest.get("dictionary") or "dict.txt")
    if not dict_path.is_file():
        raise BadInput("the id shards have no dictionary (dict.txt)", path=dict_path)
    dico = Dictionary.read(dict_path)
    if len(dico) <= 14:
        raise BadInput("the dictionary has no words", path=dict_path)
    train = ids_dir / "train"
    available = sorted(p.name for p in train.iterdir() if p.is_dir() and "-" not in p.name) if train.is_dir() else []
    pair_langs = sorted({x for p in (train.iterdir() if train.is_dir() else []) if p.is_dir() and "-" in p.name
                         for x in p.name.split("-", 1)})
    langs = list(cfg.lang) or (available if cfg.objective != "tlm" else pair_langs)
    if not langs:
        raise BadInput("no languages: the id shards have no train split", path=train)
    if len(set(langs)) != len(langs):
        raise BadInput(f"--lang lists a language twice: {','.join(langs)}")
    if cfg.objective != "tlm":
        for lang in langs:
            if lang not in available:
                raise BadInput(f"language '{lang}' has no train data (have: {', '.join(available) or 'none'})",
                               path=train / lang)
    dict_sha = artifacts.sha256_file(dict_path)
    vle_vocab = None
    vocab_dir = None
    if cfg.lang_encoding == "vle":
        vfound = artifacts.find_upstream(cfg.data, "vocab-score")
        if vfound is None:
            raise BadInput("--lang-encoding vle needs the output of `xlp vocab-score` (vle_vocab.json) among --data",
                           path=",".join(map(str, cfg.data)))
        vocab_dir = vfound[0]
        vle_vocab = read_vle_vocab(vocab_dir / "vle_vocab.json", langs, cfg.vle_k, dict_sha)
        for lang, ids in zip(langs, vle_vocab):
            if max(ids) >= len(dico) or min(ids) < 0:
                raise BadInput(f"VLE vocabulary of '{lang}' has ids outside the dictionary (size {len(dico)})",
                               path=vocab_dir / "vle_vocab.json")
    return {"ids_dir": ids_dir, "ids_manifest": ids_manifest, "dict_path": dict_path, "dictionary": dico,
            "dict_sha": dict_sha, "langs": langs, "vle_vocab": vle_vocab, "vocab_dir": vocab_dir,
            "vocab_manifest": artifacts.try_read_manifest(vocab_dir) if vocab_dir else None}


def _guard_config(cfg: PretrainConfig) -> dict[str, Any]:
    full = to_dict(cfg)
    return {k: v for k, v in full.items() if k not in RESUMABLE_KEYS}


def run(cfg: PretrainConfig) -> dict[str, Any]:
    inp = resolve_inputs(cfg)
    run_dir = Path(cfg.out)
    dist_info, device = init_distributed(cfg.device)
    if cfg.num_threads > 0:
        torch.set_num_threads(cfg.num_threads)
    last = run_dir / "checkpoints" / "last"
    if dist_info.main:
        artifacts.guard_out_dir(run_dir, STAGE, _guard_config(cfg), force=cfg.force)
    if dist_info.world > 1:
        dist.barrier()
    resuming = (last / "meta.json").is_file()
    if cfg.resume and not resuming:
        raise BadInput("--resume: no checkpoint to resume (checkpoints/last/meta.json is missing)", path=run_dir)
    if resuming and (run_dir / "dict.txt").is_file() and artifacts.sha256_file(run_dir / "dict.txt") != inp["dict_sha"]:
        raise BadInput("the dictionary of the id shards changed since this run started; use another --out or --force",
                       path=inp["dict_path"])

    vle_sizes = [len(v) for v in inp["vle_vocab"]] if inp["vle_vocab"] else None
    mcfg = model_config(cfg, len(inp["dictionary"]), inp["langs"], vle_sizes)
    if resuming and (run_dir / MODEL_JSON).is_file():
        prev = json.loads((run_dir / MODEL_JSON).read_text(encoding="utf-8"))
        if {k: prev.get(k) for k in mcfg.to_dict()} != mcfg.to_dict():
            raise BadInput("resume with an incompatible model config (model.json differs); use another --out or --force",
                           path=run_dir / MODEL_JSON)
    torch.manual_seed(cfg.seed)
    model = TransformerEncoder(mcfg, vle_vocab=inp["vle_vocab"]).to(device)

    ids_dir = inp["ids_dir"]
    data = PretrainData(ids_dir, inp["langs"], cfg.objective, cfg.bptt, cfg.seed, mcfg.vocab_size, cfg.lang_alpha)
    for stream in [*data.mono.values(), *data.pairs.values()]:
        stream._load()  # reads the first row group: catches ids outside the dictionary before training
    valid = {}
    if dist_info.main:
        for i, lang in enumerate(inp["langs"]):
            b = valid_batches(ids_dir, lang, i, cfg.bptt, cfg.batch_size, cfg.eval_batches, mcfg.vocab_size)
            if b:
                valid[lang] = b
            else:
                ui.warn(f"no valid split for '{lang}' in {ids_dir}: it is not validated")
    counts = np.asarray(inp["dictionary"].counts, dtype=np.int64)
    weights = mask_scores(counts, cfg.sample_alpha)

    def write_manifest(progress: dict[str, Any]) -> None:
        upstream = [{"path": str(ids_dir), "stage": "bpe-apply", "config_hash": inp["ids_manifest"].get("config_hash")}]
        if inp["vocab_dir"] is not None:
            upstream.append({"path": str(inp["vocab_dir"]), "stage": "vocab-score",
                             "config_hash": (inp["vocab_manifest"] or {}).get("config_hash")})
        manifests = {"bpe-apply": {k: v for k, v in inp["ids_manifest"].items() if k != "outputs"}}
        if inp["vocab_manifest"]:
            manifests["vocab-score"] = {k: v for k, v in inp["vocab_manifest"].items() if k != "outputs"}
        m = artifacts.new_manifest(STAGE, to_dict(cfg), upstream=upstream, upstream_manifests=manifests,
                                   langs=inp["langs"],
                                   model=mcfg.to_dict(), parameters=model.num_parameters(),
                                   dictionary_sha256=inp["dict_sha"], last_step=progress["step"],
                                   best_step=progress.get("best_step"), done=progress["step"] >= cfg.max_steps)
        artifacts.write_manifest(run_dir, m)

    trainer = Trainer(cfg, model, data, run_dir, device, dist_info, counts, valid, weights, on_checkpoint=write_manifest)
    if resuming:
        trainer.restore(last)
        if dist_info.main:
            ui.info(f"resuming {run_dir} from step {trainer.step}")
    if dist_info.main:
        if not (run_dir / "dict.txt").is_file():
            shutil.copyfile(inp["dict_path"], run_dir / "dict.txt.tmp")
            (run_dir / "dict.txt.tmp").rename(run_dir / "dict.txt")
        artifacts.write_json_atomic(run_dir / MODEL_JSON, mcfg.to_dict())
        artifacts.truncate_jsonl(run_dir / "metrics.jsonl", trainer.step)
    probe_batch_size(trainer, cfg.bptt)
    summary = trainer.fit(run_dir / "metrics.jsonl")
    if dist_info.main:
        write_manifest({"step": trainer.step, "best_step": trainer.best_step})
    if dist_info.world > 1:
        dist.barrier()
    return {"out": str(run_dir), "langs": ",".join(inp["langs"]), "lang_encoding": cfg.lang_encoding,
            "parameters": model.num_parameters(), "device": str(device), "world_size": dist_info.world,
            "resumed": resuming, **summary}
