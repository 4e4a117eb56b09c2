"""Random elementwise programs of add, subtract, multiply, negate and constants, for the multiply-add
rule's property tests (tests/ops/test_multiply_add_programs.py) and its measurement against XLA:CPU
(scripts/measure_multiply_add.py).

A program is a list of nodes in order, each an input, a constant or an op on earlier nodes, so shared
subexpressions are common; its mirror image swaps the operands of every add and multiply. Constants
include 0, 1 and -1 (what XLA simplifies away), powers of two (exact products) and arbitrary values,
and constant-only chains (what XLA folds). The gradient of a program is taken per element
(vmap of grad), so it stays elementwise: no sum whose rounding would be another subject.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

SPECIAL_CONSTANTS = (0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 0.25, 3.0, 0.26, 0.48, -0.1, 1.5)


@dataclasses.dataclass(frozen=True)
class Program:
    n_inputs: int
    nodes: tuple  # ("in", i) | ("const", value) | ("neg", a) | (op, a, b) with op "add", "sub", "mul"
    outputs: tuple  # node indices

    def mirror(self) -> "Program":
        swap = lambda n: (n[0], n[2], n[1]) if n[0] in ("add", "mul") else n  # noqa: E731
        return Program(self.n_inputs, tuple(swap(n) for n in self.nodes), self.outputs)

    def describe(self) -> str:
        names = []
        for n in self.nodes:
            if n[0] == "in":
                names.append(f"x{n[1]}")
            elif n[0] == "const":
                names.append(repr(n[1]))
            elif n[0] == "neg":
                names.append(f"-({names[n[1]]})")
            else:
                names.append(f"({names[n[1]]} {dict(add='+', sub='-', mul='*')[n[0]]} {names[n[2]]})")
        return ", ".join(names[o] for o in self.outputs)


def random_program(rng: np.random.Generator, size: int | None = None) -> Program:
    n_inputs = int(rng.integers(1, 4))
    nodes: list[tuple] = [("in", i) for i in range(n_inputs)]
    size = int(rng.integers(3, 12)) if size is None else size
    # Operands come mostly from the last few nodes (depth) and sometimes from anywhere (sharing).
    pick = lambda: len(nodes) - 1 - int(min(rng.geometric(0.45) - 1, len(nodes) - 1))  # noqa: E731
    for _ in range(size):
        r = rng.random()
        if r < 0.14:
            c = SPECIAL_CONSTANTS[int(rng.integers(len(SPECIAL_CONSTANTS)))] if rng.random() < 0.7 else float(
                np.round(rng.uniform(-3, 3), 3))
            nodes.append(("const", c))
            continue
        if r < 0.22:
            nodes.append(("neg", pick()))
            continue
        op = ("add", "sub", "mul", "mul")[int(rng.integers(4))]
        nodes.append((op, pick(), pick()))
    outputs = [len(nodes) - 1]
    if rng.random() < 0.2 and len(nodes) > n_inputs + 2:  # an intermediate result returned too
        outputs.append(int(rng.integers(n_inputs, len(nodes) - 1)))
    return Program(n_inputs, tuple(nodes), tuple(outputs))


def function(program: Program, dtype):
    """The program as a function of its inputs (arrays of one shape), returning a tuple of its outputs."""

    def fn(*xs):
        vals = []
        for n in program.nodes:
            if n[0] == "in":
                v = xs[n[1]]
            elif n[0] == "const":
                v = jnp.full(xs[0].shape, n[1], dtype)
            elif n[0] == "neg":
                v = -vals[n[1]]
            elif n[0] == "add":
                v = vals[n[1]] + vals[n[2]]
            elif n[0] == "sub":
                v = vals[n[1]] - vals[n[2]]
            else:
                v = vals[n[1]] * vals[n[2]]
            vals.append(v)
        return tuple(vals[o] for o in program.outputs)

    return fn


def gradient(program: Program, dtype):
    """Per element, the gradient of the program's first output with respect to every input."""
    fn = function(program, dtype)
    scalar = lambda *xs: fn(*xs)[0]  # noqa: E731
    return jax.vmap(jax.grad(scalar, argnums=tuple(range(program.n_inputs))))


def inputs(rng: np.random.Generator, program: Program, dtype, n: int = 64):
    return tuple(rng.uniform(-4, 4, n).astype(dtype) for _ in range(program.n_inputs))


def bits(x) -> np.ndarray:
    """An array's bit patterns, every NaN one pattern: two results are the same when these are equal."""
    x = np.asarray(x)
    x = np.where(np.isnan(x), np.array(np.nan, x.dtype), x)
    return x.view(np.uint32 if x.dtype == np.float32 else np.uint64)


def same(a, b) -> bool:
    return all(np.array_equal(bits(x), bits(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
