"""Decoding for `Seq2Seq` models: batched beam search with a length penalty, and greedy search.

Scores (fairseq's convention): a finished hypothesis y_1 .. y_m `</s>` of m + 1 tokens scores
    sum_{i} log p(y_i | y_<i, x) / (m + 1) ** length_penalty
so length_penalty = 0 ranks by the raw log-probability (short outputs win), 1 by the mean per-token
log-probability, and values above 1 (1.2 in the XLP paper) favour longer outputs further.
A sentence is finished when `beam` hypotheses have ended with `</s>` (fairseq's early stopping); a
hypothesis that reaches the length limit is ended with `</s>` there. At beam 1 this is exactly greedy search.
The length limit is min(max_len_a * source_length + max_len_b, the model's positions).
Finished sentences leave the batch, so a batch costs as much as its longest output, not batch x longest.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from xlp_cli.models.blocks import reorder_cache
from xlp_cli.models.seq2seq import BOS, EOS, PAD, Seq2Seq, targets


@dataclasses.dataclass
class Hypothesis:
    tokens: list[int]  # without `</s>`
    score: float       # length-normalised (see module doc)
    logprob: float     # sum of token log-probabilities, `</s>` included


def length_normalized(logprob: float | torch.Tensor, n_tokens: int | torch.Tensor, length_penalty: float):
    """The beam score of a finished hypothesis: logprob / n_tokens ** length_penalty (n_tokens counts `</s>`)."""
    return logprob / (n_tokens ** length_penalty)


def _limits(model: Seq2Seq, src: torch.Tensor, max_len_a: float, max_len_b: int) -> torch.Tensor:
    src_len = src.ne(PAD).sum(1).float()
    cap = model.config.max_positions - model.decoder_prefix() - 1
    return (src_len * max_len_a + max_len_b).long().clamp(min=1, max=max(1, cap))


def _step_logprobs(model: Seq2Seq, prev: torch.Tensor, tgt_lang: torch.Tensor, memory: dict, cache: list) -> torch.Tensor:
    logits = model.decode(prev, tgt_lang, memory, cache)[:, -1]
    lp = F.log_softmax(logits.float(), dim=-1)
    lp[:, PAD] = float("-inf")
    lp[:, BOS] = float("-inf")
    return lp


def _select(memory: dict, rows: torch.Tensor) -> dict:
    return {k: (v.index_select(0, rows) if isinstance(v, torch.Tensor) else v) for k, v in memory.items()}


@torch.no_grad()
def greedy(model: Seq2Seq, src: torch.Tensor, src_lang: torch.Tensor, tgt_lang: torch.Tensor,
           max_len_a: float = 1.2, max_len_b: int = 10, temperature: float = 0.0,
           generator: torch.Generator | None = None) -> list[Hypothesis]:
    """Argmax decoding, batched. src [B, S] with `</s>`; languages [B]. With `temperature` > 0, each token is
    sampled from softmax(logits / temperature) instead (from `generator`, on the model's device)."""
    model.eval()
    B = src.size(0)
    limit = _limits(model, src, max_len_a, max_len_b)
    memory = model.encode(src, src_lang)
    prev = model.decoder_input(src.new_zeros(B, 0))
    cache: list = []
    alive = torch.arange(B, device=src.device)
    tokens: list[list[int]] = [[] for _ in range(B)]
    logprob = [0.0] * B
    results: list[Hypothesis | None] = [None] * B
    step = 0
    while alive.numel():
        lp = _step_logprobs(model, prev, tgt_lang, memory, cache)
        force = (limit[alive] <= step)
        if force.any():
            lp[force] = torch.where(torch.arange(lp.size(1), device=lp.device) == EOS, lp[force], float("-inf"))
        if temperature > 0:
            best = torch.multinomial(torch.softmax(lp / temperature, dim=-1), 1, generator=generator).squeeze(1)
            best_lp = lp.gather(1, best[:, None]).squeeze(1)
        else:
            best_lp, best = lp.max(dim=-1)
        keep = []
        for j, b in enumerate(alive.tolist()):
            logprob[b] += float(best_lp[j])
            if int(best[j]) == EOS:
                n = len(tokens[b]) + 1
                results[b] = Hypothesis(tokens[b], float(length_normalized(logprob[b], n, 1.0)), logprob[b])
            else:
                tokens[b].append(int(best[j]))
                keep.append(j)
        if len(keep) < alive.numel():
            rows = torch.tensor(keep, dtype=torch.long, device=src.device)
            alive, tgt_lang, best = alive[rows], tgt_lang[rows], best[rows]
            prev = prev.index_select(0, rows)
            memory = _select(memory, rows)
            reorder_cache(cache, rows)
        prev = torch.cat([prev, best[:, None]], dim=1)
        step += 1
    return results  # type: ignore[return-value]


@torch.no_grad()
def beam_search(model: Seq2Seq, src: torch.Tensor, src_lang: torch.Tensor, tgt_lang: torch.Tensor,
                beam: int = 5, length_penalty: float = 1.2, max_len_a: float = 1.2, max_len_b: int = 10,
                n_best: int = 1) -> list[list[Hypothesis]]:
    """Batched beam search. Returns, per sentence, its `n_best` hypotheses, best first."""
    model.eval()
    B, K = src.size(0), beam
    V = model.embed.num_embeddings
    if K < 1 or n_best < 1 or n_best > K:
        raise ValueError("need 1 <= n_best <= beam")
    limit = _limits(model, src, max_len_a, max_len_b)
    memory = _select(model.encode(src, src_lang), torch.arange(B, device=src.device).repeat_interleave(K))
    tgt_lang = tgt_lang.repeat_interleave(K)
    prefix = model.decoder_input(src.new_zeros(B * K, 0))  # `<s>` or nothing
    hyp_tokens = src.new_zeros(B * K, 0)
    scores = torch.full((B, K), float("-inf"), device=src.device)
    scores[:, 0] = 0.0  # at step 0 all beams are the same: expand only the first
    cache: list = []
    alive = torch.arange(B, device=src.device)  # original sentence index of each live row-block
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    step = 0
    while alive.numel():
        nb = alive.numel()
        prev = torch.cat([prefix[: nb * K], hyp_tokens], dim=1)
        lp = _step_logprobs(model, prev, tgt_lang, memory, cache)  # [nb*K, V]
        force = (limit[alive] <= step).repeat_interleave(K)
        if force.any():
            lp[force] = torch.where(torch.arange(V, device=lp.device) == EOS, lp[force], float("-inf"))
        cand = (scores.view(-1, 1) + lp).view(nb, K * V)
        top_s, top_i = cand.topk(min(2 * K, K * V), dim=1)  # [nb, 2K]
        beam_of, tok = top_i // V, top_i % V
        is_eos = tok.eq(EOS)
        # finish: `</s>` among the top K candidates (fairseq); record normalised scores
        eos_pos = (is_eos[:, :K] & top_s[:, :K].gt(float("-inf"))).nonzero().tolist()
        for r, c in eos_pos:
            b = int(alive[r])
            if len(finished[b]) >= K:
                continue
            row = r * K + int(beam_of[r, c])
            toks = hyp_tokens[row].tolist()
            s = float(top_s[r, c])
            finished[b].append(Hypothesis(toks, float(length_normalized(s, len(toks) + 1, length_penalty)), s))
        # continue: the best K candidates that do not end
        cont_s = top_s.masked_fill(is_eos, float("-inf"))
        sel_s, sel = cont_s.topk(K, dim=1)
        sel_beam = beam_of.gather(1, sel)
        sel_tok = tok.gather(1, sel)
        done = torch.tensor([len(finished[int(b)]) >= K for b in alive], device=src.device)
        done |= sel_s[:, 0].eq(float("-inf"))  # nothing left to extend (forced end)
        keep_blocks = (~done).nonzero().squeeze(1)
        order = (keep_blocks[:, None] * K + sel_beam[keep_blocks]).reshape(-1)
        alive = alive[keep_blocks]
        scores = sel_s[keep_blocks]
        hyp_tokens = torch.cat([hyp_tokens.index_select(0, order), sel_tok[keep_blocks].reshape(-1, 1)], dim=1)
        if alive.numel():
            rows_keep = (keep_blocks[:, None] * K + torch.arange(K, device=src.device)).reshape(-1)
            memory = _select(memory, rows_keep)
            tgt_lang = tgt_lang.index_select(0, rows_keep)
            reorder_cache(cache, order)
        step += 1
    out = []
    for b in range(B):
        hyps = sorted(finished[b], key=lambda h: -h.score)
        out.append(hyps[:n_best])
    return out


@torch.no_grad()
def score_hypothesis(model: Seq2Seq, src: torch.Tensor, src_lang: torch.Tensor, tgt: torch.Tensor,
                     tgt_lang: torch.Tensor) -> torch.Tensor:
    """Sum of log p(y_i | y_<i, x) over `y </s>` for right-padded targets `tgt` [B, T] (forced decoding)."""

    model.eval()
    logits = model(src, src_lang, tgt, tgt_lang)
    lp = F.log_softmax(logits.float(), dim=-1)
    gold = targets(tgt)
    tok_lp = lp.gather(-1, gold.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return tok_lp.masked_fill(gold.eq(PAD), 0.0).sum(1)
