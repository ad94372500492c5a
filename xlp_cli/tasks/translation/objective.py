"""The translation objective on the engine: label-smoothed cross-entropy of a target given its source (or the
interlingua's sum of loss terms), token batches of directions mixed by temperature sampling, and the validation
NLL per token that picks the best checkpoint."""

from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np
import torch

from xlp_cli.models.interlingua import interlingua_losses
from xlp_cli.models.seq2seq import Seq2Seq, label_smoothed_nll, targets
from xlp_cli.tasks.translation.data import MixedBatcher, Pairs, collate, split_direction, token_batches
from xlp_cli.train.objectives.base import Objective
from xlp_cli.train.runtime import Runtime


def batch_loss(model: Seq2Seq, arch: str, x: torch.Tensor, x_lang: torch.Tensor, y: torch.Tensor, y_lang: torch.Tensor,
               epsilon: float, intl_losses: list[str]) -> tuple[torch.Tensor, dict[str, float]]:
    """Training loss of a batch of pairs x -> y (ids without `</s>`), and numbers to log."""
    if arch == "interlingua":
        terms = interlingua_losses(model, x, x_lang, y, y_lang, intl_losses, epsilon)
        loss = sum(t["loss"] for t in terms.values())
        logs = {f"loss_{k}": float(v["loss"].detach()) for k, v in terms.items()}
        if "s2t" in terms:
            logs["nll"] = terms["s2t"]["nll"] / max(terms["s2t"]["n"], 1)
        return loss, logs  # type: ignore[return-value]
    logits = model(targets(x), x_lang, y, y_lang)
    loss, nll, n = label_smoothed_nll(logits, targets(y), epsilon)
    return loss / max(n, 1), {"nll": float(nll.detach()) / max(n, 1)}


@torch.no_grad()
def valid_nll(model: Seq2Seq, data: dict[str, Pairs], langs: list[str], max_tokens: int, rt: Runtime) -> dict[str, float]:
    """Per-token NLL of each direction's references (teacher forcing)."""
    model.eval()
    out = {}
    for d, pairs in data.items():
        s, t = split_direction(d)
        tot, n = 0.0, 0
        for b in token_batches(pairs, max_tokens):
            x = collate([pairs.src[i] for i in b]).to(rt.device)
            y = collate([pairs.tgt[i] for i in b]).to(rt.device)
            sl = torch.full((len(b),), langs.index(s), device=rt.device)
            tl = torch.full((len(b),), langs.index(t), device=rt.device)
            with rt.autocast():
                logits = model(targets(x), sl, y, tl)
            _, nll, k = label_smoothed_nll(logits, targets(y), 0.0)
            tot += float(nll)
            n += k
        out[d] = tot / max(n, 1)
    return out


class Translate(Objective):
    metric, maximize = "valid_nll", False

    def __init__(self, batcher: MixedBatcher, valid: dict[str, Pairs], langs: list[str], arch: str, epsilon: float,
                 intl_losses: list[str], max_tokens: int, find_unused: bool, rt: Runtime):
        self.batcher, self.valid, self.langs, self.arch = batcher, valid, langs, arch
        self.epsilon, self.intl_losses, self.max_tokens, self.rt = epsilon, list(intl_losses), max_tokens, rt
        self.find_unused_parameters = find_unused
        self.index = {l: i for i, l in enumerate(langs)}

    def micro_batches(self, step: int, n: int) -> Iterator[tuple[Any, ...]]:
        for _ in range(n):
            d, x, y = self.batcher.next(self.rt.rank, self.rt.world)
            yield d, x, y, self.batcher.last_tokens

    def loss(self, model: torch.nn.Module, b: tuple[Any, ...]) -> tuple[torch.Tensor, dict[str, Any]]:
        d, x, y, tokens = b
        s, t = split_direction(d)
        x, y = x.to(self.rt.device), y.to(self.rt.device)
        xl = torch.full((x.size(0),), self.index[s], device=self.rt.device)
        yl = torch.full((y.size(0),), self.index[t], device=self.rt.device)
        loss, logs = batch_loss(model, self.arch, x, xl, y, yl, self.epsilon, self.intl_losses)
        return loss, {"tokens": tokens, "direction": d, **logs}

    def evaluate(self, model: torch.nn.Module) -> dict[str, Any] | None:
        if not self.valid:
            return None
        v = valid_nll(model, self.valid, self.langs, self.max_tokens, self.rt)
        return {"valid_nll": float(np.mean(list(v.values()))), "per_direction": v}

    def describe(self, m: dict[str, Any]) -> str:
        return f"valid NLL {m['valid_nll']:.3f} (ppl {math.exp(min(m['valid_nll'], 50.0)):.1f})"

    def state_dict(self) -> dict[str, Any]:
        return {"batcher": self.batcher.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batcher.state = state.get("batcher", state)  # xlp 0.1 kept the batcher's state itself
