"""Turn a stage config dataclass into a Typer command, so flags and config keys can never drift apart.

Every stage command gets the same conventions: one flag per config field (`--out`, `--data` (repeatable),
`--lang en,fr`, ...), plus `--config FILE` (TOML with the same keys) and `--json`. Each flag's help ends with
its default and its choices (shell completion offers the choices); each command's help ends with a worked
example (`stages.Stage.example`). The stage's `run(cfg)` returns a summary dict; this module prints it and maps
errors to exit codes (2 bad input or usage, 1 failed work), always as one line (`XlpGroup` for the mistakes
the flag parser finds: an unknown flag, `--workers two`).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from typer.core import TyperGroup

from xlp_cli.artifacts import safe_output
from xlp_cli.cli import typer_plain
from xlp_cli.core import config as cfgmod
from xlp_cli.core.errors import BadInput, did_you_mean
from xlp_cli.models.encoding_registry import EncodingFlags
from xlp_cli.stages import STAGES, load, run_staged
from xlp_cli.stages.exits import ABORTS, CLICK_ERROR, USAGE_ERROR, run_guarded

typer_plain.install()  # flag values as click parsed them: no pydantic (~0.1 s of every start)


def _default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return field.default if field.default is not dataclasses.MISSING else None


def _shown(default: Any, base: Any = None, name: str = "") -> str:
    """How --help shows a default: the value as it would be typed ("(empty)" for nothing; bool: on/off)."""
    if base is bool:
        return "on" if default else "off"
    if default is None or default == "" or default == [] or default == {}:
        return "(empty)"
    return ",".join(map(str, default)) if isinstance(default, list) else str(default)


_METAVARS = {int: "INT", float: "FLOAT", str: "TEXT", Path: "PATH"}


def _metavar(base: Any, choices: tuple[str, ...] | None) -> str:
    if choices:
        return "[" + "|".join(choices) + "]"
    origin = typing.get_origin(base)
    if origin in (list, tuple):
        (item, *_) = typing.get_args(base) or (str,)
        return _METAVARS.get(item, "TEXT") + ",..."
    return _METAVARS.get(base, "TEXT")


def _completer(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    """Shell completion of a flag's value: its choices."""
    def complete(incomplete: str) -> list[str]:
        return [c for c in choices if c.startswith(incomplete)]

    return complete


def _param_for(field: dataclasses.Field, tp: Any, defaults: dict[str, Any] | None = None,
               name: str | None = None, hidden: bool = False) -> inspect.Parameter:
    """One CLI option for a config field. `defaults`: {task: default} when the default depends on --task."""
    base, _ = cfgmod._base_type(tp)
    meta = field.metadata
    name = name or field.name
    choices = meta.get("choices")
    help_text = meta.get("help", "")
    if defaults and len({repr(v) for v in defaults.values()}) > 1:
        help_text += "  [default:\u00a0" + ", ".join(f"{t}: {_shown(v, base, name)}" for t, v in defaults.items()) + "]"
    elif not meta.get("argument"):
        help_text += f"  [default:\u00a0{_shown(_default(field), base, name)}]"
    if meta.get("range") is not None:  # the range declared with the field (core/config.py), as the checks read it
        help_text += f"  [allowed:\u00a0{meta['range'].text()}]"
    extra: dict[str, Any] = {"help": help_text, "show_default": False}
    if choices:
        extra["autocompletion"] = _completer(tuple(choices))
    origin = typing.get_origin(base)
    decl = "--" + cfgmod.flag_name(name)
    if meta.get("argument"):
        annotation = Optional[list[str]]
        info = typer.Argument(None, metavar=name.upper() + "...", **extra)
    elif origin in (list, tuple):
        # repeatable, and each value may be a comma list
        annotation = Optional[list[str]]
        decls = [decl] + ([meta["short"]] if meta.get("short") else [])
        info = typer.Option(None, *decls, hidden=hidden, metavar=_metavar(base, choices), **extra)
    elif base is bool:
        annotation = Optional[bool]
        info = typer.Option(None, f"{decl}/--no-{cfgmod.flag_name(name)}", hidden=hidden, **extra)
    elif base in (int, float, str, Path):  # converted by config._coerce: one message for flags and TOML keys
        annotation = Optional[str]
        decls = [decl] + ([meta["short"]] if meta.get("short") and not hidden else [])
        info = typer.Option(None, *decls, hidden=hidden, metavar=_metavar(base, choices), **extra)
    else:
        annotation = Optional[str]
        info = typer.Option(None, decl, hidden=hidden, metavar=_metavar(base, choices), **extra)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


# ---------------------------------------------------------------- usage errors: one line, exit 2
def usage_line(e: Any, fallback: str = "xlp") -> str:
    """One line for a mistake the flag parser found, naming the command, with a "did you mean" for a typo."""
    ctx = getattr(e, "ctx", None)
    command = ctx.command_path if ctx is not None and ctx.parent is not None else fallback
    option = getattr(e, "option_name", None)
    message = " ".join(e.format_message().split()).rstrip(".")
    if option and type(e).__name__ == "NoSuchOption" and ctx is not None:
        names = [o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts) if not getattr(p, "hidden", False)]
        message = f"unknown flag {option}{did_you_mean(option, names)}"
    elif message.startswith("No such command"):
        word = message.split("'")[1] if "'" in message else ""
        names = list(getattr(ctx.command, "commands", {})) if ctx is not None else []
        message = f"unknown command '{word}'{did_you_mean(word, names)}"
    message = message[:1].lower() + message[1:]
    return f"{command}: {message}; see '{command} --help'"


def _command_words(group: Any, args: list[str]) -> str:
    """'xlp prepare' / 'xlp bpe learn' from the command line (for an error click reports without its context)."""
    words, node = ["xlp"], group
    for a in args:
        sub = getattr(node, "commands", {}).get(a)
        if sub is None:
            break
        words.append(a)
        node = sub
    return " ".join(words)


class XlpGroup(TyperGroup):
    """The root command: click's usage errors (Typer would draw a box) become `xlp: error: ...`, exit 2."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        try:
            rv = super().main(args=args, prog_name=prog_name or "xlp", complete_var=complete_var,
                              standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
        except USAGE_ERROR as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # `xlp`, `xlp bpe`: the help itself, exit 2
                typer.echo(e.format_message())
                code = 2
                if standalone_mode:
                    sys.exit(code)
                return code
            words = _command_words(self, list(sys.argv[1:] if args is None else args))
            typer.echo(f"xlp: error: {usage_line(e, words)}", err=True)
            code = 2
        except CLICK_ERROR as e:
            typer.echo(f"xlp: error: {' '.join(e.format_message().split())}", err=True)
            code = getattr(e, "exit_code", 1)
        except ABORTS:
            typer.echo("xlp: aborted", err=True)
            code = 1
        if standalone_mode:
            sys.exit(code)
        return code


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
        entries = [(f, hints[f.name], None) for f in cfgmod.help_order(config)]  # own flags, then the sections'
        aliases = getattr(config, "ALIASES", {})
    late = _encoding_flag_names()  # the encoding section (--lang-encoding and the encodings' options) goes last
    entries.sort(key=lambda e: e[0].name in late)
    params = [_param_for(f, tp, defaults) for f, tp, defaults in entries]
    by_name = {f.name: (f, tp) for f, tp, _ in entries}
    params += [_param_for(by_name[new][0], by_name[new][1], name=old, hidden=True)
               for old, new in aliases.items() if new in by_name]
    return params


def _encoding_flag_names() -> set[str]:
    return {f.name for f in dataclasses.fields(EncodingFlags)}


def build_config(config: Any, config_file: Path | None, flags: dict[str, Any]) -> Any:
    """TOML file values, then flag overrides (None means 'not given'); a task dispatch picks the class."""
    if not hasattr(config, "build"):
        return cfgmod.build(config, config_file, flags)
    values, where, given = cfgmod.merge(config_file, flags)
    return config.build(values, where, flags=given)


def stage_command(app: typer.Typer, stage: str) -> None:
    """Register the command of `stages.STAGES[stage]`, built from its config, running its run function."""
    spec = STAGES[stage]
    config = load(spec.config)
    params = _params(config)
    params.append(inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path],
                                    default=typer.Option(None, "--config", metavar="FILE", help="TOML file with the same keys as the flags (flags win).  [default: (empty)]")))
    params.append(inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                                    default=typer.Option(False, "--json", help="Print the summary as JSON on stdout.  [default: off]")))
    title = "xlp " + " ".join(spec.command)

    def command(**kwargs: Any) -> None:
        config_file = kwargs.pop("config")
        as_json = kwargs.pop("as_json")

        def go() -> None:
            if as_json and (why := safe_output.stdout_problem()):
                raise BadInput(f"--json: {why}")  # (before any work: the JSON is the output)
            cfg = build_config(config, config_file, kwargs)
            summary = run_staged(spec.run, cfg)
            from xlp_cli.core import ui  # (rich: only to print a summary; `xlp text` starts without it)

            if as_json:
                with safe_output.stdout_writes():
                    ui.print_json(summary)
            elif safe_output.stdout_problem():
                return  # (a closed stdout: the work is done, the summary has nowhere to go)
            else:
                with safe_output.stdout_writes():
                    if spec.summary:
                        load(spec.summary)(summary)
                    else:
                        ui.print_summary(title, summary)

        run_guarded(go)

    name = spec.command[-1]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__name__ = name.replace("-", "_")
    command.__doc__ = spec.help
    app.command(name, help=spec.help, short_help=spec.help, epilog=example_text(spec.example), no_args_is_help=False,
                context_settings={"help_option_names": ["-h", "--help"]})(command)


def example_text(example: str) -> str:
    """The worked example at the end of a command's --help ("\\b": click keeps the lines as they are)."""
    out = []
    for command in example.strip().splitlines():
        line = "  "
        for word in command.split(" "):
            if len(line) + len(word) > 76 and line.strip():
                out.append(line + "\\")
                line = "      "
            line += word + " "
        out.append(line.rstrip())
    return "\b\nExample:\n" + "\n".join(out)
