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
import traceback
import typing
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from xlp_cli import config as cfgmod
from xlp_cli.errors import XlpError


def _load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def _default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return field.default if field.default is not dataclasses.MISSING else None


def _shown(default: Any) -> str:
    return ",".join(map(str, default)) if isinstance(default, list) else str(default)


def _param_for(field: dataclasses.Field, tp: Any, defaults: dict[str, Any] | None = None,
               name: str | None = None, hidden: bool = False) -> inspect.Parameter:
    """One CLI option for a config field. `defaults`: {task: default} when the default depends on --task."""
    base, _ = cfgmod._base_type(tp)
    meta = field.metadata
    help_text = meta.get("help", "")
    default = _default(field)
    if defaults and len({repr(v) for v in defaults.values()}) > 1:
        help_text += "  [default: " + ", ".join(f"{t} {_shown(v)}" for t, v in defaults.items()) + "]"
    elif default not in (None, [], "", {}) and help_text:
        help_text += f"  [default: {_shown(default)}]"
    if meta.get("choices"):
        help_text += f"  [choices: {', '.join(meta['choices'])}]"
    origin = typing.get_origin(base)
    name = name or field.name
    decl = "--" + cfgmod.flag_name(name)
    if meta.get("argument"):
        annotation = Optional[list[str]]
        info = typer.Argument(None, help=help_text, show_default=False)
    elif origin in (list, tuple):
        # repeatable, and each value may be a comma list
        annotation = Optional[list[str]]
        decls = [decl] + ([meta["short"]] if meta.get("short") else [])
        info = typer.Option(None, *decls, help=help_text, show_default=False, hidden=hidden)
    elif base is bool:
        annotation = Optional[bool]
        info = typer.Option(None, f"{decl}/--no-{cfgmod.flag_name(name)}", help=help_text, show_default=False,
                            hidden=hidden)
    elif base in (int, float, str, Path):
        annotation = Optional[base]
        decls = [decl] + ([meta["short"]] if meta.get("short") and not hidden else [])
        info = typer.Option(None, *decls, help=help_text, show_default=False, hidden=hidden)
    else:
        annotation = Optional[str]
        info = typer.Option(None, decl, help=help_text, show_default=False, hidden=hidden)
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
    except KeyboardInterrupt:  # `cli.main` says so (also for a Ctrl-C while Typer parses the flags)
        raise typer.Exit(130)
    except (typer.Exit, typer.Abort, typer.TyperException):  # typer's own (vendored) click: usage errors, exits
        raise
    except MemoryError:
        typer.echo("xlp: error: out of memory; lower the batch size or the number of workers", err=True)
        raise typer.Exit(1)
    except OSError as e:  # a full disk or a read-only folder met outside the writers that name their file
        from xlp_cli.artifacts import write_failed

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


def _params(config: Any) -> list[inspect.Parameter]:
    """The options of a stage: one per config field (for a task dispatch, the union over its tasks), plus hidden
    ones for renamed keys (`ALIASES`)."""
    if hasattr(config, "fields"):  # tasks.common.TaskDispatch
        classes = config.classes()
        entries = [(f, tp, {t: _default(next(g for g in dataclasses.fields(classes[t]) if g.name == f.name))
                            for t in tasks}) for f, tp, tasks in config.fields()]
        aliases = {k: v for c in classes.values() for k, v in getattr(c, "ALIASES", {}).items()}
    else:
        hints = cfgmod.field_types(config)
        entries = [(f, hints[f.name], None) for f in dataclasses.fields(config)]
        aliases = getattr(config, "ALIASES", {})
    params = [_param_for(f, tp, defaults) for f, tp, defaults in entries]
    by_name = {f.name: (f, tp) for f, tp, _ in entries}
    params += [_param_for(by_name[new][0], by_name[new][1], name=old, hidden=True)
               for old, new in aliases.items() if new in by_name]
    return params


def build_config(config: Any, config_file: Path | None, flags: dict[str, Any]) -> Any:
    """TOML file values, then flag overrides (None means 'not given'); a task dispatch picks the class."""
    if not hasattr(config, "build"):
        return cfgmod.build(config, config_file, flags)
    values: dict[str, Any] = {}
    where = "command line"
    if config_file is not None:
        values.update(cfgmod.load_toml(config_file))
        where = str(config_file)
    values.update({k: v for k, v in flags.items() if v is not None})
    return config.build(values, where)


def stage_command(app: typer.Typer, stage: str) -> None:
    """Register the command of `stages.STAGES[stage]`, built from its config, running its run function."""
    from xlp_cli.stages import STAGES

    spec = STAGES[stage]
    config = _load(spec.config)
    params = _params(config)
    params.append(inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path],
                                    default=typer.Option(None, "--config", help="TOML file with the same keys as the flags (flags win).")))
    params.append(inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                                    default=typer.Option(False, "--json", help="Print the summary as JSON on stdout.")))
    title = "xlp " + " ".join(spec.command)

    def command(**kwargs: Any) -> None:
        config_file = kwargs.pop("config")
        as_json = kwargs.pop("as_json")

        def go() -> None:
            cfg = build_config(config, config_file, kwargs)
            summary = _load(spec.run)(cfg)
            from xlp_cli import ui

            if as_json:
                ui.print_json(summary)
            elif spec.summary:
                _load(spec.summary)(summary)
            else:
                ui.print_summary(title, summary)

        run_guarded(go)

    name = spec.command[-1]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__name__ = name.replace("-", "_")
    command.__doc__ = spec.help
    app.command(name, help=spec.help, no_args_is_help=False)(command)
