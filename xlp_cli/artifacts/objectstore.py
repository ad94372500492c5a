"""One object store behind a URI, through `pyarrow.fs` (docs/storage.md): list, read, write whole, delete.

    store = Store.open(parse("s3://bucket/prep"))   # checks the bucket, one-line BadInput when it cannot be used
    store.listing()                                  # {relative key: (size, mtime_ns)} under the prefix
    store.write(key, local_file); store.copy(key, other)   # whole objects; remote_sync makes a push atomic

s3:// is pyarrow's S3FileSystem (credentials and endpoint from the standard AWS variables: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE, AWS_DEFAULT_REGION / AWS_REGION, AWS_ENDPOINT_URL /
AWS_ENDPOINT_URL_S3 for S3-compatible servers); gs:// is pyarrow's GcsFileSystem (Google's default credentials);
hf:// is huggingface_hub's HfFileSystem (HF_TOKEN) wrapped for pyarrow. Errors met talking to the store become one
line naming the URI: BadInput (exit 2) for what the user can fix (no bucket, no access, unreachable endpoint),
WorkFailed (exit 1) for a transfer that failed midway.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable, TypeVar

import pyarrow.fs as pafs

from xlp_cli.artifacts.uris import Uri
from xlp_cli.core.errors import BadInput, WorkFailed

TEMP_KEY = re.compile(r"(^|/)\.[^/]+\.tmp(/|$)")
COPY_LIMIT = 5 << 30  # S3's CopyObject takes at most 5 GiB (remote_sync writes bigger files straight to their key)
T = TypeVar("T")

_HINTS = (  # (a fragment of the store's message, what the user reads)
    ("NO_SUCH_BUCKET", "the bucket does not exist (or these credentials cannot see it)"),
    ("NoSuchBucket", "the bucket does not exist (or these credentials cannot see it)"),
    ("ACCESS_DENIED", "access denied: check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE)"),
    ("InvalidAccessKeyId", "the access key is not known to the store (AWS_ACCESS_KEY_ID)"),
    ("SignatureDoesNotMatch", "the secret key does not match (AWS_SECRET_ACCESS_KEY)"),
    ("No credentials", "no credentials found (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE)"),
    ("UNKNOWN (HTTP status 403)", "access denied (HTTP 403): check the credentials"),
    ("HTTP status 403", "access denied (HTTP 403): check the credentials"),
    ("NETWORK_CONNECTION", "cannot reach the store (check AWS_ENDPOINT_URL and the network)"),
    ("Could not resolve", "cannot reach the store (check AWS_ENDPOINT_URL and the network)"),
    ("Couldn't connect", "cannot reach the store (check AWS_ENDPOINT_URL and the network)"),
)


def explain(e: BaseException, uri: Uri | str, *, transfer: bool = False) -> BadInput | WorkFailed:
    """One line for an error the store raised: what the user can fix is BadInput, a failed transfer WorkFailed."""
    text = " ".join(str(e).split())
    for fragment, hint in _HINTS:
        if fragment in text:
            return BadInput(hint, path=str(uri))
    short = text if len(text) < 240 else text[:237] + "..."
    if str(uri).startswith("s3://") and not _aws_credentials_given():
        return BadInput(f"no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE), "
                        f"and the store refused the request ({short})", path=str(uri))
    if transfer:
        return WorkFailed(f"the transfer failed ({short}); rerun the same command to resume", path=str(uri))
    return BadInput(f"cannot use this storage location ({short})", path=str(uri))


def _aws_credentials_given() -> bool:
    """Whether the environment names AWS credentials at all (an instance role is not seen here)."""
    env = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
           "AWS_CONTAINER_CREDENTIALS_FULL_URI")
    files = (os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials",
             os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config")
    return any(os.environ.get(k) for k in env) or any(Path(f).expanduser().is_file() for f in files)


def _s3(uri: Uri) -> pafs.FileSystem:
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
    kwargs: dict[str, Any] = {}
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs.update(endpoint_override=host or endpoint, scheme=scheme if host else "https")
    if region:
        kwargs["region"] = region
    return pafs.S3FileSystem(**kwargs)


def _hf(uri: Uri) -> pafs.FileSystem:
    try:
        from huggingface_hub import HfFileSystem
    except ImportError:
        raise BadInput("hf:// needs the huggingface_hub package: pip install huggingface_hub (or xlp[storage])",
                       path=str(uri)) from None
    return pafs.PyFileSystem(pafs.FSSpecHandler(HfFileSystem()))


def _gs(uri: Uri) -> pafs.FileSystem:
    if not hasattr(pafs, "GcsFileSystem"):  # (a pyarrow built without GCS)
        raise BadInput("gs:// needs a pyarrow built with GCS support (the pyarrow wheels are)", path=str(uri))
    return pafs.GcsFileSystem()


FILESYSTEMS: dict[str, Callable[[Uri], pafs.FileSystem]] = {"s3": _s3, "gs": _gs, "hf": _hf}


def _root(uri: Uri) -> tuple[str, str]:
    """What must exist before anything is read or written: the bucket, or on the Hub the repository
    (datasets/OWNER/NAME, spaces/OWNER/NAME, or OWNER/NAME for a model)."""
    if uri.scheme != "hf":
        return uri.bucket, "bucket"
    parts = uri.path.split("/")
    return "/".join(parts[:3] if parts[0] in ("datasets", "spaces", "models") else parts[:2]), "repository"


@dataclasses.dataclass
class Store:
    """The objects under one URI's prefix."""

    uri: Uri
    fs: pafs.FileSystem

    @classmethod
    def open(cls, uri: Uri) -> "Store":
        """The store of `uri`, its bucket checked (so a typo in the bucket is one line before any work)."""
        root, what = _root(uri)
        try:
            fs = FILESYSTEMS[uri.scheme](uri)
            info = fs.get_file_info(root)
        except (OSError, ValueError) as e:
            raise explain(e, uri) from None
        if info.type == pafs.FileType.NotFound:
            raise BadInput(f"the {what} '{root}' does not exist (or these credentials cannot see it)", path=str(uri))
        return cls(uri, fs)

    def _key(self, rel: str) -> str:
        return f"{self.uri.path}/{rel}" if rel else self.uri.path

    def _call(self, fn: Callable[[], T], rel: str = "", transfer: bool = True) -> T:
        try:
            return fn()
        except (OSError, ValueError) as e:
            raise explain(e, self.uri.child(rel) if rel else self.uri, transfer=transfer) from None

    def kind(self, rel: str = "") -> str:
        """"file", "folder" or "none" for the object (or prefix) `rel` under the URI."""
        info = self._call(lambda: self.fs.get_file_info(self._key(rel)), rel, transfer=False)
        return {pafs.FileType.File: "file", pafs.FileType.Directory: "folder"}.get(info.type, "none")

    def listing(self) -> dict[str, tuple[int, int]]:
        """{key relative to the URI: (size, mtime in ns)} of every object under the prefix."""
        if self.kind() != "folder":
            return {}
        selector = pafs.FileSelector(self.uri.path, recursive=True, allow_not_found=True)
        infos = self._call(lambda: self.fs.get_file_info(selector), transfer=False)
        base = len(self.uri.path) + 1
        return {i.path[base:]: (int(i.size or 0), int(i.mtime_ns or 0)) for i in infos if i.type == pafs.FileType.File}

    def stat(self, rel: str) -> tuple[int, int] | None:
        info = self._call(lambda: self.fs.get_file_info(self._key(rel)), rel)
        return (int(info.size or 0), int(info.mtime_ns or 0)) if info.type == pafs.FileType.File else None

    def read_bytes(self, rel: str) -> bytes | None:
        if self.stat(rel) is None:
            return None

        def read() -> bytes:
            with self.fs.open_input_stream(self._key(rel)) as f:
                return f.read()
        return self._call(read, rel)

    def get(self, rel: str, dest: Path) -> None:
        """Download one object to `dest` (a temporary name beside it, renamed when complete)."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.tmp")

        def copy() -> None:
            with self.fs.open_input_stream(self._key(rel)) as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        try:
            self._call(copy, rel)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)

    def put_bytes(self, rel: str, data: bytes) -> None:
        """Write one small object whole, straight to its key (a single request: never visible half-written)."""
        self.write(rel, None, data)

    def write(self, rel: str, source: Path | None, data: bytes | None = None) -> None:
        """Upload `source` (or `data`) to the key `rel`. Only whole objects become visible on S3, GCS and the Hub,
        but a failed write may still complete a multipart upload: callers write to keys no reader trusts
        (`remote_sync`: a push's staging area) and copy from there."""
        def write() -> None:
            with self.fs.open_output_stream(self._key(rel)) as out:
                if data is not None:
                    out.write(data)
                else:
                    with open(source, "rb") as src:  # type: ignore[arg-type]
                        shutil.copyfileobj(src, out, 1 << 20)
        self._call(write, rel)

    def copy(self, src: str, dest: str) -> None:
        """Copy one object to another key on the server (whole: `dest` holds its old or its new content)."""
        self._call(lambda: self.fs.copy_file(self._key(src), self._key(dest)), dest)

    def delete(self, rel: str) -> None:
        def remove() -> None:
            try:
                self.fs.delete_file(self._key(rel))
            except FileNotFoundError:
                pass
        self._call(remove, rel)
