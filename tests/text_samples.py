"""Real text samples for the XLM parity tests, read from the shared corpora at test time (nothing is copied).

`held_in(lang)`: per language, lines spread evenly over each source (Common Voice, UD treebanks `# text`,
Tatoeba, XNLI dev, GlobalVoices, IWSLT, Multi30k, Wikipedia dump wikitext), plus the lines of those sources
that hold the hard cases (no-break spaces, guillemets, curly quotes, ellipses, a final period after an
abbreviation or a URL, digits around spaces). XNLI test is not used: it is the separate evaluation set
(benchmarks/text_parity_eval.py); flores101_devtest and ntrex128 are held out.
"""

from __future__ import annotations

import bz2
import csv
import functools
import gzip
import lzma
import random
import re

from xlp_cli.artifacts.files import data_dir

LANGS = "en fr es de el bg ru tr ar vi th zh hi sw ur".split()
TATOEBA = dict(fr="fra", es="spa", de="deu", el="ell", bg="bul", ru="rus", tr="tur", ar="ara", vi="vie", th="tha",
               zh="cmn", hi="hin", sw="swh", ur="urd")
WIKI = {"en": ("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2", bz2.open, "utf-8"),
        "el": ("elwiki-truncated-100k.xml.xz", lzma.open, "utf-8"), "vi": ("viwiki-truncated-100k.xml.xz", lzma.open, "utf-8"),
        "bg": ("bgwiki-latest-pages-articles-shortened.xml.bz2", bz2.open, "utf-16")}
HARD = re.compile("[\u00a0\u202f\u2009«»‘’“”„‚…–—´`]|\\.\\.|\\w\\.\\w+\\.$|\\d \\d|\\d\u00a0|[:;!?%]|\\. ?[\"']$|'\\w")


def _text_lines(raw: bytes, encoding: str = "utf-8") -> list[str]:
    lines = (x.removesuffix("\r") for x in raw.decode(encoding, errors="replace").split("\n"))
    return [x for x in lines if x.strip() and "\r" not in x]


@functools.lru_cache(maxsize=None)
def sources(lang: str) -> dict[str, list[str]]:
    root = data_dir()
    out: dict[str, list[str]] = {}
    cv = "zh-CN" if lang == "zh" else lang
    for p in sorted((root / "commonvoice_sentences").glob(f"{cv}.*.txt.gz")):
        out.setdefault("commonvoice", []).extend(_text_lines(gzip.open(p).read()))
    for p in sorted((root / "ud_treebanks").glob(f"UD_*/{lang}_*.conllu.gz")):
        out.setdefault("ud", []).extend(x[9:] for x in _text_lines(gzip.open(p).read()) if x.startswith("# text = "))
    if lang in TATOEBA:
        p = root / "tatoeba_laser" / f"tatoeba.{TATOEBA[lang]}-eng.{TATOEBA[lang]}"
        if p.is_file():
            out["tatoeba"] = _text_lines(p.read_bytes())
    xnli = root / "xnli" / "xnli.dev.tsv"
    if xnli.is_file():
        with open(xnli, encoding="utf-8", newline="") as f:
            rows = [r for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if r["language"] == lang]
        out["xnli_dev"] = [s for r in rows for s in (r["sentence1"], r["sentence2"]) if s.strip() and "\r" not in s]
    extra = {"sw": ["opus_globalvoices_en_sw/GlobalVoices.en-sw.sw.gz"], "en": ["iwslt14_de_en/test.en", "multi30k/val.en.gz"],
             "de": ["iwslt14_de_en/test.de", "multi30k/val.de.gz"], "fr": ["multi30k/val.fr.gz"]}
    for rel in extra.get(lang, []):
        p = root / rel
        if p.is_file():
            out[rel.split("/")[0]] = _text_lines(gzip.open(p).read() if rel.endswith(".gz") else p.read_bytes())
    if lang in WIKI:
        name, opener, enc = WIKI[lang]
        p = root / "wikipedia_dumps" / name
        if p.is_file():
            with opener(p, "rb") as f:
                out["wikipedia"] = _text_lines(f.read(), enc)[:30000]
    return out


def held_in(lang: str, per_source: int = 150, hard: int = 150, seed: int = 0) -> list[str]:
    rng = random.Random(f"{seed}-{lang}")
    picked: list[str] = []
    for _name, lines in sorted(sources(lang).items()):
        step = max(1, len(lines) // per_source)
        picked += lines[::step][:per_source]
        tough = [x for x in lines if HARD.search(x)]
        picked += rng.sample(tough, min(hard, len(tough)))
    return list(dict.fromkeys(picked))
