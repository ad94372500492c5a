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
- `vle`: the language vector E_V of VLE Eq. 3, computed from the shared embedding table: `adding` puts
  `+ E_V[src]` / `+ E_V[tgt]` at every position (like additive); `padding` prepends it (like attaching, so the
  decoder starts from E_V[tgt] instead of `<s>`). Both sides read the same Voc_l ids; each has its own W_l.
- `none`: no language signal (a bilingual baseline).
Positions (sinusoidal, as Vaswani et al.) are added after the language encoding, as the XLP paper does.

`xlm_decoder` (UNMT, MASS): with a pre-trained XLM encoder (`encoder_kind` "xlm"), the decoder's layers are
built like the encoder's (GELU, its heads, FFN size and LayerNorm epsilon) and its language encoding starts as a
copy of the encoder's, so `init_decoder_from_encoder` can start the whole decoder from an MLM run, as XLM does
for unsupervised MT (the cross-attention sub-layers stay random). `Seq2SeqConfig.like_encoder` builds that config.
The model never branches on the encoding's name: an encoding says how many positions it prepends.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from xlp_cli.artifacts.special_ids import BOS, EOS, PAD, UNK  # noqa: F401  (re-exported for the translation code)
from xlp_cli.core.errors import BadInput
from xlp_cli.models.blocks import Block, reorder_cache  # noqa: F401  (reorder_cache: used by search.py)
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder
from xlp_cli.models.encoding_registry import DEFAULT_ENCODING, TARGET_ENCODINGS, spec as encoding_spec
from xlp_cli.models.encodings import build_encoding
from xlp_cli.models.presets import SEQ2SEQ_PRESETS as PRESETS, PresetConfig
from xlp_cli.models.veco import tie_self_attention

ARCHS = ("transformer", "interlingua")


@dataclasses.dataclass
class Seq2SeqConfig(PresetConfig):
    vocab_size: int
    langs: list[str]
    arch: str = "transformer"
    lang_encoding: str = DEFAULT_ENCODING
    encoding_options: dict[str, Any] = dataclasses.field(default_factory=dict)
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
    # "encoder": the decoder layers are shaped like the pretrained encoder's (GELU, its heads and FFN, LayerNorm
    # eps 1e-12), so a VECO run initialises them (models/veco.py); "fairseq": the layers of `block` below.
    decoder_layout: str = "fairseq"
    tie_self_attention: bool = False  # VECO: decoder layer i shares the self-attention of its encoder layer
    # UNMT/MASS: decoder layers like the XLM encoder's (as decoder_layout "encoder") and XLM's decoder embeddings
    # (the encoder's language encoding, learned positions); needs encoder_kind "xlm"
    xlm_decoder: bool = False

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise BadInput(f"unknown --arch {self.arch!r} (choose from {', '.join(ARCHS)})")
        s = encoding_spec(self.lang_encoding)
        if not s.marks_target:
            raise BadInput(f"--lang-encoding {self.lang_encoding} cannot tell a decoder which language to produce "
                           f"(translation: choose from {', '.join(TARGET_ENCODINGS)})")
        if self.arch == "interlingua" and s.prefix_slots(self.encoding_options):
            raise BadInput(f"--arch interlingua already starts the decoder from the target-language embedding; "
                           f"--lang-encoding {self.lang_encoding} prepends a slot of its own: use one that does not")
        if self.arch == "interlingua" and self.encoder_kind == "xlm":
            raise BadInput("--arch interlingua needs language-aware sinusoidal positions in the encoder; "
                           "it cannot start from a pretrained (learned-position) encoder")
        if self.xlm_decoder and self.encoder_kind != "xlm":
            raise BadInput("an XLM-style decoder needs an XLM encoder (encoder_kind 'xlm')")
        if self.d_model % self.heads:
            raise BadInput(f"model width {self.d_model} is not divisible by {self.heads} heads")
        if self.d_model % 2:
            raise BadInput("model width must be even (sinusoidal positions)")
        if (self.decoder_layout == "encoder" or self.tie_self_attention) and self.encoder_kind != "xlm":
            raise BadInput("decoder layers shaped like (or tied to) a pretrained encoder need --init-encoder")

    PRESETS = PRESETS

    @classmethod
    def like_encoder(cls, enc: Any, **kw: Any) -> "Seq2SeqConfig":
        """An encoder-decoder around the XLM encoder of config `enc` (a `ModelConfig`), with a decoder of the same
        shape (as many layers, heads, FFN size, dropout, positions): UNMT and MASS (XLM's / MASS's models)."""
        values = dict(vocab_size=enc.vocab_size, langs=list(enc.langs), lang_encoding=enc.lang_encoding,
                      encoding_options=dict(enc.encoding_options), d_model=enc.d_model, enc_layers=enc.n_layers,
                      dec_layers=enc.n_layers, heads=enc.n_heads, ffn=enc.d_ff, dropout=enc.dropout,
                      attn_dropout=enc.attention_dropout, max_positions=enc.n_positions - 1, pre_norm=enc.pre_ln,
                      encoder_kind="xlm", encoder_config=enc.to_dict(), xlm_decoder=True)
        values.update(kw)
        return cls(**values)

    def lang_id(self, lang: str) -> int:
        try:
            return self.langs.index(lang)
        except ValueError:
            raise BadInput(f"language {lang!r} is not one the model was trained with ({', '.join(self.langs)})") from None

    def block(self, *, self_attn: bool = True, cross_attn: bool = False) -> Block:
        """A layer of this model: ReLU FFN with dropout after the activation, LayerNorm eps 1e-5 (fairseq); with
        `xlm_decoder` or `decoder_layout="encoder"`, XLM's layer (GELU, LayerNorm eps 1e-12) of the pretrained
        encoder's shape (its heads, FFN and pre/post-LN are copied into this config), so it can take its weights."""
        if self.xlm_decoder or self.decoder_layout == "encoder":
            return Block(self.d_model, self.heads, self.ffn, dropout=self.dropout, attention_dropout=self.attn_dropout,
                         pre_ln=self.pre_norm, self_attn=self_attn, cross_attn=cross_attn)
        return Block(self.d_model, self.heads, self.ffn, dropout=self.dropout, attention_dropout=self.attn_dropout,
                     activation="relu", activation_dropout=self.dropout, pre_ln=self.pre_norm, ln_eps=1e-5,
                     self_attn=self_attn, cross_attn=cross_attn)


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


# ----------------------------------------------------------------------------------------------- model
class Seq2Seq(nn.Module):
    """Encoder-decoder Transformer. `encode` -> memory; `decode` -> next-token logits (full or incremental)."""

    KIND = "seq2seq"  # the checkpoint's model kind (models/checkpoint.py)

    def __init__(self, cfg: Seq2SeqConfig, pretrained_encoder: nn.Module | None = None,
                 vocab_ids: list[list[int]] | None = None):
        """`vocab_ids`: the top-K ids per language, for an encoding built from `xlp vocab-score` (VLE)."""
        super().__init__()
        self.config = cfg
        d = cfg.d_model
        n_langs = max(1, len(cfg.langs))
        self.xlm_encoder = None
        if cfg.encoder_kind == "xlm":
            if pretrained_encoder is None:  # shapes only; weights come from the checkpoint

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
            self.src_encoding = build_encoding(cfg.lang_encoding, d, n_langs, cfg.encoding_options, vocab_ids)
            self.encoder = nn.ModuleList(cfg.block() for _ in range(cfg.enc_layers))
            self.enc_norm = nn.LayerNorm(d) if cfg.pre_norm else None
            self.pos_embed = None
            self.emb_norm = None
            self.scale = math.sqrt(d)
        if cfg.xlm_decoder:  # starts as the encoder's (XLM reloads its decoder from the MLM checkpoint)
            self.tgt_encoding = copy.deepcopy(self.xlm_encoder.lang_encoding)
        else:
            if vocab_ids is None and self.xlm_encoder is not None:
                vocab_ids = self.xlm_encoder.lang_encoding.vocabularies()
            self.tgt_encoding = build_encoding(cfg.lang_encoding, d, n_langs, cfg.encoding_options, vocab_ids)
        cfg.encoding_options = {**cfg.encoding_options, **self.tgt_encoding.config_state()}
        self.decoder = nn.ModuleList(cfg.block(cross_attn=True) for _ in range(cfg.dec_layers))
        if cfg.tie_self_attention:
            tie_self_attention(self.decoder, self.xlm_encoder.layers)
        self.dec_norm = nn.LayerNorm(d) if cfg.pre_norm else None

    @torch.no_grad()
    def init_decoder_from_encoder(self) -> None:
        """XLM's UNMT start: the decoder takes the pre-trained encoder's positions, embedding LayerNorm, language
        encoding and, layer by layer, its self-attention, feed-forward and LayerNorm weights (needs
        `xlm_decoder`); the cross-attention sub-layers keep their random initialisation."""
        enc = self.xlm_encoder
        if enc is None or not self.config.xlm_decoder:
            raise BadInput("init_decoder_from_encoder needs an XLM encoder and an XLM-style decoder")
        n = min(self.pos_embed.num_embeddings, enc.pos_embed.num_embeddings)
        self.pos_embed.weight[:n].copy_(enc.pos_embed.weight[:n])
        self.emb_norm.load_state_dict(enc.ln_emb.state_dict())
        self.tgt_encoding.load_state_dict(enc.lang_encoding.state_dict())
        for dec, src in zip(self.decoder, enc.layers):
            for name in ("attn", "ln_attn", "ffn", "ln_ffn"):
                getattr(dec, name).load_state_dict(getattr(src, name).state_dict())

    # -- what a subclass may change
    def position_offset(self, lang: torch.Tensor) -> torch.Tensor | None:
        """Phase offsets [B, d/2] of the sinusoids for a language (None: the plain sinusoids)."""
        return None

    def decoder_prefix(self) -> int:
        """How many leading decoder positions hold language vectors instead of words."""
        return self.tgt_encoding.prefix_len

    def _embed(self, tokens: torch.Tensor, lang: torch.Tensor, encoding: nn.Module,
               positions: torch.Tensor | None = None, present: Sequence[int] | None = None) -> torch.Tensor:
        """Embeddings of `tokens` [B, T] in language `lang` [B] -> [B, prefix + T, d]:
        (on_positions(on_words(E[w])) * scale + positions), dropout. The language encodings act on the
        unscaled embeddings, so language vectors and words share one scale (additive commutes with positions).
        `positions` [B, T]: the tokens' positions (default prefix .. prefix + T - 1; prefix slots keep 0 ..).
        `present`: the languages of `lang` when the host knows them (`TransformerEncoder.forward`)."""
        B, T = tokens.shape
        p = encoding.prefix_len
        x = self.embed(tokens)
        if T or p:
            langs_tok = lang[:, None].expand(B, max(T, 1))
            x = encoding.on_words(x, langs_tok, self.embed, present)
        x = encoding.on_positions(x, lang[:, None].expand(B, x.size(1)))
        x = x * self.scale
        pos = torch.arange(x.size(1), device=x.device).unsqueeze(0).expand(B, x.size(1))
        if positions is not None:
            pos = torch.cat([pos[:, :p], positions.to(pos.device)], dim=1)
        if self.pos_embed is not None:
            x = x + self.pos_embed(pos.clamp(max=self.pos_embed.num_embeddings - 1)).to(x.dtype)
        else:
            x = x + sinusoid(pos, self.config.d_model, self.position_offset(lang)).to(x.dtype)
        if self.emb_norm is not None:
            x = self.emb_norm(x)
        return F.dropout(x, self.config.dropout, self.training)

    # -- encoder
    def encode(self, src: torch.Tensor, src_lang: torch.Tensor, present: Sequence[int] | None = None
               ) -> dict[str, torch.Tensor]:
        """src [B, S] (with `</s>`, right-padded) -> {"out": [B, S', d], "mask": bool [B, 1, 1, S'] (True = keep)}."""
        pad = src.eq(PAD)
        if self.xlm_encoder is not None:
            pre = self.xlm_encoder.prefix_len
            out = self.xlm_encoder(src, src_lang, pad_mask=pad, present=present)
        else:
            pre = self.src_encoding.prefix_len
            out = self._embed(src, src_lang, self.src_encoding, present=present)
        keep = ~pad
        if pre:
            keep = torch.cat([keep.new_ones(src.size(0), pre), keep], dim=1)
        mask = keep[:, None, None, :]
        if self.xlm_encoder is None:
            for layer in self.encoder:
                out = layer(out, mask)
            if self.enc_norm is not None:
                out = self.enc_norm(out)
        return {"out": out, "mask": mask}

    # -- decoder
    def decoder_input(self, tgt: torch.Tensor) -> torch.Tensor:
        """Target ids [B, T] (no `</s>`) -> decoder input ids: `<s> y` (or `y` when the decoder starts from L_tgt)."""
        bos = tgt.new_full((tgt.size(0), 1), BOS)
        prev = torch.cat([bos, tgt], dim=1)
        return prev[:, self.decoder_prefix():]

    def embed_target(self, prev: torch.Tensor, tgt_lang: torch.Tensor, positions: torch.Tensor | None = None,
                     present: Sequence[int] | None = None) -> torch.Tensor:
        return self._embed(prev, tgt_lang, self.tgt_encoding, positions, present)

    def decode(self, prev: torch.Tensor, tgt_lang: torch.Tensor, memory: dict[str, torch.Tensor],
               cache: list[dict] | None = None, positions: torch.Tensor | None = None,
               present: Sequence[int] | None = None) -> torch.Tensor:
        """prev: decoder input ids [B, T'] (see `decoder_input`). Returns logits [B, T, V], T = T' + prefix.

        `positions` [B, T'] places the input tokens at other positions than prefix + 0, 1, .. (MASS decodes a
        span at the positions it had in the sentence).

        With `cache` (a list, one dict per layer, filled on the first call), only the positions not yet
        cached are run through the layers and only their logits are returned (incremental decoding).
        """
        # (the interlingua model's embed_target takes no positions nor `present`: it is never asked to)
        x = (self.embed_target(prev, tgt_lang) if positions is None and present is None
             else self.embed_target(prev, tgt_lang, positions, present))
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
            x = layer(x, causal, memory=memory["out"], memory_mask=memory["mask"],
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
        return self.config.max_positions - self.src_encoding.prefix_len

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def targets(tgt: torch.Tensor) -> torch.Tensor:
    """Gold outputs for teacher forcing: `y_1 .. y_T </s>` then padding, from right-padded `tgt` [B, T]."""
    lengths = tgt.ne(PAD).sum(1)
    out = torch.cat([tgt, tgt.new_full((tgt.size(0), 1), PAD)], dim=1)
    out[torch.arange(tgt.size(0)), lengths] = EOS
    return out


def smoothed_nll_sums(logits: torch.Tensor, gold: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
    """fairseq's label-smoothed cross-entropy and the plain NLL, each summed over the non-pad tokens of `gold`,
    as device tensors (masked sums: no host sync, shapes fixed):

    loss = (1 - eps) * nll + eps / V * sum_v (-log p_v)
    """
    lprobs = F.log_softmax(logits.float(), dim=-1)
    keep = gold.ne(PAD)
    g = gold.clamp(min=0).unsqueeze(-1)
    nll = -lprobs.gather(-1, g).squeeze(-1)
    smooth = -lprobs.sum(-1)
    V = lprobs.size(-1)
    loss = (1.0 - epsilon) * nll + (epsilon / V) * smooth
    zero = loss.new_zeros(())
    return torch.where(keep, loss, zero).sum(), torch.where(keep, nll, zero).sum()


def label_smoothed_nll(logits: torch.Tensor, gold: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor, int]:
    """`smoothed_nll_sums` and the number of non-pad tokens (read from the device): (loss, nll, n_tokens)."""
    loss, nll = smoothed_nll_sums(logits, gold, epsilon)
    return loss, nll, int(gold.ne(PAD).sum())
