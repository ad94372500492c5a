"""The object-store twin of `outdir.lock`: a lease object `OUT/.xlp.lease.json` {owner, host, pid, expires}.

An object store has no `flock`, so one writer per `--out` URI is kept by a lease: the holder writes the object,
reads it back (the last writer of two simultaneous starts wins; the other sees a foreign owner and refuses), renews
it every third of its term while the stage runs, and deletes it at the end. A second writer is refused at once
with the holder's host, PID and expiry (exit 2). A lease whose term ran out is taken over; so is one left by a
killed process of this host (its PID is gone), so a rerun on the same machine resumes at once. The term is
XLP_LEASE_SECONDS (300): a writer killed on a machine that is then lost blocks its --out for at most that long.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from typing import Any

from xlp_cli.artifacts.objectstore import Store
from xlp_cli.core.errors import BadInput

LEASE = ".xlp.lease.json"


def term() -> float:
    return float(os.environ.get("XLP_LEASE_SECONDS") or 300)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Lease:
    """Hold the lease of one store prefix while a stage writes it (`acquire`, then `release`)."""

    def __init__(self, store: Store):
        self.store = store
        self.owner = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _body(self) -> bytes:
        now = time.time()
        return json.dumps({"owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(),
                           "acquired": now, "expires": now + term()}).encode()

    def _read(self) -> dict[str, Any] | None:
        raw = self.store.read_bytes(LEASE)
        if raw is None:
            return None
        try:
            held = json.loads(raw)
        except ValueError:
            return None  # (a damaged lease object holds nothing)
        return held if isinstance(held, dict) else None

    def _refuse_if_held(self, held: dict[str, Any] | None) -> None:
        if not held or held.get("owner") == self.owner:
            return
        expired = float(held.get("expires") or 0) < time.time()
        dead = held.get("host") == socket.gethostname() and isinstance(held.get("pid"), int) and not _alive(held["pid"])
        if expired or dead:
            return
        left = int(float(held["expires"]) - time.time())
        raise BadInput(f"another xlp process (PID {held.get('pid')} on {held.get('host')}) holds the lease of this "
                       f"folder for {left} s more ({LEASE}); wait for it to finish, or use another --out",
                       path=str(self.store.uri))

    def acquire(self) -> None:
        self._refuse_if_held(self._read())
        self.store.put_bytes(LEASE, self._body())
        time.sleep(float(os.environ.get("XLP_LEASE_SETTLE") or 0.2))  # a simultaneous start writes in this window
        self._refuse_if_held(self._read())
        self._thread = threading.Thread(target=self._renew, name="xlp-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(term() / 3):
            try:
                self.store.put_bytes(LEASE, self._body())
            except Exception:  # (a network blip: the next renewal tries again, well inside the term)
                continue

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        held = self._read()
        if held is not None and held.get("owner") == self.owner:
            self.store.delete(LEASE)
