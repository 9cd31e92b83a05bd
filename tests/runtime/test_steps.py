"""Step counting over every training loop of a process, on real TensorFlow in this process."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from tflint.runtime import watch  # noqa: E402


def _models():
    g = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])
    d = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    return g, d


def _update(model, opt, x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(x) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))


def test_eager_gan_with_two_optimizers_counts_one_step_per_iteration():
    g, d = _models()
    d_opt, g_opt = tf.keras.optimizers.Adam(1e-3), tf.keras.optimizers.Adam(1e-3)
    x = tf.zeros([8, 4])
    with watch() as s:
        for _ in range(12):
            _update(d, d_opt, x)
            _update(g, g_opt, x)
    loops = s.steps.summary()["loops"]
    assert [(lp["kind"], lp["steps"], len(lp["optimizers"])) for lp in loops] == [("optimizer", 12, 2)]
    assert s.steps.count == 12


def test_eager_loop_then_a_second_optimizer_loop_are_two_loops():
    g, d = _models()
    opt_a, opt_b = tf.keras.optimizers.SGD(0.1), tf.keras.optimizers.SGD(0.1)
    x = tf.zeros([8, 4])
    with watch() as s:
        for _ in range(7):
            _update(d, opt_a, x)
        for _ in range(5):
            _update(g, opt_b, x)
    loops = s.steps.summary()["loops"]
    assert [(lp["kind"], lp["steps"]) for lp in loops] == [("optimizer", 7), ("optimizer", 5)]
    assert s.report().steps == 12


def test_a_tf_function_without_optimizer_is_not_a_training_loop_once_one_exists():
    g, d = _models()
    opt = tf.keras.optimizers.SGD(0.1)
    x = tf.zeros([8, 4])

    @tf.function
    def evaluate(x):
        return tf.reduce_mean(d(x))

    @tf.function
    def train(x):
        _update(d, opt, x)

    with watch() as s:
        for _ in range(30):
            evaluate(x)  # called more often than the training step
        for _ in range(6):
            train(x)
    summary = s.steps.summary()
    assert [(lp["kind"], lp["name"], lp["steps"]) for lp in summary["loops"]] == [("function", "train", 6)]
    assert summary["steps"] == 6


def test_without_optimizer_the_most_called_tf_function_counts():
    w = tf.Variable(1.0)

    @tf.function
    def step():
        w.assign_sub(0.01)

    with watch() as s:
        for _ in range(9):
            step()
    summary = s.steps.summary()
    assert [(lp["kind"], lp["name"], lp["steps"]) for lp in summary["loops"]] == [("function", "step", 9)]


def test_tf_function_recreated_every_step_is_one_loop_with_every_step():
    g, d = _models()
    opt = tf.keras.optimizers.SGD(0.1)
    x = tf.zeros([8, 4])

    def train(x):
        _update(d, opt, x)

    with watch(signals={"retrace"}) as s:
        for _ in range(80):  # more function objects than there are loop slots
            tf.function(train)(x)
    loops = s.steps.summary()["loops"]
    assert [(lp["kind"], lp["name"], lp["steps"]) for lp in loops] == [("function", "train", 80)]
