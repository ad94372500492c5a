"""The one rule for a warm-up that does not fit its run (torch-free: configs check it before any data is read).

`warmup >= max_steps` is refused with one line: with the schedule of `schedule.py` the learning rate would end
at peak * max_steps / warmup and never reach its peak (xlp 0.1's README ran `--max-steps 2000` with the default
`--warmup 16000`: lr 1.25e-5 of 1e-4 at the last step; a tiny translation run ended at 1.05e-5 with BLEU 0).
A warm-up of more than half the run is allowed with a warning. The engine applies the rule to every run (XNLI
and translation know their length only once their data is read); `xlp pretrain` and `--max-steps` runs of
`xlp finetune` apply it when their config is built. Why refuse rather than clamp: see docs/pretrain.md.
"""

from __future__ import annotations

from xlp_cli.errors import BadInput


def check_warmup(warmup: int, max_steps: int, lr: float | None = None) -> str | None:
    """Raise BadInput for a warm-up >= the run; return a warning for one longer than half of it; else None."""
    if warmup <= 0 or max_steps <= 0:
        return None
    suggestion = max(1, max_steps // 10)
    if warmup >= max_steps:
        peak = f" ({lr * max_steps / warmup:.3g} of {lr:g})" if lr else ""
        raise BadInput(f"--warmup {warmup} is not shorter than the run ({max_steps} steps): the learning rate would "
                       f"reach only {100 * max_steps / warmup:.0f}% of --lr{peak}; use --warmup {suggestion} "
                       f"(10% of the run) or another value below {max_steps}")
    if warmup > max_steps // 2:
        return (f"--warmup {warmup} is more than half of the run ({max_steps} steps): the learning rate peaks late; "
                f"about 10% ({suggestion}) is usual")
    return None
