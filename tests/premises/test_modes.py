"""Premises of the train/serve mode and loss rules (TFL601-TFL604), shown on TensorFlow 2.21
with Keras 3: each bad program computes a wrong value without raising, its "Use instead"
computes the right one, and tflint flags the first text and not the second."""

from __future__ import annotations

import numpy as np
import pytest

from tests.premises._probe import codes, run

pytest.importorskip("tensorflow")
pytestmark = pytest.mark.timeout(240)


# -- TFL601 -------------------------------------------------------------------------------

SERVE_601 = """
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dropout(0.5), tf.keras.layers.Dense(2)])

@tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32)])
def serve(x):
    return model(x, training={mode})

x = np.ones([4, 16], np.float32)
OUTPUTS = [serve(x).numpy() for _ in range(3)]
EXPECTED = model.predict(x, verbose=0)
"""


def test_tfl601_serving_with_training_true_gives_noisy_predictions():
    bad, good = SERVE_601.format(mode="True"), SERVE_601.format(mode="False")
    ns = run(bad)
    outs = ns["OUTPUTS"]
    assert not np.allclose(outs[0], outs[1]) or not np.allclose(outs[1], outs[2])  # units dropped
    assert not all(np.allclose(o, ns["EXPECTED"]) for o in outs)
    ns = run(good)
    for o in ns["OUTPUTS"]:
        np.testing.assert_allclose(o, ns["EXPECTED"], rtol=1e-5, atol=1e-6)
    assert "TFL601" in codes(bad) and "TFL601" not in codes(good)


# -- TFL602 -------------------------------------------------------------------------------

FIT_602 = """
import numpy as np
from tensorflow import keras

keras.utils.set_random_seed(0)
rng = np.random.RandomState(0)
x = rng.randn(64, 3).astype("float32")
y = (x[:, 0] > 0).astype("int64")
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2){last}])
model.compile(optimizer=keras.optimizers.SGD(0.5), loss={loss})
LOSSES = model.fit(x, y, epochs=5, batch_size=16, verbose=0).history["loss"]
"""


def test_tfl602_raw_logits_with_a_probability_loss_trains_on_the_wrong_loss():
    bad = FIT_602.format(last="", loss='"sparse_categorical_crossentropy"')
    good = FIT_602.format(last="", loss="keras.losses.SparseCategoricalCrossentropy(from_logits=True)")
    b, g = run(bad)["LOSSES"], run(good)["LOSSES"]
    assert b[0] > 2 * g[0] and b[-1] > 1.2 * g[-1], (b, g)  # scores taken for probabilities
    assert "TFL602" in codes(bad) and "TFL602" not in codes(good)


def test_tfl602_from_logits_on_a_softmax_output_is_corrected_by_keras_3():
    """The other half of the rule's old premise does not hold on Keras 3: Keras uses the logits
    behind the softmax itself, so training is identical. The rule no longer reports it there."""
    import warnings

    doubled = FIT_602.format(last=', keras.layers.Activation("softmax")',
                             loss="keras.losses.SparseCategoricalCrossentropy(from_logits=True)")
    plain = FIT_602.format(last=', keras.layers.Activation("softmax")', loss='"sparse_categorical_crossentropy"')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = run(doubled)["LOSSES"]
    p = run(plain)["LOSSES"]
    np.testing.assert_allclose(d, p, rtol=1e-4)
    assert "TFL602" not in codes(doubled) and "TFL602" not in codes(plain)


# -- TFL603 -------------------------------------------------------------------------------

def test_tfl603_log_of_softmax_underflows_to_minus_infinity():
    bad = """
    import tensorflow as tf
    logits = tf.constant([[0.0, 120.0]])
    LOG_PROBS = tf.math.log(tf.nn.softmax(logits, axis=-1)).numpy()
    """
    good = """
    import tensorflow as tf
    logits = tf.constant([[0.0, 120.0]])
    LOG_PROBS = tf.nn.log_softmax(logits, axis=-1).numpy()
    """
    assert np.isneginf(run(bad)["LOG_PROBS"][0, 0])
    assert run(good)["LOG_PROBS"][0, 0] == pytest.approx(-120.0)
    assert "TFL603" in codes(bad) and "TFL603" not in codes(good)


# -- TFL604 -------------------------------------------------------------------------------

BLOCK_604 = """
import numpy as np
from tensorflow import keras

keras.utils.set_random_seed(0)

class Block(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.dropout = keras.layers.Dropout(0.5)

    def call(self, x, training=None):
        return self.dropout(x, training={mode})

model = keras.Sequential([keras.Input((32,)), Block(), keras.layers.Dense(1)])
x = np.ones([8, 32], np.float32)
PREDICTIONS = [model.predict(x, verbose=0) for _ in range(3)]
"""


def test_tfl604_hard_coded_training_keeps_dropout_on_in_predict():
    bad, good = BLOCK_604.format(mode="True"), BLOCK_604.format(mode="training")
    p = run(bad)["PREDICTIONS"]
    assert not (np.allclose(p[0], p[1]) and np.allclose(p[1], p[2]))  # noisy inference
    p = run(good)["PREDICTIONS"]
    assert np.allclose(p[0], p[1]) and np.allclose(p[1], p[2])
    assert "TFL604" in codes(bad) and "TFL604" not in codes(good)
