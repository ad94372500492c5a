"""Object storage (docs/storage.md): every stage reads and writes s3:// URIs, against a real S3 server.

The server is moto's (`moto[server]`, the dev extra) on 127.0.0.1 and a free port, started here; xlp talks to it
through pyarrow's S3 client and the standard AWS variables. Nothing of boto3 or pyarrow is mocked. The test set-up
puts its inputs on the server with pyarrow's own calls, never through the code under test.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from conftest import REPO
from kill_helpers import start_xlp, wait_until
from pretrain_helpers import synthetic, write_vocab

TINY = ["--preset", "tiny", "--bptt", "32", "--batch-size", "4", "--accumulate", "1", "--warmup", "2",
        "--lr", "1e-3", "--log-every", "1", "--seed", "3", "--num-threads", "1", "--eval-batches", "2"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def s3_endpoint():
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # (one log line per request otherwise)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop()


class Bucket:
    """A fresh bucket on the server, read and written with pyarrow's S3 client (not xlp's code)."""

    def __init__(self, endpoint: str):
        self.name = f"xlp-{uuid.uuid4().hex[:12]}"
        self.fs = pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", region="us-east-1",
                                    access_key="testing", secret_key="testing", allow_bucket_creation=True)
        self.fs.create_dir(self.name)

    def uri(self, key: str) -> str:
        return f"s3://{self.name}/{key}"

    def keys(self, prefix: str) -> dict[str, int]:
        sel = pafs.FileSelector(f"{self.name}/{prefix}", recursive=True, allow_not_found=True)
        base = len(self.name) + len(prefix) + 2
        return {i.path[base:]: i.size for i in self.fs.get_file_info(sel) if i.type == pafs.FileType.File}

    def read(self, key: str) -> bytes:
        with self.fs.open_input_stream(f"{self.name}/{key}") as f:
            return f.read()

    def write(self, key: str, data: bytes) -> None:
        with self.fs.open_output_stream(f"{self.name}/{key}") as f:
            f.write(data)

    def upload(self, local: Path, prefix: str) -> None:
        pafs.copy_files(str(local), f"{self.name}/{prefix}", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=self.fs)


@pytest.fixture
def bucket(s3_endpoint, monkeypatch, tmp_path) -> Bucket:
    for k, v in {"AWS_ENDPOINT_URL": f"http://{s3_endpoint}", "AWS_ACCESS_KEY_ID": "testing",
                 "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                 "XLP_STORAGE_CACHE": str(tmp_path / "cache"), "XLP_LEASE_SETTLE": "0.05"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return Bucket(s3_endpoint)


@pytest.fixture(scope="module")
def ids_folder(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("s3_inputs")
    ids = synthetic(root / "ids", row_group_size=100)
    vocab = write_vocab(root / "vocab", ids, {"en": {3: [14, 15, 16]}, "fr": {3: [120, 121, 122]}})
    return ids, vocab


def _losses(metrics: bytes | str) -> list[tuple[int, float]]:
    rows = [json.loads(x) for x in (metrics.decode() if isinstance(metrics, bytes) else metrics).splitlines()]
    return [(r["step"], r["loss"]) for r in rows if r["event"] == "train"]


def _lease_pid(bucket: Bucket) -> int | None:
    try:
        return json.loads(bucket.read("run/.xlp.lease.json"))["pid"]
    except (OSError, ValueError, KeyError):
        return None


def _no_temporary_keys(keys: dict[str, int]) -> bool:
    return not [k for k in keys if k.rsplit("/", 1)[-1].startswith(".") and k.endswith(".tmp")]


# ---------------------------------------------------------------- URIs
def test_uris_survive_a_path_field_and_map_to_staging_folders_and_back(tmp_path, monkeypatch) -> None:
    from xlp_cli.artifacts import uris

    monkeypatch.setenv("XLP_STORAGE_CACHE", str(tmp_path / "c"))
    assert uris.find(Path("s3://b1/runs/x")) == "s3://b1/runs/x"  # Path made it "s3:/b1/runs/x"
    assert uris.find("C:/data") is None and uris.find("runs/x") is None and uris.find("/abs/x") is None
    uri = uris.parse("gcs://b1/a/b/")
    assert str(uri) == "gs://b1/a/b" and str(uri.sibling("b-ids")) == "gs://b1/a/b-ids"
    staged = uris.staging_path(uri)
    assert staged == tmp_path / "c" / "gs" / "b1" / "a" / "b"
    assert uris.recorded(staged / "train") == "gs://b1/a/b/train" and uris.recorded("/elsewhere") == "/elsewhere"
    assert uris.local("gs://b1/a/b") == staged
    with pytest.raises(Exception, match="empty, '.' or '..'"):
        uris.parse("s3://b1/a/../b")


# ---------------------------------------------------------------- the whole chain on s3://
@pytest.mark.integration
def test_prepare_bpe_and_pretrain_read_and_write_s3(cli, bucket, shared_data, tmp_path) -> None:
    """`xlp prepare --source text s3://B/in.txt.gz --out s3://B/prep`, then bpe learn/apply, vocab-score and
    pretrain on s3:// URIs: each output is on the server, committed by its manifest, recording URIs, not the
    machine's staging folders; a rerun of a finished stage does no work."""
    src = sorted((shared_data / "commonvoice_sentences").glob("en.*.txt.gz"))
    if not src:
        pytest.skip("Common Voice en sentences not found")
    with gzip.open(src[0], "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(3000)]
    bucket.write("in.txt.gz", gzip.compress("".join(lines).encode()))

    r = cli("prepare", "--source", "text", "--lang", "en", bucket.uri("in.txt.gz"), "--out", bucket.uri("prep"),
            "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["out"] == bucket.uri("prep")
    prep = json.loads(bucket.read("prep/manifest.json"))
    assert prep["stage"] == "prepare" and prep["inputs"][0]["path"] == bucket.uri("in.txt.gz")
    assert set(prep["outputs"]["shards"]) <= set(bucket.keys("prep"))

    assert cli("bpe", "learn", "--data", bucket.uri("prep"), "--out", bucket.uri("bpe"), "--codes", "300").exit_code == 0
    r = cli("bpe", "apply", "--data", bucket.uri("prep"), "--data", bucket.uri("bpe"), "--out", bucket.uri("ids"))
    assert r.exit_code == 0, r.stderr
    ids = json.loads(bucket.read("ids/manifest.json"))
    assert ids["config"]["data"] == [bucket.uri("prep"), bucket.uri("bpe")]
    assert {u["path"] for u in ids["upstream"]} == {bucket.uri("prep"), bucket.uri("bpe")}
    assert set(ids["outputs"]["shards"]) <= set(bucket.keys("ids"))
    assert cli("vocab-score", "--data", bucket.uri("ids"), "--out", bucket.uri("vocab"), "--k", "10").exit_code == 0

    r = cli("pretrain", "--data", bucket.uri("ids"), "--out", bucket.uri("run"), *TINY, "--max-steps", "4",
            "--eval-every", "2", "--json")
    assert r.exit_code == 0, r.stderr
    keys = bucket.keys("run")
    assert {"manifest.json", "metrics.jsonl", "checkpoints/last/model.safetensors",
            "checkpoints/last/meta.json", "checkpoints/best/model.safetensors"} <= set(keys)
    assert _no_temporary_keys(keys) and ".xlp.lease.json" not in keys and ".xlp.lock" not in keys
    run = json.loads(bucket.read("run/manifest.json"))
    assert run["config"]["data"] == [bucket.uri("ids")] and run["config"]["out"] == bucket.uri("run")
    assert str(tmp_path / "cache") not in bucket.read("run/manifest.json").decode()

    # export follows the run's `upstream` link (a URI) to the ids folder for the tokenizer: from an empty cache
    os.environ["XLP_STORAGE_CACHE"] = str(tmp_path / "cache-export")  # (monkeypatched by the fixture)
    r = cli("export", "--format", "hf", bucket.uri("run"), bucket.uri("hf"))
    assert r.exit_code == 0, r.stderr
    assert {"config.json", "model.safetensors", "vocab.json", "tokenizer_config.json", "manifest.json"} <= set(bucket.keys("hf"))
    assert not (tmp_path / "cache-export" / "s3" / bucket.name / "ids" / "train").exists()  # only what it reads

    again = cli("bpe", "apply", "--data", bucket.uri("prep"), "--data", bucket.uri("bpe"), "--out", bucket.uri("ids"),
                "--json")
    assert again.exit_code == 0 and json.loads(bucket.read("ids/manifest.json")) == ids


# ---------------------------------------------------------------- resume after a kill
@pytest.mark.slow
def test_a_killed_pretrain_resumes_from_the_bucket_alone(cli, bucket, ids_folder, tmp_path, monkeypatch) -> None:
    """SIGKILL a pretrain writing s3://B/run once its first checkpoint is on the server (pushed while it runs),
    throw the machine's staging cache away, rerun: it resumes from the bucket's checkpoint (the dead run's lease
    is taken over at once) and trains exactly the steps an uninterrupted run trains."""
    ids, _ = ids_folder
    bucket.upload(ids, "ids")
    common = ["--data", bucket.uri("ids"), *TINY, "--eval-every", "2"]
    monkeypatch.setenv("XLP_SYNC_SECONDS", "0.3")
    proc = start_xlp("pretrain", *common, "--out", bucket.uri("run"), "--max-steps", "100000")
    try:
        wait_until(proc, lambda: "checkpoints/last/meta.json" in bucket.keys("run") and "manifest.json"
                   in bucket.keys("run"), timeout=180, poll=0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert ".xlp.lease.json" in bucket.keys("run")  # the dead run's lease is still there
    step = json.loads(bucket.read("run/checkpoints/last/meta.json"))["step"]

    monkeypatch.setenv("XLP_STORAGE_CACHE", str(tmp_path / "another-machine"))
    r = cli("pretrain", *common, "--out", bucket.uri("run"), "--max-steps", str(step + 3), "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["resumed"] is True and summary["steps_this_run"] == 3

    local = tmp_path / "local-run"
    assert cli("pretrain", "--data", ids, *TINY, "--eval-every", "2", "--out", local, "--max-steps",
               str(step + 3)).exit_code == 0
    assert _losses(bucket.read("run/metrics.jsonl")) == _losses((local / "metrics.jsonl").read_text())
    assert [s for s, _ in _losses(bucket.read("run/metrics.jsonl"))] == list(range(1, step + 4))


@pytest.mark.integration
def test_a_killed_prepare_resumes_from_the_bucket_to_the_same_shards(cli, bucket, shared_data, tmp_path,
                                                                     monkeypatch) -> None:
    """`xlp prepare ... --out s3://B/prep` killed once its finished chunks are pushed, rerun on "another machine"
    (an empty staging cache): it resumes and writes the shards an uninterrupted local run writes."""
    from conftest import write_commonvoice

    inputs = write_commonvoice(shared_data, tmp_path, (("en", 40000), ("fr", 30000)))  # long enough to kill mid-way
    for p in inputs:
        bucket.write(p.name, p.read_bytes())
    args = ["prepare", "--source", "text", "--lang", "en,fr", "--shard-size", "2000", "--chunk-size", "250"]
    ref = tmp_path / "ref"
    assert cli(*args, *map(str, inputs), "--out", ref).exit_code == 0
    remote_inputs = [bucket.uri(p.name) for p in inputs]
    monkeypatch.setenv("XLP_SYNC_SECONDS", "0.2")
    proc = start_xlp(*args, *remote_inputs, "--out", bucket.uri("prep"))
    try:
        wait_until(proc, lambda: len([k for k in bucket.keys("prep") if k.startswith(".work/")]) >= 4, timeout=180)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert "manifest.json" not in bucket.keys("prep")

    monkeypatch.setenv("XLP_STORAGE_CACHE", str(tmp_path / "another-machine"))
    r = cli(*args, *remote_inputs, "--out", bucket.uri("prep"), "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "resumed and finished"
    m, mref = json.loads(bucket.read("prep/manifest.json")), json.loads((ref / "manifest.json").read_text())
    assert m["outputs"]["shards"] == mref["outputs"]["shards"] and m["counts"] == mref["counts"]
    assert not [k for k in bucket.keys("prep") if k.startswith((".work/", ".xlp-push/"))]


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_staging_folder(cli, bucket, ids_folder) -> None:
    """Killed before anything was pushed (no periodic push): the rerun on the same machine finds the checkpoint
    in the staging folder and continues, as on a local disk."""
    ids, _ = ids_folder
    bucket.upload(ids, "ids")
    common = ["--data", bucket.uri("ids"), *TINY, "--eval-every", "2"]
    staging = Path(os.environ["XLP_STORAGE_CACHE"]) / "s3" / bucket.name / "run"
    proc = start_xlp("pretrain", *common, "--out", bucket.uri("run"), "--max-steps", "100000")
    try:
        wait_until(proc, lambda: (staging / "checkpoints" / "last" / "meta.json").is_file(), timeout=180, poll=0.05)
        # meanwhile, "another machine" (another staging cache) wants the same --out: refused by the lease
        cache = os.environ["XLP_STORAGE_CACHE"]
        os.environ["XLP_STORAGE_CACHE"] = cache + "-elsewhere"
        try:
            r = cli("pretrain", *common, "--out", bucket.uri("run"), "--max-steps", "100000")
        finally:
            os.environ["XLP_STORAGE_CACHE"] = cache
        assert r.exit_code == 2 and f"another xlp process (PID {proc.pid} on " in r.stderr, r.stderr
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert "manifest.json" not in bucket.keys("run")  # nothing committed: a reader sees no finished run
    step = json.loads((staging / "checkpoints" / "last" / "meta.json").read_text())["step"]
    r = cli("pretrain", *common, "--out", bucket.uri("run"), "--max-steps", str(step + 2), "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["resumed"] is True and json.loads(r.stdout)["steps_this_run"] == 2
    assert json.loads(bucket.read("run/manifest.json"))["last_step"] == step + 2


# ---------------------------------------------------------------- the lease
def test_the_lease_refuses_a_second_writer_and_expires(cli, bucket, ids_folder) -> None:
    ids, _ = ids_folder
    bucket.upload(ids, "ids")
    args = ["vocab-score", "--data", bucket.uri("ids"), "--out", bucket.uri("vocab"), "--k", "3"]
    held = {"owner": "someone", "host": "other-host", "pid": 4242, "expires": time.time() + 600}
    bucket.write("vocab/.xlp.lease.json", json.dumps(held).encode())
    r = cli(*args)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "PID 4242 on other-host" in r.stderr and bucket.uri("vocab") in r.stderr
    assert "manifest.json" not in bucket.keys("vocab")

    bucket.write("vocab/.xlp.lease.json", json.dumps({**held, "expires": time.time() - 1}).encode())
    r = cli(*args)
    assert r.exit_code == 0, r.stderr
    assert "manifest.json" in bucket.keys("vocab") and ".xlp.lease.json" not in bucket.keys("vocab")


# ---------------------------------------------------------------- atomicity: a push is all or nothing
def test_a_push_cut_before_its_journal_changes_nothing_and_one_cut_after_is_finished(bucket, tmp_path) -> None:
    """The network goes away (a real server; our store raises on one chosen request) while a push uploads: the
    bucket keeps the previous committed folder whole. Cut while the push is applied (after its journal): readers
    see no manifest, and the next writer finishes the push before anything else."""
    from xlp_cli.artifacts import remote_sync, uris
    from xlp_cli.artifacts.objectstore import Store

    folder = tmp_path / "out"

    def write(files: dict[str, str]) -> None:
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)

    write({"a/part-0.parquet": "a", "b/part-0.parquet": "b", "manifest.json": "{}"})
    store = Store.open(uris.parse(bucket.uri("out")))
    assert remote_sync.push(folder, store)[-1] == "manifest.json"  # the manifest goes last
    assert bucket.keys("out") == {"a/part-0.parquet": 1, "b/part-0.parquet": 1, "manifest.json": 3}

    class Cut(Store):
        def __init__(self, store: Store, method: str, when: str):
            super().__init__(store.uri, store.fs)
            self.method, self.when = method, when

        def write(self, rel, source, data=None):
            if self.method == "write" and rel.endswith(self.when):
                raise OSError("connection reset")
            return super().write(rel, source, data)

        def copy(self, src, dest):
            if self.method == "copy" and dest == self.when:
                raise OSError("connection reset")
            return super().copy(src, dest)

    write({"a/part-0.parquet": "a2", "b/part-0.parquet": "b2", "manifest.json": '{"v": 2}'})
    (folder / "c.txt").write_text("c")
    with pytest.raises(Exception):
        remote_sync.push(folder, Cut(store, "write", "b/part-0.parquet"))
    assert bucket.read("out/manifest.json") == b"{}\n" and bucket.read("out/a/part-0.parquet") == b"a"
    assert bucket.read("out/b/part-0.parquet") == b"b" and "c.txt" not in bucket.keys("out")

    with pytest.raises(Exception):
        remote_sync.push(folder, Cut(store, "copy", "b/part-0.parquet"))
    keys = bucket.keys("out")
    assert "manifest.json" not in keys and bucket.read("out/a/part-0.parquet") == b"a2"  # half applied, uncommitted
    assert [k for k in keys if k.startswith(".xlp-push/") and k.endswith(".json")]  # the journal
    remote_sync.recover(store)  # what the next writer does first
    assert bucket.read("out/b/part-0.parquet") == b"b2" and json.loads(bucket.read("out/manifest.json")) == {"v": 2}
    assert set(bucket.keys("out")) == {"a/part-0.parquet", "b/part-0.parquet", "c.txt", "manifest.json"}
    (folder / "c.txt").unlink()
    remote_sync.push(folder, store)
    assert set(bucket.keys("out")) == {"a/part-0.parquet", "b/part-0.parquet", "manifest.json"}


def test_files_above_the_copy_limit_go_straight_to_their_key(bucket, tmp_path, monkeypatch) -> None:
    """S3 copies at most 5 GiB on the server (here: 3 bytes): bigger files are written in the applied step; a
    recovery, which does not have them, leaves the manifest uncommitted rather than list a missing file."""
    from xlp_cli.artifacts import remote_sync, uris
    from xlp_cli.artifacts.objectstore import Store

    monkeypatch.setattr(remote_sync, "COPY_LIMIT", 3)
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "big.bin").write_bytes(b"0123456789")
    (folder / "s.txt").write_text("s")
    (folder / "manifest.json").write_text("{}")
    store = Store.open(uris.parse(bucket.uri("out")))
    remote_sync.push(folder, store)
    assert bucket.read("out/big.bin") == b"0123456789" and set(bucket.keys("out")) == {"big.bin", "s.txt",
                                                                                    "manifest.json"}
    bucket.write("out/.xlp-push/abc/manifest.json", b'{"v": 3}\n')
    bucket.write("out/.xlp-push/abc.json", json.dumps({"copy": ["manifest.json"], "direct": ["big.bin"],
                                                        "delete": []}).encode())
    remote_sync.recover(store)
    assert set(bucket.keys("out")) == {"big.bin", "s.txt"}  # uncommitted, the journal done with


def test_an_input_is_checked_against_its_manifest(cli, bucket, ids_folder, tmp_path) -> None:
    ids, _ = ids_folder
    bucket.upload(ids, "ids")
    out = tmp_path / "vocab"
    shard = "train/en/part-00000.parquet"
    data = bucket.read(f"ids/{shard}")
    bucket.write(f"ids/{shard}", data[:-8] + b"XXXXXXXX")  # same size, other bytes
    r = cli("vocab-score", "--data", bucket.uri("ids"), "--out", out)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert bucket.uri(f"ids/{shard}") in r.stderr and "sha256" in r.stderr
    bucket.write(f"ids/{shard}", data)
    assert cli("vocab-score", "--data", bucket.uri("ids"), "--out", out).exit_code == 0


def test_a_folder_without_its_manifest_is_not_read(cli, bucket, ids_folder, tmp_path) -> None:
    ids, _ = ids_folder
    bucket.upload(ids, "ids")
    bucket.fs.delete_file(f"{bucket.name}/ids/manifest.json")
    r = cli("vocab-score", "--data", bucket.uri("ids"), "--out", tmp_path / "v")
    assert r.exit_code == 2 and r.stderr.startswith(f"xlp: error: {bucket.uri('ids')}") and "manifest" in r.stderr


# ---------------------------------------------------------------- bad input: one line, exit 2
@pytest.mark.parametrize("data,expect", [
    ("s3://no-such-bucket-xlp/ids", "bucket 'no-such-bucket-xlp' does not exist"),
    ("s3://", "no valid bucket name"),
    ("ftp://host/ids", "unsupported storage scheme 'ftp://'"),
    ("s3://{bucket}/nothing-here", "no such object or folder"),
])
def test_bad_uris_are_one_line(cli, bucket, tmp_path, data, expect) -> None:
    r = cli("vocab-score", "--data", data.format(bucket=bucket.name), "--out", tmp_path / "v")
    assert r.exit_code == 2, r.stderr
    assert r.stderr.count("\n") == 1 and expect in r.stderr and "Traceback" not in r.stderr


def test_wrong_or_no_credentials_and_no_server_are_one_line(cli, bucket, tmp_path, monkeypatch) -> None:
    """Against a server that checks credentials (moto with INITIAL_NO_AUTH_ACTION_COUNT=0, in a process of its
    own), unknown keys and no keys at all are one line naming the URI and the credentials; a port with no server
    is one line too."""
    port = _free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not _listening(port):
            assert time.time() < deadline and server.poll() is None, "moto_server did not start"
            time.sleep(0.1)
        base = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        base.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", HOME=str(tmp_path), AWS_EC2_METADATA_DISABLED="true")
        for creds in ({"AWS_ACCESS_KEY_ID": "unknown", "AWS_SECRET_ACCESS_KEY": "wrong"}, {}):
            res = subprocess.run([sys.executable, "-m", "xlp_cli", "vocab-score", "--data", "s3://some-bucket/ids",
                                  "--out", str(tmp_path / "v")], capture_output=True, text=True, cwd=REPO,
                                 env={**base, **creds})
            assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
            assert res.stderr.startswith("xlp: error: s3://some-bucket/ids: ") and "credentials" in res.stderr
    finally:
        server.kill()
        server.wait()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    r = cli("vocab-score", "--data", bucket.uri("ids"), "--out", tmp_path / "v")
    assert r.exit_code == 2 and "cannot reach the store" in r.stderr and r.stderr.count("\n") == 1


def test_hf_without_huggingface_hub_names_the_package(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # (as if not installed)
    r = cli("vocab-score", "--data", "hf://datasets/someone/ids", "--out", tmp_path / "v")
    assert r.exit_code == 2 and "pip install huggingface_hub" in r.stderr and r.stderr.count("\n") == 1


# ---------------------------------------------------------------- start-up cost
def test_a_command_without_uris_loads_no_object_store_code(tmp_path) -> None:
    code = ("import sys; from xlp_cli.cli.entry import main; sys.argv = ['xlp'] + sys.argv[1:]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('xlp_cli.artifacts.objectstore', "
            "'xlp_cli.artifacts.staging', 'xlp_cli.artifacts.lease', 'boto', 'huggingface_hub'))), file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code, "vocab-score", "--data", str(tmp_path / "none"), "--out",
                          str(tmp_path / "v")], capture_output=True, text=True, cwd=REPO)
    assert "no such folder" in res.stderr and res.stderr.strip().splitlines()[-1] == "[]", res.stderr


# ---------------------------------------------------------------- torchrun: one lease, one pusher
@pytest.mark.slow
def test_torchrun_on_one_node_writes_s3_through_rank_0(bucket, ids_folder) -> None:
    """`torchrun --nproc-per-node 2 ... pretrain --out s3://`: rank 0 holds the lease and pushes, rank 1 shares
    its staging folder (a second lease would refuse it); the bucket gets one committed run of world size 2."""
    ids, _ = ids_folder
    bucket.upload(ids, "ids")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m",
           "xlp_cli.cli", "pretrain", "--data", bucket.uri("ids"), "--out", bucket.uri("run"), *TINY,
           "--data-slots", "2", "--max-steps", "2", "--eval-every", "2"]
    res = subprocess.run(cmd, cwd=REPO, env={**os.environ, "XLP_QUIET": "1", "OMP_NUM_THREADS": "1"},
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(x) for x in bucket.read("run/metrics.jsonl").decode().splitlines() if '"train"' in x]
    assert [r["world_size"] for r in rows] == [2, 2]
    assert json.loads(bucket.read("run/manifest.json"))["last_step"] == 2
    assert ".xlp.lease.json" not in bucket.keys("run")


# ---------------------------------------------------------------- recipes
@pytest.mark.slow
def test_a_recipe_runs_in_a_bucket_and_skips_its_finished_stages(cli, bucket, tmp_path) -> None:
    """`xlp run` with `out = "s3://..."`: every stage writes the bucket; a rerun reads the manifests there and skips
    every stage (a rerun on another machine: an empty staging cache)."""
    words = "the a dog cat runs sleeps on red blue house tree small big under over near".split()
    lines = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(4 + i % 5)) for i in range(1500)]
    bucket.write("in.txt", "\n".join(lines).encode())
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'''[recipe]
out = "{bucket.uri('recipe')}"
[prepare]
source = "text"
lang = ["en"]
inputs = ["{bucket.uri('in.txt')}"]
[bpe]
codes = 50
[vocab-score]
k = [5]
[[pretrain]]
name = "tiny"
lang-encoding = "additive"
{chr(10).join(f'{k} = {v}' for k, v in (("preset", '"tiny"'), ("max-steps", 2), ("batch-size", 4), ("bptt", 32),
                                         ("warmup", 1), ("eval-batches", 1), ("num-threads", 1)))}
''', encoding="utf-8")
    r = cli("run", recipe, "--out", bucket.uri("recipe"), "--jobs", "2", "--json")  # (--out: the same root)
    assert r.exit_code == 0, r.stderr
    assert [s["status"] for s in json.loads(r.stdout)["stages"]] == ["ran"] * 5
    assert set(bucket.keys("recipe")) == {k for k in bucket.keys("recipe") if k.split("/")[0] in (
        "prepare", "bpe", "ids", "vocab", "pretrain")}  # every stage in its folder, nothing of `xlp run` itself
    assert json.loads(bucket.read("recipe/pretrain/tiny/manifest.json"))["last_step"] == 2
    os.environ["XLP_STORAGE_CACHE"] = str(tmp_path / "other-machine")  # (monkeypatched by the fixture)
    r = cli("run", recipe, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert [s["status"] for s in summary["stages"]] == ["skipped (done)"] * 5
    assert summary["stages"][0]["out"] == bucket.uri("recipe/prepare")


# ---------------------------------------------------------------- kill at any moment
@pytest.mark.reliability
def test_kills_at_random_moments_never_leave_a_mixed_checkpoint_in_the_bucket(cli, bucket, ids_folder, tmp_path,
                                                                               monkeypatch) -> None:
    """Pushes every 50 ms, SIGKILL at random moments (in a push, between pushes, at start-up): after each kill the
    bucket's `checkpoints/last` is whole (its files match the sha256 in its meta.json, once a push recovered), and
    the run finally resumes from the bucket alone."""
    import hashlib
    import random

    from xlp_cli.artifacts import remote_sync, uris
    from xlp_cli.artifacts.objectstore import Store

    ids, _ = ids_folder
    bucket.upload(ids, "ids")
    common = ["--data", bucket.uri("ids"), *TINY, "--eval-every", "1"]
    monkeypatch.setenv("XLP_SYNC_SECONDS", "0.05")
    rng = random.Random(7)
    for attempt in range(4):
        monkeypatch.setenv("XLP_STORAGE_CACHE", str(tmp_path / f"machine-{attempt}"))
        proc = start_xlp("pretrain", *common, "--out", bucket.uri("run"), "--max-steps", "100000")
        try:  # once this run trains and pushes (its lease, then a checkpoint of its own), at a random moment
            wait_until(proc, lambda: _lease_pid(bucket) == proc.pid, timeout=180, poll=0.05)
            wait_until(proc, lambda: "checkpoints/last/meta.json" in bucket.keys("run"), timeout=180, poll=0.05)
            time.sleep(rng.uniform(0.0, 1.5))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        remote_sync.recover(Store.open(uris.parse(bucket.uri("run"))))  # what the next writer does first
        if "checkpoints/last/meta.json" in bucket.keys("run"):
            meta = json.loads(bucket.read("run/checkpoints/last/meta.json"))
            for name, sha in meta["sha256"].items():
                assert hashlib.sha256(bucket.read(f"run/checkpoints/last/{name}")).hexdigest() == sha, (attempt, name)
    monkeypatch.setenv("XLP_STORAGE_CACHE", str(tmp_path / "last-machine"))
    step = json.loads(bucket.read("run/checkpoints/last/meta.json"))["step"]
    r = cli("pretrain", *common, "--out", bucket.uri("run"), "--max-steps", str(step + 1), "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["resumed"] is True and json.loads(r.stdout)["steps_this_run"] == 1
