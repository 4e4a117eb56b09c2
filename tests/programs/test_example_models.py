"""The example CNN and transformer train on metal with the same losses as on the CPU backend, and
their evaluation (a scan with a tuple carry) and sampling (a fori_loop around the scanned model, with
conds, dynamic slices and updates) agree too."""

import importlib.util
import pathlib

import jax
import numpy as np

from jaxcompare import assert_close

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on(platform, tree):
    return jax.device_put(jax.device_get(tree), jax.devices(platform)[0])


def test_cnn_training_matches_cpu():
    cnn = load("train_cnn")
    metal, metal_params = cnn.train("metal", steps=8)
    cpu, cpu_params = cnn.train("cpu", steps=8)
    np.testing.assert_allclose(metal, cpu, rtol=2e-4, atol=1e-5)
    assert np.all(np.isfinite(metal))
    assert_close(jax.device_get(metal_params), jax.device_get(cpu_params), rtol=2e-3, atol=2e-4)
    x, y = cnn.load_digits_nhwc()
    x, y = cnn.pad_to_chunks(x[:100], y[:100])
    acc_m, loss_m = cnn.evaluate(on("metal", metal_params), *on("metal", (x, y)))
    acc_c, loss_c = cnn.evaluate(on("cpu", metal_params), *on("cpu", (x, y)))
    assert float(acc_m) == float(acc_c)
    np.testing.assert_allclose(float(loss_m), float(loss_c), rtol=1e-5)


def test_transformer_training_and_sampling_match_cpu():
    lm = load("train_transformer")
    metal, params = lm.train("metal", steps=6)
    cpu, _ = lm.train("cpu", steps=6)
    np.testing.assert_allclose(metal, cpu, rtol=5e-4, atol=1e-4)
    assert metal[-1] < metal[0]
    data, _ = lm.corpus()
    prompt = np.zeros(lm.SEQ, np.int32)
    prompt[:lm.SEQ // 2] = data[:lm.SEQ // 2]
    key = jax.random.key(7)
    # Greedy, and long enough that the window slides.
    greedy = [np.asarray(lm.sample(on(p, params), on(p, prompt), on(p, key), lm.SEQ // 2 + 3, 0.0)) for p in ("metal", "cpu")]
    np.testing.assert_array_equal(greedy[0], greedy[1])
    sampled = [np.asarray(lm.sample(on(p, params), on(p, prompt), on(p, key), 8)) for p in ("metal", "cpu")]
    np.testing.assert_array_equal(sampled[0], sampled[1])
