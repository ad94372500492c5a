"""The reliability suite's tools: a content digest of a stage folder, the temp-file check, and the kill sweep.

A kill sweep of one stage (docs/reliability.md):
1. a clean run (through the zygote: a real forked process) while the folder is watched: `progress` counts the
   (file, size) states seen in --out (chunks, shards, temp files, checkpoints, metric lines: byte/row progress);
2. N kill points i = 0..N-1: a fresh run is SIGKILLed (its whole process group) as soon as its progress reaches
   (i + 0.5)/N of the clean run's, or its time (i + 0.5)/N of the clean run's, whichever comes first;
3. the same command again must exit 0, leave no temp file, and give the clean run's content digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

TEMP = re.compile(r"^\..+\.(tmp|old)$")
VOLATILE = {"created", "time", "seconds", "versions", "run", "elapsed_s", "tokens_per_s", "sentences_per_s",
            "docs_per_s", "mb_per_s", "copied_from", "skipped", "status", "resumed", "steps_this_run",
            "config_hash"}  # (config_hash: a hash of the config, which is compared; it covers the --out path)


def _normalize(obj):
    if isinstance(obj, dict):
        return {k: _normalize(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_normalize(v) for v in obj]
    return obj


def _json_digest(text: str) -> str:
    try:
        lines = [json.loads(text)]
    except json.JSONDecodeError:
        lines = [json.loads(x) for x in text.splitlines() if x.strip()]
    return hashlib.sha256(json.dumps(_normalize(lines), sort_keys=True).encode()).hexdigest()


def digest(out: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under `out`; JSON files (manifests, meta.json, metrics.jsonl) are
    hashed without their volatile keys (times, speeds, versions) and with the folder's own path replaced."""
    out = Path(out)
    result = {}
    for p in sorted(out.rglob("*")):
        if not p.is_file() or p.name == ".xlp.lock":
            continue
        rel = p.relative_to(out).as_posix()
        if p.suffix in (".json", ".jsonl"):
            text = p.read_text(encoding="utf-8").replace(str(out.resolve()), "<OUT>").replace(str(out), "<OUT>")
            result[rel] = _json_digest(text)
        else:
            result[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return result


def temp_files(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in Path(out).rglob("*") if TEMP.match(p.name))


def alive(pid: int) -> bool:
    """The process runs (a zombie waiting for the zygote's wait does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Progress:
    """How far a run got: the number of distinct (file, size) states seen so far under its folder."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.seen: set[tuple[str, int]] = set()

    def poll(self) -> int:
        for root, _dirs, files in os.walk(self.out):
            for name in files:
                try:
                    self.seen.add((os.path.join(root, name), os.stat(os.path.join(root, name)).st_size))
                except OSError:
                    pass
        return len(self.seen)


def watch(z, args: list[str], out: Path) -> tuple[int, float, int]:
    """Run `xlp ARGS --out OUT` to its end while watching it: (exit code, seconds, progress)."""
    prog = Progress(out)
    t0 = time.monotonic()
    pid, log = z.start(*args, "--out", out)
    while alive(pid):
        prog.poll()
        time.sleep(0.002)
    rc = z.wait(pid)
    assert rc == 0, log.read_text()
    return rc, time.monotonic() - t0, prog.poll()


def kill_at(z, args: list[str], out: Path, progress: float, seconds: float, sig: int = signal.SIGKILL):
    """Start a fresh run and send `sig` to its process group at the given progress or time, whichever comes
    first. Returns (exit code, log text), or None when the run finished before the moment came."""
    prog = Progress(out)
    t0 = time.monotonic()
    pid, log = z.start(*args, "--out", out)
    while alive(pid):
        if prog.poll() >= progress or time.monotonic() - t0 >= seconds:
            os.killpg(pid, sig)
            rc = z.wait(pid)
            if rc == 0 and sig == signal.SIGKILL:  # it exited between the check and the kill (a zombie then)
                return None
            return rc, log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        time.sleep(0.002)
    z.wait(pid)
    return None


def ensure_clean(z, work: Path, stages: dict[str, list[str]], stage: str) -> Path:
    """`WORK/STAGE-clean`: the clean output of `stage` (and of the stages before it), made now if missing."""
    out = work / f"{stage}-clean"
    if not (out / "manifest.json").is_file():
        order = list(stages)
        for up in order[: order.index(stage)]:
            ensure_clean(z, work, stages, up)
        shutil.rmtree(out, ignore_errors=True)
        rc, text = z.run(*stages[stage], "--out", out)
        assert rc == 0, text
    return out


def sweep(z, args: list[str], work: Path, name: str, points: int = 12, need: int = 10) -> dict:
    """The kill sweep of one command (module doc). Returns the clean run's folder and some numbers."""
    clean = work / f"{name}-clean"
    shutil.rmtree(clean, ignore_errors=True)
    _, seconds, total = watch(z, args, clean)
    want = digest(clean)
    assert want and not temp_files(clean)
    kills = []
    for i in range(points):
        out = work / f"{name}-kill{i}"
        frac = (i + 0.5) / points
        for shrink in (1.0, 0.9, 0.75):  # a run that went faster than the clean one: aim a little earlier
            shutil.rmtree(out, ignore_errors=True)
            got = kill_at(z, args, out, max(1, frac * shrink * total), frac * shrink * seconds)
            if got is not None:
                break
        if got is None:
            continue
        assert got[0] == -signal.SIGKILL, got
        kills.append(frac)
        rc, text = z.run(*args, "--out", out)
        assert rc == 0, f"rerun after a kill at {frac:.2f} failed: {text}"
        assert not temp_files(out), (frac, temp_files(out))
        have = digest(out)
        diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
        assert not diff, f"{name}: the rerun after a kill at {frac:.2f} differs from the clean run: {diff[:5]}"
    assert len(kills) >= need, f"{name}: only {len(kills)} of {points} kills landed before the run ended"
    return {"clean": clean, "seconds": seconds, "progress": total, "kills": len(kills)}


def interrupt(z, args: list[str], out: Path, seconds: float, want: dict[str, str]) -> None:
    """Ctrl-C (SIGINT to the process group) mid-run: one line, exit 130 (or 0 if it had finished), no traceback;
    the rerun gives the clean digest."""
    got = kill_at(z, args, out, float("inf"), seconds, signal.SIGINT)
    if got is not None:
        rc, text = got
        assert "Traceback" not in text, text
        assert rc in (0, 130), (rc, text)
        if rc == 130:
            assert text.strip().splitlines()[-1].startswith("xlp: interrupted"), text
    rc, text = z.run(*args, "--out", out)
    assert rc == 0, text
    assert digest(out) == want
