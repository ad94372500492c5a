"""`xlp ARGS` without running it: parse the command line with the real CLI and build the stage's config.

The README test (tests/test_readme.py) runs the README's check-only blocks (GPU, hours, internet) with `xlp`
replaced by a shell function that records its arguments; `check` then parses each recorded command: every
command and flag must exist, every value must convert and pass the config's checks (else it raises).
"""

from __future__ import annotations

import typer

from xlp_cli import stages
from xlp_cli.cli import commands
from xlp_cli.cli.app import app


def check(args: list[str]) -> None:
    command, rest, path = typer.main.get_command(app), list(args), []
    while hasattr(command, "commands"):  # xlp [group ...] command
        if not rest or rest[0] not in command.commands:
            raise AssertionError(f"xlp {' '.join(args)}: no such command {rest[:1]}")
        path.append(rest[0])
        command = command.commands[rest.pop(0)]
    ctx = command.make_context("xlp " + " ".join(path), rest)
    spec = next(s for s in stages.STAGES.values() if list(s.command) == path)
    params = {k: None if v in ((), []) else v for k, v in ctx.params.items()}  # (typer passes None: not given)
    config_file, _ = params.pop("config"), params.pop("as_json")
    commands.build_config(stages.load(spec.config), config_file, params)
