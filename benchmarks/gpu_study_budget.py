"""Will `pipelines/fidelity_gpu.sh` fit one device lease (9 minutes wall on one H100)? An estimate from measured CPU
step costs and the H100's published throughput; no GPU is needed.

    .venv/bin/python benchmarks/gpu_study_budget.py --measure IDS [--seeds-study out/fidelity_seeds] [--json F]
    .venv/bin/python benchmarks/gpu_study_budget.py --from docs/results/fidelity_gpu/budget.json

What it counts, per stage of the recipe (`recipes.parse`, the configs its stages would run with):
- pre-training FLOPs per step = 6 x non-embedding parameters x tokens + 6 x d x V x predicted tokens (the tied
  output layer on the masked tokens only) + 6 x layers x T x d x tokens (attention scores and values, forward and
  backward): the usual 6ND count (Kaplan et al. 2020) for this encoder;
- `--measure IDS` times real steps of the recipe's pre-training config on this CPU (`xlp pretrain --device cpu`,
  fp32, one thread, real id shards), the start of a stage process (Python, torch, xlp), and the CPU seconds of
  one POS fine-tuning and of the claims evaluation of one run with the recipe's options, on a pre-training run
  of the CPU study (`--seeds-study`: pipelines/fidelity_seeds.toml: a 2-layer d=64 model on the same kind of
  data; POS and claims are mostly CPU-side text processing and small forward passes);
- the H100 time of a step is max(FLOPs / (PEAK x MFU), FLOOR): PEAK = 989e12 FLOP/s, the H100 SXM's published
  dense bf16 peak (NVIDIA H100 datasheet); MFU = 0.15 and FLOOR = 8 ms are ASSUMPTIONS (an eager step of a 4-layer
  encoder with AdamW launches a few hundred kernels; at ~10 us each plus Python that is 5-10 ms whatever the
  FLOPs): the estimate is only as good as they are;
- `--jobs 3`: three stages at a time share the GPU; a wave of three pre-trainings takes the longest of them when
  they are launch-bound (the GPU idles between kernels) and their summed FLOP time when compute-bound;
- POS and claims on the device: POS's CPU seconds, unchanged (an upper bound: the H100 runs a 4-layer d=256 model
  faster than one CPU thread runs a 2-layer d=64 one); claims: the CPU seconds of its dictionary cosine and Fig.
  4/5 (the claims task without retrieval) plus those of reading the retrieval pairs and turning their text into
  ids, measured apart (the retrieval's forward passes run on the GPU there: a few hundred launch-bound batches,
  under a second);
  building the C++ extensions: the CPU seconds of `setup.py build_ext` here.
Writes the inputs and the estimate as JSON (`--json`), and `--from` recomputes the estimate from such a file.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "pipelines" / "fidelity_gpu.toml"
PEAK, MFU, FLOOR = 989e12, 0.15, 0.008
LEASE_S = 540  # 9 minutes
JOBS = 3


def recipe_plan(recipe: Path = RECIPE) -> dict[str, Any]:
    from xlp_cli.recipes import run as recipes

    nodes, _ = recipes.parse(recipe)
    cfgs = {nid: recipes.build_config(nodes[nid], nodes, force=False) for nid in recipes.order(nodes)}
    pre = [c for n, c in cfgs.items() if n.startswith("pretrain.")]
    pos = [c for n, c in cfgs.items() if n.startswith("finetune.") and c.task == "pos"]
    ev = [c for n, c in cfgs.items() if n.startswith("evaluate.")]
    return {"pretrain": pre, "pos": pos, "evaluate": ev}


def model_dims(cfg: Any) -> dict[str, int]:
    from xlp_cli.models.presets import ENCODER_PRESETS

    p = dict(ENCODER_PRESETS[cfg.preset])
    for k in ("n_layers", "d_model", "n_heads", "d_ff"):
        if getattr(cfg, k, 0):
            p[k] = getattr(cfg, k)
    return p


def step_flops(cfg: Any, vocab: int) -> float:
    d = model_dims(cfg)
    L, dm, ff = d["n_layers"], d["d_model"], d["d_ff"]
    tokens = cfg.batch_size * cfg.bptt * cfg.accumulate
    non_emb = L * (4 * dm * dm + 2 * dm * ff)
    return 6 * non_emb * tokens + 6 * dm * vocab * math.ceil(cfg.word_pred * tokens) + 6 * L * cfg.bptt * dm * tokens


def measure_cpu_step(ids: Path, cfg: Any, steps: int = 6) -> dict[str, float]:
    """CPU seconds per step of the recipe's pre-training config on this CPU (fp32, 1 thread): (CPU of `steps`
    steps - CPU of 1 step) / (steps - 1), so start-up and the one evaluation cancel out."""
    def cpu_of(n: int, tmp: str) -> float:
        return cpu_seconds([sys.executable, "-m", "xlp_cli.cli", "pretrain", "--data", str(ids), "--out",
                            f"{tmp}/run{n}", "--lang-encoding", cfg.lang_encoding, "--preset", cfg.preset,
                            "--bptt", str(cfg.bptt), "--batch-size", str(cfg.batch_size), "--accumulate",
                            str(cfg.accumulate), "--max-steps", str(n), "--eval-every", "1000000", "--eval-batches",
                            "1", "--device", "cpu", "--amp", "none", "--num-threads", "1", "--lr", str(cfg.lr),
                            "--warmup", "1"])

    if cfg.lang_encoding == "vle":
        raise SystemExit("measure with the additive or xlp arm (vle needs a vocab-score folder)")
    with tempfile.TemporaryDirectory() as tmp:
        one, many = cpu_of(1, tmp), cpu_of(steps, tmp)
    return {"cpu_step_s": (many - one) / (steps - 1), "steps_timed": steps - 1}


def measure_start() -> float:
    return cpu_seconds([sys.executable, "-c", "import torch, xlp_cli.train.engine, xlp_cli.tasks.claims"])


def measure_build() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        return cpu_seconds([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", tmp, "--build-temp",
                            f"{tmp}/t", "--force"])


def cpu_seconds(cmd: list[str]) -> float:
    """User + system CPU seconds of a command and its children (load-independent, unlike its wall time)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def study_times(study: Path, plan: dict[str, Any]) -> dict[str, float]:
    """CPU seconds of one POS fine-tuning and of the claims evaluation of one run, with the recipe's own POS and
    claims options, on a pre-training run of the CPU study (`--seeds-study`: pipelines/fidelity_seeds.toml)."""
    pre = study / "pretrain" / "additive-s1"
    pos, claims = plan["pos"][0], plan["evaluate"][0]
    with tempfile.TemporaryDirectory() as tmp:
        xlp = [sys.executable, "-m", "xlp_cli.cli"]
        pos_s = cpu_seconds(xlp + ["finetune", "--task", "pos", "--data", str(pre), "--out", f"{tmp}/pos",
                                   "--seeds", "1", "--lr", str(pos.lr[0]), "--batch-size", str(pos.batch_size[0]),
                                   "--epochs", str(pos.epochs), "--max-eval-sentences", str(pos.max_eval_sentences),
                                   "--warmup", str(pos.warmup), "--threads", "1", "--device", "cpu"])
        claims_s = cpu_seconds(xlp + ["evaluate", "--task", "claims", "--data", str(pre), "--data", f"{tmp}/pos",
                                      "--out", f"{tmp}/claims", "--max-pairs", str(claims.max_pairs)])
    text_s = retrieval_text_seconds(pre, claims)
    return {"pos_s": pos_s, "claims_without_retrieval_s": claims_s, "retrieval_text_s": text_s,
            "claims_per_run_s": claims_s + text_s}


def retrieval_text_seconds(pre: Path, claims: Any) -> float:
    """CPU seconds of the CPU-side part of the claims' retrieval for one run: reading the Tatoeba / PUD pairs and
    turning their text into ids (the forward passes run on the GPU there: a few hundred launch-bound batches)."""
    from types import SimpleNamespace

    from xlp_cli.tasks.retrieval.encode import load_encoder, sentence_ids
    from xlp_cli.tasks.retrieval.scores import pairs_of

    enc = load_encoder(pre, "last")
    opts = SimpleNamespace(tatoeba_dir=None, ud_dir=None, max_sentences=claims.max_sentences)
    t0 = time.process_time()
    for which in claims.retrieval_sets:
        for lang in [l for l in enc.langs if l != "en"]:
            pairs = pairs_of(opts, lang, which)
            if pairs is not None and len(pairs):
                sentence_ids(enc, pairs.xx, lang)
                sentence_ids(enc, pairs.en, "en")
    return time.process_time() - t0


def estimate(inputs: dict[str, Any], plan: dict[str, Any] | None = None) -> dict[str, Any]:
    plan = plan or recipe_plan()
    pre, pos = plan["pretrain"], plan["pos"]
    cfg = pre[0]
    flops = step_flops(cfg, inputs["vocab"])
    h100_step = max(flops / (PEAK * MFU), FLOOR)
    evals = cfg.max_steps // cfg.eval_every + 1
    eval_s = evals * cfg.eval_batches * inputs["langs"] * h100_step / 3  # forward only
    run_s = inputs["start_s"] + 5.0 + cfg.max_steps * h100_step + eval_s  # + 5 s: CUDA context, data loading
    compute_s = cfg.max_steps * flops / (PEAK * MFU)
    waves = math.ceil(len(pre) / JOBS)
    pretrain_s = waves * max(run_s, JOBS * compute_s)
    pos_s = math.ceil(len(pos) / JOBS) * inputs["pos_s"]
    claims_s = inputs["claims_per_run_s"] * len(pre)
    total = inputs["build_s"] + 10.0 + pretrain_s + pos_s + claims_s  # + 10 s: vocab-score
    return {"flops_per_step": flops, "h100_step_s": h100_step, "cpu_flops_per_s": flops / inputs["cpu_step_s"],
            "pretrain_runs": len(pre), "steps": cfg.max_steps, "tokens_per_step": cfg.batch_size * cfg.bptt,
            "run_s": run_s, "pretrain_s": pretrain_s, "pos_s": pos_s, "claims_s": claims_s,
            "build_s": inputs["build_s"], "total_s": total, "lease_s": LEASE_S, "fits": total <= LEASE_S,
            "assumptions": {"peak_flops": PEAK, "mfu": MFU, "floor_s": FLOOR, "jobs": JOBS}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", type=Path, help="an `xlp bpe apply` id folder to time CPU steps on")
    ap.add_argument("--seeds-study", type=Path, default=REPO / "out" / "fidelity_seeds")
    ap.add_argument("--from", dest="src", type=Path, help="recompute from a JSON written by --json")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    plan = recipe_plan()
    if a.src:
        inputs = json.loads(a.src.read_text())["inputs"]
    elif a.measure:
        from xlp_cli.bpe.dictionary import Dictionary
        from xlp_cli.artifacts import layout
        from xlp_cli.artifacts.manifest import ids_dictionary
        from xlp_cli.train.inputs import find_ids

        ids_dir, manifest = find_ids([a.measure])
        inputs = {"vocab": len(Dictionary.read(ids_dictionary(ids_dir, manifest)[0])),
                  "langs": len([g for g in layout.groups(ids_dir, "train") if "-" not in g]),
                  **measure_cpu_step(a.measure, next(c for c in plan["pretrain"] if c.lang_encoding != "vle")),
                  "start_s": measure_start(), "build_s": measure_build(), **study_times(a.seeds_study, plan),
                  "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "ids": str(a.measure)}
    else:
        ap.error("give --measure IDS or --from JSON")
    est = estimate(inputs, plan)
    text = json.dumps({"inputs": inputs, "estimate": est}, indent=1)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(text + "\n")
    print(text)
    return 0 if est["fits"] else 1


if __name__ == "__main__":
    sys.exit(main())
