"""Running `xlp` in a subprocess and killing it mid-run (resume and worker-death tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
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


def _alive_in_group(pgid: int) -> bool:
    """Whether a process of group `pgid` is still running (zombies, whose files are closed, do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def kill_group(proc: subprocess.Popen, timeout: float = 60) -> None:
    """SIGKILL the run's process group and wait until all of it is gone: its forked workers share the folder's
    lock (flock), so a rerun started while one of them is still exiting would be refused as a second writer."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + timeout
    while _alive_in_group(proc.pid):
        assert time.time() < deadline, "the killed run's workers did not exit"
        time.sleep(0.01)


def kill_when(proc: subprocess.Popen, ready: Callable[[], object], timeout: float = 120) -> None:
    """SIGKILL the run's process group once `ready()` is truthy (and wait until all of it is gone)."""
    try:
        wait_until(proc, ready, timeout)
    finally:
        kill_group(proc)
