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
    starts_from: str = "pretrain"              # recipes: finetune reads a pretrain run ("pretrain": one fine-tuning
                                               # per pretrain entry) or the id shards ("ids")
    evaluate_reads: tuple[str, ...] = ("finetune",)  # the stages whose folders `xlp run` gives its evaluation by
                                               # default; a task reading both names each finetune run after its
                                               # pretrain run
    scores_tasks: tuple[str, ...] = ()         # recipes: the finetune tasks whose runs its evaluation reads (default:
                                               # its own; translation also scores unmt runs)


TASKS: dict[str, TaskSpec] = {
    "xnli": TaskSpec(
        "XNLI: train on English MultiNLI (or translate-train), test on 15 languages; accuracy and transfer gap",
        finetune=("xlp_cli.tasks.xnli.config:XnliConfig", "xlp_cli.tasks.xnli.finetune:run"),
        evaluate=("xlp_cli.tasks.xnli.config:XnliEvalConfig", "xlp_cli.tasks.xnli.evaluate:run"),
        finetune_summary="xlp_cli.tasks.xnli.finetune:print_summary",
        evaluate_summary="xlp_cli.tasks.xnli.evaluate:print_summary"),
    "pos": TaskSpec(
        "UD POS tagging: train on English, tag every UD language zero-shot (XTREME); word accuracy and transfer gap",
        finetune=("xlp_cli.tasks.pos.config:PosConfig", "xlp_cli.tasks.pos.finetune:run"),
        evaluate=("xlp_cli.tasks.pos.config:PosEvalConfig", "xlp_cli.tasks.pos.scores:run"),
        finetune_summary="xlp_cli.tasks.pos.finetune:print_summary",
        evaluate_summary="xlp_cli.tasks.pos.scores:print_summary"),
    "qa": TaskSpec(
        "extractive QA: a span head trained on English TyDiQA-GoldP, XQuAD / MLQA / TyDiQA sw zero-shot; F1 and EM",
        finetune=("xlp_cli.tasks.qa.config:QaConfig", "xlp_cli.tasks.qa.finetune:run"),
        evaluate=("xlp_cli.tasks.qa.config:QaEvalConfig", "xlp_cli.tasks.qa.scores:run"),
        finetune_summary="xlp_cli.tasks.qa.finetune:print_summary", evaluate_summary="xlp_cli.tasks.qa.scores:print_summary"),
    "ner": TaskSpec(
        "NER (XTREME's PAN-X / WikiANN): train on English, tag every language zero-shot; entity F1 (seqeval) and gap",
        finetune=("xlp_cli.tasks.ner.config:NerConfig", "xlp_cli.tasks.ner.finetune:run"),
        evaluate=("xlp_cli.tasks.ner.config:NerEvalConfig", "xlp_cli.tasks.ner.scores:run"),
        finetune_summary="xlp_cli.tasks.ner.finetune:print_summary",
        evaluate_summary="xlp_cli.tasks.ner.scores:print_summary"),
    "pawsx": TaskSpec(
        "PAWS-X paraphrase pairs on XNLI's classifier: train on part of English dev (or translate-train), test the rest",
        finetune=("xlp_cli.tasks.pawsx.config:PawsxConfig", "xlp_cli.tasks.pawsx.finetune:run"),
        evaluate=("xlp_cli.tasks.pawsx.config:PawsxEvalConfig", "xlp_cli.tasks.pawsx.scores:run"),
        finetune_summary="xlp_cli.tasks.pawsx.finetune:print_summary",
        evaluate_summary="xlp_cli.tasks.pawsx.scores:print_summary"),
    "bucc": TaskSpec(
        "BUCC 2018 bitext mining without fine-tuning: ratio-margin candidates (k=4), F1 at the threshold tuned on a part",
        evaluate=("xlp_cli.tasks.bucc.config:BuccConfig", "xlp_cli.tasks.bucc.scores:run"),
        evaluate_summary="xlp_cli.tasks.bucc.scores:print_summary", evaluate_reads=("pretrain",)),
    "retrieval": TaskSpec(
        "sentence retrieval without fine-tuning (XTREME's Tatoeba, and UD PUD): xx<->en cosine nearest neighbours",
        evaluate=("xlp_cli.tasks.retrieval.config:RetrievalConfig", "xlp_cli.tasks.retrieval.scores:run"),
        evaluate_summary="xlp_cli.tasks.retrieval.scores:print_summary", evaluate_reads=("pretrain",)),
    "xtreme": TaskSpec(
        "one report: XNLI, POS and retrieval of several runs side by side (mean ± std over seeds, marked differences)",
        evaluate=("xlp_cli.tasks.evaluate_configs:XtremeConfig", "xlp_cli.tasks.xtreme:run"),
        evaluate_summary="xlp_cli.tasks.xtreme:print_summary", evaluate_reads=("finetune", "pretrain")),
    "translation": TaskSpec(
        "multilingual translation (transformer or interlingua) on parallel id shards; BLEU",
        finetune=("xlp_cli.tasks.translation.config:TranslationConfig", "xlp_cli.tasks.translation.finetune:run"),
        evaluate=("xlp_cli.tasks.translation.config:TranslationEvalConfig", "xlp_cli.tasks.translation.bleu:run"),
        finetune_summary="xlp_cli.tasks.translation.finetune:print_summary",
        evaluate_summary="xlp_cli.tasks.translation.bleu:print_summary", starts_from="ids",
        scores_tasks=("translation", "unmt")),
    "unmt": TaskSpec(
        "unsupervised translation of a language pair: denoising + on-the-fly back-translation + MLM; BLEU",
        finetune=("xlp_cli.tasks.unmt.config:UnmtConfig", "xlp_cli.tasks.unmt.finetune:run"),
        finetune_summary="xlp_cli.tasks.unmt.finetune:print_summary", starts_from="ids"),
    "lexicon": TaskSpec(
        "bilingual-dictionary cosine and P@1/P@5 of pre-trained embeddings (VLE Table 2)",
        evaluate=("xlp_cli.tasks.evaluate_configs:LexiconConfig", "xlp_cli.tasks.lexicon:run"),
        evaluate_summary="xlp_cli.tasks.lexicon:print_summary", evaluate_reads=("pretrain",)),
    "analysis": TaskSpec(
        "XLP Fig. 2/4/5 and VLE Fig. 2 of pre-trained runs, as PNG and numbers",
        evaluate=("xlp_cli.tasks.evaluate_configs:AnalysisConfig", "xlp_cli.tasks.analysis:run"),
        evaluate_reads=("pretrain",)),
    "claims": TaskSpec(
        "the XLP/VLE papers' claims tested over seeds (paired t-test, Holm, power) on pre-training runs and their "
        "XNLI / POS fine-tunings",
        evaluate=("xlp_cli.tasks.evaluate_configs:ClaimsConfig", "xlp_cli.tasks.claims:run"),
        evaluate_summary="xlp_cli.tasks.claims:print_summary", evaluate_reads=("finetune", "pretrain")),
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


def finetune(cfg: Any) -> dict[str, Any]:
    """The `xlp finetune` stage: the chosen task's fine-tuning."""
    return run("finetune", cfg)


def print_finetune_summary(summary: dict[str, Any]) -> None:
    if summary.get("rank", 0) != 0:  # torchrun: one table, from rank 0 (`--json` prints every process's summary)
        return
    print_summary("finetune", summary)


def print_summary(command: str, summary: dict[str, Any]) -> None:
    from xlp_cli.core import ui  # (rich: the registry is read at CLI start-up)

    task = summary.get("task")
    printer = getattr(TASKS[task], f"{command}_summary") if task in TASKS else None
    if printer:
        load(printer)(summary)
    else:
        ui.print_summary(f"xlp {command} --task {task}", summary)
