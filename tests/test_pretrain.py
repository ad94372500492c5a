"""`xlp pretrain` end to end through the real CLI: five encodings, exact resume, bad input, DDP, real text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import torch
from pretrain_helpers import real_text, synthetic, write_vocab

from xlp_cli.models.checkpoint import load_pretrained

REPO = Path(__file__).resolve().parent.parent
TINY = ["--preset", "tiny", "--bptt", "32", "--batch-size", "4", "--accumulate", "2", "--warmup", "5",
        "--lr", "1e-3", "--log-every", "1", "--seed", "3", "--num-threads", "1"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pretrain_inputs")
    ids = synthetic(root / "ids", pairs=True, row_group_size=100)
    vocab = write_vocab(root / "vocab", ids, {"en": {100: list(range(14, 60)), 3: [14, 15, 16]},
                                              "fr": {100: list(range(120, 170)), 3: [120, 121, 122]}})
    return ids, vocab


def train_losses(run: Path) -> list[tuple[int, float]]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows if r["event"] == "train"]


def last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1] if lines else ""


@pytest.mark.parametrize("enc,extra", [("none", []), ("additive", []), ("attaching", []), ("xlp", []),
                                       ("vle", ["--vle-style", "adding"]), ("vle", ["--vle-style", "padding", "--vle-k", "3"])])
def test_each_encoding_trains_and_loads(cli, inputs, tmp_path, enc, extra) -> None:
    ids, vocab = inputs
    run = tmp_path / "run"
    r = cli("pretrain", "--data", ids, "--data", vocab, "--out", run, "--lang-encoding", enc, *extra, *TINY,
            "--max-steps", "6", "--eval-every", "3", "--objective", "mlm+tlm", "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["steps"] == 6 and summary["best_step"] in (3, 6)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["stage"] == "pretrain" and manifest["last_step"] == 6
    assert manifest["upstream"][0]["stage"] == "bpe-apply" and manifest["dictionary_layout"]["first_word_id"] == 14
    jsonschema.validate(manifest, json.loads((REPO / "docs" / "manifest.schema.json").read_text()))
    assert (run / "dict.txt").read_bytes() == (ids / "dict.txt").read_bytes()
    valid = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"valid"' in x]
    assert {"en", "fr"} <= set(valid[-1]["langs"]) and 0 <= valid[-1]["acc"] <= 1
    model = load_pretrained(run, "best")
    assert model.config.lang_encoding == enc and model.config.langs == ["en", "fr"]
    x = torch.randint(14, 100, (2, 5))
    assert model(x, torch.tensor([0, 1])).shape[1] == 5 + model.prefix_len


def test_resume_is_exact(cli, inputs, tmp_path) -> None:
    ids, vocab = inputs
    common = ["--data", ids, "--data", vocab, "--lang-encoding", "vle", "--vle-style", "padding",
              "--objective", "mlm+tlm", "--eval-every", "4", "--dropout", "0.1", *TINY]
    full, part = tmp_path / "full", tmp_path / "part"
    assert cli("pretrain", *common, "--out", full, "--max-steps", "14").exit_code == 0
    assert cli("pretrain", *common, "--out", part, "--max-steps", "6").exit_code == 0  # "killed" at step 6
    r = cli("pretrain", *common, "--out", part, "--max-steps", "14", "--resume", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["resumed"] is True and json.loads(r.stdout)["steps_this_run"] == 8
    a, b = train_losses(full), train_losses(part)
    assert [s for s, _ in b] == list(range(1, 15))
    assert a == b  # bitwise the same loss at every step
    wa = load_pretrained(full, "last").state_dict()
    wb = load_pretrained(part, "last").state_dict()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    # a rerun of a finished run does no work
    r = cli("pretrain", *common, "--out", part, "--max-steps", "14", "--json")
    assert json.loads(r.stdout)["steps_this_run"] == 0


def test_bad_input_is_one_line(cli, inputs, tmp_path) -> None:
    ids, vocab = inputs
    base = ["--out", tmp_path / "run", *TINY, "--warmup", "1", "--max-steps", "2", "--eval-every", "2"]

    def fails(*args, match: str) -> None:
        r = cli("pretrain", *args)
        assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
        err = r.stderr.strip()
        assert len(err.splitlines()) == 1 and match in err, err
        assert "Traceback" not in err

    fails("--data", ids, "--lang", "en,de", *base, match="'de' has no train data")
    fails("--data", ids, "--lang-encoding", "vle", *base, match="vocab-score")
    fails("--data", ids, "--data", vocab, "--lang-encoding", "vle", "--vle-k", "7", *base, match="no K=7")
    fails("--data", tmp_path / "nowhere", *base, match="bpe apply")
    # a missing or a mismatched dictionary
    broken = tmp_path / "broken"
    synthetic(broken)
    (broken / "dict.txt").unlink()
    fails("--data", broken, *base, match="dict.txt")
    small = tmp_path / "small"
    synthetic(small)
    (small / "dict.txt").write_text("".join(f"w{i} 5\n" for i in range(20)))
    fails("--data", small, "--out", tmp_path / "run_small", *base[2:], match="outside the dictionary")
    # VLE vocabulary computed with another dictionary
    other_vocab = write_vocab(tmp_path / "ov", small, {"en": {100: [14]}, "fr": {100: [15]}})
    fails("--data", ids, "--data", other_vocab, "--lang-encoding", "vle", "--out", tmp_path / "r3", *base[2:],
          match="different dictionary")
    # corrupt checkpoint, and resume with an incompatible config
    run = tmp_path / "ok"
    assert cli("pretrain", "--data", ids, "--out", run, *base[2:]).exit_code == 0
    fails("--data", ids, "--out", run, *base[2:], "--lang-encoding", "additive", "--resume",
          match="different config")
    w = run / "checkpoints" / "last" / "model.safetensors"
    w.write_bytes(w.read_bytes()[:100])
    fails("--data", ids, "--out", run, *base[2:], "--max-steps", "4", "--resume", match="corrupt")
    fails("--data", ids, "--out", tmp_path / "fresh", *base[2:], "--resume", match="no checkpoint")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux RLIMIT_AS to make memory run out")
def test_out_of_memory_batch_suggests_what_fits(inputs, tmp_path) -> None:
    import resource

    ids, _ = inputs

    def limit() -> None:  # a real allocation failure: 3 GiB of address space for the whole process
        resource.setrlimit(resource.RLIMIT_AS, (3 * 1024 ** 3, 3 * 1024 ** 3))

    cmd = [sys.executable, "-m", "xlp_cli.cli", "pretrain", "--data", str(ids), "--out", str(tmp_path / "oom"),
           "--preset", "tiny", "--d-model", "256", "--n-heads", "4", "--bptt", "256", "--batch-size", "2048",
           "--accumulate", "1", "--max-steps", "2", "--warmup", "0", "--num-threads", "1"]
    p = subprocess.run(cmd, cwd=REPO, env={**os.environ, "XLP_QUIET": "1"}, preexec_fn=limit,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr[-1000:]
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and "--batch-size 2048 does not fit in CPU memory" in err, err
    fits = int(err.split("--batch-size ")[2].split()[0])
    assert 1 <= fits < 2048 and f"--accumulate {2048 // fits}" in err
    assert not (tmp_path / "oom" / "checkpoints").exists()  # nothing half-written


@pytest.mark.slow
def test_two_process_gloo_run(inputs, tmp_path) -> None:
    ids, _ = inputs
    run = tmp_path / "ddp"
    env = {**os.environ, "XLP_QUIET": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "xlp_cli.cli", "pretrain", "--data", str(ids), "--out", str(run), "--lang-encoding", "xlp",
           *TINY, "--max-steps", "6", "--eval-every", "3", "--objective", "mlm+tlm", "--json"]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    summaries = [json.loads(x) for x in p.stdout.replace("}\n{", "}\x00{").split("\x00") if x.strip()]
    assert {s["world_size"] for s in summaries} == {2} and all(s["steps"] == 6 for s in summaries)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["event"] == "train"]
    assert [r["step"] for r in train] == list(range(1, 7))
    assert train[0]["tokens"] == 2 * 2 * 4 * 32  # step 1 (MLM): 2 processes x 2 micro-batches x 4 windows x 32
    assert load_pretrained(run, "last").config.langs == ["en", "fr"]


@pytest.mark.slow
@pytest.mark.integration
def test_loss_falls_on_real_text(cli, shared_data, tmp_path) -> None:
    ids = real_text(tmp_path / "ids", shared_data, langs=("en", "fr", "de"))
    run = tmp_path / "run"
    r = cli("pretrain", "--data", ids, "--out", run, "--lang-encoding", "xlp", "--preset", "tiny",
            "--d-model", "64", "--d-ff", "128", "--bptt", "64", "--batch-size", "8", "--accumulate", "1",
            "--warmup", "10", "--lr", "3e-3", "--max-steps", "150", "--eval-every", "50", "--log-every", "1",
            "--dropout", "0.0", "--attention-dropout", "0.0", "--num-threads", "1", "--json")
    assert r.exit_code == 0, r.stderr
    losses = [l for _, l in train_losses(run)]
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < first - 1.0, (first, last)
    valid = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"valid"' in x]
    assert valid[-1]["loss"] < valid[0]["loss"]
    assert set(valid[-1]["langs"]) == {"en", "fr", "de"}
