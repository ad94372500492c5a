"""Every numeric field of every stage config declares its valid range once (`core.config.opt(lo=, hi=, gt=, lt=)`,
and `divides=` between fields), and every reader of a config is held to it: flags, --config TOML, recipes, a
resumed run's model.json and checkpoint meta.json, an HF config.json (docs/reliability.md, "Ranges and parser
limits"). The cases are generated from the stage table and the task registry: a field added tomorrow is covered.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from pathlib import Path

import pytest

from xlp_cli import stages, tasks
from xlp_cli.core import config as cfgmod
from xlp_cli.core.errors import BadInput

from conftest import run_cli


def _config_classes() -> dict[str, type]:
    """"stage" or "stage:task" -> its config class: the stage table and, for finetune/evaluate, the task registry."""
    out: dict[str, type] = {}
    for name, stage in stages.STAGES.items():
        cls = stages.load(stage.config)
        if hasattr(cls, "classes"):  # a TaskDispatch: one config class per task
            for task, task_cls in tasks.config_classes(cls.command).items():
                out[f"{name}:{task}"] = task_cls
        else:
            out[name] = cls
    return out


CLASSES = _config_classes()


def _numeric(cls: type) -> list[tuple[dataclasses.Field, type, bool]]:
    """(field, int or float, is a list) of each numeric field of `cls`."""
    hints = cfgmod.field_types(cls)
    found = []
    for f in dataclasses.fields(cls):
        base, _ = cfgmod._base_type(hints[f.name])
        is_list = typing.get_origin(base) in (list, tuple)
        if is_list:
            base = typing.get_args(base)[0]
        if base in (int, float):
            found.append((f, base, is_list))
    return found


FIELDS = [(stage, f, base, is_list) for stage, cls in CLASSES.items() for f, base, is_list in _numeric(cls)]
IDS = [f"{stage}-{f.name}" for stage, f, _, _ in FIELDS]


def _outside(rng: cfgmod.Range, base: type) -> list[float]:
    """Values just outside each declared bound, and far outside."""
    step = 1 if base is int else 1e-6
    bad: list[float] = []
    if rng.lo is not None:
        bad += [rng.lo - step, rng.lo - 10**6]
    if rng.gt is not None:
        bad += [rng.gt, rng.gt - step]
    if rng.hi is not None:
        bad += [rng.hi + step, rng.hi * 10**3 + 1]
    if rng.lt is not None:
        bad += [rng.lt, rng.lt + step]
    if base is int:
        bad = [int(v) for v in bad] + [2**70, -(2**70)]
    return bad


def _inside(rng: cfgmod.Range, base: type) -> list[float]:
    """The inclusive bounds themselves, and a value just inside each exclusive one."""
    step = 1 if base is int else 1e-6
    good = [b for b in (rng.lo, rng.hi) if b is not None]
    good += [rng.gt + step] if rng.gt is not None else []
    good += [rng.lt - step] if rng.lt is not None else []
    return [int(v) for v in good] if base is int else good


def test_the_table_has_the_stages_and_tasks() -> None:
    assert {"prepare", "text", "bpe", "bpe-apply", "vocab-score", "pretrain", "translate", "export", "run"} <= set(CLASSES)
    assert "finetune:xnli" in CLASSES and "evaluate:claims" in CLASSES and len(FIELDS) > 150


@pytest.mark.parametrize(("stage", "field", "base", "is_list"), FIELDS, ids=IDS)
def test_every_numeric_field_declares_a_range_its_default_obeys(stage: str, field: dataclasses.Field, base: type,
                                                                 is_list: bool) -> None:
    rng = field.metadata.get("range")
    assert isinstance(rng, cfgmod.Range), f"{stage} --{cfgmod.flag_name(field.name)} declares no range (opt(lo=, hi=))"
    assert (rng.lo is not None or rng.gt is not None) and (rng.hi is not None or rng.lt is not None), \
        f"{stage} --{cfgmod.flag_name(field.name)}: give both a lower and an upper bound"
    cfgmod.check_config(CLASSES[stage]())  # the defaults are inside their ranges


@pytest.mark.parametrize(("stage", "field", "base", "is_list"), FIELDS, ids=IDS)
def test_a_value_outside_the_range_is_one_line_naming_the_flag_and_the_range(stage: str, field: dataclasses.Field,
                                                                              base: type, is_list: bool) -> None:
    cls, rng, flag = CLASSES[stage], field.metadata["range"], f"--{cfgmod.flag_name(field.name)}"
    bad: list = _outside(rng, base) + (["nan", "inf", "-inf", "1e400"] if base is float else ["1.5", "1e3", "nan"])
    key = cfgmod.flag_name(field.name)
    for value in bad:
        given = str(value) if not isinstance(value, str) else value
        with pytest.raises(BadInput) as e:  # as the command line gives it: text
            cfgmod.from_dict(cls, {key: given}, where=cfgmod.COMMAND_LINE, flags=frozenset({key}))
        msg = str(e.value)
        assert flag in msg and "allowed: " + rng.text() in msg and "\n" not in msg, (stage, value, msg)
        assert len(msg) < 300, msg
    default = cls()
    for value in _outside(rng, base) + ([math.nan, math.inf] if base is float else [1.5]):
        broken = dataclasses.replace(default, **{field.name: [value] if is_list else value})
        with pytest.raises(BadInput, match="bad value for " + flag):  # the config object itself (a resumed run's)
            cfgmod.check_config(broken)
    for value in _inside(rng, base):
        cfgmod.check_config(dataclasses.replace(default, **{field.name: [value] if is_list else value}))


def test_a_toml_file_names_its_key_and_line(tmp_path: Path) -> None:
    path = tmp_path / "cfg.toml"
    path.write_text('# pretrain\nlr = 1e-4\nseed = -1\n', encoding="utf-8")
    with pytest.raises(BadInput) as e:
        cfgmod.build(CLASSES["pretrain"], path, {})
    assert str(e.value) == f"{path}:3: bad value for 'seed': -1 (allowed: from 0 to 4294967295)"


def test_n_heads_divides_d_model_given_or_from_the_preset() -> None:
    cls = CLASSES["pretrain"]
    with pytest.raises(BadInput, match=r"--n-heads: 3 does not divide --d-model 32"):
        cfgmod.from_dict(cls, {"n-heads": "3", "d-model": "32", "data": ["x"]}, where=cfgmod.COMMAND_LINE,
                         flags=frozenset({"n-heads", "d-model", "data"}))
    with pytest.raises(BadInput, match=r"--n-heads: 3 does not divide --d-model 32"):  # tiny: d_model 32
        cfgmod.from_dict(cls, {"n-heads": "3", "preset": "tiny", "data": ["x"]}, where=cfgmod.COMMAND_LINE,
                         flags=frozenset({"n-heads", "preset", "data"}))
    auto = cfgmod.from_dict(cls, {"n-heads": "3", "data": ["x"]})  # --preset auto: known once the device is
    with pytest.raises(BadInput, match=r"3 does not divide --d-model 64"):
        auto.resolved("cpu")
    assert cfgmod.from_dict(cls, {"n-heads": "8", "d-model": "32", "data": ["x"]}).n_heads == 8


def test_a_stage_default_may_widen_the_range_of_its_section() -> None:
    """--warmup -1 (automatic) is pretrain's; the fine-tuning tasks refuse it."""
    assert cfgmod.from_dict(CLASSES["pretrain"], {"warmup": "-1", "data": ["x"]}).warmup == -1
    with pytest.raises(BadInput, match=r"--warmup: -2 \(allowed: from -1 to"):
        cfgmod.from_dict(CLASSES["pretrain"], {"warmup": "-2"}, flags=frozenset({"warmup"}))
    with pytest.raises(BadInput, match=r"--warmup: -1 \(allowed: from 0 to"):
        cfgmod.from_dict(CLASSES["finetune:xnli"], {"warmup": "-1"}, flags=frozenset({"warmup"}))


def test_a_model_config_is_held_to_its_ranges() -> None:
    """model.json of a resumed or loaded run, and a preset with overrides (torch: models/encoder.py)."""
    from xlp_cli.models.encoder import ModelConfig

    with pytest.raises(BadInput, match="3 does not divide 'd-model' 32"):
        ModelConfig.from_dict({"vocab_size": 10, "n_heads": 3, "d_model": 32})
    with pytest.raises(BadInput, match=r"'n-layers': -2 \(allowed"):
        ModelConfig.from_dict({"vocab_size": 10, "n_layers": -2})
    with pytest.raises(BadInput, match="does not divide"):
        ModelConfig.from_preset("tiny", vocab_size=10, n_heads=5)
    assert ModelConfig.from_dict({"vocab_size": 10, "n_heads": 4, "d_model": 32}).n_heads == 4


@pytest.mark.parametrize("step", [-5, 10**30, 2**63, True])
def test_a_checkpoint_step_outside_its_range_is_refused(tmp_path: Path, step: int) -> None:
    from xlp_cli.models import checkpoint as ckpt

    folder = tmp_path / "last"
    folder.mkdir()
    (folder / ckpt.WEIGHTS).write_bytes(b"")  # read_meta looks only for the file (load_weights reads it)
    (folder / ckpt.META).write_text(json.dumps({"format_version": 2, "step": step}), encoding="utf-8")
    with pytest.raises(BadInput) as e:
        ckpt.read_meta(folder)
    assert str(e.value).startswith(str(folder / ckpt.META)) and "step" in str(e.value)
    (folder / ckpt.META).write_text(json.dumps({"format_version": 2, "step": 7}), encoding="utf-8")
    assert ckpt.read_meta(folder)["step"] == 7


def test_an_hf_config_json_is_held_to_the_model_ranges(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    from xlp_cli.models import hf_folder

    save_file({"xlp.embed.weight": torch.zeros(4, 32)}, str(tmp_path / "model.safetensors"))
    conf = {"model_type": "xlp", "lang_encoding": "additive", "langs": ["en"], "n_layers": 2, "d_model": 32,
            "n_heads": 3, "d_ff": 64, "n_positions": 64}
    (tmp_path / "config.json").write_text(json.dumps(conf), encoding="utf-8")
    with pytest.raises(BadInput, match=r"config\.json: bad value for 'n-heads': 3 does not divide"):
        hf_folder.load_encoder(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**conf, "n_heads": 4, "n_layers": -2}), encoding="utf-8")
    with pytest.raises(BadInput, match=r"config\.json: bad value for 'n-layers': -2"):
        hf_folder.load_encoder(tmp_path)


# ---------------------------------------------------------------- real command lines (the findings)
CLI_CASES = [
    (["pretrain", "--data", "{tmp}", "--n-heads", "3", "--d-model", "32"], "--n-heads: 3 does not divide --d-model 32"),
    (["pretrain", "--data", "{tmp}", "--seed", str(2**70)], "--seed: an integer of 22 digits"),
    (["pretrain", "--data", "{tmp}", "--seed", "9" * 5000], "--seed: expected an integer, got one of 5000 digits"),
    (["pretrain", "--data", "{tmp}", "--bptt", "1000000000"], "--bptt: 1000000000 (allowed: from 0 to 65536)"),
    (["pretrain", "--data", "{tmp}", "--n-layers", "-2"], "--n-layers: -2 (allowed"),
    (["pretrain", "--data", "{tmp}", "--adam-eps", "0"], "--adam-eps: 0 (allowed: > 0 and <= 1)"),
    (["pretrain", "--data", "{tmp}", "--clip-norm", "nan"], "--clip-norm: expected a finite number, got 'nan' (allowed: from 0 to"),
    (["finetune", "--task", "xnli", "--data", "{tmp}", "--eval-batch-size", "0"], "--eval-batch-size: 0 (allowed"),
    (["evaluate", "--task", "claims", "--data", "{tmp}", "--alpha", "2"], "--alpha: 2 (allowed: > 0 and < 1)"),
    (["translate", "--model", "{tmp}", "--src-lang", "de", "--tgt-lang", "en", "--beam", "100000"],
     "--beam: 100000 (allowed: from 1 to 256)"),
    (["bpe", "learn", "--data", "{tmp}", "--seed", "-1"], "--seed: -1 (allowed"),
    (["bpe", "learn", "--data", "{tmp}", "--tokenizer", "sentencepiece", "--spm-character-coverage", "2"],
     "--spm-character-coverage: 2 (allowed: from 0.98 to 1)"),
    (["prepare", "--source", "text", "--lang", "en", "{tmp}/in.txt", "--bpe-codes", "-1"], "--bpe-codes: -1 (allowed"),
]


@pytest.mark.parametrize(("args", "expected"), CLI_CASES, ids=[" ".join(a[:2]) + " " + a[-2] for a, _ in CLI_CASES])
def test_the_command_line_refuses_a_bad_number_before_writing(tmp_path: Path, args: list[str], expected: str) -> None:
    (tmp_path / "in.txt").write_text("A dog runs through the snow.\n", encoding="utf-8")
    target = ["--output", str(tmp_path / "out.txt")] if args[0] == "translate" else ["--out", str(tmp_path / "out")]
    r = run_cli(*[a.replace("{tmp}", str(tmp_path)) for a in args], *target)
    assert r.exit_code == 2, r.output
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("xlp: error: ") and expected in lines[0], r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]  # nothing written: no --out, no sibling


def test_a_recipe_names_its_table_and_line(tmp_path: Path) -> None:
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[recipe]\nout = "{tmp_path}/runs"\n\n[prepare]\nsource = "text"\nlang = ["en"]\n'
                      f'inputs = ["{tmp_path}/in.txt"]\nmax-valid = -3\n', encoding="utf-8")
    (tmp_path / "in.txt").write_text("A dog runs through the snow.\n", encoding="utf-8")
    r = run_cli("run", str(recipe), "--dry-run")
    assert r.exit_code == 2, r.output
    assert f"{recipe}:8" in r.stderr and "'max-valid': -3 (allowed: from 0 to" in r.stderr, r.stderr


# ---------------------------------------------------------------- every input checked before the first write
def test_prepare_checks_its_bpe_inputs_before_writing(tmp_path: Path) -> None:
    """--bpe-from a codes file without its vocab, or a folder without an `xlp bpe learn` output, is refused before
    prepare writes its shards (it used to fail after them)."""
    (tmp_path / "in.txt").write_text("A dog runs through the snow.\nTwo cats sleep.\n", encoding="utf-8")
    (tmp_path / "codes.x").write_text("a b 5\n", encoding="utf-8")  # fastBPE codes: no vocab.x beside them
    (tmp_path / "empty").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    for src, expected in (("codes.x", "--codes needs --vocab"), ("empty", "no `xlp bpe learn` output")):
        r = run_cli("prepare", "--source", "text", "--lang", "en", str(tmp_path / "in.txt"),
                    "--bpe-from", str(tmp_path / src), "--out", str(tmp_path / "prep"))
        assert r.exit_code == 2 and expected in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # no prep, prep-bpe or prep-ids


@pytest.mark.integration
@pytest.mark.slow
def test_a_run_refused_before_training_leaves_its_folder_and_a_linked_last_is_refused(
        tmp_path: Path, shared_data: Path) -> None:
    """Issue 30, item 9: a pretrain refused after its claim but before training (a --bptt longer than the train
    split) gives its --out back, so the rerun with a smaller --bptt runs. Item 5: `checkpoints/last` as a symbolic
    link is refused in one line (xlp replaces that folder whole)."""
    from conftest import write_commonvoice
    from xlp_cli.artifacts import layout
    from xlp_cli.artifacts.shards import shard_paths
    from xlp_cli.train.objectives.mlm import _stream_tokens

    (text,) = write_commonvoice(shared_data, tmp_path, (("en", 300),))
    prep = tmp_path / "prep"
    r = run_cli("prepare", "--source", "text", "--lang", "en", str(text), "--out", str(prep), "--bpe-codes", "100",
                "--valid-fraction", "0.9", "--test-fraction", "0")
    assert r.exit_code == 0, r.output
    ids = tmp_path / "prep-ids"
    valid = _stream_tokens(shard_paths(layout.read_dir(ids, "valid", "en")))  # the train split is ~10x shorter
    run = tmp_path / "run"
    common = ["pretrain", "--data", str(ids), "--out", str(run), "--preset", "tiny", "--batch-size", "2",
              "--device", "cpu", "--warmup", "0"]
    r = run_cli(*common, "--bptt", str(valid + 1), "--max-steps", "1")
    assert r.exit_code == 2 and "lower --bptt" in r.stderr, r.output
    r = run_cli(*common, "--bptt", "32", "--max-steps", "1")
    assert r.exit_code == 0, r.output
    r = run_cli("finetune", "--task", "pos", "--data", str(run), "--out", str(tmp_path / "pos"), "--lang", "en",
                "--max-len", "1000", "--device", "cpu")  # inside the flag's range, past the model's 272 positions
    assert r.exit_code == 2 and "--max-len 1000 is longer than the pre-trained model's" in r.stderr, r.output
    assert not (tmp_path / "pos").exists()
    last = run / "checkpoints" / "last"
    last.rename(run / "checkpoints" / "kept")
    last.symlink_to(run / "checkpoints" / "kept")
    r = run_cli(*common, "--bptt", "32", "--max-steps", "2")
    lines = [l for l in r.stderr.splitlines() if l.strip() and not l.startswith("warning")]
    assert r.exit_code == 2 and len(lines) == 1 and f"{last}: a symbolic link" in lines[0], r.output
