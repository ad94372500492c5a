"""`xlp text`: the text pipeline as a line filter, to drop into XLM-style shell scripts.

    xlp text --lang de --tokenize xlm --lowercase xlm < in.de > out.de     # = tokenize.sh de | lowercase...py
    xlp text --lang fr INPUT OUTPUT                                        # OUTPUT written atomically

One output line per input line, in order; empty lines stay empty. Blocks of ~1 MiB are processed by
`--workers` threads in the native code (zh and th: through jieba / pythainlp in Python). A bad line
(invalid UTF-8, a NUL byte, longer than --max-line-bytes) stops the run with `xlp: error: INPUT:LINE: ...`
(exit 2), or with --on-error skip becomes an empty line and is counted. When the text goes to stdout,
nothing else does (no summary, no --json).
"""

from __future__ import annotations

import time
from typing import Any

from xlp_cli.core.errors import BadInput
from xlp_cli.text import native, streams
from xlp_cli.text.config import TextConfig
from xlp_cli.text.pipeline import TextPipeline


def _segmented(pipe: TextPipeline, lang: str, block: bytes, max_line: int) -> tuple[bytes, list[tuple[int, str]]]:
    """A block of zh/th lines: the checks natively, the pipeline through its Python segmenter."""
    problems = native.module().check_lines(block, max_line)
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    bad = {i for i, _ in problems}
    good = [i for i in range(len(lines)) if i not in bad]
    out = [b""] * len(lines)
    for i, text in zip(good, pipe.process_batch([lines[i].decode("utf-8") for i in good], lang)):
        out[i] = text.encode("utf-8")
    return b"\n".join(out) + b"\n", problems


def run(cfg: TextConfig) -> dict[str, Any]:
    t0 = time.time()
    src, dst = streams.resolve(cfg.inputs, "xlp text")
    pipe = TextPipeline(cfg.clean, cfg.normalize, cfg.tokenize, cfg.lowercase)
    seg, compiled = pipe.segmenter(cfg.lang), pipe.native(cfg.lang)

    def work(item: tuple[int, bytes]) -> tuple[int, int, bytes, list[tuple[int, str]]]:
        first, block = item
        n = block.count(b"\n") + (not block.endswith(b"\n"))
        if seg is None:
            out, problems = compiled.run_bytes(block, native.ALL, cfg.max_line_bytes)
        else:
            out, problems = _segmented(pipe, cfg.lang, block, cfg.max_line_bytes)
        return first, n, out, problems

    lines = skipped = 0
    examples: list[str] = []
    name = streams.display(src)
    with streams.open_input(src) as f, streams.output(dst, inputs=[src]) as w:
        for first, n, out, problems in streams.ordered(work, streams.blocks(f, max_line=cfg.max_line_bytes), cfg.workers):
            if problems and cfg.on_error == "raise":
                raise BadInput(problems[0][1], path=name, position=first + problems[0][0])
            for i, why in problems:
                skipped += 1
                if len(examples) < 5:
                    examples.append(f"{name}:{first + i}: {why}")
            w.write(out)
            lines += n
    return streams.finish({"input": name, "output": streams.display(dst, stdin=False), "lang": cfg.lang,
                           "tokenize": cfg.tokenize, "lowercase": cfg.lowercase, "lines": lines, "skipped": skipped,
                           "skipped_examples": examples, "seconds": round(time.time() - t0, 3)}, "xlp text")


def print_summary(summary: dict[str, Any]) -> None:
    from xlp_cli.core import ui  # (only here: a filter writing to stdout starts without rich)

    ui.out.print(f"xlp text: {summary['lines']:,} lines ({summary['lang']}, tokenize {summary['tokenize']}, lowercase "
                 f"{summary['lowercase']}, {summary['skipped']} skipped) -> {summary['output']} in {summary['seconds']} s")
