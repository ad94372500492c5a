"""The import graph of xlp_cli, read from the source (docs/architecture.md, "Layers"): which module imports which,
at load time or inside a function, and which heavy libraries each module loads when it is imported.

`python tests/import_graph.py` prints the circles, the upward edges and the function-level imports."""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository (its xlp_cli/ and setup.py); `use(root)` changes it
HEAVY = ("torch", "pyarrow", "ray", "matplotlib", "transformers", "numpy", "safetensors", "sentencepiece", "jieba",
         "pythainlp", "sacrebleu", "duckdb", "rich")

# The layers, top to bottom: a module may import its own package and the packages below it, never one above.
LAYERS: list[tuple[str, ...]] = [
    ("xlp_cli.__main__", "xlp_cli.cli"),   # the command line
    ("xlp_cli.recipes",),                  # `xlp run`
    ("xlp_cli.stages",),                   # the stage table
    ("xlp_cli.evaluate",),                 # stages, in the order they may use each other
    ("xlp_cli.tasks",),
    ("xlp_cli.reporting",),                # libraries the tasks and evaluate share
    ("xlp_cli.export",),
    ("xlp_cli.vocab",),
    ("xlp_cli.train",),
    ("xlp_cli.prepare",),
    ("xlp_cli.bpe",),
    ("xlp_cli.text",),
    ("xlp_cli.models",),
    ("xlp_cli.artifacts",),                # the artifact contract
    ("xlp_cli.core", "xlp_cli"),           # the base
]
DISPATCH = ("xlp_cli.cli",)  # the CLI's dispatch layer: loads only the stage it runs


@dataclasses.dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    line: int
    where: str      # "top" (at import), "function" (inside a def), "typing" (under TYPE_CHECKING)
    comment: str    # the comment on the import's line or the line above it


def use(root: Path) -> None:
    """Read the package under `root` from now on (tests point this at a small package they write)."""
    global ROOT
    ROOT = Path(root)
    for cached in (modules, graph, heavy_at_load):
        cached.cache_clear()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)
def modules() -> dict[str, Path]:
    found = {_module_name(p): p for p in (ROOT / "xlp_cli").rglob("*.py")}
    # the compiled extensions are modules too (named in setup.py; built in place or in site-packages)
    setup = ROOT / "setup.py"
    for name in re.findall(r'Extension\(\s*"([\w.]+)"', setup.read_text(encoding="utf-8") if setup.is_file() else ""):
        found.setdefault(name, setup)
    return found


def _resolve(name: str) -> str | None:
    mods = modules()
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, lines: list[str]):
        self.module, self.is_package, self.lines = module, is_package, lines
        self.depth = self.typing = 0
        self.edges: list[Edge] = []
        self.third_party: set[str] = set()

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):
            self.typing += 1
            for child in node.body:
                self.visit(child)
            self.typing -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def _comment(self, node: ast.AST) -> str:
        own = self.lines[node.lineno - 1].partition("#")[2] if "#" in self.lines[node.lineno - 1] else ""
        above = self.lines[node.lineno - 2].strip() if node.lineno > 1 else ""
        return (own or (above[1:] if above.startswith("#") else "")).strip()

    def _add(self, target: str, node: ast.AST) -> None:
        if not target.startswith("xlp_cli"):
            if not self.depth and not self.typing:
                self.third_party.add(target.split(".")[0])
            return
        dst = _resolve(target)
        if dst and dst != self.module:
            where = "typing" if self.typing else "function" if self.depth else "top"
            self.edges.append(Edge(self.module, dst, node.lineno, where, self._comment(node)))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.module.split(".")[: len(self.module.split(".")) - (0 if self.is_package else 1)]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        if not module.startswith("xlp_cli"):
            self._add(module, node)
            return
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self._add(full if full in modules() else module, node)


@lru_cache(maxsize=1)
def graph() -> tuple[list[Edge], dict[str, set[str]]]:
    """(every edge, the third-party packages each module imports at load time)."""
    edges, third = [], {}
    for name, path in modules().items():
        if path.suffix != ".py" or path.name == "setup.py":
            continue
        text = path.read_text(encoding="utf-8")
        v = _Visitor(name, path.name == "__init__.py", text.splitlines())
        v.visit(ast.parse(text))
        edges += list(dict.fromkeys(v.edges))  # (`from m import a, b`: one edge)
        third[name] = v.third_party
    return edges, third


def _parents(module: str) -> list[str]:
    """The packages Python initialises before `module` (xlp_cli.a.b: xlp_cli, xlp_cli.a)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


@lru_cache(maxsize=None)
def heavy_at_load(module: str) -> frozenset[str]:
    """The heavy libraries that importing `module` loads (its own top-level imports, its parents', and theirs)."""
    edges, third = graph()
    seen, todo, out = set(), [module], set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        out |= third.get(m, set()) & set(HEAVY)
        todo += _parents(m)
        todo += [e.dst for e in edges if e.src == m and e.where == "top"]
    return frozenset(out)


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    if rank is None:
        raise KeyError(f"{module} is in no layer of tests/import_graph.py")
    return rank


def circles() -> list[list[str]]:
    """The strongly connected components of more than one module (load-time and function-level edges)."""
    edges, _ = graph()
    out_edges: dict[str, set[str]] = {}
    for e in edges:
        if e.where != "typing":
            out_edges.setdefault(e.src, set()).add(e.dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in out_edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(modules()):
        if v not in index:
            visit(v)
    return found


def upward() -> list[Edge]:
    edges, _ = graph()
    return [e for e in edges if layer_of(e.dst) < layer_of(e.src)]


def function_level() -> list[Edge]:
    return [e for e in graph()[0] if e.where == "function"]


def unjustified_function_level() -> list[str]:
    """Function-level imports of project modules that neither sit in the CLI's dispatch layer, nor defer a heavy
    library the importing module does not load anyway, nor load a compiled extension (whose absence is then a
    one-line error); and those without a comment saying why."""
    bad = []
    for e in function_level():
        dispatch = e.src.startswith(DISPATCH)
        defers = heavy_at_load(e.dst) - heavy_at_load(e.src)
        if modules()[e.dst].name == "setup.py":
            defers = {"a compiled extension"}
        where = f"{e.src}:{e.line} -> {e.dst}"
        if not dispatch and not defers:
            bad.append(f"{where}: defers no heavy library (import it at the top)")
        elif not e.comment:
            bad.append(f"{where}: defers {', '.join(sorted(defers)) or 'the stage'}, but no comment says why")
    return bad


if __name__ == "__main__":
    print("circles:", circles())
    print("upward:", [f"{e.src}:{e.line} -> {e.dst}" for e in upward()])
    fl = function_level()
    print(f"function-level imports: {len(fl)}")
    for e in fl:
        print(f"  {e.src}:{e.line} -> {e.dst}  [{', '.join(sorted(heavy_at_load(e.dst) - heavy_at_load(e.src)))}]"
              f"  # {e.comment}")
    print("unjustified:", *unjustified_function_level(), sep="\n  ")
