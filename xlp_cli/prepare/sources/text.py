"""`--source text`: plain text, one document or sentence per line.

Language: with one `--lang`, every file is in it. With several, each file's name must declare one of
them in a dot-separated part (`news.de.txt`, `train.fr.gz`); a file that names none is bad input.
Plain, .gz, .bz2 or .xz (recognised by content). Blank lines are skipped; surrounding whitespace is
stripped. Invalid UTF-8 is reported with file and line (a counted skip with `--on-error skip`). A file
with no text line at all is bad input (a counted skip with `--on-error skip`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.records import ErrorPolicy, Mono, SourceOptions, Split
from xlp_cli.prepare.sources import expand_inputs
from xlp_cli.prepare.sources._files import NUL_IN_LINE, compression, iter_lines, lang_from_name, track, utf16_problem
from xlp_cli.text.langs import safe_folder_name

NAME = "text"


def file_lang(path: Path, langs: list[str]) -> str:
    if len(langs) == 1:
        return langs[0]
    lang = lang_from_name(path, langs)
    if lang is None:
        named = lang_from_name(path, [])
        if named and langs:
            raise BadInput(f"the file name says language {named!r}, which is not among --lang {','.join(langs)}", path=path)
        want = f"one of {','.join(langs)}" if langs else "a language code"
        raise BadInput(f"cannot tell the language: give a single --lang, or name the file like NAME.xx.txt with xx {want}",
                       path=path)
    return lang


def read(inputs: list[Path], opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono]:
    inputs = expand_inputs(inputs)
    per_lang: Counter[str] = Counter()
    for path in inputs:
        lang = file_lang(path, opts.langs)
        if opts.max_records and per_lang[lang] >= opts.max_records:
            continue
        got = yield from _records(path, lang, iter_lines(path, errors), opts, per_lang)
        if got == 0:
            errors.bad("empty file: no text lines", path=path)


def _records(path: Path, lang: str, lines: Iterator[tuple[int, str]], opts: SourceOptions,
             per_lang: Counter[str]) -> Iterator[Mono]:
    """The Monos of `lines`; returns how many there were."""
    got = 0
    name, cap = str(path), opts.max_records
    for n, line in lines:
        line = line.strip()
        if not line:
            continue
        got += 1
        yield Mono(lang, line, NAME, f"{name}:{n}")
        if cap:
            per_lang[lang] += 1
            if per_lang[lang] >= cap:
                break
    if not cap:
        per_lang[lang] += got
    return got


# ------------------------------------------------------------------ splits
def plan(inputs: list[Path], opts: SourceOptions, split_size: int) -> list[Split]:
    """One split per file; an uncompressed file larger than `split_size` is cut into byte ranges."""
    out: list[Split] = []
    for path in expand_inputs(inputs):
        file_lang(path, opts.langs)  # a file whose language cannot be told is bad input before any work
        size = path.stat().st_size
        if compression(path) or size <= split_size:
            out.append(Split(NAME, "file", [str(path)]))
            continue
        cuts = list(range(0, size, split_size)) + [size]
        for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
            out.append(Split(NAME, "range", [str(path)], a, b, first=i == 0, last=b == size))
    return out


def read_split(split: Split, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono]:
    """The records of a split. Returns {"lines", "got"}: the lines of a byte range (a range reports line
    numbers counted from its start, which the main process turns into file line numbers) and its records;
    an empty file is reported here for a whole file, by the main process for a file in several ranges."""
    path = Path(split.path)
    lang = file_lang(path, opts.langs)
    if split.kind == "file":
        lines = iter_lines(path, errors)
    else:
        lines = _RangeLines(path, split.start, split.end, errors)
    got = yield from _records(path, lang, lines, opts, Counter())
    if got == 0 and split.first and split.last:
        errors.bad("empty file: no text lines", path=path)
    return {"lines": lines.lines if isinstance(lines, _RangeLines) else 0, "got": got}


def read_tasks(split: Split, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[tuple] | None:
    """The fast path of `read_split` for a whole plain file (splits.cut uses it when it is not None): the
    workers' tasks ("m", lang, text, "text") themselves, the same as `to_task` of each record, with the same
    problems reported at the same records; lines are decoded and stripped a block at a time (~3x less CPU
    than a record object per line). Not for ranges, compressed files, --max-records or --unpair."""
    path = Path(split.path)
    if split.kind != "file" or opts.max_records or opts.unpair_keep is not None or compression(path):
        return None
    lang = file_lang(path, opts.langs)
    if not safe_folder_name(lang):
        return None  # (each record reports the bad code: the slow path)
    return _plain_tasks(path, lang, errors, split.first and split.last)


_BLOCK = 1 << 18


def _plain_tasks(path: Path, lang: str, errors: ErrorPolicy, whole: bool) -> Iterator[tuple]:
    got = n = 0
    with track(path, open(path, "rb", buffering=1 << 16)) as f:
        pending = f.readline(1 << 20)  # the first line (its first MiB), checked as iter_lines checks it
        if pending.startswith(b"\xef\xbb\xbf"):
            pending = pending[3:]
        eof = False
        if pending and (problem := utf16_problem(pending)):
            errors.bad(problem, path=path, position=1)  # (skipped: the whole file)
            eof, pending = True, b""
        while not eof:
            data = f.read(_BLOCK)
            eof = not data
            pending += data
            cut = len(pending) if eof else pending.rfind(b"\n") + 1  # whole lines (a long one: read on)
            block, pending = pending[:cut], pending[cut:]
            if not block:
                continue
            lines: list[Any] = block.split(b"\n")  # (bytes: decoded line by line below, to name a bad one)
            if b"\x00" not in block:
                try:
                    lines = block.decode("utf-8").split("\n")
                except UnicodeDecodeError:
                    pass
            if not lines[-1]:
                lines.pop()  # (after the block's last line break)
            if type(lines[0]) is str:
                n += len(lines)
                for line in lines:
                    if line := line.strip():
                        got += 1
                        yield ("m", lang, line, NAME)
                continue
            for raw in lines:
                n += 1
                if b"\x00" in raw:
                    errors.bad(NUL_IN_LINE, path=path, position=n)
                    continue
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError as e:
                    errors.bad(f"invalid UTF-8 at byte {e.start} of the line", path=path, position=n)
                    continue
                if line:
                    got += 1
                    yield ("m", lang, line, NAME)
    if got == 0 and whole:
        errors.bad("empty file: no text lines", path=path)
    return {"lines": 0, "got": got}


class _RangeLines:
    """(line number from the range's start, text) of the lines that start in bytes [start, end) of a plain
    file (a line that starts before `start` belongs to the range before); `lines` counts them."""

    def __init__(self, path: Path, start: int, end: int, errors: ErrorPolicy):
        self.path, self.start, self.end, self.errors = path, start, end, errors
        self.lines = 0

    def __iter__(self) -> Iterator[tuple[int, str]]:
        with track(self.path, open(self.path, "rb", buffering=1 << 16)) as f:
            pos = self.start
            if pos > 0:
                f.seek(pos - 1)
                if f.read(1) != b"\n":
                    pos += len(f.readline())
            while pos < self.end:
                raw = f.readline()
                if not raw:
                    break
                pos += len(raw)
                self.lines += 1
                if pos == len(raw) and raw.startswith(b"\xef\xbb\xbf"):  # a BOM on the file's first line
                    raw = raw[3:]
                if self.lines == 1 and (problem := utf16_problem(raw)):  # (each range checks its first line)
                    self.errors.bad(problem, path=self.path, position=1)
                    return
                if b"\x00" in raw:
                    self.errors.bad(NUL_IN_LINE, path=self.path, position=self.lines)
                    continue
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    self.errors.bad(f"invalid UTF-8 at byte {e.start} of the line", path=self.path, position=self.lines)
                    continue
                yield self.lines, line.rstrip("\r\n")

