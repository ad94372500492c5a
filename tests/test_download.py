"""`xlp prepare --download`: a local HTTP server on 127.0.0.1 serving the shared Wikipedia samples laid out like
dumps.wikimedia.org (and an OPUS-style zip), with Range support, resume, checksum verification and skips."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import re
import threading
import zipfile

import pytest
from sources_helpers import read_all

from xlp_cli.core.errors import BadInput, WorkFailed
from xlp_cli.prepare.config import PrepareConfig
from xlp_cli.prepare.download import download

DATE = "20240501"


class Site:
    """URL path -> bytes, served by a threaded http.server with optional Range support and faults."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        self.ranges = True
        self.cut_after: int | None = None  # close the connection after this many bytes of a data file (once)
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                site.requests.append((self.path, rng))
                body = site.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                start, status = 0, 200
                m = re.fullmatch(r"bytes=(\d+)-", rng or "")
                if m and site.ranges:
                    start = int(m.group(1))
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.end_headers()
                        return
                    status = 206
                self.send_response(status)
                self.send_header("Content-Length", str(len(body) - start))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.send_header("Accept-Ranges", "bytes" if site.ranges else "none")
                self.end_headers()
                chunk = body[start:]
                if site.cut_after is not None and not self.path.endswith(".txt"):
                    chunk, site.cut_after = chunk[: site.cut_after], None
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(chunk)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def file_requests(self, suffix: str) -> list[str | None]:
        return [r for p, r in self.requests if p.endswith(suffix)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site(shared_data):
    s = Site()
    dumps = shared_data / "wikipedia_dumps"
    en = (dumps / "enwiki-table-markup.xml.bz2").read_bytes()
    bg = (dumps / "bgwiki-latest-pages-articles-shortened.xml.bz2").read_bytes()
    # a dated enwiki dump and its published sha1sums (with other files listed, as the real one has)
    name = f"enwiki-{DATE}-pages-articles.xml.bz2"
    s.files[f"/enwiki/{DATE}/{name}"] = en
    s.files[f"/enwiki/{DATE}/enwiki-{DATE}-sha1sums.txt"] = (
        f"{hashlib.sha1(b'other').hexdigest()}  enwiki-{DATE}-pages-articles-multistream.xml.bz2\n"
        f"{hashlib.sha1(en).hexdigest()}  {name}\n").encode()
    # bgwiki only under latest/, with an md5sums file naming the dated file
    s.files["/bgwiki/latest/bgwiki-latest-pages-articles.xml.bz2"] = bg
    s.files["/bgwiki/latest/bgwiki-latest-md5sums.txt"] = (
        f"{hashlib.md5(bg).hexdigest()}  bgwiki-{DATE}-pages-articles.xml.bz2\n").encode()
    s.en, s.bg, s.en_name = en, bg, name
    yield s
    s.close()


def cfg(tmp_path, site, **kw) -> PrepareConfig:
    base = dict(source="wikipedia", lang=["en"], download=True, mirror=site.url, dump_date=DATE, out=tmp_path / "out")
    base.update(kw)
    return PrepareConfig(**base)


def test_download_verify_and_read(tmp_path, site):
    [path] = download(cfg(tmp_path, site))
    assert path == tmp_path / "out" / "downloads" / site.en_name and path.read_bytes() == site.en
    assert not path.with_name(path.name + ".part").exists()
    recs, _ = read_all("wikipedia", [path])
    assert len({r.origin for r in recs}) == 5 and {r.lang for r in recs} == {"en"}


def test_already_verified_file_is_not_fetched_again(tmp_path, site):
    download(cfg(tmp_path, site))
    n = len(site.file_requests(".xml.bz2"))
    [path] = download(cfg(tmp_path, site))
    assert len(site.file_requests(".xml.bz2")) == n  # only the checksum file was asked for
    assert path.read_bytes() == site.en


def test_resume_with_range(tmp_path, site):
    part = tmp_path / "out" / "downloads" / (site.en_name + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(site.en[:20000])
    [path] = download(cfg(tmp_path, site))
    assert site.file_requests(".xml.bz2") == ["bytes=20000-"]
    assert path.read_bytes() == site.en


def test_interrupted_download_resumes_on_rerun(tmp_path, site):
    site.cut_after = 30000
    with pytest.raises(WorkFailed, match="rerun to resume"):
        download(cfg(tmp_path, site))
    part = tmp_path / "out" / "downloads" / (site.en_name + ".part")
    assert part.stat().st_size == 30000  # kept for the resume
    assert not (tmp_path / "out" / "downloads" / site.en_name).exists()
    [path] = download(cfg(tmp_path, site))
    assert site.file_requests(".xml.bz2")[-1] == "bytes=30000-" and path.read_bytes() == site.en


def test_server_without_range_support_restarts(tmp_path, site):
    site.ranges = False
    part = tmp_path / "out" / "downloads" / (site.en_name + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(b"garbage that must not stay" * 100)
    [path] = download(cfg(tmp_path, site))
    assert path.read_bytes() == site.en


def test_complete_part_gets_416_and_is_verified(tmp_path, site):
    part = tmp_path / "out" / "downloads" / (site.en_name + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(site.en)
    [path] = download(cfg(tmp_path, site))
    assert path.read_bytes() == site.en and site.file_requests(".xml.bz2") == [f"bytes={len(site.en)}-"]


def test_checksum_mismatch_is_an_error_and_leaves_no_file(tmp_path, site):
    site.files[f"/enwiki/{DATE}/enwiki-{DATE}-sha1sums.txt"] = f"{'0' * 40}  {site.en_name}\n".encode()
    with pytest.raises(WorkFailed, match=r"sha1 checksum mismatch"):
        download(cfg(tmp_path, site))
    d = tmp_path / "out" / "downloads"
    assert not (d / site.en_name).exists() and not (d / (site.en_name + ".part")).exists()


def test_corrupted_final_file_is_fetched_again(tmp_path, site):
    [path] = download(cfg(tmp_path, site))
    path.write_bytes(b"x" * 100)
    [path] = download(cfg(tmp_path, site))
    assert path.read_bytes() == site.en


def test_latest_with_md5sums(tmp_path, site):
    [path] = download(cfg(tmp_path, site, lang=["bg"], dump_date="latest"))
    assert path.name == f"bgwiki-{DATE}-pages-articles.xml.bz2" and path.read_bytes() == site.bg
    recs, _ = read_all("wikipedia", [path])
    assert recs and {r.lang for r in recs} == {"bg"}


def test_unknown_language_is_bad_input(tmp_path, site):
    with pytest.raises(BadInput, match="no Wikipedia dump of 'xx'"):
        download(cfg(tmp_path, site, lang=["xx"]))
    with pytest.raises(BadInput, match="--dump-date"):
        download(cfg(tmp_path, site, dump_date="May"))


def test_opus_moses_zip(tmp_path, site, shared_data):
    gv = shared_data / "opus_globalvoices_en_sw"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for lang in ("en", "sw"):
            lines = gzip.decompress((gv / f"GlobalVoices.en-sw.{lang}.gz").read_bytes()).splitlines(keepends=True)
            zf.writestr(f"GlobalVoices.en-sw.{lang}", b"".join(lines[:500]))
        zf.writestr("README", "GlobalVoices")
    site.files["/OPUS-GlobalVoices/v2017q3/moses/en-sw.txt.zip"] = buf.getvalue()
    c = cfg(tmp_path, site, source="opus", lang=["sw", "en"], opus_corpus="GlobalVoices/v2017q3")
    [path] = download(c)
    assert path.name == "GlobalVoices-v2017q3.en-sw.txt.zip"
    recs, _ = read_all("opus", [path], langs=["en", "sw"])
    assert len(recs) == 500 and (recs[0].lang1, recs[0].lang2) == ("en", "sw")
    # a damaged zip on the server: verification fails (OPUS has no checksum file; the zip CRCs are the check)
    data = bytearray(buf.getvalue())
    data[200:210] = b"\0" * 10
    site.files["/OPUS-GlobalVoices/v2017q3/moses/en-sw.txt.zip"] = bytes(data)
    path.unlink()
    with pytest.raises(WorkFailed, match="failed verification"):
        download(c)
    with pytest.raises(BadInput, match="NAME/VERSION"):
        download(cfg(tmp_path, site, source="opus", lang=["en", "sw"], opus_corpus="GlobalVoices"))
