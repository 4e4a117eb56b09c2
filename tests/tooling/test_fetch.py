"""The build-time header fetch (scripts/_fetchutil.py) against a package index served on loopback: range
reads of a wheel, whole downloads where ranges are refused, local indexes and find-links, pip's
settings, the cache, and the errors that tell a user what to place where."""

import hashlib
import http.server
import io
import json
import os
import pathlib
import sys
import tarfile
import threading
import zipfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
import _fetchutil  # noqa: E402
from _fetchutil import Artifact, FetchError, Member, PipSettings  # noqa: E402

HEADER = b"/* a header */\n#define ANSWER 42\n" * 50


def sha(data):
    return hashlib.sha256(data).hexdigest()


def make_wheel():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("pkg/padding.bin", os.urandom(3 << 20))  # what a range read must skip
        z.writestr("pkg/include/x/api.h", HEADER)
    return buf.getvalue()


def make_sdist():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        info = tarfile.TarInfo("pkg-1.0/src/api.h")
        info.size = len(HEADER)
        t.addfile(info, io.BytesIO(HEADER))
    return buf.getvalue()


WHEEL = make_wheel()
SDIST = make_sdist()
WHEEL_ARTIFACT = Artifact("fake-pkg", "fake_pkg-1.0-py3-none-any.whl", sha(WHEEL),
                          (Member("pkg/include/x/api.h", "x/api.h", sha(HEADER)),))
SDIST_ARTIFACT = Artifact("fake-pkg", "fake-pkg-1.0.tar.gz", sha(SDIST),
                          (Member("pkg-1.0/src/api.h", "api.h", sha(HEADER)),))
FILES = {WHEEL_ARTIFACT.filename: WHEEL, SDIST_ARTIFACT.filename: SDIST}


class Index(http.server.BaseHTTPRequestHandler):
    ranges = True
    requests = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        type(self).requests.append((self.path, self.headers.get("Range")))
        if self.path == "/simple/fake-pkg/":
            body = json.dumps({"files": [{"filename": n, "url": f"../../files/{n}"} for n in FILES]}).encode()
            return self._send(200, body, {"Content-Type": "application/vnd.pypi.simple.v1+json"})
        name = self.path.rsplit("/", 1)[-1]
        if not self.path.startswith("/files/") or name not in FILES:
            return self._send(404, b"")
        data = FILES[name]
        rng = self.headers.get("Range")
        if rng and type(self).ranges:
            start, end = (int(v) for v in rng.split("=")[1].split("-"))
            end = min(end, len(data) - 1)
            return self._send(206, data[start:end + 1], {"Content-Range": f"bytes {start}-{end}/{len(data)}"})
        self._send(200, data)

    def _send(self, code, body, headers=None):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def index(monkeypatch, tmp_path):
    Index.ranges, Index.requests = True, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("JAX_METAL_PLUGIN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_fetchutil, "_pip_download", lambda *a: (_ for _ in ()).throw(FetchError("no pip here")))
    yield PipSettings(index_url=f"http://127.0.0.1:{server.server_address[1]}/simple")
    server.shutdown()


def fetched_bytes():
    return sum(len(FILES[p.rsplit("/", 1)[-1]]) if r is None else int(r.split("-")[1]) - int(r.split("=")[1].split("-")[0]) + 1
               for p, r in Index.requests if p.startswith("/files/"))


def test_a_wheel_member_is_read_with_range_requests(index, tmp_path):
    [path] = _fetchutil.fetch(WHEEL_ARTIFACT, str(tmp_path / "out"), settings=index, log=lambda m: None)
    assert path == str(tmp_path / "out" / "x" / "api.h")
    assert pathlib.Path(path).read_bytes() == HEADER
    assert fetched_bytes() < len(WHEEL) / 4, "the range read fetched most of the wheel"


def test_a_server_without_ranges_gets_a_whole_download_checked_by_hash(index, tmp_path):
    Index.ranges = False
    [path] = _fetchutil.fetch(WHEEL_ARTIFACT, str(tmp_path / "out"), settings=index, log=lambda m: None)
    assert pathlib.Path(path).read_bytes() == HEADER
    assert fetched_bytes() >= len(WHEEL)


def test_an_sdist_member_is_extracted(index, tmp_path):
    [path] = _fetchutil.fetch(SDIST_ARTIFACT, str(tmp_path / "out"), settings=index, log=lambda m: None)
    assert pathlib.Path(path).read_bytes() == HEADER


def test_once_cached_no_network_is_needed(index, tmp_path):
    _fetchutil.fetch(WHEEL_ARTIFACT, str(tmp_path / "a"), settings=index, log=lambda m: None)
    offline = PipSettings(index_url="http://127.0.0.1:9/simple")  # nothing listens on port 9
    [path] = _fetchutil.fetch(WHEEL_ARTIFACT, str(tmp_path / "b"), settings=offline, log=lambda m: None)
    assert pathlib.Path(path).read_bytes() == HEADER


def test_a_wheel_placed_in_the_cache_by_hand_is_used(index, tmp_path):
    cache = pathlib.Path(os.environ["JAX_METAL_PLUGIN_CACHE"])
    cache.mkdir(parents=True, exist_ok=True)
    (cache / WHEEL_ARTIFACT.filename).write_bytes(WHEEL)
    offline = PipSettings(index_url="http://127.0.0.1:9/simple")
    [path] = _fetchutil.fetch(WHEEL_ARTIFACT, str(tmp_path / "out"), settings=offline, log=lambda m: None)
    assert pathlib.Path(path).read_bytes() == HEADER


def test_local_indexes_and_find_links_are_read_as_pip_reads_them(monkeypatch, tmp_path):
    monkeypatch.setenv("JAX_METAL_PLUGIN_CACHE", str(tmp_path / "cache"))
    links = tmp_path / "links"
    links.mkdir()
    (links / WHEEL_ARTIFACT.filename).write_bytes(WHEEL)
    [path] = _fetchutil.fetch(WHEEL_ARTIFACT, str(tmp_path / "a"),
                              settings=PipSettings(index_url="http://127.0.0.1:9/simple", find_links=(str(links),)),
                              log=lambda m: None)
    assert pathlib.Path(path).read_bytes() == HEADER
    simple = tmp_path / "simple" / "fake-pkg"
    simple.mkdir(parents=True)
    (simple / "index.html").write_text(f'<a href="../../files/{SDIST_ARTIFACT.filename}#sha256=x">'
                                       f'{SDIST_ARTIFACT.filename}</a>')
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / SDIST_ARTIFACT.filename).write_bytes(SDIST)
    [path] = _fetchutil.fetch(SDIST_ARTIFACT, str(tmp_path / "b"),
                              settings=PipSettings(index_url=(tmp_path / "simple").as_uri()), log=lambda m: None)
    assert pathlib.Path(path).read_bytes() == HEADER


def test_a_wrong_hash_is_refused_and_the_error_says_what_to_place_where(index, tmp_path):
    bad = Artifact(WHEEL_ARTIFACT.project, WHEEL_ARTIFACT.filename, WHEEL_ARTIFACT.sha256,
                   (Member("pkg/include/x/api.h", "x/api.h", "0" * 64),))
    with pytest.raises(FetchError) as e:
        _fetchutil.fetch(bad, str(tmp_path / "out"), settings=index, log=lambda m: None)
    text = str(e.value)
    assert "expected " + "0" * 64 in text
    assert os.environ["JAX_METAL_PLUGIN_CACHE"] in text and WHEEL_ARTIFACT.filename in text
    assert "0000000000000000-api.h" in text
    assert not (tmp_path / "out" / "x" / "api.h").exists()


def test_an_unknown_file_names_the_indexes_it_looked_at(index, tmp_path):
    missing = Artifact("fake-pkg", "fake_pkg-2.0.tar.gz", "1" * 64, (Member("a", "a.h", "2" * 64),))
    with pytest.raises(FetchError, match="is on none of pip's indexes .*127.0.0.1"):
        _fetchutil.fetch(missing, str(tmp_path / "out"), settings=index, log=lambda m: None)


def test_pip_settings_come_from_pip_and_its_environment(monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.invalid/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://a.invalid/simple https://b.invalid/simple")
    monkeypatch.setenv("PIP_TRUSTED_HOST", "a.invalid")
    s = _fetchutil.pip_settings()
    assert s.index_url == "https://mirror.invalid/simple"
    assert s.extra_index_urls == ("https://a.invalid/simple", "https://b.invalid/simple")
    assert s.trusted_hosts == ("a.invalid",)
