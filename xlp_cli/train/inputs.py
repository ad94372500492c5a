"""What `xlp pretrain` reads: the id shards and dictionary of `xlp bpe apply`, the languages, and (for an encoding
that needs it) the top-K vocabularies of `xlp vocab-score`. Every problem is one BadInput line naming the file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from xlp_cli.artifacts import datadirs, layout
from xlp_cli.artifacts.manifest import find_upstream, ids_dictionary
from xlp_cli.artifacts.special_ids import N_SPECIAL
from xlp_cli.bpe.dictionary import Dictionary
from xlp_cli.core import textfile
from xlp_cli.core.errors import BadInput
from xlp_cli.models.encoding_registry import spec as encoding_spec


@dataclasses.dataclass
class PretrainInputs:
    ids_dir: Path
    ids_manifest: dict[str, Any]
    dict_path: Path
    dictionary: Dictionary
    dict_sha: str
    langs: list[str]
    vocab_ids: list[list[int]] | None = None      # top-K ids per language (encodings that need vocab scores)
    vocab_dir: Path | None = None
    vocab_manifest: dict[str, Any] | None = None

    def upstream(self) -> list[dict[str, Any]]:
        up = [{"path": str(self.ids_dir), "stage": "bpe-apply", "config_hash": self.ids_manifest.get("config_hash")}]
        if self.vocab_dir is not None:
            up.append({"path": str(self.vocab_dir), "stage": "vocab-score",
                       "config_hash": (self.vocab_manifest or {}).get("config_hash")})
        return up


def find_ids(data: list[Path]) -> tuple[Path, dict[str, Any]]:
    """The `xlp bpe apply` output among --data (or upstream of them; or a prepare folder that applied BPE)."""
    datadirs.only_one(list(data), "bpe-apply", "this command")  # one dictionary, one id space
    found = find_upstream(list(data), "bpe-apply")  # (also inside a `xlp prepare --bpe-codes` folder)
    if found is None:
        raise BadInput("no `xlp bpe apply` output (manifest stage 'bpe-apply') among --data or their upstream",
                       path=",".join(map(str, data)))
    return found


def resolve(data: list[Path], lang: list[str], needs: frozenset[str], lang_encoding: str,
            encoding_options: dict[str, Any], objective: str = "") -> PretrainInputs:
    """`needs`: {"mono"} and/or {"pairs"}: which train folders the objective reads (`objective`: its name)."""
    ids_dir, ids_manifest = find_ids(data)
    dict_path, dict_sha = ids_dictionary(ids_dir, ids_manifest)
    dico = Dictionary.read(dict_path)
    if len(dico) <= N_SPECIAL:
        raise BadInput("the dictionary has no words", path=dict_path)
    train = ids_dir / "train"
    folders = layout.groups(ids_dir, "train")
    available = sorted(g for g in folders if "-" not in g)
    pair_langs = sorted({x for g in folders if "-" in g for x in g.split("-", 1)})
    if "pairs" in needs and not pair_langs:
        raise BadInput(f"--objective {objective or 'tlm'} needs parallel sentence pairs (train/<l1>-<l2> shards of "
                       f"`xlp bpe apply`); this data folder has none", path=ids_dir)
    langs = list(lang) or (available if "mono" in needs else pair_langs)
    if not langs:
        raise BadInput("no languages: the id shards have no train split", path=train)
    if len(set(langs)) != len(langs):
        raise BadInput(f"--lang lists a language twice: {','.join(langs)}")
    if "mono" in needs:
        for lg in langs:
            if lg not in available:
                raise BadInput(f"language '{lg}' has no train data (have: {', '.join(available) or 'none'})",
                               path=train / lg)
    inp = PretrainInputs(ids_dir, ids_manifest, dict_path, dico, dict_sha, langs)
    found = top_k_vocabularies(data, lang_encoding, encoding_options, langs, inp.dict_sha, len(dico))
    if found is not None:
        inp.vocab_dir, inp.vocab_manifest, inp.vocab_ids = found
    return inp


def top_k_vocabularies(data: list[Path], lang_encoding: str, encoding_options: dict[str, Any], langs: list[str],
                       dict_sha256: str | None, dict_size: int
                       ) -> tuple[Path, dict[str, Any], list[list[int]]] | None:
    """For an encoding that needs `xlp vocab-score` (VLE): (its folder among --data or upstream, its manifest,
    the top-K ids of each language); None for the others."""
    spec = encoding_spec(lang_encoding)
    if not spec.needs_vocab_scores:
        return None
    datadirs.only_one(list(data), "vocab-score", "this command")
    found = find_upstream(list(data), "vocab-score")
    if found is None:
        raise BadInput(f"--lang-encoding {lang_encoding} needs the output of `xlp vocab-score` "
                       "(vle_vocab.json) among --data", path=",".join(map(str, data)))
    vocab_dir, manifest = found
    k = int(encoding_options[spec.vocab_k_option])
    ids = read_top_k(vocab_dir / "vle_vocab.json", langs, k, dict_sha256)
    for lg, row in zip(langs, ids):
        if max(row) >= dict_size or min(row) < 0:
            raise BadInput(f"the top-K vocabulary of '{lg}' has ids outside the dictionary (size {dict_size})",
                           path=vocab_dir / "vle_vocab.json")
    return vocab_dir, manifest, ids


def read_top_k(path: Path, langs: list[str], k: int, dict_sha256: str | None) -> list[list[int]]:
    """The top-K ids of each language from `xlp vocab-score`'s vle_vocab.json."""
    if not path.is_file():
        raise BadInput("this encoding needs vle_vocab.json from `xlp vocab-score` (pass its folder with --data)",
                       path=path)
    obj = textfile.json_object(path)
    try:
        table = obj["langs"]
    except (KeyError, TypeError) as e:
        raise BadInput(f"unreadable vle_vocab.json ({e})", path=path) from None
    if dict_sha256 and obj.get("dictionary_sha256") and obj["dictionary_sha256"] != dict_sha256:
        raise BadInput("vle_vocab.json was computed with a different dictionary than the id shards", path=path)
    out = []
    for lang in langs:
        if lang not in table:
            raise BadInput(f"no VLE vocabulary for language '{lang}'", path=path)
        entry = table[lang]
        if str(k) not in entry:
            raise BadInput(f"no K={k} vocabulary for '{lang}' (available: {', '.join(sorted(entry, key=int))})",
                           path=path)
        ids = [int(i) for i in entry[str(k)]]
        if not ids:
            raise BadInput(f"empty K={k} vocabulary for '{lang}'", path=path)
        out.append(ids)
    return out
