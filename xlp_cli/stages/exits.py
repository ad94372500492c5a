"""How a stage's failures end: one line on stderr and an exit code (2 bad input or usage, 1 failed work, 130
Ctrl-C), never a traceback unless XLP_DEBUG=1. The command line (`cli/commands.py`) and `xlp run --jobs`
(`recipes/jobs.py`) run every stage through `run_guarded`."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

import typer

from xlp_cli.core.errors import XlpError, write_failed


def parser_errors() -> tuple[type, type, tuple[type, ...]]:
    """(UsageError, ClickException, abort classes) of the click that typer runs on (typer 0.29 bundles its own)."""
    mro = {c.__name__: c for c in typer.BadParameter.__mro__}
    aborts = tuple({typer.Abort, *(c for c in (getattr(sys.modules.get(m), "Abort", None)
                                              for m in ("click", "click.exceptions")) if c)})
    return mro["UsageError"], mro["ClickException"], aborts


USAGE_ERROR, CLICK_ERROR, ABORTS = parser_errors()


def run_guarded(fn: Callable[[], Any]) -> Any:
    """Run `fn`, turning every failure into one line on stderr and an exit code. XLP_DEBUG=1 shows tracebacks."""
    try:
        return fn()
    except XlpError as e:
        if os.environ.get("XLP_DEBUG"):
            traceback.print_exc()
        typer.echo(f"xlp: error: {e.one_line()}", err=True)
        raise typer.Exit(e.exit_code)
    except KeyboardInterrupt:  # `cli/app.main` says so (also for a Ctrl-C while Typer parses the flags)
        raise typer.Exit(130)
    except (typer.Exit, typer.Abort, typer.TyperException, CLICK_ERROR, *ABORTS):  # the flag parser's own: XlpGroup
        # reports its usage errors (typer's vendored click)
        raise
    except MemoryError:
        typer.echo("xlp: error: out of memory; lower the batch size or the number of workers", err=True)
        raise typer.Exit(1)
    except OSError as e:  # a full disk or a read-only folder met outside the writers that name their file
        err = write_failed(e, e.filename or "?")
        if err is None:
            raise _internal(e) from None
        typer.echo(f"xlp: error: {err.one_line()}", err=True)
        raise typer.Exit(err.exit_code)
    except Exception as e:  # a bug, not the user's fault: still one line, with the way to see more
        raise _internal(e) from None


def _internal(e: BaseException) -> typer.Exit:
    if os.environ.get("XLP_DEBUG"):
        traceback.print_exception(e)
    where = ""
    tb = traceback.extract_tb(e.__traceback__)
    if tb:
        where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}"
    typer.echo(f"xlp: internal error{where}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
               " (set XLP_DEBUG=1 for the traceback)", err=True)
    return typer.Exit(1)
