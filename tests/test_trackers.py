"""`--tensorboard DIR` (and `--wandb`) of the training commands: the engine's metrics as TensorBoard event files
that tensorboard's own reader (EventAccumulator) reads back, equal to metrics.jsonl (train/trackers.py)."""

from __future__ import annotations

import json

import pytest
from pretrain_helpers import synthetic

from xlp_cli.train.trackers import scalars

TINY = ["--preset", "tiny", "--bptt", "32", "--batch-size", "4", "--accumulate", "1", "--warmup", "0", "--lr", "1e-3",
        "--log-every", "1", "--eval-every", "2", "--eval-batches", "1", "--num-threads", "1", "--device", "cpu"]


def _events(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return acc, {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_pretrain_writes_tensorboard_events_equal_to_metrics_jsonl(cli, tmp_path):
    pytest.importorskip("tensorboard")
    data = synthetic(tmp_path / "ids", n_sent=60)
    run, board = tmp_path / "run", tmp_path / "tb"
    r = cli("pretrain", "--data", data, "--lang", "en,fr", *TINY, "--max-steps", "4", "--out", run,
            "--tensorboard", board)
    assert r.exit_code == 0, r.output
    acc, tags = _events(board / "run")
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    train = [x for x in rows if x["event"] == "train"]
    assert [s for s, _ in tags["train/loss"]] == [x["step"] for x in train] == [1, 2, 3, 4]
    assert [v for _, v in tags["train/loss"]] == pytest.approx([x["loss"] for x in train], rel=1e-6)
    assert [v for _, v in tags["train/lr"]] == pytest.approx([x["lr"] for x in train], rel=1e-6)
    valid = [x for x in rows if x["event"] == "valid"]
    assert valid and any(t.startswith("valid/") for t in tags)
    assert {t for t in tags if t.startswith("valid/")} == {f"valid/{k}" for k, _ in scalars(valid[0])}

    # a resumed run purges what came after its checkpoint and continues the same series
    r = cli("pretrain", "--data", data, "--lang", "en,fr", *TINY, "--max-steps", "6", "--out", run,
            "--tensorboard", board)
    assert r.exit_code == 0, r.output
    _, tags = _events(board / "run")
    assert [s for s, _ in tags["train/loss"]] == [1, 2, 3, 4, 5, 6]


def test_tracking_flags_are_in_every_training_command_and_off_by_default(cli, tmp_path):
    from xlp_cli.tasks.common import FinetuneCommon
    from xlp_cli.train.config import PretrainConfig
    from xlp_cli.train.engine import Settings

    for config in (PretrainConfig, FinetuneCommon):
        fields = {f.name: f.default for f in config.__dataclass_fields__.values()}
        assert fields["tensorboard"] is None and fields["wandb"] == ""
    for command in (["pretrain"], ["finetune"]):
        text = cli(*command, "--help").stdout
        assert "--tensorboard" in text and "--wandb" in text
    cfg = FinetuneCommon(tensorboard=tmp_path / "tb", wandb="proj")
    s = Settings.from_config(cfg, max_steps=1, lr=1.0)
    assert (s.tensorboard, s.wandb) == (str(tmp_path / "tb"), "proj")


def test_wandb_offline_run_gets_the_metrics(cli, tmp_path, monkeypatch):
    """A real W&B run in offline mode (nothing leaves the machine): its run file holds the train/ series."""
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    data = synthetic(tmp_path / "ids", n_sent=20)
    r = cli("pretrain", "--data", data, "--lang", "en,fr", *TINY, "--max-steps", "2", "--out", tmp_path / "run",
            "--wandb", "xlp-test")
    assert r.exit_code == 0, r.output
    runs = list((tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1 and b"train/loss" in runs[0].read_bytes() and b"train/lr" in runs[0].read_bytes()


def test_scalars_flatten_nested_metrics():
    rec = {"event": "valid", "step": 3, "acc": 0.5, "dev": {"en": 1, "fr": float("nan")}, "name": "x", "ok": True}
    assert dict(scalars(rec, "valid/")) == {"valid/acc": 0.5, "valid/dev/en": 1.0}
