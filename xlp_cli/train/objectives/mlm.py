"""MLM and TLM (XLM): predict masked tokens of monolingual stream windows or of parallel pairs.

    objective = MaskedLM.create(cfg, inputs, model, rt)      # cfg: PretrainConfig; --objective mlm|tlm|mlm+tlm

A micro-batch of update s is drawn by `PretrainData` for the whole DDP world (the same on every process) and
process r keeps rows [r*B, (r+1)*B); its masking is seeded from (seed, s, micro, r). Validation: the first
`eval_batches` windows of each language's valid split, masked with fixed seeds; the best checkpoint is the one
with the lowest mean loss over languages.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from xlp_cli import ui
from xlp_cli.special_ids import N_SPECIAL
from xlp_cli.train.data import Batch, PretrainData, valid_batches
from xlp_cli.train.masking import mask_scores, mask_tokens
from xlp_cli.train.objectives.base import Objective
from xlp_cli.train.runtime import Runtime, step_seed


class MaskedLM(Objective):
    metric, maximize = "loss", False

    def __init__(self, cfg: Any, data: PretrainData, valid: dict[str, list[Batch]], langs: list[str],
                 vocab_size: int, mask_weights: torch.Tensor | None, rt: Runtime):
        self.cfg, self.data, self.valid, self.langs, self.rt = cfg, data, valid, langs, rt
        self.vocab_size, self.mask_weights = vocab_size, mask_weights
        self.batch_size = cfg.batch_size

    @classmethod
    def create(cls, cfg: Any, inputs: Any, model: torch.nn.Module, rt: Runtime) -> "MaskedLM":
        vocab_size = len(inputs.dictionary)
        data = PretrainData(inputs.ids_dir, inputs.langs, cfg.objective, cfg.bptt, cfg.seed, vocab_size, cfg.lang_alpha)
        for stream in [*data.mono.values(), *data.pairs.values()]:
            stream._load()  # reads the first row group: catches ids outside the dictionary before training
        valid: dict[str, list[Batch]] = {}
        if rt.main:
            for i, lang in enumerate(inputs.langs):
                b = valid_batches(inputs.ids_dir, lang, i, cfg.bptt, cfg.batch_size, cfg.eval_batches, vocab_size)
                if b:
                    valid[lang] = b
                else:
                    ui.warn(f"no valid split for '{lang}' in {inputs.ids_dir}: it is not validated")
        weights = mask_scores(np.asarray(inputs.dictionary.counts, dtype=np.int64), cfg.sample_alpha)
        return cls(cfg, data, valid, inputs.langs, vocab_size, weights, rt)

    # ---------------------------------------------------------------- training
    def micro_batches(self, step: int, n: int) -> Iterator[tuple[Batch, torch.Tensor, torch.Tensor, torch.Tensor]]:
        cfg, rank, world = self.cfg, self.rt.rank, self.rt.world
        for micro in range(n):
            full = self.data.next_batch(step, micro, cfg.batch_size * world)
            sl = slice(rank * cfg.batch_size, (rank + 1) * cfg.batch_size)
            batch = Batch(full.ids[sl], full.langs[sl], None if full.positions is None else full.positions[sl],
                          None if full.pad_mask is None else full.pad_mask[sl], full.name)
            gen = torch.Generator().manual_seed(step_seed(cfg.seed, step, micro, rank, 11))
            inputs, targets, pred = mask_tokens(batch.ids, batch.pad_mask, gen, self.vocab_size, cfg.word_pred,
                                                tuple(cfg.mask_probs), self.mask_weights)
            yield batch, inputs, targets, pred

    def _logits(self, model: torch.nn.Module, batch: Batch, inputs: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        dev = self.rt.device
        return model(inputs.to(dev), batch.langs.to(dev), None if batch.positions is None else batch.positions.to(dev),
                     None if batch.pad_mask is None else batch.pad_mask.to(dev), pred.to(dev))

    def loss(self, model: torch.nn.Module, mb: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        batch, inputs, targets, pred = mb
        logits = self._logits(model, batch, inputs, pred)
        tgt = targets.to(self.rt.device)[pred.to(self.rt.device)]
        return F.cross_entropy(logits.float(), tgt), {"tokens": batch.n_tokens * self.rt.world, "batches": batch.name}

    def state_dict(self) -> dict[str, Any]:
        return self.data.state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.data.load_state(state)

    # ---------------------------------------------------------------- validation
    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module) -> dict[str, Any] | None:
        if not self.valid:
            return None
        model.eval()
        out: dict[str, Any] = {"langs": {}}
        losses = []
        for lang, batches in self.valid.items():
            nll, correct, n = 0.0, 0, 0
            for i, b in enumerate(batches):
                gen = torch.Generator().manual_seed(step_seed(self.cfg.seed, 99, i, self.langs.index(lang)))
                inputs, targets, pred = mask_tokens(b.ids, b.pad_mask, gen, self.vocab_size, self.cfg.word_pred,
                                                    tuple(self.cfg.mask_probs), self.mask_weights)
                with self.rt.autocast():
                    logits = self._logits(model, b, inputs, pred)
                tgt = targets[pred].to(self.rt.device)
                nll += float(F.cross_entropy(logits.float(), tgt, reduction="sum"))
                correct += int((logits.argmax(-1) == tgt).sum())
                n += int(pred.sum())
            if n:
                loss = nll / n
                out["langs"][lang] = {"loss": loss, "ppl": math.exp(min(loss, 50.0)), "acc": correct / n, "n": n}
                losses.append(loss)
        if not losses:
            return None
        out["loss"] = float(np.mean(losses))
        out["ppl"] = math.exp(min(out["loss"], 50.0))
        out["acc"] = float(np.mean([v["acc"] for v in out["langs"].values()]))
        return out

    def describe(self, m: dict[str, Any]) -> str:
        return f"valid loss {m['loss']:.4f} ppl {m['ppl']:.2f} acc {m['acc']:.3f}"

    def probe_loss(self, model: torch.nn.Module, batch_size: int) -> torch.Tensor:
        dev, bptt = self.rt.device, self.cfg.bptt
        ids = torch.randint(N_SPECIAL, self.vocab_size, (batch_size, bptt), device=dev)
        pred = torch.rand(ids.shape, device=dev) < self.cfg.word_pred
        return F.cross_entropy(model(ids, torch.zeros_like(ids), None, None, pred).float(), ids[pred])
