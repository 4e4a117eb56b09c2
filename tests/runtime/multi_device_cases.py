"""Programs over four devices, each run on four metal devices and on four cpu devices and compared: values,
and which device holds which shard. JAX fixes its device count per process, so test_multi_device.py
runs this file in a process of its own (JAX_METAL_NUM_DEVICES=4 and four XLA:CPU devices); it is not
collected otherwise (no test_ prefix)."""

import importlib.util
import pathlib
import warnings

import jax
import jax.experimental
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jaxcompare import assert_close
from multi_device_helpers import (PLATFORMS, I, N, X, assert_same_parts, compare, explicit_mesh, layout, make_mesh,
                                  nested_case, partial_sums_case, parts_and_sum, returned_in_parts, shard_map,
                                  smap_case)

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def test_devices_are_numbered_and_separate():
    metal = jax.devices("metal")
    assert [d.id for d in metal] == list(range(N))
    assert len(jax.local_devices(backend="metal")) == N
    arrays = [jax.device_put(np.full(3, k, np.float32), d) for k, d in enumerate(metal)]
    for k, (a, d) in enumerate(zip(arrays, metal)):
        assert a.devices() == {d}
        np.testing.assert_array_equal(np.asarray(a), np.full(3, k, np.float32))
    # Each device counts its own memory.
    before = [d.memory_stats()["bytes_in_use"] for d in metal]
    big = jax.device_put(np.ones(1 << 16, np.float32), metal[2])
    after = [d.memory_stats()["bytes_in_use"] for d in metal]
    assert after[2] - before[2] >= big.nbytes
    assert after[0] == before[0] and after[1] == before[1] and after[3] == before[3]
    del big


def test_jit_runs_on_the_device_of_its_arguments():
    metal = jax.devices("metal")
    for d in metal:
        x = jax.device_put(X, d)
        y = jax.jit(lambda v: jnp.sin(v) @ v)(x)
        assert y.devices() == {d}
        assert_close(np.asarray(y), np.sin(X) @ X, rtol=1e-5, atol=1e-5)


def test_copies_between_devices():
    metal = jax.devices("metal")
    x = jax.device_put(X, metal[1])
    y = jax.device_put(x, metal[3])
    assert y.devices() == {metal[3]}
    np.testing.assert_array_equal(np.asarray(y), X)
    z = jax.jit(lambda a, b: a + b)(jax.device_put(x, metal[0]), jax.device_put(y, metal[0]))
    np.testing.assert_array_equal(np.asarray(z), 2 * X)


@pytest.mark.parametrize("spec", [P("x"), P(None, "x"), P()])
def test_device_put_with_named_sharding(spec):
    compare(lambda p: (lambda a: a, [NamedSharding(make_mesh(p), spec)]), X, exact=True)


@pytest.mark.parametrize("spec_in,spec_out", [(P("x"), P()), (P("x"), P("x")),
                                              (P(), P(None, "x")),
                                              (P(None, "x"), P("x"))])
def test_jit_with_shardings(spec_in, spec_out):
    def build(p):
        m = make_mesh(p)
        fn = jax.jit(lambda a: jnp.tanh(a) * 2 + a.sum(0), in_shardings=NamedSharding(m, spec_in),
                     out_shardings=NamedSharding(m, spec_out))
        return fn, [NamedSharding(m, spec_in)]

    compare(build, X)


# Without out_shardings XLA chooses each result's sharding and the executable reports it: the plugin
# takes the one the program states (an argument's, a constraint's, a shard_map's out_specs) through ops
# that keep the shape, as cpu's propagation gives it for these.
@pytest.mark.parametrize("name", ["elementwise", "shard_map", "reduce", "constraint", "later_dimension", "column",
                                  "row", "nested_jit", "inner_out_shardings", "transpose", "matmul", "broadcast"])
def test_jit_without_out_shardings(name):
    def build(p):
        m = make_mesh(p)
        sm = shard_map(lambda a: jax.lax.psum(a, "x") + a, mesh=m, in_specs=P("x"), out_specs=P("x"))
        fn, spec = {
            "elementwise": (lambda a: jnp.tanh(a) * 2, P("x")),
            "shard_map": (sm, P("x")),
            "reduce": (lambda a: a.sum(0), P("x")),
            "constraint": (lambda a: jax.lax.with_sharding_constraint(a * 3, NamedSharding(m, P(None, "x"))) + 1, P("x")),
            "later_dimension": (lambda a: a * 2 - 1, P(None, "x")),
            # A slice and the reshape that drops its unit dimension keep the other dimension's split.
            "column": (lambda a: a[:, 3] + 1, P("x")),
            "row": (lambda a: a[5] * 2, P(None, "x")),
            # A jit inside the jit is a call of another function: the sharding is found in there.
            "nested_jit": (lambda a: jax.jit(sm)(a * 2), P()),
            "inner_out_shardings": (lambda a: jax.jit(jnp.sin, out_shardings=NamedSharding(m, P(None, "x")))(a).T, P()),
            "transpose": (lambda a: a.T + 1, P("x")),
            "matmul": (lambda a: a @ (a.T + 1), P("x")),
            "broadcast": (lambda a: jnp.broadcast_to(a, (3, 8, 8)) * 2, P("x")),
        }[name]
        return jax.jit(fn), [NamedSharding(m, spec)]

    compare(build, X)


@pytest.mark.parametrize("spec", [P("x", "y"), P("y", "x"), P(None, "y"), P(("x", "y")), P("x", None)])
def test_jit_on_a_2d_mesh(spec):
    def build(p):
        m = make_mesh(p, (2, 2), ("x", "y"))
        s = NamedSharding(m, spec)
        fn = jax.jit(lambda a, b: (a @ a.T + 1, (a * b).sum(1)), in_shardings=(s, s),
                     out_shardings=(s, NamedSharding(m, P(spec[0]))))
        return fn, [s, s]

    compare(build, X, X[::-1].copy())


def test_partial_auto_shard_map_result_takes_its_bodys_constraint():
    # The out_specs leave the auto axis open; the constraint inside the body states it.
    def build(p):
        m = make_mesh(p, (2, 2), ("x", "y"))
        split = NamedSharding(m, P("x"))
        body = lambda a: jax.lax.with_sharding_constraint(a * a, split)
        fn = jax.jit(shard_map(body, mesh=m, in_specs=P(), out_specs=P(), axis_names=frozenset({"y"})))
        return fn, [split]

    compare(build, X)


# A product keeps both operands' splits where they split over different axes; the lhs's where they clash.
@pytest.mark.parametrize("specs", [(P("x", None), P(None, "y")), (P("x", "y"), P("y", "x")), (P(None, "y"), P("y", "x"))])
def test_matmul_result_sharding_without_out_shardings(specs):
    def build(p):
        m = make_mesh(p, (2, 2), ("x", "y"))
        return jax.jit(lambda a, b: a @ b), [NamedSharding(m, s) for s in specs]

    compare(build, X, X.T.copy())


def test_a_loops_result_takes_its_bodys_constraint():
    # A constraint inside a scan's body splits the loop's result where XLA's propagation puts it, though
    # the carried value comes in whole.
    def build(platform):
        mesh = make_mesh(platform, (2, 2), ("x", "y"))
        split = NamedSharding(mesh, P("x", "y"))

        def step(c, _):
            return jax.lax.with_sharding_constraint(c * 2 + 1, split), None

        return jax.jit(lambda a: jax.lax.scan(step, a, None, length=3)[0]), [NamedSharding(mesh, P())]
    compare(build, I, exact=True)


@pytest.mark.parametrize("index", ["[:, -1, :]", "[1]", "[:, 2, 0]", "[-1, -1]"])
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_indexing_keeps_the_split_of_what_it_leaves_whole(index, jitted):
    # Integer indexing lowers to a gather (eagerly, a dynamic slice for lax.slice); the dimensions it
    # leaves whole keep their split, where XLA's propagation puts them.
    cube = np.arange(4 * 4 * 2, dtype=np.float32).reshape(4, 4, 2)

    def build(platform):
        mesh = make_mesh(platform, (2, 2), ("x", "y"))
        fn = eval("lambda a: a" + index)  # noqa: S307 - one of the indexes above
        return (jax.jit(fn) if jitted else fn), [NamedSharding(mesh, P("x", "y"))]
    compare(build, cube, exact=True)


def test_a_split_that_does_not_divide_leaves_the_result_whole():
    # A constraint splitting 11 elements over 2 devices: XLA reports such a result whole, and so does
    # metal; the concatenation's 19 elements too.
    def build(platform):
        mesh = make_mesh(platform)
        split = NamedSharding(mesh, P("x"))

        def fn(a):
            x = jax.lax.with_sharding_constraint(jnp.arange(11) + a.sum(), split)
            return x, jax.lax.with_sharding_constraint(jnp.concatenate([x, jnp.arange(8)]), split)
        return jax.jit(fn), [NamedSharding(mesh, P())]
    compare(build, I, exact=True)


def test_eager_slices_keep_the_split_of_what_they_take_whole():
    def build(platform):
        mesh = make_mesh(platform, (2, 2), ("x", "y"))
        return (lambda a: jax.lax.slice(a, (0, 3), (8, 4))), [NamedSharding(mesh, P("x", "y"))]
    compare(build, X, exact=True)


def test_a_reduction_over_a_split_dimension_reduces_each_shard():
    # Each device reduces its shards and the partial results are combined, as XLA's partitioner does; the
    # compiled text says so in XLA's word. An argument read whole is gathered.
    def build(p):
        m = make_mesh(p, (2, 2), ("x", "y"))
        s = NamedSharding(m, P("x", "y"))
        return jax.jit(lambda a: (a.sum(0), a.max(), jnp.cumsum(a, 0))), [s]

    compare(build, X)
    m = make_mesh("metal", (2, 2), ("x", "y"))
    placed = jax.device_put(X, NamedSharding(m, P("x", "y")))
    assert "all-reduce" in jax.jit(lambda a: a.sum(0)).lower(placed).compile().as_text()
    rows = jax.device_put(X, NamedSharding(m, P("x", None)))
    assert "all-reduce" not in jax.jit(lambda a: a.sum(1)).lower(rows).compile().as_text()
    assert "all-gather" in jax.jit(lambda a: jnp.linalg.norm(a, 2)).lower(placed).compile().as_text()


def test_with_sharding_constraint():
    def build(p):
        m = make_mesh(p)

        def f(a):
            b = jax.lax.with_sharding_constraint(a * 3, NamedSharding(m, P(None, "x")))
            return jnp.cumsum(b, axis=0)

        return jax.jit(f, out_shardings=NamedSharding(m, P("x"))), [NamedSharding(m, P("x"))]

    compare(build, X)


@pytest.mark.parametrize("name,body,out_spec", [
    # A body of no op: its region's argument reaches the plugin as a builtin tensor type, not VHLO's.
    ("identity", lambda a: a, P("x")),
    ("psum", lambda a: jax.lax.psum(a, "x"), P()),
    ("pmax", lambda a: jax.lax.pmax(a, "x"), P()),
    ("pmean", lambda a: jax.lax.pmean(a, "x"), P()),
    ("axis_index", lambda a: a * jax.lax.axis_index("x"), P("x")),
    ("all_gather", lambda a: jax.lax.all_gather(a, "x"), P()),
    ("all_gather_tiled", lambda a: jax.lax.all_gather(a, "x", axis=1, tiled=True), P()),
    ("psum_scatter", lambda a: jax.lax.psum_scatter(a, "x", scatter_dimension=1, tiled=True), P(None, "x")),
    ("ppermute_ring", lambda a: jax.lax.ppermute(a, "x", [(i, (i + 1) % N) for i in range(N)]), P("x")),
    ("ppermute_partial", lambda a: jax.lax.ppermute(a, "x", [(0, 2), (1, 3)]), P("x")),
    ("all_to_all", lambda a: jax.lax.all_to_all(a, "x", 1, 0, tiled=True), P("x")),
])
def test_shard_map_collectives(name, body, out_spec):
    compare(smap_case(body, P("x"), out_spec), X)


@pytest.mark.parametrize("name,body", [
    ("fori_loop_psum", lambda a: jax.lax.fori_loop(0, 5, lambda i, c: jax.lax.psum(jnp.tanh(c), "x") / 4 + c, a)),
    # The condition holds a collective too: every device agrees on the trip count through it.
    ("while_ppermute", lambda a: jax.lax.while_loop(
        lambda c: jax.lax.psum(c.sum(), "x") < 1000,
        lambda c: c * 1.5 + jax.lax.ppermute(c, "x", [(i, (i + 1) % N) for i in range(N)]), a)),
    ("scan_pmean", lambda a: jax.lax.scan(lambda c, x: (c + jax.lax.pmean(x, "x") * jax.lax.axis_index("x"),
                                                        c.sum()), a[0], a)[0]),
    ("nested_loops_all_gather", lambda a: jax.lax.fori_loop(0, 2, lambda i, c: jax.lax.fori_loop(
        0, 2, lambda j, d: d + jax.lax.all_gather(d, "x", tiled=True)[:2] * 0.5, c), a)),
])
def test_shard_map_collectives_in_loops(name, body):
    compare(smap_case(body, P("x"), P("x")), X)


def test_shard_map_integer_psum_is_exact():
    compare(smap_case(lambda a: jax.lax.psum(a * 3 - 1, "x"), P("x"), P()), I, exact=True)


@pytest.mark.parametrize("axes", ["x", "y", ("x", "y")])
def test_shard_map_on_a_2d_mesh(axes):
    def body(a):
        s = jax.lax.psum(a, axes)
        return s + jax.lax.axis_index("x") * 10 + jax.lax.axis_index("y")

    compare(smap_case(body, P("x", "y"), P("x", "y"), (2, 2), ("x", "y")), X)


# A result replicated over the axes its psum spans: every device of those axes holds the same copy.
@pytest.mark.parametrize("axes,out_spec", [("x", P(None, "y")), ("y", P("x")), (("x", "y"), P())])
def test_shard_map_on_a_2d_mesh_replicated_results(axes, out_spec):
    compare(smap_case(lambda a: jax.lax.psum(a * 3, axes), P("x", "y"), out_spec, (2, 2), ("x", "y")), X)


def test_shard_map_mixes_with_global_code():
    def build(p):
        m = make_mesh(p)
        inner = shard_map(lambda a, b: jax.lax.psum(a @ b, "x"), mesh=m, in_specs=(P(None, "x"), P("x")),
                          out_specs=P())
        fn = jax.jit(lambda a, b: jnp.exp(inner(a * 2, b) / 100) + a, out_shardings=NamedSharding(m, P()))
        return fn, [NamedSharding(m, P()), NamedSharding(m, P("x"))]

    compare(build, X, X.T.copy())


def test_pmap_collectives():
    got = {}
    for platform in PLATFORMS:
        devices = jax.devices(platform)[:N]

        def f(a):
            ring = jax.lax.ppermute(a, "i", [(k, (k + 1) % N) for k in range(N)])
            return jax.lax.psum(a, "i") + ring * jax.lax.axis_index("i")

        out = jax.pmap(f, axis_name="i", devices=devices)(X.reshape(N, 2, 8))
        got[platform] = np.asarray(out)
    assert_close(got["metal"], got["cpu"])


def test_data_parallel_training_step():
    """An MLP trained with the batch split over the devices and replicated parameters: the losses and
    the parameters follow cpu's."""
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=(8, 16)).astype(np.float32) / 3, "b1": np.zeros(16, np.float32),
              "w2": rng.normal(size=(16, 1)).astype(np.float32) / 4}
    xs = rng.normal(size=(32, 8)).astype(np.float32)
    ys = np.sin(xs.sum(1, keepdims=True)).astype(np.float32)

    def loss(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    results = {}
    for platform in PLATFORMS:
        m = make_mesh(platform)
        replicated, batch = NamedSharding(m, P()), NamedSharding(m, P("x"))

        def step_fn(p, x, y):
            value, grads = jax.value_and_grad(loss)(p, x, y)
            return jax.tree.map(lambda a, g: a - 0.1 * g, p, grads), value

        step = jax.jit(step_fn, out_shardings=replicated)
        p = jax.device_put(params, replicated)
        x, y = jax.device_put(xs, batch), jax.device_put(ys, batch)
        losses = []
        for _ in range(5):
            p, value = step(p, x, y)
            losses.append(float(value))
        results[platform] = (losses, jax.tree.map(np.asarray, p))
    assert_close(np.array(results["metal"][0]), np.array(results["cpu"][0]), rtol=1e-5, atol=1e-6)
    assert_close(results["metal"][1], results["cpu"][1], rtol=1e-5, atol=1e-6)


def test_donated_shards_are_consumed():
    m = make_mesh("metal")
    s = NamedSharding(m, P("x"))
    x = jax.device_put(X, s)
    y = jax.jit(lambda a: a * 2, donate_argnums=0, in_shardings=s, out_shardings=s)(x)
    assert x.is_deleted()
    np.testing.assert_array_equal(np.asarray(y), X * 2)


def test_a_donated_argument_no_result_can_take_stays_alive():
    # XLA consumes a buffer donor only where a result of its size takes its memory; the product here has
    # none (8x8 from 8x2), so the argument lives on, on both platforms.
    deleted = {}
    for platform in PLATFORMS:
        s = NamedSharding(make_mesh(platform), P("x"))
        x = jax.device_put(I[:, :2], s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # JAX warns that the donation was not usable
            y = jax.jit(lambda a: a @ a.T, donate_argnums=0)(x)
        deleted[platform] = x.is_deleted()
        assert_close(np.asarray(y), I[:, :2] @ I[:, :2].T, exact=True, what=platform)
    assert deleted == {"metal": False, "cpu": False}


def test_data_parallel_example():
    """examples/train_data_parallel.py on four devices, in both styles: the losses and parameters of one
    device and of cpu's four. The jit style computes the same global program on any device count; the
    shard_map style sums the devices' gradients in another order, a rounding per step that twelve steps of
    SGD carry forward (the bound is the one the single-device examples use)."""
    spec = importlib.util.spec_from_file_location("train_data_parallel", EXAMPLES / "train_data_parallel.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    one, one_params = example.train(1, "jit", "metal", steps=12)
    for style in ("jit", "shard_map"):
        metal, metal_params = example.train(N, style, "metal", steps=12)
        cpu, cpu_params = example.train(N, style, "cpu", steps=12)
        assert_close(metal, cpu, rtol=2e-4, atol=1e-5, what=f"{style}: losses against cpu")
        assert_close(metal_params, cpu_params, rtol=2e-3, atol=2e-4, what=f"{style}: parameters against cpu")
        assert_close(metal, one, rtol=2e-4, atol=1e-5, what=f"{style}: losses against one device")
    assert one[-1] < 0.7 * one[0]


def test_explicit_mesh_bodies():
    """Under an explicit mesh JAX constrains the sharding of values inside reduction, scatter and
    select_and_scatter bodies: those bodies read as their plain forms (a max pool's gradient, a scatter-add,
    a sum)."""
    x3 = (np.arange(8 * 16 * 4, dtype=np.float32).reshape(8, 16, 4) % 7) / 3
    idx = np.array([3, 0, 3, 7], np.int32)
    got = {}
    for platform in PLATFORMS:
        mesh = jax.make_mesh((2, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2,
                             devices=jax.devices(platform)[:N])
        with jax.set_mesh(mesh):
            a = jax.device_put(x3, P("x", "y", None))
            pool = jax.grad(lambda v: jax.lax.reduce_window(v, -jnp.inf, jax.lax.max, (1, 2, 1), (1, 2, 1),
                                                            "SAME").sum())
            scatter = lambda v: v.at[:, :, idx % 4].add(1.5)  # noqa: E731
            got[platform] = jax.tree.map(np.asarray, jax.jit(lambda v: (pool(v), scatter(v), v.sum(1)))(a))
    assert_close(got["metal"], got["cpu"])


@pytest.mark.parametrize("where", ["jit", "shard_map"])
def test_callback_in_a_sharded_program(where):
    """A host callback in a program over several devices: in a jit it sees the global value, in a
    shard_map body each device's piece; either way the results are cpu's."""
    def host_sin(v):
        return np.sin(np.asarray(v))

    def body(a):
        return jax.pure_callback(host_sin, jax.ShapeDtypeStruct(a.shape, a.dtype), a) * 2 + a

    def build(p):
        m = make_mesh(p)
        fn = body if where == "jit" else shard_map(body, mesh=m, in_specs=P("x"), out_specs=P("x"))
        return jax.jit(fn, out_shardings=NamedSharding(m, P("x"))), [NamedSharding(m, P("x"))]

    compare(build, X)


def test_ordered_io_callback_in_a_shard_map_body():
    """An ordered io_callback threads a token through the manual computation: each device calls it with
    its piece, as on cpu."""
    seen = {p: [] for p in PLATFORMS}

    for platform in PLATFORMS:
        def record(v, platform=platform):
            seen[platform].append(np.asarray(v).copy())

        def body(a, b):
            jax.experimental.io_callback(record, (), a, ordered=True)
            return a + b[..., None]

        m = make_mesh(platform)
        f = jax.jit(shard_map(body, mesh=m, in_specs=(P(None, "x"), P(None)), out_specs=P(None, "x")))
        out = f(jnp.asarray(X[:2]), jnp.ones(2, np.float32))
        jax.effects_barrier()
        assert_close(np.asarray(out), X[:2] + 1, what=platform)
    key = lambda v: v.tobytes()
    assert sorted(map(key, seen["metal"])) == sorted(map(key, seen["cpu"])) and len(seen["cpu"]) == N


def test_serialized_sharded_executable_runs():
    """A compiled program over several devices serializes and loads again (the persistent cache's path)
    with its shardings: the loaded one gives the same shards."""
    from jax.experimental.serialize_executable import deserialize_and_load, serialize
    m = make_mesh("metal")
    s = NamedSharding(m, P(None, "x"))
    x = jax.device_put(X, s)
    compiled = jax.jit(lambda a: jnp.tanh(a) * 3, out_shardings=s).lower(x).compile()
    payload, in_tree, out_tree = serialize(compiled)
    loaded = deserialize_and_load(payload, in_tree, out_tree)
    got, want = loaded(x), compiled(x)
    assert [sh.data.shape for sh in got.addressable_shards] == [(8, 2)] * N
    assert_close(layout(got), layout(want), exact=True)


@pytest.mark.parametrize("name,body", [
    ("cond_psum", lambda a: jax.lax.cond(a.sum() > -1e9, lambda v: jax.lax.psum(v, "x") - v, lambda v: v * 2, a)),
    # Every device takes branch 1 of 3 through a collective's result (switch clamps an index past the end).
    ("switch_all_gather", lambda a: jax.lax.switch(jax.lax.psum(1, "x") - 3, [
        lambda v: v, lambda v: jax.lax.all_gather(v, "x", tiled=True)[:2] + v, lambda v: -v], a)),
    ("switch_clamped_index", lambda a: jax.lax.switch(jax.lax.psum(1, "x") + 7, [
        lambda v: jax.lax.pmax(v, "x"), lambda v: jax.lax.pmin(v, "x")], a)),
])
def test_shard_map_collectives_in_branches(name, body):
    compare(smap_case(body, P("x"), P("x")), X)


def test_partial_sums_stay_on_their_devices():
    metal, cpu = partial_sums_case("metal"), partial_sums_case("cpu")
    assert metal[0] == cpu[0]
    for m, c in zip(metal[1], cpu[1]):
        assert_close(m, c, what="a device's partial sum")
    for m, c in zip(metal[2:4], cpu[2:4]):
        assert_close(m, c, what="the sum of the parts")
    assert_close(metal[2], metal[4], what="the sum of the parts against numpy")


def test_a_whole_value_split_into_parts_sums_to_itself():
    """A replicated value resharded to partial sums: any split is right whose parts add up to it."""
    got = {}
    for platform in PLATFORMS:
        mesh = explicit_mesh(platform)
        unreduced = P(None, None, unreduced={"x", "y"})
        with jax.set_mesh(mesh):
            x = jax.device_put(X, NamedSharding(mesh, P()))
            parts = jax.jit(lambda v: jax.sharding.reshard(v * 2, unreduced))(x)
            back = jax.jit(jax.shard_map(lambda c: jax.lax.psum(c, ("x", "y")), in_specs=unreduced,
                                         out_specs=P()))(parts)
        got[platform] = np.asarray(back)
    assert_close(got["metal"], got["cpu"], what="the parts' sum")
    assert_close(got["metal"], X * 2, what="the parts' sum against numpy")


def test_nested_shard_maps():
    (mv, mplaces, mshards), = nested_case("metal")
    (cv, cplaces, cshards), = nested_case("cpu")
    assert_close(mv, cv, what="global value")
    assert mplaces == cplaces
    for m, c in zip(mshards, cshards):
        assert_close(m, c, what="shard")


def test_a_shard_map_over_one_axis_takes_its_operand_whole_along_the_other():
    """A shard_map over `x` of a value the explicit mesh splits over `y` too: its body sees the value split
    over `x` only, whole along `y` (jax 0.12.1 writes values in parts this way), and its result is split
    over both again."""
    def build(p):
        body = lambda b: jax.lax.psum(b.sum(0, keepdims=True), "x") * (1 + jax.lax.axis_index("x")) + b
        mesh = explicit_mesh(p)
        fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"), axis_names={"x"}))
        return fn, [NamedSharding(mesh, P("x", "y"))]

    compare(build, X)


def test_an_einsum_left_as_partial_sums_keeps_xlas_pieces():
    """jit's einsum with an unreduced out_sharding: each device holds the product of its blocks of the split
    contraction, as XLA's partitioner leaves it; adding them up gives the product."""
    got = {}
    for platform in PLATFORMS:
        mesh = explicit_mesh(platform)
        with jax.set_mesh(mesh):
            a = jax.device_put(np.arange(32, dtype=np.float32).reshape(4, 8) / 5, P("x", "y"))
            b = jax.device_put(np.arange(48, dtype=np.float32).reshape(8, 6) / 9, P("y", None))
            out = jax.jit(lambda u, v: jnp.einsum("ab,bc->ac", u, v, out_sharding=P("x", None, unreduced={"y"})))(a, b)
            summed = jax.sharding.reshard(out, P("x", None))
        got[platform] = parts_and_sum(platform, out, summed)
    assert_same_parts(got)


def test_a_sum_left_as_partial_sums_keeps_xlas_pieces():
    """A reduction with an unreduced out_sharding over the axis splitting the reduced dimension: each device
    holds the sum of its own block, as XLA's partitioner leaves it."""
    got = {}
    for platform in PLATFORMS:
        mesh = explicit_mesh(platform)
        with jax.set_mesh(mesh):
            a = jax.device_put(np.arange(32, dtype=np.float32).reshape(4, 8) / 5, P("x", "y"))
            out = jax.jit(lambda u: jax.lax.reduce_sum(u, axes=(1,), out_sharding=P("x", unreduced={"y"})))(a)
            summed = jax.sharding.reshard(out, P("x"))
        got[platform] = parts_and_sum(platform, out, summed)
    assert_same_parts(got)


def test_a_sum_of_a_value_in_parts_sums_each_part():
    """Summing an argument that is in parts leaves each device the sum of its own part; no all-reduce."""
    got = {}
    for platform in PLATFORMS:
        with jax.set_mesh(explicit_mesh(platform)):
            arr = jax.sharding.reshard(jnp.arange(8.0).reshape(2, 4), P(None, "y", unreduced={"x"}))
            f = jax.jit(lambda v: jax.lax.reduce_sum(v, axes=[0]))
            out = f(arr)
            got[platform] = parts_and_sum(platform, out, jax.sharding.reshard(out, P("y")))
            if platform == "metal":
                assert "all-reduce" not in f.lower(arr).compile().as_text()
    assert_same_parts(got)


def test_a_sharded_argument_returned_in_parts_keeps_each_devices_block():
    """A jit returning its sharded argument as partial sums: as XLA reshards it, each device keeps the
    block it held and zeros the rest; a whole argument goes to the first part."""
    got = {}
    for platform in PLATFORMS:
        mesh = explicit_mesh(platform)
        unreduced = NamedSharding(mesh, P(None, None, unreduced={"x"}))
        with jax.set_mesh(mesh):
            sharded = jax.device_put(X, NamedSharding(mesh, P("x", "y")))
            whole = jax.device_put(X, NamedSharding(mesh, P()))
            outs = [returned_in_parts(a, unreduced) for a in (sharded, whole)]
        devices = list(jax.devices(platform))
        got[platform] = [sorted((devices.index(s.device), np.asarray(s.data)) for s in o.addressable_shards)
                         for o in outs]
    for mine, theirs in zip(got["metal"], got["cpu"]):
        for (md, m), (cd, c) in zip(mine, theirs):
            assert md == cd
            assert_close(m, c, exact=True, what="a device's part")
