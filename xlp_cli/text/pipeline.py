"""TextPipeline: raw text -> the `raw` and `text` columns of a prepared shard, one definition for every stage.

    pipe = TextPipeline.from_config(manifest["config"])   # flag-name keys, as `xlp prepare` records them
    pipe.process("Hello, World!", "en")                   # -> "hello , world !"

Steps, each switchable, run natively (xlp_cli/text/csrc/, without the GIL) except the zh/th segmenters:
  clean      remove non-printing characters (\\p{C} -> space)            --clean/--no-clean
  normalize  Moses punctuation normalization for the language          --normalize/--no-normalize
  tokenize   moses | xlm | none (jieba for zh, pythainlp for th)        --tokenize
  lowercase  xlm | safe | none                                          --lowercase
Order:
- `--tokenize xlm` is XLM's tools/tokenize.sh followed by lowercase_and_remove_accent.py, byte for byte:
  normalize, clean, tokenizer.perl (th: pythainlp's segmentation); zh: jieba first, then normalize and
  clean. The output keeps the reference's spacing (th: whitespace tokens, hi: the double spaces that
  deleting a split-off virama leaves).
- `moses` and `none`: clean, normalize, clean again, tokenize, lowercase; tokens joined by single spaces.
`raw(text)` is the cleaned, untokenized text (the `raw` column: what SentencePiece learns on). `text` is
computed from the input, not from `raw`: the normalizer's rules see tabs, carriage returns and no-break
spaces as perl does.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable, Mapping

from xlp_cli.text import native
from xlp_cli.text.case import MODES as CASE_MODES
from xlp_cli.text.clean import collapse_spaces, remove_non_printing
from xlp_cli.text.langs import base_lang
from xlp_cli.text.segment import segmenter
from xlp_cli.text.tokenize import MODES as TOKENIZE_MODES, SEGMENTED


@dataclasses.dataclass(frozen=True)
class TextPipeline:
    clean: bool = True
    normalize: bool = True
    tokenize: str = "moses"
    lowercase: str = "safe"

    def __post_init__(self) -> None:
        if self.tokenize not in TOKENIZE_MODES:
            raise ValueError(f"tokenize must be one of {TOKENIZE_MODES}, not {self.tokenize!r}")
        if self.lowercase not in CASE_MODES:
            raise ValueError(f"lowercase must be one of {CASE_MODES}, not {self.lowercase!r}")

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
        from xlp_cli.artifacts.manifest import read_manifest  # (pyarrow: `xlp text` starts without it)

        return cls.from_config(read_manifest(folder, stage="prepare")["config"])

    def config(self) -> dict[str, Any]:
        return {"clean": self.clean, "normalize": self.normalize, "tokenize": self.tokenize, "lowercase": self.lowercase}

    def raw(self, text: str) -> str:
        """The cleaned, untokenized text: non-printing characters removed (if --clean), spaces collapsed."""
        if self.clean:
            text = remove_non_printing(text)
        return collapse_spaces(text)

    def raw_batch(self, texts: list[str]) -> list[str]:
        """`raw` over many texts, in one native call."""
        return native.pipeline("en", self.clean, False, "none", "none").run(texts, native.RAW)

    def native(self, lang: str) -> Any:
        """The compiled pipeline for `lang` (for zh/th: the steps around the segmenter)."""
        return native.pipeline(base_lang(lang), self.clean, self.normalize, self.tokenize, self.lowercase)

    def segmenter(self, lang: str) -> Any:
        """jieba / pythainlp for zh / th (None for every other language, or with --tokenize none)."""
        base = base_lang(lang)
        if base not in SEGMENTED or self.tokenize == "none":
            return None
        return segmenter(base, keep_spaces=self.tokenize == "xlm")

    def process(self, text: str, lang: str) -> str:
        return self.process_batch([text], lang)[0]

    def process_batch(self, texts: Iterable[str], lang: str) -> list[str]:
        """`process` over many texts of one language, in one native call."""
        texts = texts if isinstance(texts, list) else list(texts)
        pipe, seg = self.native(lang), self.segmenter(lang)
        if seg is None:
            return pipe.run(texts, native.ALL)
        if self.tokenize == "xlm" and base_lang(lang) == "zh":  # XLM segments zh before the perl scripts
            return pipe.run(pipe.run([seg(t) for t in texts], native.BEFORE), native.AFTER)
        return pipe.run([seg(t) for t in pipe.run(texts, native.BEFORE)], native.AFTER)

    def __call__(self, text: str, lang: str) -> str:
        return self.process(text, lang)
