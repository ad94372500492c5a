"""A fork server for the reliability suite: real `xlp` processes without paying Python's and torch's start-up
(~1-3 s on a loaded 2-core machine) a hundred times.

Run as a script, it imports xlp's stage modules (torch included: imported, never used, so no thread pool exists
when it forks), then serves one JSON request per stdin line:
    {"op": "start", "args": [...], "cwd": DIR, "log": FILE, "env": {...}}  -> {"pid": N}
    {"op": "wait", "pid": N}                                            -> {"rc": exit code, -9 for SIGKILL}
Each `start` forks a child in its own session (so a test kills it and its workers with one killpg) that runs
`xlp ARGS` exactly as the console script does, with stdout and stderr in FILE. The children are real processes:
real files, real locks, real signals. `Zygote` is the test side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _serve() -> None:
    import numpy.ctypeslib  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import torch._dynamo  # noqa: F401 - imported by the first optimizer a run builds (seconds)
    import torch.profiler  # noqa: F401
    import typer._adapters  # noqa: F401 - imported while Typer parses (pydantic)

    import xlp_cli.bpe.run  # noqa: F401
    import xlp_cli.cli.app  # noqa: F401 - the command table and every stage's config
    import xlp_cli.cli.entry  # noqa: F401
    import xlp_cli.prepare.engine_local  # noqa: F401 - (imported by a run; importing now saves each child the time)
    import xlp_cli.prepare.run  # noqa: F401
    import xlp_cli.prepare.sources.text  # noqa: F401
    import xlp_cli.recipes.run  # noqa: F401
    import xlp_cli.tasks.unmt.finetune  # noqa: F401 - (the fine-tuning sweep and corpus cases)
    import xlp_cli.train.pretrain  # noqa: F401 - torch
    import xlp_cli.vocab.run  # noqa: F401
    from xlp_cli.artifacts.manifest import software_versions
    from xlp_cli.text.pipeline import TextPipeline

    software_versions()  # (cached per process)
    pipe = TextPipeline.from_config({})  # the Moses tools of the suite's languages are cached per process
    for lang in ("en", "fr"):
        pipe.process("Warm up .", lang)

    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "start":
            pid = os.fork()
            if pid == 0:
                _child(req)
            reply = {"pid": pid}
        else:
            _, status = os.waitpid(req["pid"], 0)
            reply = {"rc": os.waitstatus_to_exitcode(status)}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def _child(req: dict) -> None:
    import signal

    code = 1
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # until the command runs (then it is xlp's Ctrl-C)
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.chdir(req["cwd"])
        os.environ.update(req.get("env") or {})
        sys.argv = ["xlp", *req["args"]]
        from xlp_cli.cli.entry import main

        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a Ctrl-C that came before: raised here,
            main()                                                       # i.e. as at the script's first line
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except KeyboardInterrupt:
            from xlp_cli.cli.entry import INTERRUPTED

            sys.stderr.write(INTERRUPTED)
            code = 130
    except BaseException:  # noqa: BLE001 - reported in the log, like an uncaught exception would be
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class Zygote:
    """The test side: start the server once, then `start`/`wait`/`run` xlp commands through it."""

    def __init__(self, cwd: Path):
        self.cwd = Path(cwd)
        env = {**os.environ, "XLP_QUIET": "1", "PYTHONPATH": str(HERE.parent)}
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=self.cwd)
        self.n = 0

    def _ask(self, req: dict) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the zygote died"
        return json.loads(line)

    def start(self, *args: str, log: Path | None = None, env: dict | None = None) -> tuple[int, Path]:
        self.n += 1
        log = log or self.cwd / f"xlp-{self.n}.log"
        pid = self._ask({"op": "start", "args": [str(a) for a in args], "cwd": str(self.cwd), "log": str(log),
                         "env": env or {}})["pid"]
        while True:  # until the child leads its own process group (a test may signal the group at once)
            try:
                if os.getpgid(pid) == pid:
                    break
            except ProcessLookupError:
                break
            time.sleep(0.0005)
        return pid, log

    def wait(self, pid: int) -> int:
        return self._ask({"op": "wait", "pid": pid})["rc"]

    def run(self, *args: str, env: dict | None = None) -> tuple[int, str]:
        """(exit code, stdout+stderr) of `xlp ARGS`."""
        pid, log = self.start(*args, env=env)
        rc = self.wait(pid)
        return rc, log.read_text(encoding="utf-8", errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=30)


if __name__ == "__main__" and sys.argv[1:] == ["serve"]:
    _serve()
