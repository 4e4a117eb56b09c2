"""The example CNN and transformer train on metal with the same losses as on the CPU backend."""

import importlib.util
import pathlib

import jax
import numpy as np

from jaxcompare import assert_close

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cnn_training_matches_cpu():
    cnn = load("train_cnn")
    metal, metal_params = cnn.train("metal", steps=8)
    cpu, cpu_params = cnn.train("cpu", steps=8)
    np.testing.assert_allclose(metal, cpu, rtol=2e-4, atol=1e-5)
    assert np.all(np.isfinite(metal))
    assert_close(jax.device_get(metal_params), jax.device_get(cpu_params), rtol=2e-3, atol=2e-4)


def test_transformer_training_matches_cpu():
    lm = load("train_transformer")
    metal, _ = lm.train("metal", steps=6)
    cpu, _ = lm.train("cpu", steps=6)
    np.testing.assert_allclose(metal, cpu, rtol=5e-4, atol=1e-4)
    assert metal[-1] < metal[0]
