"""Multi-node pre-training as torchrun runs it: 2 "nodes" of 1 process each over 127.0.0.1 (gloo).

Each process reads only its data slot; the loss curve equals a 1-process run with the same `--data-slots`;
a run started on 2 nodes continues in 1 process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pretrain_helpers import synthetic

from xlp_cli.models.checkpoint import load_pretrained

REPO = Path(__file__).resolve().parent.parent
ARGS = ["--preset", "tiny", "--bptt", "32", "--batch-size", "4", "--accumulate", "2", "--warmup", "3", "--lr", "2e-3",
        "--log-every", "1", "--seed", "3", "--num-threads", "1", "--dropout", "0", "--attention-dropout", "0",
        "--lang-encoding", "xlp", "--objective", "mlm+tlm", "--eval-every", "2", "--data-slots", "2"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _losses(run: Path) -> list[tuple[int, float]]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows if r["event"] == "train"]


def _two_nodes(ids: Path, out: Path, steps: int) -> None:
    port, env = _port(), {**os.environ, "XLP_QUIET": "1", "OMP_NUM_THREADS": "1"}
    cmd = lambda rank: [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(rank),  # noqa: E731
                        "--nproc-per-node", "1", "--rdzv-endpoint", f"127.0.0.1:{port}", "-m", "xlp_cli.cli", "pretrain",
                        "--data", str(ids), "--out", str(out), *ARGS, "--max-steps", str(steps)]
    nodes = [subprocess.Popen(cmd(r), cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in (0, 1)]
    for p in nodes:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]


@pytest.mark.slow
def test_two_nodes_match_one_process_and_resume_in_one(tmp_path, cli) -> None:
    ids = synthetic(tmp_path / "ids", pairs=True, row_group_size=50)  # several row groups per language: real slots
    single = tmp_path / "single"
    r = cli("pretrain", "--data", ids, "--out", single, *ARGS, "--max-steps", "6")
    assert r.exit_code == 0, r.stderr
    multi = tmp_path / "multi"
    _two_nodes(ids, multi, 4)
    r = cli("pretrain", "--data", ids, "--out", multi, *ARGS, "--max-steps", "6", "--json")  # now 1 process
    assert r.exit_code == 0, r.stderr
    a, b = _losses(single), _losses(multi)
    assert [s for s, _ in a] == [s for s, _ in b] == list(range(1, 7))
    for (_, la), (_, lb) in zip(a, b):
        assert abs(la - lb) <= 1e-4 * max(1.0, abs(la)), (a, b)
    wa, wb = load_pretrained(single, "last").state_dict(), load_pretrained(multi, "last").state_dict()
    for k in wa:
        x, y = wa[k], wb[k]
        if k.endswith("attn.qkv.bias"):  # the key bias has a zero gradient up to rounding noise, which Adam
            x, y = x.chunk(3)[0::2], y.chunk(3)[0::2]  # normalises to lr-sized steps: compare q and v only
            assert all(torch.allclose(u, v, atol=1e-5) for u, v in zip(x, y)), k
        else:
            assert torch.allclose(x, y, atol=1e-5), k
    meta = json.loads((multi / "checkpoints" / "last" / "meta.json").read_text())
    assert meta["objective"]["slots"] == 2 and {"en/0", "en/1", "fr/0", "fr/1"} <= set(meta["objective"]["mono"])
    rows = [json.loads(x) for x in (multi / "metrics.jsonl").read_text().splitlines() if '"train"' in x]
    assert [r["world_size"] for r in rows] == [2, 2, 2, 2, 1, 1]


def test_each_slot_reads_only_its_row_groups(tmp_path) -> None:
    from xlp_cli.train.data import PretrainData

    ids = synthetic(tmp_path / "ids", row_group_size=50)  # 300 sentences a language: 6 row groups
    whole = PretrainData(ids, ["en", "fr"], "mlm", 32, 0, 10_000, 0.7)
    halves = [PretrainData(ids, ["en", "fr"], "mlm", 32, 0, 10_000, 0.7, slots=2, local_slots=[k]) for k in (0, 1)]
    groups = {k: {(p.name, rg) for p, rg, _ in h.mono[f"en/{k}"].groups} for k, h in enumerate(halves)}
    assert groups[0].isdisjoint(groups[1])
    assert groups[0] | groups[1] == {(p.name, rg) for p, rg, _ in whole.mono["en"].groups}
    both = PretrainData(ids, ["en", "fr"], "mlm", 32, 0, 10_000, 0.7, slots=2)
    for step in range(5):  # one process with both slots draws exactly what the two processes draw
        got = both.next_batches(step, 0, 4)
        want = [halves[k].next_batches(step, 0, 4)[0] for k in (0, 1)]
        assert [k for k, _ in got] == [0, 1]
        assert all(torch.equal(g.ids, w.ids) and g.name == w.name for (_, g), (_, w) in zip(got, want))
