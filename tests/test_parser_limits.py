"""The JSON, JSON-lines and TOML files users hand to xlp are read by bounded parsers (`core/textfile.py`): nesting
deeper than MAX_DEPTH or an integer longer than MAX_INT_DIGITS is a one-line error naming the file, never a
RecursionError, Python's int-str-limit ValueError or a traceback (docs/reliability.md, "Ranges and parser limits").
The cases are generated: every reader below meets every kind of oversized value."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from xlp_cli.core import config as cfgmod, textfile
from xlp_cli.core.errors import BadInput
from xlp_cli.core.textfile import MAX_DEPTH, MAX_INT_DIGITS

from conftest import run_cli


def _digits(n: int) -> str:
    return "9" * n


# (name, JSON text, TOML value text): each too deep or too large in its own way
OVERSIZED = [
    ("array-100k-deep", "[" * 100_000 + "]" * 100_000, "[" * 100_000 + "]" * 100_000),
    ("object-100k-deep", '{"a":' * 100_000 + "1" + "}" * 100_000, "{a=" * 3_000 + "1" + "}" * 3_000),
    ("array-just-too-deep", "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
     "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)),
    ("int-5000-digits", _digits(5000), _digits(5000)),
    ("int-negative-5000-digits", "-" + _digits(5000), "-" + _digits(5000)),
    ("int-just-too-long", _digits(MAX_INT_DIGITS + 1), _digits(MAX_INT_DIGITS + 1)),
    ("int-in-a-list", "[1, 2, " + _digits(300) + "]", "[1, 2, " + _digits(300) + "]"),
]
# (name, JSON text, TOML value text: a TOML file's top-level table is one level itself)
FITTING = [("array-at-the-limit", "[" * MAX_DEPTH + "]" * MAX_DEPTH, "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)),
           ("int-at-the-limit", _digits(MAX_INT_DIGITS), "-" + _digits(MAX_INT_DIGITS))]


def _json_readers(tmp: Path) -> dict[str, Callable[[str], Any]]:
    """Each reader of a user's JSON file, fed the JSON text `value` in its own file layout."""
    from xlp_cli.artifacts import manifest
    from xlp_cli.models import checkpoint as ckpt
    from xlp_cli.tasks.translation import bleu
    from xlp_cli.tasks.xnli import scores

    def plain(value: str) -> Any:
        (tmp / "v.json").write_text(value, encoding="utf-8")
        return textfile.json_file(tmp / "v.json")

    def manifest_field(value: str) -> Any:
        (tmp / "manifest.json").write_text(f'{{"stage": "prepare", "format_version": {value}}}', encoding="utf-8")
        return manifest.read_manifest(tmp)

    def meta_json(value: str) -> Any:
        (tmp / "last").mkdir(exist_ok=True)
        (tmp / "last" / ckpt.WEIGHTS).write_bytes(b"")
        (tmp / "last" / ckpt.META).write_text(f'{{"step": 1, "x": {value}}}', encoding="utf-8")
        return ckpt.read_meta(tmp / "last")

    def predictions(value: str) -> Any:
        (tmp / "test.en.jsonl").write_text('{"gold": 1, "pred": 1}\n' + f'{{"gold": {value}, "pred": 1}}\n',
                                           encoding="utf-8")
        return list(scores.prediction_rows(tmp / "test.en.jsonl"))

    def bleu_rows(value: str) -> Any:
        row = '{"hyp": "a", "ref": "a", "hyp_tok": "a", "ref_tok": "a", "n": %s}\n'
        (tmp / "test.de-en.jsonl").write_text(row % 1 + row % value, encoding="utf-8")
        return bleu.read_rows(tmp / "test.de-en.jsonl")

    return {"json_file": plain, "manifest": manifest_field, "meta.json": meta_json, "predictions": predictions,
            "bleu-predictions": bleu_rows}


READERS = ["json_file", "manifest", "meta.json", "predictions", "bleu-predictions"]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(("case", "text", "_toml"), OVERSIZED, ids=[c[0] for c in OVERSIZED])
def test_oversized_json_is_one_line_naming_the_file(tmp_path: Path, reader: str, case: str, text: str,
                                                     _toml: str) -> None:
    with pytest.raises(BadInput) as e:
        _json_readers(tmp_path)[reader](text)
    msg = str(e.value)
    assert str(tmp_path) in msg and "\n" not in msg and len(msg) < 300, msg
    assert ("nested deeper than" in msg) if "deep" in case else ("digits" in msg), msg
    if reader in ("predictions", "bleu-predictions"):
        assert ".jsonl:2:" in msg, msg  # the line of a JSON-lines file


@pytest.mark.parametrize(("case", "text", "toml"), FITTING, ids=[c[0] for c in FITTING])
def test_values_at_the_limits_are_read(tmp_path: Path, case: str, text: str, toml: str) -> None:
    assert textfile.json_value(text, tmp_path / "v.json") == json.loads(text)
    (tmp_path / "c.toml").write_text(f"x = {toml}\n", encoding="utf-8")
    assert textfile.toml_file(tmp_path / "c.toml") == {"x": json.loads(toml)}


@pytest.mark.parametrize(("case", "_json", "value"), OVERSIZED, ids=[c[0] for c in OVERSIZED])
def test_oversized_toml_is_one_line_naming_the_file(tmp_path: Path, case: str, _json: str, value: str) -> None:
    path = tmp_path / "cfg.toml"
    path.write_text(f"seed = {value}\n", encoding="utf-8")
    with pytest.raises(BadInput) as e:
        cfgmod.load_toml(path)
    msg = str(e.value)
    assert msg.startswith(str(path)) and "\n" not in msg and len(msg) < 300, msg
    assert ("nested deeper than" in msg) if "deep" in case else ("digits" in msg), msg


def test_deep_toml_tables_by_dotted_keys(tmp_path: Path) -> None:
    path = tmp_path / "cfg.toml"
    path.write_text("[" + ".".join(["a"] * 100) + "]\nb = 1\n", encoding="utf-8")
    with pytest.raises(BadInput, match=f"nested deeper than {MAX_DEPTH} levels"):
        cfgmod.load_toml(path)


def test_pythons_int_str_limit_stays_as_it_was(tmp_path: Path) -> None:
    """The parsers bound integers themselves: they neither need nor change `sys.set_int_max_str_digits`."""
    before = sys.get_int_max_str_digits()
    with pytest.raises(BadInput):
        textfile.json_value(_digits(5000), tmp_path / "v.json")
    assert sys.get_int_max_str_digits() == before


def test_the_command_line_reports_them_in_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("lr = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    big = tmp_path / "ids"
    big.mkdir()
    (big / "manifest.json").write_text('{"stage": "bpe-apply", "format_version": ' + _digits(5000) + "}",
                                       encoding="utf-8")
    recipe = tmp_path / "r.toml"
    recipe.write_text("[recipe]\nout = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    for args, expected in ((["pretrain", "--data", str(big), "--config", str(deep)], f"{deep}: nested deeper"),
                           (["pretrain", "--data", str(big)], f"{big / 'manifest.json'}: an integer of 5000 digits"),
                           (["bpe", "learn", "--data", str(big)], f"{big / 'manifest.json'}: an integer of 5000"),
                           (["run", str(recipe), "--dry-run"], f"{recipe}: nested deeper")):
        r = run_cli(*args, *(["--out", str(tmp_path / "out")] if args[0] != "run" else []))
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("xlp: error: " + expected), r.stderr
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- one reading path
PKG = Path(__file__).resolve().parent.parent / "xlp_cli"
# json/tomllib calls outside core/textfile.py, each reading a file xlp itself wrote for its own bookkeeping (not a
# file a user hands to xlp): module -> why
OWN_BOOKKEEPING = {
    "recipes/jobs.py": "the summary a child `xlp run --jobs` process wrote",
    "models/checkpoint.py": "the safetensors header xlp has just written (`_sort_metadata`)",
    "prepare/process.py": "a chunk's metadata in prepare's work folder",
    "prepare/workdir.py": "prepare's resume state in its work folder",
    "prepare/download.py": "the note of a download xlp verified",
    "artifacts/staging.py": "object-store sync records",
    "artifacts/remote_sync.py": "object-store sync records and journal",
    "artifacts/lease.py": "the --out lease object",
    "artifacts/files.py": "a metrics.jsonl line being cut back on resume",
}


def test_user_files_are_parsed_only_by_the_bounded_readers() -> None:
    import ast

    found: dict[str, list[int]] = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel in ("core/textfile.py", "export/modeling_xlp.py"):  # the readers; a file copied into HF exports
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            f = node.func if isinstance(node, ast.Call) else None
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                    (f.value.id, f.attr) in {("json", "load"), ("json", "loads"), ("tomllib", "load"), ("tomllib", "loads")}:
                found.setdefault(rel, []).append(node.lineno)
    stray = {rel: lines for rel, lines in found.items() if rel not in OWN_BOOKKEEPING}
    assert not stray, ("read these files with core/textfile.py's bounded readers (json_file, json_object, "
                       f"json_lines, json_value, toml_file): {stray}")
    assert set(OWN_BOOKKEEPING) <= set(found), set(OWN_BOOKKEEPING) - set(found)  # the list stays current
