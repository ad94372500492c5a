"""The fuzz corpus's generated cases of issue 30's classes (registered into reliability_corpus.CASES).

- numeric ranges: every numeric field of pretrain, bpe learn/apply, vocab-score, prepare, text, translate and
  evaluate --task claims, read from the config dataclasses' declared ranges: a value below, above, and NaN/inf
  (floats) or a non-integer (integers); plus divisibility and 5,000-digit integers;
- bounded parsers: TOML, JSON and JSONL nested 100,000 deep, and 5,000-digit integers in them;
- safe outputs: devices (our own mknod nodes, never the real /dev/full), folders, /proc, /sys, the input, a hard
  link of it, a path inside an input folder, `--out` on kernel file systems;
- bounded readers: trailing garbage in every format and source, expansion and size caps (small flags keep the
  cases cheap; one zip bomb at the default limits), encrypted and unknown-method zip members;
- broken input: WET Content-Length values, NUL bytes inside lines on every read path, archives given as text,
  corrupt .mo catalogs, manifests whose shard list is empty, malformed or missing while shards are there.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import io
import json
import lzma
import math
import os
import re
import stat
import struct
import tarfile
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from reliability_corpus import GOOD, MOSES, Ctx, _first_shard, _wet, case, damaged_prepare, learn, prep, source
from sources_helpers import zip_bytes

from xlp_cli.bpe.config import BpeApplyConfig, BpeLearnConfig
from xlp_cli.core.config import _base_type, field_types
from xlp_cli.prepare.config import PrepareConfig
from xlp_cli.tasks.evaluate_configs import ClaimsConfig
from xlp_cli.tasks.translation.config import TranslateConfig
from xlp_cli.text.config import TextConfig
from xlp_cli.train.config import PretrainConfig
from xlp_cli.vocab.config import VocabConfig

BIG_INT = "9" * 5000
DEEP = 100_000
COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}
GOOD_B = GOOD.encode()


# ------------------------------------------------------------------ numeric ranges
def bad_values(f: dataclasses.Field, tp: type) -> list[tuple[str, str]]:
    """(kind, value) of the values a field must refuse: below and above its declared range, NaN / inf for a
    float, a non-integer for an integer."""
    r = f.metadata.get("range")
    if r is None:
        return []
    out = []
    low = r.lo if r.lo is not None else r.gt
    high = r.hi if r.hi is not None else r.lt
    if low is not None and math.isfinite(low):
        below = low if r.lo is None else (low - 1 if tp is int else low - max(abs(low) * 0.5, 0.5))
        out.append(("below", _num(below, tp)))
    if high is not None and math.isfinite(high):
        above = high if r.hi is None else (high + 1 if tp is int else high + max(abs(high), 1.0))
        out.append(("above", _num(above, tp)))
    elif tp is float:
        out.append(("inf", "inf"))
    out.append(("nan", "nan") if tp is float else ("fraction", "1.5"))
    return out


def _num(v: float, tp: type) -> str:
    return str(int(v)) if tp is int else repr(float(v))


def numeric_fields(cls: type, skip: tuple[str, ...] = ()) -> list[tuple[str, type, list[tuple[str, str]]]]:
    hints = field_types(cls)
    out = []
    for f in dataclasses.fields(cls):
        tp, _ = _base_type(hints[f.name])
        if tp in (int, float) and f.name not in skip and not f.metadata.get("argument"):
            if values := bad_values(f, tp):
                out.append((f.name, tp, values))
    return out


def _pretrain(c: Ctx, *extra, data: tuple = ()) -> list:
    from reliability_corpus import pretrain

    return pretrain(c, *extra, data=data)


def _translate(c: Ctx, *extra) -> list:
    return ["translate", "--model", c.dir, "--src-lang", "en", "--tgt-lang", "fr", c.file("in.txt", GOOD), *extra]


COMMANDS = {  # command -> (config, how to build its command line with extra flags, fields left out)
    "pretrain": (PretrainConfig, _pretrain, ()),
    "bpe-learn": (BpeLearnConfig, lambda c, *x: learn(c, c.clean("prepare"), *x), ()),
    "bpe-apply": (BpeApplyConfig, lambda c, *x: ["bpe", "apply", "--data", c.clean("prepare"), "--data",
                                                 c.clean("bpe-learn"), "--out", c.out, *x], ()),
    "vocab-score": (VocabConfig, lambda c, *x: ["vocab-score", "--data", c.clean("bpe-apply"), "--out", c.out, *x], ()),
    "prepare": (PrepareConfig, lambda c, *x: prep(c, c.file("a.txt", GOOD), extra=x), ()),
    "text": (TextConfig, lambda c, *x: ["text", "--lang", "en", c.file("in.txt", GOOD), c.dir / "o.txt", *x], ()),
    "translate": (TranslateConfig, _translate, ()),
    "claims": (ClaimsConfig, lambda c, *x: ["evaluate", "--task", "claims", "--data", c.dir, "--out", c.out, *x], ()),
}
def _evaluate_tasks() -> dict:
    """`xlp evaluate --task NAME` of every task whose evaluation has numeric flags (claims: above)."""
    from xlp_cli.stages import load
    from xlp_cli.tasks import TASKS

    out = {}
    for name, spec in sorted(TASKS.items()):
        if spec.evaluate and name != "claims":
            cls = load(spec.evaluate[0]) if isinstance(spec.evaluate[0], str) else spec.evaluate[0]
            out[f"evaluate-{name}"] = (cls, lambda c, *x, t=name: ["evaluate", "--task", t, "--data", c.dir, "--out",
                                                                  c.out, *x], ())
    return out


COMMANDS.update(_evaluate_tasks())
for _cmd, (_cls, _build, _skip) in COMMANDS.items():
    for _name, _tp, _values in numeric_fields(_cls, _skip):
        _flag = "--" + _name.replace("_", "-")
        case(f"range-{_cmd}-{_name}", untouched=True, batch=len(_values))(
            lambda c, b=_build, fl=_flag, vs=_values: [b(c, fl, v) for _, v in vs])
    if numeric_fields(_cls, _skip):
        case(f"range-{_cmd}-5000-digits", untouched=True, batch=1)(
            lambda c, b=_build, cls=_cls: [b(c, "--" + numeric_fields(cls)[0][0].replace("_", "-"), BIG_INT)])

case("range-pretrain-heads-do-not-divide", untouched=True)(lambda c: _pretrain(c, "--n-heads", "3", "--d-model", "32"))
case("range-pretrain-seed-2**70", untouched=True)(lambda c: _pretrain(c, "--seed", str(2**70)))
case("range-pretrain-config-toml-out-of-range", untouched=True, batch=3)(lambda c: [
    _pretrain(c, "--config", c.file(f"c{i}.toml", body)) for i, body in
    enumerate(("dropout = 1.5\n", f"seed = {BIG_INT}\n", "lr = nan\n"))])


# ------------------------------------------------------------------ bounded parsers
def _nested_toml(kind: str) -> str:
    if kind == "array":
        return "a = " + "[" * DEEP + "]" * DEEP + "\n"
    return "a = " + "{b = " * DEEP + "1" + "}" * DEEP + "\n"


def _nested_json(top: dict | None = None) -> str:
    inner = "[" * DEEP + "]" * DEEP
    return json.dumps(top or {})[:-1] + (", " if top else "") + f'"deep": {inner}}}'


case("parse-config-toml-nested-arrays", untouched=True)(
    lambda c: prep(c, c.file("a.txt", GOOD), extra=("--config", c.file("c.toml", _nested_toml("array")))))
case("parse-config-toml-nested-tables", untouched=True)(
    lambda c: prep(c, c.file("a.txt", GOOD), extra=("--config", c.file("c.toml", _nested_toml("table")))))
case("parse-config-toml-5000-digits", untouched=True)(
    lambda c: prep(c, c.file("a.txt", GOOD), extra=("--config", c.file("c.toml", f"chunk-size = {BIG_INT}\n"))))
case("parse-recipe-nested", untouched=True)(lambda c: ["run", c.file("r.toml", "[recipe]\n" + _nested_toml("array"))])


def _manifest_json(fn):
    def damage(c, d, m):
        (d / "manifest.json").write_text(fn(m), encoding="utf-8")
    return damage


case("parse-manifest-nested")(damaged_prepare(_manifest_json(lambda m: _nested_json(m))))
case("parse-manifest-5000-digit-rows")(damaged_prepare(_manifest_json(
    lambda m: re.sub(r'"rows": [0-9]+', f'"rows": {BIG_INT}', json.dumps(m), count=1))))
case("parse-manifest-5000-digit-extra-key")(damaged_prepare(_manifest_json(
    lambda m: json.dumps(m)[:-1] + f', "extra": {BIG_INT}}}')))


def _predictions(c: Ctx, body: str) -> list:
    c.file("ft/manifest.json", json.dumps({"stage": "finetune", "config": {"task": "xnli"}}))
    c.file("ft/predictions/seed1/test.en.jsonl", body)
    return ["evaluate", "--task", "xnli", "--data", c.dir / "ft", "--out", c.out]


case("parse-predictions-nested")(lambda c: _predictions(c, "[" * DEEP + "]" * DEEP + "\n"))
case("parse-predictions-5000-digits")(lambda c: _predictions(c, f'{{"pred": {BIG_INT}, "gold": 1}}\n'))


def _resume_meta(step: str):
    def build(c: Ctx):
        from reliability_corpus import resumed_run

        def damage(c2, last):
            meta = (last / "meta.json").read_text(encoding="utf-8")
            (last / "meta.json").write_text(meta.replace('"step": ', f'"step": {step}, "was": ', 1), encoding="utf-8")
        return resumed_run(damage)(c)
    return build


for _name, _step in (("negative", "-5"), ("1e30", str(10**30)), ("5000-digits", BIG_INT), ("float", "2.5"),
                     ("nested", "[" * DEEP + "]" * DEEP)):
    case(f"resume-meta-step-{_name}")(_resume_meta(_step))


# ------------------------------------------------------------------ safe outputs
def _node(c: Ctx, name: str, minor: int) -> Path:
    """Our own character device node (1, minor): 7 = full, 3 = null. Without mknod rights, a FIFO with no reader
    would hang, so the case then writes a regular file named like it (the case still runs, weaker)."""
    p = c.dir / name
    try:
        os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except OSError:
        pass
    return p


def _still_a_device(c: Ctx) -> None:
    for name in ("full", "null"):
        p = c.dir / name
        if p.exists() or p.is_symlink():
            assert stat.S_ISCHR(os.lstat(p).st_mode), f"{p} was replaced by a {oct(os.lstat(p).st_mode)}"


def _codes(c: Ctx) -> tuple:
    from conftest import FIXTURES

    return ("--codes", FIXTURES / "bpe" / "codes.ref", "--vocab", FIXTURES / "bpe" / "vocab.ref")


WRITERS = {
    "text": lambda c, src, dst: ["text", "--lang", "en", src, dst],
    "bpe-apply": lambda c, src, dst: ["bpe", "apply", *_codes(c), src, dst],
    "translate": lambda c, src, dst: ["translate", "--model", c.dir / "model", "--src-lang", "en", "--tgt-lang", "fr",
                                      src, "--output", dst],
}
TARGETS = {
    "folder": lambda c, src: (c.dir / "d").mkdir() or c.dir / "d",
    "proc": lambda c, src: Path("/proc/xlp-reliability.txt"),
    "proc-existing": lambda c, src: Path("/proc/self/comm"),
    "sys": lambda c, src: Path("/sys/xlp-reliability.txt"),
    "the-input": lambda c, src: src,
    "hard-link": lambda c, src: os.link(src, c.dir / "link.txt") or c.dir / "link.txt",
    "dot-path": lambda c, src: src.parent / "." / src.name,
    "inside-input-folder": lambda c, src: (c.dir / "model").mkdir(exist_ok=True) or c.dir / "model" / "out.txt",
    "parent-is-a-file": lambda c, src: c.file("f", "x") / "out.txt",
}
for _w, _cmd in WRITERS.items():
    for _t, _target in TARGETS.items():
        if _t == "inside-input-folder" and _w != "translate":
            continue
        case(f"output-{_w}-{_t}")(lambda c, cmd=_cmd, tg=_target: cmd(c, (src := c.file("in.txt", GOOD)), tg(c, src)))
for _w in ("text", "bpe-apply"):  # (translate needs a trained model to get as far as writing: test_safe_output.py)
    case(f"output-{_w}-full-device", expect="fail", post=_still_a_device)(
        lambda c, cmd=WRITERS[_w]: cmd(c, c.file("in.txt", GOOD), _node(c, "full", 7)))
    case(f"output-{_w}-null-device", expect="ok", post=_still_a_device)(
        lambda c, cmd=WRITERS[_w]: cmd(c, c.file("in.txt", GOOD), _node(c, "null", 3)))
for _stage, _build in (("prepare", lambda c, out: ["prepare", "--source", "text", "--lang", "en", c.file("a.txt", GOOD),
                                                   "--out", out]),
                       ("bpe-learn", lambda c, out: ["bpe", "learn", "--data", c.clean("prepare"), "--out", out]),
                       ("vocab-score", lambda c, out: ["vocab-score", "--data", c.clean("bpe-apply"), "--out", out])):
    case(f"out-{_stage}-on-kernel-file-systems", batch=2)(
        lambda c, b=_build: [b(c, "/proc/xlp-reliability"), b(c, "/sys/kernel/xlp-reliability")])


def _input_folder(c: Ctx) -> Path:
    c.file("corpus/a.txt", GOOD)
    return c.dir / "corpus"


case("out-prepare-inside-its-input-folder")(lambda c: ["prepare", "--source", "text", "--lang", "en",
                                                      _input_folder(c), "--out", c.dir / "corpus" / "prep"])
case("out-prepare-is-its-input-folder")(lambda c: ["prepare", "--source", "text", "--lang", "en", _input_folder(c),
                                                  "--out", c.dir / "corpus"])
case("out-prepare-is-its-input-file")(lambda c: ["prepare", "--source", "text", "--lang", "en",
                                                (f := c.file("a.txt", GOOD)), "--out", f])


def _data_kept(c: Ctx) -> None:
    assert json.loads((c.dir / "prepare" / "manifest.json").read_text(encoding="utf-8"))["stage"] == "prepare"


for _stage, _args in (("bpe-learn", ["bpe", "learn", "--codes", "50"]), ("vocab-score", ["vocab-score"])):
    case(f"out-{_stage}-is-its-data-with-force", post=_data_kept)(
        lambda c, a=_args: [*a, "--data", (d := c.copy("prepare")), "--out", d, "--force"])


# ------------------------------------------------------------------ bounded readers
def _wiki(lang: str = "en") -> bytes:
    pages = "".join(f"<page><title>T{i}</title><ns>0</ns><id>{i}</id><revision><text>{'Word and more words. ' * 30}"
                    f"</text></revision></page>" for i in range(20))
    return f"<mediawiki xml:lang=\"{lang}\"><siteinfo><dbname>{lang}wiki</dbname></siteinfo>{pages}</mediawiki>".encode()


GARBAGE = b"this is not a compressed stream"
for _kind, _compress in COMPRESS.items():
    case(f"garbage-text-{_kind}")(lambda c, k=_kind, f=_compress: prep(c, c.file(f"a.{k}", f(GOOD_B) + GARBAGE)))
    case(f"garbage-text-{_kind}-skip", expect="skip")(lambda c, k=_kind, f=_compress: prep(
        c, c.file("good.txt", GOOD), c.file(f"a.{k}", f(GOOD_B) + GARBAGE), extra=("--on-error", "skip")))
    case(f"garbage-wet-{_kind}")(lambda c, k=_kind, f=_compress: source(
        c, "commoncrawl", c.file(f"a.wet.{k}", f(_wet(["An English page about the weather and rain. " * 20] * 2)) + GARBAGE)))
    case(f"garbage-wiki-{_kind}")(lambda c, k=_kind, f=_compress: source(
        c, "wikipedia", c.file(f"enwiki.xml.{k}", f(_wiki()) + GARBAGE)))
    case(f"garbage-opus-moses-{_kind}")(lambda c, k=_kind, f=_compress: source(
        c, "opus", c.file(f"c.en-fr.en.{k}", f(GOOD_B) + GARBAGE), c.file(f"c.en-fr.fr.{k}", f(GOOD_B)), lang="en,fr"))
    case(f"cap-expansion-text-{_kind}")(lambda c, k=_kind, f=_compress: prep(
        c, c.file(f"a.{k}", f(GOOD_B * 1500)), extra=("--max-expansion", "2")))
    case(f"cap-member-bytes-text-{_kind}")(lambda c, k=_kind, f=_compress: prep(
        c, c.file(f"a.{k}", f(GOOD_B * 4)), extra=("--max-member-bytes", "4096")))
case("cap-expansion-wet-gz")(lambda c: source(c, "commoncrawl", c.file("a.wet.gz", gzip.compress(
    _wet(["An English page about the weather and rain. " * 200] * 300))), "--max-expansion", "2"))
case("cap-expansion-zip-member")(lambda c: source(c, "opus", c.file("c.zip", zip_bytes(
    {"c.en-fr.en": GOOD_B * 1500, "c.en-fr.fr": GOOD_B * 1500})), "--max-expansion", "2", lang="en,fr"))
case("cap-member-bytes-zip")(lambda c: source(c, "opus", c.file("c.zip", zip_bytes(MOSES)), "--max-member-bytes",
                                              "1000", lang="en,fr"))
case("cap-gz-inside-zip")(lambda c: source(c, "opus", c.file("c.zip", zip_bytes(
    {"c.en-fr.en.gz": gzip.compress(GOOD_B * 1500), "c.en-fr.fr.gz": gzip.compress(GOOD_B * 1500)})),
    "--max-expansion", "2", lang="en,fr"))


def _zip_bomb(c: Ctx) -> list:
    """A ~200 KB zip holding a 210 MiB member (the issue's 389 KB zip held 400 MB): refused from the central
    directory at the default limits, before a byte of it is decompressed."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = b"x " * (1 << 19)
    raw = b"".join(comp.compress(chunk) for _ in range(210)) + comp.flush()
    size, crc = 210 * len(chunk), 0
    for _ in range(210):
        crc = zlib.crc32(chunk, crc)
    name = b"c.en-fr.en"
    local = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(raw), size, len(name), 0) + name
    central = struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(raw), size, len(name), 0, 0, 0,
                          0, 0, 0) + name
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local) + len(raw), 0)
    return source(c, "opus", c.file("bomb.zip", local + raw + central + end), lang="en,fr")


case("cap-zip-bomb-default-limits")(_zip_bomb)
case("zip-encrypted-member")(lambda c: source(c, "opus", c.file("c.zip", zip_bytes(MOSES, flag=0x1)), lang="en,fr"))
case("zip-unknown-method")(lambda c: source(c, "opus", c.file("c.zip", zip_bytes(MOSES, method=99)), lang="en,fr"))
case("zip-encrypted-member-skip", expect="skip")(lambda c: source(
    c, "opus", c.file("c.zip", zip_bytes(MOSES, flag=0x1)), c.file("d.en-fr.en", GOOD), c.file("d.en-fr.fr", GOOD),
    "--on-error", "skip", lang="en,fr"))


# ------------------------------------------------------------------ broken input: WET Content-Length
REC = ("WARC/1.0\r\nWARC-Type: conversion\r\nWARC-Target-URI: http://x/{i}\r\nContent-Type: text/plain\r\n{cl}\r\n\r\n"
       "{b}\r\n\r\n")
PAGE = "An English page about the weather, the rain and the long summer evenings. " * 4


def _wet_lengths(lengths: list[str | None]) -> bytes:
    n = len((PAGE + "0").encode())
    return "".join(REC.format(i=i, cl="X-Other: 1" if cl is None else f"Content-Length: {n if cl == 'ok' else cl}",
                              b=PAGE + str(i)) for i, cl in enumerate(lengths)).encode()


CONTENT_LENGTHS = {"negative": "-5", "minus-one": "-1", "negative-huge": "-" + "9" * 30, "letters": "abc",
                   "decimal": "12.5", "hex": "0x40", "exponent": "1e3", "plus": "+12", "empty": "",
                   "spaces-inside": "1 2", "missing": None, "1e21": str(10**21), "2**63": str(2**63),
                   "2**40": str(2**40), "5000-digits": BIG_INT, "unicode-digits": "\u0661\u0662"}
for _name, _value in CONTENT_LENGTHS.items():  # (a WET case costs ~2 s: warcio and the language-ID model load)
    case(f"wet-length-{_name}")(lambda c, v=_value: source(c, "commoncrawl", c.file("a.wet", _wet_lengths(["ok", v, "ok"]))))
for _name in ("negative", "letters", "missing", "1e21", "5000-digits"):  # the bad record first
    case(f"wet-length-{_name}-first")(lambda c, v=CONTENT_LENGTHS[_name]: source(
        c, "commoncrawl", c.file("a.wet", _wet_lengths([v, "ok"]))))
for _name in ("negative", "missing", "1e21"):
    case(f"wet-length-{_name}-skip", expect="skip")(lambda c, v=CONTENT_LENGTHS[_name]: source(
        c, "commoncrawl", c.file("a.wet", _wet_lengths(["ok", v, "ok"])), "--on-error", "skip"))
case("wet-length-gz")(lambda c: source(c, "commoncrawl", c.file("a.wet.gz", gzip.compress(_wet_lengths(["ok", "-3"])))))


# ------------------------------------------------------------------ broken input: NUL bytes, archives as text
NUL_TEXT = GOOD_B[:400] + b"a line with a \x00 inside it\n" + GOOD_B[400:]
for _kind in ("plain", *COMPRESS):
    _data = NUL_TEXT if _kind == "plain" else COMPRESS[_kind](NUL_TEXT)
    case(f"nul-text-{_kind}")(lambda c, d=_data, k=_kind: prep(c, c.file(f"a.{k}", d)))
case("nul-text-ranges")(lambda c: prep(c, c.file("a.txt", NUL_TEXT * 3), extra=("--split-size", "500")))
case("nul-text-first-line")(lambda c: prep(c, c.file("a.txt", b"first \x00 line is long enough here\n" + GOOD_B)))
case("nul-text-plain-skip", expect="skip")(lambda c: prep(c, c.file("a.txt", NUL_TEXT), extra=("--on-error", "skip")))
case("nul-text-ranges-skip", expect="skip")(lambda c: prep(c, c.file("a.txt", NUL_TEXT * 3),
                                                           extra=("--split-size", "500", "--on-error", "skip")))
case("nul-opus-moses")(lambda c: source(c, "opus", c.file("c.en-fr.en", NUL_TEXT), c.file("c.en-fr.fr", NUL_TEXT),
                                        lang="en,fr"))


def _tar(c: Ctx) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("corpus.txt")
        info.size = len(GOOD_B)
        t.addfile(info, io.BytesIO(GOOD_B))
    return buf.getvalue()


def _parquet() -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": ["a b c"] * 3}), buf)
    return buf.getvalue()


ARCHIVES = {"tar": _tar, "7z": lambda c: b"7z\xbc\xaf\x27\x1c" + b"\0" * 200,
            "rar": lambda c: b"Rar!\x1a\x07\x01\x00" + b"\0" * 200, "zstd": lambda c: b"\x28\xb5\x2f\xfd" + b"\0" * 64,
            "pdf": lambda c: b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", "parquet": lambda c: _parquet(),
            "elf": lambda c: b"\x7fELF\x02\x01\x01" + b"\0" * 200}
for _name, _make in ARCHIVES.items():
    case(f"archive-as-text-{_name}")(lambda c, m=_make, n=_name: prep(c, c.file(f"corpus.{n}", m(c))))
case("archive-tar-gz-as-text")(lambda c: prep(c, c.file("corpus.tgz", gzip.compress(_tar(c)))))


# ------------------------------------------------------------------ broken input: .mo catalogs
def _mo(entries: dict[bytes, bytes]) -> bytearray:
    keys = sorted(entries)
    ids = strs = b""
    offsets = []
    for k in keys:
        offsets.append((len(ids), len(k), len(strs), len(entries[k])))
        ids += k + b"\0"
        strs += entries[k] + b"\0"
    start = 28 + 16 * len(keys)
    o = [x for io_, il, _, _ in offsets for x in (il, io_ + start)]
    t = [x for _, _, so, sl in offsets for x in (sl, so + start + len(ids))]
    return bytearray(struct.pack("<7I", 0x950412DE, 0, len(keys), 28, 28 + 8 * len(keys), 0, 0)
                     + struct.pack(f"<{len(o)}I", *o) + struct.pack(f"<{len(t)}I", *t) + ids + strs)


MO = {b"": b"Content-Type: text/plain; charset=UTF-8\n", b"Open the file": b"Die Datei oeffnen",
      b"Save all documents": b"Alle Dokumente speichern"}


def _mo_case(damage):
    def build(c: Ctx) -> list:
        data = _mo(MO)
        damage(data)
        return ["prepare", "--source", "gettext", "--lang", "de", c.file("loc/de/LC_MESSAGES/app.mo", bytes(data)),
                "--out", c.out]
    return build


def _shift(at: int, by: int):
    return lambda d: struct.pack_into("<I", d, at, struct.unpack_from("<I", d, at)[0] + by)


MO_DAMAGE = {"offset-shifted": _shift(28 + 12, 3), "length-grown": _shift(28 + 8, 2),
             "translation-offset-shifted": _shift(28 + 24 + 12, 5), "count-zero": lambda d: struct.pack_into("<I", d, 8, 0),
             "count-huge": lambda d: struct.pack_into("<I", d, 8, 10**6), "offset-into-header": lambda d: struct.pack_into("<I", d, 28 + 12, 4),
             "truncated": lambda d: d.__delitem__(slice(len(d) - 10, None))}
for _name, _damage in MO_DAMAGE.items():
    case(f"mo-{_name}")(_mo_case(_damage))
case("mo-not-a-locale")(lambda c: ["prepare", "--source", "gettext", "--lang", "de",
                                                   c.file("x.mo", bytes(_mo(MO))), "--out", c.out])


# ------------------------------------------------------------------ the manifest is the whole truth
def _five_rows(d: Path, rel: str) -> None:
    t = pq.read_table(d / rel)
    pq.write_table(t.slice(0, 5), d / rel)


def _shards(value):
    return lambda c, d, m: c.edit_manifest(d, lambda x: x["outputs"].update(shards=value))


SHARD_LISTS = {"empty-list": [], "empty-object": {}, "null": None, "string": "x", "number": 3}
for _name, _value in SHARD_LISTS.items():
    case(f"manifest-shards-{_name}")(damaged_prepare(_shards(_value)))
case("manifest-shards-key-missing")(damaged_prepare(lambda c, d, m: c.edit_manifest(d, lambda x: x["outputs"].pop("shards"))))
case("manifest-shards-empty-and-replaced")(damaged_prepare(
    lambda c, d, m: (_five_rows(d, _first_shard(m)), _shards([])(c, d, m))))
case("manifest-outputs-empty")(damaged_prepare(lambda c, d, m: c.edit_manifest(d, lambda x: x.update(outputs={}))))


def _ids_damaged(fn):
    def build(c: Ctx) -> list:
        d = c.copy("bpe-apply")
        fn(c, d, json.loads((d / "manifest.json").read_text(encoding="utf-8")))
        return ["vocab-score", "--data", d, "--k", "20", "--out", c.out]
    return build


for _name, _value in (("empty-list", []), ("empty-object", {})):
    case(f"manifest-ids-shards-{_name}")(_ids_damaged(_shards(_value)))
    case(f"manifest-prepare-shards-{_name}-bpe-apply")(lambda c, v=_value: (
        d := c.copy("prepare"), _shards(v)(c, d, {}),
        ["bpe", "apply", "--data", d, "--data", c.clean("bpe-learn"), "--out", c.out])[-1])
case("manifest-ids-shards-empty-pretrain", untouched=True)(lambda c: (
    d := c.copy("bpe-apply"), _shards([])(c, d, {}), _pretrain(c, data=("--data", d)))[-1])
