"""xlp vocab-score: exact counts, m(x) and ranking; properties; bad input; real multilingual data."""

from __future__ import annotations

import gzip
import json
import math
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from bpe_fixtures import PARITY_LANGS, make_prepared, parity_lines
from hypothesis import given, settings, strategies as st

from xlp_cli.artifacts import layout
from xlp_cli.artifacts.files import data_dir, sha256_file
from xlp_cli.artifacts.manifest import new_manifest, read_manifest, write_manifest
from xlp_cli.artifacts.shards import shard_entry, write_shard
from xlp_cli.bpe.dictionary import N_SPECIALS, Dictionary
from xlp_cli.core.errors import BadInput
from xlp_cli.vocab.config import VocabConfig
from xlp_cli.vocab.run import run
from xlp_cli.vocab.scoring import count_shards, rank


def make_ids(root: Path, words: list[str], data: dict[str, list[list[list[int]]]], split: str = "train") -> Path:
    """An `xlp bpe apply`-shaped folder: dict.txt + id shards (one list of sentences per shard) + manifest."""
    d = Dictionary.from_counts([(w, 1) for w in words])
    d.write(root / "dict.txt")
    listed = {}
    for lang, shards in data.items():
        for k, sents in enumerate(shards):
            t = pa.table({"id": [f"{lang}{k}{i}" for i in range(len(sents))], "lang": [lang] * len(sents),
                          "text": [" ".join(d.words[j] for j in s) for s in sents],
                          "ids": pa.array(sents, pa.list_(pa.int32()))})
            rel = layout.shard_rel(split, lang, f"part-{k:05d}.parquet")
            listed[rel] = shard_entry(root / rel, t.num_rows, write_shard(root / rel, t))
    write_manifest(root, new_manifest("bpe-apply", {"x": 1}, dictionary="dict.txt", outputs={"shards": listed},
                                      dictionary_sha256=sha256_file(root / "dict.txt")))
    return root


W = ["the", "der", "123", "la", ",", "und"]  # ids 14..19
THE, DER, NUM, LA, COMMA, UND = range(14, 20)


def hand_corpus(tmp_path: Path) -> Path:
    en = [[[THE, THE, NUM, COMMA], [THE, LA, 1]], [[THE, COMMA, NUM]]]  # id 1 (</s>) is a special: never a candidate
    de = [[[DER, DER, DER, UND, NUM, COMMA, THE]]]
    fr = [[[LA, LA, COMMA, NUM]]]
    return make_ids(tmp_path / "ids", W, {"en": en, "de": de, "fr": fr})


def test_exact_counts_scores_and_ranking(tmp_path):
    ids = hand_corpus(tmp_path)
    s = run(VocabConfig(data=[ids], out=tmp_path / "voc", k=[2, 3]))
    t = pq.read_table(tmp_path / "voc/scores/vocab_scores.parquet").to_pylist()
    en = [(r["token"], r["count_l"], r["count_other"], r["m"], r["rank"]) for r in t if r["lang"] == "en"]
    # en: the 4 vs 1 (de) -> 4; 123 2 vs 2 -> 1; , 2 vs 2 -> 1 (tie: count, then id: 123 (16) before , (18)); la 1 vs 2 -> 0.5
    assert en == [("the", 4, 1, 4.0, 1), ("123", 2, 2, 1.0, 2), (",", 2, 2, 1.0, 3), ("la", 1, 2, 0.5, 4)]
    de = [(r["token"], r["m"]) for r in t if r["lang"] == "de"]
    # exclusive tokens first (m = inf) by count: der (3) then und (1); then shared ones
    assert de[:2] == [("der", math.inf), ("und", math.inf)] and de[2][0] == "123"
    assert [r["token"] for r in t if r["lang"] == "fr"][0] == "la"  # la: 2 vs 1
    vle = json.loads((tmp_path / "voc/vle_vocab.json").read_text())
    assert vle["k"] == [2, 3] and vle["langs"]["de"]["2"] == [DER, UND] and vle["langs"]["en"]["3"] == [THE, NUM, COMMA]
    assert vle["dictionary_sha256"] == sha256_file(ids / "dict.txt")
    assert all(r["id"] >= N_SPECIALS for r in t)
    assert s["tokens_counted"] == (4 + 3 + 3) + 7 + 4
    # --words-only drops 123 and ','; --min-count 2 drops la from en
    run(VocabConfig(data=[ids], out=tmp_path / "v2", k=[5], words_only=True, min_count=2))
    en2 = [r["token"] for r in pq.read_table(tmp_path / "v2/scores/vocab_scores.parquet").to_pylist() if r["lang"] == "en"]
    assert en2 == ["the"]


def test_k_larger_than_candidates_warns_and_keeps_what_exists(tmp_path):
    ids = hand_corpus(tmp_path)
    s = run(VocabConfig(data=[ids], out=tmp_path / "voc", k=[100]))
    vle = json.loads((tmp_path / "voc/vle_vocab.json").read_text())
    assert len(vle["langs"]["fr"]["100"]) == s["candidates"]["fr"] == 3  # la , 123
    m = read_manifest(tmp_path / "voc", stage="vocab-score")
    assert any("fewer than K=100" in w for w in m["warnings"])


def test_bad_inputs_leave_no_output(tmp_path):
    ids = hand_corpus(tmp_path)
    with pytest.raises(BadInput, match="no train data for language"):
        run(VocabConfig(data=[ids], out=tmp_path / "a", lang=["en", "sw"]))
    assert not (tmp_path / "a").exists()
    prep = make_prepared(tmp_path / "prep", {"en": ["a b"]})
    with pytest.raises(BadInput, match="expected the output of `xlp bpe apply`"):
        run(VocabConfig(data=[prep], out=tmp_path / "b"))
    # shards written with another dictionary: ids beyond this dict.txt
    (ids / "dict.txt").write_text("the 1\n", encoding="utf-8")
    with pytest.raises(BadInput, match="another tokenizer"):
        run(VocabConfig(data=[ids], out=tmp_path / "c"))
    other = make_ids(tmp_path / "ids2", ["x"], {"en": [[[14]]], "fr": [[]]})
    with pytest.raises(BadInput, match="fr have no tokens"):
        run(VocabConfig(data=[other], out=tmp_path / "d"))
    assert not (tmp_path / "d").exists()


counts_st = st.integers(2, 4).flatmap(lambda L: st.integers(N_SPECIALS + 1, N_SPECIALS + 25).flatmap(
    lambda V: st.lists(st.lists(st.integers(0, 6), min_size=V, max_size=V), min_size=L, max_size=L)))


@settings(max_examples=60, deadline=None)
@given(counts_st)
def test_exclusive_tokens_outrank_every_shared_token(counts):
    c = np.array(counts, dtype=np.int64)
    langs = [f"l{i}" for i in range(len(c))]
    for li, lang in enumerate(langs):
        r = rank(c, langs)[lang]
        other = c.sum(0) - c[li]
        excl = other[r.ids] == 0
        assert not np.any(np.diff(excl.astype(int)) > 0)  # all exclusive ones come first
        ex_counts = c[li][r.ids][excl]
        assert np.all(np.diff(ex_counts) <= 0)  # more frequent exclusive tokens first
        assert np.all(np.diff(r.m[~excl]) <= 1e-12)  # shared ones by m, descending
        assert set(r.ids.tolist()) == {i for i in range(N_SPECIALS, c.shape[1]) if c[li, i] > 0}


@settings(max_examples=25, deadline=None)
@given(sentences=st.lists(st.lists(st.integers(0, 40), max_size=12), min_size=1, max_size=8),
       rnd=st.randoms(use_true_random=False))
def test_counts_are_invariant_to_shard_order(sentences, rnd, tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    paths = []
    for k, s in enumerate(sentences):
        p = root / f"part-{k:05d}.parquet"
        write_shard(p, pa.table({"ids": pa.array([s, s[: len(s) // 2]], pa.list_(pa.int32()))}))
        paths.append((p, "ids"))
    a = count_shards(paths, 41)
    rnd.shuffle(paths)
    assert np.array_equal(a, count_shards(paths, 41))
    assert a.sum() == sum(len(s) + len(s) // 2 for s in sentences)


# ------------------------------------------------------------------ real data
SCRIPTS = {"ar": "ARABIC", "ur": "ARABIC", "ru": "CYRILLIC", "bg": "CYRILLIC", "el": "GREEK", "th": "THAI",
           "hi": "DEVANAGARI", "zh": "CJK"}


def _strip(s: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFD", s.lower()) if unicodedata.category(ch) != "Mn")


def _words(line: str) -> list[str]:
    """Words of a raw sentence: lowercased, accent-stripped like XLM, punctuation and symbols removed."""
    return "".join(" " if unicodedata.category(ch)[0] in "PS" and ch != "'" else ch for ch in _strip(line)).split()


@pytest.mark.integration
def test_learn_bpe_and_score_real_multilingual_data(tmp_path):
    if not (data_dir() / "xlm_parity").is_dir():
        pytest.skip(f"xlm_parity not found at {data_dir()}")
    from xlp_cli.bpe.config import BpeApplyConfig, BpeLearnConfig
    from xlp_cli.bpe.run import apply, learn

    prep = make_prepared(tmp_path / "prep", {l: parity_lines(l) for l in PARITY_LANGS})
    learn(BpeLearnConfig(data=[prep], out=tmp_path / "bpe", codes=4000))
    apply(BpeApplyConfig(data=[prep, tmp_path / "bpe"], out=tmp_path / "ids"))
    s = run(VocabConfig(data=[tmp_path / "ids"], out=tmp_path / "voc", k=[20, 100], words_only=True, show=20))
    top = s["top"]
    for lang, script in SCRIPTS.items():  # the top tokens are written in the language's script
        for tok in top[lang][:20]:
            letters = [ch for ch in tok.removesuffix("@@") if unicodedata.category(ch)[0] == "L"]
            assert letters and all(script in unicodedata.name(ch, "") for ch in letters), (lang, tok)
    # and the whole-word ones are real words: they occur as words in the language's other Common Voice sentences
    cv = data_dir() / "commonvoice_sentences"
    for lang in ["en", "fr", "es", "de", "ru", "bg", "el", "tr", "ar", "vi", "ur", "hi"]:
        files = sorted(cv.glob(f"{lang}.*.txt.gz"))
        if not files:
            continue
        held = set(parity_lines(lang, "input.txt"))
        known: set[str] = set()
        for path in files:
            with gzip.open(path, "rt", encoding="utf-8") as f:
                for n, line in enumerate(f):
                    if n == 20000:
                        break
                    if line.rstrip("\n") not in held:
                        known.update(_words(line))
        standalone = set()  # tokens this language's BPE'd text uses as complete words (not word-final pieces)
        for sent in pq.read_table(layout.shard_dir(tmp_path / "ids", "train", lang) / "part-00000.parquet").column("text").to_pylist():
            toks = sent.split(" ")
            standalone.update(t for k, t in enumerate(toks) if not t.endswith("@@") and (k == 0 or not toks[k - 1].endswith("@@")))
        words = [t for t in top[lang] if t in standalone and len(t.strip("'")) > 1]
        hits = [w for w in words if _strip(w).strip("'") in known]
        assert len(words) >= 3 and len(hits) >= 0.8 * len(words), (lang, words, hits)


def test_cli_prints_a_table_and_exits_2_on_bad_input(tmp_path):
    import typer
    from typer.testing import CliRunner

    from xlp_cli.cli.commands import stage_command

    app = typer.Typer()
    stage_command(app, "vocab-score")
    app.command("noop")(lambda: None)  # keep `vocab-score` a sub-command
    ids = hand_corpus(tmp_path)
    r = CliRunner().invoke(app, ["vocab-score", "--data", str(ids), "--out", str(tmp_path / "voc"), "--k", "2,3"])
    assert r.exit_code == 0, r.output
    assert "der (∞)" in r.output and "the (4.0)" in r.output
    r = CliRunner().invoke(app, ["vocab-score", "--data", str(ids), "--out", str(tmp_path / "v2"), "--k", "0"])
    assert r.exit_code == 2 and r.output.startswith("xlp: error: ") and len(r.output.strip().splitlines()) == 1
