"""`xlp export --format hf RUN OUT`: write a pre-trained run as a Hugging Face transformers folder.

    OUT/config.json, OUT/model.safetensors     stock `XLMWithLMHeadModel` (none/additive encodings, XLM's shape),
                                               or `XlpForMaskedLM` + OUT/modeling_xlp.py (trust_remote_code)
    OUT/tokenizer.json, tokenizer_config.json  fastBPE runs: BPE with XLM's vocabulary and special ids
    OUT/tokenizer/, OUT/dict.txt               xlp's own tokenizer (the whole text pipeline: TextEncoder.load(OUT))
    OUT/README.md                              how to load it and what tokenizer.json does not express
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
        "tokenizer", "dict.txt", "README.md")


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


def _readme(stock: bool, reason: str | None, langs: list[str], notes: list[str], has_tokenizer: bool) -> str:
    load = ("from transformers import AutoModelForMaskedLM\n"
            f"model = AutoModelForMaskedLM.from_pretrained(FOLDER{'' if stock else ', trust_remote_code=True'})")
    lines = ["# xlp model (written by `xlp export --format hf`)", "",
             ("A stock transformers `XLMWithLMHeadModel`: no remote code." if stock else
              f"`XlpForMaskedLM` from `modeling_xlp.py` (load with `trust_remote_code=True`): {reason}."), "",
             "```python", load, "```", "",
             f"Languages (the `langs` input: one index per sentence or per token): {', '.join(f'{i}={l}' for i, l in enumerate(langs))}.",
             "Sentences are `</s> tokens </s>` (id 1 at both ends), padding id 2 with `attention_mask` 0.", ""]
    if has_tokenizer:
        lines += ["`tokenizer.json` does not express:", *[f"- {n}" for n in notes], ""]
    else:
        lines += ["No `tokenizer.json`: " + notes[0], ""]
    lines += ["`tokenizer/` and `dict.txt` hold xlp's own tokenizer: `xlp_cli.bpe.encoder.TextEncoder.load(FOLDER)` "
              "runs the whole text pipeline (Moses steps included).", ""]
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
    has_tokenizer, extra = encoder.tokenizer.kind == "fastbpe", 0
    if has_tokenizer:
        if len(encoder.dictionary) != mcfg.vocab_size:
            raise BadInput(f"the run's dictionary has {len(encoder.dictionary)} entries, its model {mcfg.vocab_size}",
                           path=run_dir)
        tok, notes, extra = hf_tokenizer.build(encoder.files["codes"], list(encoder.dictionary.words),
                                               encoder.pipeline.lowercase)
    else:
        notes = [f"the run's tokenizer is {encoder.tokenizer.kind}; xlp writes tokenizer.json for fastBPE runs only"]
    tensors = kind.state_dict(model)
    hf_tokenizer.extra_rows(tensors, *kind.VOCAB_TENSORS, extra)
    _write_weights(out / "model.safetensors", tensors)
    if not stock:
        with atomic_path(out / "modeling_xlp.py") as tmp:
            shutil.copyfile(hf_remote.MODELING, tmp)
    encoder.save(out)  # tokenizer/ + dict.txt: xlp's own pipeline
    if has_tokenizer:
        write_json_atomic(out / "tokenizer.json", tok)
        write_json_atomic(out / "tokenizer_config.json", hf_tokenizer.tokenizer_config(langs))
    write_text_atomic(out / "README.md", _readme(stock, reason, langs, notes, has_tokenizer))
    config_json = dict(kind.config_json(mcfg, langs), vocab_size=mcfg.vocab_size + extra, xlp_dictionary_size=mcfg.vocab_size)
    write_json_atomic(out / "config.json", config_json)  # last of the HF files

    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()
                   and not p.name.startswith(".") and p.name != MANIFEST)
    summary = {"out": str(out), "format": cfg.format,
               "model_class": "XLMWithLMHeadModel" if stock else "XlpForMaskedLM (trust_remote_code)",
               "remote_code_because": reason, "lang_encoding": mcfg.lang_encoding, "langs": ",".join(langs),
               "tokenizer_json": has_tokenizer, "extra_rows": extra, "checkpoint": str(ckpt_dir)}
    manifest = new_manifest(
        STAGE, config, upstream=[{"path": str(run_dir.resolve()), "stage": "pretrain",
                                  "config_hash": run_m.get("config_hash")}],
        outputs={f: {"sha256": sha256_file(out / f)} for f in files},
        tokenizer_not_expressed=notes, summary=summary, complete=True)
    write_manifest(out, manifest)
    return summary
