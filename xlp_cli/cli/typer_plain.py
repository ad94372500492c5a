"""Flag values as click parsed them, without pydantic: ~0.1 s off every `xlp` start.

typer 0.29 checks each parameter's value with a pydantic TypeAdapter; importing pydantic and building the
adapters is a tenth of a second of every command, `xlp text` in a shell pipeline included. Every xlp flag is
declared as a str, a bool, a list of str or a Path (commands.py; the typed stage config converts and checks the
values, with one message for flags and TOML keys), so for those annotations the value click parsed is taken as
it is (a list for a repeated flag, a Path for --config). Any other annotation keeps typer's own way. `install()`
does nothing on a typer without these hooks (typer is pinned in pyproject.toml; tests/test_cli_help.py checks
that a command starts without pydantic, and every CLI test runs through this path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


def install() -> None:
    try:
        import typer.core as core
        from typer._coercion import RuntimeParam
    except ImportError:  # another typer: its own coercion stays
        return
    original = getattr(core, "build_runtime_param", None)
    if original is None or getattr(original, "xlp_plain", False):
        return

    class Plain(RuntimeParam):  # (a frozen dataclass: parameter_info, annotation)
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            kind = _PLAIN[self.annotation]
            return [str(v) for v in value] if kind is list else kind(value)

    def build_runtime_param(descriptor: Any) -> Any:
        if getattr(descriptor, "file_annotation", None) is None and descriptor.annotation in _PLAIN:
            return Plain(annotation=descriptor.annotation, parameter_info=descriptor.parameter_info)
        return original(descriptor)

    build_runtime_param.xlp_plain = True  # type: ignore[attr-defined]
    core.build_runtime_param = build_runtime_param


_PLAIN: dict[Any, Any] = {str: str, bool: bool, list[str]: list, Path: Path,  # (what typer passes: Optional stripped)
                          Optional[str]: str, Optional[bool]: bool, Optional[list[str]]: list, Optional[Path]: Path}
