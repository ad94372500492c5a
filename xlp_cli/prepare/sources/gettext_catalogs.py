"""Reading gettext catalogs: binary `.mo` (both byte orders, offsets checked) and `.po` text (msgctxt, plurals,
continuation lines, C escapes), with the charset from the catalog header. See `gettext.py` for what is kept."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Iterator

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.records import ErrorPolicy

LE_MAGIC, BE_MAGIC = 0x950412DE, 0xDE120495


def parse_mo(data: bytes, path: Path) -> Iterator[tuple[bytes, bytes]]:
    """(msgid, msgstr) byte strings of a .mo file; bad offsets raise BadInput with the byte position."""
    if len(data) < 28:
        raise BadInput(f"not a .mo catalog: {len(data)} bytes, shorter than the 28-byte header", path=path,
                       position="byte 0")
    magic = struct.unpack("<I", data[:4])[0]
    if magic == LE_MAGIC:
        order = "<"
    elif magic == BE_MAGIC:
        order = ">"
    else:
        raise BadInput(f"not a .mo catalog: bad magic number 0x{magic:08x}", path=path, position="byte 0")
    revision, count, orig_at, trans_at = struct.unpack(order + "4I", data[4:20])
    if revision >> 16 not in (0, 1):
        raise BadInput(f"unsupported .mo major revision {revision >> 16}", path=path, position="byte 4")
    if count == 0:
        raise BadInput("empty .mo catalog: no entries, not even the header entry", path=path, position="byte 8")
    size = len(data)
    for name, at in (("original", orig_at), ("translation", trans_at)):
        if at + 8 * count > size:
            raise BadInput(f"corrupt .mo catalog: the {name} string table ({count} entries at byte {at}) runs past "
                           f"the end of the file ({size} bytes)", path=path, position=f"byte {at}")
    for i in range(count):
        ol, oo = struct.unpack_from(order + "2I", data, orig_at + 8 * i)
        tl, to = struct.unpack_from(order + "2I", data, trans_at + 8 * i)
        for length, offset, entry_at in ((ol, oo, orig_at + 8 * i), (tl, to, trans_at + 8 * i)):
            if offset + length > size:
                raise BadInput(f"corrupt .mo catalog: entry {i} points to bytes {offset}..{offset + length}, past "
                               f"the end of the file ({size} bytes)", path=path, position=f"byte {entry_at}")
            if offset < 28 or data[offset + length:offset + length + 1] != b"\0":  # (msgfmt ends each with NUL)
                raise BadInput(f"corrupt .mo catalog: entry {i} (bytes {offset}..{offset + length}) is not a "
                               "NUL-terminated string of the string area", path=path, position=f"byte {entry_at}")
        yield data[oo:oo + ol], data[to:to + tl]


_ESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "'": "'",
        "?": "?"}


def _po_unescape(s: str, path: Path, line: int) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(s):
            raise BadInput("dangling backslash in a .po string", path=path, position=line)
        n = s[i + 1]
        if n in _ESC:
            out.append(_ESC[n])
            i += 2
        elif n in "01234567":
            m = re.match(r"[0-7]{1,3}", s[i + 1:])
            out.append(chr(int(m.group(0), 8)))
            i += 1 + len(m.group(0))
        elif n == "x":
            m = re.match(r"[0-9A-Fa-f]+", s[i + 2:])
            if not m:
                raise BadInput("bad \\x escape in a .po string", path=path, position=line)
            out.append(chr(int(m.group(0), 16)))
            i += 2 + len(m.group(0))
        else:
            raise BadInput(f"unknown escape \\{n} in a .po string", path=path, position=line)
    return "".join(out)


def parse_po(text: str, path: Path) -> Iterator[tuple[str, str, bool]]:
    """(msgid, msgstr, fuzzy) of a .po file; msgid with a context as `ctxt\\x04id`, plurals as in .mo (`\\x00`)."""
    entry: dict[str, str] = {}
    fuzzy = False
    key: str | None = None
    plural_forms: dict[int, str] = {}

    def flush():
        nonlocal entry, fuzzy, key, plural_forms
        if "msgid" in entry:
            msgid = entry["msgid"]
            if "msgctxt" in entry:
                msgid = entry["msgctxt"] + "\x04" + msgid
            if "msgid_plural" in entry:
                msgid += "\x00" + entry["msgid_plural"]
                msgstr = "\x00".join(plural_forms[k] for k in sorted(plural_forms))
            else:
                msgstr = entry.get("msgstr", "")
            yield msgid, msgstr, fuzzy
        entry, fuzzy, key, plural_forms = {}, False, None, {}

    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if key is not None and "msgid" in entry and ("msgstr" in entry or plural_forms):
                yield from flush()
            if line.startswith("#,") and "fuzzy" in line:
                fuzzy = True
            continue
        m = re.match(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s+"(.*)"$', line)
        if m:
            kw, idx, body = m.group(1), m.group(2), m.group(3)
            if kw in ("msgctxt", "msgid") and ("msgstr" in entry or plural_forms):
                keep_fuzzy = fuzzy
                yield from flush()
                fuzzy = keep_fuzzy and False
            value = _po_unescape(body, path, n)
            if idx is not None:
                key = f"msgstr[{idx}]"
                plural_forms[int(idx)] = value
            else:
                key = kw
                entry[kw] = value
            continue
        m = re.match(r'^"(.*)"$', line)
        if m and key is not None:
            value = _po_unescape(m.group(1), path, n)
            if key.startswith("msgstr["):
                idx = int(key[7:-1])
                plural_forms[idx] += value
            else:
                entry[key] += value
            continue
        raise BadInput(f"not .po syntax: {line[:60]!r}", path=path, position=n)
    yield from flush()


def _charset(header: str) -> str:
    m = re.search(r"charset=([A-Za-z0-9_.:-]+)", header)
    cs = m.group(1) if m else "utf-8"
    return "utf-8" if cs.upper() in ("CHARSET", "ASCII", "US-ASCII", "ANSI_X3.4-1968") else cs


def catalog_entries(path: Path, errors: ErrorPolicy) -> Iterator[tuple[int, str, str]]:
    """(entry index, msgid, msgstr) of the usable entries of one catalog (see the module docstring)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror or e}", path=path) from None
    if path.suffix == ".po":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            head = data[:4096].decode("latin-1")
            cs = _charset(head)
            try:
                text = data.decode(cs)
            except (UnicodeDecodeError, LookupError):
                errors.bad(f"invalid {cs} text at byte {e.start}", path=path, position=f"byte {e.start}")
                return
        for i, (msgid, msgstr, fuzzy) in enumerate(parse_po(text, path)):
            if not fuzzy and msgid:
                yield i, msgid, msgstr
        return
    pairs = list(parse_mo(data, path))
    header = next((t for o, t in pairs if o == b""), b"").decode("latin-1")
    cs = _charset(header)
    for i, (o, t) in enumerate(pairs):
        if not o:
            continue
        try:
            yield i, o.decode(cs), t.decode(cs)
        except UnicodeDecodeError as e:
            errors.bad(f"entry {i} is not valid {cs} (byte {e.start} of the string)", path=path,
                       position=f"entry {i}")
        except LookupError:
            raise BadInput(f"unknown charset {cs!r} in the catalog header", path=path) from None
