"""Tests of the shape (docs/architecture.md): the rules a contributor relies on, checked on the source itself."""

from __future__ import annotations

import ast
from pathlib import Path

import import_graph
import pytest

from xlp_cli.models.encoding_registry import ENCODING_NAMES
from xlp_cli.train.objectives import PRETRAIN_OBJECTIVES

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


def _objective_names_in(node: ast.AST, names: set[str]) -> set[str]:
    """The pre-training objective names a node tests for: `x == "mlm"`, `x in ("tlm", ...)`, `"tlm" in x`,
    `x.startswith("tlm+")`, `x.endswith("+ca-mlm")`, `case "mlm":` (a prefix, suffix or part of 3 characters or more)."""
    if isinstance(node, ast.Compare):
        found = set().union(*(_strings(s) for s in [node.left, *node.comparators])) & names
        if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            found |= {s for s in _strings(node.left) if len(s) >= 3 and any(s in n for n in names)}
        return found
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("startswith", "endswith"):
        args = set().union(*(_strings(a) for a in node.args)) if node.args else set()
        end = node.func.attr == "endswith"
        return {s for s in args if len(s) >= 3 and any(n.endswith(s) if end else n.startswith(s) for n in names)}
    if isinstance(node, ast.MatchValue):
        return _strings(node.value) & names
    return set()


def test_no_code_outside_the_objective_registry_compares_a_pretraining_objective_name() -> None:
    """The data layer and the objectives ask the registry line what an objective needs (`needs`, `adjacent`,
    `alternates`, `with_tlm`, ...), never its name. Left out: the registry itself and tasks/unmt/, whose losses
    have names of their own (its "mlm" is UNMT's masked-LM loss)."""
    names = set(PRETRAIN_OBJECTIVES)
    skip = {PKG / "train" / "objectives" / "__init__.py"}
    found = []
    for path in _sources():
        if path in skip or (PKG / "tasks" / "unmt") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if _objective_names_in(node, names):
                found.append(f"{path.relative_to(PKG.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "read a capability of the objective's registry line instead:\n" + "\n".join(found)


def test_one_stage_table_drives_the_cli_and_the_recipes() -> None:
    from xlp_cli import stages
    from xlp_cli.cli.app import app
    from xlp_cli.recipes import run as recipes

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


def test_the_import_graph_has_no_circles() -> None:
    """Load-time and function-level imports alike: a circle is broken by moving the shared name to the lower module,
    never hidden behind an import inside a function."""
    assert import_graph.circles() == []


def test_every_module_sits_in_a_layer_and_no_import_runs_up() -> None:
    """The layers of docs/architecture.md (tests/import_graph.LAYERS): cli > recipes > the stage table > the stages
    > the libraries > artifacts > core. A module imports its own layer and the ones below, never one above."""
    for module in import_graph.modules():
        import_graph.layer_of(module)  # (raises for a module in no layer)
    assert [f"{e.src}:{e.line} -> {e.dst}" for e in import_graph.upward()] == []


def test_function_level_imports_only_defer_a_heavy_library_or_dispatch_the_cli() -> None:
    """An import of a project module inside a function is kept only where it spares a path a heavy library (torch,
    pyarrow, rich, ...: `xlp text` and CLI start-up), loads a compiled extension, or is the CLI's dispatch; each
    says why in a comment. Anything else is imported at the top of its module."""
    assert import_graph.unjustified_function_level() == []
    assert len(import_graph.function_level()) <= 20, [f"{e.src}:{e.line}" for e in import_graph.function_level()]


@pytest.fixture
def small_tree(tmp_path: Path):
    """A package laid out like xlp_cli, for checking that the guards above see what they are meant to see."""
    files = {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/errors.py": "class BadInput(Exception):\n    pass\n",
        "core/ui.py": "import rich\n",
        "artifacts/__init__.py": "",
        "artifacts/files.py": "from xlp_cli.core.errors import BadInput\n",
        "models/__init__.py": "",
        "models/encoder.py": "import torch\n\nfrom xlp_cli.artifacts import files\n",
        "models/heads.py": "from xlp_cli.models.encoder import torch\n",
    }
    for rel, text in files.items():
        path = tmp_path / "xlp_cli" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    yield tmp_path / "xlp_cli"
    import_graph.use(import_graph.Path(__file__).resolve().parent.parent)


def test_the_guards_find_a_circle_an_upward_import_and_a_needless_deferred_import(small_tree: Path) -> None:
    import_graph.use(small_tree.parent)
    assert (import_graph.circles(), import_graph.upward(), import_graph.unjustified_function_level()) == ([], [], [])

    (small_tree / "core" / "errors.py").write_text("from xlp_cli.artifacts import files\n", encoding="utf-8")
    (small_tree / "models" / "heads.py").write_text(
        "def build():\n    from xlp_cli.models import encoder  # (torch)\n\n\n"
        "def show():\n    from xlp_cli.core import errors\n\n\n"
        "def later():\n    from xlp_cli.core import ui\n", encoding="utf-8")
    import_graph.use(small_tree.parent)
    assert import_graph.circles() == [["xlp_cli.artifacts.files", "xlp_cli.core.errors"]]
    assert [(e.src, e.dst) for e in import_graph.upward()] == [("xlp_cli.core.errors", "xlp_cli.artifacts.files")]
    bad = import_graph.unjustified_function_level()
    assert len(bad) == 2 and "xlp_cli.models.heads:2 -> xlp_cli.models.encoder" not in " ".join(bad)
    assert any(b.startswith("xlp_cli.models.heads:6 -> xlp_cli.core.errors: defers no heavy library") for b in bad)
    assert any(b.startswith("xlp_cli.models.heads:10 -> xlp_cli.core.ui: defers rich, but no comment") for b in bad)
