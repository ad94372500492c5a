"""The retrieval sets: aligned (xx sentences, English sentences) per language. No torch here.

Tatoeba (LASER, as XTREME uses it): `tatoeba.<iso3>-eng.<iso3>` and `tatoeba.<iso3>-eng.eng`, line-aligned, about
1,000 pairs per language (sw 390, th 548). xlp's two-letter codes map to the files' ISO 639-3 codes below (zh ->
cmn, sw -> swh); a run whose languages already are three-letter Tatoeba codes is read as is. The English side
differs per language (it is not multi-way parallel).

PUD (UD's Parallel Universal Dependencies): `UD_<Language>-PUD/<xx>_pud-ud-test.conllu[.gz]`, 1,000 sentences in
the same order in every language; sentences are paired by `# sent_id` (each pair is checked), the text is the
`# text` comment. Languages with a PUD file: en fr es de ru tr ar th zh hi (zh PUD is in traditional script).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.conllu import read_conllu

TATOEBA_CODES = {"ar": "ara", "bg": "bul", "de": "deu", "el": "ell", "es": "spa", "fr": "fra", "hi": "hin",
                 "ru": "rus", "sw": "swh", "th": "tha", "tr": "tur", "ur": "urd", "vi": "vie", "zh": "cmn"}


@dataclass
class Pairs:
    """Line-aligned sentences: xx[i] translates en[i]."""
    lang: str
    xx: list[str]
    en: list[str]
    source: list[Path]

    def __len__(self) -> int:
        return len(self.xx)


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    except UnicodeDecodeError as e:
        raise BadInput(f"not UTF-8 text ({e})", path=path) from None


def tatoeba(root: Path, lang: str, limit: int = 0) -> Pairs | None:
    """The Tatoeba pairs of `lang`, or None when the folder has no file for it."""
    code = TATOEBA_CODES.get(lang, lang)
    xx_path, en_path = root / f"tatoeba.{code}-eng.{code}", root / f"tatoeba.{code}-eng.eng"
    if not xx_path.is_file() or not en_path.is_file():
        return None
    xx, en = _lines(xx_path), _lines(en_path)
    if len(xx) != len(en):
        raise BadInput(f"{xx_path.name} has {len(xx)} lines but {en_path.name} has {len(en)}: not line-aligned",
                       path=xx_path)
    for i, (a, b) in enumerate(zip(xx, en), 1):
        if not a.strip() or not b.strip():
            raise BadInput("empty sentence in a line-aligned pair", path=xx_path if not a.strip() else en_path, position=i)
    if limit:
        xx, en = xx[:limit], en[:limit]
    return Pairs(lang, xx, en, [xx_path, en_path])


def pud_files(ud_dir: Path) -> dict[str, Path]:
    """{lang: its PUD test file} under a folder of UD treebanks."""
    out = {}
    for p in sorted(Path(ud_dir).glob("UD_*-PUD/*_pud-ud-test.conllu*")):
        out[p.name.split("_", 1)[0]] = p
    return out


def pud(ud_dir: Path, lang: str, limit: int = 0) -> Pairs | None:
    """The PUD sentences of `lang` paired with English PUD by sent_id, or None when either file is missing."""
    files = pud_files(ud_dir)
    if lang not in files or "en" not in files or lang == "en":
        return None
    xx = [(s.id, s.text) for s in read_conllu(files[lang])]
    en = [(s.id, s.text) for s in read_conllu(files["en"])]
    if [i for i, _ in xx] != [i for i, _ in en]:
        raise BadInput(f"PUD sentence ids differ from English PUD ({files['en'].name}): not parallel", path=files[lang])
    if limit:
        xx, en = xx[:limit], en[:limit]
    return Pairs(lang, [t for _, t in xx], [t for _, t in en], [files[lang], files["en"]])
