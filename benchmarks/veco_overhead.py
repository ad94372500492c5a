"""Step-time overhead of VECO's CA-MLM over TLM at the same model size (issue 13).

    .venv/bin/python benchmarks/veco_overhead.py [--preset small] [--vocab 30000] [--batch 16] [--bptt 256]
        [--rounds 5] [--steps 2] [--threads 1] [--device cpu]

One training step (forward, backward, clip, AdamW) of each objective's loss exactly as `train/objectives/` computes
it, on the same TLM-layout batch of B pairs (each side bptt/2 - 2 tokens between its </s> markers, 15% masked):
    tlm                  the concatenated pair through the plain encoder (XLM's TLM)
    ca-mlm               Eq. 1: the sides as one 2B batch, h stream + s stream (cross-attention to sg(h^L))
    tlm+ca-mlm           both (VECO section 4)
    ca-mlm, no stop-grad the same as ca-mlm with the gradient flowing into h^L through the s-terms (what the
                         paper's stop-gradient avoids)
The encoder of the CA-MLM rows has the cross-attention sub-layers (more parameters); tlm uses the plain encoder,
as `xlp pretrain --objective tlm` does. Configurations are timed in interleaved rounds, so a busy machine slows
them alike; the minimum and median step times are printed, and the ratio to tlm of each (the minimum is the
least disturbed measurement; on a busy machine compare both). Batches are synthetic ids
(only the shapes matter for the time); data loading and masking are not timed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xlp_cli.models.encoder import ModelConfig, TransformerEncoder  # noqa: E402
from xlp_cli.models.veco import Side, streams  # noqa: E402
from xlp_cli.train.masking import mask_tokens  # noqa: E402
from xlp_cli.train.objectives.veco import split_pair  # noqa: E402
from xlp_cli.train.streams import PairStream  # noqa: E402


def pair_batch(args: argparse.Namespace):
    """B pairs in the TLM layout of `xlp pretrain` (a pair shard read by its PairStream), masked as TLM masks."""
    rng = np.random.default_rng(0)
    side = args.bptt // 2 - 2
    sides = [[rng.integers(14, args.vocab, side).astype(np.int32) for _ in range(args.batch)] for _ in range(2)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "part-00000.parquet"
        pq.write_table(pa.table({"ids1": pa.array(sides[0], pa.list_(pa.int32())),
                                 "ids2": pa.array(sides[1], pa.list_(pa.int32()))}), path)
        batch = PairStream([path], "en-fr", (0, 1), args.bptt, 0, args.vocab, 0).next_batch(args.batch)
    inputs, targets, pred = mask_tokens(batch.ids, batch.pad_mask, torch.Generator().manual_seed(0), args.vocab)
    return batch, inputs, targets, pred


def make_step(args: argparse.Namespace, objective: str):
    torch.manual_seed(0)
    cross = objective != "tlm"
    cfg = ModelConfig.from_preset(args.preset, vocab_size=args.vocab, langs=["en", "fr"], lang_encoding="additive",
                                  n_positions=args.bptt + 8, cross_attention=cross)
    model = TransformerEncoder(cfg).to(args.device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-8, weight_decay=1e-4)
    batch, inputs, targets, pred = pair_batch(args)
    dev = args.device
    tlm_args = [t.to(dev) for t in (inputs, batch.langs, batch.positions, batch.pad_mask, pred)]
    tlm_gold = targets[pred].to(dev)
    pair, tgt2, pred2 = split_pair(batch, inputs, targets, pred)
    pair = Side(*(t.to(dev) for t in (pair.ids, pair.langs, pair.positions, pair.pad_mask)))
    gold2, pred2 = tgt2.to(dev)[pred2.to(dev)], pred2.to(dev)

    def loss() -> torch.Tensor:
        total = torch.zeros((), device=dev)
        if objective in ("tlm", "tlm+ca-mlm"):
            total = total + F.cross_entropy(model(*tlm_args).float(), tlm_gold)
        if objective != "tlm":
            h, s = streams(model, pair, stop_gradient=objective != "ca-mlm-no-sg")
            for z in (h, s):
                total = total + F.cross_entropy(model.mlm_logits(model.token_states(z)[pred2]).float(), gold2)
        return total

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        if dev != "cpu":
            torch.cuda.synchronize()

    return step, sum(p.numel() for p in model.parameters())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--vocab", type=int, default=30000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--bptt", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=2, help="timed steps per configuration per round")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    names = ["tlm", "ca-mlm", "tlm+ca-mlm", "ca-mlm-no-sg"]
    steps = {n: make_step(args, n) for n in names}
    for fn, _ in steps.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(args.rounds):
        for n in names:
            fn = steps[n][0]
            for _ in range(args.steps):
                t0 = time.perf_counter()
                fn()
                times[n].append(time.perf_counter() - t0)
    tokens = args.batch * args.bptt
    print(f"preset {args.preset}, vocab {args.vocab}, {args.batch} pairs x {args.bptt} tokens, {args.threads} thread(s), "
          f"{args.device}, {args.rounds} rounds x {args.steps} steps")
    print(f"{'objective':<15} {'params':>10} {'min s/step':>11} {'median':>9} {'tokens/s':>9} {'x tlm (min)':>12} "
          f"{'x tlm (median)':>15}")
    base, base_med = min(times["tlm"]), statistics.median(times["tlm"])
    for n in names:
        best, med = min(times[n]), statistics.median(times[n])
        print(f"{n:<15} {steps[n][1]:>10,} {best:>11.3f} {med:>9.3f} {tokens / best:>9.0f} {best / base:>12.2f} "
              f"{med / base_med:>15.2f}")


if __name__ == "__main__":
    main()
