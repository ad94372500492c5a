"""What `xlp finetune --task unmt` reads: the monolingual id shards of its two languages, the text codec, and the
parallel valid/test sets that are only ever used to measure (never to train).

    d = UnmtData(cfg)
    d.langs                  # the pair, e.g. ["de", "en"] (--lang, or the two languages with train/<lang> shards)
    d.paths["de"]            # train/de shards
    d.valid, d.test          # {"de-en": (Pairs, refs), "en-de": ...} or {}

Monolingual data of BOTH languages is required: a pair with only one side's is refused (one line naming the
missing folder). Evaluation sets come from two line-aligned raw text files NAME.<lang>[.gz] (--test-data,
--valid-data; e.g. Multi30k's test_2016_flickr.{de,en}.gz), encoded with the run's own text pipeline and BPE
(the same chain as the training data), or else from the ids' valid|test/<l1>-<l2> pair folders.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from xlp_cli.artifacts.manifest import find_upstream, ids_dictionary
from xlp_cli.artifacts import layout
from xlp_cli.artifacts.shards import shard_paths
from xlp_cli.bpe.dictionary import Dictionary
from xlp_cli.bpe.encoder import TextEncoder
from xlp_cli.core import config as cfgmod
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.translation.data import Pairs, read_pairs, serve
from xlp_cli.tasks.translation.job import References
from xlp_cli.train.inputs import find_ids


class FileRefs:
    """References of a raw-file evaluation set: {id: {lang: (raw line, tokenized text)}} (`References`' interface)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, tuple[str, str]]] = {}

    def get(self, rid: str, lang: str) -> tuple[str, str] | None:
        return self.rows.get(rid, {}).get(lang)


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise BadInput("no such file", path=path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise BadInput(f"corrupt gzip file ({e})", path=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise BadInput(f"not UTF-8 ({e.reason})", path=path, position=line) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            raise BadInput("empty line in an evaluation file", path=path, position=i)
    return [line.strip() for line in lines]


def read_aligned(paths: list[Path], langs: list[str]) -> dict[str, tuple[Path, list[str]]]:
    """{lang: (file, lines)} for two line-aligned files whose names carry their language (NAME.<lang>[.gz])."""
    out: dict[str, tuple[Path, list[str]]] = {}
    for p in map(Path, paths):
        named = [part for part in p.name.split(".")[1:] if part in langs]
        if len(named) != 1:
            raise BadInput(f"cannot tell the language of this file: name it NAME.<lang>[.gz] with <lang> one of "
                           f"{','.join(langs)}", path=p)
        if named[0] in out:
            raise BadInput(f"two files for language '{named[0]}'", path=p)
        out[named[0]] = (p, _lines(p))
    (pa, a), (pb, b) = out[langs[0]], out[langs[1]]
    if len(a) != len(b):
        short, other = (pa, pb) if len(a) < len(b) else (pb, pa)
        raise BadInput(f"the evaluation files differ in length: {short.name} ends at line {min(len(a), len(b))}, "
                       f"{other.name} goes on", path=other, position=min(len(a), len(b)) + 1)
    return out


def file_pairs(paths: list[Path], langs: list[str], codec: TextEncoder) -> dict[str, tuple[Pairs, Any]]:
    """Both directions of a raw-file evaluation set, encoded with the run's codec."""
    files = read_aligned(paths, langs)
    refs = FileRefs()
    ids_by_lang, ids = {}, [f"{files[langs[0]][0].name.split('.')[0]}:{i + 1}" for i in range(len(files[langs[0]][1]))]
    for lang, (_, lines) in files.items():
        ids_by_lang[lang] = codec.encode_batch(lines, lang)
        for rid, raw, tok in zip(ids, lines, codec.text(lines, lang)):
            refs.rows.setdefault(rid, {})[lang] = (raw, tok)
    l1, l2 = langs
    return {f"{l1}-{l2}": (Pairs(l1, l2, ids, ids_by_lang[l1], ids_by_lang[l2]), refs),
            f"{l2}-{l1}": (Pairs(l2, l1, ids, ids_by_lang[l2], ids_by_lang[l1]), refs)}


class UnmtData:
    def __init__(self, cfg: Any):
        self.ids_dir, self.ids_manifest = find_ids(cfg.data)
        dict_path, _ = ids_dictionary(self.ids_dir, self.ids_manifest)
        self.dict_path, self.dico = dict_path, Dictionary.read(dict_path)
        train = self.ids_dir / "train"
        mono = [g for g in layout.groups(self.ids_dir, "train")
                if "-" not in g and shard_paths(layout.read_dir(self.ids_dir, "train", g))]
        langs = list(dict.fromkeys(cfgmod.parse_langs(cfg.lang))) or mono
        if len(langs) != 2:
            raise BadInput(f"unmt trains one language pair: give --lang l1,l2 (languages with monolingual train "
                           f"data here: {', '.join(mono) or 'none'})", path=train)
        for lang in langs:
            if lang not in mono:
                raise BadInput(f"unmt needs monolingual train data of both languages: '{lang}' has none (no shards "
                               f"in train/{lang}; have: {', '.join(mono) or 'none'})", path=train / lang)
        self.langs = langs
        self.directions = [f"{langs[0]}-{langs[1]}", f"{langs[1]}-{langs[0]}"]
        self.paths = {lang: shard_paths(layout.read_dir(self.ids_dir, "train", lang)) for lang in langs}
        self.codec = TextEncoder.from_folder(self.ids_dir)
        prep = find_upstream([self.ids_dir], "prepare")
        self.prep_dir = prep[0] if prep else None
        self.valid = self._eval_set(cfg.valid_data, "valid")
        self.test = self._eval_set(cfg.test_data, "test")

    def _eval_set(self, files: list[Path], split: str) -> dict[str, tuple[Pairs, Any]]:
        if files:
            return file_pairs(files, self.langs, self.codec)
        corpus = read_pairs(self.ids_dir, split, set(self.langs))
        refs = References(self.prep_dir, split)
        return {d: (p, refs) for d in self.directions if (p := serve(corpus, d)) is not None}
