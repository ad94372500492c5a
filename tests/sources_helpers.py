"""Helpers for the source reader tests: run a reader, collect what it yields and reports."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

from xlp_cli.prepare.records import ErrorPolicy, Mono, Pair, SourceOptions
from xlp_cli.prepare.sources import SOURCES

SRC_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sources"


def read_all(source: str, inputs, langs=(), mode: str = "raise", **opts):
    """(records, ErrorPolicy) of reading `inputs` with `source`."""
    errors = ErrorPolicy(mode)
    recs = list(SOURCES[source]([Path(p) for p in inputs], SourceOptions(langs=list(langs), **opts), errors))
    return recs, errors


def monos(recs):
    return [r for r in recs if isinstance(r, Mono)]


def pairs(recs):
    return [r for r in recs if isinstance(r, Pair)]


def zip_bytes(members: dict[str, bytes], flag: int = 0, method: int | None = None) -> bytes:
    """A deflated zip of `members`, with a general-purpose flag bit (`flag`, e.g. 0x1: encrypted) and/or a
    compression method number (`method`) set in every local and central header."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, value in members.items():
            zf.writestr(name, value)
    data = bytearray(buf.getvalue())
    for sig, flag_at, method_at in ((b"PK\x03\x04", 6, 8), (b"PK\x01\x02", 8, 10)):
        at = data.find(sig)
        while at >= 0:
            struct.pack_into("<H", data, at + flag_at, struct.unpack_from("<H", data, at + flag_at)[0] | flag)
            if method is not None:
                struct.pack_into("<H", data, at + method_at, method)
            at = data.find(sig, at + 4)
    return bytes(data)


def shared_dumps(shared_data: Path) -> list[tuple[Path, bytes]]:
    """(path, its XML) of every shared Wikipedia dump (.bz2 or .xz, decompressed here)."""
    import bz2
    import lzma

    paths = sorted((shared_data / "wikipedia_dumps").glob("*.xml*"))
    assert paths, f"no dump under {shared_data / 'wikipedia_dumps'}"
    return [(p, (bz2.decompress if p.suffix == ".bz2" else lzma.decompress)(p.read_bytes())) for p in paths]
