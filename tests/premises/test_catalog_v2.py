"""Premises of the catalog-v2 rules, on real TensorFlow.

For each rule: the program it describes misbehaves under TensorFlow, the "Use instead" version
does not, and tflint flags the first text only. Programs run in this process (TensorFlow on
CPU); the lint side never imports TensorFlow.
"""

from __future__ import annotations

import sys
import textwrap

import pytest

tf = pytest.importorskip("tensorflow")

from tflint.check.engine import lint_text  # noqa: E402
from tflint.rules import rule_codes  # noqa: E402


def codes(source: str, path: str = "premise.py") -> list[tuple[int, str]]:
    res = lint_text(path, textwrap.dedent(source), frozenset(rule_codes()))
    assert not res.errors, res.errors
    return sorted((f.line, f.code) for f in res.findings)


_programs: list[str] = []


def run(source: str) -> dict:
    """Run ``source`` as a script file (AutoGraph reads the source of what it converts, when a
    function is first called: the file stays until the end of the session)."""
    import atexit
    import runpy
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="tflint-premise-")
    if not _programs:
        atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in _programs])
    _programs.append(d)
    path = f"{d}/premise_program_{len(_programs)}.py"
    with open(path, "w") as fh:
        fh.write(textwrap.dedent(source))
    return runpy.run_path(path, run_name="premise")


# -- TFL109: Python state read in traced code, rebound later ------------------------------------
STALE_BAD = """
    import tensorflow as tf

    lr = 0.1

    @tf.function
    def scaled(x):
        return x * lr

    seen = []
    for epoch in range(3):
        seen.append(float(scaled(tf.constant(1.0))))
        lr = lr * 0.5
"""
STALE_GOOD = """
    import tensorflow as tf

    lr = tf.Variable(0.1)

    @tf.function
    def scaled(x):
        return x * lr

    seen = []
    for epoch in range(3):
        seen.append(float(scaled(tf.constant(1.0))))
        lr.assign(lr * 0.5)
"""
STEPS_BAD = """
    import tensorflow as tf

    class Trainer(tf.Module):
        def __init__(self):
            self.steps = 0

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def step(self, x):
            if self.steps >= 2:
                return x * 10.0
            return x

        def on_batch_end(self):
            self.steps += 1

    t = Trainer()
    seen = []
    for _ in range(4):
        seen.append(float(t.step(tf.constant(1.0))))
        t.on_batch_end()
"""
STEPS_GOOD = """
    import tensorflow as tf

    class Trainer(tf.Module):
        def __init__(self):
            self.steps = tf.Variable(0)

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def step(self, x):
            if self.steps >= 2:
                return x * 10.0
            return x

        def on_batch_end(self):
            self.steps.assign_add(1)

    t = Trainer()
    seen = []
    for _ in range(4):
        seen.append(float(t.step(tf.constant(1.0))))
        t.on_batch_end()
"""


def test_tfl109_python_global_rebound_later_is_frozen():
    assert run(STALE_BAD)["seen"] == pytest.approx([0.1, 0.1, 0.1])  # the decay never reaches the graph
    assert run(STALE_GOOD)["seen"] == pytest.approx([0.1, 0.05, 0.025])
    assert codes(STALE_BAD) == [(8, "TFL109")]
    assert codes(STALE_GOOD) == []


def test_tfl109_self_counter_incremented_eagerly_never_switches_on():
    assert run(STEPS_BAD)["seen"] == [1.0, 1.0, 1.0, 1.0]  # `self.steps >= 2` frozen at 0
    assert run(STEPS_GOOD)["seen"] == [1.0, 1.0, 10.0, 10.0]
    assert codes(STEPS_BAD) == [(10, "TFL109")]
    assert codes(STEPS_GOOD) == []


# -- TFL103: a tensor of the trace stored on self ----------------------------------------------
LEAK_BAD = """
    import tensorflow as tf

    class Trainer(tf.Module):
        @tf.function
        def step(self, x):
            loss = tf.reduce_mean(x * x)
            self.loss_value = loss
            return loss

    t = Trainer()
    t.step(tf.ones(3))
    value = t.loss_value + 1.0
"""
LEAK_GOOD = """
    import tensorflow as tf

    class Trainer(tf.Module):
        def __init__(self):
            self.loss_value = tf.Variable(0.0)

        @tf.function
        def step(self, x):
            loss = tf.reduce_mean(x * x)
            self.loss_value.assign(loss)
            return loss

    t = Trainer()
    t.step(tf.ones(3))
    value = t.loss_value + 1.0
"""


def test_tfl103_tensor_stored_on_self_is_out_of_scope():
    with pytest.raises(TypeError, match="out of scope"):
        run(LEAK_BAD)
    assert float(run(LEAK_GOOD)["value"]) == 2.0
    assert codes(LEAK_BAD) == [(8, "TFL103")]
    assert codes(LEAK_GOOD) == []


# -- TFL102: a list/dict argument of a tf.function mutated -------------------------------------
ARG_BAD = """
    import tensorflow as tf

    @tf.function
    def total(xs):
        xs.append(tf.constant(1.0))
        return tf.add_n(xs)

    result = total([tf.constant(2.0)])
"""
ARG_GOOD = """
    import tensorflow as tf

    @tf.function
    def total(xs):
        xs = list(xs)
        xs.append(tf.constant(1.0))
        return tf.add_n(xs)

    result = total([tf.constant(2.0)])
"""
DICT_BAD = """
    import tensorflow as tf

    def step(batch):
        batch["scaled"] = batch["x"] * 2.0
        return batch["scaled"]

    result = tf.function(step)({"x": tf.constant(1.0)})
"""


def test_tfl102_mutating_an_argument_raises():
    with pytest.raises(ValueError, match="should not modify its Python input arguments"):
        run(ARG_BAD)
    with pytest.raises(ValueError, match="should not modify its Python input arguments"):
        run(DICT_BAD)
    assert float(run(ARG_GOOD)["result"]) == 3.0
    assert codes(ARG_BAD) == [(6, "TFL102")]
    assert codes(DICT_BAD) == [(5, "TFL102")]
    assert codes(ARG_GOOD) == []


# -- TFL111: next() on a Python iterator in traced code ----------------------------------------
NEXT_BAD = """
    import tensorflow as tf

    values = iter([1.0, 2.0, 3.0])

    @tf.function
    def step(x):
        return x + next(values)

    seen = [float(step(tf.constant(0.0))) for _ in range(3)]
"""
NEXT_GOOD = """
    import tensorflow as tf

    values = iter(tf.data.Dataset.from_tensor_slices([1.0, 2.0, 3.0]))

    @tf.function
    def step(x):
        return x + next(values)

    seen = [float(step(tf.constant(0.0))) for _ in range(3)]
"""


def test_tfl111_python_iterator_is_read_once():
    assert run(NEXT_BAD)["seen"] == [1.0, 1.0, 1.0]
    assert run(NEXT_GOOD)["seen"] == [1.0, 2.0, 3.0]
    assert codes(NEXT_BAD) == [(8, "TFL111")]
    assert codes(NEXT_GOOD) == []


NEXT_ARGUMENT = """
    import tensorflow as tf

    @tf.function
    def consume_next(iterator):
        return next(iterator) * 1

    iterator = {source}
    seen = [int(consume_next(iterator)) for _ in range(3)]
"""


def test_tfl111_a_python_iterator_passed_in_is_read_once_too():
    """The tf.function guide's ``buggy_consume_next``: the iterator is an argument, and a Python
    object keys the trace by its identity, so the next calls reuse the trace and the iterator
    never advances; a ``tf.data`` iterator passed the same way advances on every call."""
    bad = NEXT_ARGUMENT.format(source="iter([1, 2, 3])")
    good = NEXT_ARGUMENT.format(source="iter(tf.data.Dataset.from_tensor_slices([1, 2, 3]))")
    assert run(bad)["seen"] == [1, 1, 1]
    assert run(good)["seen"] == [1, 2, 3]
    assert codes(bad) == [(6, "TFL111")]
    assert codes(good) == []


# -- TFL110: a tf.function that calls itself ---------------------------------------------------
FACT_BAD = """
    import tensorflow as tf

    @tf.function
    def fact(n):
        if n <= 1:
            return tf.constant(1)
        return n * fact(n - 1)
"""
FACT_GOOD = """
    import tensorflow as tf

    @tf.function
    def fact(n):
        result = tf.constant(1)
        for i in tf.range(2, n + 1):
            result *= i
        return result
"""


def test_tfl110_recursion_retraces_or_never_finishes_tracing():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(3000)
    try:
        bad = run(FACT_BAD)["fact"]
        assert int(bad(5)) == 120
        assert bad.experimental_get_tracing_count() == 5  # one trace per Python value
        # A tensor stop condition: tracing fails (endless recursion, or AutoGraph gives up and
        # the tensor condition is used as a Python bool).
        with pytest.raises((RecursionError, tf.errors.OperatorNotAllowedInGraphError, Exception)) as info:
            run(FACT_BAD)["fact"](tf.constant(5))
        assert any(
            word in f"{type(info.value).__name__} {info.value}"
            for word in ("Recursion", "recursion", "Staging", "OperatorNotAllowedInGraph")
        )
    finally:
        sys.setrecursionlimit(old)
    good = run(FACT_GOOD)["fact"]
    assert int(good(tf.constant(5))) == 120 and int(good(tf.constant(6))) == 720
    assert good.experimental_get_tracing_count() == 1
    assert codes(FACT_BAD) == [(8, "TFL110")]
    assert codes(FACT_GOOD) == []


NESTED_JIT = """
    import tensorflow as tf

    made = []

    def minimize(loss_fn, steps, jit_compile=False):
        if jit_compile:
            @tf.function(jit_compile=False)
            def run_compiled():
                return minimize(loss_fn, steps, jit_compile=False)
            made.append(run_compiled)
            return run_compiled()
        return tf.add_n([loss_fn() for _ in range(steps)])
"""


def test_tfl110_a_nested_tf_function_that_calls_its_definer_again_is_no_recursion():
    """Why TensorFlow Probability's ``minimize(jit_compile=True)`` is not reported: the
    tf.function is defined inside the function its trace calls again; that call makes (or,
    with ``jit_compile=False``, skips) a tf.function of its own, so each object is traced once
    and nothing recurses."""
    ns = run(NESTED_JIT)
    v = tf.Variable(2.0)
    for _ in range(3):
        assert float(ns["minimize"](lambda: v * 1.0, 3, jit_compile=True)) == 6.0
    assert len(ns["made"]) == 3
    assert [f.experimental_get_tracing_count() for f in ns["made"]] == [1, 1, 1]
    assert [c for _, c in codes(NESTED_JIT) if c == "TFL110"] == []


# -- TFL605: softmax over one unit -------------------------------------------------------------
SOFTMAX_BAD = """
    import numpy as np
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((4,)),
        keras.layers.Dense(8, activation="relu"),
        keras.layers.Dense(1, activation="softmax"),
    ])
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("float32")
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="binary_crossentropy", metrics=["accuracy"])
    history = model.fit(x, y, epochs=30, verbose=0)
    out = model.predict(x, verbose=0)
"""
SOFTMAX_GOOD = SOFTMAX_BAD.replace('Dense(1, activation="softmax")', 'Dense(1, activation="sigmoid")')


def test_tfl605_softmax_on_one_unit_is_constant():
    bad = run(SOFTMAX_BAD)
    # every input: 1.0 (exactly, or 1 - 2**-24 on CPUs whose softmax rounds so): the same output
    out = bad["out"]
    assert (out == out.flat[0]).all() and abs(float(out.flat[0]) - 1.0) <= 2.0**-23, out[:3]
    accuracy = bad["history"].history["accuracy"]
    assert accuracy == [pytest.approx(float(bad["y"].mean()))] * len(accuracy)  # "all positive", forever
    good = run(SOFTMAX_GOOD)
    assert good["out"].std() > 0.01
    assert good["history"].history["accuracy"][-1] > 0.85
    assert codes(SOFTMAX_BAD) == [(9, "TFL605")]
    assert codes(SOFTMAX_GOOD) == []


# -- project-wide facts: a traced step in one module reaching a side effect in another ----------
def test_print_in_a_helper_of_another_module_runs_once(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "premise_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text(
        "class Log:\n    def write(self, x):\n        print('step')\n        return x\n"
    )
    (pkg / "train.py").write_text(
        "import tensorflow as tf\nfrom premise_pkg.helpers import Log\n\n"
        "@tf.function\ndef step(x):\n    return Log().write(x)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    train = importlib.import_module("premise_pkg.train")
    for _ in range(3):
        train.step(tf.constant(1.0))
    assert capsys.readouterr().out.count("step") == 1  # printed while tracing only

    from tflint.check.engine import lint_project

    files = [(str(p), p.read_bytes(), frozenset(rule_codes())) for p in sorted(pkg.glob("*.py"))]
    found = [(f.path.rsplit("/", 1)[-1], f.line, f.code) for r in lint_project(files, jobs=1) for f in r.findings]
    assert found == [("helpers.py", 3, "TFL101")]


# -- TFL603: log of probabilities made elsewhere ------------------------------------------------
LOGP_BAD = """
    import tensorflow as tf

    def policy(logits):
        probs = tf.nn.softmax(logits)
        return probs

    logits = tf.constant([[0.0, 120.0]])
    action_probs = policy(logits)
    log_prob = tf.math.log(action_probs[0, 0])
"""
LOGP_GOOD = """
    import tensorflow as tf

    def policy(logits):
        return tf.nn.log_softmax(logits)

    logits = tf.constant([[0.0, 120.0]])
    log_probs = policy(logits)
    log_prob = log_probs[0, 0]
"""


def test_tfl603_log_of_probabilities_through_a_return_underflows():
    assert float(run(LOGP_BAD)["log_prob"]) == float("-inf")
    assert float(run(LOGP_GOOD)["log_prob"]) == pytest.approx(-120.0)
    assert codes(LOGP_BAD) == [(10, "TFL603")]
    assert codes(LOGP_GOOD) == []


# -- TFL203: predict in every iteration of a long loop ------------------------------------------
PREDICT_LOOP = """
    import time

    import numpy as np
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    probe = np.ones((8, 4), "float32")
    model.predict(probe, verbose=0)
    model(probe, training=False)

    start = time.perf_counter()
    for step in range(100):
        preds = model.predict(probe, verbose=0)
    per_predict = time.perf_counter() - start

    start = time.perf_counter()
    for step in range(100):
        preds = model(probe, training=False)
    per_call = time.perf_counter() - start
"""


def test_tfl203_predict_in_every_iteration_of_a_long_loop_is_slow():
    # Measured side by side in one run: a ratio, not an absolute time.
    ns = run(PREDICT_LOOP)
    assert ns["per_predict"] > 3 * ns["per_call"]
    lines = [line for line, code in codes(PREDICT_LOOP) if code == "TFL203"]
    assert lines == [14]  # the predict loop; the direct call is fine


# -- TFL204: fit on one batch per iteration of a loop ------------------------------------------
FIT_PER_BATCH = """
    import time

    import numpy as np
    import keras

    def make():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)])
        model.compile(optimizer="sgd", loss="mse")
        return model

    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(16, 8)).astype("float32"), rng.normal(size=(16, 4)).astype("float32"))
               for _ in range(20)]
    slow, fast = make(), make()
    slow.fit(*batches[0], epochs=1, verbose=0, shuffle=False)  # both compiled before timing
    fast.train_on_batch(*batches[0])
    slow.set_weights(fast.get_weights())

    start = time.perf_counter()
    for xb, yb in batches:
        slow.fit(xb, yb, epochs=1, verbose=0, shuffle=False)
    per_fit = time.perf_counter() - start

    start = time.perf_counter()
    for xb, yb in batches:
        fast.train_on_batch(xb, yb)
    per_step = time.perf_counter() - start
"""
FIT_PER_BATCH_LINT = """
    import tensorflow as tf

    model = tf.keras.models.load_model("m.keras")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    for xb, yb in ds:
        model.fit(xb, yb, epochs=1, verbose=0)
    for xb, yb in ds:
        model.train_on_batch(xb, yb)
"""


def test_tfl204_fit_per_batch_is_the_same_update_for_many_times_the_time():
    # Measured side by side in one run: a ratio, not an absolute time.
    ns = run(FIT_PER_BATCH)
    assert ns["per_fit"] > 5 * ns["per_step"]
    # the same twenty SGD steps on the same batches: the weights agree
    for a, b in zip(ns["slow"].get_weights(), ns["fast"].get_weights()):
        assert abs(a - b).max() < 1e-5
    assert codes(FIT_PER_BATCH_LINT) == [(7, "TFL204")]


# -- TFL609: tf.random.set_seed does not seed Keras 3 ------------------------------------------
SEED_TF_ONLY = """
    import numpy as np
    import tensorflow as tf

    np.random.seed(0)
    tf.random.set_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
    print("KERNEL", repr(float(np.asarray(model.weights[0]).sum())))
    print("TFOP", repr(float(tf.random.normal([3]).numpy().sum())))
"""
SEED_ALL = SEED_TF_ONLY.replace("tf.random.set_seed(0)", "tf.keras.utils.set_random_seed(0)")


def _seeded_run(source: str) -> tuple[str, str]:
    """(initial kernel, a tf.random draw) printed by ``source`` in a fresh interpreter: global
    seeds are per process."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], capture_output=True, text=True,
                         check=True, env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3"}).stdout
    got = dict(line.split(" ", 1) for line in out.splitlines() if line.startswith(("KERNEL", "TFOP")))
    return got["KERNEL"], got["TFOP"]


def test_tfl609_tf_random_set_seed_leaves_keras3_weights_unseeded():
    first, second = _seeded_run(SEED_TF_ONLY), _seeded_run(SEED_TF_ONLY)
    assert first[1] == second[1]  # TensorFlow's own ops follow its seed...
    assert first[0] != second[0]  # ...Keras 3's initial weights do not
    fixed = _seeded_run(SEED_ALL), _seeded_run(SEED_ALL)
    assert fixed[0] == fixed[1]
    assert codes(SEED_TF_ONLY) == [(6, "TFL609")]
    assert codes(SEED_ALL) == []


# -- TFL608: plain tf.Variable attributes of a Keras 3 model -----------------------------------
UNTRACKED_BAD = """
    import numpy as np
    import tensorflow as tf
    import keras

    class Linear(keras.Model):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.zeros((3, 1)))

        def call(self, x):
            return tf.matmul(x, self.w)

    x = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
    y = x @ np.array([[1.0], [2.0], [3.0]], "float32")
    model = Linear()
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(x, y, epochs=3, verbose=0)
"""
UNTRACKED_GOOD = UNTRACKED_BAD.replace(
    "self.w = tf.Variable(tf.zeros((3, 1)))", 'self.w = self.add_weight(shape=(3, 1), initializer="zeros")'
)


def test_tfl608_keras3_does_not_train_plain_tf_variables():
    bad = run(UNTRACKED_BAD)
    assert bad["model"].trainable_variables == []
    losses = bad["history"].history["loss"]
    assert max(losses) - min(losses) < 1e-4 * max(losses)  # the loss never moves
    good = run(UNTRACKED_GOOD)
    assert len(good["model"].trainable_variables) == 1
    good_losses = good["history"].history["loss"]
    assert good_losses[-1] < 0.99 * good_losses[0]
    assert codes(UNTRACKED_BAD) == [(9, "TFL608")]
    assert codes(UNTRACKED_GOOD) == []


STATE_608 = """
    import os
    import tempfile

    import numpy as np
    import tensorflow as tf
    import keras

    class Counter(keras.layers.Layer):
        def build(self, shape):
            self.seen = {variable}

        def call(self, x):
            self.seen.assign_add(tf.cast(tf.shape(x)[0], tf.float32))
            return x

    def build():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1), Counter()])
        model.compile(optimizer="sgd", loss="mse")
        return model

    model = build()
    model.fit(np.zeros((8, 2)), np.zeros((8, 1)), batch_size=4, epochs=1, verbose=0)
    folder = tempfile.mkdtemp()
    model.save_weights(os.path.join(folder, "w.weights.h5"))
    restored = build()
    restored.load_weights(os.path.join(folder, "w.weights.h5"))
    SEEN = [float(m.layers[-1].seen.numpy()) for m in (model, restored)]
"""
TF_CHECKPOINT_608 = """
    checkpoint = tf.train.Checkpoint(model=model).save(os.path.join(folder, "ckpt"))
    from_checkpoint = build()
    from_checkpoint(np.zeros((1, 2)))
    tf.train.Checkpoint(model=from_checkpoint).restore(checkpoint)
    SEEN.append(float(from_checkpoint.layers[-1].seen.numpy()))
"""


SAVED_MODEL_608 = """
    tf.saved_model.save(model, os.path.join(folder, "saved"))
    loaded = tf.saved_model.load(os.path.join(folder, "saved"))
    LOADED = [float(v.numpy()) for v in tf.train.TrackableView(loaded).descendants()
              if isinstance(v, tf.Variable) and v.shape == ()]
"""


def test_tfl608_state_in_a_plain_tf_variable_is_not_saved_by_keras():
    """A ``trainable=False`` plain tf.Variable that the layer updates: fit updates it (8
    examples seen), but it is not in ``weights``, so ``save_weights``/``load_weights`` bring
    back its initial value (0); ``self.add_weight(..., trainable=False)`` is saved, and
    ``tf.train.Checkpoint`` restores the plain variable too (a module that saves that way is
    not reported)."""
    bad = STATE_608.format(variable="tf.Variable(0.0, trainable=False)")
    good = STATE_608.format(variable='self.add_weight(shape=(), initializer="zeros", trainable=False)')
    assert run(bad)["SEEN"] == [8.0, 0.0]
    assert run(good)["SEEN"] == [8.0, 8.0]
    assert codes(bad) == [(11, "TFL608")]
    assert codes(good) == []
    checkpointed = bad + textwrap.indent(textwrap.dedent(TF_CHECKPOINT_608), "    ")
    assert run(checkpointed)["SEEN"] == [8.0, 0.0, 8.0]
    assert codes(checkpointed) == []
    saved = bad + textwrap.indent(textwrap.dedent(SAVED_MODEL_608), "    ")
    assert 8.0 in run(saved)["LOADED"]  # SavedModel keeps the plain variable too
    assert codes(saved) == []


# -- TFL607: mixed_float16 with a custom loop that never scales the loss ------------------------
MIXED_BAD = """
    import numpy as np
    import tensorflow as tf
    import keras

    keras.mixed_precision.set_global_policy("mixed_float16")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.1)
    x = tf.constant(np.random.default_rng(0).normal(size=(64, 4)), tf.float32)
    with tf.GradientTape() as tape:
        pred = model(x)
        loss = tf.cast(tf.reduce_mean(tf.square(pred)), tf.float32) * 1e-9
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply(grads, model.trainable_variables)
    keras.mixed_precision.set_global_policy("float32")
"""
MIXED_GOOD = """
    import numpy as np
    import tensorflow as tf
    import keras

    keras.mixed_precision.set_global_policy("mixed_float16")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    x = tf.constant(np.random.default_rng(0).normal(size=(64, 4)), tf.float32)
    with tf.GradientTape() as tape:
        pred = model(x)
        loss = tf.cast(tf.reduce_mean(tf.square(pred)), tf.float32) * 1e-9
        scaled = optimizer.scale_loss(loss)
    grads = tape.gradient(scaled, model.trainable_variables)
    optimizer.apply(grads, model.trainable_variables)
    keras.mixed_precision.set_global_policy("float32")
"""


def test_tfl607_unscaled_float16_gradients_flush_to_zero():
    bad = run(MIXED_BAD)
    assert all(float(tf.reduce_max(tf.abs(g))) == 0.0 for g in bad["grads"])  # every gradient is 0
    good = run(MIXED_GOOD)
    assert all(float(tf.reduce_max(tf.abs(g))) > 0.0 for g in good["grads"])
    assert codes(MIXED_BAD) == [(14, "TFL607")]
    assert codes(MIXED_GOOD) == []
