"""Beam-search throughput on CPU: batched decoding against one sentence at a time (the reference).

    .venv/bin/python benchmarks/translate_throughput.py                      # random `small` model, Multi30k sources
    .venv/bin/python benchmarks/translate_throughput.py --model out/translation_demo/finetune/xlp

Sources are real German Multi30k test sentences (test_2016_flickr), tokenized with the model's own text
pipeline and BPE when --model is given. Without --model the model is randomly initialised: it never emits
`</s>` early, so every hypothesis runs to the length limit (1.2 * source + 10) -- the worst case, the same
for both modes, so the ratio is fair. Prints sentences/s for beam 5 batched (--batch-size) and unbatched,
and their ratio; also greedy. Results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
import zlib
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xlp_cli.artifacts.files import data_dir  # noqa: E402
from xlp_cli.models.factory import build_seq2seq  # noqa: E402
from xlp_cli.models.seq2seq import Seq2SeqConfig  # noqa: E402
from xlp_cli.tasks.translation.decode import translate_ids  # noqa: E402


def sources(n: int) -> list[str]:
    path = data_dir() / "multi30k" / "test_2016_flickr.de.gz"
    if not path.is_file():
        sys.exit(f"benchmark data not found at {path} (set XLP_DATA_DIR)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for _, line in zip(range(n), f)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="an `xlp finetune --task translation` folder (default: random model)")
    ap.add_argument("--preset", default="small", help="preset of the random model")
    ap.add_argument("--sentences", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--length-penalty", type=float, default=1.2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    lines = sources(args.sentences)
    if args.model:
        from xlp_cli.bpe.encoder import TextEncoder
        from xlp_cli.tasks.translation.decode import resolve_run
        from xlp_cli.tasks.translation.finetune import load_translation_model

        root, seed_dir = resolve_run(args.model, -1)
        model = load_translation_model(seed_dir)
        codec = TextEncoder.load(root)
        src = [a.tolist() for a in codec.encode_batch(lines, "de")]
        sl, tl = model.config.langs.index("de"), model.config.langs.index("en")
        what = f"trained model {seed_dir}"
    else:
        torch.manual_seed(0)
        cfg = Seq2SeqConfig.from_preset(args.preset, vocab_size=8000, langs=["de", "en"], lang_encoding="xlp")
        model = build_seq2seq(cfg).eval()
        # real sentences, words hashed to ids (a random model has no vocabulary to respect)
        src = [[14 + zlib.crc32(w.encode()) % 7900 for w in s.split()] for s in lines]
        sl, tl = 0, 1
        what = f"random {args.preset} model ({model.n_params() / 1e6:.1f}M parameters)"
    n_tok = sum(len(s) for s in src)
    print(f"{what}; {len(src)} sentences, {n_tok} source tokens, {args.threads} threads, beam {args.beam}, "
          f"length penalty {args.length_penalty}")

    def timed(batch_size: int, beam: int) -> tuple[float, list[list[int]]]:
        t0 = time.perf_counter()
        out = translate_ids(model, src, sl, tl, torch.device("cpu"), beam=beam, length_penalty=args.length_penalty,
                            batch_size=batch_size)
        return time.perf_counter() - t0, out

    timed(args.batch_size, args.beam)  # warm-up
    t_batch, out_b = timed(args.batch_size, args.beam)
    t_one, out_1 = timed(1, args.beam)
    t_greedy, _ = timed(args.batch_size, 1)
    same = sum(a == b for a, b in zip(out_b, out_1))
    n = len(src)
    print(f"beam {args.beam}, batched (batch {args.batch_size}): {n / t_batch:8.2f} sentences/s  ({t_batch:.2f} s)")
    print(f"beam {args.beam}, one sentence at a time:     {n / t_one:8.2f} sentences/s  ({t_one:.2f} s)")
    print(f"greedy, batched:                         {n / t_greedy:8.2f} sentences/s  ({t_greedy:.2f} s)")
    print(f"ratio batched / one-at-a-time: {t_one / t_batch:.2f}x; identical outputs: {same}/{n}")


if __name__ == "__main__":
    main()
