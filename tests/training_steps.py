"""Small training setups shared by the runtime tests (real TensorFlow and Keras)."""

from __future__ import annotations

from typing import Any


def dense_regression(lr: float) -> tuple[Any, Any, Any, Any]:
    """640 examples of 8 features, a one-layer Keras model compiled with SGD(``lr``), and a
    custom ``tf.function`` step that trains it with an SGD(``lr``) of its own:
    ``(x, y, model, step)``, where ``step(x_batch, y_batch)``."""
    import keras
    import numpy as np
    import tensorflow as tf

    x = np.random.default_rng(0).standard_normal((640, 8)).astype(np.float32)
    y = x[:, :1]
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(lr), "mse")
    opt = keras.optimizers.SGD(lr)

    @tf.function
    def step(a, b):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(a) - b) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    return x, y, model, step
