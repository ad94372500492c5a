"""Turn a stage config dataclass into a Typer command, so flags and config keys can never drift apart.

Every stage command gets the same conventions: one flag per config field (`--out`, `--data` (repeatable),
`--lang en,fr`, ...), plus `--config FILE` (TOML with the same keys) and `--json`. The stage's `run(cfg)`
returns a summary dict; this module prints it and maps errors to exit codes (2 bad input, 1 failed work).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import sys
import traceback
import typing
from pathlib import Path
from typing import Any, Callable, Optional

import click
import typer

from xlp_cli import config as cfgmod
from xlp_cli.errors import XlpError


def _load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def _param_for(field: dataclasses.Field, tp: Any) -> inspect.Parameter:
    base, _ = cfgmod._base_type(tp)
    meta = field.metadata
    help_text = meta.get("help", "")
    default = field.default if field.default is not dataclasses.MISSING else None
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        default = field.default_factory()  # type: ignore[misc]
    if default not in (None, [], "", {}) and help_text:
        shown = ",".join(map(str, default)) if isinstance(default, list) else default
        help_text += f"  [default: {shown}]"
    if meta.get("choices"):
        help_text += f"  [choices: {', '.join(meta['choices'])}]"
    origin = typing.get_origin(base)
    name = field.name
    decl = "--" + cfgmod.flag_name(name)
    if meta.get("argument"):
        annotation = Optional[list[str]]
        info = typer.Argument(None, help=help_text, show_default=False)
    elif origin in (list, tuple):
        # repeatable, and each value may be a comma list
        annotation = Optional[list[str]]
        decls = [decl] + ([meta["short"]] if meta.get("short") else [])
        info = typer.Option(None, *decls, help=help_text, show_default=False)
    elif base is bool:
        annotation = Optional[bool]
        info = typer.Option(None, f"{decl}/--no-{cfgmod.flag_name(name)}", help=help_text, show_default=False)
    elif base in (int, float, str, Path):
        annotation = Optional[base]
        decls = [decl] + ([meta["short"]] if meta.get("short") else [])
        info = typer.Option(None, *decls, help=help_text, show_default=False)
    else:
        annotation = Optional[str]
        info = typer.Option(None, decl, help=help_text, show_default=False)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


def run_guarded(fn: Callable[[], Any]) -> Any:
    """Run `fn`, turning every failure into one line on stderr and an exit code. XLP_DEBUG=1 shows tracebacks."""
    try:
        return fn()
    except XlpError as e:
        if os.environ.get("XLP_DEBUG"):
            traceback.print_exc()
        typer.echo(f"xlp: error: {e.one_line()}", err=True)
        raise typer.Exit(e.exit_code)
    except KeyboardInterrupt:
        typer.echo("xlp: interrupted; rerun the same command to resume", err=True)
        raise typer.Exit(130)
    except (typer.Exit, click.exceptions.Exit, click.exceptions.Abort, click.UsageError):
        raise
    except MemoryError:
        typer.echo("xlp: error: out of memory; lower the batch size or the number of workers", err=True)
        raise typer.Exit(1)
    except Exception as e:  # a bug, not the user's fault: still one line, with the way to see more
        if os.environ.get("XLP_DEBUG"):
            traceback.print_exc()
        where = ""
        tb = traceback.extract_tb(sys.exc_info()[2])
        if tb:
            where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}"
        typer.echo(f"xlp: internal error{where}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                   " (set XLP_DEBUG=1 for the traceback)", err=True)
        raise typer.Exit(1)


def stage_command(app: typer.Typer, name: str, config_ref: str, run_ref: str, help: str,
                  summary_ref: str | None = None, title: str | None = None) -> None:
    """Register `xlp NAME` built from the dataclass at `config_ref`, running `run_ref(cfg) -> dict`."""
    cls = _load(config_ref)
    hints = cfgmod.field_types(cls)
    params = [_param_for(f, hints[f.name]) for f in dataclasses.fields(cls)]
    params.append(inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path],
                                    default=typer.Option(None, "--config", help="TOML file with the same keys as the flags (flags win).")))
    params.append(inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                                    default=typer.Option(False, "--json", help="Print the summary as JSON on stdout.")))

    def command(**kwargs: Any) -> None:
        config_file = kwargs.pop("config")
        as_json = kwargs.pop("as_json")

        def go() -> None:
            cfg = cfgmod.build(cls, config_file, kwargs)
            summary = _load(run_ref)(cfg)
            from xlp_cli import ui

            if as_json:
                ui.print_json(summary)
            elif summary_ref:
                _load(summary_ref)(summary)
            else:
                ui.print_summary(title or f"xlp {name}", summary)

        run_guarded(go)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__name__ = name.replace("-", "_")
    command.__doc__ = help
    app.command(name, help=help, no_args_is_help=False)(command)
