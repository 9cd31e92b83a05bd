"""Premises of TFL101-TFL108, measured on the installed TensorFlow (2.21, Keras 3).

Each test runs the program a rule describes, shows the misbehaviour the rule claims, runs the
rule's "Use instead" version and shows it behaves, and checks that tflint flags the first and
not the second.
"""

from __future__ import annotations

import logging

import pytest

tf = pytest.importorskip("tensorflow")

from tests.premises._trace_helpers import assert_flags, lint, load  # noqa: E402

CALLS = 4


# -- TFL101: print ---------------------------------------------------------------------------

PRINT_BAD = """
import tensorflow as tf

@tf.function
def step(x):
    print("x", x)  # expect: TFL101
    return x * 2
"""
PRINT_GOOD = """
import tensorflow as tf

LOG = None

@tf.function
def step(x):
    tf.print("x", x, output_stream=LOG)
    return x * 2
"""


def test_tfl101_print_fires_once_tf_print_every_call(tmp_path, capsys):
    bad = load(tmp_path, PRINT_BAD)
    for i in range(CALLS):
        bad.step(tf.constant(float(i)))
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1  # one trace, one line, whatever the number of calls
    assert "Tensor(" in printed[0]  # and it shows a symbolic tensor, not a value

    good = load(tmp_path, PRINT_GOOD)
    log = tmp_path / "tf_print.txt"
    good.LOG = f"file://{log}"
    for i in range(CALLS):
        good.step(tf.constant(float(i)))
    assert log.read_text().split() == ["x", "0", "x", "1", "x", "2", "x", "3"]
    assert_flags(PRINT_BAD, PRINT_GOOD, "TFL101")


KERAS_PRINT = """
import keras
import numpy as np

class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)

    def call(self, x):
        return self.dense(x)

    def train_step(self, data):
        x, y = data
        print("step")
        return {"n": 0.0}

def fit(run_eagerly):
    model = Net()
    model.compile(optimizer="sgd", loss="mse", run_eagerly=run_eagerly)
    x = np.zeros((8, 2), "float32")
    model.fit(x, x[:, :1], batch_size=2, epochs=1, verbose=0)
"""


def test_tfl101_keras_methods_print_every_step_under_run_eagerly(tmp_path, capsys):
    """Why a module that compiles with ``run_eagerly=True`` has no traced Keras methods: ``fit``
    then runs ``train_step`` as Python on every step (4 steps, 4 prints), where the traced step
    printed once per trace."""
    mod = load(tmp_path, KERAS_PRINT)
    mod.fit(run_eagerly=False)
    traced = capsys.readouterr().out.split().count("step")
    mod.fit(run_eagerly=True)
    eager = capsys.readouterr().out.split().count("step")
    assert traced < 4 and eager == 4, (traced, eager)
    src = KERAS_PRINT.replace("run_eagerly=run_eagerly", "run_eagerly=False")
    assert len(lint(src, "TFL101")) == 1
    assert lint(KERAS_PRINT.replace("run_eagerly=run_eagerly", "run_eagerly=True"), "TFL101") == []


def test_tfl101_a_static_shape_print_shows_the_shape_it_checks(tmp_path, capsys):
    """Why ``print("h:", h.shape)`` in traced code is not reported: it prints the static shape
    once per trace, which is what a shape check wants; the same print of a value is reported."""
    src = """
    import tensorflow as tf

    @tf.function
    def step(x):
        h = tf.concat([x, x], axis=1)
        print("h:", h.shape)
        return h
    """
    mod = load(tmp_path, src)
    for _ in range(CALLS):
        mod.step(tf.ones([2, 3]))
    assert capsys.readouterr().out.splitlines() == ["h: (2, 6)"]
    assert lint(src, "TFL101") == []
    assert len(lint(src.replace("h.shape", "h"), "TFL101")) == 1


def test_tfl101_autograph_builtin_functions_option_prints_values_every_call(tmp_path, capsys):
    """Why a ``print`` of a tensor is not reported in a ``tf.function`` created with AutoGraph's
    ``BUILTIN_FUNCTIONS`` option: AutoGraph converts it into a print op that prints on every
    call; a ``print`` of text only (or of an f-string, formatted in Python) still prints once."""
    src = """
    import tensorflow as tf

    Feature = tf.autograph.experimental.Feature

    @tf.function(experimental_autograph_options=(Feature.BUILTIN_FUNCTIONS,))
    def step(x):
        print("x", x)
        print(f"text {x.dtype.name}")
        return x * 2
    """
    mod = load(tmp_path, src)
    for i in range(CALLS):
        mod.step(tf.constant(float(i)))
    printed = capsys.readouterr().out.splitlines()
    assert printed.count("text float32") == 1  # formatted in Python: once, while tracing
    assert [p for p in printed if p.startswith("x ")] == ["x 0.0", "x 1.0", "x 2.0", "x 3.0"]
    assert lint(src, "TFL101") == []
    plain = src.replace("(experimental_autograph_options=(Feature.BUILTIN_FUNCTIONS,))", "")
    assert len(lint(plain, "TFL101")) == 1  # the print of x: once per trace without the option
    text_only = src.replace('print("x", x)', 'print("x")')
    assert len(lint(text_only, "TFL101")) == 1


# -- TFL102: outer container mutated ---------------------------------------------------------

CONTAINER_BAD = """
import tensorflow as tf

losses = []

@tf.function
def step(x):
    loss = tf.reduce_mean(x)
    losses.append(loss)  # expect: TFL102
    return loss
"""
CONTAINER_GOOD = """
import tensorflow as tf

@tf.function
def step(x):
    return tf.reduce_mean(x)

def run(batches):
    losses = []
    for x in batches:
        losses.append(float(step(x)))
    return losses
"""


def test_tfl102_container_appended_once_per_trace(tmp_path):
    bad = load(tmp_path, CONTAINER_BAD)
    for i in range(CALLS):
        bad.step(tf.fill([2], float(i)))
    assert len(bad.losses) == 1  # one entry per trace, not per call
    assert not hasattr(bad.losses[0], "numpy")  # a graph tensor: no value outside the graph
    with pytest.raises(Exception):
        float(bad.losses[0])

    good = load(tmp_path, CONTAINER_GOOD)
    assert good.run([tf.fill([2], float(i)) for i in range(CALLS)]) == [0.0, 1.0, 2.0, 3.0]
    assert_flags(CONTAINER_BAD, CONTAINER_GOOD, "TFL102")


# -- TFL103: global / plain attribute rebound ------------------------------------------------

COUNTER_BAD = """
import tensorflow as tf

step = 0

@tf.function
def train_step(x):
    global step
    step += 1  # expect: TFL103
    return x * 2
"""
COUNTER_GOOD = """
import tensorflow as tf

step = tf.Variable(0)

@tf.function
def train_step(x):
    step.assign_add(1)
    return x * 2
"""


def test_tfl103_python_counter_counts_traces(tmp_path):
    bad = load(tmp_path, COUNTER_BAD)
    for i in range(CALLS):
        bad.train_step(tf.constant(float(i)))
    assert bad.step == 1  # frozen after the trace

    good = load(tmp_path, COUNTER_GOOD)
    for i in range(CALLS):
        good.train_step(tf.constant(float(i)))
    assert int(good.step.numpy()) == CALLS
    assert_flags(COUNTER_BAD, COUNTER_GOOD, "TFL103")


# -- TFL104: Python / NumPy randomness -------------------------------------------------------

RANDOM_BAD = """
import random
import numpy as np
import tensorflow as tf

@tf.function
def noisy_np(x):
    return x + np.random.normal()  # expect: TFL104

@tf.function
def noisy_py(x):
    return x + random.uniform(0.0, 1.0)  # expect: TFL104
"""
RANDOM_GOOD = """
import tensorflow as tf

gen = tf.random.Generator.from_seed(1)

@tf.function
def noisy_np(x):
    return x + tf.random.normal([])

@tf.function
def noisy_py(x):
    return x + gen.uniform([])
"""


def test_tfl104_python_and_numpy_random_are_frozen(tmp_path):
    bad = load(tmp_path, RANDOM_BAD)
    good = load(tmp_path, RANDOM_GOOD)
    zero = tf.constant(0.0)
    for fn in (bad.noisy_np, bad.noisy_py):
        assert len({float(fn(zero)) for _ in range(CALLS)}) == 1  # the same "random" number
    for fn in (good.noisy_np, good.noisy_py):
        assert len({float(fn(zero)) for _ in range(CALLS)}) == CALLS
    assert_flags(RANDOM_BAD, RANDOM_GOOD, "TFL104")


# -- TFL105: wall clock ----------------------------------------------------------------------

CLOCK_BAD = """
import time
import tensorflow as tf

@tf.function
def stamp(x):
    return tf.cast(x, tf.float64) + time.time()  # expect: TFL105
"""
CLOCK_GOOD = """
import tensorflow as tf

@tf.function
def stamp(x):
    return tf.cast(x, tf.float64) + tf.timestamp()
"""


def test_tfl105_clock_read_once(tmp_path):
    import time

    bad = load(tmp_path, CLOCK_BAD)
    good = load(tmp_path, CLOCK_GOOD)
    zero = tf.constant(0.0)
    seen_bad, seen_good = [], []
    for _ in range(3):
        seen_bad.append(float(bad.stamp(zero)))
        seen_good.append(float(good.stamp(zero)))
        time.sleep(0.02)
    assert len(set(seen_bad)) == 1  # the trace-time clock, a constant in the graph
    assert seen_good == sorted(seen_good) and seen_good[-1] - seen_good[0] >= 0.03
    assert_flags(CLOCK_BAD, CLOCK_GOOD, "TFL105")


def test_tfl105_timing_python_work_at_trace_time_is_not_flagged():
    # The clock reading only measures the Python work done while tracing and goes to Python
    # logging: correct once per trace (tensorflow/python/checkpoint does this).
    src = """
    import logging
    import time
    import tensorflow as tf

    @tf.function
    def build(x):
        start = time.time()
        parts = [x * i for i in range(3)]
        took = time.time() - start
        logging.info("built in %.3f s", took)
        return tf.add_n(parts)
    """
    assert lint(src, "TFL105") == []


# -- TFL106: variable created in traced code -------------------------------------------------

VARIABLE_BAD = """
import tensorflow as tf

@tf.function
def total(x):
    acc = tf.Variable(0.0)  # expect: TFL106
    acc.assign_add(tf.reduce_sum(x))
    return acc.read_value()
"""
VARIABLE_GOOD = """
import tensorflow as tf

acc = tf.Variable(0.0)

@tf.function
def total(x):
    acc.assign_add(tf.reduce_sum(x))
    return acc.read_value()
"""


def test_tfl106_variable_creation_raises_on_the_first_call(tmp_path):
    bad = load(tmp_path, VARIABLE_BAD)
    with pytest.raises(ValueError, match="singleton tf.Variables created on the first call"):
        bad.total(tf.constant([1.0, 2.0]))

    good = load(tmp_path, VARIABLE_GOOD)
    got = [float(good.total(tf.constant([1.0, 2.0]))) for _ in range(3)]
    assert got == [3.0, 6.0, 9.0]
    assert_flags(VARIABLE_BAD, VARIABLE_GOOD, "TFL106")


# -- TFL107: tensor to Python value ----------------------------------------------------------

TO_PYTHON_BAD = """
import tensorflow as tf
import keras

@tf.function
def scaled(x):
    return x.numpy() * 2  # expect: TFL107

@tf.function
def positive(x):
    return bool(x[0] > 0)  # expect: TFL107

class Crop(keras.layers.Layer):
    def call(self, inputs):
        n = int(tf.shape(inputs)[0])  # expect: TFL107
        return inputs[: n // 2]
"""
TO_PYTHON_GOOD = """
import tensorflow as tf
import keras

@tf.function
def scaled(x):
    return x * 2

@tf.function
def positive(x):
    return x[0] > 0

class Crop(keras.layers.Layer):
    def call(self, inputs):
        n = tf.shape(inputs)[0]
        return tf.cond(inputs[0, 0] > 0, lambda: inputs[: n // 2], lambda: inputs)
"""


def test_tfl107_numpy_and_bool_raise_while_tracing(tmp_path):
    from tensorflow.python.framework.errors_impl import OperatorNotAllowedInGraphError

    bad = load(tmp_path, TO_PYTHON_BAD)
    x = tf.constant([2.0, 3.0])
    with pytest.raises(AttributeError, match="numpy"):
        bad.scaled(x)
    with pytest.raises(OperatorNotAllowedInGraphError):
        bad.positive(x)

    good = load(tmp_path, TO_PYTHON_GOOD)
    assert good.scaled(x).numpy().tolist() == [4.0, 6.0]
    assert bool(good.positive(x))
    assert good.Crop()(tf.ones((4, 2))).shape == (2, 2)
    assert_flags(TO_PYTHON_BAD, TO_PYTHON_GOOD, "TFL107")


def test_tfl107_int_in_a_keras_layer_works_eagerly_and_raises_under_fit(tmp_path):
    import numpy as np
    import keras

    bad = load(tmp_path, TO_PYTHON_BAD)
    assert bad.Crop()(tf.ones((4, 2))).shape == (2, 2)  # eager: works in a notebook
    with pytest.raises(TypeError, match="int()"):  # Keras 3 does not run AutoGraph on `call`
        keras.Sequential([keras.Input((2,)), bad.Crop(), keras.layers.Dense(1)])

    good = load(tmp_path, TO_PYTHON_GOOD)
    model = keras.Sequential([keras.Input((2,)), good.Crop(), keras.layers.Dense(1)])
    assert model.predict(np.ones((4, 2)), batch_size=4, verbose=0).shape == (2, 1)  # traced
    assert model.predict(-np.ones((4, 2)), batch_size=4, verbose=0).shape == (4, 1)


AUTOGRAPH_CAST = """
import tensorflow as tf

@tf.function
def halve(x):
    loss = tf.reduce_mean(x)
    if float(loss) > 1.0:
        return x / 2
    return x

def square(x):
    return x * float(x)

ds = tf.data.Dataset.from_tensor_slices([1.0, 2.0, 3.0]).map(square)
"""


def test_tfl107_int_and_float_in_autograph_code_are_casts(tmp_path):
    # AutoGraph converts int()/float() of a tensor into a cast: the code runs, correctly.
    mod = load(tmp_path, AUTOGRAPH_CAST)
    assert mod.halve(tf.constant([2.0, 4.0])).numpy().tolist() == [1.0, 2.0]
    assert mod.halve(tf.constant([0.5, 0.5])).numpy().tolist() == [0.5, 0.5]
    assert list(mod.ds.as_numpy_iterator()) == [1.0, 4.0, 9.0]
    assert lint(AUTOGRAPH_CAST, "TFL107") == []


def test_tfl107_int_without_autograph_raises(tmp_path):
    src = """
    import tensorflow as tf

    @tf.function(autograph=False)
    def count(x):
        return tf.zeros([int(x)])  # expect: TFL107
    """
    mod = load(tmp_path, src)
    with pytest.raises(TypeError, match="int()"):
        mod.count(tf.constant(3))
    assert lint(src, "TFL107") == [(6, "TFL107")]


# -- TFL108: logging / file I/O --------------------------------------------------------------

class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def records():
    handler = _Records()
    logger = logging.getLogger("premise")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


LOG_BAD = """
import logging
import tensorflow as tf

log = logging.getLogger("premise")

@tf.function
def step(x):
    loss = tf.reduce_mean(x)
    log.info("loss %s", loss)  # expect: TFL108
    return loss
"""
LOG_GOOD = """
import logging
import tensorflow as tf

log = logging.getLogger("premise")

@tf.function
def step(x):
    log.info("tracing step for shape %s, dtype %s", x.shape, x.dtype.name)
    return tf.reduce_mean(x)

def run(batches):
    for x in batches:
        log.info("loss %.1f", float(step(x)))
"""


def test_tfl108_logging_a_tensor_logs_a_symbolic_tensor_once(tmp_path, records):
    bad = load(tmp_path, LOG_BAD)
    for i in range(CALLS):
        bad.step(tf.fill([2], float(i)))
    assert len(records) == 1 and "Tensor(" in records[0]

    records.clear()
    good = load(tmp_path, LOG_GOOD)
    good.run([tf.fill([2], float(i)) for i in range(CALLS)])
    # the static shape/dtype line is right once per trace; the values come from eager code
    assert records == ["tracing step for shape (2,), dtype float32", "loss 0.0", "loss 1.0", "loss 2.0", "loss 3.0"]
    assert_flags(LOG_BAD, LOG_GOOD, "TFL108")


def test_tfl108_file_write_of_a_tensor_happens_once(tmp_path):
    bad_src = """
    import tensorflow as tf

    OUT = None

    @tf.function
    def step(x):
        loss = tf.reduce_mean(x)
        with open(OUT, "a") as fh:
            fh.write(f"{loss}\\n")  # expect: TFL108
        return loss
    """
    good_src = """
    import tensorflow as tf

    OUT = None

    @tf.function
    def step(x):
        loss = tf.reduce_mean(x)
        tf.print(loss, output_stream="file://" + OUT)
        return loss
    """
    bad = load(tmp_path, bad_src)
    bad.OUT = str(tmp_path / "bad.txt")
    good = load(tmp_path, good_src)
    good.OUT = str(tmp_path / "good.txt")
    for i in range(CALLS):
        bad.step(tf.fill([2], float(i)))
        good.step(tf.fill([2], float(i)))
    lines = (tmp_path / "bad.txt").read_text().splitlines()
    assert len(lines) == 1 and "Tensor(" in lines[0]
    assert (tmp_path / "good.txt").read_text().split() == ["0", "1", "2", "3"]
    assert_flags(bad_src, good_src, "TFL108")
