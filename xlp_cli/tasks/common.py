"""The config fields every task shares, and the dispatch from `--task` to the task's own config class.

`xlp finetune` and `xlp evaluate` show the union of their tasks' flags. A run builds only its task's config:
    cfg = task_config("finetune", {"task": "xnli", "lr": [2e-3], ...}, where="recipe.toml [finetune]")
A key that is not a field of that task's config is a one-line error naming the task.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from xlp_cli import tasks, tasks as registry
from xlp_cli.core import config as cfgmod
from xlp_cli.core.config import FORCE_HELP, SEED_MAX, STEPS_MAX, opt
from xlp_cli.core.errors import BadInput, did_you_mean
from xlp_cli.train.sections import Optimizer, Precision, Runtime, Tracking


@dataclasses.dataclass
class FinetuneCommon(Optimizer, Precision, Runtime, Tracking):
    """What every fine-tuning task shares: these fields, and the sections of `train/sections.py` (--warmup,
    --weight-decay, --clip-norm; --amp; --device, --threads; --tensorboard, --wandb). A task with other defaults names them in `@defaults`."""
    task: str = opt("xnli", "Fine-tuning task (the registry in xlp_cli/tasks).", choices=registry.names("finetune"))
    data: list[Path] = opt(factory=list, help="Input folders (xnli: the `xlp pretrain` run; translation: the `xlp bpe apply` output).")
    out: Path = opt(Path("out/finetune"), "Output folder.")
    lang: list[str] = opt(factory=list, help="Languages (xnli: test languages; translation: languages kept).")
    which: str = opt("best", "Which pre-training checkpoint to start from.", choices=("best", "last"))
    seeds: list[int] = opt(factory=lambda: [1], help="Seeds; one fine-tuning run per seed (e.g. 1,2,3).", lo=0, hi=SEED_MAX)
    lr: list[float] = opt(factory=list, help="Learning rate(s) (empty: the task's default).", gt=0, hi=10)
    epochs: int = opt(3, "Passes over the training set.", lo=0, hi=10**6)
    max_steps: int = opt(0, "Stop after this many optimizer steps per run (0: no limit).", lo=0, hi=STEPS_MAX)
    log_every: int = opt(50, "Log the training loss every N steps (metrics.jsonl).", volatile=True, lo=1, hi=STEPS_MAX)
    force: bool = opt(False, FORCE_HELP, volatile=True)

    def validate(self) -> None:
        if any(s < 0 for s in self.seeds) or not self.seeds:
            raise BadInput("--seeds needs at least one non-negative seed")
        if any(not v > 0 for v in self.lr):
            raise BadInput("--lr values must be positive numbers")
        if self.epochs < 1 and self.max_steps < 1:
            raise BadInput("give --epochs >= 1 or --max-steps >= 1")
        self.check_optimizer()
        if self.log_every < 1:
            raise BadInput("--log-every must be at least 1")


def validate_head_training(cfg: Any, task: str) -> None:
    """The checks of a task that trains a head on one pre-trained run (xnli, pos): batch sizes, dropout,
    exactly one --data, --max-len."""
    if any(v <= 0 for v in cfg.batch_size):
        raise BadInput("--batch-size values must be positive")
    if not 0.0 <= cfg.dropout < 1.0:
        raise BadInput(f"--dropout must be in [0, 1), got {cfg.dropout}")
    if len(cfg.data) != 1:
        raise BadInput(f"{task} fine-tuning needs exactly one --data: an `xlp pretrain` run folder")
    if cfg.max_len < 8:
        raise BadInput("--max-len must be at least 8")


def print_seed_table(title: str, langs: list[str], by_seed: dict[str, dict[str, float]]) -> None:
    """A terminal table of accuracy per seed (rows) and language (columns), with the average."""
    import math

    from rich.table import Table

    from xlp_cli.core import ui  # (rich: not at CLI start-up, where this module is read for the flags)

    t = Table(title=title)
    t.add_column("seed")
    for lang in langs + ["avg"]:
        t.add_column(lang, justify="right")
    for seed, per in by_seed.items():
        vals = [per.get(lang, math.nan) for lang in langs]
        known = [v for v in vals if not math.isnan(v)]
        t.add_row(seed, *[f"{v:.1f}" for v in vals], f"{sum(known) / len(known):.1f}" if known else "-")
    ui.out.print(t)


@dataclasses.dataclass
class EvaluateCommon:
    task: str = opt("xnli", "What to evaluate (the registry in xlp_cli/tasks).", choices=registry.names("evaluate"))
    data: list[Path] = opt(factory=list, help="Run folders, repeatable (xnli/pos/translation: `xlp finetune` outputs; "
                                              "lexicon/analysis: `xlp pretrain` runs; retrieval: `xlp pretrain` runs or "
                                              "HF model folders from `xlp export`; xtreme: any of these).")
    name: list[str] = opt(factory=list, help="A name per --data, same order (default: the run's language encoding). Equal names = seeds of one run.")
    out: Path = opt(Path("out/evaluate"), "Output folder (report.md, report.html, *.png, results.json).")
    lang: list[str] = opt(factory=list, help="Languages to report (default: all found, in the XLP paper's Table 1 order).")
    baseline: str = opt("", "Name of the run the others are compared with (default: the first).")
    title: str = opt("", "Report title.")
    force: bool = opt(False, FORCE_HELP, volatile=True)

    def validate(self) -> None:
        if not self.data:
            raise BadInput("give at least one --data run folder")
        for name in self.name:
            if not name or "/" in name or "\\" in name or name in (".", ".."):
                raise BadInput(f"--name {name!r}: a run name names files in --out; use letters, digits, '.', '-' or '_'")
        if self.name and len(self.name) != len(self.data):
            raise BadInput(f"--name gives {len(self.name)} names for {len(self.data)} --data folders; give one per folder")


@dataclasses.dataclass(frozen=True)
class TaskDispatch:
    """The config of a command whose fields depend on --task (what `cli/commands.py` and `recipes/run.py` build)."""
    command: str   # "finetune" or "evaluate"

    def classes(self) -> dict[str, type]:
        return tasks.config_classes(self.command)

    def default_task(self) -> str:
        base = FinetuneCommon if self.command == "finetune" else EvaluateCommon
        return next(f.default for f in dataclasses.fields(base) if f.name == "task")

    def build(self, values: dict[str, Any], where: str = "config", flags: frozenset[str] = frozenset()) -> Any:
        """The task's config from flag-name (or field-name) keys (`flags`: those given on the command line)."""
        classes = self.classes()
        task = str(values.get("task", self.default_task()))
        if task not in classes:
            at = cfgmod.COMMAND_LINE if "task" in flags else where
            raise cfgmod.bad_key(at, "task", f"bad value for {cfgmod.key_ref('task', at)}: {task!r}"
                                          f"{did_you_mean(task, list(classes))} (choose from {', '.join(classes)})")
        cls = classes[task]
        own = {f.name for f in dataclasses.fields(cls)} | set(getattr(cls, "ALIASES", {}))
        for key in values:
            name = key.replace("-", "_")
            if name not in own and any(name in {f.name for f in dataclasses.fields(c)} for c in classes.values()):
                at = cfgmod.COMMAND_LINE if key in flags else where
                raise cfgmod.bad_key(at, key, f"{cfgmod.key_ref(name, at)} does not apply to --task {task}")
        return cfgmod.from_dict(cls, {**values, "task": task}, where=where, flags=flags)

    def fields(self) -> list[tuple[dataclasses.Field, Any, list[str]]]:
        """The union of the tasks' fields: (field, type, the tasks that have it), first occurrence wins (each
        class in `--help` order: `config.help_order`)."""
        seen: dict[str, tuple[dataclasses.Field, Any, list[str]]] = {}
        for task, cls in self.classes().items():
            hints = cfgmod.field_types(cls)
            for f in cfgmod.help_order(cls):
                if f.name in seen:
                    seen[f.name][2].append(task)
                else:
                    seen[f.name] = (f, hints[f.name], [task])
        return list(seen.values())


FINETUNE = TaskDispatch("finetune")   # the config of `xlp finetune` (stages/__init__.py)
EVALUATE = TaskDispatch("evaluate")   # the config of `xlp evaluate`
