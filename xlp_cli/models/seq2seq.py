"""Encoder-decoder Transformer for multilingual translation, with a switchable language encoding.

Shapes: B batch, S source length, T target length, d model width. Token ids follow XLM's layout
(`<s>`=0, `</s>`=1, `<pad>`=2). One embedding table is shared by the encoder, the decoder and the output
projection (joint BPE, fairseq's `--share-all-embeddings`).

How the languages are signalled (`lang_encoding`, one object from `xlp_cli.models.encodings` per side,
the source language on the encoder side and the target language on the decoder side):
- `attaching`: the language vector is attached as an extra first position. Encoder input
  `[L_src] w_1 .. w_n </s>`; decoder input `[L_tgt] y_1 .. y_{m}` (the target-language vector takes the
  place of the begin-of-sentence token, so the first word is predicted from it).
- `additive`: encoder input `w_i + L_src`, decoder input `<s> y_1 ..` with `+ L_tgt` at every position.
- `xlp`: encoder input `w_i P_src`, decoder input `<s> y_1 ..` each projected by `P_tgt`; the target
  language reaches the decoder only through its projection (the word embeddings' language-specific space).
- `none`: no language signal (a bilingual baseline).
Positions (sinusoidal, as Vaswani et al.) are added after the language encoding, as the XLP paper does.
The model never branches on the encoding's name: an encoding says how many positions it prepends.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from xlp_cli.errors import BadInput
from xlp_cli.models.encodings import ENCODINGS, build_encoding

BOS, EOS, PAD, UNK = 0, 1, 2, 3

# Table 7 of the XLP paper (IWSLT): 6+6 layers, d=512, FFN 1024, 4 heads, dropout 0.3.
PRESETS: dict[str, dict[str, Any]] = {
    "iwslt": dict(d_model=512, enc_layers=6, dec_layers=6, heads=4, ffn=1024, dropout=0.3),
    # a CPU-sized model for the demo recipe (minutes, not days)
    "small": dict(d_model=256, enc_layers=3, dec_layers=3, heads=4, ffn=512, dropout=0.1),
    # unit tests
    "tiny": dict(d_model=64, enc_layers=2, dec_layers=2, heads=4, ffn=128, dropout=0.0),
}
ARCHS = ("transformer", "interlingua")


@dataclasses.dataclass
class Seq2SeqConfig:
    vocab_size: int
    langs: list[str]
    arch: str = "transformer"
    lang_encoding: str = "xlp"
    d_model: int = 512
    enc_layers: int = 6
    dec_layers: int = 6
    heads: int = 4
    ffn: int = 1024
    dropout: float = 0.3
    attn_dropout: float = 0.0
    max_positions: int = 256
    pre_norm: bool = False  # fairseq's transformer_iwslt_de_en is post-norm
    # interlingua (Zhu et al.): r positions, N layers
    intl_positions: int = 10
    intl_layers: int = 3
    # "native": the Vaswani/fairseq encoder below. "xlm": the encoder of an `xlp pretrain` run
    # (xlp_cli.models.encoder.TransformerEncoder, --init-encoder); the decoder then uses learned positions,
    # no embedding scaling and an embedding LayerNorm like XLM's own decoder, and shares its embeddings.
    encoder_kind: str = "native"
    encoder_config: dict[str, Any] | None = None  # the pretrained encoder's ModelConfig (encoder_kind "xlm")

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise BadInput(f"unknown --arch {self.arch!r} (choose from {', '.join(ARCHS)})")
        if self.lang_encoding not in ENCODINGS or self.lang_encoding == "vle":
            raise BadInput(f"unknown --lang-encoding {self.lang_encoding!r} for translation "
                           "(choose from none, attaching, additive, xlp)")
        if self.arch == "interlingua" and self.lang_encoding == "attaching":
            raise BadInput("--arch interlingua already starts the decoder from the target-language embedding; "
                           "use --lang-encoding none, additive or xlp with it")
        if self.arch == "interlingua" and self.encoder_kind == "xlm":
            raise BadInput("--arch interlingua needs language-aware sinusoidal positions in the encoder; "
                           "it cannot start from a pretrained (learned-position) encoder")
        if self.d_model % self.heads:
            raise BadInput(f"model width {self.d_model} is not divisible by {self.heads} heads")
        if self.d_model % 2:
            raise BadInput("model width must be even (sinusoidal positions)")

    @classmethod
    def from_preset(cls, preset: str, **kw: Any) -> "Seq2SeqConfig":
        if preset not in PRESETS:
            raise BadInput(f"unknown model preset {preset!r} (choose from {', '.join(PRESETS)})")
        values = dict(PRESETS[preset])
        values.update({k: v for k, v in kw.items() if v is not None})
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Seq2SeqConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def lang_id(self, lang: str) -> int:
        try:
            return self.langs.index(lang)
        except ValueError:
            raise BadInput(f"language {lang!r} is not one the model was trained with ({', '.join(self.langs)})") from None


# ----------------------------------------------------------------------------------------------- parts
def sinusoid(positions: torch.Tensor, d: int, offset: torch.Tensor | None = None) -> torch.Tensor:
    """Vaswani et al.'s sinusoids for integer `positions` [B, T] -> [B, T, d].

    `offset` [B, d/2] is a phase added inside sin/cos (language-aware positions of the interlingua paper):
    PE(p, 2i) = sin(p w_i + o_i), PE(p, 2i+1) = cos(p w_i + o_i), w_i = 10000^(-2i/d).
    """
    half = d // 2
    freq = torch.exp(torch.arange(half, device=positions.device, dtype=torch.float32) * (-math.log(10000.0) / half))
    angle = positions.float().unsqueeze(-1) * freq  # B T half
    if offset is not None:
        angle = angle + offset.unsqueeze(1)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)


class Attention(nn.Module):
    """Multi-head attention with an optional incremental cache (decoder self-attention, cross-attention)."""

    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.out = nn.Linear(d, d)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        return x.view(B, T, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, kv: torch.Tensor, mask: torch.Tensor | None = None,
                cache: dict[str, torch.Tensor] | None = None, static_kv: bool = False) -> torch.Tensor:
        """`mask`: bool [B or 1, 1, Tq, Tk], True where attention is allowed. With `cache`, self-attention
        appends this step's keys/values (static_kv=False) or reuses the projected memory (static_kv=True)."""
        q = self._split(self.q(x))
        if cache is not None and static_kv and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            k, v = self._split(self.k(kv)), self._split(self.v(kv))
            if cache is not None:
                if not static_kv and "k" in cache:
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
        B, H, T, dh = y.shape
        return self.out(y.transpose(1, 2).reshape(B, T, H * dh))


class FeedForward(nn.Module):
    def __init__(self, d: int, ffn: int, dropout: float):
        super().__init__()
        self.fc1, self.fc2, self.dropout = nn.Linear(d, ffn), nn.Linear(ffn, d), dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.dropout(F.relu(self.fc1(x)), self.dropout, self.training))


class Block(nn.Module):
    """A Transformer layer: self-attention (optional), cross-attention (optional), feed-forward;
    each sub-layer residual with layer norm (post-norm as fairseq's default, or pre-norm)."""

    def __init__(self, cfg: Seq2SeqConfig, self_attn: bool, cross_attn: bool):
        super().__init__()
        d = cfg.d_model
        self.pre_norm, self.dropout = cfg.pre_norm, cfg.dropout
        self.self_attn = Attention(d, cfg.heads, cfg.attn_dropout) if self_attn else None
        self.self_norm = nn.LayerNorm(d) if self_attn else None
        self.cross_attn = Attention(d, cfg.heads, cfg.attn_dropout) if cross_attn else None
        self.cross_norm = nn.LayerNorm(d) if cross_attn else None
        self.ffn = FeedForward(d, cfg.ffn, cfg.dropout)
        self.ffn_norm = nn.LayerNorm(d)

    def _sub(self, x: torch.Tensor, norm: nn.LayerNorm, fn) -> torch.Tensor:
        if self.pre_norm:
            return x + F.dropout(fn(norm(x)), self.dropout, self.training)
        return norm(x + F.dropout(fn(x), self.dropout, self.training))

    def forward(self, x: torch.Tensor, self_mask: torch.Tensor | None = None, memory: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, cache: dict[str, dict] | None = None) -> torch.Tensor:
        if self.self_attn is not None:
            c = None if cache is None else cache.setdefault("self", {})
            x = self._sub(x, self.self_norm, lambda h: self.self_attn(h, h, self_mask, c))
        if self.cross_attn is not None:
            c = None if cache is None else cache.setdefault("cross", {})
            x = self._sub(x, self.cross_norm, lambda h: self.cross_attn(h, memory, memory_mask, c, static_kv=True))
        return self._sub(x, self.ffn_norm, self.ffn)


def reorder_cache(cache: list[dict], order: torch.Tensor) -> None:
    """Beam search: keep the rows of every cached key/value named by `order` (in place)."""
    for layer in cache:
        for part in layer.values():
            for name in ("k", "v"):
                if name in part:
                    part[name] = part[name].index_select(0, order)


# ----------------------------------------------------------------------------------------------- model
class Seq2Seq(nn.Module):
    """Encoder-decoder Transformer. `encode` -> memory; `decode` -> next-token logits (full or incremental)."""

    def __init__(self, cfg: Seq2SeqConfig, pretrained_encoder: nn.Module | None = None):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        n_langs = max(1, len(cfg.langs))
        self.xlm_encoder = None
        if cfg.encoder_kind == "xlm":
            if pretrained_encoder is None:  # shapes only; weights come from the checkpoint
                from xlp_cli.models.encoder import ModelConfig, TransformerEncoder

                pretrained_encoder = TransformerEncoder(ModelConfig.from_dict(cfg.encoder_config or {}))
            self.xlm_encoder = pretrained_encoder
            self.embed = pretrained_encoder.embed
            self.pos_embed = nn.Embedding(cfg.max_positions + 1, d)
            nn.init.normal_(self.pos_embed.weight, mean=0.0, std=d ** -0.5)
            self.emb_norm = nn.LayerNorm(d, eps=1e-12)
            self.scale = 1.0
        else:
            self.embed = nn.Embedding(cfg.vocab_size, d, padding_idx=PAD)
            nn.init.normal_(self.embed.weight, mean=0.0, std=d ** -0.5)
            with torch.no_grad():
                self.embed.weight[PAD].zero_()
            self.src_encoding = build_encoding(cfg.lang_encoding, d, n_langs)
            self.encoder = nn.ModuleList(Block(cfg, self_attn=True, cross_attn=False) for _ in range(cfg.enc_layers))
            self.enc_norm = nn.LayerNorm(d) if cfg.pre_norm else None
            self.pos_embed = None
            self.emb_norm = None
            self.scale = math.sqrt(d)
        self.tgt_encoding = build_encoding(cfg.lang_encoding, d, n_langs)
        self.decoder = nn.ModuleList(Block(cfg, self_attn=True, cross_attn=True) for _ in range(cfg.dec_layers))
        self.dec_norm = nn.LayerNorm(d) if cfg.pre_norm else None

    # -- what a subclass may change
    def position_offset(self, lang: torch.Tensor) -> torch.Tensor | None:
        """Phase offsets [B, d/2] of the sinusoids for a language (None: the plain sinusoids)."""
        return None

    def decoder_prefix(self) -> int:
        """How many leading decoder positions hold language vectors instead of words."""
        return self.tgt_encoding.prefix_len

    def _embed(self, tokens: torch.Tensor, lang: torch.Tensor, encoding: nn.Module) -> torch.Tensor:
        """Embeddings of `tokens` [B, T] in language `lang` [B] -> [B, prefix + T, d]:
        (on_positions(on_words(E[w])) * scale + positions), dropout. The language encodings act on the
        unscaled embeddings, so language vectors and words share one scale (additive commutes with positions)."""
        B, T = tokens.shape
        p = encoding.prefix_len
        x = self.embed(tokens)
        if T or p:
            langs_tok = lang[:, None].expand(B, max(T, 1))
            x = encoding.on_words(x, langs_tok, self.embed)
        x = encoding.on_positions(x, lang[:, None].expand(B, x.size(1)))
        x = x * self.scale
        pos = torch.arange(x.size(1), device=x.device).unsqueeze(0).expand(B, x.size(1))
        if self.pos_embed is not None:
            x = x + self.pos_embed(pos.clamp(max=self.pos_embed.num_embeddings - 1)).to(x.dtype)
        else:
            x = x + sinusoid(pos, self.cfg.d_model, self.position_offset(lang)).to(x.dtype)
        if self.emb_norm is not None:
            x = self.emb_norm(x)
        return F.dropout(x, self.cfg.dropout, self.training)

    # -- encoder
    def encode(self, src: torch.Tensor, src_lang: torch.Tensor) -> dict[str, torch.Tensor]:
        """src [B, S] (with `</s>`, right-padded) -> {"out": [B, S', d], "mask": bool [B, 1, 1, S'] (True = keep)}."""
        pad = src.eq(PAD)
        if self.xlm_encoder is not None:
            pre = self.xlm_encoder.prefix_len
            out = self.xlm_encoder(src, src_lang, pad_mask=pad)
        else:
            pre = self.src_encoding.prefix_len
            out = self._embed(src, src_lang, self.src_encoding)
        keep = ~pad
        if pre:
            keep = torch.cat([keep.new_ones(src.size(0), pre), keep], dim=1)
        mask = keep[:, None, None, :]
        if self.xlm_encoder is None:
            for layer in self.encoder:
                out = layer(out, self_mask=mask)
            if self.enc_norm is not None:
                out = self.enc_norm(out)
        return {"out": out, "mask": mask}

    # -- decoder
    def decoder_input(self, tgt: torch.Tensor) -> torch.Tensor:
        """Target ids [B, T] (no `</s>`) -> decoder input ids: `<s> y` (or `y` when the decoder starts from L_tgt)."""
        bos = tgt.new_full((tgt.size(0), 1), BOS)
        prev = torch.cat([bos, tgt], dim=1)
        return prev[:, self.decoder_prefix():]

    def embed_target(self, prev: torch.Tensor, tgt_lang: torch.Tensor) -> torch.Tensor:
        return self._embed(prev, tgt_lang, self.tgt_encoding)

    def decode(self, prev: torch.Tensor, tgt_lang: torch.Tensor, memory: dict[str, torch.Tensor],
               cache: list[dict] | None = None) -> torch.Tensor:
        """prev: decoder input ids [B, T'] (see `decoder_input`). Returns logits [B, T, V], T = T' + prefix.

        With `cache` (a list, one dict per layer, filled on the first call), only the positions not yet
        cached are run through the layers and only their logits are returned (incremental decoding).
        """
        x = self.embed_target(prev, tgt_lang)
        T = x.size(1)
        done = 0
        if cache is not None:
            if not cache:
                cache.extend({} for _ in self.decoder)
            if "self" in cache[0]:
                done = cache[0]["self"]["k"].size(2)
            x = x[:, done:]
        causal = torch.ones(x.size(1), T, dtype=torch.bool, device=x.device).tril(diagonal=done)[None, None]
        for i, layer in enumerate(self.decoder):
            x = layer(x, self_mask=causal, memory=memory["out"], memory_mask=memory["mask"],
                      cache=None if cache is None else cache[i])
        if self.dec_norm is not None:
            x = self.dec_norm(x)
        return F.linear(x, self.embed.weight.to(x.dtype))

    def forward(self, src: torch.Tensor, src_lang: torch.Tensor, tgt: torch.Tensor, tgt_lang: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits [B, T+1, V] predicting `y_1 .. y_T </s>` for target ids `tgt` [B, T]."""
        return self.decode(self.decoder_input(tgt), tgt_lang, self.encode(src, src_lang))

    def max_source_len(self) -> int:
        """Longest source (tokens + `</s>`) the encoder's positions allow."""
        if self.xlm_encoder is not None:
            return self.xlm_encoder.config.n_positions - self.xlm_encoder.prefix_len
        return self.cfg.max_positions - self.src_encoding.prefix_len

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def build_model(cfg: Seq2SeqConfig, pretrained_encoder: nn.Module | None = None) -> Seq2Seq:
    if cfg.arch == "interlingua":
        from xlp_cli.models.interlingua import InterlinguaSeq2Seq

        return InterlinguaSeq2Seq(cfg)
    return Seq2Seq(cfg, pretrained_encoder)


def targets(tgt: torch.Tensor) -> torch.Tensor:
    """Gold outputs for teacher forcing: `y_1 .. y_T </s>` then padding, from right-padded `tgt` [B, T]."""
    lengths = tgt.ne(PAD).sum(1)
    out = torch.cat([tgt, tgt.new_full((tgt.size(0), 1), PAD)], dim=1)
    out[torch.arange(tgt.size(0)), lengths] = EOS
    return out


def label_smoothed_nll(logits: torch.Tensor, gold: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor, int]:
    """fairseq's label-smoothed cross-entropy, summed over non-pad tokens: (loss, nll, n_tokens).

    loss = (1 - eps) * nll + eps / V * sum_v (-log p_v)
    """
    lprobs = F.log_softmax(logits.float(), dim=-1)
    keep = gold.ne(PAD)
    g = gold.clamp(min=0).unsqueeze(-1)
    nll = -lprobs.gather(-1, g).squeeze(-1)
    smooth = -lprobs.sum(-1)
    V = lprobs.size(-1)
    loss = (1.0 - epsilon) * nll + (epsilon / V) * smooth
    n = int(keep.sum())
    return loss[keep].sum(), nll[keep].sum(), n
