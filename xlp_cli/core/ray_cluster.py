"""The Ray cluster of an `--engine ray` run (`xlp prepare`, `xlp vocab-score`): join one, or start one here.

`--ray-address HOST:PORT` (or `auto`) joins a running cluster (`ray start --head` on one node, `ray start
--address HEAD:6379` on the others; docs/scale.md); without it `ray.init()` starts a local cluster with this
machine's CPUs for the run and shuts it down after. A process that holds a Ray connection already (a
notebook, a test) keeps it: the run uses it and leaves it open. Ray is the optional extra `xlp[ray]`.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from xlp_cli.core.errors import BadInput, WorkFailed, XlpError


def _import_ray() -> Any:
    try:
        import ray
    except ModuleNotFoundError:
        raise BadInput("--engine ray needs Ray: install the extra with `pip install 'xlp[ray]'` "
                       "(`make setup` does)") from None
    return ray


@contextlib.contextmanager
def session(address: str = "") -> Iterator[Any]:
    """The `ray` module, connected."""
    ray = _import_ray()
    if ray.is_initialized():
        yield ray
        return
    quiet = {"log_to_driver": False, "logging_level": "ERROR"}
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(include_dashboard=False, **quiet)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
        what = f"join the Ray cluster at {address}" if address else "start a local Ray cluster"
        raise WorkFailed(f"cannot {what}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def cluster_cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def failure(ray: Any, e: BaseException, what: str) -> XlpError:
    """A one-line error for a Ray failure (a worker or node that died, a task that raised; a task's own
    BadInput/WorkFailed, e.g. a corrupt shard, is given back as it is)."""
    ex = ray.exceptions
    if isinstance(e, ex.RayTaskError):
        cause = getattr(e, "cause", None)
        if isinstance(cause, XlpError):
            return cause
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(e)
        return WorkFailed(f"a Ray task of {what} failed ({detail.splitlines()[0]}); rerun the same command to resume")
    if isinstance(e, ex.RayActorError):
        return WorkFailed(f"a Ray actor of {what} died (killed? out of memory?); rerun the same command to resume")
    return WorkFailed(f"a Ray worker of {what} died and its retries are used up ({type(e).__name__}); "
                      "rerun the same command to resume")
