"""Hardening (issue 10, docs/reliability.md): --force and files xlp did not write, the --out lock (a real second
process), the temp-file sweep, non-finite numbers in every config, Ctrl-C during start-up (real SIGINT to the real
console script), a read-only and a full file system (real tmpfs mounts in a private mount namespace), and a
metrics log damaged on disk. The kill sweep and the fuzz corpus are in test_reliability.py."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from xlp_cli import stages
from xlp_cli.artifacts import outdir
from xlp_cli.core.config import _coerce
from xlp_cli.core.errors import BadInput

TEXT = "".join(f"This is sentence number {i} , with a few more words .\n" for i in range(300))


def _prepare(tmp: Path, out: Path, *extra: str):
    src = tmp / "in.en.txt"
    if not src.exists():
        src.write_text(TEXT, encoding="utf-8")
    return run_cli("prepare", "--source", "text", "--lang", "en", src, "--out", out, *extra)


def _one_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    assert len(lines) == 1, text
    return lines[0]


# ---------------------------------------------------------------- --force and foreign files
def test_force_removes_only_what_xlp_wrote(tmp_path):
    out = tmp_path / "out"
    assert _prepare(tmp_path, out).exit_code == 0
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    (out / "mine").mkdir()
    (out / "mine" / "plot.png").write_bytes(b"x")
    r = _prepare(tmp_path, out, "--min-tokens", "3")
    assert r.exit_code == 2 and "different config" in _one_line(r.stderr)
    r = _prepare(tmp_path, out, "--min-tokens", "3", "--force")
    assert r.exit_code == 0, r.stderr
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine\n" and (out / "mine" / "plot.png").is_file()
    m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert m["config"]["min-tokens"] == 3
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.glob("*/*/*/part-*.parquet"))
    assert on_disk == sorted(m["outputs"]["shards"])  # nothing of the first run is left beside the new one


def test_folder_with_foreign_files_is_refused_unless_forced(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    r = _prepare(tmp_path, out)
    assert r.exit_code == 2
    assert "not written by xlp" in _one_line(r.stderr) and "notes.txt" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # not even a lock file was made
    r = _prepare(tmp_path, out, "--force")
    assert r.exit_code == 0, r.stderr
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine\n" and (out / "manifest.json").is_file()
    assert _prepare(tmp_path, out).exit_code == 0  # now an xlp folder: a rerun needs no --force


def test_force_into_another_stages_folder_removes_its_files_only(tmp_path):
    out = tmp_path / "f"
    outdir.claim(out, "bpe-learn", {"codes": 10}, force=False, owns=("codes", "vocab"))
    for name in ("codes", "vocab", "notes.txt"):
        (out / name).write_text("x\n", encoding="utf-8")
    with pytest.raises(BadInput, match="output of `xlp bpe-learn`"):
        outdir.claim(out, "prepare", {"a": 1}, force=False, owns=("train",))
    outdir.claim(out, "prepare", {"a": 1}, force=True, owns=("train",))
    assert sorted(p.name for p in out.iterdir()) == [".xlp-config.json", ".xlp.lock", "notes.txt"]
    outdir.release(out)


# ---------------------------------------------------------------- the lock
def test_a_second_writer_is_refused_at_once_naming_the_holder(tmp_path):
    """The lock is held by this test process (a real flock); a real second `xlp` process is refused."""
    out = tmp_path / "out"
    src = tmp_path / "in.en.txt"
    src.write_text(TEXT, encoding="utf-8")
    outdir.lock(out)
    try:
        cmd = [sys.executable, "-c", "from xlp_cli.cli.app import main; main()", "prepare", "--source", "text",
               "--lang", "en", str(src), "--out", str(out)]
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "XLP_QUIET": "1"},
                           timeout=300)
        assert p.returncode == 2, p.stderr
        assert f"another xlp process (PID {os.getpid()}) is writing to this folder" in _one_line(p.stderr)
        assert not (out / "manifest.json").exists()
    finally:
        outdir.release(out)
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "XLP_QUIET": "1"},
                       timeout=300)
    assert p.returncode == 0, p.stderr  # released: the same command goes through


def test_the_lock_is_taken_again_by_the_same_process_and_released_by_scope(tmp_path):
    @outdir.scoped
    def stage() -> None:
        outdir.lock(tmp_path / "a")
        outdir.lock(tmp_path / "a")  # re-entrant within a process (xlp run, nested stages)

    stage()
    assert str((tmp_path / "a").resolve()) not in outdir._held


def test_every_stage_that_claims_a_folder_declares_what_it_owns_and_releases_its_lock():
    """Each run function that claims an --out (`guard_out_dir`/`outdir.claim`) is `@outdir.scoped` and passes
    `owns=`: without it `--force` keeps the old run's files (UNMT resumed a stale `seed-1` with a new config)
    and the sweep takes them for the user's own files."""
    import ast

    pkg = REPO / "xlp_cli"
    found, bad = [], []
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(pkg.rglob("*.py"))
             if path.name != "outdir.py"}
    helpers: set[str] = set()  # a shared helper that claims the folder for its caller's `owns` (tasks/finetuning.start)
    for path, tree in trees.items():
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                     and c.func.attr in ("guard_out_dir", "claim")]
            if not calls or fn.name == "guard_out_dir":
                continue
            passes_owns = all(any(k.arg == "owns" for k in c.keywords) for c in calls)
            if "owns" in [a.arg for a in fn.args.args] and passes_owns and not fn.decorator_list:
                helpers.add(fn.name)
                continue
            where = f"{path.relative_to(REPO)}:{fn.name}"
            found.append(where)
            if not any(ast.unparse(d) == "outdir.scoped" for d in fn.decorator_list) or not passes_owns:
                bad.append(where)
    for path, tree in trees.items():  # every caller of such a helper is scoped and gives it what it owns
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                     and c.func.id in helpers]
            if calls:
                found.append(f"{path.relative_to(REPO)}:{fn.name}")
                if not any(ast.unparse(d) == "outdir.scoped" for d in fn.decorator_list) or \
                        not all(len(c.args) >= 2 or any(k.arg == "owns" for k in c.keywords) for c in calls):
                    bad.append(f"{path.relative_to(REPO)}:{fn.name}")
    assert len(found) >= 8, found  # prepare, bpe learn/apply, vocab-score, pretrain, the finetune tasks, evaluate
    assert not bad, bad


# ---------------------------------------------------------------- leftovers of a killed run
def test_sweep_removes_temp_files_and_restores_a_half_renamed_folder(tmp_path):
    out = tmp_path / "run"
    (out / "train" / "en").mkdir(parents=True)
    (out / "train" / "en" / ".part-00000.parquet.ab12.tmp").write_bytes(b"half")
    (out / ".manifest.json.x1.tmp").write_text("{", encoding="utf-8")
    (out / ".vocab_scores.parquet.zz.tmp").write_bytes(b"half")
    (out / "checkpoints" / ".last.tmp").mkdir(parents=True)
    (out / "checkpoints" / ".last.tmp" / "model.safetensors").write_bytes(b"half")
    (out / "checkpoints" / ".best.old").mkdir()  # killed between the two renames: `best` is missing
    (out / "checkpoints" / ".best.old" / "meta.json").write_text("{}", encoding="utf-8")
    (out / "bpe" / ".xlp-config.json").parent.mkdir()
    (out / "bpe" / ".xlp-config.json").write_text("{}", encoding="utf-8")  # a nested stage folder: its own
    (out / "bpe" / ".codes.q.tmp").write_text("x", encoding="utf-8")
    (out / "notes").mkdir()
    (out / "notes" / ".draft.tmp").write_text("mine", encoding="utf-8")  # not xlp's
    outdir.sweep(out, skip=["notes"])
    left = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert left == ["bpe/.codes.q.tmp", "bpe/.xlp-config.json", "checkpoints/best/meta.json", "notes/.draft.tmp"]


# ---------------------------------------------------------------- non-finite numbers, every stage
def _float_fields(cls) -> list[str]:
    hints = typing.get_type_hints(cls)
    return [f.name for f in dataclasses.fields(cls) if "float" in str(hints[f.name])]


def test_every_float_flag_of_every_config_refuses_nan_and_inf():
    classes = []
    for name, spec in stages.STAGES.items():
        cfg = stages.load(spec.config)
        classes += list(cfg.classes().items()) if hasattr(cfg, "classes") else [(name, cfg)]
    checked = 0
    for name, cls in classes:
        for field in _float_fields(cls):
            for bad in ("nan", "inf", "-inf"):
                with pytest.raises(BadInput, match="finite number"):
                    _coerce(field, bad, typing.get_type_hints(cls)[field], name)
                checked += 1
    assert checked >= 3 * 20  # lr, dropouts, fractions, alphas, thresholds ... of every stage


def test_lr_nan_is_one_line_exit_2(tmp_path):
    r = run_cli("pretrain", "--data", tmp_path, "--lr", "nan", "--out", tmp_path / "run")
    assert r.exit_code == 2 and "finite number" in _one_line(r.stderr)
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- usage mistakes through the console script
def test_a_usage_mistake_is_one_line_exit_2_through_the_console_script(tmp_path):
    """`--workers two`, an unknown flag, an unknown command: one line naming the flag (not Typer's usage box);
    `xlp` alone still prints the help."""
    script = Path(sys.executable).parent / "xlp"
    if not script.is_file():
        pytest.skip(f"no console script at {script} (run `make setup`)")
    # (a bad value is caught by the typed config, which names the flag and what it expected; a flag or command
    # that does not exist by the parser, which points to the command's --help)
    for args, says in ((["prepare", "--source", "text", "x.txt", "--workers", "two", "--out", "o"],
                        ("--workers", "expected an integer", "'two'")),
                       (["bpe", "learn", "--codez", "5"], ("--codez", "--help")),
                       (["bogus"], ("bogus", "--help"))):
        p = subprocess.run([str(script), *args], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert p.returncode == 2 and p.stdout == "", (args, p.stdout, p.stderr)
        line = _one_line(p.stderr)
        assert line.startswith("xlp: error: ") and all(w in line for w in says), line
    p = subprocess.run([str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 2 and "Usage: xlp" in p.stdout and "prepare" in p.stdout, p.stdout
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- Ctrl-C during start-up
def test_ctrl_c_during_imports_is_one_line(tmp_path):
    """SIGINT to the real console script at moments spread over xlp's start-up: from when the interpreter is up
    (`python -c pass`: before that, Python itself reports a Ctrl-C, docs/reliability.md) to when `xlp --version`
    has finished its imports."""
    script = Path(sys.executable).parent / "xlp"
    if not script.is_file():
        pytest.skip(f"no console script at {script} (run `make setup`)")

    def took(*cmd: str) -> float:
        t0 = time.monotonic()
        subprocess.run(cmd, capture_output=True, check=True)
        return time.monotonic() - t0

    bare = max(took(sys.executable, "-c", "pass") for _ in range(3))
    full = took(str(script), "--version")
    for k in range(5):
        delay = bare * 1.5 + k * max(full - bare * 1.5, 0.05) / 4
        for _ in range(4):  # a loaded machine can still be starting the interpreter itself at `delay`: later again
            p = subprocess.Popen([str(script), "vocab-score", "--data", str(tmp_path), "--out", str(tmp_path / "v")],
                                 stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=tmp_path)
            time.sleep(delay)
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=120)
            if "init_import_site" not in err:  # (Python's own start-up, before any xlp code: not covered)
                break
            delay += bare
        assert "Traceback" not in err, (delay, err)
        # 2: it had reached the bad --data already; -2: the signal came while Python was exiting after that
        assert p.returncode in (130, 2, -2), (delay, p.returncode, err)
        assert len([x for x in err.splitlines() if x.strip()]) == 1, err


# ---------------------------------------------------------------- read-only and full file systems
def _private_mount_ok() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True).returncode == 0


needs_mount = pytest.mark.skipif(not _private_mount_ok(), reason="needs permission to mount a tmpfs in a private "
                                 "mount namespace (unshare -m: root or CAP_SYS_ADMIN)")


def _in_namespace(script: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "XLP_QUIET": "1", "XLP": f"{sys.executable} -c 'from xlp_cli.cli.entry import main; main()'"}
    return subprocess.run(["unshare", "-m", "bash", "-c", "set -u\n" + script], cwd=REPO, capture_output=True,
                          text=True, env=env, timeout=timeout)


@needs_mount
def test_read_only_output_is_one_line_exit_2(tmp_path):
    src = tmp_path / "in.en.txt"
    src.write_text(TEXT, encoding="utf-8")
    ids = tmp_path / "ids"
    from pretrain_helpers import synthetic

    synthetic(ids)
    ro = tmp_path / "ro"
    ro.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    p = _in_namespace(f"""
mount -t tmpfs -o ro,size=1m tmpfs {ro}
eval $XLP prepare --source text --lang en {src} --out {ro}/prep 2> {logs}/prepare; echo $? > {logs}/prepare.rc
eval $XLP vocab-score --data {ids} --out {ro}/vocab 2> {logs}/vocab; echo $? > {logs}/vocab.rc
eval $XLP translate --model {tmp_path}/none --src-lang en --tgt-lang fr --output {ro}/x.txt 2> {logs}/translate
echo $? > {logs}/translate.rc
""")
    assert p.returncode == 0, p.stderr
    for name in ("prepare", "vocab", "translate"):
        err = (logs / name).read_text(encoding="utf-8")
        assert (logs / f"{name}.rc").read_text().strip() == "2", (name, err)
        assert "read-only file system" in _one_line(err) and str(ro) in err, (name, err)


@needs_mount
def test_disk_full_says_so_keeps_nothing_half_written_and_resumes(tmp_path):
    src = tmp_path / "in.en.txt"
    src.write_text("".join(f"Line {i} of a text that fills a small disk quickly , word {i * 7} .\n"
                           for i in range(6000)), encoding="utf-8")
    disk, logs = tmp_path / "disk", tmp_path / "logs"
    disk.mkdir()
    logs.mkdir()
    p = _in_namespace(f"""
mount -t tmpfs -o size=96k tmpfs {disk}
cmd="$XLP prepare --source text --lang en {src} --out {disk}/prep --chunk-size 500 --shard-size 1000"
eval $cmd 2> {logs}/full; echo $? > {logs}/full.rc
find {disk} -type f | sort > {logs}/files
find {disk} -name '*.parquet' -exec {sys.executable} -c 'import sys, pyarrow.parquet as pq; pq.read_metadata(sys.argv[1])' {{}} \\; 2> {logs}/parquet
mount -o remount,size=64m {disk}
eval $cmd 2> {logs}/again; echo $? > {logs}/again.rc
find {disk} -name '*.tmp' > {logs}/tmp_after
""")
    assert p.returncode == 0, p.stderr
    err = (logs / "full").read_text(encoding="utf-8")
    assert (logs / "full.rc").read_text().strip() == "1", err
    line = _one_line(err)
    assert "disk full" in line and str(disk) in line, line
    files = (logs / "files").read_text().split()
    assert files and not [f for f in files if f.endswith(".tmp")], files  # nothing half-written is left
    assert (logs / "parquet").read_text() == ""  # every Parquet file there is complete
    assert (logs / "again.rc").read_text().strip() == "0", (logs / "again").read_text()
    assert (logs / "tmp_after").read_text() == ""


@needs_mount
def test_disk_full_during_a_checkpoint(tmp_path):
    from pretrain_helpers import synthetic

    ids = synthetic(tmp_path / "ids")
    disk, logs = tmp_path / "disk", tmp_path / "logs"
    disk.mkdir()
    logs.mkdir()
    p = _in_namespace(f"""
mount -t tmpfs -o size=96k tmpfs {disk}
eval $XLP pretrain --data {ids} --out {disk}/run --preset tiny --max-steps 2 --warmup 1 --eval-every 1 \\
  --eval-batches 1 --batch-size 4 --accumulate 1 --bptt 16 --num-threads 1 2> {logs}/err; echo $? > {logs}/rc
find {disk} | sort > {logs}/files
""")
    assert p.returncode == 0, p.stderr
    err = (logs / "err").read_text(encoding="utf-8")
    assert (logs / "rc").read_text().strip() == "1", err
    line = [x for x in err.splitlines() if x.startswith("xlp: error")]
    assert line and "disk full" in line[0] and "checkpoints" in line[0], err
    files = (logs / "files").read_text().split()
    assert not [f for f in files if f.endswith(".tmp") or "/.best" in f or "/.last" in f], files


# ---------------------------------------------------------------- a metrics log damaged on disk
def test_resume_with_invalid_utf8_in_the_metrics_log(tmp_path):
    from pretrain_helpers import synthetic

    ids = synthetic(tmp_path / "ids")
    run = tmp_path / "run"
    tiny = ["--data", ids, "--out", run, "--preset", "tiny", "--eval-every", "2", "--eval-batches", "1",
            "--batch-size", "4", "--accumulate", "1", "--bptt", "16", "--num-threads", "1", "--log-every", "1",
            "--warmup", "1"]  # (shorter than the run: no warning line, train/warmup.py)
    assert run_cli("pretrain", *tiny, "--max-steps", "2").exit_code == 0
    with open(run / "metrics.jsonl", "ab") as f:
        f.write(b'{"event": "train", "step": 2, "loss": 1.0}\xff\xfe\n\x00\x9f garbage\n')
    r = run_cli("pretrain", *tiny, "--max-steps", "4")
    assert r.exit_code == 0, r.stderr
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()  # valid UTF-8 again
    assert [json.loads(x)["step"] for x in lines if '"train"' in x] == [1, 2, 3, 4]
