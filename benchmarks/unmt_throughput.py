"""UNMT on CPU: back-translation generation batched vs one sentence at a time, and the training step per encoding.

    .venv/bin/python benchmarks/unmt_throughput.py                       # prepares Multi30k halves in a temp dir
    .venv/bin/python benchmarks/unmt_throughput.py --ids out/unmt_demo/prepare-ids --vocab out/unmt_demo/vocab \
        --init out/unmt_demo/finetune/vle/seed-1/checkpoints/best --init-encoding vle

1. Generation (what every back-translation step does): greedy translation of --sentences real German sentences
   of the Multi30k halves, batched (`unmt.objective.back_translate`, --batch-size rows at a time) against the
   reference, one sentence at a time (a naive loop), in the same run; sentences/s and their ratio, and a check
   that both give the same translations. With --init the model is a trained UNMT/MASS checkpoint; without it a
   random one (it never stops early: every output runs to the 1.3 x length + 5 limit, the same in both modes).
2. Training step time (VLE Table 5's measure) for every encoding (none, additive, attaching, xlp, vle adding,
   vle padding, vle padding with a large K): a randomly initialised model of --preset, `Unmt.micro_batches` +
   `loss` + backward + AdamW step. The encodings are timed in --rounds interleaved rounds (--steps steps of each,
   in turn, after 2 warm-up steps each), so a change of machine load hits every encoding alike; printed: the min
   and median ms/step over rounds and the median ratio to additive within a round. Random models generate to the
   length limit, so the back-translation share is the worst case.
Results go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xlp_cli.artifacts.files import data_dir
from xlp_cli.artifacts import layout  # noqa: E402
from xlp_cli.artifacts.shards import shard_paths  # noqa: E402
from xlp_cli.models import checkpoint as ckpt  # noqa: E402
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder  # noqa: E402
from xlp_cli.models.seq2seq import Seq2Seq, Seq2SeqConfig  # noqa: E402
from xlp_cli.tasks.unmt.objective import KINDS, Unmt, back_translate  # noqa: E402
from xlp_cli.train.inputs import read_top_k  # noqa: E402
from xlp_cli.train.runtime import Runtime  # noqa: E402
from xlp_cli.train.sentences import SentenceStream, collate  # noqa: E402

XLP = [sys.executable, "-m", "xlp_cli.cli"]


def prepare(tmp: Path, ks: list[int]) -> tuple[Path, Path]:
    data = data_dir() / "multi30k"
    if not data.is_dir():
        sys.exit(f"benchmark data not found at {data} (set XLP_DATA_DIR)")
    subprocess.run(XLP + ["prepare", "--source", "opus", str(data / "train.de.gz"), str(data / "train.en.gz"),
                          "--lang", "de,en", "--unpair", "--lowercase", "none", "--valid-fraction", "0",
                          "--test-fraction", "0", "--max-records", "6000", "--bpe-codes", "4000", "--out",
                          str(tmp / "prep")], check=True, capture_output=True)
    subprocess.run(XLP + ["vocab-score", "--data", str(tmp / "prep-ids"), "--k", ",".join(map(str, ks)),
                          "--out", str(tmp / "vocab")], check=True, capture_output=True)
    return tmp / "prep-ids", tmp / "vocab"


def random_model(encoding: str, options: dict, ids: Path, vocab: Path, preset: str, langs: list[str]) -> Seq2Seq:
    from xlp_cli.bpe.dictionary import Dictionary

    V = len(Dictionary.read(ids / "dict.txt"))
    vocab_ids = read_top_k(vocab / "vle_vocab.json", langs, options["vle_k"], None) if encoding == "vle" else None
    torch.manual_seed(0)
    enc = TransformerEncoder(ModelConfig.from_preset(preset, vocab_size=V, langs=langs, lang_encoding=encoding,
                                                     encoding_options=options, n_positions=128), vocab_ids)
    return Seq2Seq(Seq2SeqConfig.like_encoder(enc.config), enc)


def generation(model: Seq2Seq, sents: list[np.ndarray], batch: int, src: int, tgt: int) -> dict[str, float]:
    model.eval()
    t0 = time.perf_counter()
    batched = []
    for k in range(0, len(sents), batch):
        y = back_translate(model, collate(sents[k:k + batch]), src, tgt)
        batched += [row[row.ne(2)].tolist() for row in y]
    t1 = time.perf_counter()
    single = [back_translate(model, collate([s]), src, tgt)[0].tolist() for s in sents]
    t2 = time.perf_counter()
    n = len(sents)
    return {"batched": n / (t1 - t0), "single": n / (t2 - t1), "same": batched == [[t for t in s if t != 2] for s in single]}


def stepper(model: Seq2Seq, ids: Path, langs: list[str], batch: int):
    """One UNMT training step of `model` (AE + BT + MLM for both languages, backward, AdamW) per call; seconds."""
    from xlp_cli.bpe.dictionary import Dictionary

    V = len(Dictionary.read(ids / "dict.txt"))
    cfg = SimpleNamespace(batch_sentences=batch, word_shuffle=3.0, word_dropout=0.1, word_blank=0.1, word_pred=0.15,
                          lambda_ae="1", lambda_bt="1", lambda_mlm="1", label_smoothing=0.1, bt_temperature=0.0)
    streams = {kind: {lang: SentenceStream(shard_paths(layout.read_dir(ids, "train", lang)), lang, 1, 10 * k + i, V, 100)
                      for i, lang in enumerate(langs)} for k, kind in enumerate(KINDS)}
    rt = Runtime.create("cpu", "none", 0)
    obj = Unmt(cfg, 1, langs, {lang: i for i, lang in enumerate(langs)}, streams, V, rt)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()
    state = {"step": 0}

    def one() -> float:
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss, _ = obj.loss(model, next(iter(obj.micro_batches(state["step"], 1))))
        loss.backward()
        for p in model.parameters():
            if p.grad is not None and p.grad.is_sparse:
                p.grad = p.grad.to_dense()
        opt.step()
        state["step"] += 1
        return time.perf_counter() - t0

    return one


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", type=Path, help="an `xlp bpe apply` folder with train/de and train/en (default: prepare)")
    ap.add_argument("--vocab", type=Path, help="its `xlp vocab-score` folder (K 100 and 10000 for the step timings)")
    ap.add_argument("--init", type=Path, help="a UNMT/MASS checkpoint folder for the generation benchmark")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--sentences", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds over the encodings (load drift)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    langs = ["de", "en"]
    with tempfile.TemporaryDirectory() as tmp:
        ids, vocab = (args.ids, args.vocab) if args.ids else prepare(Path(tmp), [100, 10000])
        sents = SentenceStream(shard_paths(layout.read_dir(ids, "train", "de")), "de", 0, 0, 10**9, 100).next(args.sentences)
        model = ckpt.load_model(ckpt.checkpoint_dir(args.init)) if args.init else \
            random_model("additive", {}, ids, vocab, args.preset, langs)
        src, tgt = model.config.langs.index("de"), model.config.langs.index("en")
        g = generation(model, sents, args.batch_size, src, tgt)
        print(f"back-translation de->en, {args.sentences} sentences, {'trained' if args.init else 'random'} model, "
              f"{args.threads} thread(s): batched ({args.batch_size}) {g['batched']:.1f} sent/s, one at a time "
              f"{g['single']:.1f} sent/s, ratio {g['batched'] / g['single']:.2f}x, same output: {g['same']}")
        rows = [("none", {}), ("additive", {}), ("attaching", {}), ("xlp", {}),
                ("vle", {"vle_style": "adding", "vle_k": 100}), ("vle", {"vle_style": "padding", "vle_k": 100}),
                ("vle", {"vle_style": "adding", "vle_k": 10000})]
        print(f"UNMT training step ({args.preset}, {args.batch_size} sentences per language and loss, random init; "
              f"{args.rounds} interleaved rounds of {args.steps} steps after 2 warm-up steps each):")
        steppers = [stepper(random_model(n, o, ids, vocab, args.preset, langs), ids, langs, args.batch_size)
                    for n, o in rows]
        for one in steppers:  # warm-up
            one(), one()
        per_round = [[1000 * float(np.mean([one() for _ in range(args.steps)])) for one in steppers]
                     for _ in range(args.rounds)]  # every round times each encoding in turn: load drifts hit all
        for i, (name, opts) in enumerate(rows):
            mine = [r[i] for r in per_round]
            ratios = [r[i] / r[1] for r in per_round]  # row 1 is additive, timed in the same round
            label = name + (f" {opts['vle_style']} K={opts['vle_k']}" if opts else "")
            print(f"  {label:24s} {min(mine):8.1f} ms/step (min of rounds), {float(np.median(mine)):8.1f} (median); "
                  f"x additive: {float(np.median(ratios)):.2f} (median of rounds)")

if __name__ == "__main__":
    main()
