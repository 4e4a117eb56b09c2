"""What the plugin computes does not depend on the floating-point environment of the thread JAX calls
it from. A Python callback of an XLA:CPU program runs on a thread where XLA:CPU may flush subnormals
(jax 0.10.2 does); a metal program compiled and run from there, on that thread, must give what it
gives anywhere else: its folded constants, its inline run and the caller's share of a parallel loop.
The test also sets flush-to-zero and denormals-are-zero on the callback's thread itself, so that it
does not depend on which JAX release flushes there."""

import ctypes
import ctypes.util
import platform

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcompare import assert_close, device, jax_config

_FTZ_DAZ = 0x8040  # MXCSR's flush-to-zero and denormals-are-zero bits
_MXCSR_OFFSET = 28  # glibc's x86-64 fenv_t: the x87 environment, then MXCSR


class _FlushSubnormals:
    """Sets FTZ and DAZ on this thread through glibc's fegetenv/fesetenv (x86-64 Linux), and puts the
    thread's environment back afterwards; elsewhere it leaves the thread as XLA:CPU left it."""

    def __init__(self):
        name = ctypes.util.find_library("m")
        self.libm = ctypes.CDLL(name) if name and platform.machine() == "x86_64" and platform.system() == "Linux" else None

    def __enter__(self):
        if self.libm:
            self.saved = ctypes.create_string_buffer(64)
            assert self.libm.fegetenv(self.saved) == 0
            env = ctypes.create_string_buffer(self.saved.raw, 64)
            mxcsr = int.from_bytes(env.raw[_MXCSR_OFFSET:_MXCSR_OFFSET + 4], "little") | _FTZ_DAZ
            ctypes.memmove(ctypes.addressof(env) + _MXCSR_OFFSET, mxcsr.to_bytes(4, "little"), 4)
            assert self.libm.fesetenv(env) == 0
        return self

    def __exit__(self, *exc):
        if self.libm:
            self.libm.fesetenv(self.saved)


def _run(f, args, dev):
    """f jitted anew on dev: traced and sent to the plugin again, which compiles it unless its own
    cache of compiled programs already holds the same program."""
    with jax.default_device(dev):
        return jax.tree.map(np.asarray, jax.jit(lambda *a: f(*a))(*jax.device_put(args, dev)))


def _programs(xp, dtype, tiny):
    """Each reads or makes subnormals: a constant folded at compile time, a small program run on the
    caller's thread, and one large enough to be split over the host's threads. xp: jnp for the
    programs, np for the reference."""
    big = 1 << 18
    # Made here, outside any flushing: converted to float32 on a flushing thread, 1e-40 would be 0.
    c = np.full((8,), tiny, dtype)
    return {
        "folded": (lambda: (xp.log(c) + xp.sqrt(c),), ()),
        "small": (lambda x: (xp.log(x), x * 2, x / 3), (np.full((8,), tiny, dtype),)),
        "large": (lambda x: (xp.log(x), x * 4), (np.full((big,), tiny, dtype),)),
    }


@pytest.mark.parametrize("dtype,tiny", [(np.float32, 1e-40), (np.float64, 1e-310)])
def test_a_metal_program_called_from_a_cpu_callback_keeps_subnormals(dtype, tiny):
    with jax_config("jax_enable_x64", dtype == np.float64):
        metal = device("metal")
        progs = _programs(jnp, dtype, tiny)
        # The reference is numpy's on this thread, in the default environment. Not XLA:CPU's: whether
        # it flushes subnormals in its own computations changes between jaxlib releases.
        expected = {k: f(*args) for k, (f, args) in _programs(np, dtype, tiny).items()}
        inside = {}

        def callback(x):
            with _FlushSubnormals():
                for k, (f, args) in progs.items():
                    inside[k] = _run(f, args, metal)
            return x

        # Inside first, so that each program is compiled on the flushing thread (outside, the plugin's
        # cache of compiled programs gives the same executable back) and also runs there.
        outer = lambda x: jax.pure_callback(callback, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        np.asarray(_run(outer, (np.zeros((2,), dtype),), device("cpu")))
        assert set(inside) == set(progs)
        outside = {k: _run(f, args, metal) for k, (f, args) in progs.items()}
        for k in progs:
            # The same program on the same executor: the same bits, whichever thread ran it.
            assert_close(inside[k], outside[k], exact=True, what=f"{k}: inside the callback vs outside")
            # Products and quotients correctly rounded, log and sqrt within an ulp or two.
            assert_close(outside[k], expected[k], rtol=4 * np.finfo(dtype).eps, atol=0, what=f"{k}: metal vs numpy")
