"""Every dataset folder of every stage opens in one call in every reader (docs/artifacts.md, "Reading artifacts
with other tools"): `pd.read_parquet(F)`, `pyarrow.dataset.dataset(F, partitioning="hive")`,
`datasets.load_dataset(F)`, duckdb `SELECT * FROM 'F/**/*.parquet'`, `pl.scan_parquet('F/**/*.parquet')`, each with
exactly the manifest's rows, no null-filled row, and the split and language (or pair) of every row as columns.

Real outputs on real Multi30k captions (XLP_DATA_DIR): prepare monolingual (--unpair), parallel, and mixed
(--mono-from-parallel) with --bpe-codes (the -bpe and -ids siblings), vocab-score, a tiny pretrain, finetune
and evaluate. A format-2 folder (shards at OUT/<split>/<group>/) is still read by the stages.
"""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import run_cli

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.files import data_dir, write_json_atomic
from xlp_cli.artifacts.manifest import read_manifest
from xlp_cli.artifacts.shards import with_partition

integration = pytest.mark.integration
M30K = data_dir() / "multi30k"
TINY = ["--preset", "tiny", "--max-steps", "2", "--warmup", "0", "--batch-size", "8", "--accumulate", "1",
        "--bptt", "32", "--eval-every", "2", "--eval-batches", "1", "--num-threads", "1"]


@pytest.fixture(scope="module")
def outs(tmp_path_factory):
    if not (M30K / "train.de.gz").is_file():
        pytest.skip("multi30k not in XLP_DATA_DIR")
    root = tmp_path_factory.mktemp("readers")
    common = ["--source", "opus", M30K / "train.de.gz", M30K / "train.en.gz", "--lang", "de,en",
              "--max-records", "600", "--valid-fraction", "0.05", "--test-fraction", "0.05"]
    for name, extra in (("mixed", ["--mono-from-parallel", "--bpe-codes", "300"]), ("mono", ["--unpair"]),
                        ("pair", [])):
        r = run_cli("prepare", "--out", root / name, *common, *extra)
        assert r.exit_code == 0, r.output
    r = run_cli("vocab-score", "--data", root / "mixed-ids", "--out", root / "vocab", "--k", "20")
    assert r.exit_code == 0, r.output
    r = run_cli("pretrain", "--data", root / "mixed-ids", "--out", root / "pretrain", "--objective", "mlm+tlm",
                "--lang", "de,en", *TINY)
    assert r.exit_code == 0, r.output
    r = run_cli("finetune", "--task", "translation", "--data", root / "mixed-ids", "--out", root / "finetune",
                "--preset", "tiny", "--max-steps", "1", "--warmup", "0", "--beam", "1", "--threads", "1")
    assert r.exit_code == 0, r.output
    r = run_cli("evaluate", "--task", "translation", "--data", root / "finetune", "--out", root / "evaluate")
    assert r.exit_code == 0, r.output
    return root


# (stage folder, dataset) -> the partition column beside `split`
DATASETS = [("mixed", "mono", "lang"), ("mixed", "pairs", "pair"), ("mixed-ids", "mono", "lang"),
            ("mixed-ids", "pairs", "pair"), ("mono", "mono", "lang"), ("pair", "pairs", "pair")]


def _want(folder: Path, dataset: str) -> collections.Counter:
    """{(split, lang or pair): rows} of `dataset` by the manifest's list of shards."""
    want: collections.Counter = collections.Counter()
    for rel, e in read_manifest(folder)["outputs"]["shards"].items():
        if rel.startswith(dataset + "/"):
            part = layout.partition_of(Path(rel))
            want[(part["split"], part.get("lang") or part["pair"])] += e["rows"]
    return want


def _read_all(f: Path, key: str, tmp: Path) -> dict[str, tuple[collections.Counter, int, int]]:
    """reader -> ({(split, key): rows}, rows with a null, columns)."""
    import datasets
    import duckdb
    import pandas as pd
    import polars as pl
    import pyarrow.dataset as pads

    def of_pandas(df) -> tuple[collections.Counter, int, int]:
        return (collections.Counter(zip(df["split"].astype(str), df[key].astype(str))),
                int(df.isna().any(axis=1).sum()), len(df.columns))

    got = {"pandas": of_pandas(pd.read_parquet(f)),
           "pyarrow": of_pandas(pads.dataset(f, partitioning="hive").to_table().to_pandas()),
           "duckdb": of_pandas(duckdb.sql(f"SELECT * FROM '{f}/**/*.parquet'").df()),
           "polars": of_pandas(pl.scan_parquet(f"{f}/**/*.parquet").collect().to_pandas())}
    hf = datasets.load_dataset(str(f), cache_dir=str(tmp / "hf"))
    parts = [of_pandas(hf[s].to_pandas()) for s in hf]
    got["datasets"] = (sum((p[0] for p in parts), collections.Counter()), sum(p[1] for p in parts), parts[0][2])
    for s in hf:  # a split's rows are that split's
        assert {x for x in hf[s]["split"]} == {{"validation": "valid"}.get(s, s)}
    return got


@integration
@pytest.mark.parametrize("name,dataset,key", DATASETS)
def test_every_reader_reads_the_dataset_in_one_call(outs, tmp_path, name, dataset, key):
    folder = outs / name
    want = _want(folder, dataset)
    assert sum(want.values()) > 0 and {s for s, _ in want} == {"train", "valid", "test"}
    columns = len(pq.read_schema(next((folder / dataset).rglob("*.parquet"))).names)
    for reader, (counts, null_rows, ncols) in _read_all(folder / dataset, key, tmp_path).items():
        assert counts == want, reader  # every row, once, with its split and language (pair) as columns
        assert null_rows == 0 and ncols == columns, reader


@integration
def test_mixed_folder_keeps_mono_and_pairs_apart(outs):
    for name in ("mixed", "mixed-ids"):
        folder = outs / name
        assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == ["mono", "pairs"]
        for dataset in ("mono", "pairs"):  # nothing but shards below a dataset folder
            files = [p for p in (folder / dataset).rglob("*") if p.is_file()]
            assert files and all(p.suffix == ".parquet" for p in files)
            names = {tuple(pq.read_schema(p).names) for p in files}
            assert len(names) == 1  # one table per dataset
    assert {p.name for p in (outs / "mono").iterdir() if p.is_dir()} == {"mono"}
    assert {p.name for p in (outs / "pair").iterdir() if p.is_dir()} == {"pairs"}


@integration
def test_vocab_scores_read_in_one_call(outs, tmp_path):
    import datasets
    import duckdb
    import pandas as pd
    import polars as pl
    import pyarrow.dataset as pads

    f = outs / "vocab" / "scores"
    entry = read_manifest(outs / "vocab")["outputs"]["scores/vocab_scores.parquet"]
    n = entry["rows"]
    assert n > 0 and [p.name for p in f.iterdir()] == ["vocab_scores.parquet"]
    assert len(pd.read_parquet(f).dropna()) == n
    assert pads.dataset(f, partitioning="hive").to_table().num_rows == n
    assert duckdb.sql(f"SELECT count(*) FROM '{f}/**/*.parquet' WHERE lang IS NOT NULL").fetchall()[0][0] == n
    assert pl.scan_parquet(f"{f}/**/*.parquet").collect().drop_nulls().height == n
    assert datasets.load_dataset(str(f), cache_dir=str(tmp_path / "hf"))["train"].num_rows == n


@integration
@pytest.mark.parametrize("name", ["pretrain", "finetune", "evaluate"])
def test_model_stage_folders_hold_no_parquet_and_their_jsonl_reads(outs, name):
    import pandas as pd

    folder = outs / name
    assert read_manifest(folder)["stage"] == name
    assert not list(folder.rglob("*.parquet"))
    for f in folder.rglob("*.jsonl"):
        lines = [x for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        assert len(pd.read_json(f, lines=True)) == len(lines)


def _as_format_2(src: Path, dest: Path) -> Path:
    """`src` (a version-3 stage folder) laid out as version 2: shards at dest/<split>/<group>/, manifest keys and
    format_version to match (the bytes of the shards are kept)."""
    shutil.copytree(src, dest)
    m = json.loads((dest / "manifest.json").read_text(encoding="utf-8"))
    shards = {}
    for rel, e in m["outputs"]["shards"].items():
        old = Path(*Path(rel).parts[1:])
        (dest / old).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).rename(dest / old)
        shards[old.as_posix()] = e
    for d in layout.DATASETS:
        shutil.rmtree(dest / d, ignore_errors=True)
    m["outputs"]["shards"], m["format_version"] = shards, 2
    write_json_atomic(dest / "manifest.json", m)
    return dest


@integration
def test_format_2_folders_are_still_read_by_the_stages(outs, tmp_path):
    old_ids = _as_format_2(outs / "mixed-ids", tmp_path / "old-ids")
    assert layout.is_legacy(old_ids) and layout.groups(old_ids, "train") == ["de", "de-en", "en"]
    r = run_cli("vocab-score", "--data", old_ids, "--out", tmp_path / "vocab", "--k", "20")
    assert r.exit_code == 0, r.output
    new = pq.read_table(outs / "vocab" / "scores" / "vocab_scores.parquet")
    assert pq.read_table(tmp_path / "vocab" / "scores" / "vocab_scores.parquet").equals(new)
    r = run_cli("pretrain", "--data", old_ids, "--out", tmp_path / "pt", "--objective", "mlm+tlm", "--lang", "de,en",
                *TINY)
    assert r.exit_code == 0, r.output
    # bpe apply of a format-2 prepare folder writes version-3 shards with the same rows
    old_prep = _as_format_2(outs / "mixed", tmp_path / "old-prep")
    r = run_cli("bpe", "apply", "--data", old_prep, "--data", outs / "mixed-bpe", "--out", tmp_path / "ids")
    assert r.exit_code == 0, r.output
    for dataset in layout.DATASETS:
        assert _want(tmp_path / "ids", dataset) == _want(outs / "mixed-ids", dataset)
        for rel in read_manifest(tmp_path / "ids")["outputs"]["shards"]:
            if rel.startswith(dataset):
                assert pq.read_table(tmp_path / "ids" / rel).equals(pq.read_table(outs / "mixed-ids" / rel))


def test_one_layout_for_writers_and_readers_of_every_format(tmp_path):
    """shard_dir names the folders (mono/ and pairs/ datasets); read_dir, groups, splits find them, and a format
    1-2 folder's `<split>/<group>/` ones; partition_of reads both kinds of manifest keys."""
    assert layout.shard_rel("valid", "de-en", "part-00001.parquet") == "pairs/valid/de-en/part-00001.parquet"
    assert layout.shard_dir(tmp_path, "train", "de") == tmp_path / "mono" / "train" / "de"
    new, old = tmp_path / "new", tmp_path / "old"
    for split, group in (("train", "de"), ("train", "de-en"), ("test", "en")):
        layout.shard_dir(new, split, group).mkdir(parents=True)
        (old / split / group).mkdir(parents=True)
    (old / "bpe").mkdir()  # (format 1: a stage folder inside) is no split
    for folder in (new, old):
        assert layout.splits(folder) == ["test", "train"]
        assert layout.groups(folder, "train") == ["de", "de-en"] and layout.groups(folder, "valid") == []
    assert not layout.is_legacy(new) and layout.is_legacy(old) and not layout.is_legacy(tmp_path / "empty")
    assert layout.read_dir(new, "train", "de-en") == new / "pairs" / "train" / "de-en"
    assert layout.read_dir(old, "train", "de-en") == old / "train" / "de-en"
    assert layout.partition_of(Path("pairs/train/de-en/part-00000.parquet")) == {"split": "train", "pair": "de-en"}
    assert layout.partition_of(Path("valid/de/part-00000.parquet")) == {"split": "valid", "lang": "de"}


def test_with_partition_fills_the_columns_the_rows_lack():
    import pyarrow as pa

    schema = pa.schema([("id", pa.string()), ("split", pa.string()), ("pair", pa.string()), ("lang1", pa.string())])
    t = with_partition(pa.table({"id": ["a", "b"], "lang1": ["de", "de"]}), schema, "test", "de-en")
    assert t.schema == schema and t.to_pydict() == {"id": ["a", "b"], "split": ["test", "test"],
                                                    "pair": ["de-en", "de-en"], "lang1": ["de", "de"]}
    mono = pa.schema([("split", pa.string()), ("lang", pa.string())])
    t = with_partition(pa.table({"lang": ["xx"]}), mono, "valid", "de")  # a column the rows have is kept
    assert t.to_pydict() == {"split": ["valid"], "lang": ["xx"]}
