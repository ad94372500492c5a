"""`xlp translate`: translate raw text with a model from `xlp finetune --task translation`.

    echo "Ein Hund rennt im Schnee." | xlp translate --model FT --src-lang de --tgt-lang en
    xlp translate input.de --model FT --src-lang de --output out.en --beam 5 --length-penalty 1.2

Each line goes through the run's own text pipeline and BPE (FT/tokenizer), is decoded with batched beam
search (or greedy), then BPE is undone and the Moses detokenizer for the target language is applied.
Output lines keep the input order. An empty line, an unknown language or an unreadable input is a one-line
error; a line longer than the model's positions is truncated with a warning (or refused: --overflow fail).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from xlp_cli.artifacts import safe_output
from xlp_cli.bpe.encoder import TextEncoder
from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput
from xlp_cli.models.search import beam_search, greedy
from xlp_cli.models.seq2seq import Seq2Seq, targets
from xlp_cli.tasks.translation.config import TranslateConfig
from xlp_cli.tasks.translation.data import collate
from xlp_cli.tasks.translation.finetune import load_translation_model
from xlp_cli.train.runtime import pick_device


def resolve_run(model: Path, seed: int) -> tuple[Path, Path]:
    """(the folder with tokenizer/ + dict.txt, the seed folder with checkpoints/)."""
    model = Path(model)
    if not model.exists():
        raise BadInput("no such model folder", path=model)
    if (model / "checkpoints").is_dir() and (model.parent / "tokenizer").is_dir():
        return model.parent, model
    if not (model / "tokenizer").is_dir():
        raise BadInput("not a translation run folder (no tokenizer/; expected the --out of "
                       "`xlp finetune --task translation`)", path=model)
    seeds = sorted((p for p in model.glob("seed-*") if (p / "checkpoints").is_dir()),
                   key=lambda p: int(p.name.split("-", 1)[1]) if p.name.split("-", 1)[1].isdigit() else 0)
    if not seeds:
        raise BadInput("this translation run has no trained model yet (no seed-*/checkpoints)", path=model)
    if seed >= 0:
        chosen = model / f"seed-{seed}"
        if chosen not in seeds:
            raise BadInput(f"no seed {seed} here (have: {', '.join(p.name for p in seeds)})", path=model)
        return model, chosen
    return model, seeds[0]


def read_lines(inputs: list[str]) -> list[tuple[str, int, str]]:
    """(file name, line number, text) for every input line; empty lines are an error."""
    out = []
    sources = inputs or ["-"]
    for src in sources:
        if src == "-":
            name, text = "<stdin>", sys.stdin.read()
        else:
            p = Path(src)
            if not p.is_file():
                raise BadInput("no such input file", path=p)
            try:
                text = p.read_text(encoding="utf-8")
            except UnicodeDecodeError as e:
                raise BadInput(f"input is not UTF-8 ({e.reason} at byte {e.start})", path=p) from None
            name = str(p)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for i, line in enumerate(lines, 1):
            line = line.rstrip("\r")
            if not line.strip():
                raise BadInput("empty input line (remove it, or put a sentence on it)", path=name, position=i)
            out.append((name, i, line))
    if not out:
        raise BadInput("no input lines", path=", ".join(sources))
    return out


def translate_ids(model: Seq2Seq, sources: list[list[int]], src_lang: int, tgt_lang: int, device: torch.device, *,
                  beam: int, length_penalty: float, batch_size: int, max_len_a: float = 1.2, max_len_b: int = 10,
                  done: Any = None) -> list[list[int]]:
    """Hypothesis ids for each source (ids without `</s>`), batched by length, returned in input order.
    `done(n)`: called after each batch with its number of sentences (a progress bar)."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    out: list[list[int]] = [[] for _ in sources]
    for k in range(0, len(order), batch_size):
        rows = order[k:k + batch_size]
        src = targets(collate([sources[i] for i in rows])).to(device)
        sl = torch.full((len(rows),), src_lang, device=device)
        tl = torch.full((len(rows),), tgt_lang, device=device)
        if beam <= 1:
            hyps = [h.tokens for h in greedy(model, src, sl, tl, max_len_a, max_len_b)]
        else:
            hyps = [h[0].tokens for h in beam_search(model, src, sl, tl, beam=beam, length_penalty=length_penalty,
                                                     max_len_a=max_len_a, max_len_b=max_len_b)]
        for i, h in zip(rows, hyps):
            out[i] = h
        if done is not None:
            done(len(rows))
    return out


def run(cfg: TranslateConfig) -> dict[str, Any]:
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    # before the model is loaded and the text translated: a folder, /proc, an input or a closed stdout
    safe_output.check_output(cfg.output if cfg.output is not None else "-", [*cfg.inputs, cfg.model], "--output")
    if cfg.output is None and (why := safe_output.stdout_problem()):
        raise BadInput(why)
    root, seed_dir = resolve_run(cfg.model, cfg.seed)
    codec = TextEncoder.load(root)
    device = pick_device(cfg.device)
    model = load_translation_model(seed_dir, cfg.which, device)
    langs = model.config.langs
    for flag, lang in (("--src-lang", cfg.src_lang), ("--tgt-lang", cfg.tgt_lang)):
        if lang not in langs:
            raise BadInput(f"{flag} {lang!r}: the model knows {', '.join(langs)}", path=seed_dir)
    lines = read_lines(cfg.inputs)
    t0 = time.time()
    ids = codec.encode_batch([t for _, _, t in lines], cfg.src_lang)
    limit = model.max_source_len() - 1
    truncated = 0
    for k, ((name, lineno, _), seq) in enumerate(zip(lines, ids)):
        if len(seq) == 0:
            raise BadInput("input line has no tokens after tokenization", path=name, position=lineno)
        if len(seq) > limit:
            if cfg.overflow == "fail":
                raise BadInput(f"line has {len(seq)} subword tokens, more than the {limit} the model allows "
                               "(--overflow truncate to cut it)", path=name, position=lineno)
            ui.warn(f"{name}:{lineno}: {len(seq)} subword tokens, truncated to {limit}")
            ids[k] = seq[:limit]
            truncated += 1
    beam = 1 if cfg.greedy else cfg.beam
    with ui.progress() as bar:  # (a bar only on a terminal or in a log: stdout stays the translations)
        task = bar.add_task(f"translate {cfg.src_lang}-{cfg.tgt_lang}", total=len(ids))
        hyps = translate_ids(model, [s.tolist() for s in ids], langs.index(cfg.src_lang), langs.index(cfg.tgt_lang),
                             device, beam=beam, length_penalty=cfg.length_penalty, batch_size=cfg.batch_size,
                             max_len_a=cfg.max_len_a, max_len_b=cfg.max_len_b, done=lambda n: bar.advance(task, n))
    seconds = time.time() - t0
    rendered = []
    for (name, lineno, text), h in zip(lines, hyps):
        if cfg.format == "tokenized":
            rendered.append(codec.to_tokenized(h))
        elif cfg.format == "jsonl":
            rendered.append(json.dumps({"source": text, "translation": codec.to_text(h, cfg.tgt_lang),
                                        "tokenized": codec.to_tokenized(h), "subwords": codec.to_subwords(h)},
                                       ensure_ascii=False))
        else:
            rendered.append(codec.to_text(h, cfg.tgt_lang))
    body = "".join(r + "\n" for r in rendered)
    safe_output.write_output(cfg.output if cfg.output is not None else "-", body, [*cfg.inputs, cfg.model], "--output")
    return {"sentences": len(lines), "truncated": truncated, "beam": beam, "seconds": round(seconds, 3),
            "sentences_per_s": round(len(lines) / max(seconds, 1e-9), 2), "model": str(seed_dir),
            "output": str(cfg.output) if cfg.output else "<stdout>"}


def print_summary(summary: dict[str, Any]) -> None:
    """On stderr: stdout may be carrying the translations."""
    if summary.get("output") == "<stdout>":
        ui.info(f"translated {ui.plural(summary['sentences'], 'sentence')} in {ui.duration(summary['seconds'])} (beam {summary['beam']})")
    else:
        ui.print_summary("xlp translate", summary)
