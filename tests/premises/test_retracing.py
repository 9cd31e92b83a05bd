"""Premises of TFL201-TFL203, measured on the installed TensorFlow (2.21, Keras 3).

Retraces are counted by TensorFlow itself (``experimental_get_tracing_count()``, or a Python
side effect in the function body, which runs once per trace); the cost of per-batch
``predict`` is a ratio of two timings taken side by side, never an absolute time.
"""

from __future__ import annotations

import time

import pytest

tf = pytest.importorskip("tensorflow")

from tests.premises._trace_helpers import assert_flags, lint, load  # noqa: E402

STEPS = 6


# -- TFL201: Python numbers as tf.function arguments -----------------------------------------

SCALAR_BAD = """
import tensorflow as tf

@tf.function
def train_step(x, step):
    return x * tf.cast(step, tf.float32)

def run(batches):
    for i, x in enumerate(batches):
        train_step(x, i)  # expect: TFL201
"""
SCALAR_GOOD = """
import tensorflow as tf

@tf.function
def train_step(x, step):
    return x * tf.cast(step, tf.float32)

def run(batches):
    for i, x in enumerate(batches):
        train_step(x, tf.constant(i, tf.int64))
"""


def test_tfl201_every_python_int_is_a_new_trace(tmp_path):
    batches = [tf.ones([2])] * STEPS
    bad = load(tmp_path, SCALAR_BAD)
    good = load(tmp_path, SCALAR_GOOD)
    good.run(batches[:1])  # the one trace the good version needs
    t0 = time.perf_counter()
    bad.run(batches)
    t1 = time.perf_counter()
    good.run(batches)
    t2 = time.perf_counter()
    assert bad.train_step.experimental_get_tracing_count() == STEPS
    assert good.train_step.experimental_get_tracing_count() == 1
    assert (t1 - t0) / (t2 - t1) > 3  # a trace per call costs a multiple of a cached call
    assert_flags(SCALAR_BAD, SCALAR_GOOD, "TFL201")


def test_tfl201_input_signature_converts_python_ints(tmp_path):
    src = """
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([], tf.int64)])
    def step(i):
        return i + 1

    def run():
        for i in range(6):
            step(i)
    """
    mod = load(tmp_path, src)
    mod.run()
    assert mod.step.experimental_get_tracing_count() == 1
    assert lint(src, "TFL201") == []


# -- TFL202: tf.function created per iteration / per call ------------------------------------

PER_CALL_BAD = """
import tensorflow as tf

traces = []

def body(x):
    traces.append(1)
    return x * 2

def run(batches):
    for x in batches:
        step = tf.function(body)  # expect: TFL202
        step(x)

def predict_one(x):
    @tf.function  # expect: TFL202
    def fwd(x):
        traces.append(1)
        return x + 1
    return fwd(x)

def serve(batches):
    for x in batches:
        predict_one(x)
"""
PER_CALL_GOOD = """
import tensorflow as tf

traces = []

def body(x):
    traces.append(1)
    return x * 2

step = tf.function(body)

def run(batches):
    for x in batches:
        step(x)

@tf.function
def fwd(x):
    traces.append(1)
    return x + 1

def serve(batches):
    for x in batches:
        fwd(x)
"""


def test_tfl202_new_tf_function_per_call_traces_every_time(tmp_path):
    batches = [tf.constant(float(i)) for i in range(STEPS)]
    bad = load(tmp_path, PER_CALL_BAD)
    good = load(tmp_path, PER_CALL_GOOD)
    good.run(batches[:1])
    good.traces.clear()
    t0 = time.perf_counter()
    bad.run(batches)
    t1 = time.perf_counter()
    good.run(batches)
    t2 = time.perf_counter()
    assert (t1 - t0) / (t2 - t1) > 3
    assert len(good.traces) == 0  # the function made once is not traced again
    assert len(bad.traces) == STEPS  # same signature every time, still one trace per object
    bad.traces.clear()
    bad.serve(batches)
    assert len(bad.traces) == STEPS

    good.serve(batches)
    assert len(good.traces) == 1
    assert_flags(PER_CALL_BAD, PER_CALL_GOOD, "TFL202")


GRAPH_ONLY_CREATION = """
import tensorflow as tf

traces = []

def scaled(x):
    if tf.executing_eagerly():
        return x * 2.0

    @tf.function
    def inner(y):
        traces.append(1)
        return y * 2.0

    return inner(x)

@tf.function
def step(x):
    return scaled(x) + 1.0

def run(batches):
    return [step(b) for b in batches]
"""


def test_tfl202_a_function_created_only_while_a_graph_is_built_traces_once_per_trace(tmp_path):
    """Why a tf.function created under ``if tf.executing_eagerly(): return ...`` (tf_agents'
    ``xla.compile_in_graph_mode``) is not reported: it is created only while its caller is
    traced, and traced once per trace of the caller, not per call; the same function without
    the guard, called eagerly, traces on every call."""
    batches = [tf.constant(float(i)) for i in range(STEPS)]
    mod = load(tmp_path, GRAPH_ONLY_CREATION)
    mod.run(batches)
    assert len(mod.traces) == 1
    assert [float(mod.scaled(b)) for b in batches[:2]] == [0.0, 2.0] and len(mod.traces) == 1
    # as a library shows it, its callers traced in other modules: not reported either
    library = GRAPH_ONLY_CREATION[:GRAPH_ONLY_CREATION.index("@tf.function\ndef step")] + (
        "def double(x):\n    return scaled(x)\n\ndef quadruple(x):\n    return scaled(scaled(x))\n")
    assert lint(library, "TFL202") == []
    assert len(lint(library.replace("if tf.executing_eagerly():", "if x.shape.rank == 0:"), "TFL202")) == 1
    unguarded = GRAPH_ONLY_CREATION.replace("    if tf.executing_eagerly():\n        return x * 2.0\n", "")
    unguarded = unguarded[:unguarded.index("@tf.function\ndef step")] + (
        "def run(batches):\n    out = []\n    for b in batches:\n        out.append(scaled(b))\n    return out\n")
    mod = load(tmp_path, unguarded)
    mod.run(batches)
    assert len(mod.traces) == STEPS
    assert len(lint(unguarded, "TFL202")) == 1


FORWARDED = """
import tensorflow as tf

traces = []

@tf.function
def train_step(x, step):
    traces.append(1)
    return x * tf.cast(step, tf.float32)

def run_step(x, step):
    return train_step(x, {arg})

def run(n):
    for step in range(n):
        run_step(tf.ones([2]), step)
"""


def test_tfl201_a_python_number_forwarded_by_a_helper_retraces_too(tmp_path):
    """The loop's int goes through an eager helper to the tf.function: one trace per value, as
    when it is passed directly; the helper passing ``tf.constant(step)`` traces once."""
    bad = load(tmp_path, FORWARDED.format(arg="step"))
    bad.run(STEPS)
    assert len(bad.traces) == STEPS
    good = load(tmp_path, FORWARDED.format(arg="tf.constant(step)"))
    good.run(STEPS)
    assert len(good.traces) == 1
    marked = FORWARDED.replace("run_step(tf.ones([2]), step)", "run_step(tf.ones([2]), step)  # expect: TFL201")
    assert_flags(marked.format(arg="step"), FORWARDED.format(arg="tf.constant(step)"), "TFL201")


# -- TFL203: model.predict per batch ---------------------------------------------------------

PREDICT_BAD = """
import keras

def run(model, ds):
    out = []
    for batch in ds:
        out.append(model.predict(batch, verbose=0))  # expect: TFL203
    return out
"""
PREDICT_GOOD = """
import keras

def run(model, ds):
    out = []
    for batch in ds:
        out.append(model.predict_on_batch(batch))
    return out

def run_direct(model, ds):
    return [model(batch, training=False) for batch in ds]

def run_whole(model, ds):
    return model.predict(ds, verbose=0)
"""


def test_tfl203_per_batch_predict_costs_a_multiple_of_a_direct_call(tmp_path):
    import numpy as np
    import keras

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    x = np.random.default_rng(0).random((8 * 16, 8), dtype=np.float32)
    ds = tf.data.Dataset.from_tensor_slices(x).batch(16)
    bad = load(tmp_path, PREDICT_BAD)
    good = load(tmp_path, PREDICT_GOOD)
    bad.run(model, ds)
    good.run(model, ds)
    good.run_direct(model, ds)
    good.run_whole(model, ds)  # warm up every path once

    ratios = []
    for _ in range(2):  # side by side, in the same run
        t0 = time.perf_counter()
        slow = bad.run(model, ds)
        t1 = time.perf_counter()
        fast = good.run(model, ds)
        t2 = time.perf_counter()
        ratios.append((t1 - t0) / (t2 - t1))
    # same numbers, at a multiple of the cost (measured 80-100x on 8 batches of 16 rows)
    np.testing.assert_allclose(np.concatenate(slow), np.concatenate(fast), rtol=1e-5)
    np.testing.assert_allclose(np.concatenate(slow), np.concatenate([f.numpy() for f in good.run_direct(model, ds)]), rtol=1e-5)
    np.testing.assert_allclose(np.concatenate(slow), good.run_whole(model, ds), rtol=1e-5)
    assert min(ratios) > 3, ratios
    assert_flags(PREDICT_BAD, PREDICT_GOOD, "TFL203")


def _per_call_times(model, x, calls: tuple[int, int, int], rounds: int = 3) -> list[tuple[float, float, float]]:
    """Seconds per call of ``model.predict(x)``, ``model(x, training=False)`` and
    ``model.predict_on_batch(x)``, side by side in ``rounds`` rounds after a warm-up of each."""
    paths = (lambda: model.predict(x, verbose=0), lambda: model(x, training=False), lambda: model.predict_on_batch(x))
    for _ in range(2):
        for f in paths:
            f()

    def per_call(f, n):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t0) / n

    return [tuple(per_call(f, n) for f, n in zip(paths, calls)) for _ in range(rounds)]


def test_tfl203_predict_on_batch_in_a_loop_is_not_slower_than_a_direct_call():
    """Why TFL203 leaves ``predict_on_batch`` alone: it calls the cached predict function, with
    none of ``predict``'s per-call setup, and on a small batch beats an eager ``model(x)``
    (measured ~0.3x of it)."""
    import numpy as np
    import keras

    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(4)])
    x = np.random.default_rng(0).random((8, 16), dtype=np.float32)
    ratios = [(on_batch / direct, predict / direct)
              for predict, direct, on_batch in _per_call_times(model, x, calls=(10, 50, 50))]
    np.testing.assert_allclose(model.predict_on_batch(x), model(x, training=False).numpy(), rtol=1e-5)
    assert min(r for r, _ in ratios) < 1.5, ratios  # not the multiple that TFL203 is about
    assert min(p for _, p in ratios) > 3, ratios  # while predict() per call is
    src = "import keras\nmodel = keras.Sequential([keras.layers.Dense(1)])\nfor x in ds:\n    model.predict_on_batch(x)\n"
    assert lint(src, "TFL203") == []


def test_tfl203_on_a_deep_model_an_eager_call_is_no_cure_and_predict_on_batch_is():
    """Why TFL203 says ``predict_on_batch`` rather than ``model(x)``: on a small transformer
    (a token-by-token decoding loop, as in Deep Learning with Python's text generation) an eager
    call runs one op at a time and costs nearly as much as ``predict`` (measured 47 vs 57 ms),
    while ``predict_on_batch`` runs the compiled step (4.4 ms)."""
    import numpy as np
    import keras

    inp = keras.Input((32,), dtype="int32")
    h = keras.layers.Embedding(500, 64)(inp)
    for _ in range(3):
        h = keras.layers.LayerNormalization()(h + keras.layers.MultiHeadAttention(4, 16)(h, h))
        h = keras.layers.LayerNormalization()(h + keras.layers.Dense(64)(keras.layers.Dense(128, activation="relu")(h)))
    model = keras.Model(inp, keras.layers.Dense(500)(h))
    x = np.random.default_rng(0).integers(0, 500, (1, 32)).astype("int32")
    ratios = [(direct / predict, on_batch / predict)
              for predict, direct, on_batch in _per_call_times(model, x, calls=(10, 10, 10))]
    np.testing.assert_allclose(model.predict_on_batch(x), model.predict(x, verbose=0), rtol=1e-4, atol=1e-5)
    assert max(d for d, _ in ratios) > 0.4, ratios  # the eager call saves little (measured ~0.8x)
    assert min(o for _, o in ratios) < 0.3, ratios  # the compiled step saves most (measured ~0.08x)
    bad = "import keras\nmodel = keras.models.load_model(\"gpt.keras\")\nfor i in range(n, 64):\n    p = model.predict(np.array([tokens[:i]]), verbose=0)\n"
    from tflint.check.engine import lint_text

    found = lint_text("decode.py", bad, frozenset({"TFL203"})).findings
    assert len(found) == 1 and "predict_on_batch" in found[0].message, found
