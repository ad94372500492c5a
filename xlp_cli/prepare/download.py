"""`xlp prepare --download`: fetch the real inputs for `--lang` from their public URLs (urllib only).

Wikipedia (`--source wikipedia`), the dumps.wikimedia.org layout:
    {mirror}/{lang}wiki/{date}/{lang}wiki-{date}-pages-articles.xml.bz2
    {mirror}/{lang}wiki/{date}/{lang}wiki-{date}-sha1sums.txt   (else -md5sums.txt)
With `--dump-date latest` the files are `{lang}wiki/latest/{lang}wiki-latest-...`; the checksum file there
names the dated file (`{lang}wiki-20240501-pages-articles.xml.bz2`), whose date becomes the local name.
The mirror defaults to https://dumps.wikimedia.org (`--mirror` for another, e.g. a local copy).

OPUS (`--source opus --opus-corpus NAME/VERSION`), OPUS's object storage layout (what opus_get uses):
    {mirror}/OPUS-{NAME}/{VERSION}/moses/{l1}-{l2}.txt.zip     (l1 < l2 alphabetically)
for every pair of the `--lang` values; mirror default https://object.pouta.csc.fi. OPUS publishes no
checksum file, so a download is verified by its HTTP Content-Length and the zip's own CRC-32 checks.

Every file is fetched into `NAME.part`, resumed with an HTTP `Range: bytes=N-` request when a `.part` is
already there (a server that ignores Range restarts it), verified, and only then renamed to `NAME`. A file
already present and verified is not fetched again (a `NAME.verified` note keeps the verified checksum and
size so that big dumps are not re-hashed). A missing file on the server (HTTP 404) is bad input (exit 2);
other network failures and checksum mismatches are work failures (exit 1; the bad `.part` is removed).
Downloads go to `OUT/downloads/`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import urllib.error
import zipfile
import zlib
from pathlib import Path

from xlp_cli.artifacts.files import write_json_atomic
from xlp_cli.core import ui
from xlp_cli.core.errors import BadInput, WorkFailed
from xlp_cli.prepare.config import PrepareConfig

WIKIMEDIA = "https://dumps.wikimedia.org"
OPUS_STORAGE = "https://object.pouta.csc.fi"
CHUNK = 1 << 20
TIMEOUT = 60


def download(cfg: PrepareConfig) -> list[Path]:
    """Fetch (or find already fetched) the inputs for cfg.lang; returns the local files."""
    dest = Path(cfg.out) / "downloads"
    if not cfg.lang:
        raise BadInput("--download needs --lang (the languages to fetch)")
    if cfg.source == "wikipedia":
        return [download_wikipedia(lang, cfg.dump_date, cfg.mirror or WIKIMEDIA, dest) for lang in cfg.lang]
    if cfg.source == "opus":
        return download_opus(cfg.opus_corpus, cfg.lang, cfg.mirror or OPUS_STORAGE, dest)
    raise BadInput(f"--download works for --source wikipedia and opus, not {cfg.source}")


# ------------------------------------------------------------------ wikipedia
def download_wikipedia(lang: str, date: str, mirror: str, dest: Path) -> Path:
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", lang):
        raise BadInput(f"not a Wikipedia language code: {lang!r}")
    if date != "latest" and not re.fullmatch(r"\d{8}", date):
        raise BadInput(f"--dump-date must be YYYYMMDD or latest, not {date!r}")
    wiki = f"{lang.replace('-', '_')}wiki"
    base = f"{mirror.rstrip('/')}/{wiki}/{date}"
    sums, algo = _fetch_checksums(base, f"{wiki}-{date}", what=f"Wikipedia dump of {lang!r} ({date})")
    pattern = re.compile(rf"^{re.escape(wiki)}-(\d{{8}}|latest)-pages-articles\.xml\.bz2$")
    names = [n for n in sums if pattern.match(n)]
    if not names:
        raise WorkFailed(f"the checksum file lists no {wiki}-*-pages-articles.xml.bz2", path=f"{base}/{wiki}-{date}-{algo}sums.txt")
    local_name = names[0]
    remote_name = f"{wiki}-{date}-pages-articles.xml.bz2"
    return fetch(f"{base}/{remote_name}", dest / local_name, algo=algo, expected=sums[local_name])


def _fetch_checksums(base: str, prefix: str, what: str) -> tuple[dict[str, str], str]:
    """The published `sha1sums` (else `md5sums`) file as {file name: hex digest}."""
    last = None
    for algo in ("sha1", "md5"):
        url = f"{base}/{prefix}-{algo}sums.txt"
        try:
            body = _get(url).decode("utf-8", errors="replace")
        except _NotFound as e:
            last = e
            continue
        sums = {}
        for line in body.splitlines():
            parts = line.split()
            if len(parts) == 2 and re.fullmatch(r"[0-9a-f]{32,40}", parts[0]):
                sums[parts[1].lstrip("*")] = parts[0]
        if not sums:
            raise WorkFailed("checksum file has no 'digest  name' line", path=url)
        return sums, algo
    raise BadInput(f"no {what} at this address (HTTP 404 for its sha1sums and md5sums files)", path=str(last))


# ------------------------------------------------------------------ OPUS
def download_opus(corpus: str, langs: list[str], mirror: str, dest: Path) -> list[Path]:
    m = re.fullmatch(r"([A-Za-z0-9][\w.-]*)/([\w.-]+)", corpus or "")
    if not m:
        raise BadInput("--download with --source opus needs --opus-corpus NAME/VERSION, e.g. GlobalVoices/v2017q3 "
                       "(see the corpus page on https://opus.nlpl.eu)")
    if len(langs) < 2:
        raise BadInput("--download with --source opus needs at least two --lang values (a language pair)")
    name, version = m.groups()
    out = []
    for a, b in itertools.combinations(sorted(set(langs)), 2):
        url = f"{mirror.rstrip('/')}/OPUS-{name}/{version}/moses/{a}-{b}.txt.zip"
        out.append(fetch(url, dest / f"{name}-{version}.{a}-{b}.txt.zip", algo=None, expected=None))
    return out


# ------------------------------------------------------------------ fetching with resume + verify
class _NotFound(Exception):
    pass


def _get(url: str) -> bytes:
    import urllib.request  # (~5 ms: loaded when a run downloads, not at every `xlp prepare`)

    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=_HEADERS), timeout=TIMEOUT) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        if e.code == 404:
            raise _NotFound(url) from None
        raise WorkFailed(f"download failed: HTTP {e.code} {e.reason}", path=url) from None
    except (urllib.error.URLError, OSError) as e:
        raise WorkFailed(f"download failed: {getattr(e, 'reason', e)}", path=url) from None


_HEADERS = {"User-Agent": "xlp-prepare/0.1 (+https://github.com/; research data preparation)"}


def fetch(url: str, final: Path, *, algo: str | None, expected: str | None) -> Path:
    """Download `url` to `final` via `final.part` with Range resume; verify; rename. Skips a verified file."""
    final.parent.mkdir(parents=True, exist_ok=True)
    note = final.with_name(final.name + ".verified")
    if final.exists():
        if _already_verified(final, note, expected):
            ui.info(f"{final.name}: already downloaded and verified")
            return final
        problem = _verify(final, algo, expected, None)
        if problem is None:
            _write_note(note, final, expected)
            ui.info(f"{final.name}: already downloaded and verified")
            return final
        ui.warn(f"{final}: {problem}; downloading it again")
        final.unlink()
    part = final.with_name(final.name + ".part")
    total = _download_to_part(url, part)
    problem = _verify(part, algo, expected, total)
    if problem is not None:
        part.unlink(missing_ok=True)
        raise WorkFailed(f"downloaded file failed verification: {problem} (removed; rerun to fetch it again)", path=url)
    os.replace(part, final)
    _write_note(note, final, expected)
    return final


def _download_to_part(url: str, part: Path) -> int | None:
    """Append the missing bytes of `url` to `part`. Returns the full size when the server told it."""
    have = part.stat().st_size if part.exists() else 0
    headers = dict(_HEADERS)
    if have:
        headers["Range"] = f"bytes={have}-"
    import urllib.request  # (as in _get)

    req = urllib.request.Request(url, headers=headers)
    try:
        resp = urllib.request.urlopen(req, timeout=TIMEOUT)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # nothing left to fetch: the .part is complete (verification decides)
            ui.info(f"{part.name}: already complete ({have} bytes)")
            return have
        if e.code == 404:
            raise BadInput("not found on the server (HTTP 404): check --lang, --dump-date, --opus-corpus, --mirror",
                           path=url) from None
        raise WorkFailed(f"download failed: HTTP {e.code} {e.reason}", path=url) from None
    except (urllib.error.URLError, OSError) as e:
        raise WorkFailed(f"download failed: {getattr(e, 'reason', e)}", path=url) from None
    with resp:
        total = None
        if resp.status == 206:
            m = re.match(r"bytes (\d+)-(\d+)/(\d+|\*)", resp.headers.get("Content-Range", ""))
            if not m or int(m.group(1)) != have:
                raise WorkFailed(f"server answered the resume request with a wrong Content-Range "
                                 f"{resp.headers.get('Content-Range')!r} (asked from byte {have})", path=url)
            total = int(m.group(3)) if m.group(3) != "*" else None
            mode = "ab"
            ui.info(f"{part.name}: resuming at byte {have}")
        else:  # 200: the whole file (a server without Range support restarts it)
            if have:
                ui.info(f"{part.name}: server ignored the Range request; starting again")
            have = 0
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            mode = "wb"
        done = have
        with ui.progress() as bar, open(part, mode) as f:
            task = bar.add_task(f"download {part.name[:-5]}", total=total, completed=done)
            try:
                while block := resp.read(CHUNK):
                    f.write(block)
                    done += len(block)
                    bar.update(task, completed=done)
            except (OSError, urllib.error.URLError) as e:
                raise WorkFailed(f"download interrupted at byte {done}: {e} (rerun to resume)", path=url) from None
    if total is not None and done != total:
        raise WorkFailed(f"download ended at byte {done} of {total} (rerun to resume)", path=url)
    return total


def _verify(path: Path, algo: str | None, expected: str | None, total: int | None) -> str | None:
    """None when `path` is good, else what is wrong."""
    size = path.stat().st_size
    if total is not None and size != total:
        return f"size {size} bytes, expected {total}"
    if algo and expected:
        h = hashlib.new(algo)
        with open(path, "rb") as f:
            while block := f.read(CHUNK):
                h.update(block)
        if h.hexdigest() != expected:
            return f"{algo} checksum mismatch (got {h.hexdigest()}, published {expected})"
        return None
    if path.name.endswith(".zip") or path.name.endswith(".zip.part"):
        try:
            with zipfile.ZipFile(path) as zf:
                bad = zf.testzip()
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
            return f"not a complete, intact zip archive ({type(e).__name__}: {e})"
        if bad is not None:
            return f"zip member {bad!r} fails its CRC check"
    return None


def _already_verified(final: Path, note: Path, expected: str | None) -> bool:
    try:
        info = json.loads(note.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return info.get("size") == final.stat().st_size and info.get("expected") == expected and expected is not None


def _write_note(note: Path, final: Path, expected: str | None) -> None:
    write_json_atomic(note, {"size": final.stat().st_size, "expected": expected})
