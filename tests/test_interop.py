"""Real xlp outputs read by the tools our users already have: pandas, polars, duckdb, HF `datasets`
(docs/artifacts.md, "Reading artifacts with other tools"), the manifests against docs/manifest.schema.json,
the shards' key-value metadata, and file modes under umask 022.

The artifacts are made by running the stages on real Multi30k captions (XLP_DATA_DIR): a parallel prepare with
--bpe-codes (sibling -bpe/-ids folders), an --unpair prepare (monolingual) with --bpe-codes, vocab-score on it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import run_cli

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.files import data_dir, write_json_atomic
from xlp_cli.artifacts.manifest import find_upstream, read_manifest
from xlp_cli.core.errors import BadInput

pytestmark = pytest.mark.integration
M30K = data_dir() / "multi30k"
DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module")
def outs(tmp_path_factory):
    if not (M30K / "train.de.gz").is_file():
        pytest.skip("multi30k not in XLP_DATA_DIR")
    root = tmp_path_factory.mktemp("interop")
    old = os.umask(0o022)
    try:
        common = ["--source", "opus", M30K / "train.de.gz", M30K / "train.en.gz", "--lang", "de,en",
                  "--max-records", "900", "--valid-fraction", "0.05", "--test-fraction", "0.05", "--bpe-codes", "300"]
        for name, extra in (("pair", []), ("mono", ["--unpair"])):
            r = run_cli("prepare", "--out", root / name, *common, *extra)
            assert r.exit_code == 0, r.stderr
        r = run_cli("vocab-score", "--data", root / "mono", "--out", root / "vocab", "--k", "20")
        assert r.exit_code == 0, r.stderr
    finally:
        os.umask(old)
    return root


def _listed(folder: Path) -> dict[str, dict]:
    return read_manifest(folder)["outputs"]["shards"]


def _rows(folder: Path) -> int:
    return sum(e["rows"] for e in _listed(folder).values())


def _columns(folder: Path) -> set[str]:
    return {c for rel in _listed(folder) for c in pq.read_schema(folder / rel).names}


FOLDERS = ["mono", "mono-ids", "pair", "pair-ids"]


def _dataset(folder: Path) -> Path:
    """The one dataset folder (mono/ or pairs/) of a folder made from monolingual or parallel input only."""
    (found,) = [folder / d for d in layout.DATASETS if (folder / d).is_dir()]
    return found


def _split_rows(folder: Path, split: str) -> int:
    return sum(e["rows"] for rel, e in _listed(folder).items() if layout.partition_of(Path(rel))["split"] == split)


def test_stage_folders_stand_alone(outs):
    for name in ("mono", "pair"):
        m = read_manifest(outs / name, stage="prepare")
        assert m["outputs"]["bpe"] == f"../{name}-bpe" and m["outputs"]["ids"] == f"../{name}-ids"
        assert not any(p.is_dir() and p.name in ("bpe", "ids") for p in (outs / name).iterdir())
        # nothing but shards below the split folders
        assert {p.suffix for p in (outs / name).rglob("*") if p.is_file() and p.parent != outs / name} == {".parquet"}


@pytest.mark.parametrize("name", FOLDERS)
def test_duckdb_reads_whole_folder(outs, name):
    import duckdb

    folder = outs / name
    con = duckdb.connect()
    n = con.execute(f"SELECT count(*) FROM '{folder}/**/*.parquet'").fetchone()[0]
    assert n == _rows(folder) > 0
    cols = [d[0] for d in con.execute(f"SELECT * FROM '{folder}/**/*.parquet' LIMIT 1").description]
    assert set(cols) == _columns(folder)
    kv = dict(con.execute(f"SELECT decode(key), decode(value) FROM parquet_kv_metadata('{folder}/**/*.parquet') "
                          "WHERE decode(key) LIKE 'xlp.%'").fetchall())
    assert kv["xlp.format_version"] == str(layout.FORMAT_VERSION)


@pytest.mark.parametrize("name", FOLDERS)
def test_polars_reads_whole_folder(outs, name):
    import polars as pl

    folder = outs / name
    df = pl.scan_parquet(f"{folder}/**/*.parquet").collect()
    assert df.height == _rows(folder) and set(df.columns) == _columns(folder)
    assert pl.read_parquet(_dataset(folder) / "train").height == _split_rows(folder, "train")  # a split alone, too


@pytest.mark.parametrize("name", FOLDERS)
def test_pandas_reads_splits_and_files(outs, name):
    import pandas as pd

    folder = outs / name
    parts = [pd.read_parquet(_dataset(folder) / split) for split in ("train", "valid", "test")
             if (_dataset(folder) / split).is_dir()]
    assert sum(len(p) for p in parts) == _rows(folder)
    assert all(set(p.columns) == _columns(folder) for p in parts)
    listed = sorted(str(folder / rel) for rel in _listed(folder))
    assert len(pd.read_parquet(listed)) == _rows(folder)  # the manifest's list of shards


@pytest.mark.parametrize("name", FOLDERS)
def test_pandas_and_pyarrow_read_whole_folder(outs, name):
    """The dataset folder (OUT/mono or OUT/pairs) in one plain call: the sidecar files stay above it
    (docs/artifacts.md; every stage and reader: tests/test_dataset_readers.py)."""
    import pandas as pd
    import pyarrow.dataset as ds

    folder = outs / name
    df = pd.read_parquet(_dataset(folder))
    assert len(df) == _rows(folder) > 0 and set(df.columns) == _columns(folder)
    assert ds.dataset(_dataset(folder), partitioning="hive").to_table().num_rows == _rows(folder)


@pytest.mark.parametrize("name", FOLDERS)
def test_hf_datasets_reads_whole_folder(outs, name, tmp_path):
    from datasets import load_dataset

    folder = outs / name
    ds = load_dataset("parquet", data_dir=str(folder), cache_dir=str(tmp_path / "hf"))
    for split, name in {"train": "train", "validation": "valid", "test": "test"}.items():
        assert (ds[split].num_rows if split in ds else 0) == _split_rows(folder, name)
    assert set(ds["train"].column_names) == _columns(folder)


def test_vocab_scores_read_everywhere(outs):
    import duckdb
    import pandas as pd
    import polars as pl

    f = outs / "vocab" / "scores" / "vocab_scores.parquet"
    n = pq.ParquetFile(f).metadata.num_rows
    assert n > 0 and len(pd.read_parquet(f)) == n == pl.read_parquet(f).height
    assert duckdb.connect().execute(f"SELECT count(*) FROM '{f}'").fetchone()[0] == n
    meta = pq.read_schema(f).metadata
    assert meta[b"xlp.stage"] == b"vocab-score" and b"rank" in meta[b"xlp.columns"]


def test_shards_describe_themselves(outs):
    for name, stage in (("mono", "prepare"), ("mono-ids", "bpe-apply"), ("pair-ids", "bpe-apply")):
        for rel in _listed(outs / name):
            meta = {k.decode(): v.decode() for k, v in pq.read_schema(outs / name / rel).metadata.items()
                    if k.startswith(b"xlp.")}
            part = layout.partition_of(Path(rel))
            split, group = part["split"], part.get("lang") or part["pair"]
            assert meta["xlp.stage"] == stage and meta["xlp.format_version"] == str(layout.FORMAT_VERSION)
            assert meta["xlp.split"] == split and meta["xlp." + ("pair" if "-" in group else "lang")] == group
            cols = json.loads(meta["xlp.columns"])
            assert set(cols) == set(pq.read_schema(outs / name / rel).names) and all(cols.values())
            if stage == "bpe-apply":
                assert meta["xlp.first_word_id"] == "14"


def test_dictionary_layout_in_the_artifact(outs):
    """dict.txt line i is id i + 14: the manifest says so, and decoding by it gives back the shard's subwords."""
    ids = outs / "mono-ids"
    m = read_manifest(ids, stage="bpe-apply")
    lay = m["dictionary_layout"]
    assert lay["first_word_id"] == 14 and lay["specials"]["<unk>"] == 3
    words = [line.split(" ")[0] for line in (ids / m["dictionary"]).read_text(encoding="utf-8").splitlines()]
    rel = next(iter(_listed(ids)))
    t = pq.read_table(ids / rel, columns=["text", "ids"]).slice(0, 50)
    for text, row in zip(t.column("text").to_pylist(), t.column("ids").to_pylist()):
        assert " ".join(words[i - lay["first_word_id"]] if i >= 14 else "<unk>" for i in row) == text or 3 in row
    assert read_manifest(outs / "mono-bpe", stage="bpe-learn")["dictionary_layout"] == lay


def test_manifests_match_the_json_schema(outs):
    import jsonschema

    schema = json.loads((DOCS / "manifest.schema.json").read_text(encoding="utf-8"))
    for name in ("mono", "mono-bpe", "mono-ids", "pair", "pair-bpe", "pair-ids", "vocab"):
        m = json.loads((outs / name / "manifest.json").read_text(encoding="utf-8"))
        assert m["format_version"] == layout.FORMAT_VERSION
        jsonschema.validate(m, schema)


def test_files_honour_umask_022(outs):
    """Every file xlp wrote under umask 022 is 0644 (atomic writes used to make them 0600), folders 0755."""
    bad = []
    for name in ("mono", "mono-bpe", "mono-ids", "vocab"):
        for p in (outs / name).rglob("*"):
            mode = stat.S_IMODE(p.stat().st_mode)
            if mode != (0o755 if p.is_dir() else 0o644):
                bad.append(f"{p.relative_to(outs)} {oct(mode)}")
    assert not bad, bad


def test_umask_077_still_private(tmp_path):
    old = os.umask(0o077)
    try:
        write_json_atomic(tmp_path / "x.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.json").stat().st_mode) == 0o600


def test_old_and_new_format_versions(tmp_path):
    """A format-1 manifest (xlp 0.1: no format_version, bpe/ids inside prepare) is read; a newer one is one line."""
    old = tmp_path / "old"
    (old / "ids").mkdir(parents=True)
    write_json_atomic(old / "manifest.json", {"stage": "prepare", "config": {}, "outputs": {"ids": "ids"}})
    write_json_atomic(old / "ids" / "manifest.json", {"stage": "bpe-apply", "config": {}, "outputs": {}})
    assert find_upstream([old], "bpe-apply")[0] == (old / "ids").resolve()
    new = tmp_path / "new"
    write_json_atomic(new / "manifest.json", {"format_version": 99, "stage": "prepare", "config": {}})
    with pytest.raises(BadInput, match="newer xlp .*format 99"):
        read_manifest(new)
    r = run_cli("vocab-score", "--data", new, "--out", tmp_path / "v")
    assert r.exit_code == 2 and "newer xlp" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    bad = tmp_path / "bad"
    write_json_atomic(bad / "manifest.json", {"stage": "prepare", "outputs": {"ids": "../../etc"}})
    with pytest.raises(BadInput, match="not a sibling folder name"):
        find_upstream([bad], "bpe-apply")


def test_format_1_folder_still_read_and_resumed(outs, tmp_path):
    """An xlp 0.1 prepare folder (bpe/ and ids/ inside, no format_version) feeds vocab-score through --data, and a
    rerun of the same prepare command finds it up to date instead of writing siblings."""
    import shutil

    old = tmp_path / "mono"
    shutil.copytree(outs / "mono", old)
    for sub in ("bpe", "ids"):
        shutil.copytree(outs / f"mono-{sub}", old / sub)
    for folder in (old, old / "bpe", old / "ids"):
        m = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        m.pop("format_version")
        m.pop("dictionary_layout", None)
        if folder == old:
            m["outputs"].update(bpe="bpe", ids="ids")
        for up in m.get("upstream", []):  # the copies point at each other, as xlp 0.1 wrote them
            up["path"] = str(old / "bpe" if up["path"].endswith("-bpe") else old)
        (folder / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    r = run_cli("vocab-score", "--data", old, "--out", tmp_path / "vocab", "--k", "20")
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "vocab" / "vle_vocab.json").read_bytes() == (outs / "vocab" / "vle_vocab.json").read_bytes()
    r = run_cli("prepare", "--out", old, "--source", "opus", M30K / "train.de.gz", M30K / "train.en.gz", "--lang",
                "de,en", "--max-records", "900", "--valid-fraction", "0.05", "--test-fraction", "0.05",
                "--bpe-codes", "300", "--unpair", "--json")
    assert r.exit_code == 0, r.stderr
    assert "up to date" in r.stdout and not (tmp_path / "mono-ids").exists()


def test_mixed_mono_and_parallel_folder_reads_as_two_tables(tmp_path):
    """`--mono-from-parallel` gives two datasets, OUT/mono and OUT/pairs, each read in one plain call (every stage
    and reader: tests/test_dataset_readers.py)."""
    import duckdb
    import polars as pl
    from datasets import load_dataset

    if not (M30K / "train.de.gz").is_file():
        pytest.skip("multi30k not in XLP_DATA_DIR")
    out = tmp_path / "mixed"
    r = run_cli("prepare", "--out", out, "--source", "opus", M30K / "train.de.gz", M30K / "train.en.gz",
                "--lang", "de,en", "--max-records", "200", "--mono-from-parallel")
    assert r.exit_code == 0, r.stderr
    shards = _listed(out)
    pairs = sum(e["rows"] for rel, e in shards.items() if rel.startswith("pairs/"))
    mono = sum(e["rows"] for rel, e in shards.items() if rel.startswith("mono/"))
    assert pairs > 0 and mono == 2 * pairs and pairs + mono == _rows(out)
    assert len(duckdb.sql(f"SELECT * FROM '{out}/pairs/**/*.parquet'").fetchall()) == pairs
    assert pl.scan_parquet(f"{out}/mono/**/*.parquet").collect().drop_nulls().height == mono
    ds = load_dataset(str(out / "pairs"), cache_dir=str(tmp_path / "hf"))
    assert sum(ds[s].num_rows for s in ds) == pairs
