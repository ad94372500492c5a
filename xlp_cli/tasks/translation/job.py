"""Everything a translation run needs, prepared once from its inputs: the parallel id data, directions, the
text codec, the model config, and (with --init-encoder) the pre-trained encoder. From a VECO run (an encoder with
cross-attention) the whole encoder-decoder starts from it (docs/veco.md): the encoder without its cross-attention,
decoder layers of the encoder's shape, one per encoder layer, whose self-attention (tied or copied),
cross-attention (the encoder-decoder attention) and FFN come from the same VECO layer."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from xlp_cli.artifacts.files import sha256_file
from xlp_cli.artifacts.manifest import find_upstream, ids_dictionary
from xlp_cli.artifacts import layout
from xlp_cli.artifacts.shards import read_shard, shard_paths
from xlp_cli.bpe.dictionary import Dictionary
from xlp_cli.bpe.encoder import TextEncoder
from xlp_cli.core import config as cfgmod, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.models.checkpoint import load_pretrained
from xlp_cli.models.encoding_registry import spec as encoding_spec
from xlp_cli.models.factory import build_seq2seq
from xlp_cli.models.seq2seq import Seq2Seq, Seq2SeqConfig
from xlp_cli.models.veco import init_decoder, is_veco, plug_out
from xlp_cli.tasks.translation.config import TranslationConfig
from xlp_cli.tasks.translation.data import Pairs, directions_for, read_pairs, serve, split_direction
from xlp_cli.train.inputs import find_ids, top_k_vocabularies


def fit_lengths(pairs: Pairs, max_src: int, max_tgt: int, policy: str, where: str) -> int:
    """Truncate (or refuse) sentences longer than the model's positions. Returns how many were cut."""
    cut = 0
    for i in range(len(pairs)):
        for seqs, limit, side in ((pairs.src, max_src, pairs.src_lang), (pairs.tgt, max_tgt, pairs.tgt_lang)):
            if len(seqs[i]) > limit:
                if policy == "fail":
                    raise BadInput(f"sentence {pairs.ids[i]} ({side}) has {len(seqs[i])} subword tokens, more than "
                                   f"the {limit} the model's positions allow (--max-positions, or --overflow truncate)",
                                   path=where)
                seqs[i] = seqs[i][:limit]
                cut += 1
    return cut


class References:
    """Raw and tokenized reference text of the prepared pair shards, by id and language."""

    def __init__(self, prep_dir: Path | None, split: str):
        self.rows: dict[str, dict[str, tuple[str, str]]] = {}
        if prep_dir is None:
            return
        for folder in [layout.read_dir(prep_dir, split, g) for g in layout.groups(prep_dir, split) if "-" in g]:
            l1, l2 = folder.name.split("-", 1)
            for shard in shard_paths(folder):
                t = read_shard(shard)
                if not {"id", "raw1", "raw2", "text1", "text2"} <= set(t.column_names):
                    continue
                c = t.to_pydict()
                for i, rid in enumerate(c["id"]):
                    row = self.rows.setdefault(rid, {})
                    row[l1] = (c["raw1"][i], c["text1"][i])
                    row[l2] = (c["raw2"][i], c["text2"][i])

    def get(self, rid: str, lang: str) -> tuple[str, str] | None:
        return self.rows.get(rid, {}).get(lang)


class Job:
    def __init__(self, cfg: TranslationConfig):
        self.cfg = cfg
        for d in list(cfg.directions) + list(cfg.zero_shot):
            split_direction(d)
        self.ids_dir, self.ids_manifest = find_ids(cfg.data)
        prep = find_upstream([self.ids_dir], "prepare")
        self.prep_dir = prep[0] if prep else None
        self.dict_path, self.dict_sha = ids_dictionary(self.ids_dir, self.ids_manifest)
        self.dico = Dictionary.read(self.dict_path)
        keep = set(cfgmod.parse_langs(cfg.lang)) or None
        train = read_pairs(self.ids_dir, "train", keep, max_rows=cfg.max_train_pairs)
        if not train:
            raise BadInput("no parallel training data: expected pair folders train/<l1>-<l2> with shards"
                           + (f" for languages {', '.join(sorted(keep))}" if keep else ""), path=self.ids_dir / "train")
        self.zero_shot = list(dict.fromkeys(cfg.zero_shot))
        self.directions = list(dict.fromkeys(cfg.directions)) or directions_for(train, cfg.mix, cfg.target_lang, set(self.zero_shot))
        if not self.directions:
            raise BadInput(f"no training direction: no pair folder has {cfg.target_lang!r} (--target-lang) on one side"
                           if cfg.mix == "many-to-one" else "no training direction", path=self.ids_dir / "train")
        have = ", ".join(train) or "none"
        self.train: dict[str, Pairs] = {}
        for d in self.directions:
            p = serve(train, d)
            if p is None:
                raise BadInput(f"direction {d} has no training data (pair folders here: {have})", path=self.ids_dir / "train")
            self.train[d] = p
        if cfg.arch == "interlingua":  # one orientation per pair: the losses train both directions
            seen, kept = set(), {}
            for d, p in self.train.items():
                key = frozenset(split_direction(d))
                if key not in seen:
                    seen.add(key)
                    kept[d] = p
            self.train = kept
        self.valid_all = read_pairs(self.ids_dir, "valid", keep)
        self.test_all = read_pairs(self.ids_dir, "test", keep)
        if cfg.arch == "interlingua" and "t2s" in cfg.intl_losses:  # t2s trains the reverse directions too
            for d in list(self.train):
                s, t = split_direction(d)
                if f"{t}-{s}" not in self.directions:
                    self.directions.append(f"{t}-{s}")
            clash = sorted(set(self.directions) & set(self.zero_shot))
            if clash:
                raise BadInput(f"zero-shot direction(s) {', '.join(clash)} would be trained by the t2s loss")
        self.eval_dirs = self.directions + [z for z in self.zero_shot if z not in self.directions]
        for z in self.zero_shot:
            if serve(self.test_all, z) is None and serve(self.valid_all, z) is None:
                raise BadInput(f"zero-shot direction {z} has no valid or test data to evaluate on", path=self.ids_dir)
        langs = sorted({l for d in self.eval_dirs for l in split_direction(d)})
        self.pretrained = self.veco = None
        self.init_mapping: list[dict[str, Any]] = []
        if cfg.init_encoder is not None:
            self._check_pretrained(langs)
            langs = list(self.pretrained.config.langs)
            if is_veco(self.pretrained):  # the encoder-decoder starts from it; the encoder is the plugged-out one
                self.veco, self.pretrained = self.pretrained, plug_out(self.pretrained)
        self.langs = langs
        enc = self.pretrained.config if self.pretrained is not None else None
        veco = {"decoder_layout": "encoder", "dec_layers": enc.n_layers, "heads": enc.n_heads, "ffn": enc.d_ff,
                "pre_norm": enc.pre_ln, "tie_self_attention": cfg.tie_self_attention} if self.veco is not None else {}
        self.model_cfg = Seq2SeqConfig.from_preset(
            cfg.preset, vocab_size=len(self.dico), langs=langs, arch=cfg.arch, lang_encoding=cfg.lang_encoding,
            encoding_options=encoding_spec(cfg.lang_encoding).options_from(cfg), dropout=cfg.dropout,
            max_positions=cfg.max_positions, intl_positions=cfg.intl_positions, intl_layers=cfg.intl_layers,
            **({"d_model": enc.d_model, "encoder_kind": "xlm", "encoder_config": enc.to_dict(),
                "enc_layers": enc.n_layers, **veco} if enc is not None else {}))
        self.vocab_ids = None  # VLE without a pre-trained encoder: Voc_l from `xlp vocab-score` among --data
        if self.pretrained is None:
            found = top_k_vocabularies(cfg.data, cfg.lang_encoding, self.model_cfg.encoding_options, langs,
                                       self.dict_sha, len(self.dico))
            self.vocab_ids = found[2] if found else None
        probe = build_seq2seq(self.model_cfg, copy.deepcopy(self.pretrained) if self.veco is not None else self.pretrained,
                              self.vocab_ids)
        self.max_src = probe.max_source_len() - 1
        self.max_tgt = self.model_cfg.max_positions - probe.decoder_prefix() - 1
        del probe
        self.truncated = 0
        for d, p in self.train.items():
            self.truncated += fit_lengths(p, self.max_src, self.max_tgt, cfg.overflow, str(self.ids_dir / "train" / d))
        if self.truncated:
            ui.warn(f"{self.truncated} training sentences were longer than the model's positions and were truncated")
        self.codec = TextEncoder.from_folder(self.ids_dir)
        self.lowercased = self.codec.lowercases

    def _check_pretrained(self, langs: list[str]) -> None:
        run = Path(self.cfg.init_encoder)
        self.pretrained = load_pretrained(run, self.cfg.which)
        missing = [l for l in langs if l not in self.pretrained.config.langs]
        if missing:
            raise BadInput(f"the pre-trained encoder has no language {', '.join(missing)} "
                           f"(its languages: {', '.join(self.pretrained.config.langs)})", path=run)
        if self.pretrained.config.vocab_size != len(self.dico):
            raise BadInput(f"the pre-trained encoder has {self.pretrained.config.vocab_size} token ids, the translation "
                           f"data's dictionary {len(self.dico)}: apply the pre-training BPE/dictionary to the parallel data",
                           path=run)
        if self.pretrained.config.lang_encoding != self.cfg.lang_encoding:
            raise BadInput(f"the pre-trained encoder uses --lang-encoding {self.pretrained.config.lang_encoding}, "
                           f"not {self.cfg.lang_encoding}", path=run)
        run_dict = run / "dict.txt"
        if run_dict.is_file() and sha256_file(run_dict) != self.dict_sha:
            raise BadInput("the pre-training dictionary differs from the translation data's dict.txt", path=run_dict)

    def new_model(self) -> Seq2Seq:
        model = build_seq2seq(self.model_cfg, copy.deepcopy(self.pretrained) if self.pretrained is not None else None,
                              self.vocab_ids)
        if self.veco is not None:
            self.init_mapping = init_decoder(model, self.veco, self.model_cfg.tie_self_attention)
        return model

    def may_leave_parameters_unused(self) -> bool:
        """Whether a step can leave some parameters without a gradient on some process (DDP must then look for
        them): processes may train different directions in one step, the interlingua calls encode/decode and skips
        switched-off terms, languages only evaluated (zero-shot) or only known to a pre-trained encoder are never
        trained, and a pre-trained encoder may carry parts seq2seq does not use."""
        trained = {l for d in self.train for l in split_direction(d)}
        return (self.cfg.arch == "interlingua" or len(self.train) > 1 or set(self.langs) != trained
                or self.pretrained is not None)


def describe(job: Job, n_params: int, rt: Any) -> str:
    cfg = job.cfg
    return (f"translation: {cfg.arch} / {cfg.lang_encoding}, {n_params / 1e6:.2f}M parameters, directions "
            f"{', '.join(job.directions)}" + (f", zero-shot {', '.join(job.zero_shot)}" if job.zero_shot else "")
            + f" on {rt.describe()}")
