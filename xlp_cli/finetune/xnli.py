"""`xlp finetune --task xnli`: the XLP paper's XNLI fine-tuning (section 4.1, appendix A.2/B.1).

Settings
    transfer         train on English (MNLI), select on English dev (or the dev average), test on every language.
    translate-train  one model per language: train on that language's translated training file
                     (`--translated-train 'path/{lang}.tsv'`) or, when none is given, on 90% of its XNLI dev set
                     (the other 10%, split by premise hash, selects the checkpoint); test on its test set.

Runs: the grid --lr x --batch-size x --seeds. The (lr, batch size) with the best mean selection accuracy over
seeds is kept; its best checkpoint per seed writes `predictions/seed<S>/{dev,test}.<lang>.jsonl`.
Each grid point trains in `runs/<group>/lr<lr>-bs<bs>-seed<seed>/` with `checkpoints/{last,best}`,
`metrics.jsonl` and `done.json`; a rerun skips finished points and resumes an interrupted one at its last
checkpoint (same data order: each epoch's permutation comes from (seed, epoch)).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from xlp_cli import artifacts, config as cfgmod, ui
from xlp_cli.errors import BadInput, WorkFailed
from xlp_cli.finetune import xnli_data as xd
from xlp_cli.finetune.classifier import (Classifier, freeze_projections, load_checkpoint, read_done, read_meta,
                                         save_checkpoint, write_done)
from xlp_cli.finetune.config import XNLI_DEFAULT_BATCH_SIZE, XNLI_DEFAULT_LR, FinetuneConfig
from xlp_cli.models.checkpoint import load_pretrained

XNLI_LANGS = ["en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur"]
# keys that do not change the result: left out of the config hash so a rerun with them changed resumes
VOLATILE_KEYS = ("force", "threads", "device", "log-every", "eval-batch-size", "save-every")


def hashed_config(cfg: FinetuneConfig) -> dict[str, Any]:
    c = cfgmod.to_dict(cfg)
    for k in VOLATILE_KEYS:
        c.pop(k, None)
    c["data"] = [str(Path(d).resolve()) for d in cfg.data]
    return c


def pick_device(name: str) -> torch.device:
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise BadInput("--device cuda but no CUDA device is available")
        return torch.device("cuda")
    return torch.device("cpu")


def _fmt(v: float) -> str:
    return f"{v:g}"


# ---------------------------------------------------------------- the pre-trained run
class Pretrained:
    """The pre-training run: model config, languages, text encoder, and the vocabulary check."""

    def __init__(self, run: Path, which: str):
        self.run = Path(run)
        self.manifest = artifacts.read_manifest(self.run, stage="pretrain")
        self.which = which
        model = load_pretrained(self.run, which)
        self.config = model.config
        self.langs: list[str] = list(model.config.langs)
        self.prefix_len = int(model.prefix_len)
        self.text_encoder = self._text_encoder()
        self._check_vocabulary()

    def _text_encoder(self):
        from xlp_cli.bpe.encoder import TextEncoder

        return TextEncoder.from_folder(self.run)

    def _check_vocabulary(self) -> None:
        te = self.text_encoder
        n = None
        for attr in ("vocab_size", "n_words"):
            if isinstance(getattr(te, attr, None), int):
                n = getattr(te, attr)
                break
        if n is None and getattr(te, "dictionary", None) is not None:
            try:
                n = len(te.dictionary)
            except TypeError:
                n = None
        if n is not None and n != self.config.vocab_size:
            raise BadInput(f"checkpoint vocabulary ({self.config.vocab_size} ids) does not match the run's "
                           f"dictionary ({n} ids): the model was not trained on this BPE/dictionary", path=self.run)
        run_dict = self.run / "dict.txt"
        te_dict = Path(te.ids_dir) / "dict.txt" if getattr(te, "ids_dir", None) else None
        if run_dict.is_file() and te_dict and Path(te_dict).is_file() and Path(te_dict).resolve() != run_dict.resolve():
            if artifacts.sha256_file(run_dict) != artifacts.sha256_file(te_dict):
                raise BadInput(f"the run's dict.txt differs from the dictionary of its id shards ({te_dict})", path=run_dict)

    def new_classifier(self, dropout: float, device: torch.device) -> Classifier:
        encoder = load_pretrained(self.run, self.which)
        return Classifier(encoder, dropout=dropout).to(device)

    def lang_index(self, lang: str) -> int:
        if lang not in self.langs:
            raise BadInput(f"language {lang!r} has no pre-training data in this run (its languages: "
                           f"{', '.join(self.langs)})", path=self.run)
        return self.langs.index(lang)


# ---------------------------------------------------------------- evaluation
class LangIds:
    """Language indices of a set of examples: the hypothesis (= example) language, the premise language and
    where the hypothesis starts, so mixed-language pairs get a [B, T] language tensor."""

    def __init__(self, encs: list[xd.Encoded], pre: "Pretrained"):
        self.hyp = np.concatenate([np.full(len(e), pre.lang_index(e.lang), np.int64) for e in encs])
        self.prem = np.concatenate([np.asarray([pre.lang_index(p or e.lang) for p in e.premise_langs], np.int64)
                                    if e.premise_langs else np.full(len(e), pre.lang_index(e.lang), np.int64)
                                    for e in encs])
        self.start = np.concatenate([e.hyp_start if e.hyp_start is not None else np.zeros(len(e), np.int64) for e in encs])
        self.mixed = bool((self.hyp != self.prem).any())

    def batch(self, rows: np.ndarray, t: int) -> torch.Tensor:
        if not self.mixed:
            return torch.from_numpy(self.hyp[rows])
        return xd.lang_tensor(t, self.hyp[rows], self.prem[rows], self.start[rows])


@torch.no_grad()
def predict(model: Classifier, enc: xd.Encoded, langs: LangIds, device: torch.device, batch_size: int) -> np.ndarray:
    """Predicted label id per example (in the order of `enc`)."""
    model.eval()
    out = np.zeros(len(enc), dtype=np.int64)
    for rows, ids, mask in xd.eval_batches(enc, batch_size):
        lang = langs.batch(rows, ids.shape[1])
        logits = model(ids.to(device), lang.to(device), mask.to(device))
        out[rows] = logits.argmax(-1).cpu().numpy()
    return out


def accuracy(model: Classifier, enc: xd.Encoded, langs: LangIds, device: torch.device, batch_size: int) -> float:
    if len(enc) == 0:
        return math.nan
    pred = predict(model, enc, langs, device, batch_size)
    return float(100.0 * (pred == enc.labels).mean())


# ---------------------------------------------------------------- one training run
def lr_factor(step: int, warmup: int) -> float:
    """Linear warm-up to the peak, then inverse square root (Table 6)."""
    s = step + 1
    if warmup <= 0:
        return 1.0
    return min(s / warmup, math.sqrt(warmup / s))


def train_one(run_dir: Path, pre: Pretrained, train: list[xd.Encoded], select: dict[str, xd.Encoded],
              lr: float, bs: int, seed: int, cfg: FinetuneConfig, device: torch.device) -> dict[str, Any]:
    """Fine-tune one grid point; returns done.json's content (best selection accuracy and step)."""
    done = read_done(run_dir)
    if done is not None:
        return done
    torch.manual_seed(seed)
    model = pre.new_classifier(cfg.dropout, device)
    frozen = [] if cfg.unfreeze_projections else freeze_projections(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=cfg.weight_decay)

    seqs = [x for enc in train for x in enc.ids]
    n = len(seqs)
    if n == 0:
        raise BadInput("no training examples")
    labels = np.concatenate([enc.labels for enc in train])
    train_langs = LangIds(train, pre)
    select_langs = {lang: LangIds([enc], pre) for lang, enc in select.items()}
    per_epoch = min(n, cfg.epoch_size) if cfg.epoch_size else n
    steps_per_epoch = math.ceil(per_epoch / bs)
    total = cfg.epochs * steps_per_epoch
    if cfg.max_steps:
        total = min(total, cfg.max_steps) if cfg.epochs else cfg.max_steps
    step, best = 0, {"score": -1.0, "step": 0, "dev": {}}
    last = run_dir / "checkpoints" / "last"
    if read_meta(last) is not None:
        meta = load_checkpoint(last, model, opt, device)
        step, best = int(meta["step"]), meta["best"]
        ui.info(f"  resuming {run_dir.name} at step {step}/{total}")
        artifacts.truncate_jsonl(run_dir / "metrics.jsonl", step)
    metrics = open(run_dir / "metrics.jsonl", "a", encoding="utf-8")

    def evaluate_now() -> float:
        nonlocal best
        dev = {lang: accuracy(model, enc, select_langs[lang], device, cfg.eval_batch_size) for lang, enc in select.items()}
        score = float(np.nanmean(list(dev.values())))
        metrics.write(json.dumps({"event": "valid", "step": step, "score": score, "dev": dev}) + "\n")
        metrics.flush()
        if score > best["score"]:
            best = {"score": score, "step": step, "dev": dev}
            save_checkpoint(run_dir / "checkpoints" / "best", model, None, {"step": step, "best": best})
        model.train()
        return score

    model.train()
    t0, losses = time.time(), []
    perm_epoch, perm = -1, np.zeros(0, np.int64)
    try:
        while step < total:
            epoch, pos = divmod(step, steps_per_epoch)
            if epoch != perm_epoch:  # each epoch's order depends only on (seed, epoch): resumable anywhere
                g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
                perm, perm_epoch = torch.randperm(n, generator=g).numpy()[:per_epoch], epoch
            rows = perm[pos * bs: (pos + 1) * bs]
            ids, mask = xd.collate([seqs[r] for r in rows])
            langs = train_langs.batch(rows, ids.shape[1])
            y = torch.from_numpy(labels[rows])
            for group in opt.param_groups:
                group["lr"] = lr * lr_factor(step, cfg.warmup)
            logits = model(ids.to(device), langs.to(device), mask.to(device))
            loss = F.cross_entropy(logits, y.to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, cfg.clip_norm)
            opt.step()
            step += 1
            losses.append(loss.item())
            if not math.isfinite(losses[-1]):
                raise WorkFailed(f"loss is {losses[-1]} at step {step}; lower --lr", path=run_dir)
            if step % cfg.log_every == 0:
                metrics.write(json.dumps({"event": "train", "step": step, "loss": sum(losses) / len(losses),
                                          "lr": opt.param_groups[0]["lr"], "elapsed": round(time.time() - t0, 2)}) + "\n")
                metrics.flush()
                losses = []
            if step % steps_per_epoch == 0 or step == total:
                score = evaluate_now()
                save_checkpoint(last, model, opt, {"step": step, "best": best})
                ui.info(f"  {run_dir.parent.name}/{run_dir.name} step {step}/{total}: selection accuracy "
                        f"{score:.1f} (best {best['score']:.1f} at step {best['step']})")
            elif cfg.save_every and step % cfg.save_every == 0:
                save_checkpoint(last, model, opt, {"step": step, "best": best})
    finally:
        metrics.close()
    info = {"lr": lr, "batch_size": bs, "seed": seed, "best_score": best["score"], "best_step": best["step"],
            "best_dev": best["dev"], "steps": step, "frozen": frozen, "train_examples": n}
    write_done(run_dir, info)
    return info


# ---------------------------------------------------------------- the stage
def _resolve(path: Path | None, default: str) -> Path:
    return Path(path) if path is not None else artifacts.data_dir() / default


def run_xnli(cfg: FinetuneConfig) -> dict[str, Any]:
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = pick_device(cfg.device)
    run = Path(cfg.data[0])
    pre = Pretrained(run, cfg.which)
    lrs = cfg.lr or XNLI_DEFAULT_LR
    bss = cfg.batch_size or XNLI_DEFAULT_BATCH_SIZE
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

    config = hashed_config(cfg)
    cfg.out.mkdir(parents=True, exist_ok=True)
    previous = artifacts.guard_out_dir(cfg.out, "finetune", config, force=cfg.force)
    if previous is not None and previous.get("config_hash") == artifacts.config_hash(config) and (cfg.out / "results.json").is_file():
        ui.info(f"finetune: {cfg.out} is already complete (same config); nothing to do")
        summary = json.loads((cfg.out / "results.json").read_text(encoding="utf-8"))
        return {**summary, "skipped": True}

    # data
    # a dev/test file without a language column (e.g. MNLI's validation set) is English
    dev, _ = xd.read_tsv(dev_file, default_lang="en", langs=set(langs) | {cfg.train_lang}, max_rows_per_lang=cfg.max_eval_rows)
    test, _ = xd.read_tsv(test_file, default_lang="en", langs=set(langs), max_rows_per_lang=cfg.max_eval_rows)
    missing = [l for l in langs if l not in test]
    if missing:
        ui.warn(f"no XNLI test rows for {', '.join(missing)} in {test_file}; they are not evaluated")
        langs = [l for l in langs if l in test]
    if not langs:
        raise BadInput("none of the languages has test rows", path=test_file)
    cache = cfg.out / "encoded"
    max_total = pre.config.n_positions - pre.prefix_len

    def enc(split: str, lang: str, rows: list[xd.Example]) -> xd.Encoded:
        return xd.cached_encode(cache / f"{split}.{lang}", rows, pre.text_encoder, lang, cfg.max_len, max_total)

    ui.info(f"finetune xnli ({cfg.setting}): encoding examples with the run's text pipeline ...")
    groups: list[dict[str, Any]] = []  # one per trained model family: {name, train, select, test}
    skipped_rows = 0
    if cfg.setting == "transfer":
        tl = cfg.train_lang
        tr, skipped_rows = xd.read_tsv(train_file, default_lang=tl, langs={tl})
        rows = tr.get(tl, [])
        if not rows:
            raise BadInput(f"no training rows in language {tl!r}", path=train_file)
        if cfg.max_train_rows:
            rows = rows[: cfg.max_train_rows]
        sel_langs = [tl] if cfg.select_on == "train" else [l for l in langs if l in dev]
        if not sel_langs or not all(l in dev for l in sel_langs):
            raise BadInput(f"no {tl!r} dev rows to select on", path=dev_file)
        groups.append({
            "name": "transfer",
            "train": [enc("train", cfg.train_lang, rows)],
            "select": {l: enc("dev", l, dev[l]) for l in sel_langs},
            "predict": {l: {"dev": enc("dev", l, dev[l]) if l in dev else None, "test": enc("test", l, test[l])} for l in langs},
        })
    else:
        for lang in langs:
            if cfg.translated_train:
                path = Path(cfg.translated_train.replace("{lang}", lang))
                tr, s = xd.read_tsv(path, default_lang=lang, langs={lang})
                skipped_rows += s
                rows = tr.get(lang, [])
                if not rows:
                    raise BadInput(f"no training rows for {lang}", path=path)
                sel_rows = dev.get(lang, [])
                source = str(path)
            else:
                rows, sel_rows = xd.holdout_split(dev.get(lang, []))
                source = f"{dev_file} (90% of the {lang} dev set: translated training data substitute)"
            if cfg.max_train_rows:
                rows = rows[: cfg.max_train_rows]
            if not rows or not sel_rows:
                raise BadInput(f"no translate-train data for {lang} (train {len(rows)} rows, selection {len(sel_rows)} rows)",
                               path=dev_file)
            sel = enc(f"select-{'dev' if cfg.translated_train else 'heldout'}", lang, sel_rows)
            groups.append({
                "name": lang, "source": source,
                "train": [enc(f"train-{'file' if cfg.translated_train else 'dev90'}", lang, rows)],
                "select": {lang: sel},
                "predict": {lang: {"dev": sel, "test": enc("test", lang, test[lang])}},
            })

    # grid x seeds
    results: dict[str, Any] = {"groups": {}}
    for g in groups:
        grid = []
        for lr in lrs:
            for bs in bss:
                per_seed = []
                for seed in cfg.seeds:
                    run_dir = cfg.out / "runs" / g["name"] / f"lr{_fmt(lr)}-bs{bs}-seed{seed}"
                    run_dir.mkdir(parents=True, exist_ok=True)
                    per_seed.append(train_one(run_dir, pre, g["train"], g["select"], lr, bs, seed, cfg, device))
                mean = float(np.mean([d["best_score"] for d in per_seed]))
                grid.append({"lr": lr, "batch_size": bs, "mean_selection_accuracy": mean, "seeds": per_seed})
        chosen = max(grid, key=lambda e: e["mean_selection_accuracy"])
        results["groups"][g["name"]] = {"grid": grid, "selected": {"lr": chosen["lr"], "batch_size": chosen["batch_size"]},
                                        "source": g.get("source", str(train_file))}
        # predictions of the selected point's best checkpoint, per seed
        for seed in cfg.seeds:
            run_dir = cfg.out / "runs" / g["name"] / f"lr{_fmt(chosen['lr'])}-bs{chosen['batch_size']}-seed{seed}"
            model = pre.new_classifier(0.0, device)
            load_checkpoint(run_dir / "checkpoints" / "best", model, None, device)
            for lang, splits in g["predict"].items():
                for split, e in splits.items():
                    if e is None:
                        continue
                    write_predictions(cfg.out / "predictions" / f"seed{seed}" / f"{split}.{lang}.jsonl",
                                      model, e, LangIds([e], pre), device, cfg.eval_batch_size)

    summary = summarize(cfg, pre, langs, results, skipped_rows)
    artifacts.write_json_atomic(cfg.out / "results.json", summary)
    manifest = artifacts.new_manifest(
        "finetune", config,
        upstream=[{"path": str(run.resolve()), "stage": "pretrain", "config_hash": pre.manifest.get("config_hash")}],
        encoding=pre.config.lang_encoding, langs=langs)
    manifest["inputs"] = [{"path": str(p), "sha256": artifacts.sha256_file(p)}
                          for p in ([train_file] if cfg.setting == "transfer" else []) + [dev_file, test_file] if p.is_file()]
    manifest["outputs"] = {"results": "results.json", "predictions": "predictions"}
    manifest["counts"] = {"skipped_unlabelled_rows": skipped_rows}
    artifacts.write_manifest(cfg.out, manifest)
    return summary


def write_predictions(path: Path, model: Classifier, enc: xd.Encoded, langs: LangIds, device: torch.device, bs: int) -> None:
    pred = predict(model, enc, langs, device, bs)
    lines = [json.dumps({"id": i, "lang": enc.lang, "gold": xd.LABELS[int(g)], "pred": xd.LABELS[int(p)]}, ensure_ascii=False)
             for i, g, p in zip(enc.example_ids, enc.labels, pred)]
    artifacts.write_text_atomic(path, "\n".join(lines) + "\n")


def summarize(cfg: FinetuneConfig, pre: Pretrained, langs: list[str], results: dict[str, Any], skipped: int) -> dict[str, Any]:
    """Accuracy per seed, split and language, recomputed from the prediction files just written."""
    acc: dict[str, dict[str, dict[str, float]]] = {}
    for seed in cfg.seeds:
        for split in ("dev", "test"):
            for lang in langs:
                p = cfg.out / "predictions" / f"seed{seed}" / f"{split}.{lang}.jsonl"
                if p.is_file():
                    rows = [json.loads(l) for l in p.read_text(encoding="utf-8").splitlines() if l.strip()]
                    acc.setdefault(str(seed), {}).setdefault(split, {})[lang] = \
                        100.0 * sum(r["gold"] == r["pred"] for r in rows) / max(1, len(rows))
    test_mean = {l: float(np.mean([acc[s]["test"][l] for s in acc if l in acc[s].get("test", {})])) for l in langs}
    return {
        "task": "xnli", "setting": cfg.setting, "encoding": pre.config.lang_encoding, "pretrain_run": str(pre.run),
        "langs": langs, "seeds": cfg.seeds, "accuracy": acc, "test_mean": test_mean,
        "test_avg": float(np.mean(list(test_mean.values()))) if test_mean else math.nan,
        "frozen_projections": pre.config.lang_encoding == "xlp" and not cfg.unfreeze_projections,
        "skipped_unlabelled_rows": skipped, "out": str(cfg.out), **results,
    }


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    langs = summary["langs"]
    t = Table(title=f"xlp finetune xnli ({summary['setting']}, {summary['encoding']}): test accuracy")
    t.add_column("seed")
    for l in langs + ["avg"]:
        t.add_column(l, justify="right")
    for seed, per in summary["accuracy"].items():
        test = per.get("test", {})
        vals = [test.get(l, math.nan) for l in langs]
        t.add_row(seed, *[f"{v:.1f}" for v in vals], f"{np.nanmean(vals):.1f}")
    ui.out.print(t)
    for name, g in summary.get("groups", {}).items():
        ui.out.print(f"{name}: selected lr={g['selected']['lr']:g} batch size={g['selected']['batch_size']}")
    ui.out.print(f"out: {summary['out']}")
