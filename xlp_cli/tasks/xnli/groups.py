"""The model families that XNLI fine-tuning trains, with their encoded train, selection and prediction sets.

transfer: one family (train on `--train-lang`, select on its dev set or the dev average, predict every language).
translate-train: one family per language (its translated training file, or 90% of its dev set); with `--veco
plug-in`, every example is paired with its translation in the pair language: by default its machine translation
(`pairs.py`, `--plug-in-translator`), with `--plug-in-pairs oracle` the human example of the same index
(docs/veco.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.xnli import data as xd
from xlp_cli.tasks.xnli.config import XnliConfig
from xlp_cli.tasks.xnli.pairs import Translator, translated

Encode = Callable[[str, str, list[xd.Example]], xd.Encoded]


def pair_language(cfg: XnliConfig, lang: str, langs: list[str]) -> str:
    """The language of the translations paired with `lang`'s examples (plug-in)."""
    if lang != cfg.plug_in_lang:
        return cfg.plug_in_lang
    others = [l for l in langs if l != lang]
    if not others:
        raise BadInput(f"--veco plug-in: '{lang}' is the --plug-in-lang and no other test language is left to pair "
                       "its examples with; add one to --lang")
    return others[0]


def build(cfg: XnliConfig, langs: list[str], dev: dict, test: dict, files: dict[str, Path], enc: Encode,
          set_total: Callable[[int], None], translate: Translator | None = None) -> tuple[list[dict[str, Any]], int]:
    """([{name, source, train, select, predict}], unlabelled training rows skipped). `files`: train, dev, test;
    `set_total(n)` gives the progress bar the number of examples about to be encoded (when known up front);
    `translate`: the plug-in translator (`--plug-in-pairs translated`)."""
    if cfg.setting == "transfer":
        return _transfer(cfg, langs, dev, test, files, enc, set_total)
    groups: list[dict[str, Any]] = []
    skipped_rows = 0
    plug_in = cfg.veco == "plug-in"
    dev_file, test_file = files["dev"], files["test"]
    if not cfg.translated_train and not plug_in:  # each language's dev set (90% train, 10% selection) and test set
        set_total(sum(len(dev.get(l, [])) + len(test[l]) for l in langs))
    for lang in langs:
        if cfg.translated_train:
            path = Path(cfg.translated_train.replace("{lang}", lang))
            tr, s = xd.read_tsv(path, default_lang=lang, langs={lang})
            skipped_rows += s
            rows = tr.get(lang, [])
            if not rows:
                raise BadInput(f"no training rows for {lang}", path=path)
            sel_rows = dev.get(lang, [])
            source = str(path)
        else:
            rows, sel_rows = xd.holdout_split(dev.get(lang, []))
            source = f"{dev_file} (90% of the {lang} dev set: translated training data substitute)"
        if cfg.max_train_rows:
            rows = rows[: cfg.max_train_rows]
        if not rows or not sel_rows:
            raise BadInput(f"no translate-train data for {lang} (train {len(rows)} rows, selection {len(sel_rows)} rows)",
                           path=dev_file)
        sel = enc(f"select-{'dev' if cfg.translated_train else 'heldout'}", lang, sel_rows)
        train = enc(f"train-{'file' if cfg.translated_train else 'dev90'}", lang, rows)
        tst = enc("test", lang, test[lang])
        if plug_in and translate is not None:  # y = x machine-translated into the pair language
            plang = pair_language(cfg, lang, langs)
            for name, e, mine in (("train", train, rows), ("select", sel, sel_rows), ("test", tst, test[lang])):
                partner = translated(mine, lang, plang, translate, cfg.out / "plug_in_pairs" / name)
                e.pair = enc(f"{name}-mt-pair-of-{lang}", plang, partner)
            source += f"; plug-in pairs: {plang}, machine-translated by {translate.seed_dir}"
        elif plug_in:  # oracle: the human example of the same index
            plang = pair_language(cfg, lang, langs)
            if cfg.translated_train:
                ppath = Path(cfg.translated_train.replace("{lang}", plang))
                ptrain = xd.read_tsv(ppath, default_lang=plang, langs={plang})[0].get(plang, [])
            else:
                ppath, ptrain = dev_file, dev.get(plang, [])
            for name, e, mine, others, where in (("train", train, rows, ptrain, ppath),
                                                 ("select", sel, sel_rows, dev.get(plang, []), dev_file),
                                                 ("test", tst, test[lang], test.get(plang, []), test_file)):
                e.pair = enc(f"{name}-pair-of-{lang}", plang, xd.pair_examples(mine, others, where))
            source += f"; plug-in pairs: {plang}, oracle pairs (the human XNLI example of the same index)"
        groups.append({
            "name": lang, "source": source, "train": [train], "select": {lang: sel},
            "predict": {lang: {"dev": sel, "test": tst}},
        })
    return groups, skipped_rows


def _transfer(cfg: XnliConfig, langs: list[str], dev: dict, test: dict, files: dict[str, Path], enc: Encode,
              set_total: Callable[[int], None]) -> tuple[list[dict[str, Any]], int]:
    tl = cfg.train_lang
    tr, skipped_rows = xd.read_tsv(files["train"], default_lang=tl, langs={tl})
    rows = tr.get(tl, [])
    if not rows:
        raise BadInput(f"no training rows in language {tl!r}", path=files["train"])
    if cfg.max_train_rows:
        rows = rows[: cfg.max_train_rows]
    sel_langs = [tl] if cfg.select_on == "train" else [l for l in langs if l in dev]
    if not sel_langs or not all(l in dev for l in sel_langs):
        raise BadInput(f"no {tl!r} dev rows to select on", path=files["dev"])
    set_total(len(rows) + sum(len(dev[l]) for l in sel_langs) + sum(len(dev.get(l, [])) + len(test[l]) for l in langs))
    group = {
        "name": "transfer",
        "train": [enc("train", tl, rows)],
        "select": {l: enc("dev", l, dev[l]) for l in sel_langs},
        "predict": {l: {"dev": enc("dev", l, dev[l]) if l in dev else None, "test": enc("test", l, test[l])} for l in langs},
    }
    return [group], skipped_rows
