"""`xlp prepare` end to end through the real CLI, on small fixtures written for these tests."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
from xlp_cli.artifacts import layout
from conftest import FIXTURES, run_cli

from xlp_cli.artifacts.manifest import find_upstream

FIX = FIXTURES / "prepare"
EN, FR = FIX / "news.en.txt", FIX / "news.fr.txt"
SPLIT_ARGS = ["--valid-fraction", "0.2", "--test-fraction", "0.2"]


def prepare(out: Path, *args) -> "object":
    return run_cli("prepare", "--out", out, *args)


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def shard_hashes(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.glob("*/*/*/part-*.parquet"))}


def rows(out: Path, split: str, group: str) -> list[dict]:
    return [r for p in sorted(layout.shard_dir(out, split, group).glob("part-*.parquet")) for r in pq.read_table(p).to_pylist()]


def error_line(result) -> str:
    err = result.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_text_source_end_to_end(tmp_path):
    out = tmp_path / "p"
    r = prepare(out, "--source", "text", "--lang", "en,fr", EN, FR, *SPLIT_ARGS, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    m = manifest(out)
    assert m["stage"] == "prepare" and m["config"]["lowercase"] == "safe" and "valid-fraction" in m["config"]
    assert [i["path"] for i in m["inputs"]] == [str(EN), str(FR)]
    assert m["inputs"][0]["sha256"] == hashlib.sha256(EN.read_bytes()).hexdigest()
    # every shard is listed with its hash and row count, and the counts add up
    assert set(m["outputs"]["shards"]) == set(shard_hashes(out))
    for rel, info in m["outputs"]["shards"].items():
        assert info["sha256"] == shard_hashes(out)[rel]
        assert info["rows"] == pq.ParquetFile(out / rel).metadata.num_rows
        assert pq.ParquetFile(out / rel).metadata.row_group(0).column(0).compression == "ZSTD"
    en_lines = [l.strip() for l in EN.read_text(encoding="utf-8").splitlines() if l.strip()]
    assert m["records"]["read"] == len(en_lines) + 10
    assert m["dropped"] == {"duplicate": 1}  # the repeated committee sentence
    assert sum(m["counts"][s].get("en", 0) for s in ("train", "valid", "test")) == len(en_lines) - 1
    assert summary["kept"] == m["records"]["kept"] == len(en_lines) - 1 + 10
    assert set(m["counts"]) == {"train", "valid", "test"} and m["counts"]["valid"] and m["counts"]["test"]
    everything = [r for s in ("train", "valid", "test") for r in rows(out, s, "en")]
    assert list(everything[0]) == ["id", "source", "split", "lang", "raw", "text"]
    assert {(r["split"], r["lang"]) for r in rows(out, "valid", "en")} == {("valid", "en")}
    by_raw = {r["raw"]: r for r in everything}
    assert by_raw["Tabs and extra spaces are cleaned."]["text"] == "tabs and extra spaces are cleaned ."
    assert by_raw["His café served crème brûlée every Friday."]["text"] == "his cafe served creme brulee every friday ."
    assert by_raw['"We can\'t wait any longer," said the mayor, pointing at the map.']["text"] == \
        '" we can \'t wait any longer , " said the mayor , pointing at the map .'
    for r in everything:
        assert re.fullmatch(r"[0-9a-f]{16}", r["id"]) and r["source"] == "text" and r["lang"] == "en"
        assert "  " not in r["text"] and r["text"] == r["text"].strip()
    assert len({r["id"] for r in everything}) == len(everything)


def test_split_is_by_content_hash_and_reproducible(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert prepare(a, "--source", "text", "--lang", "en,fr", EN, FR, *SPLIT_ARGS).exit_code == 0
    # other input order, one worker vs two, tiny chunks: every text lands in the same split
    r = prepare(b, "--source", "text", "--lang", "en,fr", FR, EN, *SPLIT_ARGS, "--workers", "2", "--chunk-size", "3")
    assert r.exit_code == 0, r.stderr
    for split in ("train", "valid", "test"):
        for lang in ("en", "fr"):
            assert sorted(x["text"] for x in rows(a, split, lang)) == sorted(x["text"] for x in rows(b, split, lang))


def test_workers_and_chunk_size_do_not_change_the_shards(tmp_path):
    args = ["--source", "text", "--lang", "en,fr", EN, FR, *SPLIT_ARGS]
    assert prepare(tmp_path / "w1", *args).exit_code == 0
    r = prepare(tmp_path / "w2", *args, "--workers", "2", "--chunk-size", "4")
    assert r.exit_code == 0, r.stderr
    assert shard_hashes(tmp_path / "w1") == shard_hashes(tmp_path / "w2")
    assert manifest(tmp_path / "w1")["config_hash"] == manifest(tmp_path / "w2")["config_hash"]
    assert manifest(tmp_path / "w2")["run"]["worker_mode"] == "threads"  # auto: every step is native here
    # worker threads and forked worker processes, 1 and 2 of them: the same shards, manifests and config
    for mode, n in (("threads", "1"), ("processes", "2"), ("threads", "2")):
        out = tmp_path / f"{mode}{n}"
        r = prepare(out, *args, "--workers", n, "--worker-mode", mode, "--chunk-size", "5")
        assert r.exit_code == 0, r.stderr
        assert manifest(out)["run"]["worker_mode"] == mode
        assert shard_hashes(out) == shard_hashes(tmp_path / "w1"), (mode, n)
        for key in ("counts", "dropped", "records", "config_hash"):
            assert manifest(out)[key] == manifest(tmp_path / "w1")[key], (mode, n, key)


def test_worker_mode_auto_and_its_checks(tmp_path):
    from xlp_cli.prepare.config import PrepareConfig

    assert PrepareConfig(inputs=["x"], lang=["en", "de"]).uses_threads()
    assert not PrepareConfig(inputs=["x"], lang=["en", "zh"]).uses_threads()  # jieba is Python
    assert PrepareConfig(inputs=["x"], lang=["th"], tokenize="none").uses_threads()
    assert PrepareConfig(inputs=["x"], source="wikipedia", lang=["en"]).uses_threads()  # wikitext -> text is native
    assert not PrepareConfig(inputs=["x"], source="opus").uses_threads()  # languages unknown before reading
    assert not PrepareConfig(inputs=["x"], lang=["en"], worker_mode="processes").uses_threads()
    assert PrepareConfig(inputs=["x"], source="wikipedia", lang=["en"], worker_mode="threads").uses_threads()
    r = prepare(tmp_path / "o", "--source", "text", "--lang", "en", EN, "--engine", "ray", "--worker-mode", "threads")
    assert r.exit_code == 2 and "--worker-mode is for --engine local" in r.stderr


def test_caps_shard_size_and_length_filters(tmp_path):
    out = tmp_path / "p"
    r = prepare(out, "--source", "text", "--lang", "en", EN, "--valid-fraction", "0.5", "--test-fraction", "0.4",
                "--max-valid", "2", "--max-test", "1", "--shard-size", "4", "--min-tokens", "2", "--max-tokens", "20")
    assert r.exit_code == 0, r.stderr
    m = manifest(out)
    assert m["counts"]["valid"]["en"] == 2 and m["counts"]["test"]["en"] == 1
    assert m["dropped"] == {"duplicate": 1, "too_short": 1, "too_long": 1}
    train = sorted(p.name for p in layout.shard_dir(out, "train", "en").glob("*.parquet"))
    assert train[0] == "part-00000.parquet" and len(train) == -(-m["counts"]["train"]["en"] // 4)
    assert all(pq.ParquetFile(layout.shard_dir(out, "train", "en") / n).metadata.num_rows == 4 for n in train[:-1])
    texts = [x["text"] for s in ("train", "valid", "test") for x in rows(out, s, "en")]
    assert "ok" not in texts and all(2 <= len(t.split()) <= 20 for t in texts)
    r = prepare(tmp_path / "nodedup", "--source", "text", "--lang", "en", EN, "--no-dedup", "--max-tokens", "0")
    assert r.exit_code == 0 and manifest(tmp_path / "nodedup")["dropped"] == {}
    assert manifest(tmp_path / "nodedup")["records"]["kept"] == manifest(tmp_path / "nodedup")["records"]["read"]
    r = prepare(tmp_path / "cap", "--source", "text", "--lang", "en", EN, "--max-records", "5")
    m = manifest(tmp_path / "cap")  # the source stops after 5 records; one of them is a duplicate
    assert m["records"]["read"] == 5 and m["records"]["kept"] == 4


def test_rerun_same_config_skips_and_other_config_needs_force(tmp_path):
    out = tmp_path / "p"
    args = ["--source", "text", "--lang", "en", EN]
    assert prepare(out, *args).exit_code == 0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.parquet")}
    r = prepare(out, *args, "--workers", "2", "--json")  # workers do not change the output: still up to date
    assert r.exit_code == 0 and json.loads(r.stdout)["status"].startswith("up to date")
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.parquet")} == before
    r = prepare(out, *args, "--lowercase", "xlm")
    assert r.exit_code == 2 and "different config" in error_line(r) and "lowercase" in r.stderr
    r = prepare(out, *args, "--lowercase", "xlm", "--force")
    assert r.exit_code == 0 and "xlp prepare: done" in r.stdout and re.search(r"\d+ shards? in", r.stdout)  # the summary
    assert manifest(out)["config"]["lowercase"] == "xlm"


def test_a_damaged_shard_is_rebuilt(tmp_path):
    out = tmp_path / "p"
    assert prepare(out, "--source", "text", "--lang", "en", EN).exit_code == 0
    good = shard_hashes(out)
    for damage in ("delete", "corrupt"):
        victim = out / sorted(good)[0]
        if damage == "delete":
            victim.unlink()
        else:
            victim.write_bytes(victim.read_bytes()[:-10] + b"0123456789")
        r = prepare(out, "--source", "text", "--lang", "en", EN, "--json")
        assert r.exit_code == 0 and json.loads(r.stdout)["status"] == "done"
        assert shard_hashes(out) == good


def test_lowercase_modes_in_the_shards(tmp_path):
    hi, th = FIX / "mixed.hi.txt", FIX / "mixed.th.txt"
    texts = {}
    for mode in ("safe", "xlm", "none"):
        out = tmp_path / mode
        r = prepare(out, "--source", "text", "--lang", "hi,th", hi, th, "--lowercase", mode, "--valid-fraction", "0",
                    "--test-fraction", "0")
        assert r.exit_code == 0, r.stderr
        texts[mode] = " ".join(x["text"] for lang in ("hi", "th") for x in rows(out, "train", lang))
    assert "\u094d" in texts["safe"] and "\u094d" not in texts["xlm"]  # virama
    assert "\u0e35" in texts["safe"] and "\u0e35" not in texts["xlm"]  # Thai vowel sign
    assert texts["safe"] == texts["none"]  # no case in these scripts, nothing to strip


def test_parallel_moses_files(tmp_path):
    out = tmp_path / "p"
    r = prepare(out, "--source", "opus", "--lang", "fr,en", FIX / "talk.en-fr.en", FIX / "talk.en-fr.fr",
                "--valid-fraction", "0", "--test-fraction", "0", "--json")
    assert r.exit_code == 0, r.stderr
    m = manifest(out)
    assert m["counts"]["train"] == {"en-fr": 5} and m["dropped"] == {"duplicate": 1}
    got = rows(out, "train", "en-fr")
    assert list(got[0]) == ["id", "source", "split", "pair", "lang1", "lang2", "raw1", "raw2", "text1", "text2"]
    assert {(r["split"], r["pair"]) for r in got} == {("train", "en-fr")}
    first = got[0]
    assert (first["lang1"], first["lang2"], first["raw1"], first["raw2"]) == ("en", "fr", "Good morning.", "Bonjour.")
    assert first["text1"] == "good morning ." and first["text2"] == "bonjour ."
    assert any(x["text2"] == "ou est la gare ?" for x in got)


# ---------------------------------------------------------------- bad input
def test_unknown_language_code(tmp_path):
    r = prepare(tmp_path / "p", "--source", "text", "--lang", "english", EN)
    assert r.exit_code == 2 and "unknown language code 'english'" in error_line(r)
    assert not (tmp_path / "p").exists()


def test_missing_path(tmp_path):
    missing = tmp_path / "nope.en.txt"
    r = prepare(tmp_path / "p", "--source", "text", "--lang", "en", missing)
    assert r.exit_code == 2 and str(missing) in error_line(r) and "no such file" in r.stderr
    assert not (tmp_path / "p").exists()  # nothing written


def test_empty_file(tmp_path):
    r = prepare(tmp_path / "p", "--source", "text", "--lang", "en", FIX / "empty.en.txt")
    assert r.exit_code == 2 and "empty.en.txt" in error_line(r) and "empty" in r.stderr
    assert not (tmp_path / "p" / "manifest.json").exists() and not list((tmp_path / "p").rglob("*.parquet"))


def test_invalid_utf8_raises_then_skip_counts_it(tmp_path):
    bad = FIX / "bad_utf8.en.txt"
    r = prepare(tmp_path / "p", "--source", "text", "--lang", "en", bad)
    line = error_line(r)
    assert r.exit_code == 2 and f"{bad}:2:" in line and "UTF-8" in line
    assert not list((tmp_path / "p").rglob("part-*.parquet"))
    # nothing was kept, so the same folder accepts the corrected command without --force
    r = prepare(tmp_path / "p", "--source", "text", "--lang", "en", bad, "--on-error", "skip")
    assert r.exit_code == 0, r.stderr
    r = prepare(tmp_path / "s", "--source", "text", "--lang", "en", bad, FIX / "empty.en.txt", EN,
                "--on-error", "skip", "--json")
    assert r.exit_code == 0, r.stderr
    m = manifest(tmp_path / "s")
    assert sum(m["skipped"].values()) == 2 and json.loads(r.stdout)["skipped"] == 2
    assert any("UTF-8" in k for k in m["skipped"]) and any("empty" in k for k in m["skipped"])
    assert any(f"{bad}:2" in e for e in m["skipped_examples"])
    assert m["records"]["read"] == 2 + 20


def test_bad_flag_values(tmp_path):
    for args, needle in ((["--workers", "0"], "--workers"), (["--valid-fraction", "0.7", "--test-fraction", "0.4"], "below 1"),
                         (["--lowercase", "upper"], "lowercase"), (["--min-tokens", "5", "--max-tokens", "2"], "min-tokens")):
        r = prepare(tmp_path / "p", "--source", "text", "--lang", "en", EN, *args)
        assert r.exit_code == 2 and needle in error_line(r), (args, r.stderr)


def test_bpe_inside_prepare(tmp_path):
    out = tmp_path / "p"
    r = prepare(out, "--source", "text", "--lang", "en,fr", EN, FR, "--bpe-codes", "40", "--json")
    try:
        import xlp_cli.bpe.run  # noqa: F401
    except ModuleNotFoundError:
        assert r.exit_code == 1 and "BPE inside prepare is not available" in error_line(r)
        return
    assert r.exit_code == 0, r.stderr
    m = manifest(out)
    bpe, ids = tmp_path / "p-bpe", tmp_path / "p-ids"  # siblings: every stage folder stands alone
    assert m["outputs"]["bpe"] == "../p-bpe" and m["outputs"]["ids"] == "../p-ids"
    assert not (out / "bpe").exists() and not (out / "ids").exists()
    assert (bpe / "codes").is_file() and (ids / "manifest.json").is_file()
    assert json.loads((ids / "manifest.json").read_text())["stage"] == "bpe-apply"
    assert list(layout.shard_dir(ids, "train", "en").glob("part-*.parquet"))
    assert find_upstream([out], "bpe-apply")[0] == ids.resolve()  # `--data p` still finds the ids
    for src in (bpe, bpe / "codes"):  # reuse a learn folder, or a bare codes file
        out2 = tmp_path / f"reuse-{src.name}"
        r = prepare(out2, "--source", "text", "--lang", "fr", FR, "--bpe-from", src)
        assert r.exit_code == 0, r.stderr
        assert manifest(out2)["outputs"]["ids"] == f"../reuse-{src.name}-ids" and "bpe" not in manifest(out2)["outputs"]
        assert list(layout.shard_dir(tmp_path / f"reuse-{src.name}-ids", "train", "fr").glob("part-*.parquet"))
    r = prepare(tmp_path / "x", "--source", "text", "--lang", "fr", FR, "--bpe-from", tmp_path / "missing")
    assert r.exit_code == 2 and "missing" in error_line(r)
    # the codes and vocab are read while the text is processed: a bad line is still a one-line error (exit 2),
    # and once the file is fixed the rerun keeps the text shards and writes the ids
    bad = tmp_path / "xlm"
    bad.mkdir()
    (bad / "codes").write_text("e s</w> 9\ne s 8 7\n", encoding="utf-8")
    (bad / "vocab").write_text("es 9\n", encoding="utf-8")
    r = prepare(tmp_path / "y", "--source", "text", "--lang", "fr", FR, "--bpe-from", bad / "codes")
    assert r.exit_code == 2 and str(bad / "codes") in error_line(r) and ":2" in error_line(r), r.stderr
    assert manifest(tmp_path / "y")["counts"] and not (tmp_path / "y-ids" / "manifest.json").exists()
    (bad / "codes").write_text("e s</w> 9\n", encoding="utf-8")
    r = prepare(tmp_path / "y", "--source", "text", "--lang", "fr", FR, "--bpe-from", bad / "codes")
    assert r.exit_code == 0, r.stderr
    assert list(layout.shard_dir(tmp_path / "y-ids", "train", "fr").glob("part-*.parquet"))


def test_config_file_gives_the_same_run_as_flags(tmp_path):
    toml = tmp_path / "prep.toml"
    toml.write_text(f'source = "text"\nlang = ["en"]\ninputs = ["{EN}"]\nlowercase = "xlm"\nmax-tokens = 20\n',
                    encoding="utf-8")
    a, b = tmp_path / "a", tmp_path / "b"
    assert prepare(a, "--config", toml).exit_code == 0
    r = prepare(b, "--source", "text", "--lang", "en", EN, "--lowercase", "xlm", "--max-tokens", "20")
    assert r.exit_code == 0
    assert manifest(a)["config_hash"] == manifest(b)["config_hash"] and shard_hashes(a) == shard_hashes(b)
    r = prepare(a, "--config", toml, "--json")  # the same config again: nothing to do
    assert json.loads(r.stdout)["status"].startswith("up to date")
