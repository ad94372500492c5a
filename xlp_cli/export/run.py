"""`xlp export --format hf RUN OUT`: write a pre-trained run as a Hugging Face transformers folder.

    OUT/config.json, OUT/model.safetensors     stock `XLMWithLMHeadModel` (none/additive encodings, XLM's shape),
                                               or `XlpForMaskedLM` + OUT/modeling_xlp.py (trust_remote_code)
    OUT/tokenizer_config.json                  AutoTokenizer: the stock XLMTokenizer (fastBPE runs) and, through
    OUT/tokenization_xlp.py                    `auto_map`, XlpTokenizer (trust_remote_code: xlp's exact ids)
    OUT/vocab.json, OUT/merges.txt             XLMTokenizer's files (fastBPE runs): dict.txt's ids, the model's
    OUT/tokenizer/, OUT/dict.txt               xlp's own tokenizer (the whole text pipeline: TextEncoder.load(OUT))
    OUT/README.md                              how to load it and what the stock XLMTokenizer does not reproduce
    OUT/manifest.json                          stage "export", last

Every file is written to a temporary name and renamed; the manifest comes last (docs/export.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from xlp_cli.artifacts import outdir
from xlp_cli.artifacts.files import atomic_path, sha256_file, write_json_atomic, write_text_atomic
from xlp_cli.artifacts.manifest import new_manifest, read_manifest, write_manifest
from xlp_cli.artifacts.shards import MANIFEST
from xlp_cli.bpe.encoder import TextEncoder
from xlp_cli.core import ui
from xlp_cli.core.config import to_dict
from xlp_cli.core.errors import BadInput
from xlp_cli.export import hf_remote, hf_tokenizer, hf_xlm
from xlp_cli.export.config import ExportConfig
from xlp_cli.models import checkpoint as ckpt

STAGE = "export"
OWNS = ("config.json", "model.safetensors", "modeling_xlp.py", "tokenizer.json", "tokenizer_config.json",
        "tokenization_xlp.py", "vocab.json", "merges.txt", "tokenizer", "dict.txt", "README.md")


def _load(run: Path, which: str) -> tuple[Any, Path, dict[str, Any]]:
    manifest = read_manifest(run, stage="pretrain")
    folder = ckpt.checkpoint_dir(run, which)
    model = ckpt.load_model(folder)
    if getattr(model, "KIND", "") != "encoder":
        raise BadInput(f"export writes pre-trained encoders; this checkpoint holds a {model.KIND} model", path=folder)
    return model.eval(), folder, manifest


def _write_weights(path: Path, tensors: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "pt"})


def _readme(stock: bool, reason: str | None, langs: list[str], notes: list[str], has_stock_tokenizer: bool) -> str:
    remote = "" if stock else ", trust_remote_code=True"
    load = ("from transformers import AutoModelForMaskedLM, AutoTokenizer\n"
            f"model = AutoModelForMaskedLM.from_pretrained(FOLDER{remote})\n"
            "tok = AutoTokenizer.from_pretrained(FOLDER, trust_remote_code=True)   # xlp's exact ids; needs xlp\n"
            f"logits = model(**tok(\"A sentence.\", lang=\"{langs[0] if langs else 'en'}\", return_tensors=\"pt\")).logits")
    lines = ["# xlp model (written by `xlp export --format hf`)", "",
             ("A stock transformers `XLMWithLMHeadModel`: no remote code." if stock else
              f"`XlpForMaskedLM` from `modeling_xlp.py` (load with `trust_remote_code=True`): {reason}."), "",
             "```python", load, "```", "",
             f"Languages (the `langs` input: one index per sentence or per token): {', '.join(f'{i}={l}' for i, l in enumerate(langs))}.",
             "Sentences are `</s> tokens </s>` (id 1 at both ends), padding id 2 with `attention_mask` 0.",
             ("A multilingual model needs `langs`: XlpTokenizer returns it; "
              + ("without it transformers' XLM adds no language embedding (different logits)."
                 if stock else "without it the model raises an error.")) if len(langs) > 1 else "", "",
             "Tokenizers (one vocabulary, dict.txt's, the model's):",
             "- `XlpTokenizer` (`tokenization_xlp.py`, `trust_remote_code=True`): xlp's own text pipeline from "
             "`tokenizer/` + `dict.txt`, the ids xlp gives on raw text; it imports xlp (`pip install xlp`). "
             f"`lang=` picks the language (default `{langs[0] if langs else 'en'}`) and fills the `langs` output.", ""]
    if has_stock_tokenizer:
        lines += ["- the stock `XLMTokenizer` (`vocab.json`, `merges.txt`; no remote code) does not reproduce:",
                  *[f"  - {n}" for n in notes], ""]
    else:
        lines += ["- no stock tokenizer: " + notes[0], ""]
    return "\n".join(lines)


@outdir.scoped
def run(cfg: ExportConfig) -> dict[str, Any]:
    run_dir, out = Path(cfg.data[0]), Path(cfg.out)
    model, ckpt_dir, run_m = _load(run_dir, cfg.which)
    mcfg = model.config
    reason = "--remote-code was given" if cfg.remote_code else hf_xlm.why_not(mcfg)
    stock = reason is None
    unexpressed = None if stock else hf_remote.why_not(mcfg)
    if unexpressed:
        raise BadInput(f"this model cannot be exported: {reason}, and {unexpressed}", path=run_dir)
    encoder = TextEncoder.from_folder(run_dir)
    config = {k: v for k, v in to_dict(cfg).items() if k not in ("force", "paths", "out")}
    config["checkpoint-sha256"] = sha256_file(ckpt_dir / "model.safetensors")
    previous = outdir.guard_out_dir(out, STAGE, config, force=cfg.force, owns=OWNS)
    if previous and previous.get("complete"):
        ui.info(f"{out}: already exported from this checkpoint; nothing to do")
        return dict(previous["summary"], skipped=True)

    langs = list(mcfg.langs)
    kind = hf_xlm if stock else hf_remote
    if len(encoder.dictionary) != mcfg.vocab_size:
        raise BadInput(f"the run's dictionary has {len(encoder.dictionary)} entries, its model {mcfg.vocab_size}",
                       path=run_dir)
    _write_weights(out / "model.safetensors", kind.state_dict(model))
    if not stock:
        with atomic_path(out / "modeling_xlp.py") as tmp:
            shutil.copyfile(hf_remote.MODELING, tmp)
    has_stock_tokenizer, notes = hf_tokenizer.write(out, encoder, langs, mcfg.n_positions)
    write_text_atomic(out / "README.md", _readme(stock, reason, langs, notes, has_stock_tokenizer))
    write_json_atomic(out / "config.json", kind.config_json(mcfg, langs))  # last of the HF files

    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()
                   and not p.name.startswith(".") and p.name != MANIFEST)
    summary = {"out": str(out), "format": cfg.format,
               "model_class": "XLMWithLMHeadModel" if stock else "XlpForMaskedLM (trust_remote_code)",
               "remote_code_because": reason, "lang_encoding": mcfg.lang_encoding, "langs": ",".join(langs),
               "stock_tokenizer": "XLMTokenizer" if has_stock_tokenizer else None,
               "remote_tokenizer": "XlpTokenizer", "vocab_size": mcfg.vocab_size, "checkpoint": str(ckpt_dir)}
    manifest = new_manifest(
        STAGE, config, upstream=[{"path": str(run_dir.resolve()), "stage": "pretrain",
                                  "config_hash": run_m.get("config_hash")}],
        outputs={f: {"sha256": sha256_file(out / f)} for f in files},
        stock_tokenizer_differs=notes, summary=summary, complete=True)
    write_manifest(out, manifest)
    return summary
