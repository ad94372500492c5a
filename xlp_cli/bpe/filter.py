"""`xlp bpe apply --codes C [--vocab V] [INPUT [OUTPUT]]`: BPE on text lines, as `fast applybpe` does it.

    xlp bpe apply --codes codes_xnli_15 --vocab vocab_xnli_15 train.tok train.bpe
    ... | xlp bpe apply --codes codes_xnli_15 --vocab vocab_xnli_15 > train.bpe

The output is byte for byte what `fast applybpe OUTPUT INPUT CODES [VOCAB]` writes (words split on ' ' and
'\\n', runs of spaces kept), with one difference: when the input does not end in a newline, fast drops the
last word; xlp writes it and a newline. The codes and vocab are read and checked natively
(xlp_cli/bpe/_applybpe.cpp); each distinct word is segmented once, new words of a block in `--workers`
threads. A bad line (invalid UTF-8, a NUL byte, longer than --max-line-bytes) stops the run with
`xlp: error: INPUT:LINE: ...` (exit 2), or with --on-error skip becomes an empty line and is counted.
When the subword text goes to stdout, nothing else does (no summary, no --json).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from xlp_cli.bpe.config import BpeApplyConfig
from xlp_cli.core.errors import BadInput, WorkFailed
from xlp_cli.text import native, streams

BLOCK = 4 << 20


def load_applier(codes: Path, vocab: Path | None) -> Any:
    """The native applier for a codes (+ vocab) file; a malformed file is bad input naming its line."""
    try:
        from xlp_cli.bpe._applybpe import Applier  # (the compiled extension: not built is a one-line error)
    except ImportError as e:  # pragma: no cover - depends on the install
        raise WorkFailed(f"the native BPE applier is not built ({e}); run `make setup` or `pip install -e .`") from None
    for p in (codes, vocab):
        if p is not None and not Path(p).is_file():
            raise BadInput("no such file", path=p)
    try:
        return Applier(str(codes), str(vocab) if vocab else "")
    except ValueError as e:
        where, _, what = str(e).rpartition(": ")
        path, _, line = where.rpartition(":")
        if line.isdigit():
            raise BadInput(what, path=path, position=int(line)) from None
        raise BadInput(what, path=where) from None


def _without_bad_lines(block: bytes, bad: set[int]) -> bytes:
    lines = block.split(b"\n")
    return b"\n".join(b"" if i in bad else line for i, line in enumerate(lines))


def apply_filter(cfg: BpeApplyConfig) -> dict[str, Any]:
    t0 = time.time()
    src, dst = streams.resolve(cfg.inputs, "xlp bpe apply")
    applier = load_applier(cfg.codes, cfg.vocab)  # type: ignore[arg-type]
    check = native.module().check_lines
    name = streams.display(src)
    lines = skipped = 0
    examples: list[str] = []
    with streams.open_input(src) as f, streams.output(dst, inputs=[src]) as w:
        for first, block in streams.blocks(f, BLOCK, cfg.max_line_bytes):
            problems = check(block, cfg.max_line_bytes)
            if problems and cfg.on_error == "raise":
                raise BadInput(problems[0][1], path=name, position=first + problems[0][0])
            if problems:
                skipped += len(problems)
                examples += [f"{name}:{first + i}: {why}" for i, why in problems[: 5 - len(examples)]]
                block = _without_bad_lines(block, {i for i, _ in problems})
            w.write(applier.apply_block(block, cfg.workers))
            lines += block.count(b"\n") + (not block.endswith(b"\n"))
    return streams.finish({"input": name, "output": streams.display(dst, stdin=False), "codes": str(cfg.codes),
                           "merges": applier.n_codes, "vocab": str(cfg.vocab) if cfg.vocab else None, "lines": lines,
                           "skipped": skipped, "skipped_examples": examples, "seconds": round(time.time() - t0, 3)},
                          "xlp bpe apply")
