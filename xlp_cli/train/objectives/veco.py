"""VECO's cross-attention masked language modelling (CA-MLM, Luo et al. 2021, section 2, Eq. 1).

    objective = CrossAttentionMLM.create(cfg, inputs, model, rt)   # --objective ca-mlm | tlm+ca-mlm | mlm+ca-mlm

A micro-batch is a batch of pairs (x, y) in TLM layout (`train/streams.py`: parallel pairs, or for `mlm+ca-mlm`
adjacent sentences of one language), masked once as TLM masks it (80/10/10; parallel pairs at `--pair-word-pred`,
default 25% as VECO Table 8, adjacent sentences at `--word-pred`). The pair is cut
into its two sides, which run as one batch of 2B rows through the encoder twice (`models/veco.py`):
    h = self-attention only                 -> -log P(x | x^) - log P(y | y^)            (Eq. 10, 11)
    s = + cross-attention to sg(h^L) of the partner side -> -log P(x | y^, x^) - log P(y | x^, y^)   (Eq. 12, 13)
    loss = CE_h + CE_s   (each the mean over the masked tokens of x and y: XLM's per-token averaging)
`tlm+ca-mlm` adds TLM's loss on the concatenated pair with the same masks (VECO section 4: "the sum of TLM and
CA-MLM"). Logged: loss_h, loss_s (and loss_tlm).

Validation: as MLM/TLM, the masked-token loss of the monolingual valid windows with the cross-attention
unplugged (comparable across objectives; picks the best checkpoint); plus loss_h / loss_s on the first valid
pairs (parallel `valid/<l1>-<l2>`, or adjacent sentences of `valid/<lang>`). Without monolingual valid data,
loss_h of the valid pairs picks the best checkpoint.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.shards import shard_paths
from xlp_cli.artifacts.special_ids import N_SPECIAL, PAD
from xlp_cli.models.veco import Side, streams
from xlp_cli.train.adjacent import AdjacentStream
from xlp_cli.train.masking import mask_tokens, prediction_slots
from xlp_cli.train.objectives import PRETRAIN_OBJECTIVES
from xlp_cli.train.objectives.mlm import MaskedLM
from xlp_cli.train.runtime import Runtime, step_seed
from xlp_cli.train.shards import Batch, bucket
from xlp_cli.train.streams import PairStream


def split_pair(batch: Batch, inputs: torch.Tensor, targets: torch.Tensor, pred: torch.Tensor, step: int = 1
               ) -> tuple[Side, torch.Tensor, torch.Tensor]:
    """A TLM-layout batch `</s> x </s> </s> y </s>` -> its sides stacked as [x; y] (2B rows, each side from
    position 0, the width a multiple of `step`), with the targets and prediction mask cut the same way. On the
    host."""
    assert batch.positions is not None and batch.pad_mask is not None, "a pair batch (TLM layout)"
    b, t = inputs.shape
    length = (~batch.pad_mask).sum(1)
    restart = batch.positions.eq(0)
    restart[:, 0] = False
    start = restart.long().argmax(1)                       # where y begins
    sides = [(torch.zeros_like(start), start), (start, length - start)]
    width = bucket(max(int(n.max()) for _, n in sides), step)
    ar = torch.arange(width)[None]

    def cut(x: torch.Tensor, fill: Any) -> torch.Tensor:
        parts = []
        for offset, n in sides:
            got = x.gather(1, (offset[:, None] + ar).clamp(max=t - 1))
            parts.append(torch.where(ar < n[:, None], got, torch.full_like(got, fill)))
        return torch.cat(parts)

    pad = torch.cat([~(ar < n[:, None]).expand(b, -1) for _, n in sides])
    pair = Side(cut(inputs, PAD), cut(batch.langs, batch.present[0]), cut(batch.positions, 0), pad, batch.present)
    return pair, cut(targets, PAD), cut(pred, False)


def pair_losses(model: torch.nn.Module, pair: Side, targets: torch.Tensor, pred: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(CE of the h stream, CE of the s stream, masked tokens) over the masked tokens of both sides."""
    h, s = streams(model, pair)
    gold = targets[pred]
    ce = [F.cross_entropy(model.mlm_logits(model.token_states(z)[pred]).float(), gold) for z in (h, s)]
    return ce[0], ce[1], int(pred.sum())


def slot_pair_losses(model: torch.nn.Module, pair: Side, index: torch.Tensor, gold: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """`pair_losses` of the training step: the prediction set as fixed slots (`masking.prediction_slots`: flat
    positions and targets), so no host sync and fixed shapes."""
    h, s = streams(model, pair)
    out = []
    for z in (h, s):
        states = model.token_states(z)
        logits = model.mlm_logits(states.reshape(-1, states.shape[-1]).index_select(0, index))
        out.append(F.cross_entropy(logits.float(), gold))
    return out[0], out[1]


class CrossAttentionMLM(MaskedLM):
    with_tlm = False
    valid_pairs: dict[str, list[Batch]]
    mono_cfg: Any = None

    @classmethod
    def create(cls, cfg: Any, inputs: Any, model: torch.nn.Module, rt: Runtime) -> "CrossAttentionMLM":
        if not getattr(model.config, "cross_attention", False):
            raise ValueError("CA-MLM needs an encoder with cross_attention=True")
        mono_cfg = cfg
        if not PRETRAIN_OBJECTIVES[cfg.objective].adjacent:  # parallel pairs: VECO Table 8's bilingual mask rate
            cfg = dataclasses.replace(cfg, word_pred=cfg.pair_word_pred)
        obj = super().create(cfg, inputs, model, rt)
        obj.mono_cfg = mono_cfg  # the monolingual validation masks at --word-pred, as MLM/TLM runs do
        obj.with_tlm = PRETRAIN_OBJECTIVES[cfg.objective].with_tlm
        obj.valid_pairs = {}
        if rt.main:
            streams_by_name = {stream.pair: stream for stream in obj.data.pairs.values()}  # one per pair (or slot)
            for k, (name, stream) in enumerate(streams_by_name.items()):
                paths = shard_paths(layout.read_dir(inputs.ids_dir, "valid", name))
                if not paths:
                    continue
                args = (cfg.bptt, 0, stream.vocab_size, k)
                vs = (AdjacentStream(paths, name, stream.lang_indices[0], *args) if isinstance(stream, AdjacentStream)
                      else PairStream(paths, name, stream.lang_indices, *args))
                n = min(cfg.eval_batches, math.ceil(vs.n_rows / cfg.batch_size))
                obj.valid_pairs[name] = [vs.next_batch(cfg.batch_size) for _ in range(n)]
        return obj

    def micro_batches(self, step: int, n: int) -> Iterator[tuple[Any, ...]]:
        """MLM/TLM's masked micro-batch and its sides (on a GPU a multiple of 16 wide: few shapes), with the
        same prediction set as slots of the side layout."""
        step_width = max(1, self.shape_step // 2)
        for mb in super().micro_batches(step, n):
            pair, tgt, prd = split_pair(mb.batch, mb.inputs, mb.targets, mb.pred, step_width)
            yield mb, pair, prediction_slots(prd, tgt, len(mb.index))

    def loss(self, model: torch.nn.Module, item: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        mb, pair, (index, gold) = item
        dev = self.rt.device
        pair = Side(*(t.to(dev) for t in (pair.ids, pair.langs, pair.positions, pair.pad_mask)), pair.present)
        lh, ls = slot_pair_losses(model, pair, index.to(dev), gold.to(dev))
        total = lh + ls
        info: dict[str, Any] = {"tokens": self.global_tokens(mb.batch), "batches": mb.batch.name,
                                "loss_h": lh.detach(), "loss_s": ls.detach()}
        if self.with_tlm:
            lt = self.slot_loss(model, mb)
            total = total + lt
            info["loss_tlm"] = lt.detach()
        return total, info

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module) -> dict[str, Any] | None:
        pair_cfg, self.cfg = self.cfg, self.mono_cfg  # monolingual windows: comparable with MLM/TLM runs
        try:
            out = super().evaluate(model)
        finally:
            self.cfg = pair_cfg
        if not self.valid_pairs:
            return out
        model.eval()
        per: dict[str, dict[str, float]] = {}
        for name, batches in self.valid_pairs.items():
            sums = np.zeros(2)
            count = 0
            for i, b in enumerate(batches):
                gen = torch.Generator().manual_seed(step_seed(self.cfg.seed, 98, i, len(per)))
                inputs, targets, pred = mask_tokens(b.ids, b.pad_mask, gen, self.vocab_size, self.cfg.word_pred,
                                                    tuple(self.cfg.mask_probs), self.mask_weights)
                pair, tgt, prd = split_pair(b, inputs, targets, pred)
                pair = Side(*(t.to(self.rt.device) for t in (pair.ids, pair.langs, pair.positions, pair.pad_mask)))
                with self.rt.autocast():
                    lh, ls, n = pair_losses(model, pair, tgt.to(self.rt.device), prd.to(self.rt.device))
                sums += n * np.array([float(lh), float(ls)])
                count += n
            per[name] = {"loss_h": sums[0] / count, "loss_s": sums[1] / count, "n": count}
        out = dict(out or {})
        out["pairs"] = per
        out["loss_h"] = float(np.mean([v["loss_h"] for v in per.values()]))
        out["loss_s"] = float(np.mean([v["loss_s"] for v in per.values()]))
        out.setdefault("loss", out["loss_h"])
        return out

    def describe(self, m: dict[str, Any]) -> str:
        head = super().describe(m) if "ppl" in m else f"valid loss {m['loss']:.4f}"
        return head + (f"; valid pairs: h {m['loss_h']:.4f} s {m['loss_s']:.4f}" if "loss_s" in m else "")

    def probe_loss(self, model: torch.nn.Module, batch_size: int) -> torch.Tensor:
        dev, half = self.rt.device, max(2, self.cfg.bptt // 2)
        ids = torch.randint(N_SPECIAL, self.vocab_size, (2 * batch_size, half), device=dev)
        pair = Side(ids, torch.zeros_like(ids), None, torch.zeros_like(ids, dtype=torch.bool))
        pred = torch.rand(ids.shape, device=dev) < self.cfg.word_pred
        lh, ls, _ = pair_losses(model, pair, ids, pred)
        loss = lh + ls
        if self.with_tlm:
            loss = loss + super().probe_loss(model, batch_size)
        return loss
