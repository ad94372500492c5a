"""Tiny pre-trained runs for the finetune / evaluate tests, built through the real stages (prepare ->
bpe learn -> bpe apply -> pretrain) on real Common Voice sentences (en, fr) read from the shared data at
test time. Built once per pytest session (a marker file in the session's base temp folder), then reused.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xlp_cli.core.config import from_dict

LANGS = ("en", "fr")
CV_FILES = {"en": "en.sentence-collector.txt.gz", "fr": "fr.issue2259_deleted_export_readd_fixed.txt.gz"}


def build_runs(base: Path, data: Path) -> dict[str, Path]:
    """{"ids": IDS, "xlp": RUN, "additive": RUN, "ids_other": IDS with another dictionary}."""
    root = base / "xlp_ft_runs"
    out = {"ids": root / "ids", "xlp": root / "pt_xlp", "additive": root / "pt_additive", "ids_other": root / "ids_other",
           "prep": root / "prep"}
    if (root / "done").is_file():
        return out
    from xlp_cli.bpe.config import BpeApplyConfig, BpeLearnConfig
    from xlp_cli.bpe.run import apply, learn
    from xlp_cli.prepare.config import PrepareConfig
    from xlp_cli.prepare.run import run as prepare
    from xlp_cli.train.config import PretrainConfig
    from xlp_cli.train.pretrain import run as pretrain

    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    inputs = []
    for lang in LANGS:
        path = data / "commonvoice_sentences" / CV_FILES[lang]
        if not path.is_file():
            pytest.skip(f"Common Voice sentences not found at {path}")
        link = src / f"cv.{lang}.gz"  # the text source reads the language from the file name
        if not link.exists():
            os.symlink(path, link)
        inputs.append(str(link))
    prepare(from_dict(PrepareConfig, {"inputs": inputs, "source": "text", "lang": list(LANGS), "max-records": 3000,
                                      "out": str(out["prep"])}))
    learn(from_dict(BpeLearnConfig, {"data": [str(out["prep"])], "codes": 1500, "out": str(root / "bpe")}))
    apply(from_dict(BpeApplyConfig, {"data": [str(out["prep"]), str(root / "bpe")], "out": str(out["ids"])}))
    learn(from_dict(BpeLearnConfig, {"data": [str(out["prep"])], "codes": 300, "out": str(root / "bpe_other")}))
    apply(from_dict(BpeApplyConfig, {"data": [str(out["prep"]), str(root / "bpe_other")], "out": str(out["ids_other"])}))
    for enc in ("xlp", "additive"):
        pretrain(from_dict(PretrainConfig, {
            "data": [str(out["ids"])], "out": str(out[enc]), "lang-encoding": enc, "preset": "tiny",
            "d-model": 64, "n-heads": 4, "d-ff": 256,
            "max-steps": 40, "batch-size": 16, "accumulate": 1, "bptt": 64, "warmup": 10, "lr": 5e-4,
            "eval-every": 20, "eval-batches": 2, "num-threads": 1, "seed": 0}))
    (root / "done").write_text("ok")
    return out
