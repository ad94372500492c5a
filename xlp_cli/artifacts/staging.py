"""A stage run whose config names object-store URIs, on local staging folders (docs/storage.md).

    summary = staging.run(fn, cfg)               # stages.run_staged: every stage, at its boundary

Before the stage: the `--out` URI gets a lease (`lease.py`) and its committed files are pulled into its staging
folder (a rerun finds there whatever a killed run left and resumes as on a local disk); every other URI in the
config (`--data` folders, input files, `--bpe-from`, ...) is pulled and, for a stage folder, checked against its
manifest. The stage then runs unchanged on local paths, and its config and manifests record the URIs
(`core.config.record_path_as`); a folder that a manifest links by URI (`upstream`) is fetched when
`find_upstream` follows the link (`uris.fetch`: light, or whole when its shards are read). While it runs, the out
folder is pushed every XLP_SYNC_SECONDS (300; 0: only at the end) so that a run killed on a lost machine resumes
elsewhere from its last push; when it ends (finished, failed or
interrupted) the folder is pushed once more, manifest last, and the lease is released. Sibling folders that a
prepare run links from its manifest (`outputs.bpe`/`outputs.ids`) are pushed beside it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from xlp_cli.artifacts import layout, remote_sync, uris
from xlp_cli.artifacts.lease import Lease
from xlp_cli.artifacts.manifest import read_manifest, try_read_manifest
from xlp_cli.artifacts.objectstore import Store
from xlp_cli.artifacts.shards import MANIFEST, verify_shards
from xlp_cli.core import config as cfgmod
from xlp_cli.core.errors import BadInput, XlpError


def _open(uri: uris.Uri, cache: dict[str, Store]) -> Store:
    key = str(uri)
    if key not in cache:
        cache[key] = Store.open(uri)
    return cache[key]


def pull_input(store: Store) -> Path:
    """An input URI in its staging path: a stage folder (checked against its manifest), a plain folder or a file."""
    uri, dest = store.uri, uris.staging_path(store.uri)
    kind = store.kind()
    if kind == "none":
        raise BadInput("no such object or folder in the store", path=str(uri))
    if kind == "file":
        remote_sync.pull_file(store, dest)
        return dest
    remote_sync.pull(store, dest, keep_local_changes=False)
    remote_manifest = store.read_bytes(MANIFEST)
    if remote_manifest is None:
        return dest  # (not a stage folder: an HF model folder, a folder of input files)
    try:
        if remote_sync.as_stored(dest / MANIFEST) != remote_manifest:  # rewritten while we read
            raise BadInput("the manifest changed while the folder was downloaded", path=str(uri))
        verify_shards(dest, read_manifest(dest), hash=True)
    except BadInput:  # a file the last transfer's sizes and times could not tell apart: take every file again
        remote_sync.pull(store, dest, keep_local_changes=False, again=True)
        verify_shards(dest, read_manifest(dest), hash=True)
    return dest


SHARD_FOLDERS = ("mono", "pairs", "train", "valid", "test", ".work", "checkpoints")  # what a followed link needs only when read


def _fetcher(cache: dict[str, Store]) -> Callable[[str, bool], None]:
    """`uris.fetch` inside a session: a folder an upstream link names, pulled once (light, or whole)."""
    done: dict[str, bool] = {}

    def fetch(raw: str, full: bool) -> None:
        if done.get(raw) or (raw in done and not full):
            return
        store = _open(uris.parse(raw), cache)
        if full:
            pull_input(store)
        elif store.kind() == "folder":
            remote_sync.pull(store, uris.staging_path(store.uri), keep_local_changes=False,
                             only=lambda rel: rel.split("/")[0] not in SHARD_FOLDERS)
        done[raw] = full
    return fetch


def remote_manifest(raw: str) -> dict[str, Any] | None:
    """The committed manifest of a folder on the store (None: none, or not a JSON object)."""
    data = Store.open(uris.parse(raw)).read_bytes(MANIFEST)
    try:
        m = json.loads(data) if data is not None else None
    except ValueError:
        return None
    return m if isinstance(m, dict) else None


def _siblings(folder: Path) -> list[str]:
    """The sibling stage folders a manifest links (`xlp prepare --bpe-codes`: OUT-bpe, OUT-ids)."""
    m = try_read_manifest(folder) or {}
    outputs = m.get("outputs") if isinstance(m.get("outputs"), dict) else {}
    names = []
    for key in ("bpe", "ids"):
        if isinstance(outputs.get(key), str):
            names.append(layout.linked_folder(folder, outputs[key], f"outputs.{key}", folder / MANIFEST).name)
    return names


class _Syncer:
    """Push the out folder every XLP_SYNC_SECONDS while the stage runs (errors wait for the next round)."""

    def __init__(self, folder: Path, store: Store):
        self.folder, self.store = folder, store
        self.every = float(os.environ.get("XLP_SYNC_SECONDS") or 300)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="xlp-sync", daemon=True)
        if self.every > 0:
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                remote_sync.push(self.folder, self.store)
            except Exception:  # (a file replaced under the walk, a network blip: the next push sends it)
                continue

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def _mapped(cfg: Any, found: list[tuple[str, int | None, str]], local: dict[str, Path]) -> Any:
    """A copy of `cfg` whose URI values are their staging paths (a Path field gets a Path, a str field a str)."""
    out = copy.copy(cfg)
    for name, index, uri in found:
        value = getattr(out, name)
        if index is None:
            setattr(out, name, type(value)(local[uri]) if isinstance(value, Path) else str(local[uri]))
        else:
            items = list(value)
            items[index] = Path(local[uri]) if isinstance(items[index], Path) else str(local[uri])
            setattr(out, name, items)
    return out


def _writes_out() -> bool:
    """Whether this process moves the --out folder: not the other processes of a torchrun (RANK > 0), which share
    rank 0's staging folder (it pulls before the stage's first barrier and pushes alone). Other nodes see that
    folder only through a shared XLP_STORAGE_CACHE: without one, a node other than rank 0's is refused."""
    if int(os.environ.get("GROUP_RANK") or 0) > 0 and not os.environ.get("XLP_STORAGE_CACHE"):
        raise BadInput("multi-node runs with an object-store --out need one staging folder for every node: set "
                       "XLP_STORAGE_CACHE to a folder all nodes share (or give --out on a shared filesystem)",
                       path="--out")
    return int(os.environ.get("RANK") or 0) == 0


@contextlib.contextmanager
def session(cfg: Any) -> Iterator[Any]:
    """Run the block on a copy of `cfg` with every URI staged (see the module doc)."""
    found = uris.in_config(cfg)
    parsed = {raw: uris.parse(raw) for _, _, raw in found}
    out_raw = next((raw for name, _, raw in found if name == "out"), None)
    cache: dict[str, Store] = {}
    local: dict[str, Path] = {}
    out_store = _open(parsed[out_raw], cache) if out_raw else None
    for raw, uri in parsed.items():
        if raw != out_raw and str(uri) != str(out_store.uri if out_store else ""):
            local[raw] = pull_input(_open(uri, cache))
        else:
            local[raw] = uris.staging_path(uri)
    for raw, uri in parsed.items():
        cfgmod.record_path_as(local[raw], str(uri))
    uris.set_fetcher(_fetcher(cache))
    try:
        if out_store is None or not _writes_out():
            yield _mapped(cfg, found, local)
        else:
            yield from _writing(cfg, found, local, out_store, cache)
    finally:
        uris.set_fetcher(None)
        for raw in parsed:
            cfgmod.record_path_as(local[raw], None)


def _writing(cfg: Any, found: list[tuple[str, int | None, str]], local: dict[str, Path], out_store: Store,
             cache: dict[str, Store]) -> Iterator[Any]:
    """The --out part of a session: lease, pull, periodic pushes, the last push, release."""
    folder = uris.staging_path(out_store.uri)
    lease = Lease(out_store)
    lease.acquire()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        remote_sync.pull(out_store, folder, keep_local_changes=True)
        syncer = _Syncer(folder, out_store)
        try:
            yield _mapped(cfg, found, local)
        except BaseException:  # failed or interrupted: push what is complete, report the stage's own error
            syncer.stop()
            with contextlib.suppress(Exception):
                _push_all(folder, out_store, cache)
            raise
        syncer.stop()
        _push_all(folder, out_store, cache)
    finally:
        with contextlib.suppress(Exception):  # (an unreleased lease expires, or a rerun here takes it over)
            lease.release()


def _push_all(folder: Path, store: Store, cache: dict[str, Store]) -> None:
    if not folder.is_dir():
        return
    for name in _siblings(folder):
        sibling = store.uri.sibling(name)
        remote_sync.push(uris.staging_path(sibling), _open(sibling, cache))
    remote_sync.push(folder, store)


def run(fn: Callable[[Any], Any], cfg: Any) -> Any:
    """`fn(cfg)` inside a `session`; its summary and its errors name the URIs, not the staging folders."""
    try:
        with session(cfg) as local_cfg:
            return _as_uris(fn(local_cfg))
    except XlpError as e:
        e.path = uris.recorded_text(e.path) if e.path else e.path
        e.message = uris.recorded_text(e.message)
        raise


def _as_uris(value: Any) -> Any:
    if isinstance(value, (str, Path)):
        return uris.recorded_text(str(value)) if str(value).startswith(str(uris.cache_root())) else value
    if isinstance(value, dict):
        return {k: _as_uris(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_uris(v) for v in value]
    return value
