"""`xlp run RECIPE.toml`: parsing, wiring, errors, and a real rerun that skips finished stages."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from xlp_cli.core.config import from_dict
from xlp_cli.core.errors import BadInput
from xlp_cli.recipes import run as recipes

REPO = Path(__file__).resolve().parent.parent


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "r.toml"
    p.write_text(text, encoding="utf-8")
    return p


def _run(recipe: Path, **kw) -> dict:
    return recipes.run(from_dict(recipes.RunConfig, {"recipe": [str(recipe)], **kw}))


def test_wiring_and_order(tmp_path):
    r = _write(tmp_path, f"""
[recipe]
out = "{tmp_path / 'out'}"
[prepare]
source = "gettext"
[bpe]
codes = 100
[vocab-score]
[[pretrain]]
lang-encoding = "additive"
[[pretrain]]
name = "x2"
lang-encoding = "xlp"
[finetune]
lr = [1e-3]
[[evaluate]]
task = "xnli"
[[evaluate]]
task = "analysis"
""")
    nodes, meta = recipes.parse(r)
    plan = recipes.order(nodes)
    assert plan[:4] == ["prepare", "bpe", "bpe-apply", "vocab-score"]
    assert nodes["pretrain.additive"].deps == ["bpe-apply", "vocab-score"]
    assert nodes["finetune.x2"].deps == ["pretrain.x2"]
    assert nodes["evaluate.xnli"].deps == ["finetune.additive", "finetune.x2"]
    assert nodes["evaluate.xnli"].values["name"] == ["additive", "x2"]
    assert nodes["evaluate.analysis"].deps == ["pretrain.additive", "pretrain.x2"]
    assert nodes["pretrain.x2"].values["out"] == str(tmp_path / "out" / "pretrain" / "x2")
    assert nodes["bpe-apply"].values["out"] == str(tmp_path / "out" / "ids")
    assert plan.index("evaluate.xnli") > plan.index("finetune.x2") > plan.index("pretrain.x2")
    s = _run(r, **{"dry-run": True})
    assert all(st["status"] == "to run" for st in s["stages"])


def test_unknown_key_lists_valid_keys(tmp_path):
    r = _write(tmp_path, '[[pretrain]]\nname = "a"\nlang-encodin = "xlp"\n')
    with pytest.raises(BadInput) as e:
        _run(r, **{"dry-run": True})
    msg = e.value.one_line()
    assert "unknown key 'lang-encodin'" in msg and "valid keys:" in msg and "lang-encoding" in msg
    assert "[[pretrain]] a" in msg


def test_unknown_stage_cycle_and_refs(tmp_path):
    with pytest.raises(BadInput, match=r"unknown stage \[pretrian\]"):
        _run(_write(tmp_path, "[pretrian]\n"))
    with pytest.raises(BadInput, match=r"unknown stage '@nope'"):
        _run(_write(tmp_path, '[prepare]\nsource = "gettext"\ndata = ["@nope"]\n'))
    cyc = """
[[evaluate]]
task = "lexicon"
data = ["@finetune.a"]
[[finetune]]
name = "a"
data = ["@evaluate.lexicon"]
"""
    with pytest.raises(BadInput, match=r"cycle between stages: .*evaluate\.lexicon.*finetune\.a|cycle between stages: .*finetune\.a.*evaluate\.lexicon"):
        _run(_write(tmp_path, cyc))
    with pytest.raises(BadInput, match="--only nope"):
        _run(_write(tmp_path, '[prepare]\nsource = "gettext"\n'), only=["nope"])
    with pytest.raises(BadInput, match="unknown key 'colour'"):
        _run(_write(tmp_path, '[recipe]\ncolour = "red"\n'))


def test_cli_cycle_is_one_line(tmp_path, cli):
    r = _write(tmp_path, '[[finetune]]\nname = "a"\ndata = ["@finetune.b"]\n[[finetune]]\nname = "b"\ndata = ["@finetune.a"]\n')
    res = cli("run", r)
    assert res.exit_code == 2
    assert res.stderr.strip().count("\n") == 0 and "cycle between stages" in res.stderr


def test_shipped_recipes_parse():
    for name in ("demo.toml", "xnli15.toml"):
        nodes, _ = recipes.parse(REPO / "pipelines" / name)
        for nid in recipes.order(nodes):  # every table builds a valid stage config
            recipes.build_config(nodes[nid], nodes, force=False)
        assert {"pretrain.additive", "pretrain.xlp", "finetune.additive", "finetune.xlp", "evaluate.xnli"} <= set(nodes)
    for name in ("translation_demo.toml", "interlingua_study.toml", "interlingua_tiny.toml", "unmt_demo.toml",
                 "unmt_k_sweep.toml", "unmt_mass.toml"):
        nodes, _ = recipes.parse(REPO / "pipelines" / name)
        for nid in recipes.order(nodes):
            recipes.build_config(nodes[nid], nodes, force=False)
        if name.startswith("unmt"):  # every UNMT run starts from its own pre-training, plus the copy baseline
            ft = sorted(n for n in nodes if n.startswith("finetune."))
            assert [n for n in ft if n != "finetune.copy"] == sorted("finetune." + p[9:] for p in nodes
                                                                  if p.startswith("pretrain."))


def test_the_veco_demo_pairs_plug_in_with_machine_translations_and_labels_the_oracle():
    nodes, _ = recipes.parse(REPO / "pipelines" / "veco_demo.toml")
    cfgs = {nid: recipes.build_config(nodes[nid], nodes, force=False) for nid in recipes.order(nodes)}
    plug_in = {n: c for n, c in cfgs.items() if n.startswith("finetune.") and getattr(c, "veco", "") == "plug-in"}
    assert sorted(plug_in) == ["finetune.veco-s1-in", "finetune.veco-s1-oracle", "finetune.veco-s2-in",
                               "finetune.veco-s2-oracle"]
    translator = cfgs["finetune.mt-plugin"]
    assert translator.directions == ["de-en", "fr-en"]
    for n, c in plug_in.items():
        assert c.plug_in_pairs == ("oracle" if n.endswith("oracle") else "translated")
        if c.plug_in_pairs == "translated":
            assert Path(c.plug_in_translator) == Path(translator.out)
    names = cfgs["evaluate.xnli"].name
    assert names.count("TLM+CA-MLM (plug-in: oracle pairs)") == 2 and names.count("TLM+CA-MLM (plug-in: MT pairs)") == 2
    assert all(cfgs[f"pretrain.veco-s{s}"].pair_word_pred == 0.25 for s in (1, 2))  # VECO Table 8's default


def test_study_recipes_parse_with_seeds_as_runs_of_one_configuration():
    for name, seeds in (("fidelity_cpu.toml", (1, 2, 3)), ("fidelity_gpu.toml", (1, 2, 3, 4, 5)),
                        ("fidelity_seeds.toml", (1, 2, 3, 4, 5))):
        nodes, _ = recipes.parse(REPO / "pipelines" / name)
        cfgs = {nid: recipes.build_config(nodes[nid], nodes, force=False) for nid in recipes.order(nodes)}
        pre = sorted(n for n in nodes if n.startswith("pretrain."))
        assert pre == sorted(f"pretrain.{e}-s{s}" for e in ("additive", "xlp", "vle") for s in seeds)
        assert {cfgs[f"pretrain.xlp-s{s}"].seed for s in seeds} == set(seeds)
        assert cfgs["pretrain.vle-s2"].lang_encoding == "vle"
        claims = cfgs["evaluate.claims"]
        # claims reads every pre-training run and every fine-tuning, each named after its pre-training run
        runs = [n for n in nodes if n.startswith("pretrain.")] + [n for n in nodes if n.startswith("finetune.")]
        assert [Path(d).name for d in claims.data] == [n.split(".", 1)[1] for n in runs]
        assert claims.name == [e for e in ("additive", "xlp", "vle") for _ in seeds] * 2
        assert claims.which == "last"
        assert not any("flores" in str(x) or "ntrex" in str(x) for c in cfgs.values() for x in getattr(c, "inputs", []))


def test_seeds_must_be_integers(tmp_path):
    r = _write(tmp_path, '[[pretrain]]\nname = "a"\nseeds = ["x"]\n')
    with pytest.raises(BadInput, match="'seeds' must be a list of integers"):
        recipes.parse(r)


@pytest.mark.integration
@pytest.mark.slow
def test_rerun_skips_finished_stages(tmp_path, shared_data):
    src = tmp_path / "src"
    src.mkdir()
    for lang, name in (("en", "en.sentence-collector.txt.gz"), ("fr", "fr.issue2259_deleted_export_readd_fixed.txt.gz")):
        path = shared_data / "commonvoice_sentences" / name
        if not path.is_file():
            pytest.skip(f"Common Voice sentences not found at {path}")
        os.symlink(path, src / f"cv.{lang}.gz")
    text = f"""
[recipe]
out = "{tmp_path / 'out'}"
[prepare]
inputs = ["{src / 'cv.en.gz'}", "{src / 'cv.fr.gz'}"]
source = "text"
lang = ["en", "fr"]
max-records = 400
[bpe]
codes = 300
[[pretrain]]
lang-encoding = "xlp"
preset = "tiny"
max-steps = 6
batch-size = 8
accumulate = 1
bptt = 32
warmup = 2
eval-every = 3
eval-batches = 1
num-threads = 1
[finetune]
lang = ["en", "fr"]
lr = [1e-3]
batch-size = [16]
max-steps = 3
max-train-rows = 48
max-eval-rows = 30
warmup = 1
threads = 1
[[evaluate]]
task = "xnli"
"""
    r = _write(tmp_path, text)
    first = _run(r)
    assert [s["status"] for s in first["stages"]] == ["ran"] * 6
    assert first["comparison"]["scores"]["langs"] == ["en", "fr"]
    second = _run(r)
    assert [s["status"] for s in second["stages"]] == ["skipped (done)"] * 6
    assert second["comparison"]["scores"]["runs"]["xlp"]["acc"]["en"]["n"] == 1
    # a run killed after the prepare manifest, while its chunk files were being removed: the next run lets
    # skip prepare and remove them (nothing runs)
    leftover = tmp_path / "out" / "prepare" / ".work" / "chunk-000000-000000.parquet"
    leftover.parent.mkdir()
    leftover.write_bytes(b"PAR1")
    cleaned = _run(r)
    assert [s["status"] for s in cleaned["stages"]] == ["skipped (done)"] * 6
    assert not leftover.parent.exists()
    # a changed fine-tuning key: that stage refuses the folder without --force; with it, only it and its
    # dependants run again
    changed = _write(tmp_path, text.replace("lr = [1e-3]", "lr = [2e-3]"))
    with pytest.raises(BadInput, match="different config"):
        _run(changed)
    third = _run(changed, force=True)
    status = {s["stage"]: s["status"] for s in third["stages"]}
    assert status == {"prepare": "skipped (done)", "bpe": "skipped (done)", "bpe-apply": "skipped (done)",
                      "pretrain.xlp": "skipped (done)", "finetune.xlp": "ran", "evaluate.xnli": "ran"}


@pytest.mark.integration
@pytest.mark.slow
def test_catalog_task_when_xnli_is_absent(tmp_path, monkeypatch):
    """Without XNLI/MultiNLI under XLP_DATA_DIR the recipe derives a task from the gettext catalogs, and says so."""
    if not any(Path("/usr/share/locale/fr/LC_MESSAGES").glob("*.mo")):
        pytest.skip("no French gettext catalogs at /usr/share/locale/fr/LC_MESSAGES")
    empty = tmp_path / "no_data"
    empty.mkdir()
    monkeypatch.setenv("XLP_DATA_DIR", str(empty))
    r = _write(tmp_path, f"""
[recipe]
out = "{tmp_path / 'out'}"
[prepare]
source = "gettext"
lang = ["en", "fr"]
mono-from-parallel = true
max-records = 800
[bpe]
codes = 300
[[pretrain]]
lang-encoding = "additive"
preset = "tiny"
max-steps = 4
batch-size = 8
accumulate = 1
bptt = 32
warmup = 2
eval-every = 2
eval-batches = 1
num-threads = 1
[finetune]
lr = [1e-3]
batch-size = [16]
max-steps = 3
max-train-rows = 60
max-eval-rows = 30
warmup = 1
threads = 1
[[evaluate]]
task = "xnli"
""")
    s = _run(r)
    derived = tmp_path / "out" / "derived-task"
    header = (derived / "train.tsv").read_text(encoding="utf-8").splitlines()[0]
    assert header.split("\t") == ["language", "premise_language", "gold_label", "sentence1", "sentence2"]
    rows = [l.split("\t") for l in (derived / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    assert rows and {r[0] for r in rows} == {"fr"} and {r[1] for r in rows} == {"en"}
    labels = [r[2] for r in rows]
    assert labels.count("entailment") == labels.count("neutral") == labels.count("contradiction")
    ft = json.loads((tmp_path / "out" / "finetune" / "additive" / "results.json").read_text())
    assert ft["langs"] == ["fr"] and "fr" in ft["accuracy"]["1"]["test"]
    assert s["comparison"]["scores"]["langs"] == ["fr"]


def test_the_xlp_arm_of_the_cpu_study_shares_the_full_study_folders():
    """pipelines/fidelity_cpu_xlp.toml: every stage it has is the same table, in the same folder, as in
    fidelity_cpu.toml (so each recipe skips what the other finished); only its evaluations have folders of their own."""
    full, _ = recipes.parse(REPO / "pipelines" / "fidelity_cpu.toml")
    part, _ = recipes.parse(REPO / "pipelines" / "fidelity_cpu_xlp.toml")
    cfg = {name: {nid: recipes.build_config(n[nid], n, force=False) for nid in recipes.order(n)}
           for name, n in (("full", full), ("part", part))}
    assert not any(nid.startswith(("pretrain.vle", "finetune.vle")) for nid in part)
    for nid, c in cfg["part"].items():
        if nid.startswith("evaluate."):
            assert c.out != cfg["full"][nid].out
        else:
            assert c == cfg["full"][nid], nid
