"""MASS (Song et al. 2019; VLE appendix A.1): an encoder-decoder learns to predict a masked span of a sentence.

    xlp pretrain --objective mass --data IDS [--data VOCAB] --lang en,de --lang-encoding vle ...

For a sentence w_1 .. w_n (cut to --bptt - 1 tokens) of language l:
- one contiguous span of m = max(1, round(n * --word-mass)) tokens (half the sentence by default) starts at the
  first token with probability 0.2, ends at the last with probability 0.2, and lies anywhere with 0.6 (MASS's
  `restricted_mask_sent` with a single segment);
- the encoder reads the sentence with the span's tokens replaced as in MLM (--mask-probs: 80% MASK, 10% kept,
  10% a random word) and `</s>`;
- the decoder reads only the span shifted right (`w_{a-1} .. w_{a+m-1}`, `<s>` for a span at the start) at the
  positions those tokens have in the sentence, and predicts `w_a .. w_{a+m}`; its cross-attention skips the
  encoder positions that hold MASK (MASS's `enc_mask`). A decoder language slot (attaching, vle padding) is
  always its first input, at position 0.
The loss is the mean cross-entropy over the span tokens. The model (`build_model`) is an XLM encoder of the
`--preset`/size flags with a decoder of the same shape (`Seq2SeqConfig.like_encoder`); the checkpoint's kind is
"seq2seq". `xlp finetune --task unmt --init RUN` starts from it. Languages are sampled per step as MLM's
(p_l ~ n_l^--lang-alpha); validation: the first --eval-batches x --batch-size sentences of each language's valid
split, with fixed spans and masks; the best checkpoint has the lowest mean loss.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import torch

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.shards import shard_paths
from xlp_cli.artifacts.special_ids import BOS, EOS, MASK, PAD
from xlp_cli.core import ui
from xlp_cli.models.encoder import TransformerEncoder
from xlp_cli.models.seq2seq import Seq2Seq, Seq2SeqConfig, label_smoothed_nll, smoothed_nll_sums
from xlp_cli.train.masking import corrupt
from xlp_cli.train.objectives.base import Objective
from xlp_cli.train.objectives.encoder import model_config
from xlp_cli.train.objectives.mlm import lang_scores, summarize
from xlp_cli.train.runtime import Runtime, step_seed
from xlp_cli.train.shards import SHAPE_STEP, bucket
from xlp_cli.train.sentences import SentenceStream, first_sentences
from xlp_cli.train.streams import sampling_probs


def spans(lengths: list[int], ratio: float, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(start a, length m) of each sentence's masked span (0-based token indices)."""
    a, m = span_arrays(np.asarray(lengths, dtype=np.int64), ratio, rng)
    return list(zip(a.tolist(), m.tolist()))


def span_arrays(n: np.ndarray, ratio: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`spans` as two arrays (starts, lengths), for sentences of lengths `n`: drawn for the whole batch at once."""
    m = np.minimum(n, np.maximum(1, np.round(n * ratio).astype(np.int64)))
    u = rng.random(len(n))
    anywhere = rng.integers(0, n - m + 1) if len(n) else np.zeros(0, dtype=np.int64)
    return np.where(u < 0.2, 0, np.where(u < 0.4, n - m, anywhere)), m


def span_batch(sents: list[np.ndarray], prefix: int, ratio: float, rng: np.random.Generator, gen: torch.Generator,
               vocab_size: int, probs: tuple[float, float, float], step: int = 1) -> dict[str, Any]:
    """A MASS batch: encoder input [B, S] (span corrupted, `</s>`), decoder input [B, M] and its positions, gold
    outputs [B, prefix + M] (<pad> where nothing is predicted), and `n`, the number of gold tokens (counted on
    the host). `step`: S and M are padded to multiples of it (few shapes for a GPU; padding is never predicted).

    Decoder coordinates (as `Seq2Seq.decode`): the full decoder sequence is D = [<s> or the language slot] w_1..w_n,
    index k of D predicts w_{k+1}; a span of tokens [a, a+m) is predicted at indices a .. a+m-1, whose inputs are
    D[k]; a language slot (prefix 1) is D[0] and is always the first input. Vectorized over the batch (the input
    pipeline builds one per micro-batch: `benchmarks/data_throughput.py`)."""
    n = np.asarray([len(x) for x in sents], dtype=np.int64)
    a, m = span_arrays(n, ratio, rng)
    vals = np.concatenate(sents).astype(np.int64) if len(sents) else np.zeros(0, dtype=np.int64)
    first = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)[:, None]   # where each sentence starts
    col = np.arange(int(n.max(initial=0)) + 1)[None, :]
    src = np.full((len(n), col.shape[1]), PAD, dtype=np.int64)
    src[col < n[:, None]] = vals
    src[col == n[:, None]] = EOS
    pred = (col >= a[:, None]) & (col < (a + m)[:, None])
    lo = np.maximum(a, prefix)                               # the first decoder input of each span, in D
    k = np.arange(int((a + m - lo).max(initial=0)))[None, :]
    keep = k < (a + m - lo)[:, None]
    d = lo[:, None] + k                                      # indices into D
    at = lambda i: vals[np.clip(i, 0, max(len(vals) - 1, 0))] if len(vals) else np.zeros_like(i)  # noqa: E731
    prev = np.where(keep, np.where(d == 0, BOS, at(first + d - 1)), PAD)
    positions = np.where(keep, d, 0)
    gold = np.where(keep, at(first + d), PAD)                # D[k] predicts w_{k+1} = s[k]
    if prefix:                                               # the language slot's output: w_1 when the span starts it
        gold = np.concatenate([np.where(a == 0, at(first[:, 0]), PAD)[:, None], gold], axis=1)
    s_width, m_width = bucket(src.shape[1], step), bucket(prev.shape[1], step)
    enc_in = widen(corrupt(torch.from_numpy(src), torch.from_numpy(pred), gen, vocab_size, probs), s_width, PAD)
    return {"src": enc_in, "prev": widen(torch.from_numpy(prev), m_width, PAD),
            "positions": widen(torch.from_numpy(positions), m_width, 0),
            "gold": widen(torch.from_numpy(gold), prefix + m_width, PAD), "n": int((gold != PAD).sum())}


def widen(t: torch.Tensor, width: int, fill: int) -> torch.Tensor:
    """`t` [B, T] right-padded with `fill` to `width` columns (unchanged when T >= width)."""
    if t.size(1) >= width:
        return t
    return torch.cat([t, t.new_full((t.size(0), width - t.size(1)), fill)], dim=1)


def mass_logits(model: Seq2Seq, b: dict[str, Any], lang: int, dev: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(decoder logits [B, prefix + M, V], gold [B, prefix + M]) of a span batch, with no host sync."""
    src = b["src"].to(dev)
    langs = torch.full((src.size(0),), lang, device=dev)
    memory = model.encode(src, langs, present=(lang,))
    keep = src.ne(MASK)
    pre = memory["mask"].size(-1) - keep.size(1)
    if pre:
        keep = torch.cat([keep.new_ones(keep.size(0), pre), keep], dim=1)
    memory = {**memory, "mask": memory["mask"] & keep[:, None, None, :]}
    logits = model.decode(b["prev"].to(dev), langs, memory, positions=b["positions"].to(dev), present=(lang,))
    return logits, b["gold"].to(dev)


def mass_loss(model: Seq2Seq, b: dict[str, Any], lang: int, dev: torch.device) -> tuple[torch.Tensor, int, int]:
    """(summed cross-entropy over the span tokens, number of them, number predicted right): for validation,
    which reads its counts from the device."""
    logits, gold = mass_logits(model, b, lang, dev)
    loss, _, n = label_smoothed_nll(logits, gold, 0.0)
    right = int(((logits.argmax(-1) == gold) & gold.ne(PAD)).sum())
    return loss, n, right


class Mass(Objective):
    metric, maximize = "loss", False
    prefetch = True

    def __init__(self, cfg: Any, streams: dict[str, SentenceStream], valid: dict[str, list[np.ndarray]],
                 langs: list[str], vocab_size: int, prefix: int, rt: Runtime):
        self.cfg, self.streams, self.valid, self.langs, self.rt = cfg, streams, valid, langs, rt
        self.vocab_size, self.prefix = vocab_size, prefix
        self.batch_size = cfg.batch_size
        self.shape_step = SHAPE_STEP if rt.device.type == "cuda" else 1  # padded lengths: multiples of this
        self.probs = sampling_probs([s.n_rows for s in streams.values()], cfg.lang_alpha)

    @classmethod
    def build_model(cls, cfg: Any, inputs: Any) -> Seq2Seq:
        enc = TransformerEncoder(model_config(cfg, len(inputs.dictionary), inputs.langs), vocab_ids=inputs.vocab_ids)
        return Seq2Seq(Seq2SeqConfig.like_encoder(enc.config), enc)

    @classmethod
    def create(cls, cfg: Any, inputs: Any, model: Seq2Seq, rt: Runtime) -> "Mass":
        V = len(inputs.dictionary)
        streams, valid = {}, {}
        for i, lang in enumerate(inputs.langs):
            paths = shard_paths(layout.read_dir(inputs.ids_dir, "train", lang))
            streams[lang] = SentenceStream(paths, lang, cfg.seed, i, V, cfg.bptt - 1)
            streams[lang]._load()  # reads the first row group: ids outside the dictionary fail before training
            if rt.main:
                v = first_sentences(shard_paths(layout.read_dir(inputs.ids_dir, "valid", lang)),
                                    cfg.eval_batches * cfg.batch_size, V, cfg.bptt - 1)
                if v:
                    valid[lang] = v
                else:
                    ui.warn(f"no valid split for '{lang}' in {inputs.ids_dir}: it is not validated")
        return cls(cfg, streams, valid, inputs.langs, V, model.decoder_prefix(), rt)

    def _batch(self, sents: list[np.ndarray], *seed: int, step: int = 1) -> dict[str, Any]:
        rng = np.random.default_rng(step_seed(*seed, 1))
        gen = torch.Generator().manual_seed(step_seed(*seed, 2))
        return span_batch(sents, self.prefix, self.cfg.word_mass, rng, gen, self.vocab_size, tuple(self.cfg.mask_probs),
                          step)

    def micro_batches(self, step: int, n: int) -> Iterator[tuple[int, dict[str, torch.Tensor], int]]:
        cfg, rank, world = self.cfg, self.rt.rank, self.rt.world
        names = list(self.streams)
        for micro in range(n):
            rng = np.random.default_rng([cfg.seed, step, micro, 0])
            lang = names[int(rng.choice(len(names), p=self.probs))]
            full = self.streams[lang].next(cfg.batch_size * world)  # the whole world's rows: every process advances
            mine = full[rank * cfg.batch_size:(rank + 1) * cfg.batch_size]
            tokens = sum(len(s) + 1 for s in full)
            batch = self._batch(mine, cfg.seed, step, micro, rank, step=self.shape_step)
            yield self.langs.index(lang), batch, tokens

    def loss(self, model: torch.nn.Module, mb: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        lang, b, tokens = mb
        loss, _ = smoothed_nll_sums(*mass_logits(model, b, lang, self.rt.device), 0.0)
        return loss / max(b["n"], 1), {"tokens": tokens, "batches": self.langs[lang]}

    def data_position(self) -> dict[str, Any]:
        return {lang: s.state() for lang, s in self.streams.items()}

    def state_dict(self, position: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.data_position() if position is None else position

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for lang, s in self.streams.items():
            if lang in state:
                s.load_state(state[lang])

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module) -> dict[str, Any] | None:
        if not self.valid:
            return None
        model.eval()
        out: dict[str, Any] = {"langs": {}}
        bs = self.cfg.batch_size
        for lang, sents in self.valid.items():
            li = self.langs.index(lang)
            nll, n, right = 0.0, 0, 0
            for k in range(0, len(sents), bs):
                with self.rt.autocast():
                    loss, m, r = mass_loss(model, self._batch(sents[k:k + bs], self.cfg.seed, 99, k, li), li, self.rt.device)
                nll, n, right = nll + float(loss), n + m, right + r
            out["langs"][lang] = lang_scores(nll, right, max(n, 1))
        return summarize(out)

    def describe(self, m: dict[str, Any]) -> str:
        return f"valid MASS loss {m['loss']:.4f} ppl {m['ppl']:.2f} acc {m['acc']:.3f}"

    def probe_loss(self, model: torch.nn.Module, batch_size: int) -> torch.Tensor:
        sents = [np.arange(self.cfg.bptt - 1) % (self.vocab_size - 14) + 14 for _ in range(batch_size)]
        loss, n, _ = mass_loss(model, self._batch(sents, 0, 0), 0, self.rt.device)
        return loss / max(n, 1)
