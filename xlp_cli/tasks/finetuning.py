"""What every fine-tuning task on a pre-trained encoder shares (XNLI, POS): the pre-trained run, the output
folder guard, one grid point trained on the engine (`done.json` when finished), and the lr x batch-size x seed
search with its selection.

    pre = Pretrained(RUN, "best")                       # model config, languages, text encoder, vocabulary check
    config, done = start(cfg)                           # guard --out; `done` = results.json of a finished twin
    found = search(cfg.out / "runs" / group, lrs, bss, seeds, train)   # train(run_dir, lr, bs, seed) -> done.json
    found["selected"], found["best"][seed]              # the chosen (lr, batch size), its best checkpoints
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from xlp_cli.artifacts import outdir
from xlp_cli.artifacts.files import sha256_file, write_json_atomic
from xlp_cli.artifacts.manifest import config_hash, read_manifest
from xlp_cli.bpe.encoder import TextEncoder
from xlp_cli.core import config as cfgmod, textfile, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.models.heads import PlugInClassifier, SequenceClassifier
from xlp_cli.models.veco import is_veco, plug_out
from xlp_cli.train import engine
from xlp_cli.train.objectives.base import Objective
from xlp_cli.train.runtime import Runtime


def fmt_number(v: float) -> str:
    return f"{v:g}"


def prediction_scores(out: Path, seeds: list[int], langs: list[str], score: Callable[[list[dict[str, Any]]], float],
                      splits: tuple[str, ...] = ("test",)) -> dict[str, dict[str, dict[str, float]]]:
    """{seed: {split: {lang: score(rows)}}} recomputed from the prediction files a run just wrote
    (`OUT/predictions/seed<S>/<split>.<lang>.jsonl`; a file that is not there is left out)."""
    by_seed: dict[str, dict[str, dict[str, float]]] = {}
    for seed in seeds:
        for split in splits:
            for lang in langs:
                path = out / "predictions" / f"seed{seed}" / f"{split}.{lang}.jsonl"
                if path.is_file():
                    rows = [r for _, r in textfile.json_lines(path)]
                    by_seed.setdefault(str(seed), {}).setdefault(split, {})[lang] = score(rows)
    return by_seed


def transfer(per_seed: dict[str, dict[str, float]], langs: list[str], train_lang: str) -> dict[str, Any]:
    """The test mean over seeds per language, their average, and the transfer gap (the training language's mean
    minus the mean of the others; nan without both)."""
    mean = {l: float(np.mean(v)) for l in langs if (v := [s[l] for s in per_seed.values() if l in s])}
    others = [m for l, m in mean.items() if l != train_lang]
    return {"test_mean": mean, "test_avg": float(np.mean(list(mean.values()))) if mean else math.nan,
            "gap": mean[train_lang] - float(np.mean(others)) if train_lang in mean and others else math.nan}


def accuracy(rows: list[dict[str, Any]]) -> float:
    """% of prediction rows whose `pred` is their `gold` (classification tasks)."""
    return 100.0 * sum(r["gold"] == r["pred"] for r in rows) / max(1, len(rows))


class Pretrained:
    """The pre-training run: model config, languages, text encoder, and the vocabulary check."""

    def __init__(self, run: Path, which: str):
        self.run = Path(run)
        self.manifest = read_manifest(self.run, stage="pretrain")
        self.which = which
        model = ckpt.load_pretrained(self.run, which)
        self.config = model.config
        self.langs: list[str] = list(model.config.langs)
        self.prefix_len = int(model.prefix_len)
        self.frozen_when_finetuning = model.lang_encoding.spec.frozen_when_finetuning
        self.cross_attention = is_veco(model)
        self.text_encoder = self._text_encoder()
        self._check_vocabulary()

    def _text_encoder(self):
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
            if sha256_file(run_dict) != sha256_file(te_dict):
                raise BadInput(f"the run's dict.txt differs from the dictionary of its id shards ({te_dict})", path=run_dict)

    def new_head(self, head: type, dropout: float, device: torch.device, **kw: Any) -> torch.nn.Module:
        """A fresh task model (`models/heads.py`) on this run's encoder; a VECO encoder loses its cross-attention
        (plug-out fine-tuning, VECO 3.1)."""
        encoder = ckpt.load_pretrained(self.run, self.which)
        return head(plug_out(encoder), dropout=dropout, **kw).to(device)

    def new_classifier(self, dropout: float, device: torch.device, veco: str = "plug-out") -> torch.nn.Module:
        if veco == "plug-in":  # VECO plug-in: the encoder keeps its cross-attention
            return PlugInClassifier(ckpt.load_pretrained(self.run, self.which), dropout=dropout).to(device)
        return self.new_head(SequenceClassifier, dropout, device)

    def lang_index(self, lang: str) -> int:
        if lang not in self.langs:
            raise BadInput(f"language {lang!r} has no pre-training data in this run (its languages: "
                           f"{', '.join(self.langs)})", path=self.run)
        return self.langs.index(lang)

    def upstream(self) -> list[dict[str, Any]]:
        """The finetune manifest's `upstream` entry for this run."""
        return [{"path": str(self.run.resolve()), "stage": "pretrain", "config_hash": self.manifest.get("config_hash")}]


def start(cfg: Any, owns: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The config recorded in the manifest, and the summary of a finished run with the same config (else None).
    `out` is locked and claimed for the entries `owns` (`artifacts.guard_out_dir`: a folder written with another
    config is refused unless --force); the caller's run function is `outdir.scoped`."""
    config = cfgmod.identity(cfg)
    config["data"] = [str(Path(d).resolve()) for d in cfg.data]
    previous = outdir.guard_out_dir(cfg.out, "finetune", config, force=cfg.force, owns=owns)
    if previous is not None and previous.get("config_hash") == config_hash(config) and (cfg.out / "results.json").is_file():
        ui.info(f"finetune: {cfg.out} is already complete (same config); nothing to do")
        return config, {**textfile.json_object(cfg.out / "results.json"), "skipped": True}
    return config, None


class Epochs(Objective):
    """A supervised objective over `n` examples in epochs: each epoch's order is a permutation seeded by
    (seed, epoch) alone, so a run resumes anywhere by its step count; `epoch_size` examples (default: all) make
    one epoch of `ceil(epoch_size / batch_size)` updates. Subclasses batch `rows(step)`."""

    def __init__(self, n: int, batch_size: int, seed: int, epoch_size: int = 0):
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.per_epoch = min(n, epoch_size) if epoch_size else n
        self.steps_per_epoch = math.ceil(self.per_epoch / batch_size)
        self._perm: tuple[int, np.ndarray] = (-1, np.zeros(0, np.int64))

    def _order(self, epoch: int) -> np.ndarray:
        if self._perm[0] != epoch:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perm = (epoch, torch.randperm(self.n, generator=g).numpy()[:self.per_epoch])
        return self._perm[1]

    def rows(self, step: int) -> np.ndarray:
        """The example indices of update `step` (0-based)."""
        epoch, pos = divmod(step, self.steps_per_epoch)
        return self._order(epoch)[pos * self.batch_size: (pos + 1) * self.batch_size]


# ---------------------------------------------------------------- one grid point, the search
def read_done(folder: Path) -> dict[str, Any] | None:
    path = Path(folder) / "done.json"
    if not path.is_file():
        return None
    try:
        return textfile.json_file(path)
    except BadInput:
        return None


def fit_point(run_dir: Path, model: torch.nn.Module, objective: Any, settings: engine.Settings, rt: Runtime,
              info: dict[str, Any]) -> dict[str, Any]:
    """Train one grid point on the engine (it resumes `checkpoints/last`); write and return done.json."""
    res = engine.fit(objective, model, settings, run_dir, rt)
    done = {**info, "best_score": res["best_score"], "best_step": res["best_step"],
            "best_dev": (res["best_metrics"] or {}).get("dev", {}), "steps": res["steps"]}
    write_json_atomic(run_dir / "done.json", done)
    return done


def point_dir(root: Path, lr: float, bs: int, seed: int) -> Path:
    return Path(root) / f"lr{fmt_number(lr)}-bs{bs}-seed{seed}"


def search(root: Path, lrs: list[float], bss: list[int], seeds: list[int],
           train: Callable[[Path, float, int, int], dict[str, Any]]) -> dict[str, Any]:
    """Train every (lr, batch size, seed) under `root` (finished points are read back from done.json) and keep
    the (lr, batch size) with the best mean selection score over seeds.
    Returns {"grid": [...], "selected": {lr, batch_size}, "best": {seed: its best checkpoint folder}}."""
    grid = []
    for lr in lrs:
        for bs in bss:
            per_seed = []
            for seed in seeds:
                run_dir = point_dir(root, lr, bs, seed)
                run_dir.mkdir(parents=True, exist_ok=True)
                per_seed.append(read_done(run_dir) or train(run_dir, lr, bs, seed))
            mean = float(np.mean([d["best_score"] for d in per_seed]))
            grid.append({"lr": lr, "batch_size": bs, "mean_selection_accuracy": mean, "seeds": per_seed})
    chosen = max(grid, key=lambda e: e["mean_selection_accuracy"])
    best = {seed: point_dir(root, chosen["lr"], chosen["batch_size"], seed) / "checkpoints" / "best" for seed in seeds}
    return {"grid": grid, "selected": {"lr": chosen["lr"], "batch_size": chosen["batch_size"]}, "best": best}
