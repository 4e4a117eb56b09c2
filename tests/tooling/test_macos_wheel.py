"""The macOS wheel: scripts/build_wheel.py packs it, scripts/check_wheel.py (with our Mach-O reader,
scripts/macho.py) refuses what would not install or load on a Mac.

The checker's logic runs everywhere on small hand-made Mach-O files, each broken in one way; the real
cross-built wheel is checked where Apple's SDK is set up (skipped, saying why, elsewhere, as in CI).
"""

import hashlib
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import build_wheel  # noqa: E402
import check_wheel  # noqa: E402
import macho  # noqa: E402

SYSTEM_LIBS = ["/System/Library/Frameworks/Metal.framework/Versions/A/Metal", "/usr/lib/libSystem.B.dylib"]
PACKAGE_SYMBOLS = sorted({"GetPjrtApi"} | check_wheel.called_symbols(
    {p.name: p.read_text() for p in (ROOT / "jax_metal_plugin").glob("*.py")}))


def _pad(data: bytes, to: int = 8) -> bytes:
    return data + b"\0" * (-len(data) % to)


def _dylib_command(cmd: int, name: str) -> bytes:
    body = _pad(name.encode() + b"\0")
    return struct.pack("<IIIIII", cmd, 24 + len(body), 24, 2, 0x10000, 0x10000) + body


def _trie(names: list[str]) -> bytes:
    """An export trie with one edge per name from the root, each to a terminal leaf."""
    root_size = 2 + sum(len(n) + 1 + 2 for n in names)  # offsets below 2^14 take two uleb bytes
    edges = b"".join(name.encode() + b"\0" + bytes([0x80 | ((root_size + 4 * i) & 0x7F), (root_size + 4 * i) >> 7])
                     for i, name in enumerate(names))
    leaf = b"\x02\x00\x00\x00"  # terminal info of 2 bytes (flags 0, address 0), no children
    return b"\x00" + bytes([len(names)]) + edges + leaf * len(names)


_IDENT = b"synthetic\0"


def _signature_size(limit: int) -> int:
    return 20 + 48 + len(_IDENT) + 32 * -(-limit // 4096)


def _signature(data: bytes) -> bytes:
    """An ad-hoc code signature over data: SHA-256 per 4 KiB page."""
    limit, page = len(data), 4096
    hashes = b"".join(hashlib.sha256(data[i:i + page]).digest() for i in range(0, limit, page))
    hash_offset = 48 + len(_IDENT)
    cd = struct.pack(">IIIIIIIIIBBBBII", macho.CSMAGIC_CODEDIRECTORY, hash_offset + len(hashes), 0x20100, 2,
                     hash_offset, 48, 0, -(-limit // page), limit, 32, 2, 0, 12, 0, 0) + _IDENT + hashes
    return struct.pack(">IIIII", macho.CSMAGIC_EMBEDDED_SIGNATURE, 20 + len(cd), 1, 0, 20) + cd


def make_dylib(minos=(14, 0, 0), linked=SYSTEM_LIBS, exports=PACKAGE_SYMBOLS, cputype=macho.CPU_TYPE_ARM64,
               filetype=macho.MH_DYLIB, build_version=True, use_trie=False, sign=True, tamper=False) -> bytes:
    """A minimal Mach-O dylib: header, load commands, a symbol table or export trie, a code signature."""
    names = ["_" + n for n in exports]
    commands = [_dylib_command(macho.LC_ID_DYLIB, "@rpath/libjax_metal_pjrt.dylib")]
    if build_version:
        commands.append(struct.pack("<IIIIII", macho.LC_BUILD_VERSION, 24, macho.PLATFORM_MACOS,
                                    macho.encode_version(*minos), macho.encode_version(14, 0), 0))
    commands += [_dylib_command(macho.LC_LOAD_DYLIB, name) for name in linked]
    data_start = len(_pad(b"\0" * (32 + sum(map(len, commands)) + 24 + 16), 16))  # + exports and signature commands
    if use_trie:
        payload = _trie(names)
        commands.append(struct.pack("<IIII", macho.LC_DYLD_EXPORTS_TRIE, 16, data_start, len(payload)))
    else:
        strtab = b"\0" + b"".join(n.encode() + b"\0" for n in names)
        offsets = [1 + sum(len(n) + 1 for n in names[:i]) for i in range(len(names))]
        symbols = b"".join(struct.pack("<IBBHQ", off, macho.N_SECT | macho.N_EXT, 1, 0, 0) for off in offsets)
        payload = symbols + strtab
        commands.append(struct.pack("<IIIIII", macho.LC_SYMTAB, 24, data_start, len(names),
                                    data_start + len(symbols), len(strtab)))
    signature_at = data_start + len(_pad(payload, 16))
    if sign:
        commands.append(struct.pack("<IIII", macho.LC_CODE_SIGNATURE, 16, signature_at, _signature_size(signature_at)))
    body = b"".join(commands)
    header = struct.pack("<IiiIIIII", macho.MH_MAGIC_64, cputype, 0, filetype, len(commands), len(body), 0, 0)
    data = bytearray((header + body).ljust(data_start, b"\0") + _pad(payload, 16))
    if not sign:
        return bytes(data)
    blob = _signature(bytes(data))
    if tamper:
        data[data_start - 1] ^= 0xFF  # one signed byte changes after signing
    return bytes(data) + blob


def _wheel(tmp_path, **dylib) -> pathlib.Path:
    library = tmp_path / "lib" / "libjax_metal_pjrt.dylib"
    library.parent.mkdir(exist_ok=True)
    library.write_bytes(make_dylib(**dylib))
    return build_wheel.build(library, tmp_path / "dist")


def _rewrite(wheel: pathlib.Path, changes: dict, fix_record: bool = True) -> pathlib.Path:
    """The wheel with some files replaced (None: removed), RECORD recomputed unless told not to."""
    with zipfile.ZipFile(wheel) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    for name, data in changes.items():
        if data is None:
            del files[name]
        else:
            files[name] = data
    record = next(name for name in files if name.endswith(".dist-info/RECORD"))
    if fix_record:
        files[record] = "".join(f"{n},{build_wheel.record_hash(d)},{len(d)}\n" for n, d in files.items()
                                if n != record).encode() + f"{record},,\n".encode()
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def _dist_info(wheel: pathlib.Path) -> str:
    return wheel.name.split("-py3-")[0] + ".dist-info"


def _pyproject():
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_a_well_formed_wheel_passes_every_check_and_pip_takes_it_for_macos_14_arm64(tmp_path):
    wheel = _wheel(tmp_path)
    project = _pyproject()
    assert wheel.name == f"jax_metal_plugin-{project['version']}-py3-none-macosx_14_0_arm64.whl"
    assert check_wheel.check_wheel(wheel) == []


def test_the_metadata_states_pyprojects_requirements_and_entry_point(tmp_path):
    wheel = _wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        meta = archive.read(f"{_dist_info(wheel)}/METADATA").decode()
        entry = archive.read(f"{_dist_info(wheel)}/entry_points.txt").decode()
        names = archive.namelist()
    project = _pyproject()
    requires = [line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist: ")]
    for dep in project["dependencies"]:
        assert dep in requires
    assert any(r.startswith("jax>=") for r in requires) and any(r.startswith("jaxlib>=") for r in requires)
    assert f"Requires-Python: {project['requires-python']}" in meta.splitlines()
    assert "[jax_plugins]\nmetal = jax_metal_plugin\n" in entry
    assert "jax_metal_plugin/_native.py" in names and "jax_metal_plugin/libjax_metal_pjrt.dylib" in names
    assert not [n for n in names if n.endswith(".so") or "_core" in n]


def test_the_wheel_is_reproducible(tmp_path):
    first = _wheel(tmp_path).read_bytes()
    assert _wheel(tmp_path).read_bytes() == first


WITHOUT_CORE = """
import sys
sys.modules["jax_metal_plugin._core"] = None  # as in the wheel: no Python extension module
import jax, jax.numpy as jnp, numpy as np
from jax_metal_plugin import tools
try:
    import jax_metal_plugin._core
    raise SystemExit("_core was importable")
except ImportError:
    pass
seen = []
def f(x):
    jax.debug.callback(lambda v: seen.append(np.asarray(v)), x)
    return jnp.sin(x) * 2
x = jnp.linspace(-3.0, 3.0, 7)
on_metal = jax.jit(f)(jax.device_put(x, jax.devices("metal")[0]))
jax.effects_barrier()
assert on_metal.devices() == {jax.devices("metal")[0]}
np.testing.assert_array_equal(seen[0], np.asarray(x))
on_cpu = jax.jit(f)(jax.device_put(x, jax.devices("cpu")[0]))
np.testing.assert_allclose(np.asarray(on_metal), np.asarray(on_cpu), rtol=1e-6, atol=1e-6)  # a few float32 ulps of sin
graph = tools.mps_graph(lambda v: jnp.sin(v) * 2, x)
assert "Sin(" in graph and "@metal" in graph, graph
assert "sine" in tools.stablehlo_ir(lambda v: jnp.sin(v), x)
print("ok")
"""


def test_the_package_runs_without_the_developer_module():
    # What a wheel install lacks: jax_metal_plugin._core. Registration, execution, callbacks and the
    # tools must not need it.
    r = subprocess.run([sys.executable, "-c", WITHOUT_CORE], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, JAX_PLATFORMS="metal,cpu"))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-3000:] + r.stderr[-3000:]


BROKEN_LIBRARIES = {
    "newer minimum macOS": (dict(minos=(15, 0, 0)), "minimum macOS 15.0.0"),
    "a non-system library": (dict(linked=SYSTEM_LIBS + ["@rpath/libomp.dylib"]), "@rpath/libomp.dylib"),
    "a Homebrew library": (dict(linked=["/opt/homebrew/lib/libopenblas.dylib"]), "/opt/homebrew/lib/libopenblas"),
    "no GetPjrtApi": (dict(exports=[s for s in PACKAGE_SYMBOLS if s != "GetPjrtApi"]), "missing GetPjrtApi"),
    "no tool symbols": (dict(exports=["GetPjrtApi"]), "missing jmp_"),
    "x86_64": (dict(cputype=macho.CPU_TYPE_X86_64), "x86_64"),
    "an executable": (dict(filetype=2), "file type 2"),
    "no build version": (dict(build_version=False), "LC_BUILD_VERSION"),
    "unsigned": (dict(sign=False), "unsigned"),
    "modified after signing": (dict(tamper=True), "does not match its signed hash"),
}


@pytest.mark.parametrize("case", BROKEN_LIBRARIES)
def test_a_library_broken_in_one_way_fails_exactly_that_check(tmp_path, case):
    dylib, expected = BROKEN_LIBRARIES[case]
    failures = check_wheel.check_wheel(_wheel(tmp_path, **dylib), run_pip=False)
    assert len(failures) == 1 and expected in failures[0], failures


def test_the_export_trie_is_read(tmp_path):
    assert check_wheel.check_wheel(_wheel(tmp_path, use_trie=True), run_pip=False) == []
    failures = check_wheel.check_wheel(_wheel(tmp_path, use_trie=True, exports=["jmp_tool_free"]), run_pip=False)
    assert len(failures) == 1 and "missing GetPjrtApi" in failures[0], failures


def _metadata_without(wheel, prefix):
    with zipfile.ZipFile(wheel) as archive:
        meta = archive.read(f"{_dist_info(wheel)}/METADATA").decode()
    return "\n".join(line for line in meta.splitlines() if not line.startswith(prefix)).encode()


BROKEN_WHEELS = {
    "a file differs from RECORD": (lambda w: _rewrite(w, {"jax_metal_plugin/tools.py": b"# changed\n"}, False),
                                   "RECORD lists every file"),
    "a Python file missing": (lambda w: _rewrite(w, {"jax_metal_plugin/_native.py": None}), "Python files"),
    "an extension module": (lambda w: _rewrite(w, {"jax_metal_plugin/_core.cpython-311-darwin.so": b"\0"}),
                            "extension module"),
    "no entry point": (lambda w: _rewrite(w, {f"{_dist_info(w)}/entry_points.txt": b"[console_scripts]\n"}),
                       "jax_plugins"),
    "no jax requirement": (lambda w: _rewrite(w, {f"{_dist_info(w)}/METADATA": _metadata_without(
        w, "Requires-Dist: jax>=")}), "Requires-Dist jax>="),
    "a different jaxlib floor": (lambda w: _rewrite(w, {f"{_dist_info(w)}/METADATA": _metadata_without(
        w, "Requires-Dist: jaxlib").replace(b"Requires-Dist: jax>=", b"Requires-Dist: jaxlib>=0.4.1\nRequires-Dist: jax>=")}),
        "Requires-Dist jaxlib"),
    "no Requires-Python": (lambda w: _rewrite(w, {f"{_dist_info(w)}/METADATA": _metadata_without(
        w, "Requires-Python")}), "Requires-Python"),
}


@pytest.mark.parametrize("case", BROKEN_WHEELS)
def test_a_wheel_broken_in_one_way_fails_exactly_that_check(tmp_path, case):
    breaks, expected = BROKEN_WHEELS[case]
    failures = check_wheel.check_wheel(breaks(_wheel(tmp_path)), run_pip=False)
    assert len(failures) == 1 and expected in failures[0], failures


def test_without_the_entry_point_the_installed_wheel_is_no_plugin(tmp_path):
    breaks, _ = BROKEN_WHEELS["no entry point"]
    failures = check_wheel.check_wheel(breaks(_wheel(tmp_path)))
    assert len(failures) == 2, failures
    assert "jax_plugins" in failures[0] and "importlib.metadata finds the metal plugin" in failures[1], failures


def test_the_check_follows_pips_verdict(tmp_path):
    # Asked about macOS 13.0 for a wheel tagged 14.0, pip refuses where the check expects it to accept:
    # exactly that case fails, the others (14.0 accepted, 12.0 and x86_64 refused) agree with pip.
    report = check_wheel.Report()
    check_wheel.check_pip(report, _wheel(tmp_path), "macosx_13_0_arm64", _pyproject()["requires-python"])
    assert len(report.failures) == 1 and "pip accepts it for macosx_13_0_arm64" in report.failures[0], report.failures


def macos_sdk():
    sdk = os.environ.get("MACOS_SDK")
    if sdk and os.path.isdir(sdk):
        return sdk
    tool = ROOT.parent / "shared" / "tools" / "macos-sdk"
    if tool.exists():
        r = subprocess.run([str(tool), "path"], capture_output=True, text=True)
        if r.returncode == 0 and os.path.isdir(r.stdout.strip()):
            return r.stdout.strip()
    return None


SDK = macos_sdk()


@pytest.mark.skipif(SDK is None or shutil.which(os.environ.get("CXX", "clang++-16")) is None,
                    reason="no macOS SDK and clang here (set MACOS_SDK, or run ../shared/tools/macos-sdk setup)")
def test_the_cross_built_wheel_passes_the_checks(tmp_path):
    r = subprocess.run([str(ROOT / "scripts" / "build-macos.sh"), str(tmp_path)], capture_output=True, text=True,
                       env=dict(os.environ, MACOS_SDK=SDK, PYTHON=sys.executable), timeout=3000)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    wheel = pathlib.Path(r.stdout.strip().splitlines()[-1])
    assert wheel.parent == tmp_path and wheel.name.endswith("-py3-none-macosx_14_0_arm64.whl")
    assert "all checks passed" in r.stderr
    assert check_wheel.check_wheel(wheel) == []
    with zipfile.ZipFile(wheel) as archive:
        library = macho.parse(archive.read("jax_metal_plugin/libjax_metal_pjrt.dylib"))
    # What the Metal executor and the host's LAPACK need, from the system: the reader saw the real links.
    frameworks = {name.rsplit("/", 1)[-1] for name in library.linked}
    assert {"Metal", "MetalPerformanceShadersGraph", "Accelerate"} <= frameworks, library.linked
    assert library.install_name == "@rpath/libjax_metal_pjrt.dylib"
