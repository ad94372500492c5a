"""The shared machinery every stage relies on: config <-> flags, artifacts, error exit codes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pytest

from xlp_cli.artifacts import outdir
from xlp_cli.artifacts.files import atomic_folder, atomic_path, sha256_file, truncate_jsonl
from xlp_cli.artifacts.manifest import find_upstream, new_manifest, read_manifest, write_manifest
from xlp_cli.artifacts.shards import read_shard, shard_paths, write_shard
from xlp_cli.core import config
from xlp_cli.core.errors import BadInput


@dataclasses.dataclass
class _Cfg:
    out: Path = config.opt(Path("o"), "out")
    lang: list[str] = config.opt(factory=list, help="langs")
    steps: int = config.opt(10, "steps")
    rate: float = config.opt(0.5, "rate")
    flag: bool = config.opt(False, "flag")
    mode: str = config.opt("a", "mode", choices=("a", "b"))


def test_from_dict_accepts_flag_and_field_names_and_coerces():
    cfg = config.from_dict(_Cfg, {"lang": "en, fr,de", "steps": "12", "rate": 1, "flag": "yes", "mode": "b", "out": "x"})
    assert cfg.lang == ["en", "fr", "de"] and cfg.steps == 12 and cfg.rate == 1.0 and cfg.flag is True
    assert cfg.out == Path("x")
    assert config.to_dict(cfg)["lang"] == ["en", "fr", "de"]


def test_unknown_key_lists_valid_keys():
    with pytest.raises(BadInput) as e:
        config.from_dict(_Cfg, {"stepz": 3}, where="r.toml")
    msg = str(e.value)
    assert msg.startswith("r.toml: unknown key 'stepz'") and "steps" in msg and "\n" not in msg


def test_bad_choice_and_bad_int():
    with pytest.raises(BadInput, match="choose from a, b"):
        config.from_dict(_Cfg, {"mode": "c"})
    with pytest.raises(BadInput, match="expected an integer"):
        config.from_dict(_Cfg, {"steps": 1.5})


def test_toml_then_flags_override(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('steps = 3\nlang = ["en", "fr"]\nrate = 0.1\n')
    cfg = config.build(_Cfg, f, {"steps": 7, "rate": None})
    assert cfg.steps == 7 and cfg.rate == 0.1 and cfg.lang == ["en", "fr"]
    bad = tmp_path / "bad.toml"
    bad.write_text("steps = = 3\n")
    with pytest.raises(BadInput, match="invalid TOML"):
        config.build(_Cfg, bad, {})


def test_shard_roundtrip_is_atomic_and_hashed(tmp_path):
    t = pa.table({"id": ["a", "b"], "text": ["x y", "z"]})
    p = tmp_path / "train" / "en" / "part-00000.parquet"
    digest = write_shard(p, t)
    assert digest == sha256_file(p)
    assert read_shard(p).to_pylist() == t.to_pylist()
    assert [x.name for x in shard_paths(p.parent)] == ["part-00000.parquet"]
    assert not list(p.parent.glob("*.tmp"))


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "f.txt"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_corrupt_shard_is_bad_input(tmp_path):
    p = tmp_path / "part-00000.parquet"
    p.write_bytes(b"PAR1 not really")
    with pytest.raises(BadInput, match="not a readable Parquet shard"):
        read_shard(p)


def test_manifest_stage_check_and_guard(tmp_path):
    out = tmp_path / "o"
    assert outdir.guard_out_dir(out, "prepare", {"a": 1}, force=False) is None
    write_manifest(out, new_manifest("prepare", {"a": 1}))
    assert outdir.guard_out_dir(out, "prepare", {"a": 1}, force=False)["stage"] == "prepare"
    with pytest.raises(BadInput, match="different config .*changed: a"):
        outdir.guard_out_dir(out, "prepare", {"a": 2}, force=False)
    outdir.guard_out_dir(out, "prepare", {"a": 2}, force=True)
    assert not (out / "manifest.json").exists()  # --force starts clean
    with pytest.raises(BadInput, match="expected the output of `xlp vocab-score`"):
        write_manifest(out, new_manifest("prepare", {"a": 2}))
        read_manifest(out, stage="vocab-score")
    (out / "manifest.json").write_text("{not json")
    with pytest.raises(BadInput, match="corrupt manifest"):
        read_manifest(out)


def test_manifest_software_versions_are_importlib_metadatas(tmp_path, monkeypatch):
    """The manifest's package versions come from the .dist-info folders' names (fast), and are exactly what
    importlib.metadata says, for every package it records; a .dist-info earlier on sys.path wins, as there."""
    from importlib import metadata

    from xlp_cli.artifacts import manifest

    installed = manifest._dist_info_versions()
    for pkg in ("xlp",) + manifest.PACKAGES:
        try:
            want = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            want = ""
        assert manifest._version(pkg, installed) == want, pkg
    (tmp_path / "Sacre.Moses-9.9.9.dist-info").mkdir()
    (tmp_path / "Sacre.Moses-9.9.9.dist-info" / "METADATA").write_text("Name: sacre.moses\nVersion: 9.9.9\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert manifest._version("sacremoses", manifest._dist_info_versions()) != "9.9.9"  # another name
    assert manifest._version("sacre-moses", manifest._dist_info_versions()) == "9.9.9" == metadata.version("sacre-moses")


def test_find_upstream_follows_links(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_manifest(a, new_manifest("prepare", {}))
    write_manifest(b, new_manifest("bpe-apply", {}, upstream=[{"path": str(a), "stage": "prepare"}]))
    found = find_upstream([b], "prepare")
    assert found is not None and found[0] == a.resolve()
    assert find_upstream([b], "pretrain") is None


def test_cli_usage_errors_are_one_line_exit_2(cli):
    r = cli("prepare", "--source", "bogus")
    assert r.exit_code == 2
    r = cli("prepare", "--source", "text", "some.txt")
    assert r.exit_code == 2
    assert r.stderr.strip() == "xlp: error: --source text needs --lang (the language of the input lines)"


def test_cli_config_file_unknown_key(cli, tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('source = "text"\nlangs = "en"\n')
    r = cli("prepare", "--config", f)
    assert r.exit_code == 2
    assert "unknown key 'langs'" in r.stderr and "valid keys:" in r.stderr and "lang," in r.stderr


def test_version(cli):
    r = cli("--version")
    assert r.exit_code == 0 and r.stdout.startswith("xlp ")


def test_atomic_folder_replaces_whole_or_not_at_all(tmp_path):
    final = tmp_path / "ckpt" / "last"
    with atomic_folder(final) as tmp:
        (tmp / "a").write_text("1")
    assert (final / "a").read_text() == "1"
    with pytest.raises(RuntimeError):
        with atomic_folder(final) as tmp:
            (tmp / "a").write_text("2")
            raise RuntimeError("killed mid-write")
    assert (final / "a").read_text() == "1"  # the old checkpoint survives a failed save
    with atomic_folder(final) as tmp:
        (tmp / "b").write_text("3")
    assert sorted(p.name for p in final.iterdir()) == ["b"]
    assert sorted(p.name for p in final.parent.iterdir()) == ["last"]


def test_truncate_jsonl_keeps_steps_up_to_the_checkpoint(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 1}\n{"step": 2}\nnot json\n[1]\n{"step": 3}\n')
    truncate_jsonl(log, 2)
    assert log.read_text() == '{"step": 1}\n{"step": 2}\n'
