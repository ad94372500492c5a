"""`--engine ray` on a real 2-CPU local Ray cluster: byte-identical to the local engine, resume after a
kill, a killed Ray worker (a task is retried; a dedup partition's death fails with one line and leaves no
half-written shard), a run without --ray-address starting and stopping its own cluster, and
`xlp vocab-score --engine ray`, BPE apply as Ray tasks. The cluster is started once for the module and
shut down after it; runs in subprocesses join it with --ray-address."""

from __future__ import annotations

import contextlib
import gzip
import json
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from conftest import run_cli
from kill_helpers import kill_when, start_xlp, wait_until
from test_prepare_splits import hashes, make_multistream, manifest

pytestmark = [pytest.mark.integration, pytest.mark.ray]


@pytest.fixture(scope="module")
def ray_address():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def wiki_inputs(shared_data, tmp_path_factory):
    """A multistream dump (split by streams) and a single-stream UTF-16 dump (one split)."""
    folder = tmp_path_factory.mktemp("ms")
    _, dump, _ = make_multistream(shared_data, folder)
    bg = shared_data / "wikipedia_dumps" / "bgwiki-latest-pages-articles-shortened.xml.bz2"
    return [str(dump), str(bg)]


WIKI = ["prepare", "--source", "wikipedia", "--split-size", "30000", "--chunk-size", "300"]


def _local_ref(tmp_path_factory, inputs) -> Path:
    ref = tmp_path_factory.mktemp("ref") / "local"
    r = run_cli(*WIKI, *inputs, "--out", ref)
    assert r.exit_code == 0, r.stderr
    return ref


@pytest.fixture(scope="module")
def local_ref(tmp_path_factory, wiki_inputs):
    return _local_ref(tmp_path_factory, wiki_inputs)


def _xlp(*args: str, address: str, stderr=subprocess.DEVNULL) -> subprocess.Popen:
    return start_xlp(*args, "--engine", "ray", "--ray-address", address, stderr=stderr)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _ray_processes(title: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if cmd and cmd[0].startswith(title):
            found.append(p)
    return found


def test_ray_engine_is_byte_identical_to_the_local_engine(ray_address, wiki_inputs, local_ref, tmp_path):
    out = tmp_path / "ray"
    r = run_cli(*WIKI, *wiki_inputs, "--out", out, "--engine", "ray", "--json")  # uses this process's cluster
    assert r.exit_code == 0, r.stderr
    assert hashes(out) == hashes(local_ref) and len(hashes(out)) == 6
    assert manifest(out) == manifest(local_ref)  # all but the timings and how it ran
    m = json.loads((out / "manifest.json").read_text())
    assert m["run"]["engine"] == "ray" and m["run"]["splits"] > 4
    assert m["config"] == json.loads((local_ref / "manifest.json").read_text())["config"]
    r = run_cli(*WIKI, *wiki_inputs, "--out", out, "--engine", "local", "--json")  # same config: up to date
    assert r.exit_code == 0 and json.loads(r.stdout)["status"] == "up to date (nothing to do)", r.stderr


def test_ray_without_address_starts_a_local_cluster_and_shuts_it_down(ray_address, shared_data, tmp_path):
    src = sorted((shared_data / "commonvoice_sentences").glob("fr.*.txt.gz"))[0]
    text = tmp_path / "cv.fr.txt"
    with gzip.open(src, "rt", encoding="utf-8") as f:
        text.write_text("".join(next(f) for _ in range(3000)), encoding="utf-8")
    args = ["prepare", "--source", "text", "--lang", "fr", str(text), "--split-size", "20000", "--shard-size", "1000"]
    assert run_cli(*args, "--out", tmp_path / "local").exit_code == 0
    # no --ray-address: ray.init() starts a cluster of this machine's CPUs for the run
    proc = start_xlp(*args, "--out", tmp_path / "ray", "--engine", "ray", stderr=subprocess.PIPE)
    started: set[int] = set()
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            started |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
        time.sleep(0.05)
    assert proc.returncode == 0, proc.stderr.read()
    assert len(started) >= 2  # the cluster's own processes (gcs, raylet, workers) ran under this run
    deadline = time.time() + 20
    while (alive := [p for p in started if _alive(p)]):
        assert time.time() < deadline, f"processes of the run's Ray cluster still alive: {alive}"
        time.sleep(0.2)
    assert hashes(tmp_path / "ray") == hashes(tmp_path / "local") and len(hashes(tmp_path / "local")) >= 4
    assert manifest(tmp_path / "ray") == manifest(tmp_path / "local")


def test_killed_ray_run_resumes_to_the_same_output(ray_address, wiki_inputs, local_ref, tmp_path):
    out = tmp_path / "killed"
    proc = _xlp(*WIKI, *wiki_inputs, "--out", str(out), address=ray_address)
    kill_when(proc, lambda: len(list((out / ".work").glob("chunk-*.parquet"))) >= 6)  # the driver, mid-run
    assert not (out / "manifest.json").exists()
    r = run_cli(*WIKI, *wiki_inputs, "--out", out, "--engine", "ray", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "resumed and finished"
    assert hashes(out) == hashes(local_ref) and manifest(out) == manifest(local_ref)
    assert not (out / ".work").exists() and not list(out.rglob("*.tmp"))


def test_a_killed_ray_worker_is_retried_and_a_killed_dedup_partition_fails_in_one_line(
        ray_address, wiki_inputs, local_ref, tmp_path):
    # a worker process running a split task dies: Ray runs the task again, the output is the same
    out = tmp_path / "task-killed"
    proc = _xlp(*WIKI, *wiki_inputs, "--out", str(out), address=ray_address, stderr=subprocess.PIPE)
    wait_until(proc, lambda: _ray_processes("ray::prepare_split"), poll=0.005)[0].kill()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert hashes(out) == hashes(local_ref) and manifest(out) == manifest(local_ref)
    assert not list(out.rglob("*.tmp"))

    # a worker process holding a dedup partition dies: one line, exit 1, no half-written shard; rerun resumes
    out = tmp_path / "partition-killed"
    proc = _xlp(*WIKI, *wiki_inputs, "--out", str(out), address=ray_address, stderr=subprocess.PIPE)
    wait_until(proc, lambda: (out / ".work").is_dir() and _ray_processes("ray::DedupActor"), poll=0.005)[0].kill()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    lines = [line for line in err.splitlines() if line.startswith("xlp:")]
    assert len(lines) == 1 and lines[0].startswith("xlp: error: a Ray actor of xlp prepare died"), err
    assert "Traceback" not in err, err
    assert not list(out.rglob("*.tmp")) and not (out / "manifest.json").exists()
    for shard in out.glob("*/*/*/part-*.parquet"):  # the shards that are there are complete and final
        assert hashes(out)[shard.relative_to(out).as_posix()] == hashes(local_ref)[shard.relative_to(out).as_posix()]
    # (a rerun resumes from the kept chunks: test_killed_ray_run_resumes_to_the_same_output)


CV_BPE = ["--source", "text", "--lang", "en,de", "--bpe-codes", "300", "--shard-size", "500"]


@pytest.fixture(scope="module")
def cv_texts(shared_data, tmp_path_factory):
    """The first 1500 Common Voice sentences of en and de, and their local prepare with --bpe-codes (PREP,
    PREP-bpe, PREP-ids)."""
    folder = tmp_path_factory.mktemp("cv")
    paths = []
    for lang in ("en", "de"):
        src = sorted((shared_data / "commonvoice_sentences").glob(f"{lang}.*.txt.gz"))[0]
        p = folder / f"cv.{lang}.txt"
        with gzip.open(src, "rt", encoding="utf-8") as f:
            p.write_text("".join(next(f) for _ in range(1500)), encoding="utf-8")
        paths.append(p)
    r = run_cli("prepare", *CV_BPE, *paths, "--out", folder / "prep")
    assert r.exit_code == 0, r.stderr
    return paths, folder / "prep"


def _ids_manifest(ids: Path) -> dict:
    m = json.loads((ids / "manifest.json").read_text())
    for key in ("created", "config_hash"):  # (the config names --out and --data)
        m.pop(key)
    m["summary"].pop("seconds"), m["summary"].pop("out")
    m["config"].pop("out"), m["config"].pop("data")
    m.pop("upstream")  # (absolute paths of the prepare and learn folders)
    m["tokenizer"].pop("copied_from")
    return m


def test_bpe_apply_on_ray_writes_the_same_id_shards_as_the_local_engine(ray_address, cv_texts, tmp_path,
                                                                         monkeypatch):
    from xlp_cli.bpe import run as bpe_run

    def not_here(*args):
        raise AssertionError("an id shard was written by the driver, not by a Ray task")

    paths, local = cv_texts
    out = tmp_path / "prep"
    with monkeypatch.context() as patch:  # (in this process only: the Ray workers have their own)
        patch.setattr(bpe_run, "_apply_shard", not_here)
        r = run_cli("prepare", *CV_BPE, *paths, "--out", out, "--engine", "ray")  # this process's cluster
    assert r.exit_code == 0, r.stderr
    ids, ref = tmp_path / "prep-ids", local.parent / "prep-ids"
    assert hashes(out) == hashes(local)
    got, want = hashes(ids), hashes(ref)
    assert got == want and len(got) >= 4, (got, want)  # several id shards: several Ray tasks
    assert (ids / "dict.txt").read_bytes() == (ref / "dict.txt").read_bytes()
    assert _ids_manifest(ids) == _ids_manifest(ref)
    assert not list(ids.rglob("*.tmp"))
    # the state a kill during apply leaves (an id shard missing, no manifests of apply or of its end in
    # PREP's): the rerun's Ray task writes the missing one again, the same bytes, and keeps the others
    sorted(ids.glob("mono/train/en/part-*.parquet"))[0].unlink()
    (ids / "manifest.json").unlink()
    m = json.loads((out / "manifest.json").read_text())
    del m["outputs"]["ids"], m["outputs"]["bpe"]
    (out / "manifest.json").write_text(json.dumps(m))
    r = run_cli("prepare", *CV_BPE, *paths, "--out", out, "--engine", "ray")
    assert r.exit_code == 0, r.stderr
    assert hashes(ids) == want


def test_vocab_score_on_ray_counts_as_the_local_engine(ray_address, cv_texts, tmp_path):
    _, prep = cv_texts
    outs = {}
    for engine in ("local", "ray"):
        outs[engine] = tmp_path / f"vocab-{engine}"
        r = run_cli("vocab-score", "--data", prep, "--out", outs[engine], "--k", "20,50",
                    "--engine", engine)
        assert r.exit_code == 0, r.stderr
    for name in ("vle_vocab.json", "scores/vocab_scores.parquet"):
        assert (outs["ray"] / name).read_bytes() == (outs["local"] / name).read_bytes(), name
    m = {e: json.loads((outs[e] / "manifest.json").read_text()) for e in outs}
    del m["ray"]["config"]["out"], m["local"]["config"]["out"]
    assert m["ray"]["config"] == m["local"]["config"] and m["ray"]["counts"] == m["local"]["counts"]
    assert len(list((prep.parent / "prep-ids" / "mono" / "train" / "en").glob("part-*.parquet"))) >= 2  # several tasks


def test_split_by_sentences_on_ray_writes_what_the_local_engine_writes(ray_address, tmp_path):
    from test_prepare_split_by import write_three_way

    src = write_three_way(tmp_path / "src")
    common = ["prepare", "--source", "opus", *src, "--lang", "de,en,fr", "--valid-fraction", "0.1",
              "--test-fraction", "0.2", "--split-by", "sentences", "--mono-from-parallel"]
    for engine in ("local", "ray"):  # the plan (a dict per sentence) travels to the Ray tasks with the options
        r = run_cli(*common, "--engine", engine, "--out", tmp_path / engine)
        assert r.exit_code == 0, r.output
    got, want = hashes(tmp_path / "ray"), hashes(tmp_path / "local")
    assert got == want and any("/test/" in f"/{k}" for k in got), (got, want)
