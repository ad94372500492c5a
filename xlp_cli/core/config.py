"""Typed stage configs, filled from CLI flags, a `--config FILE` TOML, or a recipe table.

One dataclass per stage. Field `foo_bar` is the flag `--foo-bar` and the TOML/recipe key `foo-bar`
(`foo_bar` is accepted too). Flags override the TOML file; the dataclass holds the defaults.
Describe a field with `opt(...)` so its help text reaches `--help`. Fields several stages share are declared once,
in a `Section` the stage configs derive from; a stage with other defaults names them with `@defaults(...)`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from xlp_cli.core import textfile
from xlp_cli.core.errors import BadInput, did_you_mean

T = TypeVar("T")

AMP_CHOICES = ("auto", "bf16", "fp16", "none")  # --amp of every stage that trains (xlp_cli/train/runtime.py)
FORCE_HELP = ("Start over in an --out written with another config (or by another stage), removing only the files "
              "xlp wrote there; also write into a folder that holds files xlp did not write (they are kept).")


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a numeric field allows (for a list field: each item), declared once with the field (`opt(lo=...)`)
    and checked wherever a config is read: flags, --config TOML, recipes, a resumed run's recorded config.
    `lo`/`hi` are inclusive bounds, `gt`/`lt` exclusive ones; None: no bound on that side."""
    lo: float | None = None
    hi: float | None = None
    gt: float | None = None
    lt: float | None = None

    def allows(self, v: float) -> bool:
        if isinstance(v, float) and not math.isfinite(v):
            return False
        return ((self.lo is None or v >= self.lo) and (self.hi is None or v <= self.hi)
                and (self.gt is None or v > self.gt) and (self.lt is None or v < self.lt))

    def text(self) -> str:
        """"from 0 to 4294967295", ">= 1", "> 0 and <= 1"."""
        if self.lo is not None and self.hi is not None:
            return f"from {_number(self.lo)} to {_number(self.hi)}"
        parts = [f"{op} {_number(b)}" for op, b in ((">=", self.lo), (">", self.gt), ("<=", self.hi), ("<", self.lt))
                 if b is not None]
        return " and ".join(parts)


def _number(v: Any) -> str:
    """A number as a message shows it: a huge integer by its size, not its 5,000 digits."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, int) and abs(v) >= 10**18:
        return f"{'-' if v < 0 else ''}an integer of {len(str(abs(v))) if abs(v) < 10**4000 else 'over 4000'} digits"
    return f"{v:g}" if isinstance(v, float) else str(v)


# the ranges most fields share (each field names its own, so `--help` and the checks read the same declaration)
SEED_MAX = 2**32 - 1           # numpy's seeds are 32-bit
STEPS_MAX = 10**9              # optimizer steps (and a checkpoint's recorded step)
COUNT_MAX = 10**12             # records, rows, sentences, pairs (caps and sizes)
THREADS_MAX = 1024             # threads, workers, processes
TOKENS_MAX = 1 << 16           # a sequence length in tokens
BATCH_MAX = 1 << 20            # rows/sentences per batch
CODES_MAX = 10**7              # BPE merges, vocabulary sizes
BEAM_MAX = 256                 # beam search width


def opt(default: Any = dataclasses.MISSING, help: str = "", *, argument: bool = False, short: str | None = None,
        factory: Any = None, choices: tuple[str, ...] | None = None, volatile: bool = False,
        resumable: bool = False, lo: float | None = None, hi: float | None = None, gt: float | None = None,
        lt: float | None = None, divides: str | None = None) -> Any:
    """A config field with help text. `argument=True` makes it positional; `choices` are checked on load.

    `volatile`: the value never changes a stage's output (threads, device, --force, logging cadence).
    `resumable`: the value may differ between a run and its continuation (e.g. --max-steps: a rerun with more
    steps continues). Volatile keys are resumable too. This is the only place these lists are kept.
    `lo`, `hi` (inclusive), `gt`, `lt` (exclusive): the numeric field's valid range (`Range`); every numeric field of
    a stage config declares one (tests/test_ranges.py). `divides`: the field (when non-zero) must divide that other
    field (when non-zero): --n-heads divides --d-model."""
    rng = Range(lo, hi, gt, lt) if (lo, hi, gt, lt) != (None, None, None, None) else None
    meta = {"help": help, "argument": argument, "short": short, "choices": choices,
            "volatile": volatile, "resumable": resumable or volatile, "range": rng, "divides": divides}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def flag_name(field_name: str) -> str:
    return field_name.replace("_", "-")


# ---------------------------------------------------------------- sections: fields declared once, shared by stages
class Section:
    """A group of config fields declared once and embedded in every stage config that needs them: a dataclass
    that derives from `Section` directly, used as a mixin (`class PretrainConfig(Optimizer, Precision)`), so its
    fields are flags, TOML and recipe keys of each such stage and `cfg.warmup` reads like any field. A stage whose
    defaults (or help texts) differ says so with `@defaults(...)`. `--help` lists a class's own flags first, then
    those of its sections (`help_order`)."""


_KEEP = object()  # Default(): no value given


@dataclasses.dataclass(frozen=True)
class Default:
    """One stage's default of a field it inherits (`@defaults`), with its own help text or choices if given
    (None: the section's). Without a value the section's default stays."""
    value: Any = _KEEP
    help: str | None = None
    choices: tuple[str, ...] | None = None
    range: Range | None = None  # another valid range (e.g. --warmup -1: automatic)


def defaults(**changes: Any) -> Any:
    """Class decorator, below `@dataclasses.dataclass`: other defaults for fields the config inherits (from its
    sections or a common base). A change is a value or a `Default(value, help, choices=...)`. The field keeps its
    name, type, place and volatile/resumable marks, so a flag cannot drift from the section that declares it:

        @dataclasses.dataclass
        @defaults(warmup=16_000, clip_norm=Default(5.0, "Clip the gradient norm to this (0: no clipping)."))
        class PretrainConfig(Optimizer): ...
    """
    def apply(cls: type[T]) -> type[T]:
        if "__dataclass_fields__" in cls.__dict__:
            raise TypeError(f"{cls.__name__}: put @defaults below @dataclasses.dataclass")
        inherited: dict[str, tuple[dataclasses.Field, Any]] = {}
        for base in reversed(cls.__mro__[1:]):  # the nearest base wins, as dataclasses has it
            if dataclasses.is_dataclass(base):
                hints = field_types(base)
                inherited.update({f.name: (f, hints[f.name]) for f in dataclasses.fields(base)})
        annotations = dict(cls.__dict__.get("__annotations__", {}))
        for name, change in changes.items():
            if name not in inherited or name in annotations:
                raise TypeError(f"{cls.__name__}: @defaults({name}=...) names no inherited field")
            f, tp = inherited[name]
            d = change if isinstance(change, Default) else Default(change)
            meta = {**f.metadata, **{k: v for k, v in (("help", d.help), ("choices", d.choices), ("range", d.range))
                                     if v is not None}}
            value = d.value
            if value is _KEEP:  # the inherited default
                factory = f.default_factory
                value = factory() if factory is not dataclasses.MISSING else f.default  # type: ignore[misc]
            if isinstance(value, (list, dict, set)):
                setattr(cls, name, dataclasses.field(default_factory=lambda v=value: copy.copy(v), metadata=meta))
            else:
                setattr(cls, name, dataclasses.field(default=value, metadata=meta))
            annotations[name] = tp
        cls.__annotations__ = annotations
        return cls

    return apply


def help_order(cls: type) -> list[dataclasses.Field]:
    """The fields of a config class in the order `--help` lists them: for each class from the root down, its own
    fields, then the fields of the sections it derives from (in the order of its bases)."""
    names: list[str] = []

    def visit(c: type) -> None:
        bases = [b for b in c.__bases__ if dataclasses.is_dataclass(b)]
        for base in bases:
            if Section not in base.__bases__:
                visit(base)
        in_sections = {f.name for b in c.__mro__ if Section in b.__bases__ and dataclasses.is_dataclass(b)
                       for f in dataclasses.fields(b)}
        own = c.__dict__.get("__dataclass_fields__", {})
        names.extend(n for n in c.__dict__.get("__annotations__", {}) if n in own and n not in in_sections)
        for base in bases:
            if Section in base.__bases__:
                names.extend(f.name for f in dataclasses.fields(base))

    visit(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    order = list(dict.fromkeys(n for n in names if n in fields))
    return [fields[n] for n in order] + [f for n, f in fields.items() if n not in order]


def _base_type(tp: Any) -> tuple[Any, bool]:
    """(inner type, optional?) for X | None."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


LANG_FIELDS = {"lang", "src_lang", "tgt_lang", "train_lang"}  # language codes: `EN` is `en`, `PT-BR` is `pt-BR`
DIRECTION_FIELDS = {"directions", "zero_shot"}                # SRC-TGT pairs: `DE-EN` is `de-en`


def normalize_lang(code: str) -> str:
    """A language code with its base in lower case (`EN` -> `en`); a region or script part is kept as given."""
    i = next((k for k, ch in enumerate(code) if ch in "-_@"), len(code))
    return code[:i].lower() + code[i:]


def key_ref(name: str, where: str) -> str:
    """How a message names a key: the flag on the command line, the TOML key in a file."""
    return f"--{flag_name(name)}" if where == COMMAND_LINE else f"'{flag_name(name)}'"


def _coerce(name: str, value: Any, tp: Any, where: str) -> Any:
    base, optional = _base_type(tp)
    if value is None:
        if optional:
            return None
        raise bad_key(where, name, f"{key_ref(name, where)} must not be empty")
    origin = typing.get_origin(base)
    try:
        if origin in (list, tuple):
            (item_tp, *_) = typing.get_args(base) or (str,)
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            elif not isinstance(value, (list, tuple)):
                value = [value]
            items = []
            for v in value:
                # a repeated flag may itself carry a comma list: --lang en,fr --lang de
                if isinstance(v, str) and item_tp is not str and "," in v:
                    items.extend(_coerce(name, p, item_tp, where) for p in v.split(",") if p.strip())
                elif isinstance(v, str) and item_tp is str and "," in v:
                    items.extend(p.strip() for p in v.split(",") if p.strip())
                else:
                    items.append(_coerce(name, v, item_tp, where))
            return list(items)
        if base is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
                return True
            if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError(f"expected true or false, got {value!r}")
        if base is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise TypeError
            digits = value.strip().lstrip("+-") if isinstance(value, str) else ""
            if digits.isdigit() and len(digits) > 4000:  # int() refuses over 4300 digits (Python's int-str limit)
                raise ValueError(f"expected an integer, got one of {len(digits)} digits")
            return int(value)
        if base is float:
            if isinstance(value, bool):
                raise TypeError
            number = float(value)
            if not math.isfinite(number):  # nan/inf would train silently to nothing (or loop forever)
                raise ValueError(f"expected a finite number, got {_shown(value)}")
            return number
        if base is Path:
            return Path(str(value)).expanduser()
        if base is str:
            if isinstance(value, (dict, list)):
                raise TypeError
            if name in LANG_FIELDS:
                return normalize_lang(str(value))
            return str(value).lower() if name in DIRECTION_FIELDS else str(value)
        if base is dict or typing.get_origin(base) is dict:
            if not isinstance(value, dict):
                raise ValueError("expected a table")
            return dict(value)
        return value
    except (TypeError, ValueError) as e:  # (int() of over 4300 digits is a ValueError too: Python's int-str limit)
        what = {int: "an integer", float: "a number", bool: "true or false", dict: "a table"}.get(base, "text")
        detail = str(e) if str(e).startswith("expected") else f"expected {what}, got {_shown(value)}"
        raise bad_key(where, name, f"bad value for {key_ref(name, where)}: {detail}") from None


def _shown(value: Any) -> str:
    """A value as a one-line message shows it: a number by `_number`, long text cut to its start and length."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number(value)
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def check_value(name: str, value: Any, field: dataclasses.Field, where: str = "command line") -> None:
    """`value` (each item of a list) is a real number inside the field's declared `Range`; else a one-line BadInput
    naming the flag or key and the allowed range."""
    rng: Range | None = field.metadata.get("range")
    if rng is None or value is None:
        return
    for item in (value if isinstance(value, (list, tuple)) else [value]):
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not rng.allows(item):
            raise bad_key(where, name, f"bad value for {key_ref(name, where)}: {_shown(item)} (allowed: {rng.text()})")


def check_config(cfg: Any, where: str = "command line", at: dict[str, str] | None = None) -> None:
    """Every declared range of a config object and every `divides` between its fields (`at`: where each field's
    value came from, for the message; default `where`). `from_dict` runs it on every config it builds; a stage runs
    it again on a config it completes (a preset's size, a resumed run's recorded config)."""
    hints = field_types(type(cfg))
    for f in dataclasses.fields(cfg):
        if f.metadata.get("range") is None:
            continue
        value, w = getattr(cfg, f.name), (at or {}).get(f.name, where)
        base, _ = _base_type(hints[f.name])
        if typing.get_origin(base) in (list, tuple):
            base = (typing.get_args(base) or (str,))[0]
        for item in (value if isinstance(value, (list, tuple)) else [value]):
            if item is None or base not in (int, float):
                continue
            if isinstance(item, bool) or not isinstance(item, (int, float)) or (base is int and not isinstance(item, int)):
                raise bad_key(w, f.name, f"bad value for {key_ref(f.name, w)}: expected "
                                         f"{'an integer' if base is int else 'a number'}, got {_shown(item)}")
        check_value(f.name, value, f, w)
    for f in dataclasses.fields(cfg):
        target = f.metadata.get("divides")
        v, total = getattr(cfg, f.name), getattr(cfg, target, 0) if target else 0
        if target and v and total and total % v:
            w = (at or {}).get(f.name, where)
            raise bad_key(w, f.name, f"bad value for {key_ref(f.name, w)}: {v} does not divide "
                                     f"{key_ref(target, w)} {total} (give a divisor of {total})")


def bad_key(where: str, key: str, message: str) -> BadInput:
    """A BadInput at `key` of `where` ("command line", "FILE.toml" or "FILE.toml [stage] name"): with the file's
    line number of the key when it is in the file."""
    if where == COMMAND_LINE:
        return BadInput(message)
    path, context, line = locate(where, key)
    return BadInput((context + ": " if context else "") + message, path=path, position=line)


COMMAND_LINE = "command line"


def locate(where: str, key: str) -> tuple[str, str, int | None]:
    """(file, table context, line) of `key` in the TOML file that `where` names: "cfg.toml" (its top level) or
    "recipe.toml [pretrain] xlp" / "recipe.toml [[pretrain]] xlp" (that table; the entry that names xlp)."""
    if where == COMMAND_LINE:
        return where, "", None
    path, _, context = where.partition(" [")
    context = "[" + context if context else ""
    table = context.strip("[]").split("]")[0].strip("[]") if context else ""
    name = context.split("]")[-1].strip() if context else ""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return where, "", None
    blocks: list[tuple[str, int, int]] = []  # (table, first line, end line)
    current, start = "", 0
    for i, line in enumerate(lines):
        head = line.strip()
        if head.startswith("[") and "=" not in head.split("]")[0]:
            blocks.append((current, start, i))
            current, start = head.split("#")[0].strip().strip("[]").strip(), i
    blocks.append((current, start, len(lines)))
    wanted = [b for b in blocks if b[0].replace("_", "-") == table.replace("_", "-")]
    if name and len(wanted) > 1:
        wanted = sorted(wanted, key=lambda b: not any(f'"{name}"' in l for l in lines[b[1]:b[2]]))
    variants = {key, key.replace("_", "-"), key.replace("-", "_")}
    for _, a, b in wanted:
        for i in range(a, b):
            k = lines[i].split("=")[0].strip().strip('"').strip("'") if "=" in lines[i] else None
            if k in variants:
                return path, context, i + 1
    return path, context, None


def from_dict(cls: type[T], values: dict[str, Any], *, where: str = "config", flags: frozenset[str] = frozenset()) -> T:
    """Build `cls` from a dict whose keys are flag names (dashes) or field names. Unknown keys are an error (with the
    closest valid key and, in a TOML file, the line). `flags`: keys given on the command line (not in `where`)."""
    hints = field_types(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    aliases: dict[str, str] = getattr(cls, "ALIASES", {})  # old key -> field, for configs written before a rename
    kwargs: dict[str, Any] = {}
    located: dict[str, str] = {}  # field -> where its value came from
    for key, value in values.items():
        name = key.replace("-", "_")
        at = COMMAND_LINE if key in flags else where
        if name in aliases and value is not None:
            from xlp_cli.core import ui  # (rich: every command reads its config at start-up)

            ui.warn(f"{where}: '{flag_name(name)}' is now '{flag_name(aliases[name])}'; please rename it")
            name = aliases[name]
        if name not in fields:
            valid = sorted(flag_name(n) for n in fields)
            raise bad_key(at, key, f"unknown key '{key}'{did_you_mean(flag_name(name), valid)}; valid keys: {', '.join(valid)}")
        rng = fields[name].metadata.get("range")
        try:
            v = _coerce(name, value, hints[name], at)
        except BadInput as e:  # not a (finite) number: say which numbers are
            if rng is None:
                raise
            raise BadInput(f"{e.message} (allowed: {rng.text()})", path=e.path, position=e.position) from None
        choices = fields[name].metadata.get("choices")
        if choices and v is not None:
            for item in (v if isinstance(v, list) else [v]):
                if item not in choices:
                    raise bad_key(at, key, f"bad value for {key_ref(name, at)}: {item!r}{did_you_mean(str(item), choices)} "
                                        f"(choose from {', '.join(choices)})")
        check_value(name, v, fields[name], at)
        kwargs[name] = v
        located[name] = at
    try:
        cfg = cls(**kwargs)
    except TypeError as e:
        raise BadInput(f"incomplete config: {e}", path=where) from None
    check_config(cfg, where, located)
    validate = getattr(cfg, "validate", None)
    if callable(validate):
        try:
            validate()
        except BadInput as e:  # a config file's or a recipe table's mistake names where it is
            if e.path is not None or where in (COMMAND_LINE, "config") or flags >= set(values):
                raise
            raise BadInput(e.message, path=where) from None
    return cfg


def load_toml(path: str | Path) -> dict[str, Any]:
    """A --config file or a recipe: the bounded TOML reader (`textfile.toml_file`)."""
    path = Path(path)
    if not path.is_file():
        raise BadInput("no such config file", path=path)
    return textfile.toml_file(path)


def build(cls: type[T], config_file: str | Path | None, overrides: dict[str, Any]) -> T:
    """TOML file values, then flag overrides (None means 'not given')."""
    values, where, flags = merge(config_file, overrides)
    return from_dict(cls, values, where=where, flags=flags)


def merge(config_file: str | Path | None, overrides: dict[str, Any]) -> tuple[dict[str, Any], str, frozenset[str]]:
    """(values, where, the keys given as flags): the TOML file's keys, then the flags given (None: not given)."""
    values: dict[str, Any] = {}
    where = COMMAND_LINE
    if config_file is not None:
        values.update(load_toml(config_file))
        where = str(config_file)
    given = {k: v for k, v in overrides.items() if v is not None}
    values.update(given)
    return values, where, frozenset(given)


_RECORDED_AS: dict[str, str] = {}  # a local path -> the name configs record for it (artifacts/staging.py)


def record_path_as(path: str | Path, name: str | None) -> None:
    """From now on `to_dict` records the value `path` as `name` (None: as itself again): a local staging folder of
    an object-store URI is recorded as the URI, so a config's hash does not depend on the machine's cache folder."""
    if name is None:
        _RECORDED_AS.pop(str(path), None)
    else:
        _RECORDED_AS[str(path)] = name


def _recorded(v: Any) -> Any:
    if isinstance(v, (str, Path)) and str(v) in _RECORDED_AS:
        return _RECORDED_AS[str(v)]
    return str(v) if isinstance(v, Path) else v


def to_dict(cfg: Any) -> dict[str, Any]:
    """The config as JSON-able dict with flag-name keys (what the manifest records)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if isinstance(v, Path):
            v = _recorded(v)
        elif isinstance(v, list):
            v = [_recorded(x) for x in v]
        elif isinstance(v, str) and v in _RECORDED_AS:
            v = _RECORDED_AS[v]
        out[flag_name(f.name)] = v
    return out


def keys_where(cls: type, what: str) -> set[str]:
    """Flag names of the fields of `cls` (a config class or instance) marked `what` ("volatile"/"resumable")."""
    return {flag_name(f.name) for f in dataclasses.fields(cls) if f.metadata.get(what)}


def identity(cfg: Any) -> dict[str, Any]:
    """The config that must match for a run folder to be resumed (`artifacts.guard_out_dir`)."""
    drop = keys_where(cfg, "resumable")
    return {k: v for k, v in to_dict(cfg).items() if k not in drop}


def parse_langs(value: list[str] | str | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    out: list[str] = []
    for v in value:
        out.extend(x.strip() for x in str(v).split(",") if x.strip())
    return out
