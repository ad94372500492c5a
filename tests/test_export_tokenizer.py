"""The tokenizers of `xlp export --format hf` on raw text (docs/export.md, "Tokenizers"): XlpTokenizer
(trust_remote_code) gives xlp's ids in every text mode; the stock XLMTokenizer is written with the model's
vocabulary and its differences are named; `pipeline('fill-mask')` works for every encoding; files honour the umask.
Runs on the real chain of tests/test_export.py (its `chain` fixture)."""

from __future__ import annotations

import csv
import json
import os
import pickle
import stat
from pathlib import Path

import pytest
import torch

from tests.conftest import run_cli
from tests.test_export import CASES, LANGS, _hand_run, build_chain

transformers = pytest.importorskip("transformers")

from xlp_cli.bpe.codes import BpeCodec  # noqa: E402
from xlp_cli.bpe.dictionary import Dictionary  # noqa: E402
from xlp_cli.bpe.encoder import TextEncoder  # noqa: E402
from xlp_cli.bpe.tokenizer import Tokenizer  # noqa: E402
from xlp_cli.export import hf_tokenizer  # noqa: E402
from xlp_cli.models import checkpoint as ckpt  # noqa: E402
from xlp_cli.text.pipeline import TextPipeline  # noqa: E402

# Raw sentences written for this test: accents (lädt, é), Cyrillic й, curly and French quotes with no-break
# spaces, an abbreviation, a final period after a prefix, digits with a no-break space, a tab.
RAW = {
    "en": ["The children were wearing hats in Zürich.", "Mr. Smith said: \u201cIt\u2019s 3\u00a0000 miles.\u201d",
           "She isn't   here\tyet, is she?", "They met in Washington, D.C."],
    "fr": ["Il lädt l\u2019économie \u00ab\u00a0très\u00a0\u00bb vite !", "Le prix a augmenté de 3,5\u00a0% en mars.",
           "C'est l'été à Paris, n'est-ce pas ?", "Йогурт et crème brûlée."],
}
MODES = [("xlm", "xlm"), ("moses", "safe"), ("moses", "none"), ("none", "xlm")]


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return build_chain(tmp_path_factory.mktemp("export_tokenizer"))


def _export(chain: Path, name: str) -> Path:
    out = chain / f"hf_{name}"
    if not (out / "config.json").is_file():
        r = run_cli("export", "--format", "hf", chain / f"run_{name}" if name == "additive-pretrained"
                    else _hand_run(chain, name), out)
        assert r.exit_code == 0, r.output
    return out


def _tokenizer_folder(chain: Path, tmp: Path, tokenize: str, lowercase: str) -> tuple[Path, TextEncoder]:
    """The chain's BPE (codes + vocab limit + dict.txt) under a text pipeline mode, written by the export's code."""
    ids = chain / "ids"
    enc = TextEncoder(TextPipeline(tokenize=tokenize, lowercase=lowercase),
                      Tokenizer("fastbpe", Dictionary.read(ids / "dict.txt"), BpeCodec(ids / "codes", ids / "vocab")),
                      files={"codes": ids / "codes", "vocab": ids / "vocab"})
    hf_tokenizer.write(tmp, enc, LANGS, 64)
    return tmp, enc


@pytest.mark.parametrize("tokenize, lowercase", MODES, ids=[f"{t}-{c}" for t, c in MODES])
def test_remote_tokenizer_gives_xlp_ids_on_raw_text_in_every_mode(chain, tmp_path, tokenize, lowercase):
    folder, enc = _tokenizer_folder(chain, tmp_path, tokenize, lowercase)
    remote = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    stock = transformers.AutoTokenizer.from_pretrained(folder)
    assert type(remote).__name__ == "XlpTokenizer" and type(stock).__name__ == "XLMTokenizer"
    assert remote.vocab_size == stock.vocab_size == len(enc.dictionary)  # the model's vocabulary
    assert stock.do_lowercase_and_remove_accent == (lowercase != "none")
    same_stock = n = 0
    for lang, sents in RAW.items():
        for s in sents:
            want = [1, *enc.encode(s, lang).tolist(), 1]
            got = remote(s, lang=lang)
            assert got["input_ids"] == want, (lang, s)
            assert got["langs"] == [LANGS.index(lang)] * len(want)
            same_stock += stock(s)["input_ids"] == want
            n += 1
    print(f"{tokenize}/{lowercase}: XlpTokenizer {n}/{n}, stock XLMTokenizer {same_stock}/{n} identical")
    again = pickle.loads(pickle.dumps(remote))  # (datasets.map pickles it)
    assert again(RAW["fr"][0], lang="fr")["input_ids"] == remote(RAW["fr"][0], lang="fr")["input_ids"]
    batch = remote([RAW["fr"][0], RAW["fr"][2]], lang="fr", padding=True, return_tensors="pt")
    assert batch["langs"].shape == batch["input_ids"].shape and bool((batch["langs"] == 1).all())
    with pytest.raises(ValueError, match="not a language of this model"):
        remote("hello", lang="de")


def test_stock_files_use_the_models_vocabulary_and_name_their_differences(chain):
    out = _export(chain, "additive-pretrained")
    vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    words = Dictionary.read(out / "dict.txt").words
    assert sorted(vocab.values()) == list(range(len(words)))  # dict.txt's ids, none added
    assert json.loads((out / "config.json").read_text())["vocab_size"] == len(words)
    assert not (out / "tokenizer.json").exists()
    merges = (out / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert merges and all(len(m.split(" ")) == 2 for m in merges)
    conf = json.loads((out / "tokenizer_config.json").read_text())
    assert conf["tokenizer_class"] == "XLMTokenizer" and conf["auto_map"]["AutoTokenizer"][0].startswith("tokenization_xlp.")
    assert conf["xlp_pipeline"]["lowercase"] == "safe" and conf["default_lang"] == "en"
    readme = (out / "README.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    for note in manifest["stock_tokenizer_differs"]:
        assert note in readme
    assert any("--lowercase safe" in n for n in manifest["stock_tokenizer_differs"])
    assert any("vocabulary limit" in n for n in manifest["stock_tokenizer_differs"])


@pytest.mark.parametrize("name", list(CASES))
def test_fill_mask_pipeline_works_for_every_encoding(chain, name):
    """pipeline('fill-mask') with the export's own tokenizer (it passes `langs`): its scores are the xlp model's
    MLM probabilities at the mask for the default language."""
    out = _export(chain, name)
    fill = transformers.pipeline("fill-mask", model=str(out), trust_remote_code=True)
    assert type(fill.tokenizer).__name__ == "XlpTokenizer"
    text = f"Le comité s'est {fill.tokenizer.mask_token} mardi ."
    res = fill(text, top_k=3)
    assert len(res) == 3 and all(0 < r["score"] <= 1 for r in res)
    enc = fill.tokenizer(text, return_tensors="pt")
    xlp = ckpt.load_pretrained(chain / f"run_{name}")
    with torch.no_grad():
        langs = enc["langs"].clamp(max=len(xlp.config.langs) - 1)
        logits = xlp.mlm_logits(xlp.token_states(xlp(enc["input_ids"], langs, pad_mask=enc["input_ids"] == 2)))
    at = int((enc["input_ids"][0] == 5).nonzero()[0, 0])
    probs = logits[0, at].softmax(-1)
    top = probs.topk(3)
    assert [r["token"] for r in res] == top.indices.tolist()
    assert [r["score"] for r in res] == pytest.approx(top.values.tolist(), abs=1e-5)
    last = list(fill.tokenizer.lang2id)[-1]  # the language of the text, when not the default
    assert fill(text, top_k=1, tokenizer_kwargs={"lang": last})[0]["token"] >= 0


def test_remote_model_without_langs_is_a_clear_error(chain):
    out = _export(chain, "attaching")
    model = transformers.AutoModelForMaskedLM.from_pretrained(out, trust_remote_code=True)
    with pytest.raises(ValueError, match="pass langs="):
        model(input_ids=torch.tensor([[1, 20, 1]]))


def test_export_files_honour_the_umask(chain, tmp_path):
    """model.safetensors included (safetensors writes 0600 itself), in the export and in the run's checkpoints."""
    old = os.umask(0o022)
    try:
        r = run_cli("export", "--format", "hf", _hand_run(chain, "none"), tmp_path / "hf")
        assert r.exit_code == 0, r.output
        ckpt.save(tmp_path / "ckpt", ckpt.load_pretrained(_hand_run(chain, "none")), {"step": 1})
    finally:
        os.umask(old)
    bad = [f"{p.relative_to(tmp_path)} {oct(stat.S_IMODE(p.stat().st_mode))}"
           for p in tmp_path.rglob("*") if p.is_file() and stat.S_IMODE(p.stat().st_mode) != 0o644]
    assert not bad, bad
    old = os.umask(0o027)
    try:
        ckpt.save(tmp_path / "ckpt027", ckpt.load_pretrained(_hand_run(chain, "none")), {"step": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "ckpt027" / "model.safetensors").stat().st_mode) == 0o640


@pytest.mark.integration
def test_remote_tokenizer_gives_xlp_ids_on_xnli_sentences_of_every_language(shared_data, tmp_path):
    """XLM mode with XLM-15's released BPE on real XNLI dev sentences (10 per language, all 15 languages):
    XlpTokenizer equals xlp on all of them (benchmarks/export_tokenizer_parity.py measures 1,000 per language)."""
    src = shared_data / "xlm_bpe_xnli15"
    codes, vocab = src / "codes_xnli_15", src / "vocab_xnli_15"
    langs = "en fr es de el bg ru tr ar vi th zh hi sw ur".split()
    enc = TextEncoder(TextPipeline(tokenize="xlm", lowercase="xlm"),
                      Tokenizer("fastbpe", Dictionary.read(vocab, max_vocab=95000), BpeCodec(codes, vocab)),
                      files={"codes": codes, "vocab": vocab})
    hf_tokenizer.write(tmp_path, enc, langs, 512)
    remote = transformers.AutoTokenizer.from_pretrained(tmp_path, trust_remote_code=True)
    sents: dict[str, list[str]] = {}
    with open(shared_data / "xnli" / "xnli.dev.tsv", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            got = sents.setdefault(row["language"], [])
            if len(got) < 10 and row["sentence1"] not in got:
                got.append(row["sentence1"])
    assert sorted(sents) == sorted(langs)
    for lang in langs:
        want = [[1, *ids.tolist(), 1] for ids in enc.encode_batch(sents[lang], lang)]
        assert [remote(s, lang=lang)["input_ids"] for s in sents[lang]] == want, lang
