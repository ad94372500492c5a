"""`xlp run RECIPE.toml`: chain the stages of a TOML recipe, skipping the ones already done.

A recipe has one table per stage; its keys are exactly the stage's flags (see `docs/recipes.md`):

    [recipe]                 out = "out/demo" (root of every stage folder), title = "..."
    [prepare]                xlp prepare
    [bpe]                    xlp bpe learn   (then `xlp bpe apply`, whose keys go in an optional [bpe-apply])
    [vocab-score]            xlp vocab-score
    [[pretrain]]             xlp pretrain, once per entry (e.g. one per language encoding); `name` names the run
    [finetune]               xlp finetune, once per pretrain run (an array [[finetune]] gives several per run)
    [[evaluate]]             xlp evaluate, once per entry (xnli: every finetune run; lexicon/analysis: every pretrain run)

Wiring: a stage without `data` reads the folders of the stages before it; without `out` it writes to
`<recipe.out>/<stage>[/<name>]`. `data = ["@prepare", "@pretrain.xlp", "/abs/folder"]` names stages
explicitly ("@pretrain" = every pretrain run). The order follows these references (a cycle is an error).

A stage is skipped when its folder's manifest was written by the same stage with the same config (volatile
keys such as --force, --device or thread counts aside) and no stage it reads was re-run now. Any other stage
runs, and an interrupted one resumes by itself (each stage resumes from what its folder holds).
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import Any

from xlp_cli import stages
from xlp_cli.artifacts import staging, uris
from xlp_cli.artifacts.manifest import try_read_manifest
from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.config import THREADS_MAX, opt
from xlp_cli.core.errors import BadInput
from xlp_cli.recipes import catalog_task as recipe_tasks, jobs as recipe_jobs, report as recipe_report
from xlp_cli.tasks import TASKS

ORDER = stages.RECIPE_STAGES  # the recipe tables, in pipeline order (the one stage table: stages/__init__.py)
STAGES = {n: stages.STAGES[n] for n in ORDER}
RECIPE_KEYS = ("out", "title")
PATH_KEYS = {"out", "data"}


@dataclasses.dataclass
class RunConfig:
    recipe: list[Path] = opt(factory=list, help="The recipe TOML file (e.g. pipelines/demo.toml).", argument=True)
    out: Path | None = opt(None, "Root folder of the stage outputs (overrides the `out` key of the recipe).")
    only: list[str] = opt(factory=list, help="Run only these stages (e.g. pretrain or pretrain.xlp); the others must be done.")
    force: bool = opt(False, "Pass --force to every stage that runs (folders of another config start over).")
    dry_run: bool = opt(False, "Print the plan (stage, folder, done or to run) and stop.")
    jobs: int = opt(1, "Run up to this many independent stages at once, each in its own process, its progress in "
                       "ROOT/logs/STAGE.log (keep jobs x each stage's threads at most the cores). Same outputs as 1.", lo=1, hi=THREADS_MAX)

    def validate(self) -> None:
        if len(self.recipe) != 1:
            raise BadInput("give exactly one recipe file: xlp run RECIPE.toml")
        if self.jobs < 1:
            raise BadInput(f"--jobs {self.jobs}: give 1 or more", path="--jobs")


@dataclasses.dataclass
class Node:
    id: str                 # "prepare", "pretrain.xlp", "evaluate.xnli", ...
    stage: str
    name: str               # run name (pretrain/finetune/evaluate entries), else the stage
    values: dict[str, Any]  # the table's keys, then wiring
    where: str
    deps: list[str] = dataclasses.field(default_factory=list)
    parent: str = ""        # finetune: the pretrain node it starts from
    group: str = ""         # runs of one [[pretrain]] entry with `seeds`: the entry's name (evaluate's run name)
    cfg: Any = None
    status: str = ""
    seconds: float = 0.0
    summary: dict[str, Any] | None = None


# ---------------------------------------------------------------- parsing
def _entries(value: Any, stage: str, path: Path) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return value
    raise BadInput(f"[{stage}] must be a table or an array of tables", path=path)


def _norm_key(k: str) -> str:
    return k.replace("_", "-")


def parse(recipe: Path, root_override: Path | None = None) -> tuple[dict[str, Node], dict[str, Any]]:
    raw = cfgmod.load_toml(recipe)
    meta = dict(raw.pop("recipe", {}) or {})
    for k in meta:
        if _norm_key(k) not in RECIPE_KEYS:
            raise BadInput(f"unknown key '{k}' in [recipe]; valid keys: {', '.join(RECIPE_KEYS)}", path=recipe)
    unknown = [k for k in raw if _norm_key(k) not in STAGES]
    if unknown:
        raise BadInput(f"unknown stage [{unknown[0]}]; valid stages: recipe, {', '.join(ORDER)}", path=recipe)
    root = Path(root_override or meta.get("out", "out/" + recipe.stem))
    tables = {_norm_key(k): _entries(v, _norm_key(k), recipe) for k, v in raw.items()}
    if "bpe" in tables and "bpe-apply" not in tables:
        tables["bpe-apply"] = [{}]
    if "bpe-apply" in tables and "bpe" not in tables and not any("data" in e or "codes" in e for e in tables["bpe-apply"]):
        raise BadInput("[bpe-apply] needs a [bpe] stage (or its own codes/data)", path=recipe)

    nodes: dict[str, Node] = {}

    def add(node: Node) -> None:
        if node.id in nodes:
            raise BadInput(f"two stages are called {node.id!r}; give each [[{node.stage}]] entry its own name", path=recipe)
        nodes[node.id] = node

    for stage in ("prepare", "bpe", "bpe-apply", "vocab-score"):
        for i, e in enumerate(tables.get(stage, [])):
            if len(tables[stage]) > 1:
                raise BadInput(f"[{stage}] may appear only once", path=recipe)
            add(Node(stage, stage, stage, dict(e), f"{recipe} [{stage}]"))
    pretrain_names, groups = [], {}
    for i, e in enumerate(tables.get("pretrain", [])):
        e = dict(e)
        name = _plain(str(e.pop("name", "") or e.get("lang-encoding", e.get("lang_encoding", "")) or f"run{i + 1}"),
                      recipe)
        seeds = e.pop("seeds", None)  # recipe-only key: one run per seed, named <name>-s<seed>
        if seeds is not None and (not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds)):
            raise BadInput(f"[[pretrain]] {name}: 'seeds' must be a list of integers", path=recipe)
        for seed in seeds or [None]:
            run = name if seed is None else f"{name}-s{seed}"
            pretrain_names.append(run)
            groups[run] = name if seed is not None else ""
            add(Node(f"pretrain.{run}", "pretrain", run, e if seed is None else {**e, "seed": seed},
                     f"{recipe} [[pretrain]] {run}", group=groups[run]))
    ft_entries = tables.get("finetune", [])
    for j, e in enumerate(ft_entries):
        e = dict(e)
        suffix = _plain(str(e.pop("name", "") or (f"ft{j + 1}" if len(ft_entries) > 1 else "")), recipe)
        spec = TASKS.get(str(e.get("task", "xnli")))
        if "data" in e or not pretrain_names or (spec and spec.starts_from != "pretrain"):  # e.g. translation: one model
            name = suffix or str(e.get("task", "finetune"))
            add(Node(f"finetune.{name}", "finetune", name, e, f"{recipe} [finetune] {name}"))
            continue
        for p in pretrain_names:
            name = p + (f"-{suffix}" if suffix else "")
            add(Node(f"finetune.{name}", "finetune", name, dict(e), f"{recipe} [finetune] {name}", parent=f"pretrain.{p}",
                     group=groups[p] + (f"-{suffix}" if suffix and groups[p] else "")))
    seen_tasks: dict[str, int] = {}
    for e in tables.get("evaluate", []):
        e = dict(e)  # `name` is a real `xlp evaluate` flag here (run names), so the entry is named by its task
        task = str(e.get("task", "xnli"))
        seen_tasks[task] = seen_tasks.get(task, 0) + 1
        name = task if seen_tasks[task] == 1 else f"{task}{seen_tasks[task]}"
        add(Node(f"evaluate.{name}", "evaluate", name, e, f"{recipe} [[evaluate]] {name}"))

    wire(nodes, root)
    return nodes, {"root": root, "title": meta.get("title", "")}


def _plain(name: str, recipe: Path) -> str:
    """A run name names a folder under the recipe's root: letters, digits, '.', '_', '+' and '-' only."""
    if name and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", name):
        raise BadInput(f"name {name!r}: a run name becomes a folder name; use letters, digits, '.', '_', '+', '-'",
                       path=recipe)
    return name


def _ref(nodes: dict[str, Node], ref: str, where: str) -> list[str]:
    """'@prepare' / '@pretrain.xlp' / '@pretrain' (all of that stage) -> node ids."""
    key = _norm_key(ref[1:])
    if key in nodes:
        return [key]
    group = [n for n in nodes if n.startswith(key + ".")]
    if group:
        return group
    raise BadInput(f"unknown stage '{ref}' in data (known: {', '.join(nodes)})", path=where)


def wire(nodes: dict[str, Node], root: Path) -> None:
    """Fill in each node's default `data` and `out`, and its dependencies."""
    ids = list(nodes)

    def first(*stages: str) -> list[str]:
        for s in stages:
            if s in nodes:
                return [s]
        return []

    for node in nodes.values():
        v = node.values
        v_keys = {_norm_key(k) for k in v}
        for k, val in v.items():  # another key naming a stage, e.g. translation's init-encoder = "@pretrain.xlp"
            if k != "data" and isinstance(val, str) and val.startswith("@"):
                refs = _ref(nodes, val, node.where)
                if len(refs) != 1:
                    raise BadInput(f"'{k}' = '{val}' names {len(refs)} stages; name one", path=node.where)
                node.deps.append(refs[0])
        sub = node.name if node.stage in ("pretrain", "finetune", "evaluate") else None
        if "out" not in v_keys:
            v["out"] = str(root / node.stage / sub) if sub else str(root / {"bpe-apply": "ids", "vocab-score": "vocab"}.get(node.stage, node.stage))
        if "data" in v_keys:
            data = v.pop("data")
            data = [data] if isinstance(data, str) else list(data)
            resolved: list[str] = []
            for d in data:
                if isinstance(d, str) and d.startswith("@"):
                    for dep in _ref(nodes, d, node.where):
                        node.deps.append(dep)
                        resolved.append(f"@{dep}")
                else:
                    resolved.append(str(d))
            v["data"] = resolved
            continue
        deps: list[str] = []
        if node.stage == "bpe":
            deps = first("prepare")
        elif node.stage == "bpe-apply":
            deps = first("prepare") + first("bpe")
        elif node.stage == "vocab-score":
            deps = first("bpe-apply", "prepare")
        elif node.stage == "pretrain":
            deps = first("bpe-apply", "prepare") + first("vocab-score")
        elif node.stage == "finetune":
            spec = TASKS.get(str(v.get("task", "xnli")))
            # xnli/pos start from their pretrain run; translation reads the parallel id shards (and names a
            # pretrain run, if any, through its own `init-encoder` key)
            deps = ([node.parent] if node.parent else []) if spec is None or spec.starts_from == "pretrain" \
                else first("bpe-apply", "prepare")
        elif node.stage == "evaluate":
            task = str(v.get("task", "xnli"))
            spec = TASKS.get(task)
            reads = spec.evaluate_reads if spec else ("finetune",)  # an unknown task fails in its config
            reads = (reads,) if isinstance(reads, str) else reads
            # finetune runs of this task (a task without fine-tuning of its own, like xtreme, reads them all)
            deps = [n for n in ids if nodes[n].stage in reads and (nodes[n].stage != "finetune" or not spec or
                    not spec.finetune or str(nodes[n].values.get("task", "xnli")) in (spec.scores_tasks or (task,)))]
            if "name" not in v_keys and deps:  # the runs of one entry with `seeds` share its name: seeds of a run;
                # reading both stages, a finetune run is named after its pretrain run
                named = [nodes[n].parent if len(reads) > 1 and nodes[n].parent else n for n in deps]
                v["name"] = [nodes[n].group or nodes[n].name for n in named]
        node.deps = node.deps + deps
        v["data"] = [f"@{d}" for d in deps]
    order(nodes)  # raises on a cycle


def order(nodes: dict[str, Node]) -> list[str]:
    """Topological order (stable: recipe order among ready stages); a cycle is a one-line error."""
    done: list[str] = []
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            cyc = path[path.index(n):] + [n]
            raise BadInput("cycle between stages: " + " -> ".join(cyc), path=nodes[n].where.split(" [")[0])
        state[n] = 1
        for d in nodes[n].deps:
            if d not in nodes:
                raise BadInput(f"unknown stage '{d}'", path=nodes[n].where)
            visit(d, path + [n])
        state[n] = 2
        done.append(n)

    for n in sorted(nodes, key=lambda x: ORDER.index(nodes[x].stage)):
        visit(n, [])
    return done


# ---------------------------------------------------------------- running
def build_config(node: Node, nodes: dict[str, Node], force: bool) -> Any:
    values = dict(node.values)
    values["data"] = [nodes[d[1:]].values["out"] if isinstance(d, str) and d.startswith("@") else d for d in values.get("data", [])]
    for k, val in values.items():
        if k != "data" and isinstance(val, str) and val.startswith("@"):
            values[k] = nodes[_ref(nodes, val, node.where)[0]].values["out"]
    fields = stages.config_fields(node.stage)
    if "data" not in fields:
        values.pop("data")
    if force and "force" in fields:
        values["force"] = True
    try:
        return stages.build_config(node.stage, values, node.where)
    except BadInput as e:  # a value check that names no file: say which recipe table it came from
        raise e if e.path else BadInput(e.message.removeprefix("--"), path=node.where) from None


def _normalize(config: dict[str, Any], volatile: set[str]) -> dict[str, Any]:
    out = {}
    for k, v in config.items():
        k = _norm_key(k)
        if k in volatile:
            continue
        if k in PATH_KEYS and v is not None:
            v = [str(Path(x).resolve()) for x in v] if isinstance(v, list) else str(Path(v).resolve())
        out[k] = v
    return out


def _out_manifest(out: Path) -> dict[str, Any] | None:
    """The manifest of a stage's --out: on the disk, or on the object store for an s3://, gs:// or hf:// URI."""
    uri = uris.find(out)
    if uri is None:
        return try_read_manifest(out)
    return staging.remote_manifest(uri)


def is_done(node: Node) -> bool:
    """The folder holds a finished output of this stage, written with the same config."""
    m = _out_manifest(node.cfg.out)
    if not m or m.get("stage") != STAGES[node.stage].manifest or m.get("complete") is False:
        return False
    if node.stage == "pretrain":
        if m.get("done") is False:
            return False
        last = m.get("last_step", m.get("step"))
        if isinstance(last, int) and last < int(getattr(node.cfg, "max_steps", 0) or 0):
            return False
    recorded = m.get("config")
    if not isinstance(recorded, dict):
        return False
    volatile = cfgmod.keys_where(node.cfg, "volatile")
    want = _normalize(cfgmod.to_dict(node.cfg), volatile)
    have = _normalize(recorded, volatile)
    # keys left automatic (pretrain's --preset auto, --max-steps 0, ...) are recorded as the values they became
    automatic = node.cfg.unresolved() if hasattr(node.cfg, "unresolved") else set()
    # compare the keys the stage recorded (a stage may leave out keys that do not change its output, e.g. `out`)
    return all(have[k] == v for k, v in want.items() if k in have and k not in automatic)


def run(cfg: RunConfig) -> dict[str, Any]:
    recipe = Path(cfg.recipe[0])
    nodes, meta = parse(recipe, cfg.out)
    plan = order(nodes)
    only = [_norm_key(o) for o in cfgmod.parse_langs(cfg.only)]
    for o in only:
        if o not in nodes and o not in STAGES:
            raise BadInput(f"--only {o}: no such stage in the recipe (stages: {', '.join(plan)})", path=recipe)
    selected = [n for n in plan if not only or n in only or nodes[n].stage in only]

    root = Path(meta["root"]).resolve()
    for nid in plan:  # every table is checked against its stage's config before the first stage runs
        nodes[nid].cfg = build_config(nodes[nid], nodes, cfg.force)
        out = Path(nodes[nid].cfg.out).resolve()
        if out != root and root not in out.parents:
            raise BadInput(f"stage {nid} would write to {out}, outside the recipe's root folder {root}; a recipe's "
                           "stage folders must lie inside its root (recipe.out or --out)", path=nodes[nid].where)
    t_all = time.time()
    prepare_out = Path(nodes["prepare"].values["out"]) if "prepare" in nodes else None

    def fallback(node: Node) -> None:  # a finetune stage's task may come from the prepare output's catalog
        if node.stage == "finetune" and not cfg.dry_run and recipe_tasks.catalog_task_fallback(
                node.id, node.values, prepare_out, Path(meta["root"])):
            node.cfg = build_config(node, nodes, cfg.force)

    if cfg.jobs > 1 and not cfg.dry_run:
        for nid in selected:
            missing = [d for d in nodes[nid].deps if d not in selected and not is_done(nodes[d])]
            if missing:
                raise BadInput(f"stage {nid} needs {missing[0]}, which has not finished; run it first (without --only)",
                               path=recipe)
        for nid in plan:
            nodes[nid].status = "not selected" if nid not in selected else nodes[nid].status
        logs = (uris.local(meta["root"]) if uris.find(meta["root"]) else root) / "logs"  # (a bucket's: staged)
        recipe_jobs.run_parallel(plan, nodes, selected=selected, jobs=cfg.jobs, logs=logs,
                                 prepare_node=fallback, is_done=is_done, run_path=lambda n: STAGES[n.stage].run)
    else:
        _run_serial(plan, nodes, selected, cfg.dry_run, fallback, recipe)
    rows = [{"stage": n, "status": nodes[n].status, "out": uris.find(nodes[n].cfg.out) or str(nodes[n].cfg.out),
             "seconds": round(nodes[n].seconds, 1)} for n in plan]
    comparison = None
    for n in reversed(plan):  # the last comparison report: xtreme (when it ran now) or xnli
        node = nodes[n]
        task = getattr(node.cfg, "task", "")
        if node.stage == "evaluate" and task in ("xnli", "xtreme") and node.status in ("ran", "skipped (done)"):
            comparison = node.summary or (recipe_report.xnli_summary_from_disk(Path(node.cfg.out)) if task == "xnli" else None)
            if comparison:
                break
    reports = [str(f) for n in plan if nodes[n].stage == "evaluate" and nodes[n].status in ("ran", "skipped (done)")
               for f in [recipe_report.report_of(Path(nodes[n].cfg.out))] if f]
    return {"recipe": str(recipe), "root": uris.find(meta["root"]) or str(meta["root"]), "stages": rows, "dry_run": cfg.dry_run,
            "seconds": round(time.time() - t_all, 1), "comparison": comparison, "reports": reports}


def _run_serial(plan: list[str], nodes: dict[str, Node], selected: list[str], dry_run: bool,
                fallback: Any, recipe: Path) -> None:
    ran: set[str] = set()
    for nid in plan:
        node = nodes[nid]
        fallback(node)
        if nid not in selected:
            node.status = "not selected"
            continue
        stale_inputs = [d for d in node.deps if d in ran]
        done = is_done(node) and not stale_inputs
        if dry_run:
            node.status = "done" if done else "to run"
            continue
        if done:
            recipe_jobs.skip(nid, node)
            continue
        for d in node.deps:
            if d not in selected and not is_done(nodes[d]):
                raise BadInput(f"stage {nid} needs {d}, which has not finished; run it first (without --only)", path=recipe)
        ui.info(f"[run] {nid}: running -> {uris.find(node.cfg.out) or node.cfg.out}")
        t0 = time.time()
        node.summary = stages.run_staged(STAGES[node.stage].run, node.cfg)
        node.seconds = time.time() - t0
        node.status = "ran"
        ran.add(nid)
