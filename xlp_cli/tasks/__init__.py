"""The registry of tasks: what `xlp finetune --task NAME` and `xlp evaluate --task NAME` can do. No torch here.

A task is one module (or a small package) plus one line in `TASKS`: its config class and run function for
`xlp finetune` and/or `xlp evaluate` ("module:attr" strings, imported only when used), and optional summary
printers. The flags of `xlp finetune` / `xlp evaluate` are the union of the tasks' configs (`tasks/common.py`);
each run builds the config of its own task, and a flag that does not apply to that task is a one-line error.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    doc: str
    finetune: tuple[str, str] | None = None    # (config class, run function)
    evaluate: tuple[str, str] | None = None
    finetune_summary: str | None = None        # printer of the run's summary dict
    evaluate_summary: str | None = None
    evaluate_reads: str = "finetune"           # the stage whose folders `xlp run` gives its evaluation by default


TASKS: dict[str, TaskSpec] = {
    "xnli": TaskSpec(
        "XNLI: train on English MultiNLI (or translate-train), test on 15 languages; accuracy and transfer gap",
        finetune=("xlp_cli.tasks.xnli.config:XnliConfig", "xlp_cli.tasks.xnli.finetune:run"),
        evaluate=("xlp_cli.tasks.xnli.config:XnliEvalConfig", "xlp_cli.tasks.xnli.scores:run"),
        finetune_summary="xlp_cli.tasks.xnli.finetune:print_summary",
        evaluate_summary="xlp_cli.tasks.xnli.scores:print_summary"),
    "translation": TaskSpec(
        "multilingual translation (transformer or interlingua) on parallel id shards; BLEU",
        finetune=("xlp_cli.tasks.translation.config:TranslationConfig", "xlp_cli.tasks.translation.finetune:run"),
        evaluate=("xlp_cli.tasks.translation.config:TranslationEvalConfig", "xlp_cli.tasks.translation.bleu:run"),
        finetune_summary="xlp_cli.tasks.translation.finetune:print_summary",
        evaluate_summary="xlp_cli.tasks.translation.bleu:print_summary"),
    "unmt": TaskSpec(
        "unsupervised translation of a language pair: denoising + on-the-fly back-translation + MLM; BLEU",
        finetune=("xlp_cli.tasks.unmt.config:UnmtConfig", "xlp_cli.tasks.unmt.finetune:run"),
        finetune_summary="xlp_cli.tasks.unmt.finetune:print_summary"),
    "lexicon": TaskSpec(
        "bilingual-dictionary cosine and P@1/P@5 of pre-trained embeddings (VLE Table 2)",
        evaluate=("xlp_cli.tasks.lexicon:LexiconConfig", "xlp_cli.tasks.lexicon:run"),
        evaluate_summary="xlp_cli.tasks.lexicon:print_summary", evaluate_reads="pretrain"),
    "analysis": TaskSpec(
        "XLP Fig. 2/4/5 and VLE Fig. 2 of pre-trained runs, as PNG and numbers",
        evaluate=("xlp_cli.tasks.analysis:AnalysisConfig", "xlp_cli.tasks.analysis:run"), evaluate_reads="pretrain"),
    "claims": TaskSpec(
        "the XLP/VLE papers' claims tested over seeds (paired t-test) on XNLI fine-tunings of pre-training runs",
        evaluate=("xlp_cli.tasks.claims:ClaimsConfig", "xlp_cli.tasks.claims:run"),
        evaluate_summary="xlp_cli.tasks.claims:print_summary"),
}


def load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def names(command: str) -> tuple[str, ...]:
    """The tasks that `command` ("finetune" or "evaluate") offers, in registry order."""
    return tuple(n for n, s in TASKS.items() if getattr(s, command) is not None)


def config_classes(command: str) -> dict[str, type]:
    return {n: load(getattr(TASKS[n], command)[0]) for n in names(command)}


def run(command: str, cfg: Any) -> dict[str, Any]:
    return load(getattr(TASKS[cfg.task], command)[1])(cfg)


def print_summary(command: str, summary: dict[str, Any]) -> None:
    from xlp_cli import ui

    task = summary.get("task")
    printer = getattr(TASKS[task], f"{command}_summary") if task in TASKS else None
    if printer:
        load(printer)(summary)
    else:
        ui.print_summary(f"xlp {command} --task {task}", summary)
