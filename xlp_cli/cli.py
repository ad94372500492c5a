"""The `xlp` command line. Thin: flags -> stage config -> stage run(). No logic lives here.

Each stage declares its config dataclass (a light module) and its run function (imported only
when the command runs, so `xlp --help` stays fast).
"""

from __future__ import annotations

import typer

from xlp_cli import __version__
from xlp_cli.commands import stage_command

app = typer.Typer(
    name="xlp",
    help="Raw multilingual text -> pretrained multilingual Transformers, with switchable language encodings.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"xlp {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    pass


bpe_app = typer.Typer(help="Learn and apply BPE (fastBPE format) or SentencePiece.", no_args_is_help=True)
app.add_typer(bpe_app, name="bpe")

# (parent app, name, config dataclass, run function, help, optional summary printer)
_COMMANDS = [
    (app, "prepare", "xlp_cli.prepare.config:PrepareConfig", "xlp_cli.prepare.run:run",
     "Extract, clean, normalize, tokenize and split raw text into Parquet shards.", "xlp_cli.prepare.run:print_summary"),
    (app, "text", "xlp_cli.text.config:TextConfig", "xlp_cli.text.filter:run",
     "Clean, normalize, tokenize and lowercase text lines (stdin or INPUT) into OUTPUT: a drop-in for XLM's tokenize.sh.", "xlp_cli.text.filter:print_summary"),
    (bpe_app, "learn", "xlp_cli.bpe.config:BpeLearnConfig", "xlp_cli.bpe.run:learn",
     "Learn BPE merge codes (fastBPE format) or a SentencePiece model from a prepared train split.", None),
    (bpe_app, "apply", "xlp_cli.bpe.config:BpeApplyConfig", "xlp_cli.bpe.run:apply",
     "Apply codes to prepared shards: subword text and XLM-layout token ids.", None),
    (app, "vocab-score", "xlp_cli.vocab.config:VocabConfig", "xlp_cli.vocab.run:run",
     "Per-language token counts, monolinguality m(x) and top-K vocabularies (VLE).", "xlp_cli.vocab.run:print_summary"),
    (app, "pretrain", "xlp_cli.train.config:PretrainConfig", "xlp_cli.train.pretrain:run",
     "Pre-train a Transformer encoder with MLM/TLM and a chosen language encoding.", None),
    (app, "finetune", "xlp_cli.finetune.config:FinetuneConfig", "xlp_cli.finetune.run:run",
     "Fine-tune a pre-trained model: XNLI classification or multilingual translation.", "xlp_cli.finetune.run:print_summary"),
    (app, "translate", "xlp_cli.finetune.translate_config:TranslateConfig", "xlp_cli.finetune.translate:run",
     "Translate a file or stdin with a trained translation model (beam search or greedy).", "xlp_cli.finetune.translate:print_summary"),
    (app, "evaluate", "xlp_cli.evaluate.config:EvaluateConfig", "xlp_cli.evaluate.run:run",
     "Score runs: XNLI accuracy and transfer gap, BLEU, lexicon cosine, analysis figures, a report.", "xlp_cli.evaluate.run:print_summary"),
    (app, "run", "xlp_cli.recipes:RunConfig", "xlp_cli.recipes:run",
     "Run a TOML recipe: prepare -> bpe -> vocab-score -> pretrain -> finetune -> evaluate, skipping finished stages.", "xlp_cli.recipes:print_summary"),
]

for _app, _name, _cfg, _run, _help, _summary in _COMMANDS:
    stage_command(_app, _name, _cfg, _run, _help, _summary, title=("xlp bpe " if _app is bpe_app else "xlp ") + _name)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
