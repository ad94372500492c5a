"""Paired verdicts between two translation systems over seeds, with the rule of docs/results/README.md.

Each arm is a list of `xlp finetune --task translation` folders (or their seed-* folders), one per seed; the
i-th folder of arm A is paired with the i-th of arm B (the same data, the i-th seed of each). A claim is "B
beats A on the mean test BLEU (detokenized, from each seed's results.json) of these directions". Per claim:
a one-sided paired t-test over the seeds (reporting.stats.paired_test), Holm-adjusted p across the claims given
(one paper's family), the verdict (reproduced in direction / not reproduced / inconclusive) and the power line:
the smallest true difference the seed count and the observed spread would detect (alpha 0.05 and alpha/m,
power 0.8; reporting.stats.mde).

    .venv/bin/python pipelines/translation_verdict.py --a UNIV DIR1 DIR2 --b INTL+REC+SIM DIR1 DIR2 \\
        --claim zero-shot=de-fr,fr-de --claim supervised=de-en,en-de,en-fr,fr-en [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xlp_cli.reporting.stats import holm, mde, paired_test, verdict  # noqa: E402


def bad(message: str) -> NoReturn:
    """Bad input or usage: one line on stderr, exit 2 (the CLI's convention)."""
    print(message, file=sys.stderr)
    sys.exit(2)


def seed_results(folder: Path) -> dict:
    """The test BLEU of one seed: FOLDER/results.json of a seed-* folder, or the only seed of a run folder."""
    if (folder / "results.json").is_file() and folder.name.startswith("seed-"):
        return json.loads((folder / "results.json").read_text())["bleu"]["test"]
    seeds = sorted(folder.glob("seed-*/results.json"))
    if len(seeds) != 1:
        bad(f"{folder}: {len(seeds)} seed folders; name one seed-* folder per seed")
    return json.loads(seeds[0].read_text())["bleu"]["test"]


def mean_bleu(test: dict, directions: list[str], folder: str) -> float:
    missing = [d for d in directions if d not in test]
    if missing:
        bad(f"{folder}: no test BLEU for {', '.join(missing)}")
    return sum(test[d]["bleu"] for d in directions) / len(directions)


def verdicts(a: list[Path], b: list[Path], claims: dict[str, list[str]]) -> dict:
    if len(a) != len(b) or not a:
        bad(f"the arms need as many folders each (seeds paired in order): {len(a)} vs {len(b)}")
    res_a, res_b = [seed_results(f) for f in a], [seed_results(f) for f in b]
    out = {}
    for name, dirs in claims.items():
        va = [mean_bleu(r, dirs, str(f)) for r, f in zip(res_a, a)]
        vb = [mean_bleu(r, dirs, str(f)) for r, f in zip(res_b, b)]
        test = paired_test([y - x for x, y in zip(va, vb)], +1)
        out[name] = {"directions": dirs, "a": [round(v, 2) for v in va], "b": [round(v, 2) for v in vb], **test}
    adjusted = holm([c["p"] for c in out.values()])
    against = holm([c["p_against"] for c in out.values()])
    m = sum(not math.isnan(c["p"]) for c in out.values()) or 1
    for c, p_adj, q_adj in zip(out.values(), adjusted, against):
        c.update(p_holm=p_adj, p_against_holm=q_adj, verdict=verdict(p_adj, q_adj, 0.05),
                 mde=mde(c["sd_diff"], c["n"]), mde_holm=mde(c["sd_diff"], c["n"], alpha=0.05 / m))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", nargs="+", required=True, metavar=("NAME", "DIR"), help="the baseline: a name, then its folders")
    ap.add_argument("--b", nargs="+", required=True, metavar=("NAME", "DIR"), help="the claimed-better system")
    ap.add_argument("--claim", action="append", required=True, help="NAME=dir,dir,...: B's mean BLEU over these beats A's")
    ap.add_argument("--json", type=Path, help="write the verdicts here")
    args = ap.parse_args()
    claims = {}
    for c in args.claim:
        name, _, dirs = c.partition("=")
        if not dirs:
            bad(f"--claim {c!r}: NAME=dir,dir,...")
        claims[name] = dirs.split(",")
    res = verdicts([Path(p) for p in args.a[1:]], [Path(p) for p in args.b[1:]], claims)
    for name, c in res.items():
        print(f"{name}: {args.b[0]} {c['b']} vs {args.a[0]} {c['a']} BLEU; mean difference {c['mean_diff']:+.2f} "
              f"(sd {c['sd_diff']:.2f}, n {c['n']}); p {c['p']:.4g}, Holm {c['p_holm']:.4g}: {c['verdict']}; "
              f"detectable with power 0.8: {c['mde']:.2f} BLEU (at alpha/m: {c['mde_holm']:.2f})")
    if args.json:
        args.json.write_text(json.dumps({"a": args.a, "b": args.b, "claims": res}, indent=1) + "\n")


if __name__ == "__main__":
    main()
