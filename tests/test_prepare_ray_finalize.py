"""Finalizing in parallel on a real 2-CPU Ray cluster (issue 27): hash-partition actors and shard-writing tasks
write the bytes of the local engine (`--workers 1`: the in-order finalizer; `--workers 2`: local partitions) on
Common Voice with caps and Multi30k pairs with `--split-by sentences`; a shard-writing worker killed mid-run is
retried to the same output; a driver killed while shards are being written resumes to the same output, and
nothing half-written is visible."""

from __future__ import annotations

import subprocess

import pytest
from conftest import run_cli
from kill_helpers import kill_when, wait_until
from test_prepare_parallel_finalize import CV, M30K, cv_inputs, multi30k_inputs  # noqa: F401 (fixtures)
from test_prepare_ray import _ray_processes, _xlp, cv_texts, ray_address  # noqa: F401 (fixtures)
from test_prepare_splits import hashes, manifest

pytestmark = [pytest.mark.integration, pytest.mark.ray]


def _local(args: list[str], out, workers: int = 1):
    r = run_cli(*args, "--workers", str(workers), "--out", out)
    assert r.exit_code == 0, r.stderr
    return out


@pytest.mark.parametrize("corpus", ["cv", "m30k"])
def test_ray_finalizes_to_the_bytes_of_the_local_engine(ray_address, cv_inputs, multi30k_inputs, corpus,  # noqa: F811
                                                        tmp_path):
    args = [*CV, *cv_inputs] if corpus == "cv" else [*M30K, *multi30k_inputs]
    one, two = _local(args, tmp_path / "w1"), _local(args, tmp_path / "w2", workers=2)
    r = run_cli(*args, "--engine", "ray", "--out", tmp_path / "ray")  # this process's 2-CPU cluster
    assert r.exit_code == 0, r.stderr
    want = hashes(one)
    assert hashes(tmp_path / "ray") == want == hashes(two) and len(want) >= 10
    assert manifest(tmp_path / "ray") == manifest(one) == manifest(two)
    assert {rel.split("/")[1] for rel in want} == {"train", "valid", "test"}


def test_a_killed_shard_writer_is_retried_and_a_killed_driver_resumes(ray_address, cv_inputs,  # noqa: F811
                                                                      tmp_path):
    args = [*CV, *cv_inputs, "--shard-size", "200"]
    want = hashes(_local(args, tmp_path / "ref"))
    assert len(want) >= 40

    # a worker process dies while it writes a shard (its temporary file is there): Ray runs the task again, the
    # output is the same, and the dead task's temporary file is gone
    out = tmp_path / "writer-killed"
    proc = _xlp(*args, "--out", str(out), address=ray_address, stderr=subprocess.PIPE)
    wait_until(proc, lambda: list(out.glob("*/*/*/.part-*.tmp")), poll=0.001)
    for p in _ray_processes("ray::write_shard_task"):
        p.kill()
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert hashes(out) == want and not list(out.rglob("*.tmp"))

    # the driver dies while the tasks write the shards: what is there is complete, the rerun finishes it
    out = tmp_path / "driver-killed"
    proc = _xlp(*args, "--out", str(out), address=ray_address)
    kill_when(proc, lambda: len(list(out.glob("*/train/*/part-*.parquet"))) >= 3, timeout=180)
    assert not (out / "manifest.json").exists()
    left = hashes(out)
    assert left and all(want[rel] == sha for rel, sha in left.items())
    r = run_cli(*args, "--engine", "ray", "--out", out)
    assert r.exit_code == 0, r.stderr
    assert hashes(out) == want and manifest(out) == manifest(tmp_path / "ref")
    assert not list(out.rglob("*.tmp")) and not (out / ".work").exists()


def test_vocab_score_on_ray_reads_no_row_on_the_driver(ray_address, cv_texts, tmp_path, monkeypatch):  # noqa: F811
    """`xlp vocab-score --engine ray`: the tasks count the id shards; the driver lists them, reads one schema per
    folder and adds up per-shard count vectors, and reads no row (every row-reading call fails in this process,
    the driver's; the Ray workers are other processes)."""
    import pyarrow.parquet as pq

    _, prep = cv_texts
    want = tmp_path / "local"
    assert run_cli("vocab-score", "--data", prep, "--out", want, "--k", "20").exit_code == 0

    def no_rows(*args, **kwargs):
        raise AssertionError("the driver read rows of an id shard")

    for name in ("read_row_group", "read_row_groups", "iter_batches", "read"):
        monkeypatch.setattr(pq.ParquetFile, name, no_rows)
    monkeypatch.setattr(pq, "read_table", no_rows)
    out = tmp_path / "ray"
    r = run_cli("vocab-score", "--data", prep, "--out", out, "--k", "20", "--engine", "ray")
    assert r.exit_code == 0, r.stderr
    monkeypatch.undo()
    assert (out / "scores/vocab_scores.parquet").read_bytes() == (want / "scores/vocab_scores.parquet").read_bytes()
