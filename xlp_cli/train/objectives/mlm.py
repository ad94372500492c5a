"""MLM and TLM (XLM): predict masked tokens of monolingual stream windows or of parallel pairs.

    objective = MaskedLM.create(cfg, inputs, model, rt)      # cfg: PretrainConfig; --objective mlm|tlm|mlm+tlm

The data is read in `--data-slots` K parts (default: one per process); process r of W builds the batches of
slots r, r+W, ... only (B windows each) and reads only their row groups, so no process builds the global batch.
A slot's masking is seeded from (seed, s, micro, slot): the batches and masks do not depend on W, and a
1-process run with the same K replays an N-process run (the engine averages over all slots' micro-batches). Validation: the first
`eval_batches` windows of each language's valid split, masked with fixed seeds; the best checkpoint is the one
with the lowest mean loss over languages.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.shards import shard_paths
from xlp_cli.artifacts.special_ids import N_SPECIAL
from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput
from xlp_cli.train.data import PretrainData, valid_batches
from xlp_cli.train.masking import capacity, mask_scores, mask_tokens, prediction_slots
from xlp_cli.train.objectives.base import Objective
from xlp_cli.train.runtime import Runtime, step_seed
from xlp_cli.train.shards import SHAPE_STEP, Batch, bucket


def _stream_tokens(paths: list[Any]) -> int:
    """Tokens of a language's stream in these id shards (each sentence and its </s>)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    return sum(int(pc.sum(pc.list_value_length(pq.read_table(p, columns=["ids"])["ids"])).as_py() or 0)
               + pq.read_metadata(p).num_rows for p in paths)


def lang_scores(nll: float, correct: int, n: int) -> dict[str, Any]:
    """One language's validation numbers from its summed NLL and right predictions over n tokens."""
    loss = nll / n
    return {"loss": loss, "ppl": math.exp(min(loss, 50.0)), "acc": correct / n, "n": n}


def summarize(out: dict[str, Any]) -> dict[str, Any]:
    """The means over languages of `out["langs"]` (the best checkpoint has the lowest mean loss)."""
    out["loss"] = float(np.mean([v["loss"] for v in out["langs"].values()]))
    out["ppl"] = math.exp(min(out["loss"], 50.0))
    out["acc"] = float(np.mean([v["acc"] for v in out["langs"].values()]))
    return out


@dataclasses.dataclass
class Masked:
    """One masked micro-batch, built on the host by the input pipeline: the batch, its corrupted inputs, the
    targets (the original ids), the prediction mask [B, T], and the same set as fixed slots: their flat
    positions and targets (`masking.prediction_slots`; unused slots have the target IGNORE)."""
    batch: Batch
    inputs: torch.Tensor
    targets: torch.Tensor
    pred: torch.Tensor
    index: torch.Tensor
    gold: torch.Tensor


class MaskedLM(Objective):
    metric, maximize = "loss", False
    prefetch = True

    def __init__(self, cfg: Any, inputs: Any, valid: dict[str, list[Batch]], langs: list[str],
                 vocab_size: int, mask_weights: torch.Tensor | None, rt: Runtime):
        self.cfg, self.inputs, self.valid, self.langs, self.rt = cfg, inputs, valid, langs, rt
        self.vocab_size, self.mask_weights = vocab_size, mask_weights
        self.batch_size = cfg.batch_size
        self.shape_step = SHAPE_STEP if rt.device.type == "cuda" else 1  # padded lengths: multiples of this
        self.data = self._data(cfg.data_slots or rt.world)

    def _data(self, slots: int) -> PretrainData:
        """The streams of this process's data slots (slot k of K is read by process k mod W)."""
        rank, world = self.rt.rank, self.rt.world
        if slots % world:
            raise BadInput(f"{world} processes cannot share {slots} data slots: use a number of processes that divides "
                           f"--data-slots {slots} (a run keeps the slots it started with)")
        cfg, inp = self.cfg, self.inputs
        data = PretrainData(inp.ids_dir, inp.langs, cfg.objective, cfg.bptt, cfg.seed, self.vocab_size,
                            cfg.lang_alpha, slots, [k for k in range(slots) if k % world == rank])
        for stream in [*data.mono.values(), *data.pairs.values()]:
            stream._load()  # reads the first row group: catches ids outside the dictionary before training
        return data

    @classmethod
    def data_bptt(cls, cfg: Any, inputs: Any) -> tuple[int, str]:
        """The --bptt the validation data allows, and a notice ("" when it is --bptt). A --bptt longer than the
        whole valid split of every language would leave nothing to validate (`best` would be a guess): it falls
        back to the largest power of two (at least 8) that fits the shortest valid split, or the longest when the
        shortest is under 8 tokens, so that languages are validated. No valid split at all: --bptt stays."""
        tokens = {lang: _stream_tokens(paths) for lang in inputs.langs
                  for paths in [shard_paths(layout.read_dir(inputs.ids_dir, "valid", lang))] if paths}
        if not tokens or max(tokens.values()) + 1 >= cfg.bptt:  # (a stream starts with </s>: one token more)
            return cfg.bptt, ""
        longest, shortest = max(tokens.values()), min(tokens.values())
        if longest < 8:
            raise BadInput(f"the valid split of every language has fewer than 8 tokens (the longest: {longest}): "
                           "nothing could be validated; prepare more data", path=inputs.ids_dir / "valid")
        fits = shortest if shortest >= 8 else longest
        bptt = 2 ** (fits.bit_length() - 1)  # the largest power of two <= fits
        return bptt, (f"--bptt {cfg.bptt} is longer than the whole valid split of every language (the longest has "
                      f"{longest} tokens): using --bptt {bptt}")

    @classmethod
    def create(cls, cfg: Any, inputs: Any, model: torch.nn.Module, rt: Runtime) -> "MaskedLM":
        vocab_size = len(inputs.dictionary)
        valid: dict[str, list[Batch]] = {}
        if rt.main:
            short: dict[str, int] = {}  # languages whose whole valid split is shorter than one window: tokens
            for i, lang in enumerate(inputs.langs):
                b = valid_batches(inputs.ids_dir, lang, i, cfg.bptt, cfg.batch_size, cfg.eval_batches, vocab_size)
                if b:
                    valid[lang] = b
                elif shard_paths(layout.read_dir(inputs.ids_dir, "valid", lang)):
                    short[lang] = _stream_tokens(shard_paths(layout.read_dir(inputs.ids_dir, "valid", lang)))
                else:
                    short[lang] = 0
            if any(short.values()) and not valid:  # a run that can never be validated: `best` would be a guess
                raise BadInput(f"--bptt {cfg.bptt} is longer than the whole valid split of every language (the "
                               f"largest has {max(short.values())} tokens): nothing would be validated; lower --bptt "
                               f"to at most {max(short.values())}, or prepare more data", path=inputs.ids_dir / "valid")
            if short:  # one line for all of them (the demo's small catalogs: sw, ur)
                which = ", ".join(f"{lang} ({f'{n} tokens' if n else 'no valid split'})" for lang, n in short.items())
                ui.warn(f"{ui.plural(len(short), 'language')} of {len(inputs.langs)} not validated, too little valid "
                        f"data for --bptt {cfg.bptt}: {which}; "
                        + ("the validation loss covers the others" if valid else "nothing is validated"))
        weights = mask_scores(np.asarray(inputs.dictionary.counts, dtype=np.int64), cfg.sample_alpha)
        return cls(cfg, inputs, valid, inputs.langs, vocab_size, weights, rt)

    # ---------------------------------------------------------------- training
    def masked(self, batch: Batch, gen: torch.Generator) -> "Masked":
        """A micro-batch of the training step: `batch` masked, its prediction set as fixed slots. On a GPU a
        pair batch is padded to a multiple of `shape_step` (32) first, at most --bptt, so the steps have a few
        shapes only (`torch.compile` compiles each once)."""
        cfg = self.cfg
        if self.shape_step > 1 and batch.pad_mask is not None:
            batch = batch.padded(min(cfg.bptt, bucket(batch.ids.shape[1], self.shape_step)))
        inputs, targets, pred = mask_tokens(batch.ids, batch.pad_mask, gen, self.vocab_size, cfg.word_pred,
                                            tuple(cfg.mask_probs), self.mask_weights)
        index, gold = prediction_slots(pred, targets, capacity(cfg.word_pred, tuple(batch.ids.shape)))
        return Masked(batch, inputs, targets, pred, index, gold)

    def micro_batches(self, step: int, n: int) -> Iterator["Masked"]:
        cfg = self.cfg
        for micro in range(n):
            for slot, batch in self.data.next_batches(step, micro, cfg.batch_size):
                yield self.masked(batch, torch.Generator().manual_seed(step_seed(cfg.seed, step, micro, slot, 11)))

    def _logits(self, model: torch.nn.Module, batch: Batch, inputs: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        dev = self.rt.device
        return model(inputs.to(dev), batch.langs.to(dev), None if batch.positions is None else batch.positions.to(dev),
                     None if batch.pad_mask is None else batch.pad_mask.to(dev), pred.to(dev), present=batch.present)

    def slot_loss(self, model: torch.nn.Module, mb: "Masked") -> torch.Tensor:
        """The mean cross-entropy over the masked tokens, from the fixed prediction slots (no host sync)."""
        logits = self._logits(model, mb.batch, mb.inputs, mb.index.to(self.rt.device))
        return F.cross_entropy(logits.float(), mb.gold.to(self.rt.device))

    def loss(self, model: torch.nn.Module, mb: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        return self.slot_loss(model, mb), {"tokens": self.global_tokens(mb.batch), "batches": mb.batch.name}

    def global_tokens(self, batch: Batch) -> int:
        """The tokens of this micro-batch over all processes (slots per process: the global count from this one)."""
        return batch.n_tokens * (self.data.slots // len(self.data.local))

    def data_position(self) -> dict[str, Any]:
        return self.data.state()

    def state_dict(self, position: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every slot's stream position (gathered from all processes: call it on every process)."""
        state = copy.deepcopy(position) if position is not None else self.data.state()
        if self.rt.world > 1:
            import torch.distributed as dist

            parts: list[Any] = [None] * self.rt.world
            dist.all_gather_object(parts, state)
            for p in parts:
                for key in ("mono", "pairs"):
                    state[key].update(p[key])
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        slots = int(state.get("slots", 1))
        if slots != self.data.slots:  # a run keeps the data slots it started with, whatever the world size now
            self.data = self._data(slots)
        self.data.load_state(state)

    # ---------------------------------------------------------------- validation
    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module) -> dict[str, Any] | None:
        if not self.valid:
            return None
        model.eval()
        out: dict[str, Any] = {"langs": {}}
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
                out["langs"][lang] = lang_scores(nll, correct, n)
        return summarize(out) if out["langs"] else None

    def describe(self, m: dict[str, Any]) -> str:
        return f"valid loss {m['loss']:.4f} ppl {m['ppl']:.2f} acc {m['acc']:.3f}"

    def probe_loss(self, model: torch.nn.Module, batch_size: int) -> torch.Tensor:
        dev, bptt = self.rt.device, self.cfg.bptt
        ids = torch.randint(N_SPECIAL, self.vocab_size, (batch_size, bptt), device=dev)
        index = torch.randint(0, ids.numel(), (capacity(self.cfg.word_pred, tuple(ids.shape)),), device=dev)
        logits = model(ids, torch.zeros_like(ids), None, None, index, present=(0,))
        return F.cross_entropy(logits.float(), ids.reshape(-1).index_select(0, index))
