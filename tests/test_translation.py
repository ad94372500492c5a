"""Translation end to end on real data: `xlp finetune --task translation`, `xlp translate`, `xlp evaluate
--task translation`, on a real 200-pair Multi30k slice (Moses-tokenized, XLM's fastBPE codes)."""

from __future__ import annotations

import json
from pathlib import Path

import mt_fixture
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import run_cli

pytestmark = [pytest.mark.integration]

# a tiny model that can memorise 200 short pairs in a few hundred steps
OVERFIT = ["--preset", "tiny", "--lang-encoding", "xlp", "--max-steps", "170", "--warmup", "30", "--lr", "5e-3",
           "--dropout", "0", "--weight-decay", "0", "--label-smoothing", "0.1", "--valid-every", "85",
           "--log-every", "50", "--beam", "1", "--threads", "2"]


@pytest.fixture(scope="module")
def slice200(tmp_path_factory, shared_data):
    tmp = tmp_path_factory.mktemp("mt200")
    split = ("train", 0, 1000, 200)  # the first 200 Multi30k train pairs with at most 10 tokens a side
    valid = ("train", 0, 1000, 30)  # a subset, to keep validation cheap
    ids = mt_fixture.build(tmp, shared_data, {"de-en": {"train": split, "valid": valid, "test": split}}, max_words=10)
    return ids


@pytest.fixture(scope="module")
def overfit(slice200, tmp_path_factory):
    out = tmp_path_factory.mktemp("ft") / "ft"
    r = run_cli("finetune", "--task", "translation", "--data", slice200, "--out", out, *OVERFIT)
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.slow
def test_tiny_model_overfits_200_real_pairs_to_bleu_above_90(overfit):
    res = json.loads((overfit / "seed-1" / "results.json").read_text())
    assert res["bleu"]["test"]["de-en"]["bleu"] > 90, res
    assert res["bleu"]["test"]["de-en"]["tok_bleu"] > 90, res
    m = json.loads((overfit / "manifest.json").read_text())
    assert m["stage"] == "finetune" and m["task"] == "translation" and m["directions"] == ["de-en"]
    rows = [json.loads(l) for l in (overfit / "seed-1" / "predictions" / "test.de-en.jsonl").read_text().splitlines()]
    assert len(rows) == 200 and all("@@" not in r["hyp"] for r in rows)


@pytest.mark.slow
def test_rerun_skips_and_changed_config_is_refused(overfit, slice200):
    before = (overfit / "results.json").read_text()
    r = run_cli("finetune", "--task", "translation", "--data", slice200, "--out", overfit, *OVERFIT)
    assert r.exit_code == 0, r.output
    assert json.loads((overfit / "results.json").read_text())["seeds"] == json.loads(before)["seeds"]
    r = run_cli("finetune", "--task", "translation", "--data", slice200, "--out", overfit, *OVERFIT, "--label-smoothing", "0.2")
    assert r.exit_code == 2 and "different config" in r.output


@pytest.mark.slow
def test_translate_raw_text_file_and_stdin(overfit, slice200, tmp_path):
    prep = pq.read_table(slice200.parent / "prep" / "test" / "de-en" / "part-00000.parquet").to_pydict()
    de, en = prep["raw1"][:3], prep["raw2"][:3]
    src = tmp_path / "in.de"
    src.write_text("\n".join(de) + "\n", encoding="utf-8")
    out = tmp_path / "out.en"
    r = run_cli("translate", src, "--model", overfit, "--src-lang", "de", "--tgt-lang", "en", "--output", out)
    assert r.exit_code == 0, r.output
    hyps = out.read_text(encoding="utf-8").splitlines()
    import sacrebleu

    assert len(hyps) == 3 and sacrebleu.corpus_bleu(hyps, [en]).score > 80, (hyps, en)
    r = run_cli("translate", "--model", overfit / "seed-1", "--src-lang", "de", "--greedy", input=de[0] + "\n")
    assert r.exit_code == 0 and r.stdout.strip() == hyps[0]
    r = run_cli("translate", "--model", overfit, "--src-lang", "de", "--format", "jsonl", input=de[1] + "\n")
    assert json.loads(r.stdout.splitlines()[0])["translation"] == hyps[1]


@pytest.mark.slow
def test_beam_one_equals_greedy_and_length_penalty_lengthens(overfit, slice200):
    from xlp_cli.models.search import beam_search, greedy
    from xlp_cli.models.seq2seq import targets
    from xlp_cli.tasks.translation.data import collate, read_pairs
    from xlp_cli.tasks.translation.finetune import load_translation_model

    model = load_translation_model(overfit / "seed-1")
    pairs = read_pairs(slice200, "test")["de-en"].take(40)
    src = targets(collate(pairs.src))
    sl, tl = torch.zeros(len(pairs), dtype=torch.long), torch.ones(len(pairs), dtype=torch.long)
    # half-trained behaviour is where lengths differ: perturb the memorised model a little
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.decoder.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    g = [h.tokens for h in greedy(model, src, sl, tl)]
    b1 = [h[0].tokens for h in beam_search(model, src, sl, tl, beam=1)]
    assert g == b1
    lens = {}
    for alpha in (0.0, 1.2, 4.0):
        hyps = beam_search(model, src, sl, tl, beam=5, length_penalty=alpha)
        lens[alpha] = sum(len(h[0].tokens) for h in hyps)
        for h in hyps:
            assert abs(h[0].score - h[0].logprob / (len(h[0].tokens) + 1) ** alpha) < 1e-4
    assert lens[0.0] <= lens[1.2] <= lens[4.0], lens


@pytest.mark.slow
def test_evaluate_writes_table_with_signature(overfit, tmp_path):
    out = tmp_path / "eval"
    r = run_cli("evaluate", "--task", "translation", "--data", overfit, "--data", overfit, "--name", "xlp,xlp-again",
                "--out", out, "--json")
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert res["supervised"] == ["de-en"] and res["zero_shot"] == []
    assert res["runs"]["xlp"]["bleu"]["de-en"]["mean"] > 90
    assert any(s.startswith("nrefs:1|case:mixed|eff:no|tok:13a") for s in res["signatures"])
    md = (out / "report.md").read_text()
    assert "## Supervised directions" in md and "| run | de-en | Avg |" in md and (out / "bleu.png").is_file() and (out / "valid_nll.png").is_file()
    # the copy baseline: the German source given back, scored against the English references
    from sacrebleu.metrics import BLEU

    rows = [json.loads(l) for l in (overfit / "seed-1" / "predictions" / "test.de-en.jsonl").read_text().splitlines()]
    expect = BLEU().corpus_score([x["source"] for x in rows], [[x["ref"] for x in rows]]).score
    copy = res["runs"]["copy"]["bleu"]["de-en"]
    assert copy["n"] == 1 and abs(copy["mean"] - expect) < 1e-9 and copy["mean"] < 50
    assert res["runs"]["copy"]["tok_bleu"]["de-en"]["n"] == 0  # no en-de predictions: no source tokens to score
    assert "| copy |" in md
    r = run_cli("evaluate", "--task", "translation", "--data", overfit, "--no-copy-baseline", "--out", tmp_path / "e2")
    assert r.exit_code == 0, r.output
    assert "copy" not in json.loads((tmp_path / "e2" / "results.json").read_text())["runs"]


# ----------------------------------------------------------------------------------------------- bad input
def test_bad_inputs_are_one_line_errors(slice200, tmp_path):
    # a direction with no data
    r = run_cli("finetune", "--task", "translation", "--data", slice200, "--out", tmp_path / "a", "--preset", "tiny",
                "--directions", "fr-en", "--max-steps", "1", "--warmup", "0")
    assert r.exit_code == 2 and "direction fr-en has no training data" in r.output and "Traceback" not in r.output
    # --target-lang that no pair has
    r = run_cli("finetune", "--task", "translation", "--data", slice200, "--out", tmp_path / "b", "--preset", "tiny",
                "--target-lang", "fr", "--max-steps", "1", "--warmup", "0")
    assert r.exit_code == 2 and "--target-lang" in r.output
    # a zero-shot direction without evaluation data
    r = run_cli("finetune", "--task", "translation", "--data", slice200, "--out", tmp_path / "c", "--preset", "tiny",
                "--zero-shot", "de-fr", "--max-steps", "1", "--warmup", "0")
    assert r.exit_code == 2 and "zero-shot direction de-fr" in r.output
    # mismatched sides in a parallel shard
    bad = tmp_path / "bad_ids"
    import shutil

    shutil.copytree(slice200, bad)
    shard = bad / "train" / "de-en" / "part-00000.parquet"
    t = pq.read_table(shard).to_pydict()
    t["ids2"][5] = []
    pq.write_table(pa.table(t), shard)
    r = run_cli("finetune", "--task", "translation", "--data", bad, "--out", tmp_path / "d", "--preset", "tiny", "--max-steps", "1", "--warmup", "0")
    assert r.exit_code == 2 and "mismatched sides" in r.output and "row 5" in r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_translate_bad_inputs(overfit, tmp_path):
    f = tmp_path / "in.de"
    f.write_text("Ein Hund.\n\nZwei Hunde.\n", encoding="utf-8")
    r = run_cli("translate", f, "--model", overfit, "--src-lang", "de")
    assert r.exit_code == 2 and f"{f}:2: empty input line" in r.output
    r = run_cli("translate", "--model", overfit, "--src-lang", "de", "--tgt-lang", "fr", input="Ein Hund.\n")
    assert r.exit_code == 2 and "--tgt-lang 'fr'" in r.output
    long_line = " ".join(["Hund"] * 400)
    r = run_cli("translate", "--model", overfit, "--src-lang", "de", "--overflow", "fail", input=long_line + "\n")
    assert r.exit_code == 2 and "<stdin>:1" in r.output and "more than the" in r.output
    r = run_cli("translate", "--model", overfit, "--src-lang", "de", "--beam", "1", input=long_line + "\n")
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 1
    r = run_cli("translate", "--model", tmp_path, "--src-lang", "de", input="x\n")
    assert r.exit_code == 2 and "not a translation run" in r.output


@pytest.mark.slow
def test_encoder_starts_from_an_xlp_pretrain_run(slice200, tmp_path):
    pt = tmp_path / "pt"
    r = run_cli("pretrain", "--data", slice200, "--out", pt, "--objective", "tlm", "--preset", "tiny",
                "--lang-encoding", "xlp", "--max-steps", "2", "--warmup", "0", "--batch-size", "8", "--accumulate", "1", "--bptt", "64",
                "--eval-every", "2", "--eval-batches", "1", "--num-threads", "1")
    assert r.exit_code == 0, r.output
    from xlp_cli.core import config as cfgmod
    from xlp_cli.models.checkpoint import load_pretrained
    from xlp_cli.tasks.translation.config import TranslationConfig
    from xlp_cli.tasks.translation.job import Job

    cfg = cfgmod.from_dict(TranslationConfig, {"task": "translation", "data": [str(slice200)], "out": str(tmp_path / "ft"),
                                            "init-encoder": str(pt), "which": "last", "lang-encoding": "xlp", "preset": "tiny"})
    model = Job(cfg).new_model()
    pre = load_pretrained(pt, "last")
    for name, tensor in pre.state_dict().items():
        assert torch.equal(model.xlm_encoder.state_dict()[name], tensor), name
    assert model.embed is model.xlm_encoder.embed  # shared with the decoder and the output projection
    r = run_cli("finetune", "--task", "translation", "--data", slice200, "--out", tmp_path / "ft2", "--init-encoder", pt,
                "--which", "last", "--lang-encoding", "additive", "--preset", "tiny", "--max-steps", "1", "--warmup", "0")
    assert r.exit_code == 2 and "uses --lang-encoding xlp, not additive" in r.output


@pytest.mark.slow
def test_interrupted_run_resumes_to_the_same_weights(slice200, tmp_path):
    from safetensors.torch import load_file

    common = ["finetune", "--task", "translation", "--data", slice200, "--preset", "tiny", "--max-tokens", "600",
              "--valid-every", "2", "--max-eval-sentences", "3", "--beam", "1", "--warmup", "1", "--lr", "1e-3", "--threads", "1"]
    r = run_cli(*common, "--out", tmp_path / "straight", "--max-steps", "4")
    assert r.exit_code == 0, r.output
    r = run_cli(*common, "--out", tmp_path / "resumed", "--max-steps", "2")
    assert r.exit_code == 0, r.output
    r = run_cli(*common, "--out", tmp_path / "resumed", "--max-steps", "4")  # more steps: continues from `last`
    assert r.exit_code == 0, r.output
    a = load_file(tmp_path / "straight" / "seed-1" / "checkpoints" / "last" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "seed-1" / "checkpoints" / "last" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    steps = [json.loads(l)["step"] for l in (tmp_path / "resumed" / "seed-1" / "metrics.jsonl").read_text().splitlines()
             if json.loads(l)["event"] == "valid"]
    assert steps == [2, 4]


# ----------------------------------------------------------------------------------------------- DDP
def test_ddp_shares_are_disjoint_and_follow_the_single_process_order(slice200):
    from xlp_cli.tasks.translation.data import MixedBatcher, read_pairs, serve

    train = read_pairs(slice200, "train")
    data = {d: serve(train, d) for d in ("de-en", "en-de")}  # two directions: the mixing draw matters too
    single = MixedBatcher(data, 300, 1.0, seed=3)
    k = 2 * single.steps_per_epoch(2) + 3  # over more than one pass of every direction
    order = [single.next() for _ in range(2 * k)]
    ranks = [MixedBatcher(data, 300, 1.0, seed=3) for _ in range(2)]
    for i in range(k):
        got = [b.next(r, 2) for r, b in enumerate(ranks)]
        for r in range(2):
            want = order[2 * i + r]
            assert got[r][0] == want[0] and torch.equal(got[r][1], want[1]) and torch.equal(got[r][2], want[2]), (i, r)
        assert ranks[0].last_tokens == ranks[1].last_tokens == sum(
            int(y.ne(2).sum()) + y.size(0) for _, _, y in order[2 * i: 2 * i + 2])
    assert ranks[0].state == ranks[1].state == single.state  # either process's checkpoint resumes every process
    assert len({tuple(x.flatten().tolist()) for _, x, _ in order[:2]}) == 2  # the two shares of a step differ


@pytest.mark.slow
def test_two_process_gloo_run_then_single_process_resume(slice200, tmp_path):
    import os
    import subprocess
    import sys

    from xlp_cli.tasks.translation.data import MixedBatcher, read_pairs, serve
    from xlp_cli.tasks.translation.finetune import load_translation_model

    repo = Path(__file__).resolve().parent.parent
    run = tmp_path / "ddp"
    common = ["--task", "translation", "--data", str(slice200), "--preset", "tiny", "--lang-encoding", "xlp",
              "--max-tokens", "600", "--valid-every", "2", "--log-every", "1", "--max-eval-sentences", "4", "--beam", "1",
              "--warmup", "2", "--lr", "1e-3", "--threads", "1", "--out", str(run)]
    env = {**os.environ, "XLP_QUIET": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "xlp_cli.cli", "finetune", *common, "--max-steps", "4", "--json"]
    p = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    summaries = [json.loads(x) for x in p.stdout.replace("}\n{", "}\x00{").split("\x00") if x.strip()]
    assert sorted(s["rank"] for s in summaries) == [0, 1] and {s["world_size"] for s in summaries} == {2}
    assert {s["amp"] for s in summaries} == {"none"}  # CPU: fp32
    rows = [json.loads(x) for x in (run / "seed-1" / "metrics.jsonl").read_text().splitlines()]  # rank 0 only
    train = [r for r in rows if r["event"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4] and [r["step"] for r in rows if r["event"] == "valid"] == [2, 4]
    # a step trains the next two batches of the single-process order, one per process
    ref = MixedBatcher({"de-en": serve(read_pairs(slice200, "train"), "de-en")}, 600, 1.0, seed=1)
    first_two = [ref.next() for _ in range(2)]
    assert train[0]["tokens"] == sum(int(y.ne(2).sum()) + y.size(0) for _, _, y in first_two)
    meta = json.loads((run / "seed-1" / "checkpoints" / "last" / "meta.json").read_text())
    assert meta["step"] == 4 and meta["world_size"] == 2 and meta["objective"]["batcher"]["draws"] == 8
    model = load_translation_model(run / "seed-1", "last")  # a plain single-process checkpoint
    assert model.n_params() > 0
    assert json.loads((run / "seed-1" / "results.json").read_text())["steps"] == 4
    assert json.loads((run / "manifest.json").read_text())["task"] == "translation"
    # the same run continues in one process from the 2-process checkpoint
    r = run_cli("finetune", *common, "--max-steps", "6")
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in (run / "seed-1" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["event"] == "valid"] == [2, 4, 6]
    assert [r["world_size"] for r in rows if r["event"] == "train"] == [2, 2, 2, 2, 1, 1]
    meta = json.loads((run / "seed-1" / "checkpoints" / "last" / "meta.json").read_text())
    assert meta["step"] == 6 and meta["objective"]["batcher"]["draws"] == 10


@pytest.mark.slow
def test_pivot_baseline_translates_the_zero_shot_sources_through_the_pivot(shared_data, tmp_path):
    """pipelines/pivot_baseline.py on a many-to-many run with zero-shot de-fr: the direct scores are the ones
    finetune recorded for the same rows, and the pivot output is `xlp translate` de->en, then of that English
    text en->fr, through the run's model."""
    import subprocess
    import sys

    ids = mt_fixture.build(tmp_path / "data", shared_data, {
        "de-en": {"train": ("train", 0, 300, 60), "test": ("test_2016_flickr", 0, 6)},
        "fr-en": {"train": ("train", 300, 300, 60), "test": ("test_2016_flickr", 6, 6)},
        "de-fr": {"test": ("test_2016_flickr", 12, 6)}}, max_words=12)
    ft = tmp_path / "univ"
    r = run_cli("finetune", "--task", "translation", "--data", ids, "--out", ft, "--preset", "tiny",
                "--lang-encoding", "attaching", "--mix", "many-to-many", "--directions", "de-en,en-de,fr-en,en-fr",
                "--zero-shot", "de-fr", "--lang", "de,en,fr", "--max-steps", "4", "--warmup", "0",
                "--valid-every", "4", "--beam", "1", "--threads", "1")
    assert r.exit_code == 0, r.output
    script = Path(__file__).resolve().parent.parent / "pipelines" / "pivot_baseline.py"
    done = subprocess.run([sys.executable, str(script), "--run", str(ft), "--via", "en", "--threads", "1"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "seed-1 test de-fr: direct" in done.stdout
    res = json.loads((ft / "pivot-en" / "results.json").read_text())
    finetune = json.loads((ft / "seed-1" / "results.json").read_text())["bleu"]["test"]["de-fr"]
    scores = res["bleu"]["seed-1"]["de-fr"]
    assert {k: scores["direct"][k] for k in finetune} == finetune
    assert scores["pivot"]["n"] == finetune["n"] > 0 and 0 <= scores["pivot"]["on_target"] <= 1
    rows = [json.loads(line) for line in (ft / "pivot-en" / "seed-1.test.de-fr.jsonl").read_text().splitlines()]
    src = tmp_path / "via.en"
    src.write_text("".join(row["via"] + "\n" for row in rows), encoding="utf-8")
    out = tmp_path / "pivot.fr"
    r = run_cli("translate", src, "--model", ft, "--src-lang", "en", "--tgt-lang", "fr", "--beam", "1", "--output", out)
    assert r.exit_code == 0, r.output
    assert out.read_text(encoding="utf-8").splitlines() == [row["hyp"] for row in rows]
