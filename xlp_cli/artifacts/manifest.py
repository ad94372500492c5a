"""Manifests: a stage's record of its config, inputs, outputs and software (written last), read back with their
checks, and the lookup of an earlier stage's folder among `--data` folders (`find_upstream`)."""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any

from xlp_cli.artifacts import layout, uris
from xlp_cli.artifacts.files import _json_default, inside, sha256_file, write_json_atomic
from xlp_cli.artifacts.shards import MANIFEST, verify_shards
from xlp_cli.core.errors import BadInput
from xlp_cli.core.textfile import json_file, json_object


def config_hash(config: dict[str, Any]) -> str:
    """A stable hash of a config dict (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, default=_json_default, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


PACKAGES = ("pyarrow", "numpy", "torch", "sacremoses", "fastBPE", "sentencepiece", "jieba", "pythainlp", "sacrebleu")


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str], ...]:
    installed = _dist_info_versions()
    out = {"python": platform.python_version(), "xlp": _version("xlp", installed)}
    for pkg in PACKAGES:
        v = _version(pkg, installed)
        if v:
            out[pkg] = v
    return tuple(out.items())


def software_versions() -> dict[str, str]:
    """The versions of Python, xlp and the libraries that shape the outputs (read once per process: a run that
    writes its manifest at every checkpoint would otherwise parse the packages' metadata each time)."""
    return dict(_versions())


def _dist_name(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_info_versions() -> dict[str, str]:
    """{name: version} from the `NAME-VERSION.dist-info` folders on sys.path, the first of each name, as
    importlib.metadata finds them; ~1 ms, where importlib.metadata takes ~25 ms of CPU for the ten packages
    (its import and a scan of sys.path per package), on every stage's start."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for n in names:
            if n.endswith(".dist-info"):
                name, sep, version = n[: -len(".dist-info")].partition("-")
                if sep and version:
                    found.setdefault(_dist_name(name), version)
    return found


def _version(pkg: str, installed: dict[str, str]) -> str:
    """The package's version: from its .dist-info folder's name, else (an .egg-info install, or none)
    importlib.metadata's answer, "" if it is not installed."""
    if _dist_name(pkg) in installed:
        return installed[_dist_name(pkg)]
    from importlib import metadata

    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return ""


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def new_manifest(stage: str, config: dict[str, Any], **fields: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "format_version": layout.FORMAT_VERSION,
        "stage": stage,
        "config": config,
        "config_hash": config_hash(config),
        "inputs": [],
        "outputs": {},
        "counts": {},
        "warnings": [],
        "versions": software_versions(),
        "created": now_iso(),
    }
    m.update(fields)
    return m


def write_manifest(folder: str | Path, manifest: dict[str, Any]) -> Path:
    path = Path(folder) / MANIFEST
    write_json_atomic(path, manifest)
    return path


def read_manifest(folder: str | Path, *, stage: str | None = None) -> dict[str, Any]:
    """Read `folder/manifest.json`; with `stage`, insist it was written by that stage."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not folder.exists():
        raise BadInput("no such folder", path=folder)
    if not path.is_file():
        raise BadInput("no manifest.json here: not an xlp stage output (or the stage did not finish)", path=folder)
    m = json_object(path)
    if "stage" not in m:
        raise BadInput("manifest has no 'stage' field", path=path)
    layout.check_format(m, path)
    for key, kind in (("config", dict), ("outputs", dict), ("upstream", list), ("counts", dict)):
        if m.get(key) is not None and not isinstance(m[key], kind):
            raise BadInput(f"manifest field '{key}' is not a JSON {'object' if kind is dict else 'list'}", path=path)
    for up in m.get("upstream") or []:
        if not isinstance(up, dict) or not isinstance(up.get("path"), str) or not up["path"]:
            raise BadInput("an `upstream` entry of the manifest has no 'path'", path=path)
    if stage is not None and m["stage"] != stage:
        raise BadInput(f"expected the output of `xlp {stage}`, found `xlp {m['stage']}`", path=path)
    return m


def try_read_manifest(folder: str | Path) -> dict[str, Any] | None:
    """The manifest of `folder`, or None when there is none (or it is not a JSON object)."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        m = json_file(path)
    except BadInput:
        return None
    return m if isinstance(m, dict) else None


def find_upstream(data_dirs: list[Path], stage: str, *, verify: bool = True) -> tuple[Path, dict[str, Any]] | None:
    """Find the output of `stage` among `--data` folders, following each manifest's `upstream` links. Upstream
    links are the one kind of manifest path that names another folder: a link is followed only to a folder with a
    valid manifest, and inside it every path is confined (`inside`). With `verify`, the shards the found manifest
    lists are checked (`verify_shards`). A damaged manifest on the way is a one-line error."""
    seen: set[Path] = set()
    todo = [Path(d) for d in data_dirs]
    links: dict[Path, str] = {}  # staging folder -> the URI an upstream link names (a stage on object storage)
    while todo:
        d = todo.pop(0).resolve()
        if d in seen:
            continue
        seen.add(d)
        if d in links:
            uris.fetch(links[d], full=False)
        if not (d / MANIFEST).is_file():
            continue
        m = read_manifest(d)
        if m.get("stage") == stage:
            if verify:
                if d in links:
                    uris.fetch(links[d], full=True)
                verify_shards(d, m)
            return d, m
        outputs = m.get("outputs") if isinstance(m.get("outputs"), dict) else {}
        for key in ("ids", "bpe"):  # the stage folders `xlp prepare --bpe-codes/--bpe-from` wrote (siblings)
            if isinstance(outputs.get(key), str):
                todo.append(layout.linked_folder(d, outputs[key], f"outputs.{key}", d / MANIFEST))
        ups = m.get("upstream") or []
        for up in ups:  # (each entry checked by read_manifest)
            if uris.find(up["path"]):
                links[uris.local(up["path"]).resolve()] = up["path"]
            todo.append(uris.local(up["path"]))
    return None


def ids_dictionary(ids_dir: Path, manifest: dict[str, Any]) -> tuple[Path, str]:
    """(path, sha256) of the dictionary an `xlp bpe apply` manifest lists: confined to `ids_dir`, present, and the
    file the shards were written with (its `dictionary_sha256`)."""
    path = inside(ids_dir, manifest.get("dictionary") or "dict.txt", "dictionary", Path(ids_dir) / MANIFEST)
    if not path.is_file():
        raise BadInput("the id shards have no dictionary (dict.txt)", path=path)
    sha = sha256_file(path)
    if manifest.get("dictionary_sha256") and manifest["dictionary_sha256"] != sha:
        raise BadInput("dict.txt differs from the one the shards were written with: shards of another tokenizer",
                       path=path)
    return path, sha
