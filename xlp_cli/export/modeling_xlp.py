"""An xlp encoder for Hugging Face transformers (`trust_remote_code=True`), written by `xlp export --format hf`.

    model = AutoModelForMaskedLM.from_pretrained(FOLDER, trust_remote_code=True)
    out = model(input_ids, langs=langs, attention_mask=mask)    # langs: [B] or [B, T] indices into config.langs
    out.logits                                                  # [B, T, V], aligned with input_ids

`AutoModel` gives `XlpModel`: `last_hidden_state` [B, T, d] aligned with input_ids (a prefix slot is dropped) and
`pooler_output` [B, d], the first position of the full sequence (xlp's sentence representation: the language
slot of `attaching` / `vle` padding). Needs torch and transformers only. The equations are those of xlp's
docs/encodings.md; the tensor names are xlp's, under `xlp.`.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutputWithPooling, MaskedLMOutput


class XlpConfig(PretrainedConfig):
    model_type = "xlp"

    def __init__(self, vocab_size=64, d_model=32, n_layers=2, n_heads=2, d_ff=64, n_positions=520, dropout=0.1,
                 attention_dropout=0.1, pre_ln=False, lang_encoding="none", langs=None, xlp_bias=True,
                 vle_style="adding", vle_sizes=None, layer_norm_eps=1e-12, pad_token_id=2, bos_token_id=0,
                 eos_token_id=1, **kwargs):
        self.vocab_size, self.d_model, self.n_layers, self.n_heads, self.d_ff = vocab_size, d_model, n_layers, n_heads, d_ff
        self.n_positions, self.dropout, self.attention_dropout, self.pre_ln = n_positions, dropout, attention_dropout, pre_ln
        self.lang_encoding, self.langs, self.xlp_bias = lang_encoding, list(langs or []), xlp_bias
        self.vle_style, self.vle_sizes, self.layer_norm_eps = vle_style, vle_sizes, layer_norm_eps
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id, **kwargs)


class _NoEncoding(nn.Module):
    """The identity; each encoding overrides `words` (before positions are added) and/or `positions` (after)."""
    prefix = 0

    def __init__(self, c):
        super().__init__()

    def words(self, x, langs, embed):
        return x

    def positions(self, x, langs):
        return x


class _Additive(_NoEncoding):
    def __init__(self, c):
        super().__init__(c)
        self.lang_emb = nn.Embedding(max(1, len(c.langs)), c.d_model)

    def positions(self, x, langs):
        return x + self.lang_emb(langs)


class _Attaching(_NoEncoding):
    prefix = 1

    def __init__(self, c):
        super().__init__(c)
        self.lang_emb = nn.Embedding(max(1, len(c.langs)), c.d_model)

    def words(self, x, langs, embed):
        return torch.cat([self.lang_emb(langs[:, :1]), x], dim=1)


class _Xlp(_NoEncoding):
    def __init__(self, c):
        super().__init__(c)
        n, d = max(1, len(c.langs)), c.d_model
        self.weight = nn.Parameter(torch.eye(d).repeat(n, 1, 1))
        self.bias = nn.Parameter(torch.zeros(n, d)) if c.xlp_bias else None

    def words(self, x, langs, embed):  # y = x W_l^T + b_l for each token's language l
        out = torch.zeros_like(x)
        for lang in torch.unique(langs).tolist():
            y = F.linear(x, self.weight[lang], None if self.bias is None else self.bias[lang])
            out = torch.where((langs == lang)[..., None], y, out)
        return out


class _Vle(_NoEncoding):
    def __init__(self, c):
        super().__init__(c)
        n, d = max(1, len(c.langs)), c.d_model
        self.sizes, self.padding = list(c.vle_sizes), c.vle_style == "padding"
        self.prefix = int(self.padding)
        self.register_buffer("voc_ids", torch.zeros(sum(self.sizes), dtype=torch.long))
        self.W = nn.Parameter(torch.zeros(n, d, d))

    def words(self, x, langs, embed):  # E_V_l = sigmoid(W_l E_Voc_l) * E_Voc_l, E_Voc_l = mean of Voc_l's embeddings
        offsets = torch.tensor([0] + self.sizes[:-1], device=x.device).cumsum(0)
        e_voc = F.embedding_bag(self.voc_ids, embed.weight, offsets, mode="mean")
        e_v = torch.sigmoid(torch.einsum("lij,lj->li", self.W, e_voc)) * e_voc
        if self.padding:
            return torch.cat([e_v[langs[:, :1]], x], dim=1)
        return x + e_v[langs]


ENCODINGS = {"none": _NoEncoding, "additive": _Additive, "attaching": _Attaching, "xlp": _Xlp, "vle": _Vle}


class _Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.h, self.p = c.n_heads, c.attention_dropout
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.out = nn.Linear(c.d_model, c.d_model)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.p if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class _FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(c.d_model, c.d_ff), nn.Linear(c.d_ff, c.d_model)

    def forward(self, x):
        return self.lin2(F.gelu(self.lin1(x)))


class _Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn, self.ffn = _Attention(c), _FeedForward(c)
        self.ln_attn = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.ln_ffn = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.drop, self.pre_ln = nn.Dropout(c.dropout), c.pre_ln

    def forward(self, x, mask):
        for norm, fn in ((self.ln_attn, lambda h: self.attn(h, mask)), (self.ln_ffn, self.ffn)):
            x = x + self.drop(fn(norm(x))) if self.pre_ln else norm(x + self.drop(fn(x)))
        return x


class XlpPreTrainedModel(PreTrainedModel):
    config_class = XlpConfig
    base_model_prefix = "xlp"

    def _init_weights(self, module):  # every tensor comes from the exported checkpoint
        pass


class XlpModel(XlpPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        c = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_token_id)
        self.pos_embed = nn.Embedding(c.n_positions, c.d_model)
        self.lang_encoding = ENCODINGS[c.lang_encoding](c)
        self.ln_emb = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.drop = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(_Layer(c) for _ in range(c.n_layers))
        self.ln_final = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.pre_ln else nn.Identity()
        self.post_init()

    def get_input_embeddings(self):
        return self.embed

    def forward(self, input_ids, langs=None, attention_mask=None, position_ids=None, return_dict=None, **kwargs):
        b, t = input_ids.shape
        if langs is None:
            if len(self.config.langs) > 1:
                raise ValueError(f"pass langs= (indices into {self.config.langs}; the export's tokenizer returns them: "
                                 "tok(text, lang=...)): this model has several languages")
            langs = torch.zeros(b, dtype=torch.long, device=input_ids.device)
        langs = langs[:, None].expand(-1, t) if langs.dim() == 1 else langs
        p = self.lang_encoding.prefix
        if position_ids is None:
            position_ids = torch.arange(t, device=input_ids.device)[None].expand(b, -1)
        pad = None if attention_mask is None else attention_mask == 0
        x = self.lang_encoding.words(self.embed(input_ids), langs, self.embed)
        if p:
            position_ids = torch.cat([torch.zeros_like(position_ids[:, :1]), position_ids + 1], dim=1)
            langs = torch.cat([langs[:, :1], langs], dim=1)
            pad = None if pad is None else torch.cat([torch.zeros_like(pad[:, :1]), pad], dim=1)
        x = self.lang_encoding.positions(x + self.pos_embed(position_ids), langs)
        x = self.drop(self.ln_emb(x))
        mask = None
        if pad is not None:
            mask = ~pad[:, None, None, :]
            x = x.masked_fill(pad[..., None], 0.0)
        for layer in self.layers:
            x = layer(x, mask)
            if pad is not None:
                x = x.masked_fill(pad[..., None], 0.0)
        x = self.ln_final(x)
        return BaseModelOutputWithPooling(last_hidden_state=x[:, p:], pooler_output=x[:, 0])


class XlpForMaskedLM(XlpPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.xlp = XlpModel(config)
        self.pred_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.post_init()

    def forward(self, input_ids, langs=None, attention_mask=None, position_ids=None, labels=None, **kwargs):
        out = self.xlp(input_ids, langs=langs, attention_mask=attention_mask, position_ids=position_ids)
        logits = F.linear(out.last_hidden_state, self.xlp.embed.weight, self.pred_bias)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=None)
