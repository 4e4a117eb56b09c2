"""Build-time fetching of pinned third-party headers, the way pip would, through one cache.

The build needs two headers that no installed package provides: XLA's PJRT C API header (inside a
274 MB TensorFlow wheel) and pocketfft's (inside numpy's sdist). Each comes from one pinned file on the
package index, and what is extracted is checked against its own pinned sha256. That lets a range request
read the 2 MB of the wheel that hold the header instead of all of it, and lets a cached header build
with no network at all.

The index, extra indexes, find-links, proxy and certificates are pip's own settings (`pip config list`,
PIP_* variables, pip.conf), so a user behind a mirror or a proxy needs nothing beyond what pip needs.
The cache is JAX_METAL_PLUGIN_CACHE, else $XDG_CACHE_HOME/jax-metal-plugin, else ~/.cache/jax-metal-plugin.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html.parser
import io
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile

CACHE_ENV = "JAX_METAL_PLUGIN_CACHE"
TIMEOUT = 120


class FetchError(Exception):
    pass


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_dir():
    path = os.environ.get(CACHE_ENV)
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "jax-metal-plugin")
    os.makedirs(path, exist_ok=True)
    return path


@dataclasses.dataclass(frozen=True)
class Member:
    """One file to take out of an archive: its path inside, the name it gets, its pinned sha256."""
    path: str
    name: str
    sha256: str

    def cached_name(self):
        return f"{self.sha256[:16]}-{os.path.basename(self.name)}"


@dataclasses.dataclass(frozen=True)
class Artifact:
    """A pinned file on the package index and the members the build takes from it."""
    project: str
    filename: str
    sha256: str
    members: tuple

    def howto(self, cache):
        lines = [f"  - place the file {self.filename} (sha256 {self.sha256}) in {cache}, or"]
        for m in self.members:
            lines.append(f"  - place {m.name} (sha256 {m.sha256}, from {m.path} inside {self.filename}) "
                         f"in {cache} as {m.cached_name()}")
        return "\n".join(lines)


# ---- pip's settings

@dataclasses.dataclass
class PipSettings:
    index_url: str = "https://pypi.org/simple"
    extra_index_urls: tuple = ()
    find_links: tuple = ()
    no_index: bool = False
    cert: str | None = None
    client_cert: str | None = None
    proxy: str | None = None
    trusted_hosts: tuple = ()

    def indexes(self):
        return () if self.no_index else (self.index_url, *self.extra_index_urls)


_SETTING = re.compile(r"^(?P<section>[^.]*|:env:)\.(?P<key>[a-z0-9-]+)=(?P<value>.*)$")


def pip_settings(python=sys.executable):
    """pip's effective settings: `pip config list` merges its files, and its environment variables
    (`:env:`) win over them, as they do in pip."""
    rank = {"global": 0, "install": 1, "download": 1, ":env:": 2}
    values, ranks = {}, {}
    try:
        out = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        m = _SETTING.match(line.strip())
        if m and m["section"] in rank and rank[m["section"]] >= ranks.get(m["key"], -1):
            value = m["value"]
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            values[m["key"]], ranks[m["key"]] = value, rank[m["section"]]
    # Without pip (a bare interpreter) its environment variables still say what the user wants.
    for key in ("index-url", "extra-index-url", "find-links", "no-index", "cert", "client-cert", "proxy",
                "trusted-host"):
        env = os.environ.get("PIP_" + key.upper().replace("-", "_"))
        if env is not None and ranks.get(key, -1) < rank[":env:"]:
            values[key] = env
    s = PipSettings()
    if values.get("index-url"):
        s.index_url = values["index-url"]
    s.extra_index_urls = tuple(values.get("extra-index-url", "").split())
    s.find_links = tuple(values.get("find-links", "").split())
    s.no_index = values.get("no-index", "").lower() in ("1", "true", "yes", "on")
    s.cert = values.get("cert") or None
    s.client_cert = values.get("client-cert") or None
    s.proxy = values.get("proxy") or None
    s.trusted_hosts = tuple(values.get("trusted-host", "").split())
    return s


class _Client:
    """urllib with pip's proxy, certificates and trusted hosts; credentials in an index URL are sent
    as basic auth, as pip sends them."""

    def __init__(self, settings):
        self.settings = settings
        context = ssl.create_default_context(cafile=settings.cert) if settings.cert else \
            ssl.create_default_context()
        if settings.client_cert:
            context.load_cert_chain(settings.client_cert)
        self._verified = urllib.request.build_opener(self._proxies(), urllib.request.HTTPSHandler(context=context))
        unverified = ssl._create_unverified_context()
        self._trusted = urllib.request.build_opener(self._proxies(), urllib.request.HTTPSHandler(context=unverified))

    def _proxies(self):
        p = self.settings.proxy
        return urllib.request.ProxyHandler({"http": p, "https": p} if p else None)

    def open(self, url, headers=None):
        parts = urllib.parse.urlsplit(url)
        headers = dict(headers or {})
        if parts.username is not None:
            token = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
            netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
            url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
        opener = self._trusted if parts.hostname in self.settings.trusted_hosts else self._verified
        return opener.open(urllib.request.Request(url, headers=headers), timeout=TIMEOUT)


# ---- finding the file on the index

class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []
        self._href = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None:
            self.links.append((data.strip(), self._href))
            self._href = None


def _local_path(url):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        return urllib.request.url2pathname(parts.path)
    if not parts.scheme or (len(parts.scheme) == 1 and os.name == "nt"):
        return url
    return None


def _project_files(client, index, project):
    """(filename, url) pairs on one simple index page (PEP 691 JSON or PEP 503 HTML)."""
    page = index.rstrip("/") + "/" + re.sub(r"[-_.]+", "-", project).lower() + "/"
    local = _local_path(page)
    if local is not None:
        if os.path.isfile(os.path.join(local, "index.html")):
            with open(os.path.join(local, "index.html"), encoding="utf-8") as f:
                body, ctype = f.read(), "text/html"
            page = urllib.parse.urljoin("file:" + urllib.request.pathname2url(local) + "/", "")
        elif os.path.isdir(local):
            return [(name, os.path.join(local, name)) for name in os.listdir(local)]
        else:
            return []
    else:
        try:
            with client.open(page, {"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"}) as r:
                body, ctype = r.read().decode("utf-8"), r.headers.get("Content-Type", "")
                page = r.geturl()
        except OSError:
            return []
    if "json" in ctype:
        return [(f["filename"], urllib.parse.urljoin(page, f["url"])) for f in json.loads(body).get("files", [])]
    parser = _Links()
    parser.feed(body)
    return [(name, urllib.parse.urljoin(page, href).split("#", 1)[0]) for name, href in parser.links]


def locate(client, artifact):
    """The URL or local path of the artifact: find-links first, then each index, as pip looks."""
    for link in client.settings.find_links:
        local = _local_path(link)
        if local is not None and os.path.isfile(os.path.join(local, artifact.filename)):
            return os.path.join(local, artifact.filename)
    for index in client.settings.indexes():
        for name, url in _project_files(client, index, artifact.project):
            if name == artifact.filename:
                return _local_path(url) or url
    raise FetchError(f"{artifact.filename} is on none of pip's indexes ({', '.join(client.settings.indexes()) or 'none: no-index'})")


# ---- reading part of a remote zip

class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP range requests, for zipfile."""

    BLOCK = 1 << 18

    def __init__(self, client, url):
        self._client, self._url, self._pos = client, url, 0
        self._blocks = {}
        self.fetched = 0
        with client.open(url, {"Range": "bytes=0-0"}) as r:
            total = r.headers.get("Content-Range", "").rpartition("/")[2]
            if r.status != 206 or not total.isdigit():
                raise FetchError("the server does not answer range requests")
        self._size = int(total)

    @property
    def size(self):
        return self._size

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        self._pos = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence] + offset
        return self._pos

    def _block(self, k):
        if k not in self._blocks:
            start, end = k * self.BLOCK, min(self._size, (k + 1) * self.BLOCK) - 1
            with self._client.open(self._url, {"Range": f"bytes={start}-{end}"}) as r:
                data = r.read()
            if r.status != 206 or len(data) != end - start + 1:
                raise FetchError("a range request returned the wrong bytes")
            self.fetched += len(data)
            self._blocks[k] = data
        return self._blocks[k]

    def read(self, n=-1):
        end = self._size if n is None or n < 0 else min(self._size, self._pos + n)
        out = bytearray()
        while self._pos < end:
            k, off = divmod(self._pos, self.BLOCK)
            chunk = self._block(k)[off:off + end - self._pos]
            out += chunk
            self._pos += len(chunk)
        return bytes(out)

    def readinto(self, b):
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


# ---- taking the members out and caching them

def _open_archive(fileobj, filename):
    if filename.endswith(".whl") or filename.endswith(".zip"):
        z = zipfile.ZipFile(fileobj)
        return lambda path: z.read(path)
    t = tarfile.open(fileobj=fileobj)
    return lambda path: t.extractfile(path).read()


def _store(artifact, read, cache):
    """Takes every member out through read(path), checks its hash, writes it into the cache."""
    for m in artifact.members:
        data = read(m.path)
        digest = hashlib.sha256(data).hexdigest()
        if digest != m.sha256:
            raise FetchError(f"{m.path} in {artifact.filename} has sha256 {digest}, expected {m.sha256}")
        target = os.path.join(cache, m.cached_name())
        with tempfile.NamedTemporaryFile(dir=cache, delete=False) as f:
            f.write(data)
        os.replace(f.name, target)


def _cached(artifact, cache):
    return all(os.path.isfile(os.path.join(cache, m.cached_name())) and
               sha256(os.path.join(cache, m.cached_name())) == m.sha256 for m in artifact.members)


def _from_whole_file(artifact, path, cache):
    digest = sha256(path)
    if digest != artifact.sha256:
        raise FetchError(f"{path} has sha256 {digest}, expected {artifact.sha256}")
    with open(path, "rb") as f:
        _store(artifact, _open_archive(f, artifact.filename), cache)


def _download(client, url, target):
    with client.open(url) as r, open(target + ".part", "wb") as f:
        shutil.copyfileobj(r, f, 1 << 20)
    os.replace(target + ".part", target)


def _pip_download(artifact, cache):
    """The last resort for a wheel: pip itself (keyring and every other setting of its own)."""
    m = re.match(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$",
                 artifact.filename)
    if not m:
        raise FetchError("pip download only serves wheels")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--platform",
               m["plat"], "--python-version", m["py"].lstrip("cp"), "--implementation", "cp", "--abi", m["abi"],
               "-d", tmp, f"{artifact.project}=={m['version']}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        path = os.path.join(tmp, artifact.filename)
        if r.returncode != 0 or not os.path.isfile(path):
            raise FetchError("pip download failed: " + (r.stderr.strip().splitlines() or ["no output"])[-1])
        _from_whole_file(artifact, path, cache)


def fetch(artifact, out_dir, *, settings=None, log=None):
    """Makes every member of the artifact a file in out_dir (named Member.name); returns their paths."""
    log = log or (lambda msg: print(f"jax-metal-plugin: {msg}", file=sys.stderr))
    cache = cache_dir()
    if not _cached(artifact, cache):
        errors = []
        whole = os.path.join(cache, artifact.filename)
        if os.path.isfile(whole):
            try:
                _from_whole_file(artifact, whole, cache)
            except (FetchError, OSError, zipfile.BadZipFile, tarfile.TarError) as e:
                errors.append(f"cached {artifact.filename}: {e}")
        if not _cached(artifact, cache):
            _fetch_remote(artifact, cache, settings, log, errors)
        if not _cached(artifact, cache):
            raise FetchError(f"could not get {', '.join(m.name for m in artifact.members)} from {artifact.filename}:\n"
                             + "".join(f"  {e}\n" for e in errors) + "To build offline:\n" + artifact.howto(cache))
    paths = []
    for m in artifact.members:
        target = os.path.join(out_dir, m.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(cache, m.cached_name()), target + ".tmp")
        os.replace(target + ".tmp", target)
        paths.append(target)
    return paths


def _fetch_remote(artifact, cache, settings, log, errors):
    try:
        client = _Client(settings or pip_settings())
        where = locate(client, artifact)
    except (FetchError, OSError, ssl.SSLError) as e:
        errors.append(str(e))
        where = None
    if where is not None and _local_path(where) is not None:
        try:
            _from_whole_file(artifact, _local_path(where), cache)
            return
        except (FetchError, OSError, zipfile.BadZipFile, tarfile.TarError) as e:
            errors.append(f"{where}: {e}")
    elif where is not None:
        if artifact.filename.endswith(".whl"):
            try:
                remote = _RangeFile(client, where)
                _store(artifact, _open_archive(remote, artifact.filename), cache)
                log(f"read {remote.fetched / 1e6:.1f} MB of {artifact.filename} ({remote.size / 1e6:.0f} MB) "
                    f"for {', '.join(m.name for m in artifact.members)}")
                return
            except (FetchError, OSError, zipfile.BadZipFile) as e:
                errors.append(f"range read of {where}: {e}")
        try:
            log(f"downloading {artifact.filename}")
            with tempfile.TemporaryDirectory(dir=cache) as tmp:
                path = os.path.join(tmp, artifact.filename)
                _download(client, where, path)
                _from_whole_file(artifact, path, cache)
            return
        except (FetchError, OSError, zipfile.BadZipFile, tarfile.TarError) as e:
            errors.append(f"download of {where}: {e}")
    if artifact.filename.endswith(".whl"):
        try:
            _pip_download(artifact, cache)
        except (FetchError, OSError) as e:
            errors.append(str(e))


def main(artifact, default_out):
    """Command line: SCRIPT OUT_DIR; prints the paths written, or what to do and exits 1."""
    out_dir = sys.argv[1] if len(sys.argv) > 1 else default_out
    try:
        for path in fetch(artifact, out_dir):
            print(path)
    except FetchError as e:
        sys.exit(f"jax-metal-plugin: {e}")
