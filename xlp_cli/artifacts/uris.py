"""Object-store URIs (`s3://`, `gs://`, `hf://`) and the local staging folder each one maps to (docs/storage.md).

    uri = parse("s3://bucket/prep")          # Uri(scheme="s3", bucket="bucket", key="prep"); BadInput if malformed
    staging_path(uri)                        # CACHE/s3/bucket/prep: where a stage reads or writes it locally
    recorded(path)                           # the URI again, for a staging path (what manifests record)

A config field of type Path collapses "s3://b/k" to "s3:/b/k"; `find` recognises both spellings. The staging root
is XLP_STORAGE_CACHE (default $XDG_CACHE_HOME/xlp/storage, ~/.cache/xlp/storage): one folder per URI, laid out as
the bucket is, so sibling folders (`prep`, `prep-ids`) stay siblings. This module does no I/O of its own (`fetch`
hands a link to the active staging session) and imports nothing heavy: the CLI reads it at start-up to see
whether a command names a URI at all.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Callable

from xlp_cli.core.errors import BadInput

SCHEMES = {"s3": "s3", "gs": "gs", "gcs": "gs", "hf": "hf"}
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/+(.*)$|^(s3|gs|gcs|hf):()$")  # ("s3://" alone: Path makes "s3:")
_BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,254}$")


@dataclasses.dataclass(frozen=True)
class Uri:
    scheme: str       # s3 | gs | hf
    bucket: str       # the bucket (hf: "datasets" / "models" / "spaces" or an owner)
    key: str          # the folder or object inside it, no leading or trailing "/"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}" + (f"/{self.key}" if self.key else "")

    @property
    def path(self) -> str:
        """The path a pyarrow/fsspec file system takes: bucket/key."""
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    def child(self, rel: str) -> "Uri":
        return Uri(self.scheme, self.bucket, f"{self.key}/{rel}".strip("/"))

    def sibling(self, name: str) -> "Uri":
        parent = self.key.rpartition("/")[0]
        return Uri(self.scheme, self.bucket, f"{parent}/{name}".strip("/"))


def find(value: object) -> str | None:
    """The URI spelled by a config value (a str, or a Path that collapsed "//"), or None for a local path."""
    if not isinstance(value, (str, Path)):
        return None
    m = _URI.match(str(value))
    if m is None or len(m.group(1) or m.group(3)) < 2:  # (a one-letter scheme would be a Windows drive)
        return None
    return f"{(m.group(1) or m.group(3)).lower()}://{m.group(2) or ''}"


def parse(text: str) -> Uri:
    """A URI xlp can read and write, or BadInput (one line naming it and what is wrong)."""
    m = _URI.match(text)
    if m is None or not m.group(1):
        raise BadInput("not a storage URI (expected s3://BUCKET/PATH, gs://BUCKET/PATH or hf://...)", path=text)
    scheme, rest = m.group(1).lower(), m.group(2)
    if scheme not in SCHEMES:
        raise BadInput(f"unsupported storage scheme '{scheme}://' (xlp reads and writes s3://, gs:// and hf://)",
                       path=text)
    bucket, _, key = rest.partition("/")
    key = key.strip("/")
    if not bucket or not _BUCKET.match(bucket):
        raise BadInput(f"no valid bucket name after '{scheme}://'", path=text)
    if any(part in ("", ".", "..") for part in key.split("/")) and key:
        raise BadInput("a path inside the bucket has an empty, '.' or '..' part", path=text)
    return Uri(SCHEMES[scheme], bucket, key)


def cache_root() -> Path:
    """Where URIs are staged locally (XLP_STORAGE_CACHE)."""
    if os.environ.get("XLP_STORAGE_CACHE"):
        return Path(os.environ["XLP_STORAGE_CACHE"]).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().absolute() / "xlp" / "storage"


def staging_path(uri: Uri) -> Path:
    return cache_root() / uri.scheme / uri.bucket / uri.key


def sync_record_path(uri: Uri) -> Path:
    """Where the sizes and times of the last transfer of `uri`'s files are kept (outside the staged folder)."""
    return cache_root() / ".sync" / uri.scheme / uri.bucket / f"{uri.key or '_'}.json"


def recorded(value: str | Path) -> str:
    """A staging path (or a path inside one) as its URI; anything else unchanged, as a string."""
    text = str(value)
    root = str(cache_root()) + os.sep
    if not text.startswith(root):
        return text
    scheme, _, rest = text[len(root):].partition(os.sep)
    return f"{scheme}://{rest}" if scheme in SCHEMES.values() and rest else text


def recorded_text(text: str) -> str:
    """`text` with every staging path in it written as its URI (an error message, a summary line)."""
    for scheme in sorted(set(SCHEMES.values())):
        text = text.replace(str(cache_root() / scheme) + os.sep, f"{scheme}://")
    return text


_fetch: Callable[[str, bool], None] | None = None  # set by an active staging session (artifacts/staging.py)


def set_fetcher(fn: Callable[[str, bool], None] | None) -> None:
    global _fetch
    _fetch = fn


def fetch(uri: str, *, full: bool) -> None:
    """Make the folder behind a URI that a manifest links (`upstream`) present in its staging folder: its manifest
    and small files (`full=False`: enough to follow or read its manifest), or every file (`full=True`: its
    shards are read). Outside a staging session it does nothing (the link then leads to no folder)."""
    if _fetch is not None:
        _fetch(uri, full)


def local(value: str | Path) -> Path:
    """A path read from a manifest: a URI (an `upstream` link written on another machine) as its staging folder."""
    uri = find(value)
    if uri is None:
        return Path(value)
    return staging_path(parse(uri))


def in_config(cfg: object) -> list[tuple[str, int | None, str]]:
    """(field, list index or None, URI) for each URI in a stage config: its Path fields (and lists of them) and its
    positional `inputs`/`paths` strings. Other string fields (a download mirror's https URL) are not storage."""
    found: list[tuple[str, int | None, str]] = []
    if not dataclasses.is_dataclass(cfg):
        return found
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        named = f.name in ("inputs", "paths")
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if (isinstance(item, Path) or named) and (uri := find(item)):
                    found.append((f.name, i, uri))
        elif (isinstance(value, Path) or (named and isinstance(value, str))) and (uri := find(value)):
            found.append((f.name, None, uri))
    return found
