"""OPUS inputs: files and members of release zips (streamed, bounded by compressed.py, never extracted; `..` and
absolute member names, encrypted members and unknown methods refused), and what each holds (Moses text, TMX,
XCES sentences or alignments), by content."""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.records import ErrorPolicy
from xlp_cli.prepare.sources import compressed
from xlp_cli.prepare.sources._files import ARCHIVE_ERRORS, archive_problem, is_documentation, open_binary

NAME = "opus"



@dataclass
class Item:
    """One input: a file, or a member of a zip. `open()` gives its decompressed bytes."""

    name: str  # path, or "archive.zip!member"
    inner: str  # the path used for matching (the member name inside a zip, else the file path)
    open: Callable[[], io.BufferedIOBase]

    def head(self, n: int = 4096) -> bytes:
        try:
            with self.open() as f:
                return f.read(n)
        except ARCHIVE_ERRORS as e:
            raise BadInput(archive_problem(e), path=self.name) from None


# ------------------------------------------------------------------ inputs
def items_of(path: Path, errors: ErrorPolicy) -> list[Item]:
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            if f.read(4) == b"PK\x03\x04":  # a zip without its central directory: cut short (or damaged)
                raise BadInput("truncated or corrupt zip archive (no central directory at its end): download it "
                               "again", path=path)
        if is_documentation(path.name):
            return []
        return [Item(str(path), str(path), lambda p=path: open_binary(p))]
    try:
        zf = zipfile.ZipFile(path)
        infos = zf.infolist()
    except (zipfile.BadZipFile, OSError) as e:
        raise BadInput(f"corrupt zip archive ({e})", path=path) from None
    out = []
    for info in infos:
        name = info.filename
        if info.is_dir():
            continue
        if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in re.split(r"[/\\]", name):
            errors.bad(f"zip member {name!r} points outside the archive; refused", path=path)
            continue
        if is_documentation(name.rsplit("/", 1)[-1]):
            continue
        if problem := compressed.member_problem(info):  # encrypted, an unknown method, over the limits
            errors.bad(problem, path=path)
            continue
        out.append(Item(f"{path}!{name}", name,
                        lambda zf=zf, info=info, name=name: compressed.member_stream(zf, info, f"{path}!{name}")))
    return out


def kind_of(item: Item) -> str:
    head = item.head()
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        head = head.decode("utf-16", errors="ignore").encode("utf-8")
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"<"):
        m = re.search(rb"<(?!\?|!)([A-Za-z_:][\w:.-]*)", text)
        root = m.group(1).decode().split(":")[-1].lower() if m else ""
        if root == "tmx":
            return "tmx"
        if root == "cesalign" or b"<linkGrp" in text:
            return "xces-align"
        if root in ("text", "document", "cesdoc", "doc") or b"<s " in text or b"<s>" in text:
            return "xces-sentences"
        raise BadInput(f"XML with root <{root}> is not TMX, an XCES sentence file or a cesAlign file", path=item.name)
    return "moses"

