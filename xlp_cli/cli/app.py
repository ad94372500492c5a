"""The `xlp` command line. Thin: flags -> stage config -> stage run(). No logic lives here.

Each stage declares its config dataclass (a light module) and its run function (imported only
when the command runs, so `xlp --help` stays fast). `python -m xlp_cli` is the same program.

`main()` builds only the command that the command line names (`xlp prepare ...` builds `prepare` alone: the
other stages' configs are not imported and typer does not set up their parameters, ~0.1 s of every start); help,
completion and a mistyped command get every command. `from xlp_cli.cli.app import app` is the app with all of them.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from xlp_cli import __version__
from xlp_cli.cli.commands import XlpGroup, example_text, stage_command
from xlp_cli.core.errors import INTERRUPTED
from xlp_cli.stages import STAGES

# the end of `xlp --help`: raw text to a pre-trained model on this machine's own gettext catalogs (offline)
EXAMPLE = """xlp prepare --source gettext --lang en,de,fr --mono-from-parallel --bpe-codes 8000 --out out/gt
xlp pretrain --data out/gt-ids --out runs/x
xlp evaluate --task lexicon --data runs/x --out out/lexicon"""
ARROW_FREE = {"text"}  # stages that never load pyarrow (nor numpy): `xlp text` starts without them (~0.1 s)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"xlp {__version__}")
        raise typer.Exit()


HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}  # `-h` is `--help` on every command (commands.py too)


def build_app(only: set[str] | None = None) -> typer.Typer:
    """The `xlp` app with the commands of the stages in `only` (None: all)."""
    app = typer.Typer(
        name="xlp",
        cls=XlpGroup,  # usage mistakes (a typo'd flag, `--workers two`) are one line, exit 2
        help="Raw multilingual text -> pretrained multilingual Transformers, with switchable language encodings.",
        epilog="Each command's --help lists every flag with its default and its choices, and ends with an example. "
               "Shell completion: xlp --install-completion.\n\n" + example_text(EXAMPLE),
        no_args_is_help=True,
        add_completion=True,
        rich_markup_mode=None,  # plain help: no Rich markup eating "[default: ...]", no cut flag names at 80 columns
        pretty_exceptions_enable=False,
        context_settings=HELP_OPTIONS,
    )

    @app.callback()
    def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                           help="Print the version.")) -> None:
        pass

    groups: dict[str, typer.Typer] = {}
    for stage, spec in STAGES.items():  # the one stage table (stages/__init__.py)
        if only is not None and stage not in only:
            continue
        parent = app
        if len(spec.command) > 1:
            if spec.command[0] not in groups:
                groups[spec.command[0]] = typer.Typer(help="Learn and apply BPE (fastBPE format) or SentencePiece.",
                                                      no_args_is_help=True, rich_markup_mode=None,
                                                      context_settings=HELP_OPTIONS)
                app.add_typer(groups[spec.command[0]], name=spec.command[0])
            parent = groups[spec.command[0]]
        stage_command(parent, stage)
    return app


def named_stages(args: list[str]) -> set[str] | None:
    """The stages whose commands `args` (the command line after `xlp`) can reach, or None for all of them: for a
    root option (`--help`, `--version`, completion), shell completion, or a name that is no command (its
    did-you-mean lists every command)."""
    if not args or args[0].startswith("-") or any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        return None
    top = {spec.command[0] for spec in STAGES.values()}
    if args[0] not in top:
        return None
    reached = {s for s, spec in STAGES.items() if spec.command[0] == args[0]}
    if len(reached) > 1 and len(args) > 1:  # a group (`xlp bpe apply ...`): its one command, if named
        one = {s for s in reached if STAGES[s].command[1:2] == (args[1],)}
        return one or reached
    return reached


def __getattr__(name: str) -> Any:  # `from xlp_cli.cli.app import app`: every command, built on first use
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(name)


def main() -> None:
    """Run the command line. Usage mistakes (an unknown flag or command) are one line, exit 2 (`XlpGroup`); a bad
    value (`--workers two`) is the typed config's one line; Ctrl-C is one line, exit 130."""
    only = named_stages(sys.argv[1:])
    if only and only - ARROW_FREE:  # a stage that reads or writes Arrow data
        from xlp_cli.artifacts.arrow_numpy import without_pandas  # (numpy: not for `xlp text`)

        without_pandas()  # pyarrow would import pandas (~0.4 s, ~40 MB) that no stage uses
    app = build_app(only)
    code = app(standalone_mode=False, prog_name="xlp")  # (an exit code is returned; also under `python -m xlp_cli`)
    if code == 130:  # Ctrl-C: `commands.run_guarded` exits 130 without a word
        sys.stderr.write(INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
