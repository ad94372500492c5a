"""`--source opus`: parallel corpora in Moses, TMX and XCES formats, plain, gzipped or inside OPUS release zips.

Formats (recognised by content, not by name):
- Moses: two line-aligned text files. Paired by name: `NAME.l1-l2.l1` + `NAME.l1-l2.l2` (OPUS's layout),
  or `NAME.l1` + `NAME.l2` (Multi30k's `train.de.gz` + `train.en.gz`), where the language part is a
  `--lang` value (any 2-3 letter part without `--lang`; with it, files naming another language are
  ignored). With exactly two unpaired text files and two
  `--lang` values, the files are paired in the order given: `a.txt b.txt --lang de,en` (a is de).
  Three or more files of one name give every pair of them. Different line counts are bad input naming both
  files and the line where one ends. A line that is not UTF-8 is a record-level problem; a pair with an
  empty side is passed over.
- TMX (1.1-1.4): each `<tu>` gives a Pair for every two of its `<tuv>` languages (`xml:lang` or `lang`);
  inline codes (`bpt ept ph it ut`) are dropped, their surrounding text kept. Streamed.
- XCES: OPUS sentence XML (`<s id>` with `<w>` tokens, or plain text in `<s>`) and `cesAlign` alignment
  files (`<linkGrp fromDoc toDoc>` of `<link xtargets="s1 s2;s3">`). The documents named by an alignment
  are looked up among all inputs (zip members included) by path suffix, with or without `.gz`; their
  sentences are joined per link (1:n links join with a space; links with an empty side are skipped).
  Tokenized `<w>` sentences are detokenized with the Moses detokenizer of their language so `raw` is text.
  Sentence XML that no alignment uses is read as Mono (the language from a path part such as
  `xml/en/...`, else `xml:lang`, else a single `--lang`).
- Zip (OPUS releases): members are read in memory, never extracted; a member name with `..` or an
  absolute path is refused. Members are treated as the files above.

Pairs keep the direction of the data (l1 -> l2 of the name/alignment). With `--mono-from-parallel`
each side is also yielded as a Mono. Language codes are kept as written (the pipeline validates them);
TMX region subtags are dropped (`en-US` -> `en`).
"""

from __future__ import annotations

import gzip
import io
import itertools
import re
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from xlp_cli.errors import BadInput
from xlp_cli.prepare.sources import expand_inputs
from xlp_cli.prepare.records import ErrorPolicy, Mono, Pair, SourceOptions
from xlp_cli.prepare.sources._files import ARCHIVE_ERRORS, NOT_LANGS, archive_problem, is_documentation, open_binary

NAME = "opus"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
INLINE_CODE_TAGS = {"bpt", "ept", "ph", "it", "ut"}
_MOSES_OPUS = re.compile(r"^(?P<stem>.+)\.(?P<l1>[A-Za-z_]{2,8})-(?P<l2>[A-Za-z_]{2,8})\.(?P<lang>[A-Za-z_]{2,8})$")


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


def read(inputs: list[Path], opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono | Pair]:
    inputs = expand_inputs(inputs)
    items: list[Item] = []
    for path in inputs:
        items.extend(_items(path, errors))
    moses, tmx, sentence_docs, aligns = [], [], [], []
    for item in items:
        kind = _kind(item)
        {"moses": moses, "tmx": tmx, "xces-sentences": sentence_docs, "xces-align": aligns}[kind].append(item)
    limit = _Limit(opts)
    for a, b, la, lb in _moses_pairs(moses, opts.langs):
        yield from limit(_read_moses(a, b, la, lb, opts, errors))
    for item in tmx:
        yield from limit(_read_tmx(item, opts, errors))
    used: set[str] = set()
    for item in aligns:
        yield from limit(_read_xces_alignment(item, sentence_docs, used, opts, errors))
    for item in sentence_docs:
        if item.name not in used:
            yield from limit(_read_xces_mono(item, opts, errors))


class _Limit:
    """Stops yielding a language / pair once `--max-records` of it were given."""

    def __init__(self, opts: SourceOptions):
        self.max = opts.max_records
        self.count: Counter[str] = Counter()

    def __call__(self, records: Iterator[Mono | Pair]) -> Iterator[Mono | Pair]:
        for r in records:
            if self.max:
                key = r.lang if isinstance(r, Mono) else f"{r.lang1}-{r.lang2}"
                if self.count[key] >= self.max:
                    continue
                self.count[key] += 1
            yield r


# ------------------------------------------------------------------ inputs
def _items(path: Path, errors: ErrorPolicy) -> list[Item]:
    if not zipfile.is_zipfile(path):
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
        out.append(Item(f"{path}!{name}", name, lambda zf=zf, name=name: _open_member(zf, name)))
    return out


def _open_member(zf: zipfile.ZipFile, name: str) -> io.BufferedIOBase:
    f = zf.open(name)
    head = f.peek(2)[:2] if hasattr(f, "peek") else b""
    if head == b"\x1f\x8b":
        return io.BufferedReader(gzip.GzipFile(fileobj=f), 1 << 16)
    return f


def _kind(item: Item) -> str:
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


# ------------------------------------------------------------------ Moses
def _moses_pairs(items: list[Item], langs: list[str]) -> list[tuple[Item, Item, str, str]]:
    groups: dict[str, list[tuple[str, Item]]] = defaultdict(list)
    order: dict[str, tuple[str, str]] = {}
    unnamed: list[Item] = []
    for item in items:
        fname = item.inner.rsplit("/", 1)[-1]
        base = re.sub(r"\.(gz|bz2|xz)$", "", fname)
        folder = item.name[: len(item.name) - len(fname)]
        m = _MOSES_OPUS.match(base)
        if m and m.group("lang") in (m.group("l1"), m.group("l2")):
            key = f"{folder}{m.group('stem')}.{m.group('l1')}-{m.group('l2')}"
            order[key] = (m.group("l1"), m.group("l2"))
            if not langs or m.group("lang") in langs:
                groups[key].append((m.group("lang"), item))
            continue
        parts = base.split(".")
        lang_i = None
        for i in range(len(parts) - 1, 0, -1):
            p = parts[i]
            if (langs and p in langs) or (not langs and re.fullmatch(r"[a-z]{2,3}", p)):
                lang_i = i
                break
        if lang_i is None:
            if langs and any(re.fullmatch(r"[a-z]{2,3}", p) and p not in NOT_LANGS for p in parts[1:]):
                continue  # names another language than --lang asks for (train.fr with --lang de,en)
            unnamed.append(item)
            continue
        key = folder + ".".join(parts[:lang_i] + ["{}"] + parts[lang_i + 1:])
        groups[key].append((parts[lang_i], item))
    pairs = []
    leftovers: list[Item] = list(unnamed)
    for key, members in groups.items():
        if len(members) < 2:
            leftovers.extend(it for _, it in members)
            continue
        if key in order:
            l1, l2 = order[key]
            by = dict(members)
            if l1 in by and l2 in by:
                pairs.append((by[l1], by[l2], l1, l2))
            continue
        members.sort(key=lambda m: (langs.index(m[0]) if m[0] in langs else len(langs), m[0]))
        for (la, a), (lb, b) in itertools.combinations(members, 2):
            pairs.append((a, b, la, lb))
    if leftovers:
        if len(leftovers) == 2 and len(langs) == 2 and not pairs:
            pairs.append((leftovers[0], leftovers[1], langs[0], langs[1]))
        else:
            raise BadInput("cannot pair this text file: name Moses files NAME.l1-l2.l1 + NAME.l1-l2.l2 or NAME.l1 + "
                           "NAME.l2, or give exactly two files with --lang l1,l2", path=leftovers[0].name)
    return pairs


def _read_moses(a: Item, b: Item, la: str, lb: str, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono | Pair]:
    n = 0
    with a.open() as fa, b.open() as fb:
        try:
            for n, (ra, rb) in enumerate(itertools.zip_longest(fa, fb), 1):
                if ra is None or rb is None:
                    short, other = (a, b) if ra is None else (b, a)
                    raise BadInput(f"parallel files differ in length: {short.name} ends at line {n - 1}, "
                                   f"{other.name} goes on (line {n})", path=other.name, position=n)
                try:
                    ta = ra.decode("utf-8").strip()
                    tb = rb.decode("utf-8").strip()
                except UnicodeDecodeError:
                    bad = a if _bad_utf8(ra) else b
                    errors.bad("invalid UTF-8", path=bad.name, position=n)
                    continue
                if not ta or not tb:
                    continue
                origin = f"{a.name}:{n}"
                yield Pair(la, lb, ta, tb, NAME, origin)
                if opts.mono_from_parallel:
                    yield Mono(la, ta, NAME, origin)
                    yield Mono(lb, tb, NAME, f"{b.name}:{n}")
        except ARCHIVE_ERRORS as e:
            errors.bad(archive_problem(e), path=f"{a.name} / {b.name}", position=n + 1)
    if n == 0:
        errors.bad("empty parallel files", path=f"{a.name} / {b.name}")


def _bad_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


# ------------------------------------------------------------------ XML helpers
def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _iterparse(item: Item, errors: ErrorPolicy, events=("end",)) -> Iterator[tuple[str, ET.Element]]:
    """iterparse that turns XML and archive errors into one-line bad input (skippable: keeps what came before)."""
    with item.open() as f:
        try:
            yield from ET.iterparse(f, events=events)
        except ET.ParseError as e:
            line, col = e.position
            errors.bad(f"malformed XML: {e.msg.split(':')[0]}", path=item.name, position=f"{line}:{col}")
        except ARCHIVE_ERRORS as e:
            errors.bad(archive_problem(e), path=item.name)


def _seg_text(seg: ET.Element) -> str:
    """Text of a TMX <seg> without its inline codes."""
    out = [seg.text or ""]
    for child in seg:
        if _local(child.tag) not in INLINE_CODE_TAGS:
            out.append(_seg_text(child))
        out.append(child.tail or "")
    return " ".join("".join(out).split())


def _tmx_lang(code: str) -> str:
    return re.split(r"[-_]", code.strip())[0].lower()


# ------------------------------------------------------------------ TMX
def _read_tmx(item: Item, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono | Pair]:
    root = None
    units = 0
    for event, elem in _iterparse(item, errors, events=("start", "end")):
        if event == "start":
            if root is None:
                root = elem
            continue
        if _local(elem.tag) != "tu":
            continue
        units += 1
        sides: list[tuple[str, str]] = []
        for tuv in elem:
            if _local(tuv.tag) != "tuv":
                continue
            lang = tuv.get(XML_LANG) or tuv.get("lang") or ""
            seg = next((c for c in tuv if _local(c.tag) == "seg"), None)
            if not lang or seg is None:
                continue
            text = _seg_text(seg)
            if text:
                sides.append((_tmx_lang(lang), text))
        sides = [s for s in sides if not opts.langs or s[0] in opts.langs]
        origin = f"{item.name}#tu{units}"
        for (la, ta), (lb, tb) in itertools.combinations(sides, 2):
            if la != lb:
                yield Pair(la, lb, ta, tb, NAME, origin)
        if opts.mono_from_parallel:
            for la, ta in sides:
                yield Mono(la, ta, NAME, origin)
        if root is not None:
            root.clear()
    if units == 0:
        errors.bad("TMX file has no <tu> translation unit", path=item.name)


# ------------------------------------------------------------------ XCES
_DETOK: dict[str, object] = {}


def _detokenize(tokens: list[str], lang: str) -> str:
    from sacremoses import MosesDetokenizer

    if lang not in _DETOK:
        _DETOK[lang] = MosesDetokenizer(lang=lang)
    return _DETOK[lang].detokenize(tokens)


def _sentences(item: Item, lang: str, errors: ErrorPolicy) -> Iterator[tuple[str, str]]:
    """(sentence id, text) of an OPUS sentence XML document, in document order."""
    root = None
    for event, elem in _iterparse(item, errors, events=("start", "end")):
        if event == "start":
            if root is None:
                root = elem
            continue
        if _local(elem.tag) != "s":
            continue
        words = [w.text.strip() for w in elem.iter() if _local(w.tag) == "w" and w.text and w.text.strip()]
        if words:
            text = _detokenize(words, lang)
        else:
            text = " ".join("".join(elem.itertext()).split())
        sid = elem.get("id", "")
        elem.clear()
        if root is not None:
            root.clear()
        yield sid, text


def _doc_lang(item: Item, opts: SourceOptions) -> str:
    parts = re.split(r"[/\\!]", item.inner)
    for part in reversed(parts[:-1]):
        if (opts.langs and part in opts.langs) or (not opts.langs and re.fullmatch(r"[a-z]{2,3}(_[A-Z]{2})?", part)):
            return part
    head = item.head(2048).decode("utf-8", errors="ignore")
    m = re.search(r'xml:lang="([^"]+)"', head)
    if m:
        return m.group(1)
    if len(opts.langs) == 1:
        return opts.langs[0]
    raise BadInput("cannot tell the language of this sentence XML: put it under a folder named by the language "
                   "(xml/en/...) or give one --lang", path=item.name)


def _read_xces_mono(item: Item, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono]:
    lang = _doc_lang(item, opts)
    if opts.langs and lang not in opts.langs:
        return
    n = 0
    for sid, text in _sentences(item, lang, errors):
        n += 1
        if text:
            yield Mono(lang, text, NAME, f"{item.name}#{sid}")
    if n == 0:
        errors.bad("no <s> sentence found", path=item.name)


def _find_doc(ref: str, docs: list[Item]) -> Item | None:
    ref = ref.replace("\\", "/").lstrip("./")
    for cand in (ref, ref[:-3] if ref.endswith(".gz") else ref + ".gz"):
        for d in docs:
            inner = d.inner.replace("\\", "/")
            if inner == cand or inner.endswith("/" + cand):
                return d
    return None


def _ref_lang(ref: str, fallback: str | None) -> str:
    first = ref.replace("\\", "/").lstrip("./").split("/")[0]
    if re.fullmatch(r"[a-z]{2,3}(_[A-Za-z]{2,4})?", first):
        return first
    if fallback:
        return fallback
    raise BadInput(f"cannot tell the language of aligned document {ref!r} (expected a path like en/NAME.xml.gz)")


def _read_xces_alignment(item: Item, docs: list[Item], used: set[str], opts: SourceOptions,
                         errors: ErrorPolicy) -> Iterator[Mono | Pair]:
    groups = 0
    links: list[tuple[list[str], list[str]]] = []
    from_doc = to_doc = None
    for _event, elem in _iterparse(item, errors, events=("end",)):
        tag = _local(elem.tag)
        if tag == "link":
            xt = elem.get("xtargets", "")
            if ";" in xt:
                src, tgt = xt.split(";", 1)
                links.append((src.split(), tgt.split()))
        elif tag == "linkGrp":
            groups += 1
            from_doc, to_doc = elem.get("fromDoc"), elem.get("toDoc")
            yield from _align_group(item, from_doc, to_doc, links, docs, used, opts, errors)
            links = []
            elem.clear()
    if groups == 0:
        errors.bad("cesAlign file has no <linkGrp>", path=item.name)


def _align_group(item: Item, from_doc: str | None, to_doc: str | None, links, docs, used, opts, errors):
    if not from_doc or not to_doc:
        errors.bad("<linkGrp> without fromDoc/toDoc", path=item.name)
        return
    src, tgt = _find_doc(from_doc, docs), _find_doc(to_doc, docs)
    if src is None or tgt is None:
        missing = from_doc if src is None else to_doc
        errors.bad(f"aligned document {missing!r} is not among the inputs (give its sentence XML or the release zip)",
                   path=item.name)
        return
    l1 = _ref_lang(from_doc, None)
    l2 = _ref_lang(to_doc, None)
    used.update((src.name, tgt.name))
    if opts.langs and (l1 not in opts.langs or l2 not in opts.langs):
        return
    s1 = dict(_sentences(src, l1, errors))
    s2 = dict(_sentences(tgt, l2, errors))
    for i, (ids1, ids2) in enumerate(links, 1):
        if not ids1 or not ids2:
            continue
        missing = [x for x in ids1 if x not in s1] + [x for x in ids2 if x not in s2]
        if missing:
            errors.bad(f"link {i} names sentence id {missing[0]!r} that its document does not have", path=item.name,
                       position=f"link {i}")
            continue
        t1 = " ".join(s1[x] for x in ids1 if s1[x])
        t2 = " ".join(s2[x] for x in ids2 if s2[x])
        if not t1 or not t2:
            continue
        origin = f"{item.name}#{from_doc}:{' '.join(ids1)}"
        yield Pair(l1, l2, t1, t2, NAME, origin)
        if opts.mono_from_parallel:
            yield Mono(l1, t1, NAME, origin)
            yield Mono(l2, t2, NAME, origin)
