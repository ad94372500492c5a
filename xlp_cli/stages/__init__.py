"""The one table of xlp's stages: the CLI commands (`cli/app.py`) and the recipe stages (`recipes/run.py`) both read it.

Each entry: the command path, the config (a dataclass, or a `TaskDispatch` whose class depends on --task), the run
function, the `stage` its manifest records (None: it writes no stage folder), its help line, a worked example (the
end of its --help; tests/test_cli_help.py parses it), an optional summary printer, whether a recipe may
contain it, an optional `tidy(out)` that `xlp run` calls when it skips a finished stage (it removes what a run
killed after its manifest left behind), and whether `run_staged` stages the object-store URIs of its config
(docs/storage.md). References are "module:attr" strings, imported only when used.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
from typing import Any

from xlp_cli.artifacts import uris
from xlp_cli.core import config as cfgmod
from xlp_cli.tasks import names as task_names  # (the registry is torch-free: names and "module:attr" strings)


@dataclasses.dataclass(frozen=True)
class Stage:
    command: tuple[str, ...]
    config: str
    run: str
    manifest: str | None
    help: str
    example: str = ""
    summary: str | None = None
    in_recipes: bool = True
    tidy: str | None = None
    staged: bool = True  # object-store URIs staged around the run function (False: `xlp run`, whose stages are)


def _tasks(command: str) -> str:
    """The tasks of `xlp finetune` or `xlp evaluate`, as their help lists them: "xnli, pos or unmt"."""
    names = task_names(command)
    return ", ".join(names[:-1]) + " or " + names[-1]


STAGES: dict[str, Stage] = {
    "prepare": Stage(("prepare",), "xlp_cli.prepare.config:PrepareConfig", "xlp_cli.prepare.run:run", "prepare",
                     "Extract, clean, normalize, tokenize and split raw text into Parquet shards.",
                     "xlp prepare --source gettext --lang en,de,fr,zh --mono-from-parallel --out out/gettext\n"
                     "xlp prepare --source text --lang en ../shared/data/commonvoice_sentences/en.sentence-collector.txt.gz "
                     "--out out/prep-en",
                     "xlp_cli.prepare.run:print_summary", tidy="xlp_cli.prepare.run:tidy"),
    "text": Stage(("text",), "xlp_cli.text.config:TextConfig", "xlp_cli.text.filter:run", None,
                  "Clean, normalize, tokenize and lowercase text lines (stdin or INPUT) into OUTPUT: a drop-in for "
                  "XLM's tokenize.sh.", "cat raw.en | xlp text --lang en", "xlp_cli.text.filter:print_summary",
                  in_recipes=False),
    "bpe": Stage(("bpe", "learn"), "xlp_cli.bpe.config:BpeLearnConfig", "xlp_cli.bpe.run:learn", "bpe-learn",
                 "Learn BPE merge codes (fastBPE format) or a SentencePiece model from a prepared train split.",
                 "xlp bpe learn --data out/gettext --out out/bpe --codes 8000"),
    "bpe-apply": Stage(("bpe", "apply"), "xlp_cli.bpe.config:BpeApplyConfig", "xlp_cli.bpe.run:apply", "bpe-apply",
                       "Apply codes to prepared shards: subword text and XLM-layout token ids.",
                       "xlp bpe apply --data out/gettext --data out/bpe --out out/ids"),
    "vocab-score": Stage(("vocab-score",), "xlp_cli.vocab.config:VocabConfig", "xlp_cli.vocab.run:run", "vocab-score",
                         "Per-language token counts, monolinguality m(x) and top-K vocabularies (VLE).",
                         "xlp vocab-score --data out/ids --out out/vocab --k 100",
                         "xlp_cli.vocab.run:print_summary"),
    "pretrain": Stage(("pretrain",), "xlp_cli.train.config:PretrainConfig", "xlp_cli.train.pretrain:run", "pretrain",
                      "Pre-train a Transformer encoder with MLM/TLM and a chosen language encoding (by default "
                      "the XLP paper's xlm15 run on a GPU, a run of minutes on a CPU: --preset auto).",
                      "xlp pretrain --data out/ids --out runs/x\n"
                      "xlp pretrain --data out/ids --data out/vocab --out runs/xlm15 --lang-encoding vle "
                      "--preset xlm15"),
    "finetune": Stage(("finetune",), "xlp_cli.tasks.common:FINETUNE", "xlp_cli.tasks:finetune", "finetune",
                      "Fine-tune a pre-trained model on a task (--task " + _tasks("finetune") + ").",
                      "xlp finetune --task xnli --data runs/xlp --out ft/xlp --lang en,de,fr,zh --seeds 1,2,3\n"
                      "xlp finetune --task translation --data out/multi30k --out mt/xlp --lang de,en,fr --lang-encoding xlp "
                      "--preset tiny",
                      "xlp_cli.tasks:print_finetune_summary"),
    "translate": Stage(("translate",), "xlp_cli.tasks.translation.config:TranslateConfig",
                       "xlp_cli.tasks.translation.decode:run", None,
                       "Translate a file or stdin with a trained translation model (beam search or greedy).",
                       'echo "Ein Hund rennt durch den Schnee." | xlp translate --model mt/xlp --src-lang de --tgt-lang en',
                       "xlp_cli.tasks.translation.decode:print_summary", in_recipes=False),
    "evaluate": Stage(("evaluate",), "xlp_cli.tasks.common:EVALUATE", "xlp_cli.evaluate.run:run", "evaluate",
                      "Score runs (--task " + _tasks("evaluate") + ") and write a report.",
                      "xlp evaluate --task xnli --data ft/additive --data ft/xlp --out out/xnli-report\n"
                      "xlp evaluate --task claims --data ft/additive --data ft/xlp --name additive,xlp --out out/claims",
                      "xlp_cli.evaluate.run:print_summary"),
    "export": Stage(("export",), "xlp_cli.export.config:ExportConfig", "xlp_cli.export.run:run", "export",
                    "Export a pre-trained run as a Hugging Face transformers folder (config.json, weights, tokenizers).",
                    "xlp export --format hf runs/xlp hf/xlp", in_recipes=False),
    "run": Stage(("run",), "xlp_cli.recipes.run:RunConfig", "xlp_cli.recipes.run:run", None,
                 "Run a TOML recipe: prepare -> bpe -> vocab-score -> pretrain -> finetune -> evaluate, skipping finished stages.",
                 "xlp run pipelines/demo.toml --dry-run\nxlp run pipelines/demo.toml",
                 "xlp_cli.recipes.report:print_summary", in_recipes=False, staged=False),
}
RECIPE_STAGES = [n for n, s in STAGES.items() if s.in_recipes]


def load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def run_staged(ref: str, cfg: Any) -> Any:
    """Call the run function `ref` on `cfg`. A config naming object-store URIs (s3://, gs://, hf://) runs on local
    staging folders: its inputs pulled first, its --out leased, pushed and committed (docs/storage.md)."""
    fn = load(ref)
    gc.enable()  # (the console script pauses the collector for the start-up's imports: cli/entry.py)
    if not uris.in_config(cfg) or any(s.run == ref and not s.staged for s in STAGES.values()):
        return fn(cfg)
    from xlp_cli.artifacts import staging  # (pyarrow.fs: loaded only by a command that names a URI)

    return staging.run(fn, cfg)


def build_config(stage: str, values: dict[str, Any], where: str) -> Any:
    """The stage's typed config from flag-name keys (a task dispatch picks the task's own config class)."""

    cls = load(STAGES[stage].config)
    if hasattr(cls, "build"):
        return cls.build(values, where)
    return cfgmod.from_dict(cls, values, where=where)


def config_fields(stage: str) -> set[str]:
    """Field names any config of the stage has (for a dispatch: the union over its tasks)."""
    cls = load(STAGES[stage].config)
    if hasattr(cls, "fields"):
        return {f.name for f, _, _ in cls.fields()}
    return {f.name for f in dataclasses.fields(cls)}
