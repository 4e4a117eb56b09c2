"""Generated from the op table: every MPS op kind has a host implementation and a Metal case, and the
table's MPSGraph selectors and macOS versions agree with the MPSGraph API notes."""

import pathlib
import re

import pytest

from jax_metal_plugin import _core

ROOT = pathlib.Path(__file__).resolve().parents[1]
TABLE = ROOT / "cpp" / "mps" / "op_kinds.def"
ROWS = re.findall(r'^JMP_MPS_OP\((\w+),\s*(\d+),\s*"([^"]+)"\)', TABLE.read_text(), re.M)
HOST = "\n".join(p.read_text() for p in (ROOT / "cpp" / "exec" / "host").glob("*.cc"))
METAL = "\n".join(p.read_text() for p in (ROOT / "cpp" / "exec" / "metal").glob("*.mm"))
API_NOTES = ROOT.parent / "shared" / "docs" / "mpsgraph-api.md"


def test_table_is_the_one_the_build_uses():
    assert [(n, s, int(v)) for n, v, s in ROWS] == [tuple(k) for k in _core.op_kinds()]


@pytest.mark.parametrize("name", [r[0] for r in ROWS])
def test_op_has_host_and_metal_cases(name):
    assert re.search(rf"\bK::k{name}\b|OpKind::k{name}\b", HOST), f"{name}: no host executor case"
    assert re.search(rf"\bK::k{name}\b|OpKind::k{name}\b", METAL), f"{name}: no Metal executor case"


@pytest.mark.parametrize("name,version,selector", ROWS)
def test_selector_is_the_one_the_metal_executor_calls(name, version, selector):
    first = selector.split(":")[0]
    assert first in METAL, f"{name}: the Metal executor never calls {selector}"
    assert int(version) <= 1400, f"{name}: newer than the macOS 14.0 floor needs an @available fallback"


@pytest.mark.skipif(not API_NOTES.exists(), reason="../shared/docs/mpsgraph-api.md is not beside this checkout")
def test_versions_agree_with_api_notes():
    notes = API_NOTES.read_text()
    for name, version, selector in ROWS:
        m = re.search(re.escape(selector) + r"` \((\d+)\.(\d+)\)", notes)
        if m:
            documented = int(m.group(1)) * 100 + int(m.group(2))
            assert int(version) >= documented, f"{name}: table says {version}, notes say {documented}"
