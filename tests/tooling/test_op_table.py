"""Generated from the op table: every MPS op kind has a host implementation and a Metal case, and the
table's MPSGraph selectors and macOS versions agree with the MPSGraph API notes."""

import pathlib
import re

import pytest

from jax_metal_plugin import _native

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLE = ROOT / "cpp" / "mps" / "op_kinds.def"
TABLE_TEXT = TABLE.read_text()
# (name, version, selector, category, domain) for every row, in table order; unary and binary rows
# spell their selector as its parts, which the preprocessor joins the same way; host-only rows have
# neither (a LAPACK row is a host-only row with its operand count).
ROWS = []
for m in re.finditer(r"^JMP_(MPS_OP|MPS_UNARY|MPS_BINARY|HOST_OP|LAPACK_OP)\((.*)\)$", TABLE_TEXT, re.M):
    category = m.group(1).replace("MPS_", "").replace("HOST_OP", "HOST")
    args = [a.strip() for a in re.findall(r'"[^"]*"|[^,]+', m.group(2))]
    name, domain = args[0], args[-1]
    if category == "LAPACK_OP":
        assert len(args) == 3 and args[1].isdigit(), m.group(0)
        category, args = "HOST", [name, domain]
    if category == "HOST":
        assert len(args) == 2, m.group(0)
        ROWS.append((name, "0", "", "HOST", domain))
        continue
    version = args[1]
    if category == "OP":
        assert len(args) == 4, m.group(0)
        selector = args[2].strip('"')
    elif category == "UNARY":
        assert len(args) == 4, m.group(0)
        selector = f"{args[2]}:name:"
    else:
        assert len(args) == 5, m.group(0)
        selector = f"{args[2]}:{args[3]}:name:"
    ROWS.append((name, version, selector, category, domain))
UNIFORM = [r for r in ROWS if r[3] in ("UNARY", "BINARY")]
DOMAINS = set(re.findall(r"^#define JMP_DOMAIN_(\w+)\(m, x\)", (ROOT / "cpp" / "mps" / "op_domain.h").read_text(), re.M))
HOST_DIR = ROOT / "cpp" / "exec" / "host"
HOST = "\n".join(p.read_text() for p in HOST_DIR.glob("*.cc"))
# The Metal executor's decisions are portable C++ (cpp/exec/metal/*.cc); metal_objc.mm only forwards.
METAL = "\n".join(p.read_text() for p in sorted((ROOT / "cpp" / "exec" / "metal").glob("*.cc")))
FORWARDING = (ROOT / "cpp" / "exec" / "metal" / "metal_objc.mm").read_text()
API_NOTES = ROOT.parent / "shared" / "docs" / "mpsgraph-api.md"
CPP_FILES = sorted(p for p in (ROOT / "cpp").rglob("*") if p.suffix in (".cc", ".h", ".mm"))


def test_table_is_the_one_the_build_uses():
    assert [(n, s, int(v)) for n, v, s, *_ in ROWS] == [tuple(k) for k in _native.op_kinds()]


def test_every_row_is_parsed():
    rows = re.findall(r"^JMP_(?:MPS|HOST|LAPACK)_\w+\(", TABLE_TEXT, re.M)
    assert len(rows) == len(ROWS)
    assert {"OP", "UNARY", "BINARY"} <= {r[3] for r in ROWS} <= {"OP", "UNARY", "BINARY", "HOST"}


@pytest.mark.parametrize("name", [r[0] for r in ROWS if r[3] == "OP"])
def test_op_has_host_and_metal_cases(name):
    assert re.search(rf"\bK::k{name}\b|OpKind::k{name}\b", HOST), f"{name}: no host executor case"
    assert re.search(rf"\bK::k{name}\b|OpKind::k{name}\b", METAL), f"{name}: no Metal executor case"


@pytest.mark.parametrize("name", [r[0] for r in ROWS if r[3] == "HOST"])
def test_host_only_op_has_a_host_case(name):
    assert re.search(rf"\bK::k{name}\b|OpKind::k{name}\b", HOST), f"{name}: no host executor case"


def test_metal_executor_generates_host_only_cases_as_unreachable():
    body = _macro_bodies(METAL, "JMP_HOST_OP")
    assert len(body) == 1 and "case K::k##Name:" in body[0][1]


def test_the_objective_c_layer_only_forwards():
    # No switch over op kinds, no op graph: every decision is in the portable code the tests run.
    assert "switch" not in FORWARDING and "OpKind" not in FORWARDING and "mps::" not in FORWARDING


def _macro_bodies(text, macro):
    return re.findall(rf"#define {macro}\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", text)


def test_uniform_rows_are_generated_in_every_executor():
    # The Metal executor calls [graph selector:x name:nil] / [graph primary:a secondary:b name:nil]
    # from the row itself (so the SDK's headers check each selector), and the host executor sends each
    # row to the kernel over its own enum.
    unary = _macro_bodies(METAL, "JMP_MPS_UNARY")
    binary = _macro_bodies(METAL, "JMP_MPS_BINARY")
    assert len(unary) == 1 and re.search(r"\bG\.selector\(", unary[0][1])
    assert len(binary) == 1 and re.search(r"\bG\.primary\(", binary[0][1])
    # ... and the forwarding layer makes each of those calls as the row spells it.
    unary = _macro_bodies(FORWARDING, "JMP_MPS_UNARY")
    binary = _macro_bodies(FORWARDING, "JMP_MPS_BINARY")
    assert len(unary) == 1 and re.search(r"\[\w+ selector:\S+ name:nil\]", unary[0][1])
    assert len(binary) == 1 and re.search(r"\[\w+ primary:\S+ secondary:\S+ name:nil\]", binary[0][1])
    host = re.sub(r"\\\n\s*", " ", (HOST_DIR / "host_executor.cc").read_text())  # join continued macro lines
    assert re.search(r"#define JMP_MPS_UNARY\(.*RunUnary\(a, mps::UnaryOp::k##", host)
    assert re.search(r"#define JMP_MPS_BINARY\(.*RunBinary\(a, mps::BinaryOp::k##", host)


@pytest.mark.parametrize("name,category", [(r[0], r[3]) for r in UNIFORM])
def test_uniform_row_has_host_kernel_cases(name, category):
    enum = "UnOp" if category == "UNARY" else "BinOp"
    # The compiler holds every per-dtype kernel's switch to all rows; this names the file to look in.
    assert re.search(rf"\b{enum}::k{name}\b", (HOST_DIR / "host_elementwise.cc").read_text()), f"{name}: no host kernel"


@pytest.mark.parametrize("name,version,selector,category", [r[:4] for r in ROWS])
def test_selector_is_the_one_the_metal_executor_calls(name, version, selector, category):
    if category == "HOST":
        assert version == "0" and selector == ""
        return
    if category == "OP":
        first = selector.split(":")[0]
        # The portable executor calls it through the interface; a user kernel's pipeline is made by the
        # forwarding layer's newComputePipelineState, which calls the row's selector.
        assert first in METAL or f"{first}:" in FORWARDING, f"{name}: the Metal executor never calls {selector}"
    assert int(version) <= 1400, f"{name}: newer than the macOS 14.0 floor needs an @available fallback"


def _switch_bodies(text):
    """(condition, body at depth 0) of every switch statement, nested ones included."""
    for m in re.finditer(r"\bswitch\s*\(", text):
        i, depth = m.end(), 1
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        cond = text[m.end() : i - 1]
        i = text.index("{", i)
        start, depth = i + 1, 1
        top = []
        i += 1
        while depth:
            c = text[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            elif depth == 1:
                top.append(c)
            i += 1
        yield cond, "".join(top)


OP_ENUM_CASE = re.compile(r"case\s+(?:\w+::)*(?:K|OpKind|UnOp|UnaryOp|BinOp|BinaryOp|R|Reduction|FFTKind)::k\w+")


def test_no_default_in_switches_over_op_kinds():
    offenders = []
    for path in CPP_FILES:
        text = path.read_text()
        for cond, body in _switch_bodies(text):
            if OP_ENUM_CASE.search(body) and re.search(r"\bdefault\s*:", body):
                offenders.append(f"{path.relative_to(ROOT)}: switch ({cond})")
    assert not offenders, "a switch over op kinds with `default:` hides a missing case: " + "; ".join(offenders)


def test_every_row_names_a_domain_the_build_spells_out():
    # mps/op_domain.h spells each domain name out once; an unknown name would not compile, and a
    # domain no row uses is one nobody checks.
    assert len(DOMAINS) >= 9
    assert {r[4] for r in ROWS} <= DOMAINS, {r[4] for r in ROWS} - DOMAINS
    assert DOMAINS <= {r[4] for r in ROWS}, DOMAINS - {r[4] for r in ROWS}


@pytest.mark.skipif(not API_NOTES.exists(), reason="../shared/docs/mpsgraph-api.md is not beside this checkout")
def test_versions_agree_with_api_notes():
    notes = API_NOTES.read_text()
    for name, version, selector, category, _ in ROWS:
        if category == "HOST":
            continue
        m = re.search(re.escape(selector) + r"` \((\d+)\.(\d+)\)", notes)
        if m:
            documented = int(m.group(1)) * 100 + int(m.group(2))
            assert int(version) >= documented, f"{name}: table says {version}, notes say {documented}"
