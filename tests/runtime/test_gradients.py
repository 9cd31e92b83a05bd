"""None-gradient detection on real TensorFlow/Keras (CPU)."""

from __future__ import annotations

import sys

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tflint.runtime import watch  # noqa: E402

HERE = __file__


def here() -> int:
    return sys._getframe(1).f_lineno


def line_of(marker: str) -> int:
    with open(HERE, encoding="utf-8") as fh:
        return next(i for i, text in enumerate(fh, 1) if marker in text and "line_of" not in text)


def nones(report):
    return report.signals_of("none-gradient")


def test_eager_unused_variable_named_with_reason_and_site_deduplicated():
    w = tf.Variable(tf.ones([3, 2]), name="w")
    dead = tf.Variable(tf.ones([2]), name="dead_bias")
    x = tf.ones([4, 3])
    with watch(signals={"none-gradient"}) as s:
        for _ in range(5):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(x @ w)
            line = here() + 1
            grads = tape.gradient(loss, [w, dead])
            assert grads[1] is None and grads[0] is not None
    sigs = nones(s.report())
    assert len(sigs) == 1
    sig = sigs[0]
    assert sig.location.file == HERE and sig.location.line == line
    assert sig.details["count"] == 5
    (var,) = sig.details["variables"]
    assert var["name"].startswith("dead_bias") and var["shape"] == [2]
    assert var["reason"] == "not-read-in-tape"
    assert "dead_bias" in sig.message and "never read inside the tape" in sig.message


def test_inside_tf_function_reports_line_in_the_function_body():
    w = tf.Variable(2.0, name="w")
    b = tf.Variable(1.0, name="b")

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            y = tf.stop_gradient(b * 3.0) + w * x
        return tape.gradient(y, [w, b])  # marker: step-site

    with watch(signals={"none-gradient"}) as s:
        for _ in range(3):
            g = step(tf.constant(1.0))
            assert g[1] is None
    sigs = nones(s.report())
    assert len(sigs) == 1
    sig = sigs[0]
    assert sig.location.file == HERE and sig.location.line == line_of("marker: step-site")
    assert sig.details["eager"] is False
    assert sig.details["variables"][0]["reason"] == "no-differentiable-path"
    assert "tracing a tf.function" in sig.message


def test_integer_and_unwatched_tensor_sources():
    xi = tf.constant([1, 2, 3])
    xf = tf.constant([1.0, 2.0])
    with watch(signals={"none-gradient"}) as s:
        with tf.GradientTape() as tape:
            tape.watch(xi)
            y = tf.reduce_sum(tf.cast(xi, tf.float32)) + tf.reduce_sum(xf * 2.0)
        tape.gradient(y, [xi, xf])
    sig = nones(s.report())[0]
    reasons = {v["reason"] for v in sig.details["variables"]}
    assert reasons == {"integer-dtype", "unwatched-tensor"}
    assert "tape.watch" in sig.message and "int32" in sig.message


def test_keras_apply_gradients_with_none_and_all_none():
    v1 = keras.Variable(1.0, name="used")
    v2 = keras.Variable(1.0, name="unused")
    opt = keras.optimizers.SGD(0.1)
    with watch(signals={"none-gradient"}) as s:
        line = here() + 1
        opt.apply_gradients([(tf.constant(1.0), v1), (None, v2)])
        with pytest.raises(ValueError):
            line_all = here() + 1
            opt.apply_gradients([(None, v1), (None, v2)])
    assert float(v1.numpy()) == pytest.approx(0.9)  # the update still happened
    sigs = {s_.location.line: s_ for s_ in nones(s.report())}
    assert set(sigs) == {line, line_all}
    assert sigs[line].severity == "warning" and "unused" in sigs[line].message
    assert sigs[line_all].severity == "error" and sigs[line_all].details["all_none"]


def test_clean_training_reports_nothing_and_restores_tape():
    from tensorflow.python.eager import backprop

    original = backprop.GradientTape.__dict__["gradient"]
    w = tf.Variable(1.0)
    with watch(signals={"none-gradient"}) as s:
        assert backprop.GradientTape.__dict__["gradient"] is not original
        for _ in range(3):
            with tf.GradientTape() as tape:
                loss = w * w
            (g,) = tape.gradient(loss, [w])
            w.assign_sub(0.1 * g)
    assert backprop.GradientTape.__dict__["gradient"] is original
    assert nones(s.report()) == []


def test_keras_fit_with_unused_layer_points_at_fit_call():
    inp = keras.Input((4,))
    used = keras.layers.Dense(1, name="used")(inp)
    keras.layers.Dense(1, name="dead_branch")(inp)  # built but not in the output
    model = keras.Model(inp, used)
    extra = keras.layers.Dense(1, name="dead_branch2")
    extra.build((None, 4))
    model.extra = extra  # tracked: its weights are trainable but never used
    model.compile(optimizer="sgd", loss="mse")
    x = tf.random.normal([32, 4])
    y = tf.random.normal([32, 1])
    with watch(signals={"none-gradient"}) as s:
        line = here() + 1
        model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    sigs = nones(s.report())
    assert len(sigs) == 1
    sig = sigs[0]
    assert sig.location.file == HERE and sig.location.line == line
    names = {v["name"] for v in sig.details["variables"]}
    assert names == {"dead_branch2/kernel", "dead_branch2/bias"}
    assert sig.details["variables"][0]["reason"] == "not-read-in-tape"
