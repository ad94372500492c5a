"""`xlp prepare --split-by sentences`: on a multi-way parallel corpus no valid/test sentence is a training
sentence of any pair (the zero-shot condition), where the default per-pair split leaks; caps drop, not train."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import run_cli

from xlp_cli.artifacts import layout

WORDS = {"de": ("der Hund", "läuft", "schnell"), "en": ("the dog", "runs", "fast"), "fr": ("le chien", "court", "vite")}


def write_three_way(folder: Path, rows: int = 300) -> list[Path]:
    """train.de / train.en / train.fr, line-aligned (Multi30k's layout). Rows 10*k and 10*k+7 share their
    English sentence, which ties their groups together."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for lang, (subj, verb, adv) in WORDS.items():
        lines = []
        for i in range(rows):
            n = i - 7 if lang == "en" and i % 10 == 7 else i
            lines.append(f"{subj} {n} {verb} {adv} .")
        p = folder / f"train.{lang}"
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(p)
    return paths


def sentences(out: Path, split: str) -> set[tuple[str, str]]:
    """(lang, raw) of every sentence of a split, pair and mono folders."""
    got = set()
    for folder in [layout.read_dir(out, split, g) for g in layout.groups(out, split)]:
        for shard in sorted(folder.glob("*.parquet")):
            t = pq.read_table(shard)
            if "raw1" in t.column_names:
                l1, l2 = folder.name.split("-")
                got |= {(l1, r) for r in t.column("raw1").to_pylist()} | {(l2, r) for r in t.column("raw2").to_pylist()}
            else:
                got |= {(folder.name, r) for r in t.column("raw").to_pylist()}
    return got


def prepare(src: list[Path], out: Path, *more) -> dict:
    r = run_cli("prepare", "--source", "opus", *src, "--lang", "de,en,fr", "--valid-fraction", "0.1",
                "--test-fraction", "0.2", "--no-dedup", "--out", out, *more)
    assert r.exit_code == 0, r.output
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def test_held_out_sentences_are_never_trained_on(tmp_path):
    src = write_three_way(tmp_path / "src")
    default = prepare(src, tmp_path / "pair")
    leak = (sentences(tmp_path / "pair", "test") | sentences(tmp_path / "pair", "valid")) & sentences(tmp_path / "pair", "train")
    assert len(leak) > 50  # the per-pair split: one line's captions land in train of one pair, test of another
    assert "split-by" not in default["config"] and "valid-fraction" in default["config"]  # the default leaves the config (and its hash) as before

    m = prepare(src, tmp_path / "sent", "--split-by", "sentences", "--mono-from-parallel")
    assert m["config"]["split-by"] == "sentences"
    train, valid, test = (sentences(tmp_path / "sent", s) for s in ("train", "valid", "test"))
    assert test and valid and not (train & test) and not (train & valid) and not (valid & test)
    # every line lands in one split in all three pairs and the mono folders; rows 10k and 10k+7 together
    where = {}
    for split, got in (("train", train), ("valid", valid), ("test", test)):
        for lang, raw in got:
            where[(lang, int(raw.split()[2]))] = split
    for i in range(300):
        row = {where[("de", i)], where[("fr", i)], where[("en", i - 7 if i % 10 == 7 else i)]}
        assert len(row) == 1, (i, row)
        if i % 10 == 7:
            assert where[("de", i)] == where[("de", i - 7)]
    n_test = sum(m["counts"]["test"].get(p, 0) for p in ("de-en", "de-fr", "en-fr"))
    assert 0.1 * 900 < n_test < 0.3 * 900  # about --test-fraction of the 3 x 300 pairs


def test_past_the_cap_a_held_out_pair_is_dropped_not_trained(tmp_path):
    src = write_three_way(tmp_path / "src")
    m = prepare(src, tmp_path / "out", "--split-by", "sentences", "--max-test", "5", "--max-valid", "5")
    assert all(n == 5 for n in m["counts"]["test"].values()) and m["dropped"]["over_split_cap"] > 0
    train = sentences(tmp_path / "out", "train")
    assert not train & (sentences(tmp_path / "out", "test") | sentences(tmp_path / "out", "valid"))
    total = sum(n for split in m["counts"].values() for n in split.values())
    assert total + m["dropped"]["over_split_cap"] == 900


def test_split_by_sentences_needs_parallel_data(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one line .\n", encoding="utf-8")
    r = run_cli("prepare", "--source", "text", f, "--lang", "en", "--split-by", "sentences", "--out", tmp_path / "o")
    assert r.exit_code == 2 and "--split-by sentences" in r.output


@pytest.mark.integration
def test_multi30k_zero_shot_test_sentences_unseen(tmp_path, shared_data):
    src = shared_data / "multi30k"
    files = [src / f"train.{lang}.gz" for lang in ("de", "en", "fr")]
    if not all(p.is_file() for p in files):
        pytest.skip(f"Multi30k not found under {src}")
    sub = tmp_path / "src"
    sub.mkdir()
    for p in files:  # the first 3000 lines of each
        with gzip.open(p, "rt", encoding="utf-8") as f:
            (sub / p.name.removesuffix(".gz")).write_text("".join(next(f) for _ in range(3000)), encoding="utf-8")
    srcs = sorted(sub.iterdir())
    for mode, leaks in (("pair", True), ("sentences", False)):
        out = tmp_path / mode
        r = run_cli("prepare", "--source", "opus", *srcs, "--lang", "de,en,fr", "--lowercase", "none",
                    "--valid-fraction", "0.02", "--test-fraction", "0.03", "--split-by", mode, "--out", out)
        assert r.exit_code == 0, r.output
        test_defr = {(lang, raw) for lang, raw in sentences(out, "test") if lang in ("de", "fr")}
        shared = test_defr & sentences(out, "train")
        assert test_defr and bool(shared) == leaks, (mode, len(shared), len(test_defr))
