"""jax_metal_plugin.status(): every patch and lowering the plugin installs in JAX, active or switched off
and why, and that what it reports is what JAX then does on metal."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_metal_plugin
from jaxcompare import assert_close, device

LOWERINGS = {"pure_callback", "io_callback", "debug_callback", "debug_print", "check", "eig", "lu", "svd", "eigh",
             "tridiagonal", "geqp3", "tridiagonal_solve", "approx_top_k"}
# A JAX that lowers exp2 to StableHLO's own exp2 (0.12.1 on) gets the plugin's rules for the newer ops.
if hasattr(jax.lax, "fma"):
    LOWERINGS.add("newer StableHLO ops")
PATCHES = {"buffer donation", "eager debug callbacks"}


def test_status_lists_every_patch_and_lowering():
    jax.devices("metal")  # JAX has initialised the plugin
    status = jax_metal_plugin.status()
    by_kind = {kind: {f.name for f in status if f.kind == kind} for kind in ("platform", "patch", "lowering")}
    assert by_kind == {"platform": {"metal", "executor"}, "patch": PATCHES, "lowering": LOWERINGS}
    # tests/tooling/test_jax_internals.py proves every internal is there, so nothing is off here.
    assert status.off == (), str(status)
    text = str(status)
    assert repr(status) == text
    assert text.splitlines()[0] == f"jax-metal-plugin: {len(status)} of {len(status)} active"
    for f in status:
        line = next(line for line in text.splitlines() if f" {f.name} " in line)
        assert " on " in line and f.detail in line, line
    assert json.loads(json.dumps(status.as_dict()))["features"][0] == {
        "name": "metal", "kind": "platform", "active": True, "detail": status.feature("metal").detail}
    with pytest.raises(KeyError, match="no feature named 'nope'"):
        status.feature("nope")


def test_what_status_reports_active_works_through_jax():
    status = jax_metal_plugin.status()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 4)).astype(np.float32)

    # buffer donation: the donated argument is consumed, as on cpu
    assert status.feature("buffer donation").active
    x = jax.device_put(a, device("metal"))
    jax.jit(lambda v: v * 2, donate_argnums=0)(x).block_until_ready()
    assert x.is_deleted()

    # eig (LAPACK): eigenvalues as on cpu
    assert status.feature("eig").active
    on = {p: np.sort_complex(np.asarray(jax.jit(jnp.linalg.eigvals)(jax.device_put(a, device(p)))))
          for p in ("metal", "cpu")}
    assert on["metal"].dtype == np.complex64
    scale = np.linalg.norm(a, 2)
    np.testing.assert_allclose(on["metal"], on["cpu"], atol=50 * np.finfo(np.float32).eps * scale)

    # approx_top_k: exact on metal, as XLA:CPU's fallback
    assert status.feature("approx_top_k").active
    v = rng.standard_normal(64).astype(np.float32)
    results = {p: jax.jit(lambda t: jax.lax.approx_max_k(t, 5))(jax.device_put(v, device(p))) for p in ("metal", "cpu")}
    assert_close(results["metal"], results["cpu"], exact=True)

    # pure_callback and debug_callback: Python runs from a jitted function on metal
    assert status.feature("pure_callback").active and status.feature("debug_callback").active
    seen = []

    def f(t):
        jax.debug.callback(lambda u: seen.append(np.asarray(u)), t)
        return jax.pure_callback(lambda u: np.asarray(u) + 1, jax.ShapeDtypeStruct(t.shape, t.dtype), t)

    out = jax.jit(f)(jax.device_put(v, device("metal")))
    jax.effects_barrier()
    assert_close(out, v + 1, exact=True)
    assert len(seen) == 1 and np.array_equal(seen[0], v)


SWITCHED_OFF = textwrap.dedent("""
    import json, warnings
    import numpy as np
    from jax_metal_plugin._jax_internals import mlir, tpu_svd
    # What a future JAX might do: the donation list becomes another type, the TPU svd rule goes away.
    mlir._platforms_with_donation = frozenset(mlir._platforms_with_donation)
    del tpu_svd._svd_tpu_lowering_rule
    import jax, jax_metal_plugin
    x = jax.device_put(np.ones(4, np.float32), jax.devices("metal")[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jax.jit(lambda v: v * 2, donate_argnums=0)(x).block_until_ready()
    status = jax_metal_plugin.status()
    print(json.dumps({"status": status.as_dict(), "text": str(status), "deleted": x.is_deleted(),
                      "warnings": [str(w.message) for w in caught]}))
""")


def test_switched_off_features_say_why():
    env = dict(os.environ, JAX_PLATFORMS="metal,cpu")
    run = subprocess.run([sys.executable, "-c", SWITCHED_OFF], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    off = {f["name"]: f["detail"] for f in report["status"]["features"] if not f["active"]}
    assert set(off) == {"buffer donation", "svd"}, report["text"]
    assert "jax._src.interpreters.mlir._platforms_with_donation is a frozenset" in off["buffer donation"]
    assert "jax._src.tpu.linalg.svd._svd_tpu_lowering_rule" in off["svd"]
    lines = report["text"].splitlines()
    assert lines[0].endswith(f"{len(report['status']['features']) - 2} of {len(report['status']['features'])} active")
    assert any(" svd " in line and " OFF " in line for line in lines), report["text"]
    # Donation off is JAX's own behaviour for a platform without it: the argument stays, JAX warns.
    assert not report["deleted"]
    assert report["warnings"]
