"""Input-stall detection: eager loops over tf.data, Keras fit (in-graph probe), clean pipelines."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tflint.runtime import watch  # noqa: E402

HERE = __file__


def here() -> int:
    return sys._getframe(1).f_lineno


def slow_gen(n=30, delay=0.01):
    for _ in range(n):
        time.sleep(delay)
        yield np.ones([8, 4], np.float32), np.ones([8, 1], np.float32)


SPEC = (tf.TensorSpec([8, 4], tf.float32), tf.TensorSpec([8, 1], tf.float32))


@tf.function
def step(x, y):
    return tf.reduce_mean((tf.reduce_sum(x, axis=1, keepdims=True) - y) ** 2)


def test_eager_loop_over_slow_generator_is_highly_input_bound():
    with watch(signals={"input-stall"}) as s:
        line = here() + 1
        ds = tf.data.Dataset.from_generator(slow_gen, output_signature=SPEC)
        for x, y in ds:
            step(x, y)
    rep = s.report()
    sigs = rep.signals_of("input-stall")
    assert len(sigs) == 1
    sig = sigs[0]
    assert sig.severity == "warning" and sig.message.startswith("HIGHLY input-bound")
    assert sig.details["wait_share"] >= 0.2
    assert sig.details["dataset"]["from_generator"] is True
    assert sig.details["dataset"]["final_prefetch"] is False
    assert "prefetch" in sig.message and "from_generator" in sig.message
    assert sig.location.file == HERE and sig.location.line == line
    assert rep.metrics["input_wait_share"]["overall"] == sig.details["wait_share"]
    assert rep.metrics["input_wait_share"]["series"]


def test_keras_fit_waits_are_measured_inside_the_graph():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    # built before the session: the location falls back to where it is iterated (the fit call)
    ds = tf.data.Dataset.from_generator(slow_gen, output_signature=SPEC).map(lambda x, y: (x * 2.0, y))
    with watch(signals={"input-stall"}) as s:
        line = here() + 1
        model.fit(ds, epochs=1, verbose=0)
    rep = s.report()
    sig = rep.signals_of("input-stall")[0]
    assert rep.metrics["input"]["in_graph_fetches"] >= 25
    assert rep.metrics["input"]["eager_fetches"] == 0
    assert sig.details["wait_share"] >= 0.2
    assert sig.details["dataset"]["sequential_map"] is True
    assert "num_parallel_calls" in sig.message
    assert sig.location.file == HERE and sig.location.line == line


def test_a_pass_over_another_dataset_before_fit_is_not_fits_input_wait():
    """A script reads a slow text pipeline once, eagerly, before training (a vocabulary pass:
    TensorFlow's word2vec tutorial), then fits on a cached, prefetched dataset. That pass fed no
    step: it is neither fit's start-up wait nor the pipeline the report describes."""

    def slowly(x):
        def slow(a):
            time.sleep(0.02)
            return a

        return tf.ensure_shape(tf.numpy_function(slow, [x], tf.float32), [4])

    raw = tf.data.Dataset.from_tensor_slices(np.ones([80, 4], np.float32)).map(slowly)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 4)).astype(np.float32)
    train = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(32).cache().prefetch(tf.data.AUTOTUNE)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    with watch(signals={"input-stall"}) as s:
        t0 = time.perf_counter()
        rows = list(raw.as_numpy_iterator())  # 80 slow reads, ~1.6 s, before training
        t_pass = time.perf_counter() - t0
        model.fit(train, epochs=5, verbose=0)
    assert len(rows) == 80
    rep = s.report()
    (loop,) = rep.metrics["loops"]
    assert loop["startup_input_wait_s"] < 0.5 * t_pass and loop["startup_time_s"] < t_pass, (loop, t_pass)
    assert rep.signals_of("input-stall") == [], [x.message for x in rep.signals_of("input-stall")]
    assert "MapDataset" not in rep.metrics["input"]["dataset"]["chain"], rep.metrics["input"]["dataset"]["chain"]


def test_prefetched_in_memory_pipeline_is_clean():
    x = np.random.rand(512, 4).astype("float32")
    y = np.random.rand(512, 1).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).cache().prefetch(tf.data.AUTOTUNE)
    w = tf.Variable(tf.ones([4, 1]))

    @tf.function
    def heavy(xb, yb):
        with tf.GradientTape() as tape:
            h = xb
            for _ in range(20):
                h = tf.tanh(tf.matmul(tf.tile(h, [1, 1]), tf.ones([4, 4]) * 0.1))
            big = tf.ones([192, 192]) * tf.reduce_mean(h)  # a few ms of compute per step
            for _ in range(8):
                big = tf.tanh(big @ big * 0.01)
            loss = tf.reduce_mean((h @ w - yb) ** 2) + 0.0 * tf.reduce_mean(big)
        w.assign_sub(0.01 * tape.gradient(loss, w))
        return loss

    with watch(signals={"input-stall"}) as s:
        for _ in range(2):
            for xb, yb in ds:
                heavy(xb, yb)
    rep = s.report()
    assert rep.signals_of("input-stall") == []
    assert rep.metrics["input_wait_share"]["overall"] is not None
    assert rep.metrics["input_wait_share"]["overall"] < 0.20
    assert rep.metrics["input"]["dataset"]["final_prefetch"] is True


def test_iterator_patch_is_removed_after_exit():
    from tensorflow.python.data.ops import iterator_ops

    original = iterator_ops.OwnedIterator.__dict__["_next_internal"]
    with watch(signals={"input-stall"}):
        assert iterator_ops.OwnedIterator.__dict__["_next_internal"] is not original
    assert iterator_ops.OwnedIterator.__dict__["_next_internal"] is original


def test_python_generator_in_eager_loop_is_potentially_input_bound():
    with watch(signals={"input-stall"}) as s:
        for x, y in slow_gen(n=25, delay=0.01):
            line = here() + 1
            step(x, y)
    rep = s.report()
    sigs = rep.signals_of("input-stall")
    assert len(sigs) == 1
    sig = sigs[0]
    assert sig.message.startswith("POTENTIALLY input-bound")
    assert sig.details["source"] == "python-loop" and sig.details["outside_step_share"] >= 0.5
    assert sig.location.file == HERE and sig.location.line == line
    assert "from_generator" in sig.message


def _trained_step(with_args):
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    opt = keras.optimizers.SGD(0.01)
    x0, y0 = tf.ones([8, 4]), tf.ones([8, 1])

    def train(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    if with_args:
        return tf.function(train)
    return tf.function(lambda: train(x0, y0))


def test_time_in_other_tf_functions_between_training_steps_is_not_input_wait():
    """Reinforcement learning (keras-io's DDPG): between training steps on sampled batches, a
    target-network update, another tf.function, takes most of the time. It is measured, named,
    and not taken for the wait of a batch made in Python."""
    update = _trained_step(with_args=True)
    big = tf.ones([256, 256])

    @tf.function
    def update_target():
        h = big
        for _ in range(8):
            h = tf.tanh(h @ h * 0.01)
        return tf.reduce_sum(h)

    xs = [(tf.constant(np.ones([8, 4], np.float32)), tf.constant(np.ones([8, 1], np.float32)))] * 60
    with watch(signals={"input-stall"}) as s:
        for x, y in xs:
            update(x, y)
            update_target()
    rep = s.report()
    assert rep.signals_of("input-stall") == []
    inp = rep.metrics["input"]
    assert inp["other_functions"] == ["update_target"] and inp["other_functions_share"] > 0.5
    assert inp["outside_step_share"] < 0.5


def test_a_step_given_no_batch_is_not_input_bound_by_the_time_between_its_calls():
    """A step function with no parameters trains on what its graph holds (here: captured
    tensors; elsewhere a variable or an iterator it reads itself): Python work between its calls
    (acting in an environment) does not feed it."""
    update = _trained_step(with_args=False)
    with watch(signals={"input-stall"}) as s:
        for _ in range(30):
            update()
            time.sleep(0.01)
    rep = s.report()
    assert rep.metrics["input"]["step_takes_arguments"] is False
    assert rep.metrics["input"]["outside_step_share"] > 0.5
    assert rep.signals_of("input-stall") == []


def test_fast_python_loop_without_tf_data_is_clean():
    xs = [(np.ones([8, 4], np.float32), np.ones([8, 1], np.float32))] * 40
    big = tf.ones([256, 256])

    @tf.function
    def busy(x, y):
        h = big
        for _ in range(6):
            h = tf.tanh(h @ h * 0.01)
        return step(x, y) + 0.0 * tf.reduce_sum(h)

    with watch(signals={"input-stall"}) as s:
        for x, y in xs:
            busy(tf.constant(x), tf.constant(y))
    assert s.report().signals_of("input-stall") == []
