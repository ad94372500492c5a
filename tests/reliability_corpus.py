"""The fuzz corpus: bad inputs generated for every stage, each with what xlp must do with it.

A case writes its files under a fresh folder and returns the `xlp` command line. Expected:
- "bad" (the default): exit 2, exactly one line `xlp: error: ...` (no traceback, no "internal error");
- "skip": with `--on-error skip`, exit 0 and the problem counted in the manifest's `skipped`;
and in both cases nothing incomplete left in --out: no temp file, every Parquet file readable, every JSON file
parseable. `untouched`: the mistake is caught before anything is written (--out does not exist afterwards).
Damaged stage folders are copies of the clean outputs of the kill sweep (made on demand).
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import importlib
import io
import json
import lzma
import os
import pickle
import random
import shutil
import zipfile
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq
from reliability_helpers import TEMP, ensure_clean

GOOD = "".join(f"Hello world , sentence number {i} is here .\n" for i in range(40))


@dataclasses.dataclass
class Ctx:
    dir: Path
    work: Path
    z: object

    @property
    def out(self) -> Path:
        return self.dir / "out"

    def file(self, name: str, data: bytes | str) -> Path:
        p = self.dir / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        return p

    def clean(self, stage: str) -> Path:
        """The kill sweep's clean output of `stage` (run now if the sweep did not run)."""
        from test_reliability import STAGE_ARGS

        return ensure_clean(self.z, self.work, STAGE_ARGS.args, stage)

    def copy(self, stage: str) -> Path:
        dest = self.dir / stage
        shutil.copytree(self.clean(stage), dest)
        (dest / ".xlp.lock").unlink(missing_ok=True)
        return dest

    def edit_manifest(self, folder: Path, fn: Callable[[dict], object]) -> None:
        m = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        res = fn(m)
        (folder / "manifest.json").write_text(json.dumps(m if res is None else res), encoding="utf-8")


@dataclasses.dataclass
class Case:
    """`build` returns one command line, or (batch=True) a list of command lines of one class, each checked alike.
    `post(ctx)`: a last check of what the command left (a device still a device)."""
    name: str
    build: Callable[[Ctx], list]
    expect: str = "bad"
    untouched: bool = False
    batch: bool = False
    post: Callable[[Ctx], object] | None = None
    size: int = 1  # commands in a batch


CASES: list[Case] = []


def case(name: str, expect: str = "bad", untouched: bool = False, batch: int = 0,
         post: Callable[[Ctx], object] | None = None):
    """`batch=N`: the case builds N command lines of one class."""
    def deco(fn):
        CASES.append(Case(name, fn, expect, untouched, bool(batch), post, max(batch, 1)))
        return fn
    return deco


def prep(c: Ctx, *inputs, lang: str = "en", extra: tuple = ()) -> list:
    return ["prepare", "--source", "text", "--lang", lang, *inputs, "--out", c.out, *extra]


def _rand(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def _gz(data: str) -> bytes:
    return gzip.compress(data.encode())


# ------------------------------------------------------------------ prepare --source text
TEXT_FILES = {
    "invalid-utf8": b"a good line\nbad \xff\xfe bytes\n",
    "utf16le-no-bom": ("we are here\n" * 20).encode("utf-16-le"),
    "utf16-bom": ("we are here\n" * 20).encode("utf-16"),
    "empty": b"",
    "blank-lines-only": b"\n \n\t\n",
    "truncated-gz": _gz(GOOD * 40)[:300],
    "corrupt-bz2": b"BZh91AY&SY" + _rand(400, 1),
    "truncated-xz": lzma.compress((GOOD * 40).encode())[:200],
    "random-bytes": _rand(3000, 2),
    "nul-bytes": b"abc\x00\x00\x00def\x00\x00\x00ghi\n" * 5,
    "zip-as-text": b"PK\x03\x04" + _rand(200, 3),
}
for _name, _data in TEXT_FILES.items():
    case(f"text-{_name}")(lambda c, d=_data, n=_name: prep(c, c.file(f"{n}.txt", d)))
for _name in ("invalid-utf8", "utf16le-no-bom", "truncated-gz", "empty"):
    case(f"text-{_name}-skip", expect="skip")(
        lambda c, n=_name: prep(c, c.file("good.txt", GOOD), c.file(f"{n}.txt", TEXT_FILES[n]),
                                extra=("--on-error", "skip")))

BAD_FLAGS = {
    "missing-input": lambda c: prep(c, c.dir / "nope.txt"),
    "unknown-lang": lambda c: prep(c, c.file("a.txt", GOOD), lang="english"),
    "valid-fraction-1.5": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--valid-fraction", "1.5")),
    "valid-fraction-inf": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--valid-fraction", "inf")),
    "lid-threshold-nan": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--lid-threshold", "nan")),
    "min-above-max": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--min-tokens", "5", "--max-tokens", "2")),
    "workers-0": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--workers", "0")),
    "chunk-size-0": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--chunk-size", "0")),
    "source-unknown": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--source", "pdf")),
    "config-unknown-key": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--config", c.file("c.toml", "codez = 5\n"))),
    "config-invalid-toml": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--config", c.file("c.toml", "a = [\n"))),
    "config-not-utf8": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--config", c.file("c.toml", b"a = \"\xff\"\n"))),
    "config-missing": lambda c: prep(c, c.file("a.txt", GOOD), extra=("--config", c.dir / "none.toml")),
}
for _name, _fn in BAD_FLAGS.items():
    case(f"prepare-{_name}", untouched=True)(_fn)


case("prepare-no-lang-in-name")(lambda c: prep(c, c.file("a.txt", GOOD), lang="en,fr"))
case("prepare-name-says-other-lang")(lambda c: prep(c, c.file("a.de.txt", GOOD), lang="en,fr"))


@case("prepare-out-is-a-file")
def _(c):
    c.file("out", "I am a file\n")
    return prep(c, c.file("a.txt", GOOD))


@case("prepare-out-parent-is-a-file")
def _(c):
    c.file("parent", "a file\n")
    return ["prepare", "--source", "text", "--lang", "en", c.file("a.txt", GOOD), "--out", c.dir / "parent" / "out"]


@case("prepare-out-foreign-folder")
def _(c):
    c.file("out/notes.txt", "my notes\n")
    return prep(c, c.file("a.txt", GOOD))


# ------------------------------------------------------------------ other sources
WET_RECORD = ("WARC/1.0\r\nWARC-Type: conversion\r\nWARC-Target-URI: http://x/{i}\r\nContent-Type: text/plain\r\n"
              "Content-Length: {n}\r\n\r\n{body}\r\n\r\n")


def _wet(bodies: list[str], cut: int = 0) -> bytes:
    out = "".join(WET_RECORD.format(i=i, n=len(b.encode()), body=b) for i, b in enumerate(bodies)).encode()
    return out[:-cut] if cut else out


def source(c: Ctx, name: str, *inputs, lang: str = "en") -> list:
    return ["prepare", "--source", name, "--lang", lang, *inputs, "--out", c.out]


case("wet-not-warc")(lambda c: source(c, "commoncrawl", c.file("a.wet", "hello there\n")))
case("wet-cut-inside-record")(lambda c: source(c, "commoncrawl", c.file("a.wet", _wet(["This is an English page " * 20] * 2, 200))))
case("wet-gz-truncated")(lambda c: source(c, "commoncrawl", c.file("a.wet.gz", gzip.compress(_wet(["An English page " * 40] * 3))[:-60])))
case("wet-cut-skip", expect="skip")(lambda c: source(c, "commoncrawl", c.file("a.wet", _wet(["This is an English page " * 20] * 2, 200)), "--on-error", "skip"))


def _zip(members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return buf.getvalue()


MOSES = {"c.en-fr.en": GOOD, "c.en-fr.fr": GOOD.replace("Hello", "Bonjour")}
case("opus-zip-truncated")(lambda c: source(c, "opus", c.file("c.zip", _zip(MOSES)[:150]), lang="en,fr"))
case("opus-zip-slip")(lambda c: source(c, "opus", c.file("c.zip", _zip({"../evil.en-fr.en": GOOD, "../evil.en-fr.fr": GOOD})), lang="en,fr"))
case("opus-moses-length")(lambda c: source(c, "opus", c.file("c.en-fr.en", GOOD), c.file("c.en-fr.fr", "one line\n"), lang="en,fr"))
case("opus-unpairable")(lambda c: source(c, "opus", c.file("c.txt", GOOD), lang="en,fr,de"))
case("opus-tmx-cut")(lambda c: source(c, "opus", c.file("c.tmx", "<tmx version='1.4'><body><tu><tuv xml:lang='en'><seg>Hi"), lang="en,fr"))
case("wiki-not-xml")(lambda c: source(c, "wikipedia", c.file("enwiki.xml.bz2", bz2.compress(b"not xml at all\n" * 10))))
case("wiki-random")(lambda c: source(c, "wikipedia", c.file("enwiki.xml", _rand(2000, 4))))
case("gettext-corrupt-mo")(lambda c: ["prepare", "--source", "gettext", "--lang", "de", c.file("loc/de/LC_MESSAGES/x.mo", b"\xde\x12\x04\x95" + _rand(64, 5)), "--out", c.out])


# ------------------------------------------------------------------ damaged stage folders (bpe learn/apply)
def learn(c: Ctx, data: Path, *extra) -> list:
    return ["bpe", "learn", "--data", data, "--codes", "50", "--out", c.out, *extra]


def _first_shard(m: dict) -> str:
    return sorted(m["outputs"]["shards"])[0]


def damaged_prepare(fn):
    def build(c: Ctx):
        d = c.copy("prepare")
        m = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
        fn(c, d, m)
        return learn(c, d)
    return build


PREPARE_DAMAGE = {
    "shard-deleted": lambda c, d, m: (d / _first_shard(m)).unlink(),
    "shard-truncated": lambda c, d, m: (d / _first_shard(m)).write_bytes((d / _first_shard(m)).read_bytes()[:-10]),
    "shard-bitflip": lambda c, d, m: _flip(d / _first_shard(m)),
    "shard-unlisted": lambda c, d, m: shutil.copy(d / _first_shard(m), (d / _first_shard(m)).with_name("part-00099.parquet")),
    "shard-path-escape": lambda c, d, m: c.edit_manifest(d, lambda x: x["outputs"]["shards"].update({"../../../../etc/passwd": {}})),
    "shard-path-absolute": lambda c, d, m: c.edit_manifest(d, lambda x: x["outputs"]["shards"].update({"/etc/passwd": {}})),
    "manifest-json-list": lambda c, d, m: c.edit_manifest(d, lambda x: [x]),
    "manifest-corrupt": lambda c, d, m: (d / "manifest.json").write_text("{\"stage\": \"prep", encoding="utf-8"),
    "manifest-not-utf8": lambda c, d, m: (d / "manifest.json").write_bytes(b"{\"stage\": \"\xff\"}"),
    "manifest-no-stage": lambda c, d, m: c.edit_manifest(d, lambda x: x.pop("stage")),
    "manifest-config-not-object": lambda c, d, m: c.edit_manifest(d, lambda x: x.update(config=5)),
    "manifest-outputs-not-object": lambda c, d, m: c.edit_manifest(d, lambda x: x.update(outputs=[1, 2])),
    "manifest-upstream-no-path": lambda c, d, m: c.edit_manifest(d, lambda x: x.update(stage="other", upstream=[{"stage": "prepare"}])),
}
for _name, _fn in PREPARE_DAMAGE.items():
    case(f"bpe-learn-{_name}")(damaged_prepare(_fn))


def _flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x40
    p.write_bytes(bytes(data))


case("bpe-learn-data-missing", untouched=True)(lambda c: learn(c, c.dir / "nothing"))
case("bpe-learn-data-not-a-stage", untouched=True)(lambda c: learn(c, c.file("empty/readme.txt", "x").parent))
case("bpe-learn-codes-0", untouched=True)(lambda c: learn(c, c.clean("prepare"), "--codes", "0"))
case("bpe-learn-wrong-stage", untouched=True)(lambda c: learn(c, c.file("ev/manifest.json", '{"stage": "evaluate"}').parent))


def damaged_learn(fn):
    def build(c: Ctx):
        d = c.copy("bpe-learn")
        c.edit_manifest(d, lambda m: fn(m))
        return ["bpe", "apply", "--data", c.clean("prepare"), "--data", d, "--out", c.out]
    return build


case("bpe-apply-codes-absolute")(damaged_learn(lambda m: m["tokenizer"].update(codes="/etc/passwd")))
case("bpe-apply-codes-escape")(damaged_learn(lambda m: m["tokenizer"].update(codes="../../../../../etc/passwd")))
case("bpe-apply-dict-escape")(damaged_learn(lambda m: m["tokenizer"].update(dict="../../../../../etc/passwd")))
case("bpe-apply-codes-garbage")(lambda c: ["bpe", "apply", "--data", c.clean("prepare"), "--codes",
                                           c.file("codes", _rand(500, 6)), "--vocab", c.file("vocab", "a 1\n"), "--out", c.out])


# ------------------------------------------------------------------ vocab-score
def damaged_ids(fn):
    def build(c: Ctx):
        d = c.copy("bpe-apply")
        m = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
        fn(c, d, m)
        return ["vocab-score", "--data", d, "--k", "20", "--out", c.out]
    return build


case("vocab-dictionary-escape")(damaged_ids(lambda c, d, m: c.edit_manifest(d, lambda x: x.update(dictionary="../../../../../etc/passwd"))))
case("vocab-shard-deleted")(damaged_ids(lambda c, d, m: (d / _first_shard(m)).unlink()))
case("vocab-dict-changed")(damaged_ids(lambda c, d, m: (d / "dict.txt").write_text("zz 5\n", encoding="utf-8")))
case("vocab-dict-binary")(damaged_ids(lambda c, d, m: c.edit_manifest(d, lambda x: x.pop("dictionary_sha256")) or (d / "dict.txt").write_bytes(_rand(300, 7))))
case("vocab-k-0", untouched=True)(lambda c: ["vocab-score", "--data", c.clean("bpe-apply"), "--k", "0", "--out", c.out])
case("vocab-on-prepare", untouched=True)(lambda c: ["vocab-score", "--data", c.clean("prepare"), "--out", c.out])


# ------------------------------------------------------------------ pretrain
def pretrain(c: Ctx, *extra, data: tuple = ()) -> list:
    from test_reliability import PRETRAIN

    data = data or ("--data", c.clean("bpe-apply"))
    return ["pretrain", *data, "--out", c.out, *PRETRAIN, *extra]


PRETRAIN_FLAGS = {"lr-nan": ("--lr", "nan"), "lr-inf": ("--lr", "inf"), "lr-negative": ("--lr", "-1"),
                  "max-steps-negative": ("--max-steps", "-1"), "betas-nan": ("--adam-betas", "0.9,nan"),
                  "dropout-1.5": ("--dropout", "1.5"), "encoding-bogus": ("--lang-encoding", "bogus"),
                  "warmup-negative": ("--warmup", "-5"), "mask-probs": ("--mask-probs", "0.5,0.5,0.5")}
for _name, _flags in PRETRAIN_FLAGS.items():
    case(f"pretrain-{_name}", untouched=True)(lambda c, f=_flags: pretrain(c, *f))
case("pretrain-data-is-prepare", untouched=True)(lambda c: pretrain(c, data=("--data", c.clean("prepare"))))
case("pretrain-vle-without-scores", untouched=True)(lambda c: pretrain(c, "--lang-encoding", "vle"))


def resumed_run(fn):
    """A copy of the clean pretrain run, damaged, then resumed with more steps (it must refuse, run nothing)."""
    def build(c: Ctx):
        d = c.copy("pretrain")
        shutil.move(d, c.out)
        fn(c, c.out / "checkpoints" / "last")
        from test_reliability import STAGE_ARGS

        return [*STAGE_ARGS.args["pretrain"], "--out", c.out, "--max-steps", "30"]
    return build


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch /tmp/xlp-reliability-pwned",))


def _pickle_state(c: Ctx, last: Path) -> None:
    (last / "state.pt").write_bytes(pickle.dumps({"optimizer": _Payload()}))
    meta = json.loads((last / "meta.json").read_text(encoding="utf-8"))
    from hashlib import sha256

    meta["sha256"]["state.pt"] = sha256((last / "state.pt").read_bytes()).hexdigest()  # the hash check passes
    (last / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


def _meta(last: Path, **changes) -> None:
    meta = json.loads((last / "meta.json").read_text(encoding="utf-8"))
    meta.update(changes)
    (last / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


case("resume-pickled-state")(resumed_run(_pickle_state))
case("resume-weights-bitflip")(resumed_run(lambda c, last: _flip(last / "model.safetensors")))
case("resume-bad-rng")(resumed_run(lambda c, last: _meta(last, rng={"torch": [1, 2, 3], "numpy": "x"})))
case("resume-meta-corrupt")(resumed_run(lambda c, last: (last / "meta.json").write_text("{", encoding="utf-8")))
case("resume-model-json-changed")(resumed_run(lambda c, last: (last.parent.parent / "model.json").write_text(
    json.dumps({"kind": "encoder", "d_model": 999}), encoding="utf-8")))


# ------------------------------------------------------------------ recipes (checked before anything runs)
def recipe(c: Ctx, body: str) -> list:
    return ["run", c.file("r.toml", f"[recipe]\nout = \"{c.out}\"\n" + body)]


PREP_TABLE = "[prepare]\nsource = \"text\"\nlang = [\"en\"]\ninputs = [\"{f}\"]\n"
RECIPES = {
    "unknown-key": "[bpe]\ncodez = 5\n",
    "bad-value": "[bpe]\ncodes = 100\n[[pretrain]]\nmax-steps = -1\n",
    "lr-nan": "[bpe]\ncodes = 100\n[[pretrain]]\nlr = nan\n",
    "name-escape": "[bpe]\ncodes = 100\n[[pretrain]]\nname = \"../../../x\"\n",
    "out-outside-root": "[bpe]\ncodes = 100\nout = \"/tmp/xlp-reliability-elsewhere\"\n",
    "unknown-stage": "[bpee]\ncodes = 5\n",
    "unknown-ref": "[bpe]\ncodes = 100\ndata = [\"@nothing\"]\n",
    "not-toml": "[bpe\n",
}
for _name, _body in RECIPES.items():
    case(f"recipe-{_name}", untouched=True)(lambda c, b=_body: recipe(c, PREP_TABLE.format(f=c.file("a.txt", GOOD)) + b))


# ------------------------------------------------------------------ translate, evaluate, finetune
case("translate-output-is-folder", untouched=True)(lambda c: ["translate", "--model", c.dir, "--src-lang", "en",
                                                                "--tgt-lang", "fr", "--output", c.file("dir/x", "").parent])


def fake_finetune(c: Ctx, preds: bytes) -> Path:
    d = c.dir / "ft"
    c.file("ft/manifest.json", json.dumps({"stage": "finetune", "config": {"task": "xnli"}}))
    c.file("ft/predictions/seed1/test.en.jsonl", preds)
    return d


case("evaluate-binary-predictions")(lambda c: ["evaluate", "--task", "xnli", "--data", fake_finetune(c, _rand(500, 8)), "--out", c.out])
case("evaluate-list-predictions")(lambda c: ["evaluate", "--task", "xnli", "--data", fake_finetune(c, b"[1, 2]\n"), "--out", c.out])
case("evaluate-name-escape", untouched=True)(lambda c: ["evaluate", "--task", "analysis", "--data", c.dir, "--name", "../x", "--out", c.out])
XNLI_TSV = "language\tgold_label\tsentence1\tsentence2\n" + "".join(
    f"{lang}\tentailment\tA man sleeps .\tSomeone sleeps .\n" for lang in ("en", "fr") for _ in range(3))
case("finetune-binary-train-file")(lambda c: ["finetune", "--task", "xnli", "--data", c.clean("pretrain"), "--train-file",
                                              c.file("train.tsv", _rand(800, 9)), "--dev-file", c.file("dev.tsv", XNLI_TSV),
                                              "--test-file", c.file("test.tsv", XNLI_TSV), "--out", c.out])
case("finetune-lr-nan", untouched=True)(lambda c: ["finetune", "--task", "xnli", "--data", c.dir, "--lr", "nan", "--out", c.out])


# ------------------------------------------------------------------ finetune --task unmt, evaluate --task claims
UNMT = ("--lang", "en,fr", "--max-steps", "2", "--batch-sentences", "4", "--max-len", "16", "--warmup", "0",
        "--threads", "1")


def unmt(c: Ctx, damage: Callable[[Path], object] = lambda d: None, *extra) -> list:
    d = c.copy("bpe-apply")
    damage(d)
    return ["finetune", "--task", "unmt", "--data", d, *UNMT, *extra, "--out", c.out]


UNMT_CASES = {
    "dictionary-escape": lambda c: unmt(c, lambda d: c.edit_manifest(d, lambda x: x.update(dictionary="../../../../../etc/passwd"))),
    "dictionary-absolute": lambda c: unmt(c, lambda d: c.edit_manifest(d, lambda x: x.update(dictionary="/etc/passwd"))),
    "dict-changed": lambda c: unmt(c, lambda d: (d / "dict.txt").write_text("zz 5\n", encoding="utf-8")),
    "shard-deleted": lambda c: unmt(c, lambda d: (d / _first_shard(json.loads((d / "manifest.json").read_text()))).unlink()),
    "upstream-without-path": lambda c: unmt(c, lambda d: c.edit_manifest(d, lambda x: x.update(upstream=[{"stage": "prepare"}]))),
    "lr-nan": lambda c: unmt(c, lambda d: None, "--lr", "nan"),
    "one-language": lambda c: unmt(c, lambda d: None, "--lang", "en,de"),
    "foreign-out": lambda c: (c.file("out/notes.txt", "mine\n"), unmt(c))[1],
    "eval-files-differ": lambda c: unmt(c, lambda d: None, "--test-data", c.file("t.en", GOOD),
                                        "--test-data", c.file("t.fr", GOOD[: len(GOOD) // 2])),
    "eval-file-binary": lambda c: unmt(c, lambda d: None, "--test-data", c.file("t.en", _rand(400, 11)),
                                       "--test-data", c.file("t.fr", GOOD)),
}
for _name, _build in UNMT_CASES.items():
    case(f"unmt-{_name}", untouched=True)(_build)


def claims_of(c: Ctx, upstream: list) -> list:
    c.file("ft/manifest.json", json.dumps({"stage": "finetune", "config": {"task": "xnli"}, "upstream": upstream}))
    return ["evaluate", "--task", "claims", "--data", c.dir / "ft", "--out", c.out]


def _seedless_pretrain(c: Ctx) -> Path:
    d = c.copy("pretrain")
    c.edit_manifest(d, lambda m: m["config"].update(seed="three"))
    return d


case("claims-upstream-without-path")(lambda c: claims_of(c, [{"stage": "pretrain"}]))
case("claims-upstream-not-pretrain")(lambda c: claims_of(c, [{"stage": "pretrain", "path": str(c.clean("bpe-apply"))}]))
case("claims-seed-not-integer")(lambda c: claims_of(c, [{"stage": "pretrain", "path": str(_seedless_pretrain(c))}]))


# ------------------------------------------------------------------ issue 30's generated classes
BEFORE_ISSUE_30 = len(CASES)
importlib.import_module("reliability_issue30")  # registers its cases here (it imports the helpers above)


# ------------------------------------------------------------------ the check
def n_commands() -> int:
    """How many commands the corpus runs (a batch case counts each of its commands), without building them."""
    return sum(c.size for c in CASES)


def check_case(z, work: Path, case: Case) -> None:
    c = Ctx(work / "fuzz" / case.name, work, z)
    shutil.rmtree(c.dir, ignore_errors=True)
    c.dir.mkdir(parents=True)
    built = case.build(c)
    for args in built if case.batch else [built]:
        if case.batch:
            shutil.rmtree(c.out, ignore_errors=True)  # (each command of a batch into a fresh --out)
        _check_one(z, c, case, args)
    if case.post is not None:
        case.post(c)


def _check_one(z, c: Ctx, case: Case, args: list) -> None:
    rc, text = z.run(*args)
    lines = [x for x in text.strip().splitlines() if x.strip()]
    assert "Traceback" not in text and "internal error" not in text, text
    if case.expect in ("bad", "fail"):
        assert rc == (2 if case.expect == "bad" else 1), f"exit {rc}: {args} {text}"
        assert len(lines) == 1 and lines[0].startswith("xlp: error: "), text
    elif case.expect == "ok":
        assert rc == 0, text
    else:
        assert rc == 0, text
        m = json.loads((c.out / "manifest.json").read_text(encoding="utf-8"))
        assert sum(m["skipped"].values()) >= 1, m["skipped"]
    assert not Path("/tmp/xlp-reliability-pwned").exists(), "a pickle payload ran"
    assert not Path("/tmp/xlp-reliability-elsewhere").exists(), "a recipe wrote outside its root"
    if case.untouched:
        assert not c.out.exists() or not any(p for p in c.out.iterdir() if p.name != "notes.txt"), \
            sorted(p.name for p in c.out.iterdir())
    for p in (c.out.rglob("*") if c.out.is_dir() else []):
        assert not TEMP.match(p.name), f"left behind: {p}"
        if p.suffix == ".parquet":
            pq.read_metadata(p)
        elif p.suffix == ".json" and "checkpoints" not in p.parts:  # (the resume cases damage meta.json)
            json.loads(p.read_text(encoding="utf-8"))
