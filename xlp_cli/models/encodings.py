"""Language encodings: how a multilingual Transformer is told which language each token belongs to.

Interface (used by `encoder.py`, `seq2seq.py` and fine-tuning; no other code branches on a name)
-----------------------------------------------------------------------------------------------------------
    enc = build_encoding(name, d_model, n_langs, options, vocab_ids=None)   # name in encoding_registry.ENCODINGS
    enc.spec                                                   # its registry line: options and capabilities
    enc.prefix_len                                             # int: positions the encoding prepends (0 or 1)
    enc.config_state()                                         # model-config entries it fills in (VLE: sizes)
    x = enc.on_words(word_emb, langs, embedding)               # BEFORE positions are added
        word_emb  [B, T, d]  word embeddings of the token ids
        langs     [B, T] long language index per token ([B] is accepted and broadcast: `expand_langs`)
        embedding the word nn.Embedding (VLE reads its current weights, so gradients reach them)
        returns   [B, prefix_len + T, d]
    x = enc.on_positions(x, langs_ext)                          # AFTER positions were added (same shape)
        langs_ext [B, prefix_len + T]: `extend_langs(langs, enc.prefix_len)`

The caller's order is: word_emb -> on_words -> (+ position embeddings of the extended sequence) ->
on_positions -> embedding LayerNorm -> dropout -> layers. With a prefix, the caller gives the prefix slot
position 0 and shifts the token positions by `prefix_len` (see `extend_positions`), extends the padding mask
with "not padding" (`extend_pad_mask`) and drops the first `prefix_len` outputs before an MLM head.

The prefix of `attaching` and `vle --vle-style padding` carries the language of the sequence's FIRST token
(a TLM window's second segment is not marked again; its tokens keep their own language only in the encodings
that act per token: additive, xlp, vle adding).

Encodings (equations in docs/encodings.md)
    none       identity.
    additive   XLM: x + L[lang] at every position (learned [n_langs, d], N(0, d^-1/2) like XLM's embeddings).
    attaching  Johnson et al.: one learned language vector (its own [n_langs, d] table, not a vocabulary entry)
               prepended to the sequence.
    xlp        XLP Algorithm 1: word_emb -> word_emb @ P_l^T + b_l per token language, before positions.
               Init: P_l = I, b_l = 0 (so at step 0 the model equals `none`); bias on by default (Algorithm 1
               uses nn.Linear(dim, dim), which has a bias); `xlp_bias=False` drops it.
    vle        VLE Eq. 3: E_Voc_l = mean of the CURRENT word embeddings of Voc_l (top-K ids of language l),
               E_V_l = sigmoid(W_l E_Voc_l) * E_Voc_l, W_l in R^{d x d} without bias (Eq. 3 has none),
               W_l ~ N(0, d^-1/2). Computed once per forward pass (an embedding_bag, not per token) for the
               languages present in the batch; in eval mode with gradients off it is computed for all languages,
               cached and reused until the weights change.
               style "adding": x + E_V[lang] per token; style "padding": E_V[lang of first token] prepended.
               On a decoder (translation, UNMT, MASS) the target language is told the same way: "adding" adds
               E_V[tgt] to `<s> y_1 ..` at every position, "padding" puts E_V[tgt] in place of `<s>`, so the first
               word is predicted from it. The decoder's module has its own W_l and the same Voc_l ids
               (`vocabularies()`), and reads the shared embedding table, so E_V[tgt] follows the embeddings as
               they train; in eval mode the vectors are cached, so incremental decoding computes them once.
"""

from __future__ import annotations

import importlib
import itertools
from typing import Any, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from xlp_cli.models.encoding_registry import ENCODINGS, EncodingSpec, spec as encoding_spec


def expand_langs(langs: torch.Tensor, length: int) -> torch.Tensor:
    """[B] or [B, T] language indices -> [B, T] long."""
    if langs.dim() == 1:
        return langs[:, None].expand(-1, length)
    return langs


def extend_langs(langs: torch.Tensor, prefix_len: int) -> torch.Tensor:
    """Language of each position after a prefix of `prefix_len` slots (the prefix takes the first token's)."""
    if prefix_len == 0:
        return langs
    return torch.cat([langs[:, :1].expand(-1, prefix_len), langs], dim=1)


def extend_positions(positions: torch.Tensor, prefix_len: int) -> torch.Tensor:
    """Prefix slots get positions 0..P-1; token positions shift by P."""
    if prefix_len == 0:
        return positions
    b = positions.shape[0]
    head = torch.arange(prefix_len, device=positions.device, dtype=positions.dtype)[None].expand(b, -1)
    return torch.cat([head, positions + prefix_len], dim=1)


def extend_pad_mask(pad_mask: torch.Tensor | None, prefix_len: int) -> torch.Tensor | None:
    """pad_mask is True at padding; prefix slots are never padding."""
    if pad_mask is None or prefix_len == 0:
        return pad_mask
    head = torch.zeros(pad_mask.shape[0], prefix_len, dtype=torch.bool, device=pad_mask.device)
    return torch.cat([head, pad_mask], dim=1)


class LanguageEncoding(nn.Module):
    """Base: the identity. Subclasses override one or both hooks; `prefix_len` comes from the registry line."""

    spec: EncodingSpec
    prefix_len = 0

    def __init__(self, d_model: int, n_langs: int, **options: Any):
        super().__init__()
        self.d_model = d_model
        self.n_langs = n_langs
        self.prefix_len = self.spec.prefix_slots(options)

    def config_state(self) -> dict[str, Any]:
        """Entries the model config must record to rebuild this module's shapes (the registry's state_keys)."""
        return {}

    def on_words(self, word_emb: torch.Tensor, langs: torch.Tensor, embedding: nn.Embedding,
                 present: Sequence[int] | None = None) -> torch.Tensor:
        """`present`: the language indices in `langs` when the caller knows them on the host (else None)."""
        return word_emb

    def on_positions(self, x: torch.Tensor, langs: torch.Tensor) -> torch.Tensor:
        return x

    def language_parameters(self) -> list[nn.Parameter]:
        """Parameters that belong to the language encoding (e.g. to freeze XLP projections when fine-tuning)."""
        return list(self.parameters())

    def vocabularies(self) -> list[list[int]] | None:
        """The top-K token ids per language it was built from (`vocab_ids`), for building its twin on a
        decoder; None for an encoding that needs none."""
        return None


class NoEncoding(LanguageEncoding):
    pass


def _embedding_init(weight: torch.Tensor, d_model: int) -> None:
    nn.init.normal_(weight, mean=0.0, std=d_model ** -0.5)


class AdditiveEncoding(LanguageEncoding):
    """XLM: a learned language embedding added at every position."""

    def __init__(self, d_model: int, n_langs: int):
        super().__init__(d_model, n_langs)
        self.lang_emb = nn.Embedding(n_langs, d_model)
        _embedding_init(self.lang_emb.weight, d_model)

    def on_positions(self, x: torch.Tensor, langs: torch.Tensor) -> torch.Tensor:
        return x + self.lang_emb(langs).to(x.dtype)


class AttachingEncoding(LanguageEncoding):
    """Johnson et al.: a language token prepended to the sequence (one extra position)."""

    def __init__(self, d_model: int, n_langs: int):
        super().__init__(d_model, n_langs)
        self.lang_emb = nn.Embedding(n_langs, d_model)
        _embedding_init(self.lang_emb.weight, d_model)

    def on_words(self, word_emb: torch.Tensor, langs: torch.Tensor, embedding: nn.Embedding,
                 present: Sequence[int] | None = None) -> torch.Tensor:
        head = self.lang_emb(langs[:, :1]).to(word_emb.dtype)  # [B, 1, d]
        return torch.cat([head, word_emb], dim=1)


class XlpEncoding(LanguageEncoding):
    """XLP (Algorithm 1): a per-language Linear(d, d) on the word embeddings, before positions are added."""

    def __init__(self, d_model: int, n_langs: int, xlp_bias: bool = True):
        super().__init__(d_model, n_langs, xlp_bias=xlp_bias)
        # weight[l] follows nn.Linear's (out, in) layout: y = x @ weight[l].T + bias[l]
        self.weight = nn.Parameter(torch.eye(d_model).repeat(n_langs, 1, 1))
        self.bias = nn.Parameter(torch.zeros(n_langs, d_model)) if xlp_bias else None

    def project(self, x: torch.Tensor, lang: int) -> torch.Tensor:
        w = self.weight[lang].to(x.dtype)
        b = None if self.bias is None else self.bias[lang].to(x.dtype)
        return F.linear(x, w, b)

    def on_words(self, word_emb: torch.Tensor, langs: torch.Tensor, embedding: nn.Embedding,
                 present: Sequence[int] | None = None) -> torch.Tensor:
        if present is not None:  # the languages are known on the host: no sync, shapes fixed (the training step)
            if len(present) == 1:
                return self.project(word_emb, int(present[0]))
            out = word_emb
            for lang in present:  # a pair batch: each language's projection, kept where its tokens are
                out = torch.where((langs == lang)[..., None], self.project(word_emb, int(lang)), out)
            return out
        # Fast path: the whole batch is one language (every MLM step of a language-sampled stream).
        first = langs.reshape(-1)[:1]
        if bool((langs == first).all()):
            return self.project(word_emb, int(first.item()))
        # Mixed languages (TLM, mixed batches): one matmul per language present over its tokens only.
        flat = word_emb.reshape(-1, word_emb.shape[-1])
        flat_langs = langs.reshape(-1)
        out = torch.empty_like(flat)
        for lang in torch.unique(flat_langs).tolist():
            idx = (flat_langs == lang).nonzero(as_tuple=True)[0]
            out = out.index_copy(0, idx, self.project(flat.index_select(0, idx), int(lang)))
        return out.reshape(word_emb.shape)


class VleEncoding(LanguageEncoding):
    """VLE (Eq. 3): language vectors computed from the current embeddings of each language's top-K tokens."""

    def __init__(self, d_model: int, n_langs: int, vle_style: str = "adding", vle_k: int = 100,
                 vocab_ids: Sequence[Sequence[int]] | None = None, vle_sizes: Sequence[int] | None = None):
        super().__init__(d_model, n_langs, vle_style=vle_style)
        if vle_style not in ("adding", "padding"):
            raise ValueError(f"vle_style must be adding or padding, not {vle_style!r}")
        self.style = vle_style
        if vocab_ids is not None:
            sizes = [len(v) for v in vocab_ids]
            ids = torch.tensor([i for v in vocab_ids for i in v], dtype=torch.long)
        elif vle_sizes is not None:  # shapes only; the ids come with the state dict (load_pretrained)
            sizes = list(vle_sizes)
            ids = torch.zeros(sum(sizes), dtype=torch.long)
        else:
            raise ValueError("vle needs vocab_ids (top-K ids per language) or vle_sizes")
        if len(sizes) != n_langs or min(sizes, default=0) < 1:
            raise ValueError(f"vle needs a non-empty vocabulary for each of the {n_langs} languages")
        self.sizes = sizes
        self.register_buffer("voc_ids", ids, persistent=True)
        offsets = torch.tensor([0] + sizes[:-1], dtype=torch.long).cumsum(0)
        self.register_buffer("voc_offsets", offsets, persistent=False)
        self.W = nn.Parameter(torch.empty(n_langs, d_model, d_model))
        nn.init.normal_(self.W, mean=0.0, std=d_model ** -0.5)
        self._cache: tuple[Any, torch.Tensor] | None = None

    def language_vectors(self, embedding: nn.Embedding, present: Sequence[int] | None = None) -> torch.Tensor:
        """E_V for every language, [n_langs, d].

        Training: computed once per forward pass, only for the languages `present` in the batch (rows of the
        others are zeros and never read), so an MLM step of one language averages K embeddings, not n_langs*K.
        Eval mode without gradients: all languages, cached while the weights are unchanged."""
        weight = embedding.weight
        use_cache = not self.training and not torch.is_grad_enabled()
        if use_cache:
            key = (weight.data_ptr(), weight._version, self.W._version, self.voc_ids._version, weight.device)
            if self._cache is not None and self._cache[0] == key:
                return self._cache[1]
            e_v = self._vectors(weight, list(range(self.n_langs)))
            self._cache = (key, e_v)
            return e_v
        self._cache = None
        langs = list(range(self.n_langs)) if present is None else sorted(set(int(l) for l in present))
        e_v = self._vectors(weight, langs)
        if len(langs) == self.n_langs:
            return e_v
        rows = dict(zip(langs, e_v.unbind(0)))  # the others: zeros, never read (stacked: no index from the host)
        zero = e_v.new_zeros(e_v.shape[1])
        return torch.stack([rows.get(l, zero) for l in range(self.n_langs)])

    def _vectors(self, weight: torch.Tensor, langs: list[int]) -> torch.Tensor:
        """sigma(W_l E_Voc_l) * E_Voc_l for `langs` (in that order), [len(langs), d]. Slices and bags only, so a
        training step never copies an index from the host nor waits for the GPU."""
        # sparse=True: the gradient reaches the Voc_l rows as a sparse tensor that autograd adds into the dense
        # gradient of the word embedding, instead of materialising a second dense [V, d] gradient.
        sparse = weight.requires_grad
        if len(langs) == self.n_langs:
            e_voc = F.embedding_bag(self.voc_ids, weight, self.voc_offsets, mode="mean", sparse=sparse)  # [n, d]
            w = self.W
        else:
            starts = [0, *itertools.accumulate(self.sizes)]
            first = self.voc_offsets[:1]  # a zero offset on the right device: one bag per language
            e_voc = torch.cat([F.embedding_bag(self.voc_ids[starts[l]: starts[l] + self.sizes[l]], weight,
                                               first, mode="mean", sparse=sparse) for l in langs])
            w = torch.stack([self.W[l] for l in langs])
        gate = torch.sigmoid(torch.einsum("lij,lj->li", w, e_voc))               # sigma(W_l E_Voc_l)
        return gate * e_voc

    def train(self, mode: bool = True) -> "VleEncoding":
        self._cache = None
        return super().train(mode)

    def on_words(self, word_emb: torch.Tensor, langs: torch.Tensor, embedding: nn.Embedding,
                 present: Sequence[int] | None = None) -> torch.Tensor:
        if present is None and (self.training or torch.is_grad_enabled()):
            present = torch.unique(langs if self.style == "adding" else langs[:, :1]).tolist()
        e_v = self.language_vectors(embedding, present).to(word_emb.dtype)
        if self.style == "padding":
            return torch.cat([e_v[langs[:, :1]], word_emb], dim=1)
        return word_emb + e_v[langs]

    def language_parameters(self) -> list[nn.Parameter]:
        return [self.W]

    def vocabularies(self) -> list[list[int]]:
        starts = [0, *itertools.accumulate(self.sizes)]
        return [self.voc_ids[a: a + n].tolist() for a, n in zip(starts, self.sizes)]

    @torch.no_grad()
    def feature_gates(self, embedding: nn.Embedding) -> torch.Tensor:
        """sigma(W_l E_Voc_l) for every language, [n_langs, d]: VLE Fig. 2's feature contributions."""
        e_voc = F.embedding_bag(self.voc_ids, embedding.weight, self.voc_offsets, mode="mean")
        return torch.sigmoid(torch.einsum("lij,lj->li", self.W, e_voc))

    def config_state(self) -> dict[str, Any]:
        return {"vle_sizes": list(self.sizes)}


def encoding_class(name: str) -> type[LanguageEncoding]:
    """The nn.Module class of a registered encoding (its registry line names it); the class gets its `spec`."""
    s = encoding_spec(name)
    module, _, attr = s.cls.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    cls.spec = s
    return cls


def build_encoding(name: str, d_model: int, n_langs: int, options: dict[str, Any] | None = None,
                   vocab_ids: Sequence[Sequence[int]] | None = None) -> LanguageEncoding:
    """The encoding `name` for `n_langs` languages of width `d_model`.

    `options`: its registry options (missing ones take their defaults) plus recorded `state_keys`;
    `vocab_ids`: the top-K ids per language, for an encoding that `needs_vocab_scores`."""
    if name not in ENCODINGS:
        raise ValueError(f"unknown language encoding {name!r} (choose from {', '.join(ENCODINGS)})")
    s = encoding_spec(name)
    kwargs = s.options_from(options or {})
    for k in s.state_keys:
        if (options or {}).get(k) is not None:
            kwargs[k] = options[k]
    if s.needs_vocab_scores and vocab_ids is not None:
        kwargs["vocab_ids"] = vocab_ids
    return encoding_class(name)(d_model, n_langs, **kwargs)


for _name in ENCODINGS:  # give every registered class its registry line
    encoding_class(_name)


__all__ = ["ENCODINGS", "build_encoding", "encoding_class", "LanguageEncoding", "expand_langs", "extend_langs",
           "extend_positions", "extend_pad_mask"]
