"""The `xlp` console script. This module imports nothing at load time but the message of core/errors.py, so that a Ctrl-C during the first moments
(the imports of typer, rich and pyarrow take ~0.6 s) ends with one line and exit 130, never a traceback."""

from __future__ import annotations

import gc
import os
import signal
import sys

from xlp_cli.core.errors import INTERRUPTED  # (a module that imports nothing)


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C during the first imports: nothing to clean up yet, so one line and exit 130 at once. (Raised as
    KeyboardInterrupt instead, it can land in importlib's module-lock callback, where Python prints it as an
    "Exception ignored" traceback that no `except` sees.)"""
    os.write(2, INTERRUPTED.encode())
    os._exit(130)


def main() -> None:
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    # Arrow's default pool (mimalloc) keeps ~20-30 MB it once touched for the whole run, even after a stage switches
    # pools; chosen before pyarrow loads, it is never set up (peak RSS of `xlp prepare --bpe-from` on 40 MB:
    # 252-258 MB -> 215-225 MB). A value set by the user wins.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    # numpy's OpenBLAS starts a thread per core at import, which spin-waits: ~3% of the CPU of `xlp prepare` on a
    # Wikipedia dump, for nothing (xlp's numpy products are small: retrieval's and the analyses' similarity matrices
    # of a few thousand rows; torch, which does the heavy algebra, uses MKL). A value set by the user wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # The start-up's imports (the CLI, then the stage's modules: stages.run_staged turns the collector back on
    # before the stage runs) make ~100k objects and no garbage: without collections meanwhile, ~12 ms less CPU.
    gc.disable()
    try:
        from xlp_cli.cli.app import main as cli_main  # (after the Ctrl-C handler is in place)

        signal.signal(signal.SIGINT, signal.default_int_handler)  # from here a KeyboardInterrupt: stages clean up
        cli_main()
    except KeyboardInterrupt:  # before the command line was parsed (cli.main reports the later ones)
        sys.stderr.write(INTERRUPTED)
        sys.exit(130)
    finally:
        gc.enable()  # (a command that never reached its stage)
        # What is alive now is freed by the exit: out of the collector, the interpreter's shutdown collections do
        # not walk it again (~40 ms of CPU, all of it on the critical path, after a Wikipedia prepare run).
        gc.freeze()


if __name__ == "__main__":
    main()
