"""Sentences linked by translation: the groups behind `--unpair` and `--split-by sentences`.

Every pair links its two sentences (a sentence is its language plus its text as read, `sentence_key`); a sentence
that occurs in several pairs ties them together. In a multi-way corpus such as Multi30k (train.de, train.en,
train.fr, line-aligned) one line's three captions form one group, through the pairs de-en, de-fr and en-fr.

- `--unpair` keeps one side of each group (`unpair_plan`).
- `--split-by sentences` puts every pair of a group (and, with --mono-from-parallel, every sentence of it as a
  mono record) in the same split, drawn from the group's smallest key. No sentence of a valid or test pair then
  occurs in a training record of any pair, which zero-shot evaluation needs: with the default `--split-by pair`,
  94% of Multi30k's de-fr test sentences were training sentences of de-en or en-fr (measured, docs/prepare.md).

Memory: one entry per distinct sentence (a first read of the source builds it, as --unpair's does).
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Iterator

from xlp_cli.prepare.records import Mono, Pair, Record, sentence_key


class SentenceGroups:
    """Union-find over sentence keys; the smallest key of a group is its root."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        parent = self.parent
        root = x
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def link(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def pair_keys(rec: Pair) -> tuple[tuple[str, str, int], tuple[str, str, int]]:
    """The two sides of a pair in language order, each (lang, text, key)."""
    (la, ta), (lb, tb) = sorted([(rec.lang1, rec.text1), (rec.lang2, rec.text2)])
    return (la, ta, sentence_key(la, ta)), (lb, tb, sentence_key(lb, tb))


def group_u(root: int) -> int:
    """The 64-bit split value of a group (uniform like the content hash's `u`, which it replaces)."""
    digest = hashlib.blake2b(b"split\x00" + root.to_bytes(8, "big"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def split_plan(records: Iterable[Record]) -> dict[int, int]:
    """`--split-by sentences`, first read of the source: {sentence key: its group's split value}."""
    groups = SentenceGroups()
    for r in records:
        if isinstance(r, Pair):
            (_, _, ka), (_, _, kb) = pair_keys(r)
            groups.link(ka, kb)
    roots: dict[int, int] = {}
    plan = {}
    for key in groups.parent:
        root = groups.find(key)
        u = roots.get(root)
        if u is None:
            u = roots[root] = group_u(root)
        plan[key] = u
    return plan


def with_group_u(task: tuple, rec: Mono | Pair, plan: dict[int, int]) -> tuple:
    """The worker task of `rec` with its group's split value appended (process.py uses it instead of the
    content hash's); a mono sentence that no pair contains keeps its content split."""
    if type(rec) is Pair:  # either side's key: both are in the group (one hash per record on this path)
        return (*task, plan[sentence_key(rec.lang1, rec.text1)])
    u = plan.get(sentence_key(rec.lang, rec.text))
    return task if u is None else (*task, u)


def unpair_plan(records: Iterable[Record]) -> frozenset[int]:
    """`--unpair`, first read of the source: the keys of the sentences to keep so that every pair gives ONE side
    and no sentence has its translation in the output (the unsupervised-MT setting of Lample et al. 2018 on a
    parallel corpus such as Multi30k).

    A group keeps the sentences of the alphabetically first language when its smallest key is even, else those
    of the other. All the pairs that share a sentence therefore give the same language, which makes the
    guarantee exact (a caption repeated with two different translations cannot leak), and about half the groups
    give each language. One language pair only (the config checks it)."""
    groups = SentenceGroups()
    pairs = []
    for r in records:
        if isinstance(r, Pair):
            (_, _, ka), (_, _, kb) = pair_keys(r)
            pairs.append((ka, kb))
            groups.link(ka, kb)
    return frozenset(ka if groups.find(ka) % 2 == 0 else kb for ka, kb in pairs)


def unpair(rec: Pair, keep: frozenset[int]) -> Mono:
    """The side of a pair that `unpair_plan` keeps, as a Mono."""
    (la, ta, ka), (lb, tb, _) = pair_keys(rec)
    return Mono(la, ta, rec.source, rec.origin) if ka in keep else Mono(lb, tb, rec.source, rec.origin)
