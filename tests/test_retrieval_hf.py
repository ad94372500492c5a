"""`xlp evaluate --task retrieval` on Hugging Face model folders: the `xlp export --format hf` folders of two tiny
real pre-trained runs (xlp: the remote-code kind; additive: stock XLMWithLMHeadModel) score exactly what their
runs score on real Tatoeba / PUD sentences, and a folder transformers itself wrote (XLMModel, XLMWithLMHeadModel)
gives transformers' own hidden states."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from ft_helpers import build_runs

from xlp_cli.core.config import from_dict
from xlp_cli.evaluate.run import run as evaluate
from xlp_cli.tasks.retrieval.config import RetrievalConfig
from xlp_cli.tasks.retrieval.encode import load_encoder, sentence_ids, sentence_vectors

pytestmark = [pytest.mark.integration]
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, shared_data):
    from tests.conftest import run_cli

    runs = build_runs(tmp_path_factory.getbasetemp(), shared_data)
    root = tmp_path_factory.mktemp("hf")
    for enc in ("xlp", "additive"):
        r = run_cli("export", "--format", "hf", runs[enc], root / enc)
        assert r.exit_code == 0, r.output
    return runs, root


def _scores(folder, out):
    cfg = from_dict(RetrievalConfig, {"task": "retrieval", "data": [str(folder)], "out": str(out),
                                      "max-sentences": 200, "threads": 1})
    evaluate(cfg)
    res = json.loads((out / "results.json").read_text())
    return res["runs"][0]


@pytest.mark.parametrize("enc,model_type", [("xlp", "xlp"), ("additive", "xlm")])
def test_exported_folder_scores_what_its_run_scores(exported, enc, model_type, tmp_path):
    runs, root = exported
    assert json.loads((root / enc / "config.json").read_text())["model_type"] == model_type
    want, got = _scores(runs[enc], tmp_path / "run"), _scores(root / enc, tmp_path / "hf")
    assert got["name"] == want["name"] == enc and got["layer"] == want["layer"] == 1
    assert set(want["sets"]) == {"tatoeba", "pud"} and want["sets"]["tatoeba"]
    for which, per in want["sets"].items():
        for lang, v in per.items():
            assert got["sets"][which][lang] == pytest.approx(v, abs=1e-9), (which, lang)
    a, b = load_encoder(runs[enc]), load_encoder(root / enc)
    texts = ["Je ne sais pas.", "Où est la gare ?", "Il fait beau aujourd'hui."]
    assert [list(x) for x in sentence_ids(a, texts, "fr")] == [list(x) for x in sentence_ids(b, texts, "fr")]
    np.testing.assert_allclose(sentence_vectors(b, texts, "fr", 1), sentence_vectors(a, texts, "fr", 1), atol=1e-6)


def test_a_folder_transformers_wrote_gives_transformers_hidden_states(exported, tmp_path, cli):
    transformers = pytest.importorskip("transformers")
    runs, root = exported
    hf = transformers.AutoModelForMaskedLM.from_pretrained(root / "additive").eval()
    folders = {k: tmp_path / k for k in ("lm", "base", "sharded", "bin")}
    hf.save_pretrained(folders["lm"])
    hf.transformer.save_pretrained(folders["base"])  # an XLMModel folder: no LM head, no `transformer.` prefix
    hf.save_pretrained(folders["sharded"], max_shard_size="200KB")
    assert (folders["sharded"] / "model.safetensors.index.json").is_file()
    folders["bin"].mkdir()  # what transformers 4 wrote: a state dict pickle (read with weights_only=True)
    shutil.copy(folders["lm"] / "config.json", folders["bin"])
    torch.save(hf.state_dict(), folders["bin"] / "pytorch_model.bin")
    ids = torch.tensor([[1, 40, 41, 42, 43, 1], [1, 50, 51, 1, 2, 2]])
    mask = (ids != 2).long()
    langs = torch.tensor([[1] * 6, [0] * 6])
    with torch.no_grad():
        want = hf.transformer(input_ids=ids, langs=langs, attention_mask=mask, output_hidden_states=True).hidden_states
    for folder in folders.values():
        for f in ("tokenizer", "dict.txt"):
            (shutil.copytree if f == "tokenizer" else shutil.copy)(root / "additive" / f, folder / f)
        enc = load_encoder(folder)
        assert not (folder / "manifest.json").exists() and enc.model.config.lang_encoding == "additive"
        with torch.no_grad():
            for k in range(len(want)):
                got = enc.model(ids, langs, pad_mask=mask == 0, upto=k)
                torch.testing.assert_close(got[mask.bool()], want[k][mask.bool()], atol=1e-5, rtol=1e-5)
    r = cli("evaluate", "--task", "retrieval", "--data", folders["base"], "--sets", "pud", "--max-sentences", "50",
            "--out", tmp_path / "ev")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "ev" / "results.json").read_text())["runs"][0]["sets"]["pud"]["fr"]["pairs"] == 50


def test_folders_that_are_not_models_are_one_line_errors(exported, tmp_path, cli):
    runs, root = exported
    cases = {}
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text('{"model_type": "bert"}')
    cases[bert] = "expected model_type xlm or xlp"
    notok = tmp_path / "notok"
    shutil.copytree(root / "additive", notok, ignore=shutil.ignore_patterns("tokenizer", "dict.txt", "manifest.json",
                                                                           "vocab.json", "merges.txt"))
    cases[notok] = "without a tokenizer xlp runs"
    noweights = tmp_path / "noweights"
    shutil.copytree(root / "xlp", noweights, ignore=shutil.ignore_patterns("model.safetensors"))
    cases[noweights] = "without model.safetensors"
    sinus = tmp_path / "sinus"
    shutil.copytree(root / "additive", sinus)
    conf = json.loads((sinus / "config.json").read_text())
    (sinus / "config.json").write_text(json.dumps({**conf, "sinusoidal_embeddings": True}))
    cases[sinus] = "sinusoidal_embeddings=True has no counterpart"
    pickle = tmp_path / "pickle"  # a pickle with more than tensors in it is never unpickled
    shutil.copytree(root / "additive", pickle, ignore=shutil.ignore_patterns("model.safetensors", "manifest.json"))
    torch.save({"transformer.embeddings.weight": torch.zeros(2), "x": Path("/")}, pickle / "pytorch_model.bin")
    cases[pickle] = "cannot read the weights (UnpicklingError"
    empty = tmp_path / "empty"
    empty.mkdir()
    cases[empty] = "manifest"
    for folder, msg in cases.items():
        r = cli("evaluate", "--task", "retrieval", "--data", folder, "--out", tmp_path / f"o_{folder.name}")
        assert r.exit_code == 2, (folder.name, r.output)
        assert msg in r.output and "Traceback" not in r.output, (folder.name, r.output)
        assert len(r.output.strip().splitlines()) == 1, r.output
        assert not (tmp_path / f"o_{folder.name}" / "results.json").exists()


def test_xtreme_report_reads_hf_folders(exported, tmp_path, cli):
    from xlp_cli.tasks.xtreme import sort_inputs

    runs, root = exported
    bare = tmp_path / "bare"  # an HF folder without xlp's manifest
    shutil.copytree(root / "additive", bare, ignore=shutil.ignore_patterns("manifest.json"))
    found = sort_inputs([runs["xlp"], root / "xlp", bare], [])
    assert found.pretrain == {runs["xlp"].resolve(): "xlp", (root / "xlp").resolve(): "xlp", bare.resolve(): "additive"}
    r = cli("evaluate", "--task", "xtreme", "--data", runs["xlp"], "--data", root / "xlp", "--name", "run,export",
            "--sets", "pud", "--lang", "fr", "--max-sentences", "50", "--threads", "1", "--out", tmp_path / "x")
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "x" / "results.json").read_text())
    per = {f["name"]: f["sets"]["pud"]["fr"] for f in res["retrieval_runs"]}
    assert per["run"] == per["export"] and per["run"]["pairs"] == 50


@pytest.fixture(scope="module")
def xlm15_tokenizer(tmp_path_factory, shared_data):
    """XLM-15's released BPE (codes_xnli_15, the first 95,000 entries of vocab_xnli_15) in XLMTokenizer's files:
    vocab.json with `</w>` on word-final tokens, merges.txt with a `#version` header and no counts."""
    from xlp_cli.bpe.dictionary import Dictionary
    from xlp_cli.export.hf_tokenizer import hf_token

    src = shared_data / "xlm_bpe_xnli15"
    if not (src / "codes_xnli_15").is_file():
        pytest.skip(f"XLM-15 BPE not found at {src}")
    out = tmp_path_factory.mktemp("xlm15tok")
    dico = Dictionary.read(src / "vocab_xnli_15", max_vocab=95000)
    vocab = {w if i < 14 else hf_token(w): i for i, w in enumerate(dico.words)}
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    codes = (src / "codes_xnli_15").read_text(encoding="utf-8").split("\n")
    (out / "merges.txt").write_text("#version: 0.2\n" + "".join(" ".join(c.split(" ")[:2]) + "\n" for c in codes if c),
                                    encoding="utf-8")
    return src, out, dico


def test_xlm_tokenizer_files_give_xlms_pipeline_and_transformers_ids(xlm15_tokenizer, shared_data):
    """vocab.json + merges.txt read back give the ids of XLM's chain with the released codes (every language), and
    XLMTokenizer's own ids where its sacremoses steps agree with Moses perl (English, Arabic)."""
    transformers = pytest.importorskip("transformers")
    from xlp_cli.bpe import hf_xlm_vocab
    from xlp_cli.bpe.codes import BpeCodec
    from xlp_cli.bpe.encoder import TextEncoder
    from xlp_cli.bpe.tokenizer import Tokenizer
    from xlp_cli.tasks.retrieval import data as rd
    from xlp_cli.text.pipeline import TextPipeline

    src, folder, dico = xlm15_tokenizer
    got = hf_xlm_vocab.text_encoder(folder)
    direct = TextEncoder(TextPipeline(tokenize="xlm", lowercase="xlm"), Tokenizer("fastbpe", dico, BpeCodec(src / "codes_xnli_15")))
    hf = transformers.XLMTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    for lang in ("fr", "ru", "zh", "th", "ar", "hi"):
        pairs = rd.tatoeba(shared_data / "tatoeba_laser", lang, 100)
        for texts, tl in ((pairs.xx, lang), (pairs.en, "en")):
            ids = [list(x) for x in got.encode_batch(texts, tl)]
            assert ids == [list(x) for x in direct.encode_batch(texts, tl)], lang
            if tl in ("en", "ar"):
                assert ids == [hf.encode(t, lang=tl, add_special_tokens=False) for t in texts], tl


def test_a_stock_xlm_checkpoint_folder_with_xlm_tokenizer_files(xlm15_tokenizer, tmp_path, cli):
    transformers = pytest.importorskip("transformers")
    _, tok, dico = xlm15_tokenizer
    langs = ["ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh"]
    conf = transformers.XLMConfig(vocab_size=len(dico), emb_dim=32, n_layers=2, n_heads=2, n_langs=15,
                                  lang2id={l: i for i, l in enumerate(langs)}, id2lang=dict(enumerate(langs)),
                                  max_position_embeddings=128)
    torch.manual_seed(0)
    folder = tmp_path / "xlm"
    transformers.XLMWithLMHeadModel(conf).save_pretrained(folder)
    for f in ("vocab.json", "merges.txt"):
        shutil.copy(tok / f, folder / f)
    (folder / "tokenizer_config.json").write_text('{"do_lowercase_and_remove_accent": true}')
    enc = load_encoder(folder)
    assert enc.langs == langs and enc.model.config.lang_encoding == "additive" and enc.layer(-1) == 1
    r = cli("evaluate", "--task", "retrieval", "--data", folder, "--lang", "fr,de", "--sets", "tatoeba",
            "--max-sentences", "30", "--threads", "1", "--out", tmp_path / "ev")
    assert r.exit_code == 0, r.output
    got = json.loads((tmp_path / "ev" / "results.json").read_text())["runs"][0]
    assert got["name"] == "additive" and {l: v["pairs"] for l, v in got["sets"]["tatoeba"].items()} == {"fr": 30, "de": 30}
