"""Compile options are checked as XLA:CPU checks them: an unknown option name, or a value of the wrong
type for a known one, fails compiling with an error naming the option; valid ones compile and run.
Tokens a program returns are what cpu returns."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcompare import device

PLATFORMS = ("cpu", "metal")

BAD = [
    {"xla_no_such_option": True},
    {"xla_cpu_enable_fast_math": "yes"},
    {"xla_cpu_enable_fast_math": 1},
    {"xla_backend_optimization_level": "x"},
    {"xla_backend_optimization_level": True},
    {"xla_backend_optimization_level": 1.5},
    {"xla_dump_to": 3},
]
GOOD = [
    {},
    {"xla_backend_optimization_level": 1},
    {"xla_backend_optimization_level": "2"},
    {"xla_cpu_enable_fast_math": False},
    {"xla_cpu_enable_fast_math": "False"},
    {"xla_step_marker_location": 1},
    {"xla_gpu_auto_spmd_partitioning_memory_budget_ratio": 0.5},  # a GPU option: XLA:CPU takes it too
]


@pytest.mark.parametrize("options", BAD, ids=lambda o: "-".join(f"{k}={v!r}" for k, v in o.items()))
def test_a_bad_option_fails_naming_it_as_on_cpu(options):
    (name,) = options
    for platform in PLATFORMS:
        low = jax.jit(lambda x: jnp.sin(x) + 1).lower(jax.device_put(np.float32(0.5), device(platform)))
        with pytest.raises(Exception, match=name) as info:
            low.compile(compiler_options=options)
        assert "INVALID_ARGUMENT" in str(info.value), (platform, str(info.value))


@pytest.mark.parametrize("options", GOOD, ids=lambda o: "-".join(f"{k}={v!r}" for k, v in o.items()) or "none")
def test_a_good_option_compiles_and_runs_as_on_cpu(options):
    outs = []
    for platform in PLATFORMS:
        x = jax.device_put(np.float32(0.5), device(platform))
        compiled = jax.jit(lambda x: jnp.sin(x) + 1).lower(x).compile(compiler_options=options)
        outs.append(np.asarray(compiled(x)))
    np.testing.assert_allclose(outs[1], outs[0], rtol=2e-6)


def test_a_token_result_is_a_token_as_on_cpu():
    results = []
    for platform in PLATFORMS:
        x = jax.device_put(np.float32(2), device(platform))
        token, y = jax.jit(lambda x: (jax.lax.create_token(), x * 3))(x)
        results.append((type(token), np.asarray(y)))
    assert results[1][0] is results[0][0], results
    np.testing.assert_array_equal(results[1][1], results[0][1])
