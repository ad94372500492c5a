"""`xlp export --format hf`: every encoding round-trips into transformers with the xlp model's logits.

A real chain on the unit fixtures (two `xlp prepare` folders merged by `xlp bpe learn/apply`), one real tiny
`xlp pretrain` run (additive), and checkpoints of every encoding of the registry (and of the variants below)
written through the one checkpoint layout with every weight perturbed (so an identity-initialised XLP projection
cannot hide a wrong mapping).
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from tests.conftest import FIXTURES, run_cli

os.environ.setdefault("HF_HUB_OFFLINE", "1")
if "transformers" not in sys.modules:  # remote code is copied here, not into ~/.cache
    _modules = tempfile.mkdtemp(prefix="xlp-hf-modules-")
    atexit.register(shutil.rmtree, _modules, True)
    os.environ.setdefault("HF_MODULES_CACHE", _modules)
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from xlp_cli.artifacts.files import sha256_file  # noqa: E402
from xlp_cli.artifacts.manifest import new_manifest, read_manifest, write_manifest  # noqa: E402
from xlp_cli.bpe.dictionary import Dictionary  # noqa: E402
from xlp_cli.export import hf_remote  # noqa: E402
from xlp_cli.models import checkpoint as ckpt  # noqa: E402
from xlp_cli.models.encoder import ModelConfig, TransformerEncoder  # noqa: E402
from xlp_cli.models.encoding_registry import ENCODING_NAMES, ENCODINGS, spec as encoding_spec  # noqa: E402

LANGS = ["en", "fr"]
SHAPE = {"n_layers": 2, "d_model": 32, "n_heads": 2, "d_ff": 128, "n_positions": 64}  # d_ff = 4 d: XLM's
# Every registered encoding with its default options, then the variants export must also get right:
# name -> (encoding, options, ModelConfig fields that differ from SHAPE)
VARIANTS = {
    "additive-pretrained": ("additive", {}, {}),                    # the real `xlp pretrain` run
    "additive-dff": ("additive", {}, {"d_ff": 64}),                 # d_ff != 4 d: XLM cannot express it -> remote code
    "vle-padding": ("vle", {"vle_style": "padding"}, {}),
    "additive-veco": ("additive", {}, {"cross_attention": True}),   # a VECO encoder exports its plain stream
    "additive-1lang": ("additive", {}, {"langs": LANGS[:1]}),       # its one language vector is folded into the positions
    "none-preln": ("none", {}, {"pre_ln": True}),                   # pre-LN: XLM's layers are post-LN -> remote code
}
CASES = {**{name: (name, {}, {}) for name in ENCODING_NAMES}, **VARIANTS}


def _stock(name: str) -> bool:
    """Whether transformers' stock XLM expresses the case (docs/export.md): an `hf_xlm` encoding, post-LN layers,
    d_ff = 4 * d_model."""
    encoding, _, fields = CASES[name]
    shape = {**SHAPE, **fields}
    return encoding_spec(encoding).hf_xlm and not shape.get("pre_ln") and shape["d_ff"] == 4 * shape["d_model"]


def _modeling():
    """export/modeling_xlp.py, the model copied into exports (loaded from its file: xlp never imports it)."""
    spec = importlib.util.spec_from_file_location("xlp_export_modeling", hf_remote.MODELING)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    for lang in LANGS:
        r = run_cli("prepare", "--source", "text", "--lang", lang, FIXTURES / "prepare" / f"news.{lang}.txt",
                    "--out", root / f"prep_{lang}", "--valid-fraction", "0", "--test-fraction", "0")
        assert r.exit_code == 0, r.output
    data = ["--data", root / "prep_en", "--data", root / "prep_fr"]
    r = run_cli("bpe", "learn", *data, "--codes", "300", "--out", root / "bpe")
    assert r.exit_code == 0, r.output
    r = run_cli("bpe", "apply", *data, "--data", root / "bpe", "--out", root / "ids")
    assert r.exit_code == 0, r.output
    r = run_cli("pretrain", "--data", root / "ids", "--lang", "en,fr", "--lang-encoding", "additive", "--preset", "tiny",
                "--d-ff", "128", "--max-steps", "3", "--warmup", "0", "--batch-size", "4", "--bptt", "32",
                "--accumulate", "1", "--eval-every", "3", "--eval-batches", "1", "--device", "cpu",
                "--out", root / "run_additive-pretrained")
    assert r.exit_code == 0, r.output
    return root


def _hand_run(root: Path, name: str) -> Path:
    """A run folder of encoding `name` through the real checkpoint layout, every weight perturbed."""
    run = root / f"run_{name}"
    if run.is_dir():
        return run
    encoding, opts, fields = CASES[name]
    spec = encoding_spec(encoding)
    options = {**spec.options_from({}), **opts}
    shape = {"langs": LANGS, **SHAPE, **fields}
    vocab_ids = None
    if spec.vocab_k_option:  # built from `xlp vocab-score`'s top-K ids: K = 5 made-up ids of each language
        options[spec.vocab_k_option] = 5
        vocab_ids = [list(range(14 + 6 * i, 19 + 6 * i)) for i in range(len(shape["langs"]))]
    dico = Dictionary.read(root / "ids" / "dict.txt")
    cfg = ModelConfig(vocab_size=len(dico), lang_encoding=encoding, encoding_options=options, **shape)
    torch.manual_seed(len(name))
    model = TransformerEncoder(cfg, vocab_ids)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    ckpt.save(run / "checkpoints" / "best", model, {"step": 1})
    up = [{"path": str((root / "ids").resolve()), "stage": "bpe-apply"}]
    write_manifest(run, new_manifest("pretrain", {"hand": name}, upstream=up))
    return run


def _batch(root: Path):
    """Two real sentences of the fixture (en, fr) as ids with </s> at both ends, padded, and their languages."""
    rows = [pq.read_table(next((root / "ids" / "train" / lg).glob("part-*.parquet"))).column("ids")[0].as_py()[:12]
            for lg in LANGS]
    seqs = [[1] + r + [1] for r in rows]
    t = max(map(len, seqs))
    ids = torch.full((2, t), 2, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    pad = ids == 2
    langs = torch.tensor([[0] * t, [1] * t])
    return ids, langs, pad


def test_every_registered_encoding_has_its_twin_in_the_exported_model():
    """A new encoding is a class in models/encodings.py and a registry line, and its twin in export/modeling_xlp.py
    (the trust_remote_code model, which cannot import xlp), unless its registry line says hf_remote=False."""
    twins = set(_modeling().ENCODINGS)
    remote = [n for n in ENCODING_NAMES if encoding_spec(n).hf_remote]
    missing = [n for n in remote if n not in twins]
    assert not missing, (f"export/modeling_xlp.py has no twin of the encoding {', '.join(missing)}: add one to its "
                         f"ENCODINGS, or say hf_remote=False in its registry line (`xlp export` then refuses it)")
    assert twins <= set(remote), f"export/modeling_xlp.py has twins of {sorted(twins - set(remote))}: not exported that way"


def test_export_refuses_an_encoding_without_a_twin(chain, tmp_path, monkeypatch):
    monkeypatch.setitem(ENCODINGS, "attaching", dataclasses.replace(ENCODINGS["attaching"], hf_remote=False))
    r = run_cli("export", "--format", "hf", _hand_run(chain, "attaching"), tmp_path / "x")
    assert r.exit_code == 2 and "no twin of the attaching encoding" in r.output, r.output
    assert not (tmp_path / "x" / "model.safetensors").exists()


@pytest.mark.parametrize("name", list(CASES))
def test_hf_round_trip_gives_the_xlp_logits(chain, name):
    run = chain / f"run_{name}" if name == "additive-pretrained" else _hand_run(chain, name)
    out = chain / f"hf_{name}"
    r = run_cli("export", "--format", "hf", run, out)
    stock = _stock(name)
    if not stock and not encoding_spec(CASES[name][0]).hf_remote:  # neither kind expresses it: refused
        assert r.exit_code == 2 and "no twin" in r.output, r.output
        return
    assert r.exit_code == 0, r.output
    conf = json.loads((out / "config.json").read_text())
    assert conf["model_type"] == ("xlm" if stock else "xlp")
    assert (out / "modeling_xlp.py").is_file() != stock

    xlp = ckpt.load_pretrained(run)
    ids, langs, pad = _batch(chain)
    langs = langs.clamp(max=len(xlp.config.langs) - 1)
    with torch.no_grad():
        hidden = xlp.token_states(xlp(ids, langs, pad_mask=pad))
        want = xlp.mlm_logits(hidden)
        kw = {} if stock else {"trust_remote_code": True}
        hf = transformers.AutoModelForMaskedLM.from_pretrained(out, **kw).eval()
        base = transformers.AutoModel.from_pretrained(out, **kw).eval()
        assert type(hf).__name__ == ("XLMWithLMHeadModel" if stock else "XlpForMaskedLM")
        got = hf(input_ids=ids, langs=langs, attention_mask=(~pad).long()).logits
        got_hidden = base(input_ids=ids, langs=langs, attention_mask=(~pad).long()).last_hidden_state
    keep, v = ~pad, want.shape[-1]
    extra = conf["vocab_size"] - v  # merge results tokenizer.json needs beyond dict.txt: never predicted
    assert got.shape == (*want.shape[:2], v + extra)
    print(f"{name}: max |logit difference| {float((got[keep][:, :v] - want[keep]).abs().max()):.2e}")
    torch.testing.assert_close(got[keep][:, :v], want[keep], atol=1e-5, rtol=1e-5)
    assert extra >= 0 and bool((got[keep][:, v:] < -1e3).all())
    torch.testing.assert_close(got_hidden[keep], hidden[keep], atol=1e-5, rtol=1e-5)


def _hf_tokens(subwords: str) -> list[str]:
    """fastBPE's `hel@@ lo` as the BPE model's tokens `hel`, `lo</w>`."""
    return [t[:-2] if t.endswith("@@") else t + "</w>" for t in subwords.split()]


def test_tokenizer_json_gives_the_ids_of_bpe_apply(chain):
    """tokenizer.json = fastBPE's merges + XLM's ids. It equals `xlp bpe apply` on every sentence that fastBPE's
    vocab limit leaves alone, and fastBPE without the limit on every sentence (the limit is not expressible)."""
    from xlp_cli.bpe.codes import BpeCodec

    out = chain / "hf_none"
    if not (out / "tokenizer.json").is_file():
        assert run_cli("export", "--format", "hf", _hand_run(chain, "none"), out).exit_code == 0
    tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    auto = transformers.AutoTokenizer.from_pretrained(out)
    unlimited = BpeCodec(chain / "ids" / "codes", None)
    limited = BpeCodec(chain / "ids" / "codes", chain / "ids" / "vocab")
    n = same = untouched = 0
    v = len((chain / "ids" / "dict.txt").read_text(encoding="utf-8").splitlines()) + 14
    for lg in LANGS:
        prep = {}
        for p in (chain / f"prep_{lg}" / "train" / lg).glob("part-*.parquet"):
            t = pq.read_table(p, columns=["id", "text"]).to_pydict()
            prep.update(zip(t["id"], t["text"]))
        for shard in sorted((chain / "ids" / "train" / lg).glob("part-*.parquet")):
            t = pq.read_table(shard, columns=["id", "ids"]).to_pydict()
            for rid, ids in zip(t["id"], t["ids"]):
                text = prep[rid]
                enc = tok.encode(text)
                as_xlp = [i if i < v else 3 for i in enc.ids]  # ids after dict.txt's are <unk> rows of the model
                n += 1
                assert enc.tokens == ["</s>", *_hf_tokens(unlimited.apply_lines([text])[0]), "</s>"]
                if unlimited.apply_lines([text]) == limited.apply_lines([text]):
                    untouched += 1
                    assert as_xlp == [1] + ids + [1], text
                same += as_xlp == [1] + ids + [1]
    assert n > 20 and untouched > n // 2
    print(f"tokenizer.json == xlp bpe apply on {same}/{n} sentences; vocab limit untouched on {untouched}/{n}")
    assert auto(text)["input_ids"] == tok.encode(text).ids
    assert auto.mask_token_id == 5 and auto.pad_token_id == 2
    assert "Moses" in (out / "README.md").read_text()


def test_export_refuses_what_is_not_a_pretrain_run_and_resumes(chain, tmp_path):
    r = run_cli("export", "--format", "hf", chain / "ids", tmp_path / "x")
    assert r.exit_code == 2 and "expected the output of `xlp pretrain`" in r.output
    assert len(r.output.strip().splitlines()) == 1
    r = run_cli("export", "--format", "hf", "--data", chain / "ids", "--data", chain / "bpe", "--out", tmp_path / "y")
    assert r.exit_code == 2 and "one run" in r.output
    run = _hand_run(chain, "none")
    r1 = run_cli("export", "--format", "hf", "--data", run, "--out", tmp_path / "z", "--json")
    r2 = run_cli("export", "--format", "hf", run, tmp_path / "z", "--json")
    assert r1.exit_code == r2.exit_code == 0
    assert json.loads(r2.stdout)["skipped"] is True
    m = read_manifest(tmp_path / "z", stage="export")
    assert m["outputs"]["model.safetensors"]["sha256"] == sha256_file(tmp_path / "z" / "model.safetensors")
    assert np.all([not p.name.startswith(".") or p.name.startswith(".xlp") for p in (tmp_path / "z").iterdir()])


@pytest.mark.integration
def test_tokenizer_json_of_xlm15_bpe_on_real_sentences(shared_data):
    """XLM-15's released BPE (codes_xnli_15, vocab_xnli_15, max_vocab 95000) on 300 real Multi30k sentences per
    language: tokenizer.json, fed Moses-tokenized *cased* text (its normalizer does `--lowercase xlm`), gives xlp's
    ids wherever fastBPE's vocab limit does not split a subword again; the agreement rate is printed."""
    import gzip

    from xlp_cli.bpe.codes import BpeCodec
    from xlp_cli.export import hf_tokenizer
    from xlp_cli.text.pipeline import TextPipeline

    codes, vocab = shared_data / "xlm_bpe_xnli15" / "codes_xnli_15", shared_data / "xlm_bpe_xnli15" / "vocab_xnli_15"
    dico = Dictionary.read(vocab, max_vocab=95000)
    spec, notes, extra = hf_tokenizer.build(codes, list(dico.words), "xlm")
    tok = tokenizers.Tokenizer.from_str(json.dumps(spec))
    limited, unlimited = BpeCodec(codes, vocab), BpeCodec(codes, None)
    cased = TextPipeline.from_config({"clean": True, "normalize": True, "tokenize": "moses", "lowercase": "none"})
    lower = TextPipeline.from_config({"clean": True, "normalize": True, "tokenize": "moses", "lowercase": "xlm"})
    n = same = untouched = 0
    for lang in ("en", "de", "fr"):
        with gzip.open(shared_data / "multi30k" / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8") as f:
            raw = [cased.raw(next(f).rstrip("\n")) for _ in range(300)]
        want_text = lower.process_batch(raw, lang)
        subs, flat, offsets = limited.encode_lines(want_text, dico.index, 3)
        got = tok.encode_batch(cased.process_batch(raw, lang))
        for i, enc in enumerate(got):
            want = [1, *flat[offsets[i]: offsets[i + 1]].tolist(), 1]
            as_xlp = [t if t < len(dico) else 3 for t in enc.ids]
            n += 1
            same += as_xlp == want
            if unlimited.apply_lines([want_text[i]]) == [subs[i]]:
                untouched += 1
                assert as_xlp == want, want_text[i]
    print(f"XLM-15 BPE, Multi30k en/de/fr: tokenizer.json == xlp on {same}/{n} sentences "
          f"({untouched} untouched by the vocab limit); {extra} merge results added after dict.txt")
    assert untouched > 0.9 * n
