"""OPUS Moses format: line-aligned text files, paired by name (see `opus.py` for the naming rules)."""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from typing import Iterator

from xlp_cli.core.errors import BadInput
from xlp_cli.prepare.records import ErrorPolicy, Mono, Pair, SourceOptions
from xlp_cli.prepare.sources._files import (ARCHIVE_ERRORS, LONG_LINE, NOT_LANGS, NUL_IN_LINE, archive_problem,
                                            bounded_lines)
from xlp_cli.prepare.sources.opus_items import NAME, Item

_MOSES_OPUS = re.compile(r"^(?P<stem>.+)\.(?P<l1>[A-Za-z_]{2,8})-(?P<l2>[A-Za-z_]{2,8})\.(?P<lang>[A-Za-z_]{2,8})$")


def moses_pairs(items: list[Item], langs: list[str]) -> list[tuple[Item, Item, str, str]]:
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


def read_moses(a: Item, b: Item, la: str, lb: str, opts: SourceOptions, errors: ErrorPolicy) -> Iterator[Mono | Pair]:
    n = 0
    with a.open() as fa, b.open() as fb:
        try:
            for n, (ra, rb) in enumerate(itertools.zip_longest(bounded_lines(fa), bounded_lines(fb), fillvalue=b""), 1):
                if ra == b"" or rb == b"":
                    short, other = (a, b) if ra == b"" else (b, a)
                    raise BadInput(f"parallel files differ in length: {short.name} ends at line {n - 1}, "
                                   f"{other.name} goes on (line {n})", path=other.name, position=n)
                problem_a, problem_b = _line_problem(ra), _line_problem(rb)
                if problem_a or problem_b:
                    errors.bad(problem_a or problem_b, path=(a if problem_a else b).name, position=n)
                    continue
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


def _line_problem(raw: bytes | None) -> str | None:
    """A line too long to be text (None from bounded_lines) or holding a NUL byte; None for a fine one."""
    if raw is None:
        return LONG_LINE
    return NUL_IN_LINE if b"\x00" in raw else None


def _bad_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True
