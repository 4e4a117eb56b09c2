"""Collectives on metal's one device (psum, pmax, all_gather, psum_scatter, all_to_all, ppermute under
pmap and shard_map): equal to the CPU backend's one device, where each is the identity on a group of one
(and ppermute without a (0, 0) pair gives zeros)."""

import jax
import numpy as np
import pytest
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P

from jaxcompare import assert_close

try:
    from jax import shard_map
except ImportError:  # older JAX
    from jax.experimental.shard_map import shard_map

X = (np.arange(24, dtype=np.float32).reshape(1, 4, 6) - 7.5) / 3

COLLECTIVES = {
    "psum": lambda v: lax.psum(v, "i"),
    "pmax": lambda v: lax.pmax(v, "i"),
    "pmin_int": lambda v: lax.pmin(v.astype(np.int32), "i"),
    "pmean": lambda v: lax.pmean(v, "i"),
    "psum_tuple": lambda v: lax.psum((v, v * 2), "i"),
    "all_gather": lambda v: lax.all_gather(v, "i"),
    "all_gather_tiled": lambda v: lax.all_gather(v, "i", axis=1, tiled=True),
    "psum_scatter": lambda v: lax.psum_scatter(v, "i", scatter_dimension=0, tiled=True),
    "all_to_all": lambda v: lax.all_to_all(v, "i", 0, 1, tiled=True),
    "ppermute_self": lambda v: lax.ppermute(v, "i", [(0, 0)]),
    "ppermute_none": lambda v: lax.ppermute(v, "i", []),
    "axis_index": lambda v: v + lax.axis_index("i"),
}


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_pmap_collective_on_one_device(name):
    fn = COLLECTIVES[name]
    run = lambda platform: jax.tree.map(np.asarray, jax.pmap(fn, axis_name="i", devices=jax.devices(platform))(X))
    assert_close(run("metal"), run("cpu"), exact=True, what=name)


@pytest.mark.parametrize("name", ["psum", "pmax", "all_gather_tiled", "psum_scatter", "ppermute_self", "ppermute_none",
                                  "axis_index"])
def test_shard_map_collective_on_one_device(name):
    def run(platform):
        mesh = Mesh(np.array(jax.devices(platform)[:1]), ("i",))
        f = shard_map(COLLECTIVES[name], mesh=mesh, in_specs=P("i"), out_specs=P("i"))
        x = jax.device_put(X, jax.devices(platform)[0])
        return jax.tree.map(np.asarray, jax.jit(f)(x))

    assert_close(run("metal"), run("cpu"), exact=True, what=name)


def test_psum_in_a_loop_and_its_grad():
    def step(v):
        body = lambda i, c: c * 0.5 + lax.psum(c, "i") * 0.25
        return lax.fori_loop(0, 3, body, v)

    run = lambda platform: np.asarray(jax.pmap(jax.grad(lambda v: step(v).sum()), axis_name="i",
                                               devices=jax.devices(platform))(X))
    assert_close(run("metal"), run("cpu"), exact=True)
