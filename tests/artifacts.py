"""Portable artifacts made at test time by jaxlib (never committed blobs), at several StableHLO versions."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_metal_plugin import tools

VERSIONS = ["0.9.0", "1.0.0", "1.9.0", tools.artifact_version()]


_loop_step = jax.jit(lambda v, k: v * 1.5 + k)


def _programs():
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    i = np.arange(4, dtype=np.int32)
    return {
        "elementwise": (lambda x: jnp.tanh(x) * 2 + jnp.exp(-x), (x,)),
        "dot_argmax": (lambda x: jnp.argmax(x @ x.T, axis=1), (x,)),
        # The body calls a jitted function: a func.call into a private function in every JAX release
        # (JAX 0.10 also outlined the loop body itself; later releases inline it).
        "while": (lambda x: lax.fori_loop(0, 3, lambda k, v: _loop_step(v, k), x), (x,)),
        "cond": (lambda x: lax.cond(x[0, 0] > 0, jnp.sin, jnp.cos, x), (x,)),
        "sort": (lambda x: jnp.sort(x, axis=1), (x,)),
        "gather_scatter": (lambda x, i: x.at[:, i % 4].add(x[:, i % 4]), (x, i)),
        "constants": (lambda x: (x + jnp.array([1.0, 2.0, 3.0, 4.0]), jnp.array([True, False, True]),
                                 jnp.bfloat16(1.5) * jnp.ones(3, jnp.bfloat16), jnp.float16(2) + jnp.zeros(2, jnp.float16)), (x,)),
        "random": (lambda k: jax.random.normal(jax.random.key(k), (5,)), (np.uint32(1),)),
        "conv": (lambda x: lax.conv_general_dilated(x[None, :, :, None], jnp.ones((2, 2, 1, 2)), (1, 1), "SAME",
                                                     dimension_numbers=("NHWC", "HWIO", "NHWC")), (x,)),
    }


PROGRAMS = _programs()


@functools.lru_cache(maxsize=None)
def artifact(name: str, version: str) -> bytes:
    fn, args = PROGRAMS[name]
    return tools.portable_artifact(fn, *args, version=version)
