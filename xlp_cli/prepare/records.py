"""What sources yield and how they report problems. The one interface between sources and the pipeline.

A source is a function `read(inputs, opts, errors) -> Iterator[Mono | Pair]` registered in
`xlp_cli.prepare.sources.SOURCES`. It streams (constant memory), yields raw (unprocessed) text, and
reports record-level problems through `ErrorPolicy`, which either raises (default) or counts a skip.

When the pipeline sets `SourceOptions.defer_pages`, a source whose text extraction is expensive (wikipedia:
wikitext -> plain text) may yield `RawPage`s instead: the document as it is in the file plus the function
that extracts its paragraphs, which the pipeline runs in its worker processes (`process.py`). A `RawPage`
stands for the `Mono`s that `RawPage.monos()` gives, in that order; readers called without `defer_pages`
(tests, other tools) only ever see `Mono`/`Pair`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Union

from xlp_cli.core.errors import BadInput


@dataclasses.dataclass(slots=True)
class Mono:
    """One monolingual record: a sentence, a paragraph or a document line."""

    lang: str
    text: str
    source: str  # source kind: wikipedia, commoncrawl, opus, text, gettext
    origin: str  # where it came from, for ids and error messages: "file:line" or "file#title"


@dataclasses.dataclass(slots=True)
class Pair:
    """One parallel record (lang1 < lang2 is not required; the pipeline orders the pair folder name)."""

    lang1: str
    lang2: str
    text1: str
    text2: str
    source: str
    origin: str


class RecordProblem(Exception):
    """Raised by a `RawPage.extract` function for a record-level problem (reported through `ErrorPolicy.bad`
    with the page's path and position)."""


@dataclasses.dataclass(slots=True)
class RawPage:
    """A document whose paragraphs are still to be extracted: `extract(text, context)` -> list of paragraph
    texts, each one `Mono(lang, paragraph, source, path + position)`. `extract` must be a module-level
    function (it is pickled by name to the workers); `context` is what it needs besides the text (wikipedia:
    the dump's link namespaces), shared by the pages of one file. An `extract` with a `.native(context)`
    attribute (the native converter it runs: wikipedia_text.page_lines) lets process.py take a chunk of such pages
    from their text to its columns in one native call, with the same result."""

    lang: str
    text: str | bytes  # (bytes: UTF-8, as the Wikipedia dump reader gives it; `extract` takes either)
    source: str
    path: str  # for messages: the file
    position: str  # and the place in it ("#title"); origin = path + position
    extract: Callable[[Any, Any], list[str]]  # (text, context) -> paragraphs
    context: Any = None

    def monos(self) -> list[Mono]:
        """The records this page stands for (raises RecordProblem)."""
        origin = self.path + self.position
        return [Mono(self.lang, t, self.source, origin) for t in self.extract(self.text, self.context)]


Record = Union[Mono, Pair, RawPage]


@dataclasses.dataclass
class SourceOptions:
    """What a source needs from the prepare config."""

    langs: list[str]  # requested languages ([] = all the source has)
    lid_threshold: float = 0.5  # commoncrawl language-ID confidence
    mono_from_parallel: bool = False  # also yield each side of parallel data as Mono (gettext, opus)
    max_records: int = 0  # per language (0 = no limit); sources may stop early
    defer_pages: bool = False  # a source may yield RawPage (set by the pipeline, which expands them in workers)
    unpair_keep: frozenset[int] | None = None  # --unpair: the sentences to keep (sentence_groups.unpair_plan)
    split_plan: dict[int, int] | None = None  # --split-by sentences: sentence key -> split value (sentence_groups)
    max_expansion: float = 200.0  # bounded decompression (sources/compressed.py): --max-expansion
    max_member_bytes: int = 64 << 30  # --max-member-bytes
    read_ahead: int = 0  # N > 0: decompress in threads ahead of the parser (sources/_files.ReadAhead; a .bz2 file:
    # its blocks on N threads, sources/bz2_blocks.py); `xlp prepare` sets N = --workers N > 1 in worker threads,
    # where the main thread is the one reader


@dataclasses.dataclass
class Split:
    """A part of the input that one reader reads alone, in order (see `xlp_cli.prepare.sources.plan_splits`).

    kind "stream": all of `paths`, read by the source's `read` (sources that cannot be cut, and every source
    with --max-records, whose cap counts across files); "file": one whole file; "range": bytes
    [start, end) of one file (plain text: the lines that start there; a Wikipedia multistream dump: the
    bz2 streams that start there, after the header stream [0, header)). `first`/`last`: the first/last split
    of its file. The records of all splits, in order, are the records of the whole input read in order."""

    source: str
    kind: str
    paths: list[str]
    start: int = 0
    end: int = 0
    first: bool = True
    last: bool = True
    header: int = 0

    @property
    def path(self) -> str:
        return self.paths[0] if self.paths else ""


class ErrorPolicy:
    """`raise`: the first bad record aborts with a one-line error. `skip`: count it and go on."""

    def __init__(self, mode: str = "raise"):
        if mode not in ("raise", "skip"):
            raise BadInput(f"--on-error must be 'raise' or 'skip', not {mode!r}")
        self.mode = mode
        self.skipped: Counter[str] = Counter()
        self.examples: list[str] = []
        self.warnings: list[str] = []

    def bad(self, message: str, *, path: str | Path | None = None, position: str | int | None = None,
            fatal: bool = False) -> None:
        """A record-level problem. Raises BadInput unless mode is skip (and the problem is not fatal)."""
        err = BadInput(message, path=path, position=position)
        if self.mode == "raise" or fatal:
            raise err
        self.skipped[message.split(":")[0][:80]] += 1
        if len(self.examples) < 20:
            self.examples.append(err.one_line())

    def warn(self, message: str) -> None:
        """Something the manifest must record (e.g. a truncated dump whose complete pages were kept)."""
        from xlp_cli.core import ui  # (rich: prepare's config reads this module at CLI start-up)

        self.warnings.append(message)
        ui.warn(message)


class CollectedErrors(ErrorPolicy):
    """The ErrorPolicy of a reader that runs away from the main process (a worker, a Ray task): skippable
    problems and warnings are kept, in order, for the main process to report in stream order; a problem
    that stops the run (raise mode, or fatal) still raises here, to stop the reader."""

    def __init__(self, mode: str = "raise"):
        super().__init__(mode)
        self.problems: list[list] = []
        self.new_warnings: list[str] = []

    def bad(self, message: str, *, path: str | Path | None = None, position: str | int | None = None,
            fatal: bool = False) -> None:
        if self.mode == "raise" or fatal:
            raise BadInput(message, path=path, position=position)
        self.problems.append([message, None if path is None else str(path), position])

    def warn(self, message: str) -> None:
        self.new_warnings.append(message)

    def take(self) -> tuple[list[list], list[str]]:
        """The problems and warnings since the last call."""
        out = (self.problems, self.new_warnings)
        self.problems, self.new_warnings = [], []
        return out


class Source(Protocol):
    def __call__(self, inputs: list[Path], opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Record]: ...


def sentence_key(lang: str, text: str) -> int:
    """A 64-bit key of a sentence in a language (`--unpair`)."""
    return int.from_bytes(hashlib.blake2b(f"{lang}\x00{text}".encode("utf-8"), digest_size=8).digest(), "big")
