"""The one rule for a warm-up that does not fit its run (torch-free: configs may check it before any data is read).

`warmup >= max_steps` leaves the learning rate below its peak for the whole run (it ends at
peak * max_steps / warmup): xlp 0.1's README ran `--max-steps 2000` with the default `--warmup 16000` (lr 1.25e-5
of 1e-4 at the last step; a tiny translation run ended at 1.05e-5 with BLEU 0). The engine says so in a loud
warning naming a warm-up of 10% of the run, as it does for a warm-up of more than half the run. It warns rather
than refuses: a short smoke run (`--max-steps 2`) must still run, and `--max-steps` may grow on resume while
`--warmup` is part of the run's identity (docs/pretrain.md).
"""

from __future__ import annotations


def check_warmup(warmup: int, max_steps: int, lr: float | None = None) -> str | None:
    """A warning for a warm-up >= the run or longer than half of it; else None."""
    if warmup <= 0 or max_steps <= 0:
        return None
    suggestion = max(1, max_steps // 10)
    if warmup >= max_steps:
        peak = f" ({lr * max_steps / warmup:.3g} of {lr:g})" if lr else ""
        return (f"--warmup {warmup} is not shorter than the run ({max_steps} steps): the learning rate reaches only "
                f"{100 * max_steps / warmup:.0f}% of --lr{peak}; --warmup {suggestion} (10% of the run) or another "
                f"value below {max_steps} lets it reach its peak")
    if warmup > max_steps // 2:
        return (f"--warmup {warmup} is more than half of the run ({max_steps} steps): the learning rate peaks late; "
                f"about 10% ({suggestion}) is usual")
    return None
