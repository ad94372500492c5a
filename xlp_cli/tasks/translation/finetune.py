"""`xlp finetune --task translation`: train a multilingual translation model on parallel id shards.

    xlp finetune --task translation --data IDS --out FT --lang-encoding xlp --preset small --seeds 1,2,3

Output (one sub-folder per seed; `xlp translate --model FT` picks the first seed unless told):
    FT/manifest.json                   stage "finetune", task "translation", directions, zero-shot, runs
    FT/dict.txt, FT/tokenizer/         dictionary, BPE codes and text-pipeline config (raw text <-> ids)
    FT/results.json                    BLEU per seed, split and direction
    FT/seed-<S>/model.json             Seq2SeqConfig (with its kind)
    FT/seed-<S>/checkpoints/{last,best}/  the one checkpoint layout (models/checkpoint.py)
    FT/seed-<S>/metrics.jsonl          train/valid events
    FT/seed-<S>/predictions/<split>.<src>-<tgt>.jsonl   id, source, hyp, hyp_tok, ref, ref_tok
    FT/seed-<S>/results.json           this seed's BLEU and training summary
Training runs on the engine (`train/engine.py`) with the `Translate` objective: a rerun with the same config
resumes every seed from its `last` checkpoint and skips finished seeds.

DDP: `torchrun --nproc_per_node N -m xlp_cli.cli finetune --task translation ...` (gloo on CPU, NCCL on GPUs).
A step trains N token batches, the next N of the single global batch order, process r the r-th; gradients are
averaged; only rank 0 validates, writes checkpoints (loadable in one process), metrics, predictions and the
manifest. AMP (`--amp`): bf16 (or fp16 with loss scaling) autocast on GPUs; fp32 on CPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xlp_cli.artifacts import outdir
from xlp_cli.artifacts.files import write_json_atomic, write_text_atomic
from xlp_cli.artifacts.manifest import new_manifest, write_manifest
from xlp_cli.bpe.encoder import TextEncoder
from xlp_cli.core import config as cfgmod, textfile, ui
from xlp_cli.core.errors import BadInput, WorkFailed
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.models.search import beam_search, greedy
from xlp_cli.models.seq2seq import Seq2Seq, targets
from xlp_cli.models.veco import describe_init
from xlp_cli.tasks.translation.bleu import multi_bleu
from xlp_cli.tasks.translation.config import DEFAULT_LR, TranslationConfig
from xlp_cli.tasks.translation.data import MixedBatcher, Pairs, collate, serve, split_direction
from xlp_cli.tasks.translation.job import Job, References, describe, fit_lengths
from xlp_cli.tasks.translation.objective import Translate
from xlp_cli.train import engine
from xlp_cli.train.runtime import Runtime


def load_translation_model(run: Path, which: str = "best", device: str | torch.device = "cpu") -> Seq2Seq:
    """A trained model from a seed folder (FT/seed-S) or a checkpoint folder, in eval mode."""
    run = Path(run)
    try:
        folder = ckpt.checkpoint_dir(run, which)
    except BadInput:
        raise BadInput(f"no '{which}' checkpoint of a translation model here", path=run) from None
    model = ckpt.load_model(folder, device)
    if getattr(model, "KIND", "") != "seq2seq":
        raise BadInput(f"not a translation model (a {model.KIND} checkpoint)", path=folder)
    return model.eval()


def _read_results(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return textfile.json_object(path)
    except BadInput as e:
        raise BadInput(f"{e.message}; delete it or rerun with --force", path=path) from None


def train_one(job: Job, seed: int, run_dir: Path, rt: Runtime) -> dict[str, Any]:
    """Train (or resume) one seed on the engine, then decode valid/test with its best checkpoint.

    Under DDP every process runs this; rank 0 alone validates, writes and decodes, and the others wait at a
    barrier and then read its results.json."""
    cfg = job.cfg
    batcher = MixedBatcher(job.train, cfg.max_tokens, cfg.temperature, seed)
    total = cfg.max_steps if cfg.max_steps > 0 else cfg.epochs * batcher.steps_per_epoch(rt.world)
    done = run_dir / "results.json"
    res = _read_results(done)
    if res is not None and int(res.get("steps", 0)) >= total:
        if rt.main:
            ui.info(f"seed {seed}: finished earlier, skipping ({run_dir})")
        return res
    rt.barrier()  # every process has read results.json before rank 0 removes it
    if res is not None and rt.main:
        done.unlink()  # asked for more steps: continue from `last`
    torch.manual_seed(seed)
    model = job.new_model().to(rt.device)
    valid = {dr: p.take(cfg.max_eval_sentences) for dr in job.directions if (p := serve(job.valid_all, dr)) is not None}
    for dr, p in valid.items():
        fit_lengths(p, job.max_src, job.max_tgt, "truncate", dr)
    objective = Translate(batcher, valid, job.langs, cfg.arch, cfg.label_smoothing, cfg.intl_losses, cfg.max_tokens,
                          job.may_leave_parameters_unused(), rt)
    lr_peak = cfg.lr[0] if cfg.lr else DEFAULT_LR
    settings = engine.Settings.from_config(cfg, max_steps=total, lr=lr_peak, betas=(0.9, 0.98), eps=1e-8, seed=seed,
                                           eval_every=cfg.valid_every, label=f"seed {seed}")
    if rt.main:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_dir / ckpt.CONFIG, ckpt.model_json(model))
    result = engine.fit(objective, model, settings, run_dir, rt, meta={"seed": seed, "total": total})
    if not rt.main:
        rt.barrier()  # rank 0 decodes
        res = _read_results(done)
        if res is None:
            raise WorkFailed("rank 0 wrote no results.json", path=done)
        return res
    try:
        return _decode_and_score(job, seed, run_dir, model, rt.device, result, lr_peak)
    finally:
        rt.barrier()


def decode_pairs(model: Seq2Seq, pairs: Pairs, src_lang: int, tgt_lang: int, device: torch.device, *, beam: int,
                 length_penalty: float, max_tokens: int = 2048, done: Any = None) -> list[list[int]]:
    """Hypothesis token ids for every source of `pairs`, in order (batched by length). `done(n)`: called after
    each batch with its number of sentences (a progress bar)."""
    out: list[list[int] | None] = [None] * len(pairs)
    lens = np.array([len(s) for s in pairs.src])
    order = np.argsort(lens, kind="stable")
    i = 0
    while i < len(order):
        n = 1  # sources sorted by length: the last one of a batch is its longest
        while i + n < len(order) and (int(lens[order[i + n]]) + 1) * (n + 1) * max(beam, 1) <= max_tokens:
            n += 1
        rows = order[i:i + n]
        src = targets(collate([pairs.src[j] for j in rows])).to(device)
        sl = torch.full((len(rows),), src_lang, device=device)
        tl = torch.full((len(rows),), tgt_lang, device=device)
        if beam <= 1:
            hyps = [h.tokens for h in greedy(model, src, sl, tl)]
        else:
            hyps = [h[0].tokens for h in beam_search(model, src, sl, tl, beam=beam, length_penalty=length_penalty)]
        for j, h in zip(rows, hyps):
            out[int(j)] = h
        i += n
        if done is not None:
            done(len(rows))
    return out  # type: ignore[return-value]


def _decode_and_score(job: Job, seed: int, run_dir: Path, model: Seq2Seq, device: torch.device,
                      result: dict[str, Any], lr_peak: float) -> dict[str, Any]:
    """Decode valid and test with the best checkpoint; write predictions and results.json (rank 0)."""
    cfg = job.cfg
    li = {l: i for i, l in enumerate(job.langs)}
    done = run_dir / "results.json"
    ckpt.load_weights(model, ckpt.checkpoint_dir(run_dir, "best"), device)
    model.eval()
    results = {"seed": seed, "steps": result["steps"], "best_step": result["best_step"],
               "best_valid_nll": result["best_score"],
               "lr": lr_peak, "bleu": {}, "directions": job.directions, "zero_shot": job.zero_shot,
               "lowercased": job.lowercased}
    sets = [(split, d, refs, pairs.take(cfg.max_eval_sentences))
            for split, corpus in (("valid", job.valid_all), ("test", job.test_all))
            for refs in [References(job.prep_dir, split)] for d in job.eval_dirs
            for pairs in [serve(corpus, d)] if pairs is not None]
    with ui.progress() as bar:
        task = bar.add_task(f"translation: decoding ({run_dir.name})", total=sum(len(p) for *_, p in sets))
        for split, d, refs, pairs in sets:
            s, t = split_direction(d)
            src = [a[: job.max_src] for a in pairs.src]
            bar.update(task, info=f"{split} {d}")
            hyps = decode_pairs(model, Pairs(s, t, pairs.ids, src, pairs.tgt), li[s], li[t], device, beam=cfg.beam,
                                length_penalty=cfg.length_penalty, done=lambda n: bar.advance(task, n))
            rows = prediction_rows(job.codec, pairs, hyps, refs)
            write_predictions(run_dir / "predictions" / f"{split}.{d}.jsonl", rows)
            results["bleu"].setdefault(split, {})[d] = quick_bleu(rows, job.lowercased)
    write_json_atomic(done, results)
    return results


def prediction_rows(codec: TextEncoder, pairs: Pairs, hyps: list[list[int]], refs: References) -> list[dict[str, Any]]:
    rows = []
    for rid, src, ref_ids, hyp in zip(pairs.ids, pairs.src, pairs.tgt, hyps):
        r = refs.get(rid, pairs.tgt_lang)
        s = refs.get(rid, pairs.src_lang)
        ref_tok = r[1] if r else codec.to_tokenized(list(ref_ids))
        ref_raw = r[0] if r else codec.to_text(list(ref_ids), pairs.tgt_lang)
        rows.append({"id": rid, "src_lang": pairs.src_lang, "tgt_lang": pairs.tgt_lang,
                     "source": s[0] if s else codec.to_text(list(src), pairs.src_lang),
                     "hyp": codec.to_text(hyp, pairs.tgt_lang), "hyp_tok": codec.to_tokenized(hyp),
                     "ref": ref_raw, "ref_tok": ref_tok})
    return rows


def write_predictions(path: Path, rows: list[dict[str, Any]]) -> None:
    write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def quick_bleu(rows: list[dict[str, Any]], lowercase: bool) -> dict[str, float]:
    """Detokenized sacreBLEU (13a) and tokenized BLEU (multi-bleu.perl's: tokenize=none, no smoothing) of rows."""
    from sacrebleu.metrics import BLEU

    detok = BLEU(lowercase=lowercase).corpus_score([r["hyp"] for r in rows], [[r["ref"] for r in rows]])
    tok = multi_bleu().corpus_score([r["hyp_tok"] for r in rows], [[r["ref_tok"] for r in rows]])
    return {"bleu": round(detok.score, 2), "tok_bleu": round(tok.score, 2), "n": len(rows)}


# ----------------------------------------------------------------------------------------------- stage
OWNS = ("dict.txt", "tokenizer", "results.json", "seed-*")  # what a translation run writes in FT (outdir.py)


@outdir.scoped
def run(cfg: TranslationConfig) -> dict[str, Any]:
    rt = Runtime.create(cfg.device, cfg.amp, cfg.threads)  # torchrun: one process per GPU (NCCL) or CPU share (gloo)
    job = Job(cfg)
    config = cfgmod.to_dict(cfg)
    if rt.main:
        outdir.guard_out_dir(cfg.out, "finetune", cfgmod.identity(cfg), force=cfg.force, owns=OWNS)
        job.codec.save(cfg.out)
    rt.barrier()
    n_params = job.new_model().n_params()
    if rt.main:
        ui.info(describe(job, n_params, rt))
        if job.init_mapping:
            n_enc = len(job.pretrained.state_dict())
            ui.info(f"VECO initialisation from {cfg.init_encoder}:\n  xlm_encoder.* ({n_enc} tensors, the embeddings "
                    "shared with the decoder and the output) <- the run's tensors of the same names (its cross-attention "
                    "left out)")
            for line in describe_init(job.init_mapping, str(cfg.init_encoder)):
                ui.info("  " + line)
    per_seed = {}
    for seed in cfg.seeds:
        per_seed[str(seed)] = train_one(job, seed, cfg.out / f"seed-{seed}", rt)
    results = {"task": "translation", "arch": cfg.arch, "lang_encoding": cfg.lang_encoding,
               "directions": job.directions, "zero_shot": job.zero_shot, "seeds": per_seed}
    if rt.main:
        _write_outputs(cfg, job, config, results, n_params)
    rt.barrier()
    test = {s: r["bleu"].get("test", {}) for s, r in per_seed.items()}
    mean = {}
    for dr in job.eval_dirs:
        vals = [t[dr]["bleu"] for t in test.values() if dr in t]
        if vals:
            mean[dr] = round(float(np.mean(vals)), 2)
    return {"task": "translation", "out": str(cfg.out), "arch": cfg.arch, "lang_encoding": cfg.lang_encoding,
            "parameters": n_params, "directions": job.directions, "zero_shot": job.zero_shot,
            "test_bleu_mean": mean, "seeds": list(per_seed), "device": str(rt.device), "world_size": rt.world,
            "rank": rt.rank, "amp": rt.amp_name()}


def _write_outputs(cfg: Any, job: Job, config: dict[str, Any], results: dict[str, Any], n_params: int) -> None:
    """results.json and the manifest (rank 0)."""
    write_json_atomic(cfg.out / "results.json", results)
    manifest = new_manifest(
        "finetune", config, task="translation",
        upstream=[{"path": str(job.ids_dir.resolve()), "stage": "bpe-apply", "config_hash": job.ids_manifest.get("config_hash")}]
        + ([{"path": str(Path(cfg.init_encoder).resolve()), "stage": "pretrain"}] if cfg.init_encoder else []))
    manifest["outputs"] = {"runs": [f"seed-{s}" for s in cfg.seeds], "results": "results.json", "dict": "dict.txt",
                           "tokenizer": "tokenizer"}
    manifest["counts"] = {"train": {d: len(p) for d, p in job.train.items()}, "parameters": n_params,
                          "truncated": job.truncated}
    manifest["model"] = job.model_cfg.to_dict()
    if job.init_mapping:
        manifest["veco_init"] = job.init_mapping
    manifest["directions"], manifest["zero_shot"], manifest["langs"] = job.directions, job.zero_shot, job.langs
    write_manifest(cfg.out, manifest)


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title=f"xlp finetune --task translation ({summary['arch']}, {summary['lang_encoding']})")
    t.add_column("direction")
    t.add_column("test BLEU (detok, mean over seeds)", justify="right")
    for d, v in summary.get("test_bleu_mean", {}).items():
        t.add_row(d + (" (zero-shot)" if d in summary.get("zero_shot", []) else ""), f"{v:.2f}")
    ui.out.print(t)
    ui.out.print(f"run folder: {summary['out']}")
