"""Configs are composed (docs/architecture.md, "Configs are composed"): the fields several stages share are declared
once in a section (`core.config.Section`), a stage names its other defaults with `@defaults`, `--help` lists a
stage's own flags before its sections', and `engine.Settings.from_config` is the one mapping to the training loop."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from xlp_cli.core.config import Default, Section, defaults, help_order, opt
from xlp_cli.models.encoding_registry import DEFAULT_ENCODING, EncodingFlags
from xlp_cli.train import sections

PKG = Path(__file__).resolve().parent.parent / "xlp_cli"


@dataclasses.dataclass
class _Section(Section):
    rate: float = opt(0.5, "A rate.")
    sizes: list[int] = opt(factory=lambda: [1, 2], help="Sizes.", resumable=True)


@dataclasses.dataclass
@defaults(rate=Default(0.25, "The stage's rate.", choices=None), sizes=[3])
class _Stage(_Section):
    name: str = opt("a", "A name.")


def test_defaults_change_the_default_and_help_and_keep_the_rest() -> None:
    fields = {f.name: f for f in dataclasses.fields(_Stage)}
    assert _Stage().rate == 0.25 and fields["rate"].metadata["help"] == "The stage's rate."
    assert _Stage().sizes == [3] and _Stage().sizes is not _Stage().sizes  # a fresh list each time
    assert fields["sizes"].metadata["help"] == "Sizes." and fields["sizes"].metadata["resumable"]
    assert _Section().rate == 0.5 and _Section().sizes == [1, 2]  # the section itself is untouched
    assert [f.name for f in help_order(_Stage)] == ["name", "rate", "sizes"]  # own flags, then the section's


def test_defaults_refuse_a_field_that_is_not_inherited_or_the_wrong_order() -> None:
    with pytest.raises(TypeError, match="names no inherited field"):
        defaults(nothing=1)(type("X", (_Section,), {}))
    with pytest.raises(TypeError, match="below @dataclasses.dataclass"):
        defaults(rate=1.0)(_Stage)


def test_shared_fields_are_declared_only_in_their_section() -> None:
    shared = {f.name: cls.__name__ for cls in (sections.Optimizer, sections.Adam, sections.Precision, sections.Runtime)
              for f in dataclasses.fields(cls)} | {"lang_encoding": "EncodingFlags"}
    found = []
    for path in sorted(PKG.rglob("*config*.py")) + [PKG / "tasks" / "common.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", "") in shared:
                        if node.name not in ("Optimizer", "Adam", "Precision", "Runtime"):
                            found.append(f"{path.name}: {node.name}.{item.target.id}")
    # pretrain's --device goes with its --num-threads (Runtime's --threads under the name pretrain always had)
    assert found == ["config.py: PretrainConfig.device"], found


def test_one_lang_encoding_default_and_one_settings_mapping() -> None:
    from xlp_cli.models.seq2seq import Seq2SeqConfig
    from xlp_cli.tasks.common import FINETUNE
    from xlp_cli.train.config import PretrainConfig
    from xlp_cli.train.engine import Settings

    assert issubclass(PretrainConfig, EncodingFlags) and PretrainConfig().lang_encoding == DEFAULT_ENCODING
    for task in ("translation", "unmt"):
        assert FINETUNE.build({"task": task, "data": ["x"]}).lang_encoding == DEFAULT_ENCODING
    assert Seq2SeqConfig.__dataclass_fields__["lang_encoding"].default == DEFAULT_ENCODING
    unmt = FINETUNE.build({"task": "unmt", "data": ["x"], "warmup": 7, "adam-eps": 1e-6})
    s = Settings.from_config(unmt, max_steps=3, lr=0.1)
    assert (s.warmup, s.betas, s.eps, s.weight_decay, s.log_every) == (7, (0.9, 0.997), 1e-6, 0.0, 50)
    xnli = FINETUNE.build({"task": "xnli", "data": ["x"]})
    s = Settings.from_config(xnli, max_steps=3, lr=0.1, betas=(0.9, 0.999))
    assert (s.warmup, s.betas, s.eps, s.clip_norm) == (4000, (0.9, 0.999), 1e-8, 5.0)
    pre, _ = PretrainConfig(preset="xlm15").resolved("cpu")  # the paper's run
    s = Settings.from_config(pre, max_steps=pre.max_steps, lr=pre.lr)
    assert (s.warmup, s.weight_decay, s.betas, s.clip_norm, s.log_every) == (16_000, 1e-4, (0.9, 0.98), 5.0, 10)
