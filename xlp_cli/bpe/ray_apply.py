"""BPE apply as Ray tasks, one per text shard (`xlp prepare --engine ray --bpe-codes/--bpe-from`).

- The driver (bpe/run.apply) writes the dictionary and the copied tokenizer files into IDS first, then
  hands the shards that are not done yet to `runner`: each task loads the tokenizer from IDS exactly as a
  reader of that folder does (tokenizer.load_tokenizer, hashes checked; kept by the worker process from
  task to task) and runs `run._apply_shard`, the local engine's code, on one shard. So each id shard is
  written once, atomically (a temporary file renamed over the final name), with the same bytes as the local
  engine's; the driver takes the results in shard order and writes the manifest last.
- The tasks read the text shards and write the id shards themselves: PREP and IDS must be at the same path
  on every node (a shared filesystem; a local cluster shares this machine's).
- At most 2 x (the cluster's CPUs) tasks are in flight. A task whose worker dies is retried (its temporary
  file is removed or left as a `.*.tmp` that no reader takes); after `MAX_RETRIES` the run fails with one
  line and a rerun keeps the finished id shards.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any, Iterator

from xlp_cli.bpe.run import _apply_shard
from xlp_cli.bpe.tokenizer import load_tokenizer
from xlp_cli.core import ray_cluster

MAX_RETRIES = 2
_TOKENIZERS: dict[str, Any] = {}  # per worker process: (IDS, tokenizer entry) -> Tokenizer


def apply_shard_task(info: dict[str, Any], base: str, job: tuple) -> tuple[str, int, int, int]:
    """The Ray task: `run._apply_shard` on one text shard, with the tokenizer of IDS (`base`)."""

    key = json.dumps([base, info], sort_keys=True)
    if key not in _TOKENIZERS:
        _TOKENIZERS.clear()
        _TOKENIZERS[key] = load_tokenizer(info, Path(base))
    return _apply_shard(_TOKENIZERS[key], *job)


def runner(address: str = "") -> Any:
    """A `runner` for bpe/run.apply that runs the shards as Ray tasks on the cluster at `address` (empty:
    the connection this process holds, or a local cluster started for the run)."""
    def run(_tok: Any, info: dict[str, Any], out: Path, jobs: list[tuple]) -> Iterator[tuple]:
        if not jobs:
            return
        with ray_cluster.session(address) as ray:
            task = ray.remote(max_retries=MAX_RETRIES)(apply_shard_task)
            info_ref, base = ray.put(info), str(Path(out).resolve())
            todo = iter([(Path(s).resolve(), pair, rows, Path(d).resolve(), part) for s, pair, rows, d, part in jobs])
            inflight: collections.deque = collections.deque()

            def submit() -> None:
                job = next(todo, None)
                if job is not None:
                    inflight.append(task.remote(info_ref, base, job))

            try:
                for _ in range(2 * ray_cluster.cluster_cpus(ray)):
                    submit()
                while inflight:
                    try:
                        result = ray.get(inflight[0])
                    except ray.exceptions.RayError as e:
                        raise ray_cluster.failure(ray, e, "xlp prepare (bpe apply)") from None
                    inflight.popleft()
                    submit()
                    yield result
            finally:
                for ref in inflight:  # a failure or an interrupted driver: stop the other tasks
                    ray.cancel(ref, force=True)
    return run
