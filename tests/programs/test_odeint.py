"""An adaptive ODE solve of a closure under vmap and grad: jax.experimental.ode.odeint integrates
Dormand-Prince steps in a while loop whose step size comes from its own error estimates, and its
gradient integrates the adjoint system backwards the same way. The decay y' = -k y, y(0) = 1 has the
solution exp(-k t), so both backends are also held to the truth."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.ode import odeint

from jaxcompare import eps, jax_config, run_on

TIMES = np.arange(0.0, 10.0, 0.1)
RATES = np.arange(0.0, 1.0, 0.04)


def final_value(rate, evaluations=None):
    def rhs(y, t):
        if evaluations is not None:  # no operand: under vmap, once per evaluation of the whole batch
            jax.debug.callback(lambda: evaluations.append(1))
        return -rate * y

    return odeint(rhs, jnp.ones((), rate.dtype), jnp.asarray(TIMES, rate.dtype))[-1]


def batched_value_and_grad(rates, evaluations=None):
    return jax.vmap(jax.value_and_grad(lambda k: final_value(k, evaluations)))(rates)


def evaluations_per_lane(rates):
    """How many right-hand-side evaluations the batched solves make (forward and adjoint): the while
    loops run until their last lane is done, so no lane's solve is longer. A callback with no batched
    operand runs once per evaluation of the batch (with one, it would run once per lane: 25 times the
    Python calls for the same count)."""
    calls = []
    cpu_rates = jax.device_put(rates, jax.devices("cpu")[0])
    jax.block_until_ready(jax.jit(lambda r: batched_value_and_grad(r, calls))(cpu_rates))
    jax.effects_barrier()
    return len(calls)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_value_and_grad_of_an_ode_closure_under_vmap(dtype):
    with jax_config("jax_enable_x64", dtype == np.float64):
        rates = RATES.astype(dtype)
        n = evaluations_per_lane(rates)
        expected = run_on("cpu", batched_value_and_grad, rates)
        actual = run_on("metal", batched_value_and_grad, rates)
    # Bounds normwise, by each result's largest magnitude over the solve: |y| <= 1, and the gradient
    # -t exp(-k t) sums the adjoint's products over the interval, |.| <= t_end. With n evaluations of the
    # right-hand side, forward and adjoint together (six per step):
    # - rounding: every step rounds a few times per stage, a stage per evaluation, and on this stable
    #   problem the errors add up rather than grow: n * eps * magnitude. In float32 the solver's
    #   tolerances (1.4e-8) are below epsilon, so its step sizes come from these roundings themselves and
    #   a backend rounding one op differently takes other steps; the bound holds all the same.
    # - truncation: each step's error is held to rtol * |y| + atol (1.4e-8 each), n * (rtol + atol) *
    #   magnitude over the solve at most.
    # Both backends meet both bounds against the exact solution, and each other within the rounding one.
    # (The float32 product rounded before its add, where XLA:CPU rounds the two once, gave solutions up
    # to 40 ulps apart: 1.45% between the derivatives of JAX's finite-difference check, step 5e-6.)
    t_end = np.float64(np.asarray(TIMES, dtype)[-1])
    k = rates.astype(np.float64)
    truth = (np.exp(-k * t_end), -t_end * np.exp(-k * t_end))
    for name, a, e, x, magnitude in zip(("value", "gradient"), actual, expected, truth, (1.0, t_end)):
        a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
        rounding = n * eps(dtype) * magnitude
        truncation = n * (1.4e-8 + 1.4e-8) * magnitude
        np.testing.assert_allclose(a, e, rtol=0, atol=rounding, err_msg=f"{name}: metal against cpu")
        np.testing.assert_allclose(a, x, rtol=0, atol=rounding + truncation, err_msg=f"{name}: metal, exp(-k t)")
        np.testing.assert_allclose(e, x, rtol=0, atol=rounding + truncation, err_msg=f"{name}: cpu, exp(-k t)")
