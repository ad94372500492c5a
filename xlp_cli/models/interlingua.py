"""Language-aware interlingua (Zhu et al., "Language-aware Interlingua for Multilingual NMT"): an
Encoder-Interlingua-Decoder with its training objectives.

Architecture (on top of `Seq2Seq`, encoder and decoder unchanged otherwise):
- Language embedding L_emb [n_langs, d] and a shared interlingua embedding I_emb [r, d] (r = 10).
- Queries (Eq. 2): Q_i = FFN([L_src ; I_emb_i]) for i = 1..r, a position-wise FFN of the concatenation
  (the "simple linear combination" of the two parts is the FFN's first linear map).
- N interlingua layers (default 3), each multi-head attention over the encoder states H_enc (Eq. 3:
  K, V = H_enc) then a feed-forward sub-layer (Eq. 1), residual + LayerNorm. No self-attention among the
  r positions (the paper's layer has just the two sub-layers).
- The decoder cross-attends only to the r interlingua states I (never to H_enc).
- The target-language embedding L_tgt is the decoder's initial state: the decoder input is
  `[L_tgt] y_1 .. y_m` (no `<s>`).
- Language-aware positions in the encoder and the decoder: phase offsets o = W_L L_emb (W_L: d -> d/2, no
  bias) inside the sinusoids, PE(p, 2i) = sin(p w_i + o_i), PE(p, 2i+1) = cos(p w_i + o_i).

Losses (Eq. 5, each switchable): for a pair (x in language s, y in language t)
  s2t: CE(Dec(I(Enc(x)), t), y)    t2s: CE(Dec(I(Enc(y)), s), x)
  s2s: CE(Dec(I(Enc(x)), s), x)    t2t: CE(Dec(I(Enc(y)), t), y)      (reconstruction, "REC")
  sim: 1 - (1/r) sum_i cos(I^x_i, I^y_i)                               (semantic consistency, Eq. 4, "SIM")
Each cross-entropy is label-smoothed and averaged over its target tokens, `sim` is averaged over
sentences; the total is their plain sum (Eq. 5 has no weights). Ablation rows of Table 1:
  INTL = s2t,t2s   +REC = s2t,t2s,s2s,t2t   +SIM = s2t,t2s,sim   +REC+SIM = all five.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from xlp_cli.models.presets import INTERLINGUA_LOSS_TERMS
from xlp_cli.models.seq2seq import Seq2Seq, Seq2SeqConfig, label_smoothed_nll, sinusoid, targets

LOSS_TERMS = INTERLINGUA_LOSS_TERMS
ABLATIONS = {
    "INTL": ("s2t", "t2s"),
    "INTL+REC": ("s2t", "t2s", "s2s", "t2t"),
    "INTL+SIM": ("s2t", "t2s", "sim"),
    "INTL+REC+SIM": LOSS_TERMS,
}


class Interlingua(nn.Module):
    """Maps encoder states [B, S, d] of a language to r language-independent states [B, r, d]."""

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        d = cfg.d_model
        self.intl_embed = nn.Parameter(torch.empty(cfg.intl_positions, d))
        nn.init.normal_(self.intl_embed, mean=0.0, std=d ** -0.5)
        self.query = nn.Sequential(nn.Linear(2 * d, cfg.ffn), nn.ReLU(), nn.Linear(cfg.ffn, d))
        self.layers = nn.ModuleList(cfg.block(self_attn=False, cross_attn=True) for _ in range(cfg.intl_layers))

    def forward(self, h_enc: torch.Tensor, enc_mask: torch.Tensor, lang_vec: torch.Tensor) -> torch.Tensor:
        B = h_enc.size(0)
        r, d = self.intl_embed.shape
        q = self.query(torch.cat([lang_vec[:, None, :].expand(B, r, d), self.intl_embed[None].expand(B, r, d)], dim=-1))
        for layer in self.layers:
            q = layer(q, memory=h_enc, memory_mask=enc_mask)
        return q


class InterlinguaSeq2Seq(Seq2Seq):
    def __init__(self, cfg: Seq2SeqConfig, vocab_ids: list[list[int]] | None = None):
        super().__init__(cfg, None, vocab_ids)
        d = cfg.d_model
        self.lang_embed = nn.Embedding(max(1, len(cfg.langs)), d)
        nn.init.normal_(self.lang_embed.weight, mean=0.0, std=d ** -0.5)
        self.pos_offset = nn.Linear(d, d // 2, bias=False)  # W_L
        nn.init.normal_(self.pos_offset.weight, mean=0.0, std=d ** -0.5)
        self.interlingua = Interlingua(cfg)

    def position_offset(self, lang: torch.Tensor) -> torch.Tensor:
        return self.pos_offset(self.lang_embed(lang))

    def decoder_prefix(self) -> int:
        return 1 + self.tgt_encoding.prefix_len

    def encode(self, src: torch.Tensor, src_lang: torch.Tensor) -> dict[str, torch.Tensor]:
        h = super().encode(src, src_lang)
        intl = self.interlingua(h["out"], h["mask"], self.lang_embed(src_lang))
        return {"out": intl, "mask": None, "intl": intl}

    def embed_target(self, prev: torch.Tensor, tgt_lang: torch.Tensor) -> torch.Tensor:
        """`[L_tgt] y_1 ..`: the language embedding is the decoder's initial state (position 0)."""
        B, T = prev.shape
        enc = self.tgt_encoding
        x = self.embed(prev)
        if T:
            x = enc.on_words(x, tgt_lang[:, None].expand(B, T), self.embed)
        x = torch.cat([self.lang_embed(tgt_lang)[:, None, :].to(x.dtype), x], dim=1)
        x = enc.on_positions(x, tgt_lang[:, None].expand(B, x.size(1))) * self.scale

        pos = torch.arange(x.size(1), device=x.device).unsqueeze(0).expand(B, x.size(1))
        x = x + sinusoid(pos, self.config.d_model, self.position_offset(tgt_lang)).to(x.dtype)
        return F.dropout(x, self.config.dropout, self.training)


def semantic_distance(i_s: torch.Tensor, i_t: torch.Tensor) -> torch.Tensor:
    """L_dist = 1 - sim(I^s, I^t), Eq. 4: mean over the r positions of the cosine, per sentence -> [B]."""
    return 1.0 - F.cosine_similarity(i_s, i_t, dim=-1, eps=1e-8).mean(dim=-1)


def interlingua_losses(model: InterlinguaSeq2Seq, x: torch.Tensor, x_lang: torch.Tensor, y: torch.Tensor,
                       y_lang: torch.Tensor, terms: tuple[str, ...] | list[str], epsilon: float = 0.1
                       ) -> dict[str, dict[str, torch.Tensor | float | int]]:
    """The enabled loss terms for sentence pairs x [B, S], y [B, T] (ids without `</s>`, right-padded).

    Returns {term: {"loss": scalar (per token / per sentence), "nll": summed NLL, "n": tokens}}; the
    training loss is the sum of the "loss" values (Eq. 5).
    """
    unknown = [t for t in terms if t not in LOSS_TERMS]
    if unknown:
        raise ValueError(f"unknown interlingua loss terms {unknown} (choose from {', '.join(LOSS_TERMS)})")
    need_x = any(t in terms for t in ("s2t", "s2s", "sim"))
    need_y = any(t in terms for t in ("t2s", "t2t", "sim"))
    mem_x = model.encode(targets(x), x_lang) if need_x else None
    mem_y = model.encode(targets(y), y_lang) if need_y else None
    plan = {"s2t": (mem_x, y, y_lang), "t2s": (mem_y, x, x_lang), "s2s": (mem_x, x, x_lang), "t2t": (mem_y, y, y_lang)}
    out: dict[str, dict] = {}
    for term in LOSS_TERMS:
        if term not in terms:
            continue
        if term == "sim":
            dist = semantic_distance(mem_x["intl"], mem_y["intl"])  # type: ignore[index]
            out[term] = {"loss": dist.mean(), "nll": float(dist.detach().sum()), "n": int(dist.numel())}
            continue
        mem, gold_ids, lang = plan[term]
        logits = model.decode(model.decoder_input(gold_ids), lang, mem)
        loss, nll, n = label_smoothed_nll(logits, targets(gold_ids), epsilon)
        out[term] = {"loss": loss / max(n, 1), "nll": float(nll.detach()), "n": n}
    return out
