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

from xlp_cli.artifacts.files import sha256_file  # noqa: E402
from xlp_cli.artifacts import layout  # noqa: E402
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
    return build_chain(tmp_path_factory.mktemp("export"))


def build_chain(root: Path) -> Path:
    """prepare (en, fr fixtures) -> bpe learn/apply -> a 3-step additive `xlp pretrain`, all under `root`."""
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
    rows = [pq.read_table(next(layout.read_dir(root / "ids", "train", lg).glob("part-*.parquet"))).column("ids")[0].as_py()[:12]
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
    keep = ~pad
    assert got.shape == want.shape and conf["vocab_size"] == xlp.config.vocab_size  # the model's vocabulary, no more
    print(f"{name}: max |logit difference| {float((got[keep] - want[keep]).abs().max()):.2e}")
    torch.testing.assert_close(got[keep], want[keep], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_hidden[keep], hidden[keep], atol=1e-5, rtol=1e-5)


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
