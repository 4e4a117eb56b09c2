"""The JAX internals the plugin and its tests rely on, for the installed JAX release.

JAX may move any jax._src name in any release; jax_metal_plugin/_jax_internals.py lists every one used.
CI runs this at both ends of the supported range (.ci/run: jax 0.10.2 and the newest), so a release that
moved one fails here, naming it, before anything subtler breaks.
"""

import io
import pathlib
import tokenize

import jax
import pytest

from jax_metal_plugin import _jax_internals

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(_jax_internals.NAMES))
def test_jax_internal_is_where_the_plugin_expects_it(name):
    try:
        _jax_internals.get(name)
    except _jax_internals.MissingInternal as exc:
        pytest.fail(f"jax {jax.__version__}: {_jax_internals.dotted(name)} moved or is gone ({exc}); "
                    f"used for {_jax_internals.NAMES[name]}")


def test_a_missing_internal_is_named(monkeypatch):
    with pytest.raises(_jax_internals.MissingInternal, match=r"jax\._src\.interpreters\.mlir\.no_such_name"):
        _jax_internals.get("mlir.no_such_name")
    monkeypatch.setitem(_jax_internals.MODULES, "gone", "jax._src.no_such_module")
    with pytest.raises(_jax_internals.MissingInternal, match=r"jax\._src\.no_such_module is not importable"):
        _jax_internals.module("gone")


def test_a_moved_module_is_found_in_its_other_place(monkeypatch):
    # How a module JAX moved is listed: its places, newest first; the first that imports serves.
    monkeypatch.setitem(_jax_internals.MODULES, "moved", ("jax._src.no_such_module", "jax._src.core"))
    assert _jax_internals.get("moved.ShapedArray") is jax.core.ShapedArray
    assert _jax_internals.dotted("moved.ShapedArray") == "jax._src.no_such_module.ShapedArray"


def _private_jax_uses(path: pathlib.Path) -> list[int]:
    """Lines of `path` whose code (not strings or comments) names jax._src."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    return [a.start[0] for a, b, c in zip(tokens, tokens[1:], tokens[2:])
            if (a.string, b.string, c.string) == ("jax", ".", "_src")]


def test_jax_internals_are_reached_only_through_one_module():
    files = [p for folder in ("jax_metal_plugin", "tests", "scripts", "benchmarks", "examples")
             for p in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 20
    offenders = {str(p.relative_to(ROOT)): lines for p in files
                 if p.name != "_jax_internals.py" and (lines := _private_jax_uses(p))}
    assert not offenders, f"jax._src used outside jax_metal_plugin/_jax_internals.py (file: lines): {offenders}"
