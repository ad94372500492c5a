"""`xlp pretrain` defaults for the machine in front of the user (issue 32): `--preset auto` (a run of minutes on a
CPU, the paper's model on a GPU), a warm-up that scales with the run, a --bptt that falls back to what the valid
data allows, and a refused run that does not claim its folder. Real CLI; the plain run on the README's data."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from pretrain_helpers import synthetic, write_ids

from xlp_cli.artifacts.manifest import read_manifest
from xlp_cli.bpe.dictionary import Dictionary
from xlp_cli.train.config import PAPER_RUN, PretrainConfig

FAST = ["--num-threads", "1", "--log-every", "1", "--batch-size", "4", "--bptt", "32", "--eval-batches", "1"]


@pytest.fixture(scope="module")
def ids(tmp_path_factory) -> Path:
    return synthetic(tmp_path_factory.mktemp("defaults") / "ids")


def records(run: Path, event: str) -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["event"] == event]


def ok(cli, *args):
    r = cli("pretrain", *map(str, args))
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r


def fails(cli, *args, match: str):
    r = cli("pretrain", *map(str, args))
    err = r.stderr.strip()
    assert r.exit_code == 2 and len(err.splitlines()) == 1 and match in err, (r.exit_code, r.stdout, r.stderr)


def test_auto_is_the_cpu_preset_on_a_cpu_and_the_papers_run_on_a_gpu() -> None:
    cfg = PretrainConfig(data=[Path("x")])
    cpu, notice = cfg.resolved("cpu")
    assert (cpu.preset, cpu.max_steps, cpu.warmup, cpu.lr, cpu.batch_size, cpu.accumulate, cpu.bptt) == \
        ("cpu", 500, 50, 1e-3, 32, 1, 64)
    assert notice.startswith("on cpu: --preset cpu, --max-steps 500, --warmup 50") and "--preset xlm15" in notice
    gpu, _ = cfg.resolved("cuda")
    assert gpu.preset == "xlm15" and {k: getattr(gpu, k) for k in PAPER_RUN} == PAPER_RUN and gpu.warmup == 16_000
    explicit, notice = PretrainConfig(data=[Path("x")], preset="tiny", max_steps=30, warmup=3, lr=0.01, bptt=16,
                                      batch_size=2, accumulate=1, eval_every=5).resolved("cpu")
    assert notice == "" and (explicit.preset, explicit.max_steps, explicit.warmup) == ("tiny", 30, 3)
    assert PretrainConfig(data=[Path("x")], max_steps=200_000).resolved("cpu")[0].warmup == 16_000  # the paper's cap
    # threads: 1 for the cpu preset on a CPU (faster for its small matrices), as asked otherwise
    assert (cpu.num_threads, gpu.num_threads, explicit.num_threads) == (1, 0, 0)
    assert PretrainConfig(data=[Path("x")], num_threads=2).resolved("cpu")[0].num_threads == 2


def test_a_recipe_sees_a_run_with_automatic_values_as_done(cli, ids, tmp_path) -> None:
    """The manifest records what the automatic values became; `xlp run` still knows the run is finished."""
    from xlp_cli.core.config import from_dict
    from xlp_cli.recipes.run import Node, is_done

    run = tmp_path / "run"
    ok(cli, "--data", ids, "--out", run, "--preset", "tiny", "--max-steps", 3, "--lr", 1e-3, *FAST)
    values = {"data": [str(ids)], "out": str(run), "preset": "tiny", "max-steps": 3, "lr": 1e-3, "num-threads": 1,
              "log-every": 1, "batch-size": 4, "bptt": 32, "eval-batches": 1}
    node = Node("pretrain.x", "pretrain", "x", values, "recipe.toml", cfg=from_dict(PretrainConfig, values))
    assert node.cfg.unresolved() == {"warmup", "accumulate", "eval-every"} and is_done(node)
    node.cfg = from_dict(PretrainConfig, {**values, "lr": 2e-3})
    assert not is_done(node)


def test_a_short_run_reaches_its_lr(cli, ids, tmp_path) -> None:
    """--max-steps 40 --lr 1e-3 without --warmup: the warm-up is 10% of the run, so the lr rises to --lr (with the
    paper's 16000 it peaked at 2.5e-06)."""
    run = tmp_path / "short"
    ok(cli, "--data", ids, "--out", run, "--preset", "tiny", "--max-steps", 40, "--lr", 1e-3, *FAST)
    assert read_manifest(run)["config"]["warmup"] == 4
    assert max(r["lr"] for r in records(run, "train")) >= 0.5 * 1e-3
    # a longer continuation keeps the warm-up its first steps had (it is part of the run's identity)
    r = ok(cli, "--data", ids, "--out", run, "--preset", "tiny", "--max-steps", 60, "--lr", 1e-3, *FAST, "--json")
    summary = json.loads(r.stdout)
    assert summary["resumed"] and summary["steps_this_run"] == 20
    assert read_manifest(run)["config"]["warmup"] == 4


def test_bptt_longer_than_the_valid_split_falls_back_with_one_line(cli, ids, tmp_path) -> None:
    run = tmp_path / "long"
    args = ["--data", ids, "--out", run, "--preset", "tiny", "--max-steps", 2, "--num-threads", 1, "--bptt", 1024,
            "--batch-size", 2, "--eval-batches", 1]
    r = ok(cli, *args)
    notices = [line for line in r.stderr.splitlines() if "--bptt 1024" in line]
    assert len(notices) == 1 and "using --bptt 256" in notices[0], r.stderr
    assert read_manifest(run)["config"]["bptt"] == 256 and records(run, "valid")[-1]["langs"].keys() == {"en", "fr"}
    ok(cli, *args)  # the same command again: the same fallback, the same config (it resumes, nothing refused)


def test_a_run_refused_before_its_first_step_does_not_claim_its_folder(cli, ids, tmp_path) -> None:
    run = tmp_path / "run"
    base = ["--out", run, "--preset", "tiny", "--max-steps", 2, *FAST]
    fails(cli, "--data", ids, *base, "--resume", match="no checkpoint to resume")
    small = synthetic(tmp_path / "small")
    (small / "dict.txt").write_text("".join(f"w{i} 5\n" for i in range(20)))  # ids outside this dictionary
    fails(cli, "--data", small, *base, match="outside the dictionary")
    ok(cli, "--data", ids, *base, "--lr", 3e-3)  # another config into the same --out: not "a different config"
    fails(cli, "--data", ids, *base, "--lr", 1e-3, match="different config")  # a run that trained keeps its folder


@pytest.mark.slow
@pytest.mark.integration
def test_plain_pretrain_on_the_readmes_capped_data_takes_minutes_and_learns(cli, tmp_path, shared_data) -> None:
    """The issue's bar: `xlp pretrain --data out/ids --out runs/x` on the README's capped data (gettext en,de,fr,zh,
    1,500 records, 8,000 BPE codes), nothing else, runs on a CPU in under 5 minutes and its loss falls."""
    for args in (["prepare", "--source", "gettext", "--lang", "en,de,fr,zh", "--mono-from-parallel",
                  "--max-records", "1500", "--out", tmp_path / "gettext"],
                 ["bpe", "learn", "--data", tmp_path / "gettext", "--out", tmp_path / "bpe", "--codes", "8000"],
                 ["bpe", "apply", "--data", tmp_path / "gettext", "--data", tmp_path / "bpe",
                  "--out", tmp_path / "ids"]):
        r = cli(*map(str, args))
        assert r.exit_code == 0, r.stderr
    run = tmp_path / "x"
    t0 = time.time()
    ok(cli, "--data", tmp_path / "ids", "--out", run)
    seconds = time.time() - t0
    assert seconds < 300, seconds
    config = read_manifest(run)["config"]
    assert (config["preset"], config["max-steps"], config["warmup"], config["bptt"]) == ("cpu", 500, 50, 64)
    losses = [row["loss"] for row in records(run, "train")]
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10 - 1.0, (losses[:10], losses[-10:])
    assert max(row["lr"] for row in records(run, "train")) >= 0.5 * config["lr"]
    valid = records(run, "valid")
    assert valid[-1]["loss"] < valid[0]["loss"] and set(valid[-1]["langs"]) == {"en", "de", "fr", "zh"}


def test_languages_without_enough_valid_data_are_named_in_one_line(cli, tmp_path) -> None:
    """The demo's small catalogs (sw: no valid split, ur: a few tokens) once gave a warning per language."""
    rng = np.random.default_rng(0)
    dico = Dictionary.from_counts([(f"w{i}", 1000 - i) for i in range(60)])
    def sents(n: int, length: int = 12) -> list[list[int]]:
        return [rng.integers(14, len(dico), size=length).tolist() for _ in range(n)]
    ids = write_ids(tmp_path / "ids", dico, {"train": {"en": sents(200), "fr": sents(200), "de": sents(200)},
                                             "valid": {"en": sents(40), "fr": sents(1, 5)}})
    run = tmp_path / "run"
    r = ok(cli, "--data", ids, "--out", run, "--preset", "tiny", "--max-steps", 2, *FAST)
    lines = [line for line in r.stderr.splitlines() if "not validated" in line]
    assert len(lines) == 1 and "2 languages of 3 not validated" in lines[0], r.stderr
    assert "de (no valid split)" in lines[0] and "fr (6 tokens)" in lines[0], lines
    assert records(run, "valid")[-1]["langs"].keys() == {"en"}
