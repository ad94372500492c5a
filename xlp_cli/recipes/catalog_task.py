"""The classification task `xlp run` derives from gettext catalogs when XNLI/MultiNLI are not available.

Task ("does the hypothesis translate the premise?", 3 labels, XNLI TSV format plus a `premise_language`
column): for each catalog entry i of `xlp prepare`'s parallel shards (English e_i, translation x_i in language l),
    entailment     premise e_i (en), hypothesis x_i          (its translation)
    neutral        premise e_i (en), hypothesis x_j, j != i, where e_j shares a word of 4+ letters with e_i
                   (a related message, e.g. "Open file" / "Save file")
    contradiction  premise e_i (en), hypothesis x_k, a random unrelated message
Entries without a related message are left out, so the three labels stay balanced. The pairs of all of the
prepare run's splits are pooled and split again by a hash of the English message (80% train, 10% dev, 10% test),
so a message and its translation land in one split only. The premise is encoded with the
English pipeline and language, the hypothesis with language l, so it tests the cross-lingual alignment that
the language encodings are about. It is a stand-in that keeps the demo runnable offline, not XNLI.
"""

from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path

from xlp_cli.artifacts.files import data_dir, write_text_atomic
from xlp_cli.artifacts.manifest import try_read_manifest
from xlp_cli.artifacts import layout
from xlp_cli.artifacts.shards import iter_batches, shard_paths
from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput

WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)
HEADER = "language\tpremise_language\tgold_label\tsentence1\tsentence2\n"


def _pairs(prep: Path, split: str) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for folder in [layout.read_dir(prep, split, g) for g in layout.groups(prep, split) if "-" in g]:
        for batch in iter_batches(shard_paths(folder), ["lang1", "lang2", "raw1", "raw2"]):
            d = batch.to_pydict()
            for l1, l2, r1, r2 in zip(d["lang1"], d["lang2"], d["raw1"], d["raw2"]):
                if l1 == "en" and l2 != "en":
                    out.setdefault(l2, []).append((r1, r2))
                elif l2 == "en" and l1 != "en":
                    out.setdefault(l1, []).append((r2, r1))
    return out


def _clean(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def _rows(lang: str, pairs: list[tuple[str, str]], rng: random.Random, limit: int) -> list[str]:
    pairs = [(_clean(e), _clean(x)) for e, x in pairs if _clean(e) and _clean(x)]
    words = [set(w.lower() for w in WORD.findall(e)) for e, _ in pairs]
    by_word: dict[str, list[int]] = {}
    for i, ws in enumerate(words):
        for w in ws:
            by_word.setdefault(w, []).append(i)
    order = list(range(len(pairs)))
    rng.shuffle(order)
    rows: list[str] = []
    for i in order:
        related = None
        ws = sorted(words[i])
        for _ in range(20 if ws else 0):
            cands = by_word[rng.choice(ws)]
            j = cands[rng.randrange(len(cands))]
            if j != i and pairs[j][1] != pairs[i][1]:
                related = j
                break
        unrelated = None
        for _ in range(20):
            k = rng.randrange(len(pairs))
            if k != i and not (words[k] & words[i]) and pairs[k][1] != pairs[i][1]:
                unrelated = k
                break
        if related is None or unrelated is None:
            continue
        e = pairs[i][0]
        for label, j in (("entailment", i), ("neutral", related), ("contradiction", unrelated)):
            rows.append(f"{lang}\ten\t{label}\t{e}\t{pairs[j][1]}\n")
        if limit and len(rows) >= limit:
            break
    return rows


def derive(prep: Path, out: Path, *, seed: int = 0, max_train: int = 6000, max_eval: int = 600) -> dict[str, object]:
    """Write out/{train,dev,test}.tsv; returns their paths, the row counts and the best training language."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    result: dict[str, object] = {}
    counts: dict[str, dict[str, int]] = {}
    # every split's pairs, re-split by a hash of the English message: 80% train, 10% dev, 10% test
    pooled: dict[str, list[tuple[str, str]]] = {}
    for split in ("train", "valid", "test"):
        for lang, pairs in _pairs(prep, split).items():
            pooled.setdefault(lang, []).extend(pairs)
    available = {l: len(p) for l, p in pooled.items()}
    parts: dict[str, dict[str, list[tuple[str, str]]]] = {"train": {}, "dev": {}, "test": {}}
    for lang, pairs in pooled.items():
        for e, x in pairs:
            h = int(hashlib.sha1(e.encode("utf-8")).hexdigest()[:8], 16) % 10
            parts["dev" if h == 0 else "test" if h == 1 else "train"].setdefault(lang, []).append((e, x))
    for name, limit in (("train", max_train), ("dev", max_eval), ("test", max_eval)):
        lines = [HEADER]
        for lang in sorted(parts[name]):
            rows = _rows(lang, parts[name][lang], rng, limit)
            counts.setdefault(name, {})[lang] = len(rows)
            lines += rows
        write_text_atomic(out / f"{name}.tsv", "".join(lines))
        result[f"{name}_file"] = str(out / f"{name}.tsv")
    train_counts = counts.get("train", {})
    if not train_counts or max(train_counts.values()) == 0:
        raise_no_pairs(prep)
    result["train_lang"] = max(sorted(train_counts), key=lambda l: (train_counts[l], available.get(l, 0)))
    result["counts"] = counts
    return result


def raise_no_pairs(prep: Path) -> None:
    raise BadInput("cannot derive a classification task: the prepare output has no English-parallel pairs "
                   "(use --source gettext, or provide XNLI/MultiNLI under XLP_DATA_DIR)", path=prep)


XNLI_FILES = {"train-file": "mnli_en/mnli_train.tsv", "dev-file": "xnli/xnli.dev.tsv", "test-file": "xnli/xnli.test.tsv"}


def catalog_task_fallback(what: str, values: dict, prepare_out: Path | None, root: Path) -> bool:
    """XNLI fine-tuning of a recipe (its entry's `values`, changed in place) without the XNLI/MultiNLI files:
    derive a task from the catalogs of the recipe's finished [prepare] output, and say so (True)."""
    v = values
    if v.get("task", "xnli") != "xnli" or any(k in v or k.replace("-", "_") in v for k in XNLI_FILES):
        return False
    data = data_dir()
    missing = [str(data / rel) for rel in XNLI_FILES.values() if not (data / rel).is_file()]
    if not missing:
        return False
    if prepare_out is None or not try_read_manifest(prepare_out):
        raise BadInput(f"XNLI/MultiNLI not found ({missing[0]}) and the recipe has no finished [prepare] stage "
                       "to derive a classification task from")
    task = derive(prepare_out, root / "derived-task")
    ui.warn(f"XNLI/MultiNLI not found under {data} (missing {missing[0]}): fine-tuning {what} on a classification task "
            f"derived from the gettext catalogs instead ({root / 'derived-task'}; does a message translate "
            f"another? see docs/recipes.md), training on {task['train_lang']}. These are not XNLI numbers.")
    for key in XNLI_FILES:
        v[key] = task[key.replace("-", "_")]
    v.setdefault("train-lang", task["train_lang"])
    return True
