"""A user's own Metal compute kernel as a JAX operation.

    kernel = jax_metal_plugin.metal_kernel(
        name="myexp", input_names=["inp"], output_names=["out"],
        source="uint i = thread_position_in_grid.x; out[i] = metal::exp(inp[i]);",
        reference=jnp.exp)
    (y,) = kernel(x, grid=(x.size, 1, 1), threadgroup=(256, 1, 1),
                  output_shapes=[x.shape], output_dtypes=[x.dtype])

`source` is the body of a `[[kernel]]` function whose buffers are the inputs (`const device T*`, in
order) and then the outputs (`device T*`), dense and row-major, with `thread_position_in_grid`,
`threads_per_grid`, `thread_position_in_threadgroup`, `threads_per_threadgroup` and
`threadgroup_position_in_grid` (all `uint3`) in scope, and `<name>_shape` / `<name>_size` constants for
every buffer. `header` goes before the function (helpers, includes); `template` maps names to dtypes
(`using T = float;`) or to ints and bools (`constant constexpr int N = 4;`).

The reference (a JAX function, or `numpy_reference`, a NumPy one run as a callback) computes the same
outputs. On a Mac the plugin compiles the kernel once (`newLibraryWithSource`) and encodes it between
the surrounding graph segments on the GPU's queue; everywhere else (JAX's CPU backend, the plugin's
host executor, operands of a type Metal lacks) the reference runs. Under `vmap`, `vmap_method`
"sequential" runs the kernel once per batch member, or a callable is a `jax.custom_batching` rule
`(axis_size, in_batched, *inputs) -> (outputs, out_batched)`. Under `grad`, `vjp(inputs, outputs,
cotangents) -> input cotangents` gives the kernel's derivative.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import _native

COMPOSITE_NAME = "jax_metal.metal_kernel"


_THREAD_ARGUMENTS = ("thread_position_in_grid", "threads_per_grid", "thread_position_in_threadgroup",
                     "threads_per_threadgroup", "threadgroup_position_in_grid")


def msl_type(dtype) -> str:
    """The Metal Shading Language type of a kernel buffer's elements (the plugin's dtype table)."""
    name = np.dtype(dtype).name
    msl = next((row.msl for row in _native.dtypes() if row.name == name), "")
    if not msl:
        raise TypeError(f"metal_kernel: Metal has no type for {name} (float64 and complex128 have none); "
                        "the reference runs for such operands, but the kernel cannot take them")
    return msl


def _sizes(value, what):
    sizes = tuple(int(v) for v in value)
    if len(sizes) != 3 or min(sizes) < 1:
        raise ValueError(f"metal_kernel: {what} must be three positive integers (x, y, z), got {value!r}")
    return sizes


class MetalKernel:
    """A kernel made by metal_kernel(); call it on arrays (see the module's documentation)."""

    def __init__(self, name, input_names, output_names, source, header, reference, numpy_reference,
                 vmap_method, vjp):
        if not name.isidentifier():
            raise ValueError(f"metal_kernel: the name {name!r} is not a Metal identifier")
        if (reference is None) == (numpy_reference is None):
            raise ValueError("metal_kernel: give exactly one of reference= (JAX) and numpy_reference= (NumPy): it "
                             "runs wherever Metal cannot run the kernel, and the self-check compares against it")
        if vmap_method != "sequential" and not callable(vmap_method):
            raise ValueError("metal_kernel: vmap_method must be 'sequential' or a custom_batching rule")
        names = list(input_names) + list(output_names)
        if len(set(names)) != len(names) or not all(n.isidentifier() for n in names):
            raise ValueError(f"metal_kernel: input and output names must be distinct identifiers: {names}")
        self.name, self.input_names, self.output_names = name, tuple(input_names), tuple(output_names)
        self.source, self.header = source, header
        self.reference, self.numpy_reference = reference, numpy_reference
        self.vmap_method, self.vjp = vmap_method, vjp

    def msl(self, in_avals, out_avals, template=()) -> str:
        """The whole Metal Shading Language source for these operand and result types."""
        lines = ["#include <metal_stdlib>", "using namespace metal;"]
        for key, value in template:
            if isinstance(value, (bool, np.bool_)):
                lines.append(f"constant constexpr bool {key} = {'true' if value else 'false'};")
            elif isinstance(value, (int, np.integer)):
                lines.append(f"constant constexpr int {key} = {int(value)};")
            else:
                lines.append(f"using {key} = {msl_type(value)};")
        for n, aval in zip(self.input_names + self.output_names, list(in_avals) + list(out_avals)):
            shape = ", ".join(str(d) for d in aval.shape) or "1"
            lines.append(f"constant constexpr uint {n}_shape[] = {{{shape}}};")
            lines.append(f"constant constexpr uint {n}_size = {int(np.prod(aval.shape, dtype=np.int64))};")
        if self.header:
            lines.append(self.header)
        params = [f"const device {msl_type(a.dtype)}* {n} [[buffer({i})]]"
                  for i, (n, a) in enumerate(zip(self.input_names, in_avals))]
        params += [f"device {msl_type(a.dtype)}* {n} [[buffer({len(in_avals) + i})]]"
                   for i, (n, a) in enumerate(zip(self.output_names, out_avals))]
        params += [f"uint3 {t} [[{t}]]" for t in _THREAD_ARGUMENTS]
        lines.append(f"[[kernel]] void {self.name}(\n    " + ",\n    ".join(params) + ") {")
        lines.append(self.source)
        lines.append("}")
        return "\n".join(lines) + "\n"

    def __call__(self, *inputs, grid: Sequence[int], threadgroup: Sequence[int], output_shapes,
                 output_dtypes, template=None):
        if len(inputs) != len(self.input_names):
            raise TypeError(f"metal_kernel {self.name}: {len(self.input_names)} inputs expected, got {len(inputs)}")
        if len(output_shapes) != len(self.output_names) or len(output_dtypes) != len(self.output_names):
            raise TypeError(f"metal_kernel {self.name}: one shape and one dtype per output "
                            f"({len(self.output_names)})")
        outs = tuple(jax.ShapeDtypeStruct(tuple(s), np.dtype(d)) for s, d in zip(output_shapes, output_dtypes))
        template = tuple(sorted((template or {}).items()))
        call = self._call(_sizes(grid, "grid"), _sizes(threadgroup, "threadgroup"), outs, template)
        return list(call(*inputs))

    @functools.lru_cache(maxsize=256)
    def _call(self, grid, threadgroup, outs, template) -> Callable:
        def reference(*args):
            if self.reference is not None:
                results = self.reference(*args)
            else:
                results = jax.pure_callback(self.numpy_reference, outs if len(outs) > 1 else outs[0], *args,
                                            vmap_method="sequential")
            results = tuple(results) if isinstance(results, (list, tuple)) else (results,)
            if len(results) != len(outs) or any(jnp.shape(r) != o.shape or jnp.result_type(r) != o.dtype
                                                for r, o in zip(results, outs)):
                raise TypeError(f"metal_kernel {self.name}: the reference returns "
                                f"{[(jnp.shape(r), jnp.result_type(r)) for r in results]}, the kernel "
                                f"{[(o.shape, o.dtype) for o in outs]}")
            return results

        def kernel(*args):
            source = self.msl([jax.typeof(a) for a in args],
                              outs, template)
            composite = jax.lax.composite(lambda *a, **attrs: reference(*a), name=COMPOSITE_NAME)
            return tuple(composite(*args, source=source, entry=self.name, grid=np.asarray(grid, np.int64),
                                   threadgroup=np.asarray(threadgroup, np.int64)))

        batched = jax.custom_batching.custom_vmap(kernel)

        @batched.def_vmap
        def _(axis_size, in_batched, *args):
            if callable(self.vmap_method):
                results, out_batched = self.vmap_method(axis_size, in_batched, *args)
                return tuple(results), tuple(bool(b) for b in out_batched)
            moved = [a if b else jnp.broadcast_to(a, (axis_size,) + jnp.shape(a)) for a, b in zip(args, in_batched)]
            return tuple(jax.lax.map(lambda xs: batched(*xs), tuple(moved))), (True,) * len(outs)

        if self.vjp is None:
            return batched
        differentiable = jax.custom_vjp(batched)

        def forward(*args):
            results = batched(*args)
            return results, (args, results)

        def backward(residuals, cotangents):
            args, results = residuals
            grads = self.vjp(args, results, cotangents)
            return tuple(grads) if isinstance(grads, (list, tuple)) else (grads,)

        differentiable.defvjp(forward, backward)
        return differentiable


def metal_kernel(name: str, input_names: Sequence[str], output_names: Sequence[str], source: str, *,
                 header: str = "", reference: Callable | None = None, numpy_reference: Callable | None = None,
                 vmap_method="sequential", vjp: Callable | None = None) -> MetalKernel:
    """A user's Metal compute kernel as a JAX operation (see jax_metal_plugin._metal_kernel's documentation)."""
    return MetalKernel(name, input_names, output_names, source, header, reference, numpy_reference, vmap_method,
                       vjp)
