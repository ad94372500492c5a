"""xlp bpe learn / apply: fastBPE parity (learn and apply), XLM dictionary layout, shards, manifests, bad input.

The reference files in tests/fixtures/bpe/ were made by the real `fast` binary (fastBPE 0.1.0 sdist, g++ -O3)
from the hand-written corpus.txt: `fast learnbpe 120 corpus.txt > codes.ref`, `fast getvocab` on the applied
corpus > vocab.ref, `fast applybpe apply_output.ref apply_input.txt codes.ref vocab.ref`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from bpe_fixtures import PARITY_LANGS, make_prepared, parity_lines
from typer.testing import CliRunner

from xlp_cli.artifacts.files import data_dir, sha256_file
from xlp_cli.artifacts import layout
from xlp_cli.artifacts.manifest import read_manifest
from xlp_cli.artifacts.shards import shard_paths
from xlp_cli.bpe.codes import BpeCodec, learn_merges, subword_counts
from xlp_cli.bpe.config import BpeApplyConfig, BpeLearnConfig
from xlp_cli.bpe.dictionary import N_SPECIALS, SPECIALS, UNK_ID, Dictionary, _native_read
from xlp_cli.bpe.run import apply, learn
from xlp_cli.cli.commands import stage_command
from xlp_cli.core.errors import BadInput

FIX = Path(__file__).parent / "fixtures" / "bpe"
XLM = data_dir() / "xlm_bpe_xnli15"


def bpe_app() -> typer.Typer:
    """Only the bpe commands, registered exactly as cli.py registers them."""
    app = typer.Typer()
    stage_command(app, "bpe")        # `learn`
    stage_command(app, "bpe-apply")  # `apply`
    return app


def need_xlm() -> None:
    if not (XLM / "codes_xnli_15").is_file():
        pytest.skip(f"XLM codes not found at {XLM}")


# ------------------------------------------------------------------ learning
def test_learn_identical_to_fast_learnbpe_including_ties():
    merges, words, n = learn_merges([(FIX / "corpus.txt").read_bytes()], 120)
    got = "".join(f"{m.left} {m.right} {m.count}\n" for m in merges)
    assert got == (FIX / "codes.ref").read_text(encoding="utf-8")
    assert sum(m.count == 1 for m in merges) > 10  # the tail is all ties: tie-breaking is exercised
    vocab = subword_counts(words, BpeCodec(FIX / "codes.ref", None))
    assert "".join(f"{t} {c}\n" for t, c in vocab) == (FIX / "vocab.ref").read_text(encoding="utf-8")


def _naive_segment(word: str, merges) -> list[str]:
    syms = list(word[:-1]) + [word[-1] + "</w>"]
    for m in merges:
        i, out = 0, []
        while i < len(syms):
            if i + 1 < len(syms) and syms[i] == m.left and syms[i + 1] == m.right:
                out.append(m.left + m.right)
                i += 2
            else:
                out.append(syms[i])
                i += 1
        syms = out
    return syms


def test_each_merge_is_a_most_frequent_pair_with_its_true_count():
    """Independent check of the incremental updates: recount all pairs from scratch before every merge."""
    text = " ".join(parity_lines("en")[:60] + parity_lines("ru")[:30]) if (data_dir() / "xlm_parity").is_dir() \
        else (FIX / "corpus.txt").read_text(encoding="utf-8")
    merges, words, _ = learn_merges([text.encode()], 80)
    wc = dict(words)
    for k, m in enumerate(merges):
        pairs: Counter = Counter()
        for w, c in wc.items():
            s = _naive_segment(w, merges[:k])
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += c
        assert pairs[(m.left, m.right)] == m.count, (k, m)
        assert m.count == max(pairs.values())


def test_learning_stops_when_nothing_is_left_to_merge(tmp_path):
    merges, _, _ = learn_merges([b"ab ab abc\n"], 50)
    assert [(m.left, m.right, m.count) for m in merges] == [("a", "b</w>", 2), ("a", "b", 1), ("ab", "c</w>", 1)]


def test_learn_stage_writes_codes_vocab_dict_and_manifest(tmp_path):
    prep = make_prepared(tmp_path / "prep", {"en": ["low lower lowest"] * 50 + ["new newer"] * 5, "fr": ["le bas"] * 3})
    s = learn(BpeLearnConfig(data=[prep], out=tmp_path / "bpe", codes=10))
    m = read_manifest(tmp_path / "bpe", stage="bpe-learn")
    assert m["tokenizer"]["kind"] == "fastbpe" and m["tokenizer"]["codes_sha256"] == sha256_file(tmp_path / "bpe/codes")
    assert m["upstream"][0]["stage"] == "prepare"
    # XLM smoothing, alpha 0.5: q_l proportional to sqrt(n_l); the corpus keeps the split's size
    q_en, q_fr = m["sampling"]["en"]["q"], m["sampling"]["fr"]["q"]
    assert q_en / q_fr == pytest.approx((55 / 3) ** 0.5)
    assert m["sampling"]["en"]["sampled"] + m["sampling"]["fr"]["sampled"] == 58
    assert m["sampling"]["fr"]["sampled"] > 3  # the small language is oversampled
    dico = Dictionary.read(tmp_path / "bpe/dict.txt")
    vocab = [l.split(" ")[0] for l in (tmp_path / "bpe/vocab").read_text().splitlines()]
    assert dico.words[:N_SPECIALS] == SPECIALS and dico.words[N_SPECIALS:] == vocab
    assert s["merges"] == 10
    # rerun: resumed (nothing redone); other config: refused
    assert learn(BpeLearnConfig(data=[prep], out=tmp_path / "bpe", codes=10))["skipped"]
    with pytest.raises(BadInput, match="different config"):
        learn(BpeLearnConfig(data=[prep], out=tmp_path / "bpe", codes=11))


# ------------------------------------------------------------------ applying
def test_apply_byte_identical_to_fast_applybpe_with_odd_whitespace():
    codec = BpeCodec(FIX / "codes.ref", FIX / "vocab.ref")
    lines = (FIX / "apply_input.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert "\n".join(codec.apply_lines(lines)) + "\n" == (FIX / "apply_output.ref").read_text(encoding="utf-8")


@pytest.mark.integration
def test_xlm_released_codes_reproduce_reference_bpe_for_all_15_languages():
    need_xlm()
    codec = BpeCodec(XLM / "codes_xnli_15", XLM / "vocab_xnli_15")
    for lang in PARITY_LANGS:
        assert codec.apply_lines(parity_lines(lang)) == parity_lines(lang, "bpe.txt"), lang


def _read_line_by_line(path, **kw):
    from xlp_cli.bpe.dictionary import _entries  # (XLM's rules, a line at a time)

    return Dictionary.from_counts(_entries(path), **kw)


def test_dictionary_native_reader_equals_line_by_line(tmp_path):
    """Dictionary.read reads a file natively (vocab.cpp) or, where that reader gives up, line by line; both give
    what XLM's per-line rules give (words, counts, lines skipped, and dict.txt's bytes), on files with repeats,
    specials, Unicode-space tokens and separators, U+2028, a BOM, CRLF, blank and three-field lines, counts with
    leading zeros, too big for 64 bits or in other digits, and on every BMP character inside a token."""
    cases = {
        "regular": "the 10\nof 9\nthe 8\n<unk> 7\nx@@ 3\n",
        "unprintable": "a 5\n\xa0 4\n\u2003@@ 3\n@@ 2\nb\u2003c 1\n\u2028 1\n\ufeffz 1\nsoft\xadhy 1",
        "separators": " a 5\nb\t4\nc\x1c3\nd\x852 \ne\u3000\u20291\nf 1 1\n  \n\x00g 007\nh\u2028i 1\nk\u2028 1\n",
        "counts": "a 18446744073709551617\nb 99999999999999999999999\nc 0\n",
        "unicode digits": "a 5\nb \u0663\n",
        "crlf": "a 5\r\nb 4\r\n",
        "blank": "a 5\n\nb 4\n",
        "empty": "",
        "bmp": "".join(f"x{chr(cp)}y 1\n" for cp in range(0x10000) if cp not in (10, 13) and not 0xD800 <= cp < 0xE000),
    }
    native = {}
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8", newline="")
        native[name] = _native_read(path.read_bytes()) is not None
        for kw in ({}, {"max_vocab": 16}, {"min_count": 4}):
            want, got = _read_line_by_line(path, **kw), Dictionary.read(path, **kw)
            assert (got.words, got.counts, got.skipped) == (want.words, want.counts, want.skipped), (name, kw)
            want.write(tmp_path / "want.txt")
            got.write(tmp_path / "got.txt")
            assert (tmp_path / "got.txt").read_bytes() == (tmp_path / "want.txt").read_bytes(), (name, kw)
    assert native == {**{k: True for k in cases}, "counts": False, "unicode digits": False, "crlf": False}
    bad = tmp_path / "bad"
    bad.write_text("a 5\nb x\xa0\n", encoding="utf-8")
    with pytest.raises(BadInput, match="count is not a number"):
        Dictionary.read(bad)
    if (XLM / "vocab_xnli_15").is_file():
        want, got = _read_line_by_line(XLM / "vocab_xnli_15"), Dictionary.read(XLM / "vocab_xnli_15")
        assert got._text is not None
        assert (got.words, got.counts, got.skipped) == (want.words, want.counts, want.skipped)


@pytest.mark.integration
def test_xlm_vocab_gives_xlm_ids():
    need_xlm()
    d = Dictionary.read(XLM / "vocab_xnli_15", max_vocab=95000)
    assert len(d) == 95000 and d.words[:N_SPECIALS] == SPECIALS
    assert d.index[","] == 14 and d.index["."] == 15 and d.index["de"] == 16
    # XLM's read_vocab (id = 14 + line index - lines skipped so far) skips the U+00A0 token (0-based line 26698)
    # and keeps the first `\xa0@@` (line 61476) as `@@`
    lines = (XLM / "vocab_xnli_15").read_text(encoding="utf-8").split("\n")
    assert lines[26698].startswith("\xa0 ")
    assert d.index[lines[26699].split(" ")[0]] == 14 + 26699 - 1
    assert lines[61476].startswith("\xa0@@ ") and d.index["@@"] == 14 + 61476 - 1


@pytest.mark.integration
def test_encode_arrow_in_many_threads_equals_one_thread():
    """The native applier is shared by `xlp bpe apply --workers N` threads: blocks encoded side by side (new words
    arriving in several threads at once, and blocks of the filter mode's apply_block in between) give what one
    thread gives, for the real XLM parity text of the 15 languages."""
    import threading

    need_xlm()
    blocks = [lines[i:i + 50] for lang in PARITY_LANGS for lines in [parity_lines(lang)] for i in range(0, len(lines), 50)]
    words = Dictionary.read(XLM / "vocab_xnli_15").words
    one = BpeCodec(XLM / "codes_xnli_15", XLM / "vocab_xnli_15")
    want = [[a.to_pylist() for a in one.encode_arrow(b, words)] for b in blocks]
    shared = BpeCodec(XLM / "codes_xnli_15", XLM / "vocab_xnli_15")
    got: dict[tuple[int, int], list] = {}

    def work(t: int) -> None:
        n = len(blocks)
        order = [(k + t * n // 4) % n for k in range(n)][:: -1 if t % 2 else 1]  # each thread its own order
        for k in order:
            if k % 7 == t:
                shared._bpe.apply_block(("\n".join(blocks[k]) + "\n").encode("utf-8"), 1)
            got[t, k] = [a.to_pylist() for a in shared.encode_arrow(blocks[k], words)]

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(got) == 4 * len(blocks) and len(blocks) > 40
    for (t, k), value in got.items():
        assert value == want[k], (t, k)


def test_apply_with_several_workers_writes_the_same_shards(tmp_path):
    """`--workers` only changes how many threads encode: the id shards are the same bytes."""
    en = [f"the road number {i} is {'wide' if i % 3 else 'newer'} and {'long' * (i % 4)}" for i in range(300)]
    prep = make_prepared(tmp_path / "prep", {"en": en}, shard_rows=128)
    learn(BpeLearnConfig(data=[prep], out=tmp_path / "bpe", codes=40))
    digests = []
    for workers in (1, 3):
        apply(BpeApplyConfig(data=[prep, tmp_path / "bpe"], out=tmp_path / f"ids{workers}", workers=workers,
                             batch_rows=7))
        shards = sorted((tmp_path / f"ids{workers}").rglob("part-*.parquet"))
        digests.append([(p.relative_to(tmp_path / f"ids{workers}"), sha256_file(p)) for p in shards])
    assert digests[0] == digests[1] and len(digests[0]) == 3


def test_apply_stage_writes_id_shards_mono_and_pairs(tmp_path):
    en = ["the lower road", "the newest road is wide"] * 20
    de = ["der neue weg", "die wege"] * 10
    prep = make_prepared(tmp_path / "prep", {"en": en, "de": de}, pairs={"de-en": [("der weg", "the road")] * 4},
                         shard_rows=16)
    learn(BpeLearnConfig(data=[prep], out=tmp_path / "bpe", codes=30))
    s = apply(BpeApplyConfig(data=[prep, tmp_path / "bpe"], out=tmp_path / "ids"))
    m = read_manifest(tmp_path / "ids", stage="bpe-apply")
    assert [u["stage"] for u in m["upstream"]] == ["prepare", "bpe-learn"]
    assert m["dictionary_sha256"] == sha256_file(tmp_path / "ids/dict.txt")
    assert m["counts"]["train"] == {"de": 20, "en": 40, "de-en": 4}
    t = pq.read_table(layout.shard_dir(tmp_path / "ids", "train", "en") / "part-00000.parquet")
    assert t.schema.names == ["id", "split", "lang", "text", "ids"] and t.schema.field("ids").type.value_type == pa.int32()
    codec = BpeCodec(tmp_path / "bpe/codes", tmp_path / "bpe/vocab")
    dico = Dictionary.read(tmp_path / "ids/dict.txt")
    assert t.column("text").to_pylist() == codec.apply_lines(en[:16])
    assert t.column("ids").to_pylist() == [dico.encode(x.split()).tolist() for x in codec.apply_lines(en[:16])]
    assert len(shard_paths(layout.shard_dir(tmp_path / "ids", "train", "en"))) == 3
    p = pq.read_table(layout.shard_dir(tmp_path / "ids", "train", "de-en") / "part-00000.parquet")
    assert {"ids1", "ids2", "text1", "text2", "lang1", "lang2"} <= set(p.schema.names)
    assert set(t.column("split").to_pylist()) == {"train"} and set(p.column("pair").to_pylist()) == {"de-en"}
    assert s["unk_rate"] == 0.0 and s["tokens"] == m["tokens"]["train"]["en"] + m["tokens"]["train"]["de"] + m["tokens"]["train"]["de-en"]
    # resume
    assert apply(BpeApplyConfig(data=[prep, tmp_path / "bpe"], out=tmp_path / "ids"))["skipped"]


def test_max_vocab_and_min_count_follow_xlm(tmp_path):
    entries = [("a", 9), ("b", 5), ("c", 2), ("d", 1)]
    assert Dictionary.from_counts(entries, max_vocab=16).words[N_SPECIALS:] == ["a", "b"]
    assert Dictionary.from_counts(entries, min_count=2).words[N_SPECIALS:] == ["a", "b", "c"]
    d = Dictionary.from_counts(entries)
    assert d.encode(["b", "zzz", "<s>"]).tolist() == [15, UNK_ID, 0]
    d.write(tmp_path / "dict.txt")
    assert Dictionary.read(tmp_path / "dict.txt").words == d.words


def test_sentencepiece_learns_and_applies_on_raw_text(tmp_path):
    raw = {"en": ["The lower road, said she."] * 30 + ["Newer roads are wider!"] * 30,
           "ru": ["Новая дорога шире старой."] * 40}
    prep = make_prepared(tmp_path / "prep", {k: [x.lower() for x in v] for k, v in raw.items()}, raw=raw)
    learn(BpeLearnConfig(data=[prep], out=tmp_path / "spm", tokenizer="sentencepiece", spm_vocab_size=60,
                         spm_model_type="bpe"))
    m = read_manifest(tmp_path / "spm")
    assert m["tokenizer"]["kind"] == "sentencepiece" and (tmp_path / "spm/spm.model").is_file()
    apply(BpeApplyConfig(data=[prep, tmp_path / "spm"], out=tmp_path / "ids"))
    t = pq.read_table(layout.shard_dir(tmp_path / "ids", "train", "en") / "part-00000.parquet")
    first = t.column("text")[0].as_py()
    assert first.startswith("\u2581") and "T" in first  # SentencePiece pieces of the cased raw text
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "spm/spm.model"))
    assert sp.decode(first.split(" ")) == "The lower road, said she."
    assert min(min(x) for x in t.column("ids").to_pylist()) >= N_SPECIALS


def test_sentencepiece_word_model_is_a_word_level_vocabulary_of_tokenized_text(tmp_path):
    """VLE Table 4's word-level vocabulary: the most frequent Moses-tokenized words, the others <unk>."""
    from xlp_cli.bpe.encoder import TextEncoder

    raw = {"en": [f"The dog {w} runs, said she." for w in ("red", "big", "old")] * 20 + ["A rare zebra!"],
           "de": [f"Der Hund {w} rennt." for w in ("rot", "alt")] * 20}
    tokenized = {k: [x.lower().replace(",", " ,").replace(".", " .").replace("!", " !") for x in v]
                 for k, v in raw.items()}  # what prepare's default pipeline (Moses, lowercase xlm) writes
    prep = make_prepared(tmp_path / "prep", tokenized, raw=raw)
    learn(BpeLearnConfig(data=[prep], out=tmp_path / "words", tokenizer="sentencepiece", spm_vocab_size=22,
                         spm_model_type="word"))
    apply(BpeApplyConfig(data=[prep, tmp_path / "words"], out=tmp_path / "ids"))
    words = [w for w, _ in (line.split(" ") for line in (tmp_path / "words/dict.txt").read_text().splitlines())]
    assert "\u2581," in words and "\u2581runs" in words and "\u2581runs," not in words  # tokenized words, not raw
    enc = TextEncoder.from_folder(tmp_path / "ids")
    ids = enc.encode("The dog red runs, said she.", "en")
    assert UNK_ID not in ids.tolist() and enc.to_tokenized(ids) == "the dog red runs , said she ."
    assert enc.to_text(ids, "en") == "the dog red runs, said she."  # detokenized as fastBPE output is
    assert UNK_ID in enc.encode("A rare zebra!", "en").tolist()  # seen once: below the vocabulary's cut


# ------------------------------------------------------------------ bad input (CLI: one line, exit 2, no output)
def _cli(args: list[str]):
    r = CliRunner().invoke(bpe_app(), args)
    return r.exit_code, r.output


def _one_line_error(out: str) -> str:
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("xlp: error: ") and "Traceback" not in out, out
    return lines[0]


def test_bad_codes_file_names_file_and_line(tmp_path):
    prep = make_prepared(tmp_path / "prep", {"en": ["a b c"]})
    bad = tmp_path / "codes"
    bad.write_text("a b 10\nb c\n", encoding="utf-8")
    (tmp_path / "vocab").write_text("a 1\n", encoding="utf-8")
    code, out = _cli(["apply", "--data", str(prep), "--out", str(tmp_path / "ids"), "--codes", str(bad)])
    assert code == 2 and f"{bad}:2: not a fastBPE codes line" in _one_line_error(out)
    assert not (tmp_path / "ids").exists()


def test_vocab_that_does_not_match_codes(tmp_path):
    prep = make_prepared(tmp_path / "prep", {"en": ["a b c"]})
    vocab = tmp_path / "vocab"
    good = (FIX / "vocab.ref").read_text(encoding="utf-8").splitlines()[:5]
    vocab.write_text("\n".join(good) + "\nzz@@ 2\n", encoding="utf-8")
    code, out = _cli(["apply", "--data", str(prep), "--out", str(tmp_path / "ids"), "--codes", str(FIX / "codes.ref"),
                      "--vocab", str(vocab)])
    line = _one_line_error(out)
    assert code == 2 and f"{vocab}:6:" in line and "does not match the codes" in line
    assert not (tmp_path / "ids").exists()


def test_language_without_data_and_shards_of_another_stage(tmp_path):
    prep = make_prepared(tmp_path / "prep", {"en": ["a b c d"] * 3})
    code, out = _cli(["learn", "--data", str(prep), "--out", str(tmp_path / "bpe"), "--lang", "en,sw"])
    assert code == 2 and "no train data for language(s) sw" in _one_line_error(out)
    assert not (tmp_path / "bpe").exists()  # bad input: --out not even created
    # learn from a folder of token-id shards instead of text shards
    ids = tmp_path / "ids"
    code, out = _cli(["apply", "--data", str(prep), "--out", str(ids), "--codes", str(FIX / "codes.ref"),
                      "--vocab", str(FIX / "vocab.ref")])
    assert code == 0, out
    (ids / "mono").rename(tmp_path / "prep2_mono")
    fake = make_prepared(tmp_path / "prep2", {})
    (tmp_path / "prep2_mono").rename(fake / "mono")
    m = json.loads((fake / "manifest.json").read_text(encoding="utf-8"))  # (listed: the manifest is the whole truth)
    m["outputs"]["shards"] = {p.relative_to(fake).as_posix(): {} for p in sorted(fake.rglob("part-*.parquet"))}
    (fake / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    code, out = _cli(["learn", "--data", str(fake), "--out", str(tmp_path / "bpe2")])
    assert code == 2 and "token-id shards" in _one_line_error(out)


def test_codes_learned_on_differently_prepared_text_are_refused(tmp_path):
    a = make_prepared(tmp_path / "a", {"en": ["the road"] * 5}, config={"lowercase": "xlm", "tokenize": "moses"})
    b = make_prepared(tmp_path / "b", {"en": ["The road"] * 5}, config={"lowercase": "none", "tokenize": "moses"})
    assert _cli(["learn", "--data", str(a), "--out", str(tmp_path / "bpe"), "--codes", "3"])[0] == 0
    code, out = _cli(["apply", "--data", str(b), "--data", str(tmp_path / "bpe"), "--out", str(tmp_path / "ids")])
    assert code == 2 and "lowercase" in _one_line_error(out)


# ------------------------------------------------------------------ encoder: raw text -> ids from manifests alone
@pytest.mark.integration
def test_text_encoder_rebuilds_raw_to_ids_chain(tmp_path):
    need_xlm()
    langs = ["en", "de", "ru", "ar", "zh"]
    prep = make_prepared(tmp_path / "prep", {l: parity_lines(l) for l in langs},
                         raw={l: parity_lines(l, "input.txt") for l in langs},
                         config={"clean": True, "normalize": True, "tokenize": "moses", "lowercase": "xlm"})
    apply(BpeApplyConfig(data=[prep], out=tmp_path / "ids", codes=XLM / "codes_xnli_15", max_vocab=95000))
    from xlp_cli.bpe.encoder import TextEncoder

    enc = TextEncoder.from_folder(tmp_path / "ids")
    assert enc.tokenizer.kind == "fastbpe" and len(enc.dictionary) == 95000
    for lang in langs:
        raw = parity_lines(lang, "input.txt")[:100]
        assert enc.subwords(raw, lang) == parity_lines(lang, "bpe.txt")[:100], lang
        want = pq.read_table(layout.shard_dir(tmp_path / "ids", "train", lang) / "part-00000.parquet").column("ids").to_pylist()[:100]
        assert [x.tolist() for x in enc.encode_batch(raw, lang)] == want
    assert enc.decode(enc.encode("Hello, world!", "en")) == "hello , world !"


def test_codec_edge_cases():
    codec = BpeCodec(FIX / "codes.ref", FIX / "vocab.ref")
    assert codec.apply_lines([]) == []
    assert codec.apply_lines(["", " ", "lowest"]) == ["", " ", "lowest"]
    dico = Dictionary.read(FIX / "vocab.ref")
    sub, flat, offsets = codec.encode_lines(["lowest road", "", "zzz"], dico.index)
    assert offsets.tolist()[:3] == [0, len(sub[0].split()), len(sub[0].split())]
    assert flat[offsets[2]:].tolist() == dico.encode(sub[2].split()).tolist()
    with pytest.raises(BadInput, match="newline"):
        codec.apply_lines(["two\nlines"])
    # an Arrow string column (what `bpe apply` reads from a shard) gives what its Python strings give; a slice
    # starts at its own offset, nulls read as ""
    lines = pa.array(["x", "lowest road", None, "", " newer  wider ", "zzz"]).slice(1)
    want = codec.encode_arrow([x or "" for x in lines.to_pylist()], dico.words)
    assert [a.to_pylist() for a in codec.encode_arrow(lines, dico.words)] == [a.to_pylist() for a in want]
    with pytest.raises(BadInput, match="newline"):
        codec.encode_arrow(pa.array(["one", "two\nlines"]), dico.words)


def test_learn_from_both_sides_of_parallel_folders(tmp_path):
    prep = make_prepared(tmp_path / "prep", {}, pairs={"de-en": [("der neue weg", "the new road")] * 6})
    with pytest.raises(BadInput, match="no train shards"):
        learn(BpeLearnConfig(data=[prep], out=tmp_path / "a", codes=5))
    learn(BpeLearnConfig(data=[prep], out=tmp_path / "b", codes=5, parallel=True))
    m = read_manifest(tmp_path / "b")
    assert sorted(m["sampling"]) == ["de", "en"] and m["sampling"]["de"]["sentences"] == 6
    assert (tmp_path / "b" / "codes").read_text(encoding="utf-8").count("\n") == 5
