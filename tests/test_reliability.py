"""`make test-reliability`: the kill sweep over every stage and the fuzz corpus of bad inputs (docs/reliability.md).

Every command runs as a real process forked by the zygote (tests/zygote.py); kills are real SIGKILLs of the process
group, interrupts real SIGINTs. Inputs are tiny slices of the shared Common Voice sentences, written under tmp.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import write_commonvoice
from reliability_corpus import BEFORE_ISSUE_30, CASES, check_case, n_commands
from reliability_helpers import alive, digest, ensure_clean, interrupt, sweep, temp_files
from zygote import Zygote

pytestmark = [pytest.mark.reliability, pytest.mark.integration]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("reliability")


@pytest.fixture(scope="module")
def z(work):
    zy = Zygote(work)
    yield zy
    zy.close()


@pytest.fixture(scope="module")
def texts(shared_data, work) -> list[Path]:
    return write_commonvoice(shared_data, work, (("en", 700), ("fr", 500)))


PRETRAIN = ["--preset", "tiny", "--d-model", "32", "--n-heads", "2", "--d-ff", "64", "--max-steps", "12",
            "--batch-size", "8", "--accumulate", "1", "--bptt", "32", "--eval-every", "3", "--eval-batches", "1",
            "--warmup", "2", "--num-threads", "1", "--seed", "3"]


ORDER = ["prepare", "bpe-learn", "bpe-apply", "vocab-score", "pretrain"]
STAGE_ARGS = SimpleNamespace(args={})  # filled by `stages` (the fuzz corpus reads it too)


@pytest.fixture(scope="module")
def stages(work, texts) -> dict[str, list[str]]:
    """Each stage's command (without --out); each reads the clean output of the one before."""
    w = str(work)
    STAGE_ARGS.args.update({
        "prepare": ["prepare", "--source", "text", "--lang", "en,fr", *map(str, texts), "--chunk-size", "50",
                    "--shard-size", "200", "--max-valid", "30", "--max-test", "30"],
        "bpe-learn": ["bpe", "learn", "--data", f"{w}/prepare-clean", "--codes", "200"],
        "bpe-apply": ["bpe", "apply", "--data", f"{w}/prepare-clean", "--data", f"{w}/bpe-learn-clean"],
        "vocab-score": ["vocab-score", "--data", f"{w}/bpe-apply-clean", "--k", "20"],
        "pretrain": ["pretrain", "--data", f"{w}/bpe-apply-clean", "--data", f"{w}/vocab-score-clean",
                     "--lang-encoding", "vle", "--vle-k", "20", *PRETRAIN],
    })
    return STAGE_ARGS.args


@pytest.mark.parametrize("stage", ORDER)
def test_kill_sweep(z, work, stages, stage):
    """>= 10 SIGKILLs spread over the run; each rerun gives the clean run's content; plus one Ctrl-C."""
    for up in ORDER[: ORDER.index(stage)]:
        ensure_clean(z, work, stages, up)
    res = sweep(z, stages[stage], work, stage)
    interrupt(z, stages[stage], work / f"{stage}-sigint", res["seconds"] / 2, digest(res["clean"]))


def test_kill_sweep_recipe(z, work, texts):
    """`xlp run` of a recipe (prepare -> bpe -> vocab-score -> pretrain), killed anywhere, resumes to the same."""
    recipe = work / "tiny.toml"
    small = []
    for t in texts:  # the first 250 lines of each input
        small.append(work / f"small.{t.name}")
        small[-1].write_text("".join(t.read_text(encoding="utf-8").splitlines(keepends=True)[:250]), encoding="utf-8")
    recipe.write_text(f"""
[prepare]
source = "text"
lang = ["en", "fr"]
inputs = [{", ".join(json.dumps(str(t)) for t in small)}]
chunk-size = 50
shard-size = 200
[bpe]
codes = 100
[vocab-score]
k = [20]
[[pretrain]]
name = "vle"
lang-encoding = "vle"
vle-k = 20
preset = "tiny"
d-model = 32
n-heads = 2
d-ff = 64
max-steps = 6
batch-size = 8
accumulate = 1
bptt = 32
eval-every = 3
eval-batches = 1
warmup = 2
num-threads = 1
""", encoding="utf-8")
    res = sweep(z, ["run", str(recipe)], work, "recipe")
    assert (res["clean"] / "pretrain" / "vle" / "checkpoints" / "best").is_dir()


def test_kill_sweep_finetune_unmt(z, work, stages, texts):
    """A fine-tuning stage: `xlp finetune --task unmt` (a seq2seq with tied embeddings; a checkpoint every step,
    back-translation, BLEU predictions), killed anywhere, resumes to the same weights, metrics and predictions."""
    ensure_clean(z, work, stages, "bpe-apply")
    evals = []
    for t, lang in zip(texts, ("en", "fr")):  # (line-aligned by count only: BLEU is not the point here)
        evals += ["--test-data", work / f"unmt-test.{lang}"]
        evals[-1].write_text("".join(t.read_text(encoding="utf-8").splitlines(keepends=True)[:6]), encoding="utf-8")
    args = ["finetune", "--task", "unmt", "--data", f"{work}/bpe-apply-clean", "--lang", "en,fr", "--max-steps", "3",
            "--batch-sentences", "2", "--max-len", "16", "--warmup", "0", "--valid-every", "1", "--log-every", "1",
            "--threads", "1", *map(str, evals)]
    res = sweep(z, args, work, "unmt")
    assert (res["clean"] / "seed-1" / "checkpoints" / "last").is_dir()
    interrupt(z, args, work / "unmt-sigint", res["seconds"] / 2, digest(res["clean"]))
    # --force with another config into a run killed before its manifest: starts over (no stale seed is reused),
    # and a file the user put there survives
    out = work / "unmt-force"
    shutil.copytree(res["clean"], out)
    (out / "manifest.json").unlink()
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    rc, text = z.run(*args, "--max-len", "12", "--force", "--out", out)
    assert rc == 0 and "finished earlier" not in text, text
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine\n"
    assert digest(out)["seed-1/metrics.jsonl"] != digest(res["clean"])["seed-1/metrics.jsonl"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fuzz_corpus(z, work, stages, case):
    """Each generated bad input: exit 2 with one line (or, with --on-error skip, a counted skip), and nothing
    incomplete left in --out."""
    check_case(z, work, case)


def test_corpus_is_large_enough():
    """The 60 hand-written cases of issues before 30, and at least 150 generated ones of issue 30's classes
    (a batch case counts each of its commands)."""
    assert len(CASES) >= 60, len(CASES)
    assert sum(c.size for c in CASES[BEFORE_ISSUE_30:]) >= 150, n_commands()


def test_a_second_run_into_a_running_folder_is_refused(z, work, stages):
    """Two `xlp prepare` into one folder (another config, then the same command): the second is refused at once
    with the first one's PID, and the first ends with exactly a clean run's output (no mixed folder)."""
    want = digest(ensure_clean(z, work, stages, "prepare"))
    for name, second in (("other-config", ["--min-tokens", "3"]), ("same-command", [])):
        for _attempt in range(3):  # (on a very busy machine the first run may end before the second starts)
            out = work / f"race-{name}"
            shutil.rmtree(out, ignore_errors=True)
            a, log_a = z.start(*stages["prepare"], "--out", out)
            while alive(a) and str(a) not in _read(out / ".xlp.lock"):
                time.sleep(0.001)
            rc_b, text_b = z.run(*stages["prepare"], *second, "--out", out)
            still = alive(a)
            assert z.wait(a) == 0, log_a.read_text()
            if still:
                break
        assert still, "the first run always ended before the second one started"
        assert rc_b == 2 and f"another xlp process (PID {a}) is writing to this folder" in text_b, text_b
        assert len(text_b.strip().splitlines()) == 1, text_b
        assert digest(out) == want


def _read(p: Path) -> str:
    try:
        return p.read_text(encoding="ascii")
    except OSError:
        return ""


LEFTOVERS = {  # what a SIGKILL at the wrong moment leaves in each stage's folder
    "prepare": [".manifest.json.k1.tmp", "mono/train/en/.part-00007.parquet.k2.tmp", ".work/.chunk-000000-000003.parquet.k3.tmp"],
    "bpe-learn": [".codes.k1.tmp", ".manifest.json.k2.tmp"],
    "bpe-apply": ["mono/train/en/.part-00000.parquet.k1.tmp", ".manifest.json.k2.tmp"],
    "vocab-score": ["scores/.vocab_scores.parquet.k1.tmp", ".vle_vocab.json.k2.tmp", ".manifest.json.k3.tmp"],
    "pretrain": ["checkpoints/.last.tmp/model.safetensors", "checkpoints/.best.tmp/meta.json",
                 ".metrics.jsonl.k1.tmp", ".manifest.json.k2.tmp"],
}


def test_a_rerun_sweeps_the_temp_files_a_kill_left(z, work, stages):
    for stage, names in LEFTOVERS.items():
        out = ensure_clean(z, work, stages, stage)
        want = digest(out)
        for rel in names:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(b"half-written")
        rc, text = z.run(*stages[stage], "--out", out)
        assert rc == 0, text
        assert not temp_files(out), (stage, temp_files(out))
        assert digest(out) == want, stage
