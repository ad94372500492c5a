"""Pre-training throughput: xlp's encoder vs HuggingFace XLMWithLMHeadModel, and the cost of each encoding.

    .venv/bin/python benchmarks/pretrain_throughput.py [--preset small] [--vocab 95000] [--langs 15]
        [--batch 8] [--bptt 256] [--steps 1] [--rounds 8] [--threads 1] [--device cpu] [--skip-hf]
        [--amp bf16] [--compile] [--peak-tflops 989]        # on a GPU: bf16 autocast, torch.compile, MFU

On a GPU (`--device cuda --amp bf16 --skip-hf --preset xlm15 --batch 32`), each row also gives the model FLOP/s
and the MFU: model FLOPs per step = 3 x forward (6 x matmul parameters per token, plus attention 12 x layers x
bptt x d per token, plus the MLM head on the 15% predicted positions), divided by the step time and by the
accelerator's dense bf16 peak (--peak-tflops; 989 for an H100/H200 SXM).

1. tokens/s of one training step (forward, backward, AdamW step) of the `small` preset with the additive
   (XLM) language embedding, against transformers' XLMWithLMHeadModel of the same dimensions (emb_dim, layers,
   heads, FFN = 4*emb_dim, learned positions, n_langs language embeddings, GELU, post-LN, tied output) in the
   same process, same batch, same optimizer. Target: ratio >= 1.3.
   transformers is installed only for this benchmark (not a dependency); without it this part is skipped.
   A second xlp row computes the vocabulary logits at every position as HF does (xlp's MLM head evaluates
   only the ~15% predicted positions): the ratio with the same work.
2. step-time overhead of `xlp` and `vle` (K=100, K=10000 per language) over `additive`. Target <= 3%.

Both models get the same random token batch (ids >= 14, one language, as an MLM step) with 15% of the positions
as MLM targets; data loading is not timed. Configurations are timed in interleaved rounds (so a busy machine
slows them alike); the minimum and the median step time are reported, ratios use the minimum (the least
disturbed measurement).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xlp_cli.models.encoder import ModelConfig, TransformerEncoder  # noqa: E402


def make_batch(args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(14, args.vocab, (args.batch, args.bptt), generator=g)
    pred = torch.rand(ids.shape, generator=g) < 0.15
    # one language per batch, as every MLM step of `xlp pretrain` (XLM samples a language per step)
    langs = torch.full((args.batch,), 3, dtype=torch.long)
    return ids.to(args.device), pred.to(args.device), langs.to(args.device)


def ours(args: argparse.Namespace, encoding: str, k: int = 100, all_logits: bool = False):
    torch.manual_seed(0)
    cfg = ModelConfig.from_preset(args.preset, vocab_size=args.vocab, langs=[f"l{i}" for i in range(args.langs)],
                                  lang_encoding=encoding, n_positions=args.bptt + 8)
    vocab = None
    if encoding == "vle":
        g = torch.Generator().manual_seed(1)
        vocab = [torch.randperm(args.vocab - 14, generator=g)[:k].add(14).tolist() for _ in range(args.langs)]
    model = TransformerEncoder(cfg, vocab_ids=vocab).to(args.device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-8, weight_decay=1e-4,
                            **({"fused": True} if args.device.startswith("cuda") else {}))
    ids, pred, langs = make_batch(args)
    masked = ids.masked_fill(pred, 5)
    net = torch.compile(model) if args.compile else model
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp, enabled=amp is not None and args.device.startswith("cuda")):
            hidden = model.token_states(net(masked, langs))
            if all_logits:  # HF's work: vocabulary logits at every position, loss on the masked ones
                logits = model.mlm_logits(hidden).float()
                loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), ids.masked_fill(~pred, -100).view(-1))
            else:
                loss = F.cross_entropy(model.mlm_logits(hidden[pred]).float(), ids[pred])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()

    step.flops = model_flops(cfg, args, all_logits)  # type: ignore[attr-defined]
    return step, sum(p.numel() for p in model.parameters())


def model_flops(cfg: ModelConfig, args: argparse.Namespace, all_logits: bool) -> float:
    """Training FLOPs of one step (forward x 3), counting matrix multiplications only."""
    d, L, T, tokens = cfg.d_model, cfg.n_layers, args.bptt, args.batch * args.bptt
    per_token = 2 * L * (4 * d * d + 2 * d * cfg.d_ff) + 2 * L * 2 * T * d
    head = 2 * d * args.vocab * (1.0 if all_logits else 0.15)
    return 3.0 * tokens * (per_token + head)


def huggingface(args: argparse.Namespace):
    try:
        from transformers import XLMConfig, XLMWithLMHeadModel
    except ImportError:
        return None, 0
    preset = ModelConfig.from_preset(args.preset, vocab_size=args.vocab)
    if preset.d_ff != 4 * preset.d_model:
        print(f"note: HF XLM's FFN is 4*emb_dim={4 * preset.d_model}; preset has d_ff={preset.d_ff}")
    torch.manual_seed(0)
    cfg = XLMConfig(vocab_size=args.vocab, emb_dim=preset.d_model, n_layers=preset.n_layers, n_heads=preset.n_heads,
                    dropout=0.1, attention_dropout=0.1, gelu_activation=True, sinusoidal_embeddings=False,
                    causal=False, asm=False, n_langs=args.langs, use_lang_emb=True,
                    max_position_embeddings=args.bptt + 8, pad_index=2, bos_index=0, eos_index=1, unk_index=3,
                    mask_index=5, is_encoder=True)
    model = XLMWithLMHeadModel(cfg).to(args.device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-8, weight_decay=1e-4)
    ids, pred, langs = make_batch(args)
    masked = ids.masked_fill(pred, 5)
    labels = ids.masked_fill(~pred, -100)
    lang_ids = langs[:, None].expand(-1, args.bptt)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        out = model(input_ids=masked, langs=lang_ids, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()

    return step, sum(p.numel() for p in model.parameters())


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_steps(step, n: int, device: str) -> float:
    sync(device)
    t = time.perf_counter()
    for _ in range(n):
        step()
    sync(device)
    return (time.perf_counter() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--vocab", type=int, default=95000, help="XLM15's vocabulary size")
    ap.add_argument("--langs", type=int, default=15)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--bptt", type=int, default=256)
    ap.add_argument("--steps", type=int, default=1, help="timed steps per configuration per round")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--amp", default="none", choices=("none", "bf16", "fp16"), help="autocast on a GPU")
    ap.add_argument("--compile", action="store_true", help="torch.compile the encoder")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak of the GPU, for the MFU")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    configs = {"additive": ours(args, "additive"), "xlp": ours(args, "xlp"),
               "vle K=100": ours(args, "vle", 100), "vle K=10000": ours(args, "vle", 10000)}
    hf = (None, 0) if args.skip_hf else huggingface(args)
    if args.skip_hf:
        pass
    elif hf[0] is None:
        print("transformers is not installed: skipping the HuggingFace comparison "
              "(pip install transformers into .venv to run it; it is not an xlp dependency)")
    else:
        configs["HF XLMWithLMHeadModel"] = hf
        configs["additive, all logits"] = ours(args, "additive", all_logits=True)
    tokens = args.batch * args.bptt
    print(f"torch {torch.__version__}, device {args.device}, threads {torch.get_num_threads()}, preset {args.preset}, "
          f"vocab {args.vocab}, {args.langs} languages, batch {args.batch} x bptt {args.bptt} = {tokens} tokens/step")
    for name, (step, _) in configs.items():
        for _ in range(args.warmup):
            step()
    times: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(args.rounds):
        for name, (step, _) in configs.items():
            times[name].append(time_steps(step, args.steps, args.device))
    med = {name: min(v) for name, v in times.items()}
    print(f"{'model':<26}{'params':>12}{'s/step min':>12}{'median':>10}{'tokens/s':>12}")
    for name, (step, n) in configs.items():
        flops = getattr(step, "flops", None)
        mfu = (f"  {flops / med[name] / 1e12:8.1f} TFLOP/s  MFU {100 * flops / med[name] / 1e12 / args.peak_tflops:5.1f}%"
               if flops and args.device.startswith("cuda") else "")
        print(f"{name:<26}{n:>12,}{med[name]:>12.4f}{statistics.median(times[name]):>10.4f}"
              f"{tokens / med[name]:>12,.0f}{mfu}")
    if "HF XLMWithLMHeadModel" in med:
        ratio = med["HF XLMWithLMHeadModel"] / med["additive"]
        print(f"ratio xlp(additive) / HF XLM tokens/s: {ratio:.2f}x (target >= 1.3x)")
        same = med["HF XLMWithLMHeadModel"] / med["additive, all logits"]
        print(f"ratio with the same work (xlp also computing logits at every position): {same:.2f}x")
    for name in ("xlp", "vle K=100", "vle K=10000"):
        paired = statistics.median(t / a for t, a in zip(times[name], times["additive"]))
        print(f"overhead {name} over additive: {100 * (med[name] / med['additive'] - 1):+.1f}% (min step times), "
              f"{100 * (paired - 1):+.1f}% (median of per-round ratios) (target <= 3%)")
    input_layer_cost(args, med["additive"])


def input_layer_cost(args: argparse.Namespace, step_s: float, reps: int = 20) -> None:
    """Forward+backward of the input layer alone (embedding, encoding hooks, positions), per encoding.

    A low-noise measure of what an encoding adds: the rest of the step is the same code for all of them."""
    ids, _, langs = make_batch(args)
    cost = {}
    for name, enc, k in (("none", "none", 0), ("additive", "additive", 0), ("xlp", "xlp", 0),
                         ("vle K=100", "vle", 100), ("vle K=10000", "vle", 10000)):
        torch.manual_seed(0)
        cfg = ModelConfig.from_preset(args.preset, vocab_size=args.vocab, n_layers=0,
                                      langs=[f"l{i}" for i in range(args.langs)], lang_encoding=enc,
                                      n_positions=args.bptt + 8)
        vocab = None
        if enc == "vle":
            g = torch.Generator().manual_seed(1)
            vocab = [torch.randperm(args.vocab - 14, generator=g)[:k].add(14).tolist() for _ in range(args.langs)]
        model = TransformerEncoder(cfg, vocab_ids=vocab).to(args.device).train()
        def run() -> None:
            model.zero_grad(set_to_none=True)
            model(ids, langs).sum().backward()
        run()
        samples = []
        for _ in range(5):
            samples.append(time_steps(run, reps // 5, args.device))
        cost[name] = min(samples)
    print(f"input layer fwd+bwd (embedding + encoding + positions + LayerNorm), ms; extra over additive "
          f"as % of the additive step ({step_s:.3f} s):")
    for name, c in cost.items():
        extra = 100 * (c - cost["additive"]) / step_s
        print(f"  {name:<14}{1000 * c:>9.2f} ms   {extra:+.2f}%")


if __name__ == "__main__":
    main()
