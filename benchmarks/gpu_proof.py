"""The GPU proof: one command that fits ONE device lease (15 min of device time, start-up included), so it must end
in <= 9 minutes wall on one H100. It measures xlp's real training step (the engine, the objectives, the input
pipeline) on real data and writes everything under --out ($OUT on the device):

    make gpu-data                                                    # once, here: ~15 MiB of real ids (Multi30k)
    run(command="PYTHONUNBUFFERED=1 python3 benchmarks/gpu_proof.py --out $OUT", carry=["gpu-data"], timeout_s=600)
    .venv/bin/python benchmarks/gpu_proof.py --device cpu --smoke     # CI: the same code on the `tiny` preset, < 60 s

Sections (each one's numbers go to gpu_proof.json as soon as it ends; a section that would pass --budget-s is
skipped and says so):
1. throughput: step time, tokens/s and MFU (model FLOPs / bf16 dense peak) of `xlp pretrain`'s step for the
   presets xlm15 and small, every encoding, eager and torch.compile'd (MLM, bptt 256, bf16 autocast);
2. hf: transformers' XLMWithLMHeadModel at the same dimensions and batch (when transformers is installed; it
   computes logits at every position, xlp's head only at the 15% predicted ones: both FLOP counts are given);
3. memory: peak GPU memory of each configuration, and the largest batch of xlm15 that fits;
4. syncs: host syncs per training step outside log steps, counted by torch.cuda.set_sync_debug_mode (target 0);
5. pretrain: a real pre-training of `small` (xlp encoding, MLM+TLM, Multi30k de/en/fr) for ~3 minutes through
   `xlp pretrain`'s own code, with its loss curve;
6. resume: a run stopped at step K and resumed to 2K against an uninterrupted one (losses at every log step).

MFU counts the matrix multiplications of the model (6 x parameters of the layers per token, attention 12 x L x T x
d per token, the MLM head on the tokens it predicts), divided by the step time and by --peak-tflops (989: H100
SXM dense bf16). The data is the `make gpu-data` folder (../shared does not travel to the device).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from xlp_cli.core import config as cfgmod  # noqa: E402
from xlp_cli.models.encoding_registry import ENCODINGS  # noqa: E402
from xlp_cli.train import engine, pretrain  # noqa: E402
from xlp_cli.train.config import PretrainConfig  # noqa: E402
from xlp_cli.train.masking import capacity  # noqa: E402
from xlp_cli.train.objectives.encoder import model_config  # noqa: E402
from xlp_cli.train.prefetch import Prefetcher, to_device  # noqa: E402
from xlp_cli.train.runtime import Runtime  # noqa: E402


class Proof:
    def __init__(self, args: argparse.Namespace):
        self.args, self.t0 = args, time.time()
        self.cuda = args.device == "cuda"
        self.rt = Runtime.create("cuda" if self.cuda else "cpu", "bf16" if self.cuda else "none", 0)
        self.results: dict[str, Any] = {"env": self.env(), "skipped": {}}
        self.tmp = Path(tempfile.mkdtemp(prefix="gpu_proof_"))
        args.out.mkdir(parents=True, exist_ok=True)

    # ---------------------------------------------------------------- bookkeeping
    def env(self) -> dict[str, Any]:
        e = {"torch": torch.__version__, "python": platform.python_version(), "device": str(self.args.device),
             "smoke": self.args.smoke, "peak_tflops": self.args.peak_tflops}
        if self.cuda:
            p = torch.cuda.get_device_properties(0)
            e.update(gpu=p.name, memory_gib=round(p.total_memory / 2 ** 30, 1), sms=p.multi_processor_count)
        return e

    def left(self) -> float:
        return self.args.budget_s - (time.time() - self.t0)

    def save(self) -> None:
        self.results["elapsed_s"] = round(time.time() - self.t0, 1)
        (self.args.out / "gpu_proof.json").write_text(json.dumps(self.results, indent=1))

    def section(self, name: str, need_s: float, fn) -> None:
        if self.left() < need_s:
            self.results["skipped"][name] = f"budget: {self.left():.0f} s left, ~{need_s:.0f} s needed"
            print(f"[{name}] skipped: {self.results['skipped'][name]}", flush=True)
            return
        t = time.time()
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - one section failing must not lose the others' numbers
            self.results.setdefault("errors", {})[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            print(f"[{name}] FAILED: {self.results['errors'][name]}", flush=True)
        print(f"[{name}] {time.time() - t:.0f} s (total {time.time() - self.t0:.0f} s)", flush=True)
        self.save()

    # ---------------------------------------------------------------- the real training step
    def config(self, **over: Any) -> PretrainConfig:
        a = self.args
        values = {"data": [str(a.data / "ids"), str(a.data / "vocab")], "preset": "small", "bptt": a.bptt,
                  "batch_size": a.batch_size, "accumulate": 1, "objective": "mlm", "lang_encoding": "xlp",
                  "lr": 1e-4, "warmup": 10, "seed": 1, "device": a.device, "amp": "bf16" if self.cuda else "none",
                  "compile": "off", "log_every": 10 ** 6, "eval_every": 10 ** 6, "max_steps": 10 ** 6,
                  "out": str(self.tmp / "run")}
        values.update(over)
        return cfgmod.from_dict(PretrainConfig, values)

    def trainer(self, cfg: PretrainConfig) -> tuple[engine.Trainer, Any]:
        """`xlp pretrain`'s own model and objective for `cfg`, in a trainer (and the run's inputs)."""
        inp = pretrain.inputs(cfg)
        model = pretrain.build_model(cfg, inp, self.rt.device)
        objective = pretrain.objective_class(cfg.objective).create(cfg, inp, model, self.rt)
        return engine.Trainer(objective, model, pretrain.settings(cfg), self.tmp / "run", self.rt, {}), inp

    def flops_per_token(self, cfg: PretrainConfig, vocab: int, all_logits: bool = False) -> float:
        """Training FLOPs per token (forward x 3), matrix multiplications only."""
        m = model_config(cfg, vocab, ["x"])
        d, L, T = m.d_model, m.n_layers, cfg.bptt
        layers = 2 * L * (4 * d * d + 2 * d * m.d_ff) + 2 * L * 2 * T * d
        predicted = 1.0 if all_logits else capacity(cfg.word_pred, (cfg.batch_size, T)) / (cfg.batch_size * T)
        return 3.0 * (layers + 2 * d * vocab * predicted)

    def time_steps(self, t: engine.Trainer, steps: int, warm: int, count_syncs: bool = False) -> dict[str, Any]:
        feed = Prefetcher(t.objective, 1, 0, warm + steps, 2, pin=self.cuda)
        tokens, syncs = 0, 0
        try:
            for s in range(warm):
                batches, pos = feed.get(s)
                t.guarded_step(to_device(batches, self.rt.device), pos, first=s == 0)
            if self.cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                if count_syncs and self.cuda:
                    torch.cuda.set_sync_debug_mode("warn")
                try:
                    for s in range(warm, warm + steps):
                        batches, pos = feed.get(s)
                        rec = t.guarded_step(to_device(batches, self.rt.device), pos, first=False)
                        tokens += int(rec["tokens"])
                finally:
                    if self.cuda:
                        torch.cuda.set_sync_debug_mode(0)
                syncs = sum("synchroniz" in str(w.message) for w in seen)
            if self.cuda:
                torch.cuda.synchronize()
            secs = time.perf_counter() - start
        finally:
            feed.close()
        out = {"step_s": secs / steps, "tokens_per_s": tokens / secs, "tokens_per_step": tokens / steps}
        if count_syncs and self.cuda:
            out["syncs_per_step"] = syncs / steps
        if self.cuda:
            out["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2 ** 30, 2)
        t.watch.check()  # a non-finite loss would make every number above meaningless
        return out

    def free(self) -> None:
        if self.cuda:
            torch.cuda.empty_cache()

    # ---------------------------------------------------------------- sections
    def throughput(self) -> None:
        a = self.args
        rows = self.results.setdefault("throughput", [])
        compiled = ("additive", "xlp") if not a.smoke else ()
        for preset in a.presets:
            for enc in [*ENCODINGS, *[f"{e}+compile" for e in compiled]]:
                name, comp = enc.split("+")[0], enc.endswith("+compile")
                if self.left() < (90 if comp else 20):
                    self.results["skipped"][f"throughput {preset} {enc}"] = "budget"
                    continue
                cfg = self.config(preset=preset, lang_encoding=name, compile="on" if comp else "off",
                                  batch_size=a.batch_size if preset != "xlm15" else a.xlm15_batch)
                t, inp = self.trainer(cfg)
                r = self.time_steps(t, a.steps, 2 if a.smoke else 5 if comp else 3)
                flops = self.flops_per_token(cfg, len(inp.dictionary)) * r["tokens_per_step"] / r["step_s"]
                r.update(preset=preset, encoding=name, compiled=t.compiled, batch_size=cfg.batch_size,
                         parameters=sum(p.numel() for p in t.model.parameters()), tflops=flops / 1e12,
                         mfu=flops / 1e12 / a.peak_tflops)
                rows.append(r)
                print(f"  {preset:<6} {name:<10} compiled={t.compiled!s:<5} {r['step_s'] * 1e3:8.1f} ms/step "
                      f"{r['tokens_per_s']:>12,.0f} tok/s  MFU {100 * r['mfu']:5.1f}%  "
                      f"peak {r.get('peak_mem_gib', 0):.1f} GiB", flush=True)
                del t
                self.free()
                self.save()

    def huggingface(self) -> None:
        if importlib.util.find_spec("transformers") is None:
            self.results["skipped"]["hf"] = "transformers is not installed"
            return
        for preset in self.args.presets:
            self.huggingface_preset(preset)
            self.free()

    def huggingface_preset(self, preset: str) -> None:
        from transformers import XLMConfig, XLMWithLMHeadModel

        a = self.args
        cfg = self.config(preset=preset, lang_encoding="additive",
                          batch_size=a.batch_size if preset != "xlm15" else a.xlm15_batch)
        t, inp = self.trainer(cfg)  # for the same real batch as xlp's step
        m = t.model.config
        hf_cfg = XLMConfig(vocab_size=m.vocab_size, emb_dim=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads,
                           dropout=0.1, attention_dropout=0.1, gelu_activation=True, sinusoidal_embeddings=False,
                           causal=False, asm=False, n_langs=m.n_langs, use_lang_emb=True,
                           max_position_embeddings=m.n_positions, pad_index=2, bos_index=0, eos_index=1,
                           unk_index=3, mask_index=5, is_encoder=True)
        torch.manual_seed(0)
        hf = XLMWithLMHeadModel(hf_cfg).to(self.rt.device).train()
        opt = torch.optim.AdamW(hf.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-8, weight_decay=1e-4, fused=True)
        mb = next(iter(t.objective.micro_batches(0, 1)))
        ids, langs = mb.inputs.to(self.rt.device), mb.batch.langs.to(self.rt.device)
        labels = mb.targets.masked_fill(~mb.pred, -100).to(self.rt.device)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            with self.rt.autocast():
                loss = hf(input_ids=ids, langs=langs, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(hf.parameters(), 5.0)
            opt.step()

        for _ in range(3):
            step()
        if self.cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(a.steps):
            step()
        if self.cuda:
            torch.cuda.synchronize()
        secs = (time.perf_counter() - start) / a.steps
        tokens = ids.numel()
        flops = self.flops_per_token(cfg, len(inp.dictionary), all_logits=True) * tokens / secs
        ours = [r for r in self.results.get("throughput", []) if r["preset"] == preset and r["encoding"] == "additive"]
        best = max((r["tokens_per_s"] for r in ours), default=None)  # compiled where it ran
        row = {"preset": preset, "step_s": secs, "tokens_per_s": tokens / secs, "tflops": flops / 1e12,
               "mfu": flops / 1e12 / a.peak_tflops, "xlp_additive_over_hf": None if best is None else best / (tokens / secs)}
        self.results.setdefault("hf", []).append(row)
        print(f"  HF XLMWithLMHeadModel {preset:<6} {secs * 1e3:8.1f} ms/step {tokens / secs:>12,.0f} tok/s "
              f"(all-position logits: MFU {100 * row['mfu']:.1f}%); xlp additive / HF tokens/s: "
              f"{row['xlp_additive_over_hf'] or float('nan'):.2f}x", flush=True)

    def memory(self) -> None:
        if not self.cuda:
            self.results["skipped"]["memory"] = "needs a GPU"
            return
        cfg = self.config(preset="xlm15", lang_encoding="xlp", batch_size=self.args.xlm15_batch)
        t, _ = self.trainer(cfg)
        b, largest = cfg.batch_size, 0
        while b <= 4096 and self.left() > 60:
            if not t.fits(b):
                break
            largest, b = b, b * 2
        self.results["memory"] = {"preset": "xlm15", "bptt": cfg.bptt, "largest_batch_fitting": largest,
                                  "searched_up_to": b, "gpu_memory_gib": self.results["env"].get("memory_gib")}
        print(f"  xlm15 bptt {cfg.bptt}: batch {largest} fits (doubling from {cfg.batch_size})", flush=True)
        del t
        self.free()

    def syncs(self) -> None:
        rows = self.results.setdefault("syncs", [])
        for objective in ("mlm+tlm", "tlm+ca-mlm", "mass"):
            enc = "xlp" if objective != "tlm+ca-mlm" else "additive"
            cfg = self.config(preset="tiny" if self.args.smoke else "small", objective=objective, lang_encoding=enc)
            t, _ = self.trainer(cfg)
            r = self.time_steps(t, max(4, self.args.steps // 2), 3, count_syncs=True)
            rows.append({"objective": objective, "encoding": enc, **r})
            print(f"  {objective:<11} {enc:<8} host syncs per step: {r.get('syncs_per_step', 'n/a (CPU)')}", flush=True)
            del t
            self.free()

    def real_pretraining(self) -> None:
        a = self.args
        preset = "tiny" if a.smoke else "small"
        step_s = next((r["step_s"] for r in self.results.get("throughput", []) if r["preset"] == preset
                       and r["encoding"] == "xlp" and r["compiled"]), None) or next(
            (r["step_s"] for r in self.results.get("throughput", []) if r["preset"] == preset and r["encoding"] == "xlp"),
            0.1)
        seconds = min(a.pretrain_s, max(10.0, self.left() - 150))
        # (MLM+TLM steps, validation and checkpoints cost more than the timed MLM step)
        steps = 20 if a.smoke else max(20, int(seconds / step_s / 1.5))
        run = a.out / "pretrain_small"
        cfg = self.config(preset=preset, objective="mlm+tlm", compile="auto", max_steps=steps, warmup=max(1, steps // 10),
                          lr=5e-4, log_every=max(1, steps // 50), eval_every=max(1, steps // 4), eval_batches=8,
                          out=str(run), force=True)
        start = time.time()
        summary = pretrain.run(cfg)
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        self.results["pretrain"] = {
            "preset": preset, "objective": "mlm+tlm", "encoding": "xlp", "steps": summary["steps"],
            "wall_s": time.time() - start, "tokens": summary["tokens"], "tokens_per_s": summary["tokens_per_s"],
            "train_loss": [(r["step"], r["loss"]) for r in rows if r["event"] == "train"],
            "valid_loss": [(r["step"], r["loss"]) for r in rows if r["event"] == "valid"]}
        p = self.results["pretrain"]
        print(f"  {steps} steps in {p['wall_s']:.0f} s, {p['tokens_per_s']:,.0f} tok/s; train loss "
              f"{p['train_loss'][0][1]:.3f} -> {p['train_loss'][-1][1]:.3f}; valid "
              + " ".join(f"{s}:{v:.3f}" for s, v in p["valid_loss"]), flush=True)
        for f in (run / "checkpoints").glob("*/*.safetensors"):  # keep $OUT small: the curve is what we need
            f.unlink()

    def resume(self) -> None:
        k = 10 if self.args.smoke else 40
        preset = "tiny" if self.args.smoke else "small"
        common = {"preset": preset, "objective": "mlm+tlm", "warmup": 5, "lr": 5e-4, "log_every": 5,
                  "eval_every": k, "eval_batches": 2, "force": False}
        full, part = self.tmp / "full", self.tmp / "part"
        pretrain.run(self.config(**common, max_steps=2 * k, out=str(full)))
        pretrain.run(self.config(**common, max_steps=k, out=str(part)))       # stopped at step k
        resumed = pretrain.run(self.config(**common, max_steps=2 * k, out=str(part)))

        def losses(run: Path) -> list[float]:
            return [json.loads(x)["loss"] for x in (run / "metrics.jsonl").read_text().splitlines()
                    if json.loads(x)["event"] == "train"]

        a, b = losses(full), losses(part)
        diff = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else math.inf
        self.results["resume"] = {"steps": 2 * k, "stopped_at": k, "resumed": resumed["resumed"],
                                  "log_points": len(a), "max_abs_loss_diff": diff, "bitwise": a == b}
        print(f"  stop at {k}, resume to {2 * k}: max |loss difference| {diff:.2e} over {len(a)} log steps "
              f"(bitwise: {a == b})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--smoke", action="store_true", help="the `tiny` preset and a few steps (CI, on the CPU)")
    ap.add_argument("--data", type=Path, default=REPO / "gpu-data", help="the `make gpu-data` folder")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or REPO / "out" / "gpu_proof"))
    ap.add_argument("--budget-s", type=float, default=500, help="wall-clock budget; later sections are skipped")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak (H100 SXM: 989)")
    ap.add_argument("--bptt", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64, help="small (and tiny) batch")
    ap.add_argument("--xlm15-batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per configuration")
    ap.add_argument("--pretrain-s", type=float, default=180)
    args = ap.parse_args()
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cpu" and not args.smoke:
        print("no GPU here: running the --smoke version on the CPU", flush=True)
        args.smoke = True
    if args.smoke:
        args.presets, args.bptt, args.batch_size, args.xlm15_batch = ("tiny",), min(args.bptt, 32), 8, 8
        args.steps, args.pretrain_s, args.budget_s = min(args.steps, 4), 10, min(args.budget_s, 300)
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    else:
        args.presets = ("xlm15", "small")
    if not (args.data / "ids" / "manifest.json").is_file():
        raise SystemExit(f"gpu_proof: {args.data}/ids not found: run `make gpu-data` and carry the folder")
    os.environ.setdefault("XLP_QUIET", "1")
    proof = Proof(args)
    print(f"gpu_proof: {proof.results['env']}", flush=True)
    proof.section("throughput", 60, proof.throughput)
    proof.section("hf", 30, proof.huggingface)
    proof.section("syncs", 30, proof.syncs)
    proof.section("pretrain", 60, proof.real_pretraining)
    proof.section("resume", 40, proof.resume)
    proof.section("memory", 40, proof.memory)
    shutil.rmtree(proof.tmp, ignore_errors=True)
    proof.save()
    print(f"gpu_proof: {proof.results['elapsed_s']} s; {args.out / 'gpu_proof.json'}"
          + (f"; errors: {proof.results['errors']}" if proof.results.get("errors") else ""), flush=True)
    sys.exit(1 if proof.results.get("errors") else 0)


if __name__ == "__main__":
    main()
