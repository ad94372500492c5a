"""TextPipeline: raw text -> the `raw` and `text` columns of a prepared shard, one definition for every stage.

    pipe = TextPipeline.from_config(manifest["config"])   # flag-name keys, as `xlp prepare` records them
    pipe.process("Hello, World!", "en")                   # -> "hello , world !"

Steps, in XLM's order (tools/tokenize.sh), each switchable:
  clean      remove non-printing characters (\\p{C} -> space)            --clean/--no-clean
  normalize  Moses punctuation normalization for the language          --normalize/--no-normalize
  clean      again, as tokenize.sh runs remove-non-printing-char after the normalizer
  tokenize   moses | xlm | none (jieba for zh, pythainlp for th)        --tokenize
  lowercase  xlm | safe | none                                          --lowercase
The output is whitespace-separated tokens joined by single spaces. `raw(text)` is the cleaned,
untokenized text (the `raw` column); `process(raw(x)) == process(x)` because cleaning is idempotent.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable, Mapping

from xlp_cli.text import case as _case
from xlp_cli.text import tokenize as _tok
from xlp_cli.text.clean import collapse_spaces, remove_non_printing
from xlp_cli.text.normalize import get_normalizer


@dataclasses.dataclass(frozen=True)
class TextPipeline:
    clean: bool = True
    normalize: bool = True
    tokenize: str = "moses"
    lowercase: str = "safe"

    def __post_init__(self) -> None:
        if self.tokenize not in _tok.MODES:
            raise ValueError(f"tokenize must be one of {_tok.MODES}, not {self.tokenize!r}")
        if self.lowercase not in _case.MODES:
            raise ValueError(f"lowercase must be one of {_case.MODES}, not {self.lowercase!r}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "TextPipeline":
        """From a prepare config dict (flag-name keys like the manifest's `config`; underscores accepted)."""
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}  # the one default of each key
        get = lambda k: config.get(k, config.get(k.replace("-", "_"), defaults[k]))  # noqa: E731
        return cls(clean=bool(get("clean")), normalize=bool(get("normalize")), tokenize=str(get("tokenize")),
                   lowercase=str(get("lowercase")))

    @classmethod
    def from_manifest(cls, folder: "str | os.PathLike[str]") -> "TextPipeline":
        """From an `xlp prepare` output folder."""
        from xlp_cli import artifacts

        return cls.from_config(artifacts.read_manifest(folder, stage="prepare")["config"])

    def config(self) -> dict[str, Any]:
        return {"clean": self.clean, "normalize": self.normalize, "tokenize": self.tokenize, "lowercase": self.lowercase}

    def raw(self, text: str) -> str:
        """The cleaned, untokenized text: non-printing characters removed (if --clean), spaces collapsed."""
        if self.clean:
            text = remove_non_printing(text)
        return collapse_spaces(text)

    def process(self, text: str, lang: str) -> str:
        if self.clean:
            text = remove_non_printing(text)
        if self.normalize:
            text = get_normalizer(lang)(text)
            if self.clean:
                text = remove_non_printing(text)
        text = _tok.get_tokenizer(lang, self.tokenize)(text)
        if self.lowercase != "none":
            text = _case.apply_case(text, self.lowercase)
        return collapse_spaces(text)

    def process_batch(self, texts: Iterable[str], lang: str) -> list[str]:
        """`process` over many texts of one language (the tools are looked up once)."""
        norm = get_normalizer(lang) if self.normalize else None
        tok = _tok.get_tokenizer(lang, self.tokenize)
        mode = self.lowercase
        out = []
        for text in texts:
            if self.clean:
                text = remove_non_printing(text)
            if norm is not None:
                text = norm(text)
                if self.clean:
                    text = remove_non_printing(text)
            text = tok(text)
            if mode != "none":
                text = _case.apply_case(text, mode)
            out.append(collapse_spaces(text))
        return out

    def __call__(self, text: str, lang: str) -> str:
        return self.process(text, lang)
