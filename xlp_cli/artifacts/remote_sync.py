"""A stage folder and its object-store copy kept in step, file by file, with the manifest as the commit point.

    pull(store, folder)          the remote files into the local folder (an input, or a --out to resume)
    push(folder, store)          the local folder onto the store, as one all-or-nothing change

Both remember the size and time of each file they moved (`uris.sync_record_path`, outside the folder), so a rerun
moves only what changed on either side. What never moves: the local lock (`.xlp.lock`), temporary files and
folders (`.NAME.*.tmp`, `.NAME.tmp`, `.NAME.old`), the lease object.

A push is atomic and rolled forward after a kill, like a database's redo log:
1. a snapshot of the folder (hard links taken at one moment: a folder that the stage replaces meanwhile, such as a
   checkpoint, never goes up half old, half new);
2. every changed file (and the manifest) uploaded under `.xlp-push/ID/` (a key no reader looks at);
3. the journal `.xlp-push/ID.json` (what to copy, what to delete) written in one request: the push's commit point;
4. applied: the remote manifest deleted (a reader now sees an unfinished folder, never a manifest over files that
   do not match it), each file copied into place on the server, the files the folder no longer has deleted, the
   manifest copied last; then the journal and the uploads removed.
A push killed before 3 leaves only uploads nobody reads (the next push removes them); one killed after 3 is
finished by the next writer (`recover`, under the lease) before it reads or writes anything, so the store always
holds a state the local folder had. Paths into the staging cache inside manifest.json and .xlp-config.json are
written as their URIs (`uris.recorded`). Files above S3's 5 GiB copy limit are written straight to their key in
step 4 (the manifest still commits them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

from xlp_cli.artifacts import uris
from xlp_cli.artifacts.files import write_json_atomic
from xlp_cli.artifacts.lease import LEASE
from xlp_cli.artifacts.objectstore import COPY_LIMIT, TEMP_KEY, Store
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.core.errors import WorkFailed

LOCAL_ONLY = {".xlp.lock"}
PUSHES = ".xlp-push"  # a push's uploads (PUSHES/ID/REL) and its journal (PUSHES/ID.json)
MARKER = ".xlp-config.json"  # (outdir.MARKER; outdir imports the stage-folder machinery this module does not need)
REWRITTEN = {MANIFEST, MARKER}
_TEMP_PART = re.compile(r"^\..+\.(tmp|old)$")
Stat = tuple[int, int]


def _records(uri: uris.Uri) -> dict[str, dict[str, list[int]]]:
    try:
        recs = json.loads(uris.sync_record_path(uri).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return recs if isinstance(recs, dict) else {}


def _save(uri: uris.Uri, recs: dict[str, Any]) -> None:
    write_json_atomic(uris.sync_record_path(uri), recs)


def _stat(path: Path) -> Stat | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def each(fn: Callable[[str], None], items: list[str]) -> None:
    """`fn` on every item, XLP_STORAGE_THREADS (8) requests at a time (a store's latency, not its bandwidth, is
    what one request at a time waits for); the first failure is raised once all have ended."""
    if len(items) <= 1:
        for item in items:
            fn(item)
        return
    with ThreadPoolExecutor(max_workers=int(os.environ.get("XLP_STORAGE_THREADS") or 8)) as pool:
        for future in [pool.submit(fn, item) for item in items]:
            future.result()


def local_files(folder: Path) -> dict[str, Stat]:
    """{relative path: (size, mtime)} of the files of `folder` that belong on the store."""
    out: dict[str, Stat] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not _TEMP_PART.match(d))
        for name in sorted(filenames):
            if name in LOCAL_ONLY or _TEMP_PART.match(name):
                continue
            path = Path(dirpath) / name
            st = _stat(path)
            if st is not None:
                out[path.relative_to(folder).as_posix()] = st
    return out


def _remote_files(store: Store) -> dict[str, Stat]:
    """The stage's files on the store: not the lease, a push's uploads and journals, temporary keys."""
    return {rel: st for rel, st in store.listing().items()
            if rel != LEASE and not rel.startswith(f"{PUSHES}/") and not TEMP_KEY.search(rel)}


def pull(store: Store, folder: Path, *, keep_local_changes: bool, again: bool = False,
         only: Callable[[str], bool] | None = None) -> list[str]:
    """Download what changed on the store since the last transfer (the manifest last). `keep_local_changes`
    (a --out being resumed): a local file newer than the last transfer is the work of a killed run on this machine
    and is kept; otherwise (an input) the store's copy wins. `again`: download every file (a store's times have
    whole seconds: a file rewritten in the same second with the same size looks unchanged). `only`: the relative
    paths to download (the others are left as they are). Returns the relative paths downloaded."""
    uri = store.uri
    if keep_local_changes:
        recover(store)  # (the writer, under its lease: a push a killed run committed is finished first)
    recs = {} if again else _records(uri)
    remote = _remote_files(store)
    got: list[str] = []
    for rel in sorted(remote):
        if only is not None and not only(rel):
            continue
        dest = folder / rel
        rec, now = recs.get(rel), _stat(dest)
        if rec and tuple(rec["remote"]) == remote[rel] and now is not None:
            if keep_local_changes or tuple(rec["local"]) == now:
                continue
        got.append(rel)
    each(lambda rel: store.get(rel, folder / rel), [r for r in got if r != MANIFEST])
    if MANIFEST in got:  # last, as on a disk: a pull cut short leaves an unfinished folder, never a damaged one
        store.get(MANIFEST, folder / MANIFEST)
    for rel in got:
        recs[rel] = {"remote": list(remote[rel]), "local": list(_stat(folder / rel) or (0, 0))}
    for rel in [r for r in recs if r not in remote]:  # deleted on the store since the last transfer
        path = folder / rel
        if _stat(path) is not None and tuple(recs[rel]["local"]) == _stat(path):
            path.unlink()
        del recs[rel]
    _save(uri, recs)
    return got


def as_stored(path: Path) -> bytes | None:
    """manifest.json / .xlp-config.json as a push stores it: every staging-cache path written as its URI."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None

    def fix(v: Any) -> Any:
        if isinstance(v, str):
            return uris.recorded(v)
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        return v
    return (json.dumps(fix(obj), indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def push(folder: Path, store: Store) -> list[str]:
    """Make the store's copy equal `folder` (see the module doc). Returns the relative paths uploaded."""
    uri = store.uri
    recover(store)
    recs = _records(uri)
    remote = _remote_files(store)
    with snapshot(folder) as (snap, mine):
        def same(rel: str) -> bool:
            rec = recs.get(rel)
            return bool(rec) and tuple(rec["local"]) == mine.get(rel) and tuple(rec["remote"]) == remote.get(rel)

        changed = [rel for rel in mine if not same(rel)]
        gone = [rel for rel in remote if rel not in mine]
        if not changed and not gone:
            return []
        if MANIFEST in mine and MANIFEST not in changed:
            changed.append(MANIFEST)  # (re-committed after the change)
        changed.sort(key=lambda rel: rel == MANIFEST)
        push_id = uuid.uuid4().hex[:12]
        direct = [rel for rel in changed if mine[rel][0] > COPY_LIMIT]
        def upload(rel: str) -> None:
            data = as_stored(snap / rel) if rel in REWRITTEN else None
            store.write(f"{PUSHES}/{push_id}/{rel}", snap / rel, data)
        each(upload, [rel for rel in changed if rel not in direct])
        journal = {"copy": [r for r in changed if r not in direct], "direct": direct, "delete": gone}
        store.put_bytes(f"{PUSHES}/{push_id}.json", json.dumps(journal).encode())  # committed
        _apply(store, push_id, journal, lambda rel: store.write(rel, snap / rel))
    after = _remote_files(store)
    for rel in changed:
        if rel not in after:
            raise WorkFailed("an uploaded file is not on the store; rerun the same command", path=str(uri.child(rel)))
        recs[rel] = {"local": list(mine[rel]), "remote": list(after[rel])}
    for rel in gone:
        recs.pop(rel, None)
    _save(uri, recs)
    return changed


def _apply(store: Store, push_id: str, journal: dict[str, list[str]],
           write_direct: Callable[[str], None] | None = None) -> None:
    """Step 4 of a push (again, after a kill: every step can be repeated)."""
    store.delete(MANIFEST)
    each(lambda rel: store.copy(f"{PUSHES}/{push_id}/{rel}", rel), [r for r in journal["copy"] if r != MANIFEST])
    # Files above the copy limit are written straight from the folder; a recovery does not have them at hand, so it
    # leaves the manifest uncommitted (it would list files that are not there) until the writer's next push.
    complete = write_direct is not None or not journal.get("direct")
    for rel in journal.get("direct", []) if write_direct is not None else []:
        write_direct(rel)
    each(store.delete, journal["delete"])
    if MANIFEST in journal["copy"] and complete:
        store.copy(f"{PUSHES}/{push_id}/{MANIFEST}", MANIFEST)
    store.delete(f"{PUSHES}/{push_id}.json")
    each(lambda rel: store.delete(f"{PUSHES}/{push_id}/{rel}"), journal["copy"])


def recover(store: Store) -> None:
    """Finish the committed push a killed writer left (its journal), and remove the uploads of uncommitted ones.
    Only the lease holder calls this."""
    listing = store.listing()
    for key in sorted(k for k in listing if k.startswith(f"{PUSHES}/") and k.count("/") == 1 and k.endswith(".json")):
        push_id = key[len(PUSHES) + 1:-len(".json")]
        try:
            journal = json.loads(store.read_bytes(key) or b"")
        except ValueError:
            journal = None
        if isinstance(journal, dict) and isinstance(journal.get("copy"), list):
            _apply(store, push_id, journal)
        else:
            store.delete(key)
    # (the uploads of a push killed before its journal)
    each(store.delete, [k for k in store.listing() if k.startswith(f"{PUSHES}/") or TEMP_KEY.search(k)])


@contextlib.contextmanager
def snapshot(folder: Path, tries: int = 5) -> Iterator[tuple[Path, dict[str, Stat]]]:
    """The files of `folder` at one moment, as hard links in a private folder: a stage that replaces a whole folder
    while we upload (a checkpoint, renamed into place) cannot mix two versions of it on the store. Taken again
    when a file was replaced while linking; without hard links (another file system) the folder itself."""
    snap = uris.cache_root() / ".snapshots" / uuid.uuid4().hex
    try:
        for _ in range(tries):
            shutil.rmtree(snap, ignore_errors=True)
            mine, linked = local_files(folder), {}
            try:
                for rel in mine:
                    (snap / rel).parent.mkdir(parents=True, exist_ok=True)
                    os.link(folder / rel, snap / rel)
                    linked[rel] = (snap / rel).stat().st_ino
            except FileNotFoundError:
                continue  # (replaced under the walk: take it again)
            except OSError:
                break  # (no hard links here)
            if all(_inode(folder / rel) == ino for rel, ino in linked.items()):
                yield snap, {rel: _stat(snap / rel) or mine[rel] for rel in mine}
                return
        yield folder, local_files(folder)
    finally:
        shutil.rmtree(snap, ignore_errors=True)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def pull_file(store: Store, dest: Path) -> None:
    """One object (an input file) into `dest`, unless the copy there is the one the last transfer made."""
    recs = _records(store.uri)
    remote, rec = store.stat(""), recs.get("")
    if remote is None:
        raise WorkFailed("the object vanished while being read; rerun the same command", path=str(store.uri))
    if rec and tuple(rec["remote"]) == remote and tuple(rec["local"]) == _stat(dest):
        return
    store.get("", dest)
    _save(store.uri, {"": {"remote": list(remote), "local": list(_stat(dest) or (0, 0))}})
