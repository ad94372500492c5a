"""VECO plug-in pairs from machine translation (`--veco plug-in --plug-in-pairs translated`, the default).

The paper's plug-in fine-tuning (VECO 3.1, translate-train) pairs each example with a *machine* translation. xlp
translates each example x (premise and hypothesis) into `--plug-in-lang` with an `xlp finetune --task
translation` run (`--plug-in-translator`; its first seed's best checkpoint, greedy search, the run's own text
pipeline) and uses that translation as y, in training, selection and test alike. The translations are written to
`FT/plug_in_pairs/<set>.<x>-<y>.jsonl` (one {"id", "premise", "hypothesis"} per example) and read back when a
run resumes with the same examples. `--plug-in-pairs oracle` pairs x with the human XNLI example of the same
index instead: an upper bound, not the paper's setting (see docs/veco.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import torch

from xlp_cli.artifacts.files import write_text_atomic
from xlp_cli.artifacts.special_ids import UNK
from xlp_cli.bpe.encoder import TextEncoder
from xlp_cli.core import textfile, ui
from xlp_cli.core.errors import BadInput
from xlp_cli.tasks.translation.decode import resolve_run, translate_ids
from xlp_cli.tasks.translation.finetune import load_translation_model
from xlp_cli.tasks.xnli import data as xd


class Translator:
    """Raw text in one language -> raw text in another, with a translation run's first seed (greedy)."""

    def __init__(self, run: Path, device: torch.device, batch_size: int = 64):
        root, self.seed_dir = resolve_run(Path(run), -1)
        self.codec = TextEncoder.load(root)
        self.model = load_translation_model(self.seed_dir, "best", device)
        self.device, self.batch_size = device, batch_size
        self.langs = list(self.model.config.langs)

    def check(self, src: str, tgt: str) -> None:
        for lang in (src, tgt):
            if lang not in self.langs:
                raise BadInput(f"--plug-in-translator knows {', '.join(self.langs)}, not {lang!r} (needed to "
                               f"translate {src} into {tgt})", path=self.seed_dir)

    def __call__(self, texts: list[str], src: str, tgt: str) -> list[str]:
        self.check(src, tgt)
        limit = self.model.max_source_len() - 1
        ids = [s.tolist()[:limit] or [UNK] for s in self.codec.encode_batch(texts, src)]
        with torch.no_grad():
            hyps = translate_ids(self.model, ids, self.langs.index(src), self.langs.index(tgt), self.device, beam=1,
                                 length_penalty=1.0, batch_size=self.batch_size)
        return [self.codec.to_text(h, tgt) for h in hyps]


def translated(rows: list[xd.Example], src: str, tgt: str, translate: Translator, cache: Path) -> list[xd.Example]:
    """y for every x of `rows`: x's premise and hypothesis translated from `src` into `tgt` (label and key kept)."""
    key = hashlib.sha256("".join(f"{e.id}\t{e.premise}\t{e.hypothesis}\n" for e in rows).encode("utf-8")).hexdigest()
    path = cache.with_name(f"{cache.name}.{src}-{tgt}.jsonl")
    done = None
    if path.is_file():
        lines = [v for _, v in textfile.json_lines(path)]
        if lines and lines[0].get("rows_sha256") == key and len(lines) == len(rows) + 1:
            done = lines[1:]
    if done is None:
        ui.info(f"xnli plug-in: translating {len(rows)} {src} examples into {tgt} ({translate.seed_dir})")
        premises = translate([e.premise for e in rows], src, tgt)
        hypotheses = translate([e.hypothesis for e in rows], src, tgt)
        done = [{"id": e.id, "premise": p, "hypothesis": h} for e, p, h in zip(rows, premises, hypotheses)]
        body = [json.dumps({"rows_sha256": key, "translator": str(translate.seed_dir)})]
        body += [json.dumps(d, ensure_ascii=False) for d in done]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, "\n".join(body) + "\n")
    return [replace(e, id=f"{e.id}-mt-{tgt}", lang=tgt, premise=d["premise"], hypothesis=d["hypothesis"],
                    premise_lang="") for e, d in zip(rows, done)]
