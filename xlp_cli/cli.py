"""The `xlp` command line. Thin: flags -> stage config -> stage run(). No logic lives here.

Each stage declares its config dataclass (a light module) and its run function (imported only
when the command runs, so `xlp --help` stays fast). `python -m xlp_cli` is the same program.
"""

from __future__ import annotations

import sys

import typer

from xlp_cli import __version__
from xlp_cli.commands import XlpGroup, stage_command
from xlp_cli.entry import INTERRUPTED
from xlp_cli.stages import STAGES

app = typer.Typer(
    name="xlp",
    cls=XlpGroup,  # usage mistakes (a typo'd flag, `--workers two`) are one line, exit 2
    help="Raw multilingual text -> pretrained multilingual Transformers, with switchable language encodings.",
    epilog="Each command's --help lists every flag with its default and its choices, and ends with an example. "
           "Shell completion: xlp --install-completion.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,  # plain help: no Rich markup eating "[default: ...]", no cut flag names at 80 columns
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"xlp {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    pass


bpe_app = typer.Typer(help="Learn and apply BPE (fastBPE format) or SentencePiece.", no_args_is_help=True,
                      rich_markup_mode=None)
app.add_typer(bpe_app, name="bpe")
_GROUPS = {"bpe": bpe_app}

for _stage, _spec in STAGES.items():  # the one stage table (stages.py)
    stage_command(_GROUPS[_spec.command[0]] if len(_spec.command) > 1 else app, _stage)


def main() -> None:
    """Run the command line. Usage mistakes (an unknown flag or command) are one line, exit 2 (`XlpGroup`); a bad
    value (`--workers two`) is the typed config's one line; Ctrl-C is one line, exit 130."""
    code = app(standalone_mode=False, prog_name="xlp")  # (an exit code is returned; also under `python -m xlp_cli`)
    if code == 130:  # Ctrl-C: `commands.run_guarded` exits 130 without a word
        sys.stderr.write(INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
