"""Section 7 of issue 11: dependencies are declared, dev-only ones stay out of xlp_cli, private APIs are tested."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "xlp_cli"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
# the modules xlp_cli/export/modeling_xlp.py and tokenization_xlp.py are copied into exported folders and run inside
# transformers
RUNS_ELSEWHERE = {PKG / "export" / "modeling_xlp.py", PKG / "export" / "tokenization_xlp.py"}
FIRST_PARTY = {"xlp_cli"}


def _name(req: str) -> str:
    return re.split(r"[=<>!~\[; ]", req, 1)[0].lower().replace("_", "-")


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_every_third_party_import_of_xlp_cli_is_a_declared_dependency():
    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    optional = {_name(r) for group in ("ray", "storage", "tracking")
                for r in PYPROJECT["project"]["optional-dependencies"][group]}
    dist_of = md.packages_distributions()
    missing = []
    for path in sorted(PKG.rglob("*.py")):
        if path in RUNS_ELSEWHERE:
            continue
        for mod in _imports(path) - FIRST_PARTY:
            if mod in sys.stdlib_module_names or mod.startswith("_"):
                continue
            dists = {d.lower().replace("_", "-") for d in dist_of.get(mod, [mod])}
            if not dists & (declared | optional):
                missing.append(f"{path.relative_to(REPO)}: {mod} ({', '.join(sorted(dists))})")
    assert not missing, "\n".join(missing)


def test_dev_only_libraries_are_not_runtime_dependencies():
    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert not declared & {"psutil", "transformers", "tokenizers", "pytest", "click"}
    for path in PKG.rglob("*.py"):
        if path not in RUNS_ELSEWHERE:
            assert not _imports(path) & {"psutil", "click", "transformers", "tokenizers"}, path


def test_package_data_exists():
    for pattern in PYPROJECT["tool"]["setuptools"]["package-data"]["xlp_cli"]:
        assert list(PKG.glob(pattern)), f"package-data names {pattern}, which xlp_cli does not hold"


def test_usage_errors_from_typers_own_click_pass_through_run_guarded():
    import typer

    from xlp_cli.cli.commands import run_guarded

    def bad():
        raise typer.BadParameter("nope")

    with pytest.raises(typer.BadParameter):  # not turned into "internal error" with exit 1
        run_guarded(bad)


def test_no_private_regex_parser_is_used():
    """The text steps are native C++ now (issue 18): nothing imports CPython's private `re._parser`."""
    for path in (REPO / "xlp_cli").rglob("*.py"):
        assert "re._parser" not in path.read_text(encoding="utf-8").replace("no `re._parser`", ""), path
