"""`xlp run --jobs N`: the recipe's independent stages at once, each in a process of its own.

    run_parallel(plan, nodes, ..., jobs=N, logs=ROOT/logs)

A stage starts when every stage it reads has finished (its `deps`; an evaluate stage also waits for every
non-evaluate stage before it in the plan). It runs exactly as `xlp run` runs it one at a time: the same config,
the same "done, skipping" test and the same rerun of a stage whose inputs were just rebuilt, so the outputs are
the same bytes (every stage seeds itself and sets its own torch threads; tests/test_recipe_jobs.py compares).
Each stage's progress goes to `logs/<stage id>.log` under the recipe's root, and one line per start and end to
the terminal. The first failure stops new starts; the stages already running finish (they resume anyway), then
the failure is reported in one line with its exit code (2 bad input, 1 failed work) and its log.

Keep `jobs x` each stage's threads (`num-threads`, `threads`, `workers`) at most the number of cores.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any, Callable

from xlp_cli import stages
from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput, WorkFailed
from xlp_cli.stages.exits import run_guarded

ERROR_PREFIX = "xlp: error: "


def _die_with_parent(parent: int) -> None:
    """End this stage process when `xlp run` ends, however it ends (a SIGTERM or SIGKILL to it alone, not to its
    group, once left stages training on for hours): Linux's PR_SET_PDEATHSIG sends it SIGTERM then. The stage's
    writes are atomic, so a rerun resumes it as after any kill. Elsewhere a no-op."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent was gone before the call
        os.kill(os.getpid(), signal.SIGTERM)


def _child(run_path: str, cfg: Any, log: str, parent: int) -> None:
    """Run one stage with stdout and stderr in its log, its summary as JSON beside it; exit with its code."""
    import sys

    import typer

    _die_with_parent(parent)

    os.environ.pop("XLP_QUIET", None)  # the log always gets the stage's progress lines (XLP_QUIET is for terminals)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # the umask applies
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    code = 0
    try:
        summary = run_guarded(lambda: stages.run_staged(run_path, cfg))
        Path(log).with_suffix(".summary.json").write_text(json.dumps(summary, default=str), encoding="utf-8")
    except typer.Exit as e:
        code = e.exit_code
    except KeyboardInterrupt:
        code = 130
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


def _last_error(log: Path) -> str:
    """The stage's own one-line error from its log (the last `xlp: error:` or `internal error` line)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "no log"
    for line in reversed(lines):
        if line.startswith(ERROR_PREFIX):
            return line[len(ERROR_PREFIX):]
        if line.startswith("xlp: "):
            return line[len("xlp: "):]
    return lines[-1] if lines else "no output"


def _waits_for(nid: str, plan: list[str], nodes: dict[str, Any]) -> set[str]:
    deps = set(nodes[nid].deps)
    if nodes[nid].stage == "evaluate":  # reports read widely: after every non-evaluate stage before it
        deps |= {n for n in plan[: plan.index(nid)] if nodes[n].stage != "evaluate"}
    return deps & set(plan)


def skip(nid: str, node: Any) -> None:
    """A finished stage is not run again; its `tidy` hook (stages/__init__.py) removes what a killed run left behind."""
    node.status = "skipped (done)"
    tidy = stages.STAGES[node.stage].tidy
    if tidy:
        stages.load(tidy)(node.cfg.out)
    ui.info(f"[run] {nid}: done, skipping ({node.cfg.out})")


def run_parallel(plan: list[str], nodes: dict[str, Any], *, selected: list[str], jobs: int, logs: Path,
                 prepare_node: Callable[[Any], None], is_done: Callable[[Any], bool],
                 run_path: Callable[[Any], str]) -> None:
    """Run `selected` stages of `plan` with up to `jobs` processes; fills each node's status, seconds, summary."""
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited torch/OpenMP state
    logs.mkdir(parents=True, exist_ok=True)
    waits = {n: _waits_for(n, plan, nodes) for n in plan}
    finished: set[str] = {n for n in plan if n not in selected}  # not selected: already done (run() checks)
    ran: set[str] = set()
    running: dict[str, tuple[Any, float, Path]] = {}
    failure: tuple[str, int, str, Path] | None = None
    pending = [n for n in plan if n in selected]
    try:
        while pending or running:
            while failure is None and len(running) < jobs:
                ready = next((n for n in pending if waits[n] <= finished), None)
                if ready is None:
                    break
                pending.remove(ready)
                node = nodes[ready]
                prepare_node(node)
                if is_done(node) and not (set(node.deps) & ran):
                    skip(ready, node)
                    finished.add(ready)
                    continue
                log = logs / f"{ready}.log"
                log.with_suffix(".summary.json").unlink(missing_ok=True)
                proc = ctx.Process(target=_child, args=(run_path(node), node.cfg, str(log), os.getpid()), name=ready)
                proc.start()
                running[ready] = (proc, time.time(), log)
                ui.info(f"[run] {ready}: running -> {node.cfg.out} (log: {log})")
            if not running:
                if pending and failure is None:  # nothing runnable and nothing running
                    raise WorkFailed(f"stages {', '.join(pending)} wait for stages that did not run")
                break
            failed = _reap(running, nodes, finished, ran)
            failure = failure or failed
    except KeyboardInterrupt:
        for proc, *_ in running.values():
            proc.join()  # the children got the same Ctrl-C and stop at a safe point
        raise
    if failure is not None:
        nid, code, message, log = failure
        err = BadInput if code == 2 else WorkFailed
        raise err(f"stage {nid} failed (exit {code}): {message} (log: {log})")


def _reap(running: dict[str, tuple[Any, float, Path]], nodes: dict[str, Any], finished: set[str],
          ran: set[str]) -> tuple[str, int, str, Path] | None:
    """Wait for running stages to end and record each outcome on its node; the first failure, if any."""
    from multiprocessing.connection import wait

    sentinels = {proc.sentinel: nid for nid, (proc, *_rest) in running.items()}
    failure = None
    for s in wait(list(sentinels)):
        nid = sentinels[s]
        proc, t0, log = running.pop(nid)
        proc.join()
        summary = log.with_suffix(".summary.json")
        node = nodes[nid]
        node.seconds = time.time() - t0
        if proc.exitcode == 0:
            node.summary = json.loads(summary.read_text(encoding="utf-8")) if summary.is_file() else None
            node.status = "ran"
            finished.add(nid)
            ran.add(nid)
            ui.info(f"[run] {nid}: done in {node.seconds:.1f} s")
            continue
        node.status = "failed"
        ui.info(f"[run] {nid}: failed (exit {proc.exitcode}) after {node.seconds:.1f} s; log: {log}")
        if failure is None:
            failure = (nid, proc.exitcode if proc.exitcode in (1, 2, 130) else 1, _last_error(log), log)
    return failure
