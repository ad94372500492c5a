"""Tests of the shape (docs/architecture.md): the rules a contributor relies on, checked on the source itself."""

from __future__ import annotations

import ast
from pathlib import Path

from xlp_cli.models.encoding_registry import ENCODING_NAMES

PKG = Path(__file__).resolve().parent.parent / "xlp_cli"
ENCODING_OWNERS = {PKG / "models" / "encodings.py", PKG / "models" / "encoding_registry.py"}


def _sources() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_strings(e) for e in node.elts)) if node.elts else set()
    return set()


def test_no_code_outside_the_encodings_compares_an_encoding_name() -> None:
    names = set(ENCODING_NAMES) - {"none"}  # "none" is also an --amp and a --lowercase value
    found = []
    for path in _sources():
        if path in ENCODING_OWNERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                strings = set().union(*(_strings(s) for s in sides))
                text = ast.unparse(node)
                if strings & names or ("none" in strings and "encoding" in text):
                    found.append(f"{path.relative_to(PKG.parent)}:{node.lineno}: {text}")
    assert not found, "\n".join(found)


def test_one_stage_table_drives_the_cli_and_the_recipes() -> None:
    from xlp_cli.recipes import run as recipes
    from xlp_cli import stages
    from xlp_cli.cli.app import app

    top = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert top == {s.command[0] for s in stages.STAGES.values()}
    assert recipes.ORDER == [n for n, s in stages.STAGES.items() if s.in_recipes]


def test_every_task_config_is_one_class_and_flags_do_not_cross_tasks() -> None:
    from xlp_cli import tasks
    from xlp_cli.tasks.common import EVALUATE, FINETUNE

    assert set(FINETUNE.classes()) == {n for n, s in tasks.TASKS.items() if s.finetune}
    assert set(EVALUATE.classes()) == {n for n, s in tasks.TASKS.items() if s.evaluate}
    import pytest

    from xlp_cli.core.errors import BadInput

    with pytest.raises(BadInput, match="'max-tokens' does not apply to --task xnli"):
        FINETUNE.build({"task": "xnli", "data": ["x"], "max-tokens": 100})
    cfg = FINETUNE.build({"task": "translation", "data": ["x"], "mt-dropout": 0.0})  # a renamed key still works
    assert cfg.dropout == 0.0


def test_every_module_is_at_most_400_lines() -> None:
    """The guide's rule: small modules whose names say what they hold (nanoGPT, not XLM's 1,600-line trainer)."""
    root = Path(__file__).resolve().parents[1] / "xlp_cli"
    long = {str(p.relative_to(root)): n for p in root.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long, long
