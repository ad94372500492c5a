"""The registry of language encodings: names, options and capabilities, without importing torch.

Each encoding is one `nn.Module` class in `models/encodings.py` plus one line in `ENCODINGS` below. The line
says where the class is (imported only when a model is built), which flags the encoding takes (a small options
dataclass whose fields become `--flags` of every stage that builds a model), and what it can do. Stages, the CLI
choices, fine-tuning and the analysis read these capabilities; nothing outside `encodings.py` and this module
compares an encoding's name.

Capabilities
    vocab_k_option          the model is built from the `xlp vocab-score` artifact: the stage passes the top-K ids
                            of each language, K being the value of this option (None: no vocab-score needed)
    marks_target            can tell a decoder which language to produce (translation offers only these)
    frozen_when_finetuning  its language parameters are frozen by default when fine-tuning a classifier
    prefix_slots(options)   positions it prepends to a sequence (0 or 1)
    hf_xlm                  transformers' stock XLM model expresses it (`xlp export`); hf_xlm_langs: with its
                            language embeddings (else the exported model gets none)
    hf_remote               `export/modeling_xlp.py` (the self-contained trust_remote_code model of `xlp export`)
                            has its twin; False: `xlp export` refuses a model that stock XLM does not express
                            (tests/test_export.py checks that the twins and this flag agree)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from xlp_cli.core.config import CODES_MAX, Section, opt
from xlp_cli.core.errors import BadInput


@dataclasses.dataclass
class XlpOptions:
    xlp_bias: bool = opt(True, "XLP: give each language projection a bias (Algorithm 1's nn.Linear has one).")


@dataclasses.dataclass
class VleOptions:
    vle_style: str = opt("adding", "VLE: add E_V at every position (adding) or prepend it as a token (padding).",
                         choices=("adding", "padding"))
    vle_k: int = opt(100, "VLE: size K of each language's vocabulary Voc_l (a key of vle_vocab.json).", lo=1, hi=CODES_MAX)

    def check(self) -> None:
        if self.vle_k <= 0:
            raise BadInput(f"--vle-k must be positive, got {self.vle_k}")


def _no_slot(options: dict[str, Any]) -> int:
    return 0


@dataclasses.dataclass(frozen=True)
class EncodingSpec:
    cls: str                                   # "module:Class" of the nn.Module
    doc: str                                   # one line for --help and docs
    options: type | None = None                # dataclass of this encoding's flags
    vocab_k_option: str | None = None
    marks_target: bool = True
    frozen_when_finetuning: bool = False
    prefix_slots: Callable[[dict[str, Any]], int] = _no_slot
    state_keys: tuple[str, ...] = ()           # model-config entries the module fills in (shapes), not flags
    hf_xlm: bool = False                       # `xlp export` can write a stock XLMWithLMHeadModel folder
    hf_xlm_langs: bool = False                 # ... whose language embeddings are this encoding's
    hf_remote: bool = True                     # export/modeling_xlp.py has a twin of the encoding

    @property
    def needs_vocab_scores(self) -> bool:
        return self.vocab_k_option is not None

    def option_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.options)) if self.options else ()

    def options_from(self, values: Any) -> dict[str, Any]:
        """This encoding's options from a config object or dict (missing ones take their defaults)."""
        if self.options is None:
            return {}
        out = {}
        for f in dataclasses.fields(self.options):
            v = values.get(f.name, dataclasses.MISSING) if isinstance(values, dict) else getattr(values, f.name, dataclasses.MISSING)
            out[f.name] = f.default if v is dataclasses.MISSING else v
        return out


ENCODINGS: dict[str, EncodingSpec] = {
    "none": EncodingSpec("xlp_cli.models.encodings:NoEncoding", "no language signal", hf_xlm=True),
    "additive": EncodingSpec("xlp_cli.models.encodings:AdditiveEncoding", "XLM: a learned language embedding added at every position",
                             hf_xlm=True, hf_xlm_langs=True),
    "attaching": EncodingSpec("xlp_cli.models.encodings:AttachingEncoding", "a learned language vector prepended as a token",
                              prefix_slots=lambda o: 1),
    "xlp": EncodingSpec("xlp_cli.models.encodings:XlpEncoding", "XLP: a per-language projection of the word embeddings",
                        options=XlpOptions, frozen_when_finetuning=True),
    "vle": EncodingSpec("xlp_cli.models.encodings:VleEncoding", "VLE: a language vector from the top-K vocabulary",
                        options=VleOptions, vocab_k_option="vle_k",
                        prefix_slots=lambda o: 1 if o.get("vle_style") == "padding" else 0, state_keys=("vle_sizes",)),
}
ENCODING_NAMES: tuple[str, ...] = tuple(ENCODINGS)
TARGET_ENCODINGS: tuple[str, ...] = tuple(n for n, s in ENCODINGS.items() if s.marks_target)
# THE default language encoding: of every stage's --lang-encoding (the encoding section below) and of
# `Seq2SeqConfig`. docs/encodings.md ("The default") says why it is xlp, and why a bare `ModelConfig` stays additive.
DEFAULT_ENCODING = "xlp"


def spec(name: str) -> EncodingSpec:
    try:
        return ENCODINGS[name]
    except KeyError:
        raise BadInput(f"unknown language encoding {name!r} (choose from {', '.join(ENCODINGS)})") from None


def check_encoding_options(cfg: Any) -> None:
    """Run each registered encoding's `check()` on the option values of a stage config (BadInput if wrong)."""
    for s in ENCODINGS.values():
        if s.options is not None and hasattr(s.options, "check"):
            s.options(**s.options_from(cfg)).check()


def _all_option_fields() -> list[tuple[str, Any, dataclasses.Field]]:
    seen: dict[str, tuple[str, Any, dataclasses.Field]] = {}
    for s in ENCODINGS.values():
        if s.options is None:
            continue
        hints = {f.name: f.type for f in dataclasses.fields(s.options)}
        for f in dataclasses.fields(s.options):
            seen.setdefault(f.name, (f.name, hints[f.name], dataclasses.field(default=f.default, metadata=f.metadata)))
    return list(seen.values())


# The encoding section: --lang-encoding and every encoding's flags in one mixin. A stage config that builds models
# derives from it, so a new encoding's options become flags (and TOML/recipe keys) of `xlp pretrain` and
# `xlp finetune --task translation/unmt` by themselves; translation and UNMT narrow the choices with `@defaults`.
EncodingFlags = dataclasses.make_dataclass("EncodingFlags", [
    ("lang_encoding", str, opt(DEFAULT_ENCODING, "How the language is given to the model.", choices=ENCODING_NAMES)),
    *_all_option_fields(),
], bases=(Section,))
EncodingFlags.__module__ = __name__
EncodingFlags.__doc__ = ("The encoding section: --lang-encoding and the options of every registered language "
                         "encoding (flags of the stages that build models).")
