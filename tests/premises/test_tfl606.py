"""Premise of TFL606 on TensorFlow 2.21: a hand-written elementwise loss between rank-1 labels
and a `Dense(1)` output broadcasts to [B, B] and trains the model towards the mean label; the
"Use instead" (`tf.squeeze(pred, -1)`) keeps shape [B] and learns; tflint flags only the first."""

from __future__ import annotations

import numpy as np
import pytest

from tests.premises._probe import codes, findings, run

pytest.importorskip("tensorflow")
pytestmark = pytest.mark.timeout(240)

PROGRAM = """
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
N = 256
x = np.random.rand(N, 2).astype("float32")
y = (3 * x[:, 0] - 2 * x[:, 1] + 1).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(N)
model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.Adam(0.05)
SHAPES = []

def train(epochs):
    for _ in range(epochs):
        for xb, yb in ds:
            with tf.GradientTape() as tape:
                pred = {pred}
                err = tf.square(yb - pred)
                loss = tf.reduce_mean(err)
            SHAPES.append(tuple(err.shape))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

train(400)
P = np.reshape(model(x).numpy(), [-1])
"""

BAD = PROGRAM.format(pred="model(xb, training=True)")
GOOD = PROGRAM.format(pred="tf.squeeze(model(xb, training=True), -1)")


def _labels() -> np.ndarray:
    return run(GOOD.split("ds = ")[0])["y"]


def test_tfl606_rank1_labels_minus_dense1_output_trains_towards_the_mean():
    ns = run(BAD)
    y, p = ns["y"], ns["P"]
    assert ns["SHAPES"][0] == (256, 256)  # [B] - [B, 1] broadcasts to [B, B]
    # Every prediction sits at the mean label: the inputs are ignored.
    assert np.std(p) < 0.05 * np.std(y)
    np.testing.assert_allclose(np.mean(p), np.mean(y), atol=0.05)
    assert np.mean((p - y) ** 2) > 0.9 * np.var(y)

    ns = run(GOOD)
    y, p = ns["y"], ns["P"]
    assert ns["SHAPES"][0] == (256,)
    assert np.mean((p - y) ** 2) < 0.01 * np.var(y)  # learns the linear map


def test_tfl606_lints_only_the_bad_program():
    assert "TFL606" in codes(BAD)
    assert "TFL606" not in codes(GOOD)
    line = next(i for i, text in enumerate(BAD.splitlines(), 1) if "tf.square(yb - pred)" in text)
    assert (line, "TFL606") in findings(BAD)
