"""What the multi-device cases (multi_device_cases.py) share: meshes on each platform, a program built
for both platforms and compared value by value and shard by shard, the arrays the cases run on, and the
builders of the cases that run a program on one platform at a time."""

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxcompare import assert_close

N = 4
PLATFORMS = ("metal", "cpu")


def make_mesh(platform, shape=(N,), names=("x",)):
    return Mesh(np.array(jax.devices(platform)[:N]).reshape(shape), names)


def shard_map(fn, **kwargs):
    """shard_map without the replication check (bodies here vary by device on purpose); the same call on
    both platforms."""
    sm = getattr(jax, "shard_map", None)
    if sm is None:  # JAX releases before jax.shard_map
        from jax.experimental.shard_map import shard_map as sm
        return sm(fn, check_rep=False, **kwargs)
    return sm(fn, check_vma=False, **kwargs)


def layout(out):
    """Per result: (position of the device in its platform's list, the shard's index, its data)."""
    result = []
    for leaf in jax.tree.leaves(out):
        devices = list(jax.devices(next(iter(leaf.devices())).platform))
        shards = sorted((devices.index(s.device), str(s.index), np.asarray(s.data)) for s in leaf.addressable_shards)
        result.append((np.asarray(leaf), [(d, i) for d, i, _ in shards], [x for _, _, x in shards]))
    return result


def compare(build, *args, exact=False):
    """build(mesh_of_platform) -> (fn, argument shardings); runs fn on both platforms' meshes."""
    got = {}
    for platform in PLATFORMS:
        fn, shardings = build(platform)
        placed = [jax.device_put(a, s) for a, s in zip(args, shardings)]
        got[platform] = layout(fn(*placed))
    assert len(got["metal"]) == len(got["cpu"])
    for (mv, mplaces, mshards), (cv, cplaces, cshards) in zip(got["metal"], got["cpu"]):
        assert_close(mv, cv, exact=exact, what="global value")
        assert mplaces == cplaces, f"shards on {mplaces}, cpu has them on {cplaces}"
        for m, c in zip(mshards, cshards):
            assert_close(m, c, exact=exact, what="shard")


X = np.arange(64, dtype=np.float32).reshape(8, 8) / 7.0
I = np.arange(32, dtype=np.int32).reshape(8, 4)


def smap_case(body, in_specs, out_specs, mesh_shape=(N,), names=("x",)):
    def build(p):
        m = make_mesh(p, mesh_shape, names)
        fn = jax.jit(shard_map(body, mesh=m, in_specs=in_specs, out_specs=out_specs),
                     out_shardings=NamedSharding(m, out_specs))
        specs = in_specs if isinstance(in_specs, tuple) else (in_specs,)
        return fn, [NamedSharding(m, s) for s in specs]

    return build


def explicit_mesh(platform):
    """Partial sums (unreduced axes) name axes of an explicit mesh."""
    return jax.make_mesh((2, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2,
                         devices=jax.devices(platform)[:N])


def partial_sums_case(platform):
    """A matmul whose contraction is split over `y`: the shard_map's result is left as partial sums over
    `y` (unreduced), one per device; later programs read them as their argument and add them up."""
    mesh = explicit_mesh(platform)
    a = jax.device_put(np.arange(32, dtype=np.float32).reshape(4, 8) / 5, NamedSharding(mesh, P("x", "y")))
    b = jax.device_put(np.arange(48, dtype=np.float32).reshape(8, 6) / 9, NamedSharding(mesh, P("y", None)))
    unreduced = P("x", None, unreduced={"y"})
    with jax.set_mesh(mesh):
        matmul = jax.jit(jax.shard_map(lambda u, v: jax.lax.pcast(u @ v, "y", to="unreduced"),
                                       in_specs=(P("x", "y"), P("y", None)), out_specs=unreduced))
        parts = matmul(a, b)
        summed = jax.jit(jax.shard_map(lambda c: jax.lax.psum(c, "y"), in_specs=unreduced,
                                       out_specs=P("x", None)))(parts)
        resharded = jax.jit(lambda c: jax.sharding.reshard(c, P("x", None)))(parts)
    devices = list(jax.devices(platform))
    shards = sorted((devices.index(s.device), np.asarray(s.data)) for s in parts.addressable_shards)
    return ([d for d, _ in shards], [x for _, x in shards], np.asarray(summed), np.asarray(resharded),
            np.asarray(a) @ np.asarray(b))


def nested_case(platform):
    """A shard_map over `y` inside one over `x`: the inner body runs once per device of both axes, its
    collectives span the inner axis, and each outer device's result is joined from its inner pieces."""
    mesh = make_mesh(platform, (2, 2), ("x", "y"))

    def inner(b):
        return jax.lax.psum(b * b, "y") + jax.lax.axis_index("y") + 10 * jax.lax.axis_index("x")

    def outer(a):
        mid = jax.shard_map(inner, in_specs=P(None, "y"), out_specs=P(None, "y"), axis_names={"y"}, check_vma=False)(a)
        return jax.lax.pmax(mid, "x") - mid

    f = jax.jit(jax.shard_map(outer, in_specs=P("x", None), out_specs=P("x", None), axis_names={"x"},
                              check_vma=False), out_shardings=NamedSharding(mesh, P("x", None)))
    with jax.set_mesh(mesh):
        out = f(jax.device_put(X, NamedSharding(mesh, P("x", "y"))))
    return layout(out)


def parts_and_sum(platform, out, summed):
    """A value in parts: (each device's part by its position in the platform's list), and their sum."""
    devices = list(jax.devices(platform))
    return sorted((devices.index(s.device), np.asarray(s.data)) for s in out.addressable_shards), np.asarray(summed)


def assert_same_parts(got):
    for (md, m), (cd, c) in zip(got["metal"][0], got["cpu"][0]):
        assert md == cd
        assert_close(m, c, what="a device's partial sum")
    assert_close(got["metal"][1], got["cpu"][1], what="the sum")


def returned_in_parts(a, sharding):
    """jit returning `a` in parts: through out_shardings, as JAX before 0.12.1 takes it, else through
    reshard inside the jit, the way JAX from 0.12.1 asks for (it refuses to change `unreduced` through
    out_shardings); the parts are the same either way."""
    try:
        return jax.jit(lambda v: v, out_shardings=sharding)(a)
    except ValueError as e:
        if "unreduced" not in str(e):
            raise
    return jax.jit(lambda v: jax.sharding.reshard(v, sharding))(a)
