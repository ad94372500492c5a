"""The pivot baseline of a run's zero-shot directions: s -> VIA -> t through the same many-to-many model.

The interlingua paper compares its zero-shot BLEU with pivoting through English. For every zero-shot direction
s-t of a translation run (its manifest's `zero_shot`), this reads the sources and references that `xlp finetune
--task translation` decoded for that direction (`RUN/seed-S/predictions/<split>.<s>-<t>.jsonl`: the same
sentences, `--max-eval-sentences` included), translates the sources with `xlp translate` s -> VIA and then the
VIA text -> t (the run's checkpoint `--which best`, as finetune decodes; its beam and length penalty), and
scores the result as finetune scores the direct output (`finetune.quick_bleu`: detokenized sacreBLEU 13a and
tokenized BLEU). Both legs are real `xlp translate` commands on text: the pivot sees the detokenized VIA text.

    .venv/bin/python pipelines/pivot_baseline.py --run out/interlingua_tiny/finetune/univ --via en [--split test] [--threads N]

Writes RUN/pivot-VIA/<split>.<s>-<t>.jsonl (the direct and pivot rows) and RUN/pivot-VIA/results.json
({seed: {direction: {"direct": scores, "pivot": scores}}}: detokenized and tokenized BLEU and the share of
hypotheses that py3langid identifies as the target language) and prints one line per seed and direction.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xlp_cli.artifacts.files import write_json_atomic, write_text_atomic  # noqa: E402
from xlp_cli.prepare.sources.commoncrawl import identify  # noqa: E402
from xlp_cli.tasks.translation.finetune import quick_bleu  # noqa: E402

XLP = Path(sys.executable).parent / "xlp"


def bad(message: str) -> NoReturn:
    """Bad input or usage: one line on stderr, exit 2 (the CLI's convention)."""
    print(message, file=sys.stderr)
    sys.exit(2)


def translate(model: Path, lines: list[str], src: str, tgt: str, beam: int, length_penalty: float,
              work: Path, threads: int = 0) -> list[dict]:
    """`xlp translate --format jsonl` of `lines` (one per line) from src to tgt; its rows, in order."""
    inp, out = work / f"in.{src}-{tgt}", work / f"out.{src}-{tgt}.jsonl"
    inp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    cmd = [str(XLP), "translate", str(inp), "--model", str(model), "--which", "best", "--src-lang", src,
           "--tgt-lang", tgt, "--beam", str(beam), "--length-penalty", str(length_penalty), "--format", "jsonl",
           "--output", str(out), "--threads", str(threads)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr.strip()}", file=sys.stderr)
        sys.exit(done.returncode)  # (xlp translate's own code: 2 bad input, 1 the work failed)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    if len(rows) != len(lines):
        bad(f"xlp translate gave {len(rows)} lines for {len(lines)}")
    return rows


def on_target(hyps: list[str], lang: str) -> float:
    """The share of the hypotheses that py3langid (xlp's language identifier) says are in `lang`: a zero-shot
    model that answers in the wrong language (off-target, often English) scores low on BLEU for that reason."""
    return round(sum(identify(h)[0] == lang for h in hyps) / max(1, len(hyps)), 3)


def pivot_run(run: Path, via: str, split: str, threads: int = 0) -> dict[str, dict[str, dict]]:
    if not (run / "manifest.json").is_file():
        bad(f"{run}: not a finished `xlp finetune --task translation` folder (no manifest.json)")
    manifest = json.loads((run / "manifest.json").read_text())
    config = manifest.get("config", {})
    beam, lp = int(config.get("beam", 5)), float(config.get("length-penalty", 1.2))
    zero = manifest.get("zero_shot") or []
    if not zero:
        bad(f"{run}: the run has no zero-shot direction (its manifest's zero_shot is empty)")
    out = run / f"pivot-{via}"
    results: dict[str, dict[str, dict]] = {}
    for seed_dir in sorted(run.glob("seed-*")):
        lowercase = bool(json.loads((seed_dir / "results.json").read_text()).get("lowercased"))
        for d in zero:
            s, t = d.split("-")
            if via in (s, t):
                continue
            pred = seed_dir / "predictions" / f"{split}.{d}.jsonl"
            if not pred.is_file():
                bad(f"{pred}: no predictions of the zero-shot direction {d} (has the run finished?)")
            direct = [json.loads(line) for line in pred.read_text(encoding="utf-8").splitlines()]
            with tempfile.TemporaryDirectory() as tmp:
                first = translate(seed_dir, [r["source"] for r in direct], s, via, beam, lp, Path(tmp), threads)
                second = translate(seed_dir, [r["translation"] for r in first], via, t, beam, lp, Path(tmp), threads)
            rows = [{"id": r["id"], "source": r["source"], "ref": r["ref"], "ref_tok": r["ref_tok"],
                     "direct": r["hyp"], "via": a["translation"], "hyp": b["translation"], "hyp_tok": b["tokenized"]}
                    for r, a, b in zip(direct, first, second)]
            write_text_atomic(out / f"{seed_dir.name}.{split}.{d}.jsonl",
                              "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            results.setdefault(seed_dir.name, {})[d] = {
                "direct": {**quick_bleu(direct, lowercase), "on_target": on_target([r["hyp"] for r in direct], t)},
                "pivot": {**quick_bleu(rows, lowercase), "on_target": on_target([r["hyp"] for r in rows], t)}}
    write_json_atomic(out / "results.json", {"run": str(run), "via": via, "split": split, "beam": beam,
                                             "length_penalty": lp, "bleu": results})
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="an `xlp finetune --task translation` folder")
    ap.add_argument("--via", default="en", help="the pivot language (default en)")
    ap.add_argument("--split", default="test", choices=["valid", "test"])
    ap.add_argument("--threads", type=int, default=0, help="torch threads of each `xlp translate` (0: its default)")
    a = ap.parse_args()
    for seed, per in pivot_run(a.run, a.via, a.split, a.threads).items():
        for d, r in per.items():
            print(f"{a.run} {seed} {a.split} {d}: direct {r['direct']['bleu']:.2f} BLEU, pivot via {a.via} "
                  f"{r['pivot']['bleu']:.2f} BLEU ({r['pivot']['n']} sentences; tokenized {r['direct']['tok_bleu']:.2f} "
                  f"vs {r['pivot']['tok_bleu']:.2f}; in the target language: {r['direct']['on_target']:.0%} vs "
                  f"{r['pivot']['on_target']:.0%})")


if __name__ == "__main__":
    main()
