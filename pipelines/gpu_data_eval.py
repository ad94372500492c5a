"""`make gpu-data-eval`: the evaluation data of `pipelines/fidelity_gpu.toml`, copied under `gpu-data/eval/`.

The device machine of a GPU lease sees only the repository (`../shared` does not travel, 40 MiB for all of
`gpu-data/`), so the study reads its evaluation data from `gpu-data/eval/`, laid out as `XLP_DATA_DIR` is (the
recipe's script sets `XLP_DATA_DIR=gpu-data/eval`). For every language of the pre-training data (the train/<lang>
folders of `gpu-data/ids`, from `make gpu-data`; without it the 15 XNLI languages) it copies, unchanged, from XLP_DATA_DIR:
    bilingual_dict_wiktionary/<l>-en.test            the dictionary cosine (VLE Table 2)
    tatoeba_laser/tatoeba.<code>-eng.{<code>,eng}    Tatoeba retrieval
    ud_treebanks/UD_*/<l>_*-ud-test.conllu.gz      POS (every test set scores) and PUD; + English EWT dev (trains)
with the SOURCE.md / LICENSE.txt of each folder. zh and th are left out: their word segmenters (jieba, pythainlp)
are not in the device image, so no evaluation text of theirs could be tokenized there (the claims task and POS
then score the other languages). FLORES and NTREX are never copied. It prints the sizes and stops
(exit 1) when `gpu-data/` would exceed 40 MiB.

    .venv/bin/python pipelines/gpu_data_eval.py [--ids gpu-data/ids] [--out gpu-data/eval] [--langs en,fr,...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from xlp_cli.artifacts import layout
from xlp_cli.tasks.conllu import treebank_files
from xlp_cli.tasks.retrieval.data import TATOEBA_CODES

XNLI15 = ["en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur"]
LIMIT = 40 * 2**20
HELD_OUT = ("flores101_devtest", "ntrex128")
SEGMENTED = ("zh", "th")  # jieba / pythainlp: not in the device image


def languages(ids: Path) -> list[str]:
    """The monolingual languages of an `xlp bpe apply` folder (its train/<lang> folders), else the XNLI 15."""
    langs = [g for g in layout.groups(ids, "train") if "-" not in g]
    return [l for l in XNLI15 if l in langs] + [l for l in langs if l not in XNLI15] if langs else list(XNLI15)


def wanted(src: Path, langs: list[str]) -> list[Path]:
    """The files to copy, relative to `src`."""
    files: list[Path] = []
    for name in ("bilingual_dict_wiktionary/SOURCE.md", "tatoeba_laser/SOURCE.md", "tatoeba_laser/README.md",
                 "ud_treebanks/SOURCE.md"):
        if (src / name).is_file():
            files.append(Path(name))
    for lang in langs:
        if lang != "en" and (src / f"bilingual_dict_wiktionary/{lang}-en.test").is_file():
            files.append(Path(f"bilingual_dict_wiktionary/{lang}-en.test"))
        code = TATOEBA_CODES.get(lang, lang)
        for side in (code, "eng"):
            p = Path(f"tatoeba_laser/tatoeba.{code}-eng.{side}")
            if lang != "en" and (src / p).is_file():
                files.append(p)
    for lang, split, path in treebank_files(src / "ud_treebanks"):
        if lang in langs and (split == "test" or (split == "dev" and "EWT" in path.parent.name)):
            files.append(path.relative_to(src))
            lic = path.parent / "LICENSE.txt"
            if lic.is_file():
                files.append(lic.relative_to(src))
    assert not any(part in HELD_OUT for f in files for part in f.parts)
    return list(dict.fromkeys(files))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=Path(os.environ.get("XLP_DATA_DIR", "../shared/data")))
    ap.add_argument("--ids", type=Path, default=Path("gpu-data/ids"))
    ap.add_argument("--out", type=Path, default=Path("gpu-data/eval"))
    ap.add_argument("--langs", default="", help="comma-separated languages (default: those of --ids)")
    a = ap.parse_args(argv)
    langs = [l for l in ([l for l in a.langs.split(",") if l] or languages(a.ids)) if l not in SEGMENTED]
    files = wanted(a.src, langs)
    for f in files:
        dst = a.out / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(a.src / f, dst)
    size = sum(p.stat().st_size for p in a.out.rglob("*") if p.is_file())
    root = a.out.parent
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    print(f"gpu-data-eval: {len(files)} files for {len(langs)} languages ({','.join(langs)}) -> {a.out}: "
          f"{size / 2**20:.1f} MiB; {root}/ in all: {total / 2**20:.1f} MiB (limit 40)")
    if total > LIMIT:
        print(f"gpu-data-eval: {root}/ is over 40 MiB: carry less (fewer languages: --langs)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
