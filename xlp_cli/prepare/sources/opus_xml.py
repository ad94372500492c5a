"""OPUS XML formats: TMX translation memories and XCES sentence XML with cesAlign alignments (see `opus.py`)."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from typing import Iterator

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.records import ErrorPolicy, Mono, Pair, SourceOptions
from xlp_cli.prepare.sources._files import ARCHIVE_ERRORS, archive_problem
from xlp_cli.prepare.sources.opus_items import NAME, Item

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
INLINE_CODE_TAGS = {"bpt", "ept", "ph", "it", "ut"}


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
def read_tmx(item: Item, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono | Pair]:
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


def read_xces_mono(item: Item, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono]:
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


def read_xces_alignment(item: Item, docs: list[Item], used: set[str], opts: SourceOptions,
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
