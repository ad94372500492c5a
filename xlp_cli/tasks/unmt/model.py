"""The UNMT model: an XLM encoder and a decoder of the same shape (`Seq2SeqConfig.like_encoder`), built one of
three ways (`--init`):

- an `xlp pretrain` MLM run (kind "encoder"): the encoder is that run's model, and the decoder starts from it too
  (positions, embedding LayerNorm, language encoding, and layer by layer self-attention, FFN and LayerNorms;
  cross-attention random): XLM's `--reload_model 'mlm.pth,mlm.pth'`;
- an `xlp pretrain --objective mass` run (kind "seq2seq"): the whole encoder-decoder as MASS trained it;
- nothing: random weights of `--encoder-preset` (the VLE paper's "Random" rows; Voc_l for vle then comes from
  `xlp vocab-score` among --data).
The run's language order is the model's (a pre-trained model may know more languages than the pair).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xlp_cli.artifacts.files import sha256_file
from xlp_cli.core.errors import BadInput
from xlp_cli.models import checkpoint as ckpt
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder
from xlp_cli.models.encoding_registry import spec as encoding_spec
from xlp_cli.models.seq2seq import Seq2Seq, Seq2SeqConfig
from xlp_cli.train.inputs import top_k_vocabularies


def from_scratch(cfg: Any, data: Any) -> Seq2Seq:
    options = encoding_spec(cfg.lang_encoding).options_from(cfg)
    found = top_k_vocabularies(cfg.data, cfg.lang_encoding, options, data.langs,
                               sha256_file(data.dict_path), len(data.dico))
    enc_cfg = ModelConfig.from_preset(cfg.encoder_preset, vocab_size=len(data.dico), langs=list(data.langs),
                                      lang_encoding=cfg.lang_encoding, encoding_options=options, dropout=cfg.dropout,
                                      attention_dropout=cfg.dropout, n_positions=max(cfg.max_len + 8, 64))
    enc = TransformerEncoder(enc_cfg, vocab_ids=found[2] if found else None)
    return Seq2Seq(Seq2SeqConfig.like_encoder(enc.config), enc)


def from_run(cfg: Any, data: Any) -> Seq2Seq:
    run = Path(cfg.init)
    folder = ckpt.checkpoint_dir(run, cfg.which)
    pre = ckpt.load_model(folder)
    if getattr(pre, "KIND", "") == "encoder":
        model = Seq2Seq(Seq2SeqConfig.like_encoder(pre.config), pre)
        model.init_decoder_from_encoder()
    elif getattr(pre, "KIND", "") == "seq2seq" and pre.config.xlm_decoder:
        model = pre
    else:
        raise BadInput(f"--init needs an `xlp pretrain` run (MLM or MASS), not a {pre.KIND} checkpoint", path=folder)
    mc = model.config
    missing = [lang for lang in data.langs if lang not in mc.langs]
    if missing:
        raise BadInput(f"the pre-trained model has no language {', '.join(missing)} (its languages: "
                       f"{', '.join(mc.langs)})", path=run)
    if mc.vocab_size != len(data.dico):
        raise BadInput(f"the pre-trained model has {mc.vocab_size} token ids, the data's dictionary {len(data.dico)}: "
                       "use the pre-training id shards", path=run)
    if mc.lang_encoding != cfg.lang_encoding:
        raise BadInput(f"the pre-trained model uses --lang-encoding {mc.lang_encoding}, not {cfg.lang_encoding}",
                       path=run)
    run_dict = run / "dict.txt"
    if run_dict.is_file() and sha256_file(run_dict) != sha256_file(data.dict_path):
        raise BadInput("the pre-training dictionary differs from the data's dict.txt", path=run_dict)
    return model


def build(cfg: Any, data: Any) -> Seq2Seq:
    return from_run(cfg, data) if cfg.init is not None else from_scratch(cfg, data)
