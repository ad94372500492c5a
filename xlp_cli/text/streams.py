"""Line filters over files or stdin/stdout (`xlp text`, `xlp bpe apply INPUT OUTPUT`).

- `resolve(args)`: the INPUT [OUTPUT] arguments ('-' or none: stdin / stdout).
- `blocks(f)`: (number of the first line, a block of whole lines) from a binary stream, ~1 MiB at a time.
- `ordered(fn, items, workers)`: fn over the items in `workers` threads (the native code releases the GIL),
  results in input order, at most 2 x workers blocks in memory.
- `output(name, inputs)`: a binary stream for OUTPUT (artifacts/safe_output.py): a file is written to a temporary
  file and renamed when complete, so a failed run leaves no half-written file; a FIFO or device is written in
  place, stdout as it goes; a folder, /proc, /sys or an input is refused.
- `finish(summary, ...)`: when the text went to stdout, nothing else may: skipped lines are reported on
  stderr and the command ends there, without the summary (or --json) the CLI would print on stdout.
"""

from __future__ import annotations

import contextlib
import sys
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, TypeVar

from xlp_cli.artifacts import safe_output
from xlp_cli.core.errors import BadInput

T = TypeVar("T")
R = TypeVar("R")
BLOCK = 1 << 20
STDIO = "-"


def resolve(args: list[str], command: str) -> tuple[str, str]:
    """(input, output) names from the positional arguments: '-' stands for stdin / stdout."""
    if len(args) > 2:
        raise BadInput(f"{command} takes at most two arguments, INPUT and OUTPUT (got {len(args)})")
    src = args[0] if args else STDIO
    dst = args[1] if len(args) > 1 else STDIO
    if src != STDIO and not Path(src).is_file():
        raise BadInput("no such file", path=src)
    if src != STDIO and dst != STDIO and Path(src).resolve() == Path(dst).resolve():
        raise BadInput("OUTPUT is the INPUT file; write to another file", path=dst)
    safe_output.check_output(dst, [src] if src != STDIO else [], flag="OUTPUT")  # before any work
    if dst == STDIO and (why := safe_output.stdout_problem()):
        raise BadInput(why)
    if src == STDIO and sys.stdin is not None and sys.stdin.isatty():
        raise BadInput(f"{command} reads text lines: give INPUT or pipe them in (`{command} ... < in > out`)")
    return src, dst


def display(name: str, stdin: bool = True) -> str:
    return ("stdin" if stdin else "stdout") if name == STDIO else name


@contextlib.contextmanager
def open_input(name: str) -> Iterator[BinaryIO]:
    if name == STDIO:
        yield sys.stdin.buffer
        return
    with open(name, "rb") as f:
        yield f


def output(name: str, inputs: Iterable[str] = ()) -> contextlib.AbstractContextManager[BinaryIO]:
    """OUTPUT through the one safe-output function (artifacts/safe_output.py): a regular file atomically, a FIFO
    or device in place, stdout as it goes; folders, kernel file systems and the inputs refused."""
    return safe_output.output_stream(name, inputs=[i for i in inputs if i != STDIO], flag="OUTPUT")


def blocks(f: BinaryIO, size: int = BLOCK, max_line: int = 0) -> Iterator[tuple[int, bytes]]:
    """(1-based number of the block's first line, whole lines); the last block may lack its final newline.
    A line longer than `max_line` bytes (0: no limit) is cut to max_line + 1 bytes as it is read, so that an
    endless line neither fills the memory nor passes the check."""
    line = 1
    rest = b""
    skipping = False  # inside a line already cut
    while True:
        chunk = f.read(size)
        if not chunk:
            if rest:
                yield line, rest
            return
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            chunk, skipping = chunk[nl:], False
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        block, rest = data[:cut], data[cut:]
        if max_line and len(rest) > max_line:
            rest, skipping = rest[: max_line + 1], True
        if block:
            yield line, block
            line += block.count(b"\n")


def ordered(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    if workers <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(workers) as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def finish(summary: dict[str, Any], command: str) -> dict[str, Any]:
    if summary["skipped"]:
        from xlp_cli.core import ui  # (rich: a filter that skipped nothing never loads it)

        ui.warn(f"{command}: {summary['skipped']} bad line(s) written as empty lines, e.g. {summary['skipped_examples'][0]}")
    if summary["output"] == "stdout":
        import typer

        raise typer.Exit(0)
    return summary
