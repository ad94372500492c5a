"""Wikipedia multistream dumps: `*-pages-articles-multistream*.xml*.bz2` with `*-multistream-index*.txt*.bz2`.

Wikimedia compresses these dumps as many independent bz2 streams: the first holds the `<mediawiki>` header
and `<siteinfo>`, each following one 100 `<page>`s, the last one the closing `</mediawiki>`. The index has
one line `OFFSET:PAGE_ID:TITLE` per page, OFFSET being the byte where the page's stream starts. A split is
a run of whole streams; its reader decompresses the header stream, seeks to its own streams and closes the
document, so splits are read independently and together give the pages of the whole dump, in order.
Large wikis come as several such files (`...-multistream1.xml-p1p41242.bz2` + `...-multistream-index1.txt-
p1p41242.bz2`, ...): each file is planned on its own.

`write_multistream` writes a dump in this format (the tests build one from the shared samples; a user can
convert a single-stream dump with it to read it in parallel).
"""

from __future__ import annotations

import bz2
import html
import io
import re
from pathlib import Path
from typing import BinaryIO

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.records import Split
from xlp_cli.prepare.sources import compressed
from xlp_cli.prepare.sources._files import ARCHIVE_ERRORS, archive_problem, bounded_lines, open_binary, track

NAME = "wikipedia"
_CLOSE = b"</mediawiki>\n"


def is_index(path: Path) -> bool:
    return "multistream-index" in path.name


def index_for(dump: Path) -> Path | None:
    """The index file beside a multistream dump, if there is one."""
    name = dump.name
    if "multistream" not in name or is_index(dump):
        return None
    index = dump.with_name(name.replace("multistream", "multistream-index", 1).replace(".xml", ".txt", 1))
    return index if index.is_file() else None


def stream_offsets(index: Path) -> list[int]:
    """The byte offsets where the page streams start, ascending, from the index."""
    offsets: set[int] = set()
    n = 0
    try:
        with open_binary(index) as f:  # (bounded: compressed.py)
            for n, line in enumerate(bounded_lines(f), 1):
                line = line if line is not None else b"(a line longer than 16 MiB)"
                head = line.split(b":", 1)[0]
                if not head.strip():
                    continue
                if not head.isdigit() or len(head) > 18:
                    raise BadInput(f"not a multistream index line (OFFSET:PAGE_ID:TITLE): {line[:60]!r}", path=index,
                                   position=n)
                offsets.add(int(head))
    except ARCHIVE_ERRORS as e:
        raise BadInput(f"{archive_problem(e)} after line {n}", path=index, position=n + 1) from None
    return sorted(offsets)


def plan_dump(dump: Path, index: Path, split_size: int) -> list[Split]:
    """Runs of whole streams of about `split_size` compressed bytes."""
    offsets = stream_offsets(index)
    size = dump.stat().st_size
    if not offsets:
        raise BadInput("the multistream index lists no page", path=index)
    if offsets[0] <= 0 or offsets[-1] >= size:
        raise BadInput(f"the index's stream offsets ({offsets[0]}..{offsets[-1]}) do not fit the dump ({size} bytes): "
                       "an index of another dump?", path=index)
    cuts = [offsets[0]]
    for off in offsets[1:]:
        if off - cuts[-1] >= split_size:
            cuts.append(off)
    ends = cuts[1:] + [size]
    return [Split(NAME, "range", [str(dump)], a, b, first=i == 0, last=b == size, header=offsets[0])
            for i, (a, b) in enumerate(zip(cuts, ends))]


class _Slice(io.RawIOBase):
    """Bytes [start, end) of a file."""

    def __init__(self, f: BinaryIO, start: int, end: int):
        self.f, self.pos, self.end = f, start, end

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self.end - self.pos)
        if n <= 0:
            return 0
        self.f.seek(self.pos)
        data = self.f.read(n)
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)


class _Chain(io.RawIOBase):
    """The bytes of several readable streams, one after another."""

    def __init__(self, parts: list, closing: list):
        self.parts, self.closing = parts, closing

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while self.parts:
            n = self.parts[0].readinto(b)
            if n:
                return n
            self.parts.pop(0)
        return 0

    def close(self) -> None:
        for c in self.closing:
            c.close()
        super().close()


def open_streams(split: Split) -> io.BufferedReader:
    """The decompressed XML of a split: header stream, the split's streams, `</mediawiki>` (unless the split
    runs to the end of the file, whose last stream holds it)."""
    f = track(split.path, open(split.path, "rb"))
    header = compressed.decompressed(_Slice(f, 0, split.header), "bz2", split.path, close_raw=False)
    pages = compressed.decompressed(_Slice(f, split.start, split.end), "bz2", split.path, close_raw=False)
    parts = [header, pages] + ([] if split.last else [io.BytesIO(_CLOSE)])
    return io.BufferedReader(_Chain(parts, [header, pages, f]), 1 << 16)


# ------------------------------------------------------------------ writing one
def write_multistream(xml: bytes, dump: Path, index: Path, pages_per_stream: int = 100) -> int:
    """Write the UTF-8 dump `xml` as a multistream dump `dump` and its `index`, as Wikimedia does: the header
    up to the first `<page>` as one bz2 stream, `pages_per_stream` pages per stream, then the closing tag as
    the last stream. A dump cut inside a page keeps its complete pages. Returns the number of pages."""
    first = xml.find(b"<page>")
    if first < 0:
        raise BadInput("no <page> in the dump", path=dump)
    pos = xml.rfind(b"\n", 0, first) + 1
    header, pages = xml[:pos], []
    while (end := xml.find(b"</page>", pos)) >= 0:
        end = xml.find(b"\n", end)
        end = len(xml) if end < 0 else end + 1
        pages.append(xml[pos:end])
        pos = end
    tail = xml[pos:] if b"</mediawiki>" in xml[pos:] else b"  " + _CLOSE
    lines: list[str] = []
    with open(dump, "wb") as out:
        out.write(bz2.compress(header))
        for i in range(0, len(pages), pages_per_stream):
            offset = out.tell()
            group = pages[i:i + pages_per_stream]
            for page in group:
                title = re.search(rb"<title>(.*?)</title>", page)
                pid = re.search(rb"<id>(\d+)</id>", page)
                lines.append(f"{offset}:{pid.group(1).decode() if pid else 0}:"
                             f"{html.unescape(title.group(1).decode('utf-8')) if title else ''}\n")
            out.write(bz2.compress(b"".join(group)))
        out.write(bz2.compress(tail))
    index.write_bytes(bz2.compress("".join(lines).encode("utf-8")))
    return len(pages)
