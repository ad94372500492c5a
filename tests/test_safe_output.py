"""The one safe-output function (xlp_cli/artifacts/safe_output.py) through the real `xlp` executable: `xlp text`,
`xlp bpe apply INPUT OUTPUT` and `xlp translate --output` never replace a device or a FIFO (they write it in
place), never write over or into an input, refuse folders and kernel file systems with one line, and handle a
closed stdout (exit 2) and a reader that went away (exit 141)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import FIXTURES

from xlp_cli.artifacts import safe_output

XLP = str(Path(sys.executable).with_name("xlp"))
CODES = ["--codes", FIXTURES / "bpe" / "codes.ref", "--vocab", FIXTURES / "bpe" / "vocab.ref"]
TEXT = b"the lowest road is here\nand the end of it\n"
# every command that writes to a user-named file: (name, argv before INPUT OUTPUT, how OUTPUT is given)
WRITERS = {
    "text": (["text", "--lang", "en"], "positional"),
    "bpe-apply": (["bpe", "apply", *CODES], "positional"),
    "translate": (["translate", "--src-lang", "en", "--tgt-lang", "fr"], "--output"),
}


def xlp(*args, stdin: bytes = b"", **kw) -> subprocess.CompletedProcess:
    return subprocess.run([XLP, *map(str, args)], input=stdin, capture_output=True, **kw)


def argv(writer: str, src: Path, dst: Path | str, model: Path) -> list:
    head, how = WRITERS[writer]
    if how == "positional":
        return [*head, src, dst]
    return [*head, "--model", model, src, "--output", dst]


def one_error(res: subprocess.CompletedProcess, code: int = 2) -> str:
    err = res.stderr.decode().strip()
    assert res.returncode == code and len(err.splitlines()) == 1 and err.startswith("xlp: error: "), (res.returncode, err)
    assert "internal error" not in err and "Traceback" not in err
    return err


@pytest.fixture
def src(tmp_path) -> Path:
    p = tmp_path / "in.txt"
    p.write_bytes(TEXT)
    return p


def char_device(path: Path, major: int, minor: int) -> Path:
    """Our own node of a character device (never the real /dev/full), or a skip saying why we cannot."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(major, minor))
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot create a character device here (mknod needs root / CAP_MKNOD): {e}")
    return path


@pytest.mark.parametrize("writer", ["text", "bpe-apply"])
def test_a_full_device_is_written_in_place_and_fails_as_disk_full(tmp_path, src, writer):
    full = char_device(tmp_path / "full", 1, 7)  # = /dev/full: every write fails with ENOSPC
    res = xlp(*argv(writer, src, full, tmp_path))
    err = one_error(res, 1)
    assert "disk full" in err and str(full) in err
    assert stat.S_ISCHR(os.lstat(full).st_mode), "the device was replaced by a regular file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "in.txt"]  # no temp file beside it


@pytest.mark.parametrize("writer", ["text", "bpe-apply"])
def test_a_null_device_and_a_fifo_are_written_in_place(tmp_path, src, writer):
    null = char_device(tmp_path / "null", 1, 3)
    res = xlp(*argv(writer, src, null, tmp_path))
    assert res.returncode == 0, res.stderr
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    res = xlp(*argv(writer, src, fifo, tmp_path), timeout=60)
    reader.join(60)
    assert res.returncode == 0, res.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].count(b"\n") == 2, got
    reference = xlp(*argv(writer, src, "-", tmp_path)).stdout
    assert got[0] == reference  # the same bytes as on stdout


@pytest.mark.parametrize("writer", list(WRITERS))
def test_the_input_itself_or_a_hard_link_of_it_is_refused(tmp_path, src, writer):
    os.link(src, tmp_path / "link.txt")
    targets = (src, tmp_path / "link.txt", tmp_path / "." / "in.txt")
    for target in targets[1:2] if writer == "translate" else targets:  # (translate starts torch: ~5 s a run)
        err = one_error(xlp(*argv(writer, src, target, tmp_path / "no-model")))
        assert "input" in err.lower(), err
    assert src.read_bytes() == TEXT


@pytest.mark.parametrize("writer", list(WRITERS))
def test_folders_and_kernel_file_systems_are_refused_with_one_line(tmp_path, src, writer):
    (tmp_path / "d").mkdir()
    targets = ((tmp_path / "d", "names a folder"), ("/proc/xlp-output.txt", "proc file system"),
               ("/sys/xlp-output.txt", "sysfs file system"), ("/proc/self/status", "proc file system"))
    for target, says in targets[1:2] if writer == "translate" else targets:
        err = one_error(xlp(*argv(writer, src, target, tmp_path / "no-model")))
        assert says in err, err
    assert not os.path.exists("/proc/xlp-output.txt")


def test_translate_output_inside_the_model_folder_is_refused_before_loading(tmp_path, src):
    model = tmp_path / "model"
    model.mkdir()
    err = one_error(xlp(*argv("translate", src, model / "out.txt", model)))
    assert "inside the input folder" in err


@pytest.mark.parametrize("writer", ["text", "bpe-apply"])
def test_a_closed_stdout_is_exit_2_and_a_gone_reader_is_141(tmp_path, src, writer):
    res = subprocess.run([XLP, *map(str, argv(writer, src, "-", tmp_path))], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, pass_fds=(), close_fds=True,
                         preexec_fn=lambda: os.close(1))
    assert res.returncode == 2 and b"standard output is closed" in res.stderr, res.stderr
    big = tmp_path / "big.txt"
    big.write_bytes(TEXT * 200_000)  # ~8 MB: more than a pipe holds
    proc = subprocess.Popen([XLP, *map(str, argv(writer, big, "-", tmp_path))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()  # the reader goes away, as `| head -1` does
    assert proc.wait(60) == safe_output.EPIPE_EXIT
    assert proc.stderr.read() == b""  # quietly, as a Unix filter


def test_json_to_a_closed_stdout_is_refused_before_any_work(tmp_path, src):
    res = subprocess.run([XLP, "prepare", "--source", "text", "--lang", "en", str(src), "--out", str(tmp_path / "p"),
                          "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1))
    assert res.returncode == 2 and b"--json: standard output is closed" in res.stderr, res.stderr
    assert not (tmp_path / "p").exists()


def test_a_summary_to_a_gone_reader_is_141_and_the_work_is_kept(tmp_path, src):
    proc = subprocess.Popen([XLP, "prepare", "--source", "text", "--lang", "en", str(src), "--out", str(tmp_path / "p")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # (`xlp prepare ... | head -0`)
    assert proc.wait(120) == safe_output.EPIPE_EXIT
    assert (tmp_path / "p" / "manifest.json").is_file()


def test_a_descriptor_alias_is_written_in_place(tmp_path, src):
    """`/dev/fd/N` (as `/dev/stdout`) leads to the file the caller opened: written through that descriptor,
    never renamed over (its inode stays)."""
    out = tmp_path / "out.txt"
    with open(out, "wb") as f:
        inode = os.fstat(f.fileno()).st_ino
        res = subprocess.run([XLP, "text", "--lang", "en", str(src), f"/dev/fd/{f.fileno()}"], capture_output=True,
                             pass_fds=(f.fileno(),))
    assert res.returncode == 0, res.stderr
    assert os.stat(out).st_ino == inode and out.read_bytes() == xlp("text", "--lang", "en", src, "-").stdout


def test_a_regular_file_is_replaced_atomically_and_a_link_is_written_through(tmp_path, src):
    real = tmp_path / "real.txt"
    real.write_bytes(b"old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    assert xlp("text", "--lang", "en", src, link).returncode == 0
    assert link.is_symlink() and real.read_bytes().count(b"\n") == 2
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_the_rename_never_replaces_what_became_a_device_meanwhile(tmp_path):
    """The last check of `output_stream`: a FIFO put at the target while the output was being written stays."""
    target = tmp_path / "out.txt"
    with pytest.raises(Exception) as caught:
        with safe_output.output_stream(target) as w:
            w.write(b"data\n")
            os.mkfifo(target)
    assert "became a" in str(caught.value) and stat.S_ISFIFO(os.lstat(target).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_out_folders_on_kernel_file_systems_are_refused(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("Hello world .\n" * 5, encoding="utf-8")
    for out in ("/proc/xlp-out", "/sys/kernel/xlp-out"):
        err = one_error(xlp("prepare", "--source", "text", "--lang", "en", src, "--out", out))
        assert "kernel file system" in err or "file system" in err, err


def test_out_is_never_an_input_nor_inside_an_input_folder(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Hello world , a sentence .\n" * 5, encoding="utf-8")
    prep = ["prepare", "--source", "text", "--lang", "en", corpus, "--out"]
    assert "inside the input folder" in one_error(xlp(*prep, corpus / "prep"))
    assert "is the input" in one_error(xlp(*prep, corpus))
    assert sorted(p.name for p in corpus.iterdir()) == ["a.txt"]  # not even a lock file
    assert xlp(*prep, tmp_path / "prep").returncode == 0
    err = one_error(xlp("bpe", "learn", "--data", tmp_path / "prep", "--out", tmp_path / "prep", "--codes", "20",
                        "--force"))
    assert "is the --data folder" in err
    assert (tmp_path / "prep" / "manifest.json").is_file()  # --force cleared nothing


@pytest.fixture(scope="module")
def translation_run(tmp_path_factory, shared_data) -> Path:
    """A real translation run (one step on 20 real Multi30k pairs): enough for `xlp translate` to write."""
    import mt_fixture

    tmp = tmp_path_factory.mktemp("mt")
    ids = mt_fixture.build(tmp, shared_data, {"de-en": {"train": ("train", 0, 200, 20), "valid": ("train", 0, 200, 1),
                                                        "test": ("train", 0, 200, 1)}}, max_words=10)
    res = xlp("finetune", "--task", "translation", "--data", ids, "--out", tmp / "ft", "--preset", "tiny",
              "--lang-encoding", "xlp", "--max-steps", "1", "--warmup", "0", "--valid-every", "1", "--beam", "1",
              "--threads", "2")
    assert res.returncode == 0, res.stderr
    return tmp / "ft"


@pytest.mark.slow
@pytest.mark.integration
def test_translate_writes_devices_and_fifos_in_place(translation_run, tmp_path):
    src = tmp_path / "in.de"
    src.write_text("Ein Hund rennt .\nZwei Katzen .\n", encoding="utf-8")
    base = ["translate", "--model", translation_run, "--src-lang", "de", "--tgt-lang", "en", "--beam", "1",
            "--max-len-a", "0", "--max-len-b", "2", "--threads", "1", src, "--output"]
    full = char_device(tmp_path / "full", 1, 7)
    err = one_error(xlp(*base, full), 1)
    assert "disk full" in err and stat.S_ISCHR(os.lstat(full).st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    res = xlp(*base, fifo, timeout=120)
    reader.join(60)
    assert res.returncode == 0 and stat.S_ISFIFO(os.lstat(fifo).st_mode), res.stderr
    assert xlp(*base, tmp_path / "out.en").returncode == 0
    assert got and got[0] == (tmp_path / "out.en").read_bytes() and got[0].count(b"\n") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "full", "in.de", "out.en"]
