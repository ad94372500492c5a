"""Running `xlp` in a subprocess and killing it mid-run (resume and worker-death tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Callable

from conftest import REPO


def start_xlp(*args: str, stderr=subprocess.DEVNULL) -> subprocess.Popen:
    """`xlp ARGS` in its own session (so that killing its group kills its local workers too)."""
    return subprocess.Popen([sys.executable, "-c", "from xlp_cli.cli.app import main; main()", *map(str, args)],
                            cwd=REPO, env={**os.environ, "XLP_QUIET": "1"}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=stderr, text=True)


def wait_until(proc: subprocess.Popen, ready: Callable[[], object], timeout: float = 120, poll: float = 0.01):
    """Wait until `ready()` is truthy (returns it) while the run is still going."""
    deadline = time.time() + timeout
    while not (found := ready()):
        assert proc.poll() is None, "the run finished before it could be killed"
        assert time.time() < deadline, "timed out waiting for the run"
        time.sleep(poll)
    return found


def kill_when(proc: subprocess.Popen, ready: Callable[[], object], timeout: float = 120) -> None:
    """SIGKILL the run's process group once `ready()` is truthy."""
    try:
        wait_until(proc, ready, timeout)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
