"""Our VHLO reader on artifacts jaxlib makes at StableHLO 0.9.0, 1.0.0, 1.9.0 and the current target."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from artifacts import PROGRAMS, VERSIONS, artifact
from jax_metal_plugin import _native
from jaxcompare import assert_close

EXPECTED_OPS = {
    "elementwise": ["stablehlo.tanh", "stablehlo.exponential", "stablehlo.multiply"],
    "dot_argmax": ["stablehlo.dot_general", "stablehlo.reduce", "stablehlo.iota", "comparison_direction = GT"],
    "while": ["stablehlo.while", "stablehlo.compare", "func.call"],
    "cond": ["stablehlo.case", "stablehlo.sine", "stablehlo.cosine"],
    "sort": ["stablehlo.sort", "TOTALORDER"],
    "gather_scatter": ["stablehlo.gather", "stablehlo.scatter", "stablehlo.remainder"],
    "constants": ["tensor<4xf32>", "tensor<3xi1>", "bf16", "f16"],
    "random": ["stablehlo.shift_right_logical", "ui32"],
    "conv": ["stablehlo.convolution", "feature_group_count"],
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_reads_every_version(name, version):
    text = _native.parse_artifact(artifact(name, version))
    assert f"StableHLO_v{version}" in text
    assert "func public @main" in text
    for expected in EXPECTED_OPS[name]:
        assert expected in text, f"{expected!r} missing from {name} at {version}:\n{text}"


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_lowers(version):
    for name in PROGRAMS:
        assert "graph(" in _native.place_artifact(artifact(name, version))


def test_locations_are_kept():
    text = _native.parse_artifact(artifact("elementwise", VERSIONS[-1]))
    assert 'loc("' in text and "artifacts.py:" in text


def test_newer_versions_than_advertised_are_refused():
    data = bytearray(artifact("elementwise", VERSIONS[-1]))
    producer = data.index(b"StableHLO_v")
    end = data.index(b"\0", producer)
    data[producer:end] = b"StableHLO_v9.9.9"[: end - producer].ljust(end - producer, b"9")
    with pytest.raises(ValueError, match="outside what this plugin reads|not a StableHLO"):
        _native.parse_artifact(bytes(data))


@pytest.mark.parametrize("version", VERSIONS)
def test_argument_attributes_are_kept(version):
    # What JAX emits for donated arguments: tf.aliasing_output when a result has the argument's type,
    # jax.buffer_donor when one only has its size. Other dialects' attributes (sdy.sharding) are dropped.
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax_metal_plugin._jax_internals import mlir
    from jax_metal_plugin import tools

    if "cpu" not in mlir._platforms_with_donation:
        pytest.skip("this JAX lowers no donation")
    # Lowered for the CPU backend, which donates in every JAX version; the attributes are the same.
    x, y = jax.device_put((np.ones(4, np.float32), np.ones((2, 2), np.float32)), jax.devices("cpu")[0])
    fn = lambda x, y, z: (x * 2, jnp.sum(x) + y.reshape(4) + z)  # noqa: E731
    lowered = jax.jit(fn, donate_argnums=(0, 1)).lower(x, y, x)
    text = _native.parse_artifact(tools._serialize(lowered.as_text(dialect="stablehlo"), version))
    header = next(line for line in text.splitlines() if line.startswith("func public @main"))
    assert header.startswith("func public @main(tensor<4xf32> {tf.aliasing_output = 0}, "
                             "tensor<2x2xf32> {jax.buffer_donor = true}, tensor<4xf32>) -> ("), header
    assert "sdy." not in header


def test_sharding_constraint_with_an_open_dimension():
    """Eager jnp.unstack of a key array constrains its argument with an open dimension ({?}), sent in
    Shardy's bytecode (which writes whether a dimension is closed as one byte): it reads, and runs as on cpu."""
    got = {}
    for platform in ("metal", "cpu"):
        keys = jax.device_put(jax.random.split(jax.random.key(0), 8), jax.devices(platform)[0])
        got[platform] = [np.asarray(jax.random.key_data(k)) for k in jnp.unstack(keys)]
    assert_close(got["metal"], got["cpu"], exact=True)
