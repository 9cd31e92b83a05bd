"""Targeted cases for TFL101-TFL108 beyond the rules' own VALID/INVALID examples: import
spellings, look-alikes that must stay silent, and the lines messages name."""

from __future__ import annotations

import textwrap

import pytest

from tflint.rules import get_rule
from tests.rule_harness import run_rules


def findings(code: str, source: str):
    return run_rules(textwrap.dedent(source), [get_rule(code)])


def lines(code: str, source: str) -> list[int]:
    return [f.line for f in findings(code, source)]


# -- TFL101 (kept working alongside the new rules) ------------------------------------------

def test_tfl101_print_in_dataset_map_function():
    src = """
    import tensorflow as tf
    def parse(x):
        print(x)
        return x
    ds = tf.data.Dataset.range(3).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    """
    assert lines("TFL101", src) == [4]


# -- TFL102 --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "mutation",
    ["seen.append(x)", "seen.extend([x])", "seen.insert(0, x)", "table.update(a=x)", "bag.add(1)",
     "table['k'] = x", "table['k'] += x", "del table['k']"],
)
def test_tfl102_every_mutation_of_a_module_container(mutation):
    src = f"""
    import tensorflow as tf
    seen = []
    table = {{}}
    bag = set()
    @tf.function
    def f(x):
        {mutation}
        return x
    """
    assert lines("TFL102", src) == [8]


def test_tfl102_message_names_the_line_that_created_the_container():
    src = """
    import tensorflow as tf

    losses = []

    @tf.function
    def f(x):
        losses.append(x)
        return x
    """
    (f,) = findings("TFL102", src)
    assert "line 4" in f.message and "`losses`" in f.message


def test_tfl102_containers_created_during_the_trace_are_fine():
    src = """
    import tensorflow as tf
    @tf.function
    def f(xs):
        parts = []
        lookup = {}
        def add(v):
            parts.append(v)       # parts belongs to the traced function
        for i in range(3):
            add(xs[i])
            lookup[i] = xs[i]
        return tf.stack(parts)
    """
    assert lines("TFL102", src) == []


def test_tfl102_eager_code_and_shadowing_parameters_are_fine():
    src = """
    import tensorflow as tf
    history = []
    @tf.function
    def step(x, history):
        history.append(x)         # a parameter, not the module list
        return x
    for x in tf.data.Dataset.range(3):
        history.append(float(step(x, [])))
    """
    # Not the module list; but a tf.function's own list argument mutated in place, which
    # TensorFlow rejects (ValueError: ... should not modify its Python input arguments).
    (f,) = findings("TFL102", src)
    assert f.line == 6 and "an argument of tf.function `step`" in f.message and "module-level" not in f.message


def test_tfl102_list_parameter_of_an_eager_enclosing_function():
    src = """
    import tensorflow as tf
    def train(ds, sink):
        @tf.function
        def step(x):
            sink.append(x)
            return x
        for x in ds:
            step(x)
    """
    assert lines("TFL102", src) == [6]


def test_tfl102_self_container_keras_and_plain_class():
    src = """
    import tensorflow as tf
    from tensorflow.keras import layers

    class Probe(layers.Layer):
        def __init__(self):
            super().__init__()
            self.activations = []
            self.sublayers = []

        def call(self, x):
            self.activations.append(x)
            self.sublayers.append(layers.Dense(2))   # state creation: TFL106's business
            return x

    class Runner:
        def __init__(self):
            self.cache = {}

        @tf.function
        def run(self, x):
            self.cache["last"] = x
            return x
    """
    assert lines("TFL102", src) == [12, 22]


def test_tfl102_container_reset_in_the_same_traced_function_and_guards():
    src = """
    import keras
    class L(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.outs = []
            self.memo = {}
        def call(self, x, key="a"):
            self.outs = []
            self.outs.append(x)
            if key not in self.memo:
                self.memo[key] = x
            return x
    """
    assert lines("TFL102", src) == []


def test_tfl102_deliberate_trace_counter_is_not_reported():
    src = """
    import tensorflow as tf
    tracing_count = {"n": 0}
    @tf.function
    def f(x):
        tracing_count["n"] += 1
        return x
    """
    assert lines("TFL102", src) == []


# -- TFL103 --------------------------------------------------------------------------------

def test_tfl103_reading_a_global_is_fine_rebinding_is_not():
    src = """
    import tensorflow as tf
    scale = 2.0
    calls = 0
    @tf.function
    def f(x):
        global calls
        calls = calls + 1
        return x * scale
    """
    (f,) = findings("TFL103", src)
    assert f.line == 8 and "line 7" in f.message


def test_tfl103_variable_attributes_and_eager_methods_are_fine():
    src = """
    import tensorflow as tf
    class T(tf.Module):
        def __init__(self):
            self.step = tf.Variable(0)
            self.epochs = 0
        @tf.function
        def train(self, x):
            self.step.assign_add(1)
            return x
        def end_epoch(self):
            self.epochs += 1
    """
    assert lines("TFL103", src) == []


def test_tfl103_plain_attribute_in_keras_train_step_and_helper():
    src = """
    import keras

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.total = 0.0
            self.name_tag = "run"

        def train_step(self, data):
            self._bump(data)
            return {}

        def _bump(self, data):
            self.total -= 1.0
            self.name_tag += "!"
    """
    assert lines("TFL103", src) == [15, 16]


# -- TFL104 --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "imports,expr",
    [
        ("import random", "random.random()"),
        ("from random import randint", "randint(0, 3)"),
        ("import numpy as np", "np.random.rand()"),
        ("import numpy", "numpy.random.normal(0.0, 1.0)"),
        ("from numpy import random", "random.uniform()"),
        ("import numpy as np\nrng = np.random.default_rng(1)", "rng.integers(0, 3)"),
        ("import numpy as np\nstate = np.random.RandomState(0)", "state.randn()"),
    ],
)
def test_tfl104_spellings(imports, expr):
    src = f"import tensorflow as tf\n{imports}\n\n@tf.function\ndef f(x):\n    return x + {expr}\n"
    got = lines("TFL104", src)
    assert len(got) == 1 and got[0] == src.count("\n") - 0


def test_tfl104_graph_randomness_and_seeding_are_fine():
    src = """
    import numpy as np
    import keras
    import tensorflow as tf
    gen = tf.random.Generator.from_seed(0)
    @tf.function
    def f(x):
        np.random.seed(0)
        a = tf.random.uniform([]) + gen.normal([])
        b = keras.random.normal([], seed=1)
        c = tf.random.stateless_normal([], seed=[1, 2])
        return x + a + b + c
    """
    assert lines("TFL104", src) == []


def test_tfl104_generator_held_on_self():
    src = """
    import numpy as np
    import keras
    class Noise(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.rng = np.random.default_rng(0)
        def call(self, x):
            return x + self.rng.normal()
    """
    assert lines("TFL104", src) == [9]


# -- TFL105 --------------------------------------------------------------------------------

def test_tfl105_datetime_module_spelling_and_sleep():
    src = """
    import datetime
    import time
    import tensorflow as tf
    @tf.function
    def f(x):
        time.sleep(0.1)
        stamp = datetime.datetime.now()
        return x
    """
    assert lines("TFL105", src) == [8]


# -- TFL106 --------------------------------------------------------------------------------

def test_tfl106_guards_build_and_early_return():
    src = """
    import tensorflow as tf

    class A(tf.Module):
        def __init__(self):
            self.v = None
            self.w = None

        @tf.function
        def __call__(self, x):
            self.ensure(x)
            if not hasattr(self, "u"):
                self.u = tf.Variable(1.0)
            return x * self.v * self.u

        def ensure(self, x):
            if self.v is not None:
                return
            self.v = tf.Variable(tf.ones_like(x))

    class B(tf.keras.layers.Layer):
        def call(self, x):
            if not self.built:
                self.build(x.shape)
            return x

        def build(self, shape):
            self.k = tf.Variable(tf.zeros(shape[-1:]))
    """
    assert lines("TFL106", src) == []


def test_tfl106_unguarded_in_helper_and_compat_spelling():
    src = """
    import tensorflow as tf
    def helper(x):
        return tf.compat.v1.Variable(1.0) * x
    @tf.function
    def f(x):
        if x.shape[0] > 1:
            v = tf.Variable(2.0)
        return helper(x)
    """
    assert lines("TFL106", src) == [4, 8]


# -- TFL107 --------------------------------------------------------------------------------

def test_tfl107_static_shapes_and_python_numbers_are_fine():
    src = """
    import numpy as np
    import tensorflow as tf
    @tf.function
    def f(x, n=3):
        a = int(x.shape[0])
        b = float(n)
        c = bool(len([1, 2]))
        d = int(3.5)
        e = np.zeros(3).item()
        g = int(tf.compat.dimension_value(x.shape[1]))
        return x
    """
    assert lines("TFL107", src) == []


def test_tfl107_tensor_conversions():
    src = """
    import tensorflow as tf
    @tf.function
    def f(x):
        n = tf.reduce_sum(x)
        a = float(n)
        b = int(tf.shape(x)[0] * 2)
        c = bool(tf.reduce_any(x > 0))
        d = (x + 1).numpy()
        return x
    """
    # AutoGraph turns float()/int() into casts in a tf.function; bool() and .numpy() raise
    assert lines("TFL107", src) == [8, 9]
    keras_src = """
    import tensorflow as tf
    class L(tf.keras.layers.Layer):
        def call(self, x):
            n = tf.reduce_sum(x)
            a = float(n)
            b = int(tf.shape(x)[0] * 2)
            c = bool(tf.reduce_any(x > 0))
            d = (x + 1).numpy()
            return x
    """
    assert lines("TFL107", keras_src) == [6, 7, 8, 9]  # Keras 3: no AutoGraph, all four raise


def test_tfl107_helper_reached_from_autograph_and_keras_is_not_flagged_for_casts():
    src = """
    import keras
    import tensorflow as tf

    def count(t):
        return int(t)

    @tf.function
    def f(x):
        return count(tf.reduce_sum(x))

    class L(keras.layers.Layer):
        def call(self, x):
            return count(tf.reduce_sum(x))
    """
    assert lines("TFL107", src) == []


def test_tfl107_numpy_inside_py_function_or_eager_guard_is_fine():
    src = """
    import tensorflow as tf
    @tf.function
    def f(x):
        def to_np(t):
            return t.numpy() * 2
        if tf.executing_eagerly():
            print_me = x.numpy()
        return tf.py_function(to_np, [x], tf.float32)
    """
    assert lines("TFL107", src) == []


def test_tfl107_keras_model_outputs_are_tensors():
    src = """
    from tensorflow import keras
    model = keras.Sequential([keras.layers.Dense(1)])
    loss_fn = keras.losses.MeanSquaredError()
    class Net(keras.Model):
        def train_step(self, data):
            x, y = data
            loss = loss_fn(y, model(x))
            if float(loss) > 1:
                pass
            return {}
    """
    assert lines("TFL107", src) == [9]


# -- TFL108 --------------------------------------------------------------------------------

def test_tfl108_logging_spellings_and_python_files():
    src = """
    import logging
    import sys
    import tensorflow as tf
    log = tf.get_logger()

    class W(tf.Module):
        def __init__(self):
            self.out = open("metrics.csv", "w")

        @tf.function
        def step(self, x):
            logging.getLogger("a")
            log.info("x %s", x)
            sys.stdout.write(str(x))
            fh = open("a.txt", "w")
            fh.write(f"{x}")
            self.out.write("%s,2\\n" % tf.reduce_sum(x))
            return x
    """
    assert lines("TFL108", src) == [14, 15, 17, 18]


def test_tfl108_static_facts_and_configuration_are_not_reported():
    src = """
    import logging
    import sys
    import tensorflow as tf

    @tf.function
    def step(x, mode="train"):
        logging.info("tracing %s: shape %s dtype %s rank %d", mode, x.shape, x.dtype, len(x.shape))
        logging.info("batch size %d", int(x.shape[0]))
        sys.stdout.write("traced\\n")
        with open("trace.log", "a") as fh:
            fh.write(str(x.shape))
        return x
    """
    assert lines("TFL108", src) == []


def test_tfl108_graph_io_is_fine():
    src = """
    import tensorflow as tf
    writer = tf.summary.create_file_writer("logs")
    @tf.function
    def f(x, step):
        ta = tf.TensorArray(tf.float32, size=1)
        ta = ta.write(0, x)
        with writer.as_default():
            tf.summary.scalar("x", x, step=step)
            writer.flush()
        tf.io.write_file("out", tf.strings.as_string(x))
        tf.print(x, output_stream="file://out.txt")
        return ta.stack()
    """
    assert lines("TFL108", src) == []


def test_side_effect_rules_silent_in_eager_code():
    src = """
    import logging, random, time
    import numpy as np
    import tensorflow as tf
    seen = []
    count = 0
    def eager(x):
        global count
        count += 1
        seen.append(x)
        logging.info("x")
        v = tf.Variable(1.0)
        return float(tf.reduce_sum(x)) + random.random() + np.random.rand() + time.time() + v.numpy()
    """
    for code in ("TFL102", "TFL103", "TFL104", "TFL105", "TFL106", "TFL107", "TFL108"):
        assert lines(code, src) == [], code


def test_tfl108_one_off_structure_warnings_are_not_reported():
    src = """
    import logging
    import tensorflow as tf

    class Seq(tf.keras.layers.Layer):
        def __init__(self, legacy=False):
            super().__init__()
            self.legacy = legacy

        def call(self, inputs):
            if self.legacy:
                logging.warning("legacy input handling for %s", type(inputs))
            loss = tf.reduce_mean(inputs)
            if loss > 10:
                logging.warning("large loss")
            logging.warning("value %s", loss)
            logging.info("called")
            self._warn("x")
            return inputs

        def _warn(self, msg):
            if self.legacy:
                self._say(msg)

        def _say(self, msg):
            return logging.warning(msg)
    """
    # only the line that logs a tensor's value: the others say the same thing once per trace
    assert lines("TFL108", src) == [16]


def test_tfl108_structure_warning_under_a_python_condition_is_not_reported():
    # tensorflow/python/keras/engine/sequential.py: warned once, by design, naming the inputs
    src = """
    import logging
    import tensorflow as tf

    class Seq(tf.keras.Model):
        def call(self, inputs):
            if not tf.is_tensor(inputs):
                logging.warning("a Sequential model got a %s input: %s" % (type(inputs), inputs))
            if tf.reduce_sum(inputs) > 0:
                logging.warning("positive: %s", inputs)
            return inputs
    """
    assert lines("TFL108", src) == [10]


def test_tfl105_clock_into_tensorflow_python_helpers_is_python_work():
    # tensorflow/python/checkpoint/functional_saver.py times its sharding callback this way
    src = """
    import math
    import time
    import tensorflow as tf
    from tensorflow.python.checkpoint import metrics
    from tensorflow.python.ops import math_ops

    @tf.function
    def save(x):
        start = time.time() * 1e6
        shards = [x]
        end = time.time() * 1e6
        metrics.AddShardingCallbackDuration(callback_duration=max(1, math.ceil(end - start)))
        return shards

    @tf.function
    def stamp(x):
        now = time.time()
        return math_ops.add(x, now)
    """
    assert lines("TFL105", src) == [18]


def test_tfl102_side_channel_of_an_explicit_trace_is_not_reported():
    # official/nlp/tools/export_tfhub_lib_test.py: shapes captured by get_concrete_function
    src = """
    import tensorflow as tf

    def result_shapes(fn, *args):
        container = [None]

        @tf.function
        def wrapper(*args):
            result = fn(*args)
            container[0] = tf.nest.map_structure(lambda x: x.shape.as_list(), result)
            return result

        wrapper.get_concrete_function(*args)
        return container[0]

    def counted(ds):
        counts = {"n": 0}

        @tf.function
        def step(x):
            counts["n"] += 1
            return x

        step.get_concrete_function(tf.TensorSpec([]))
        for x in ds:
            step(x)
    """
    assert lines("TFL102", src) == [21]


def test_tfl102_container_and_tf_function_made_together_and_traced_once():
    # tensorflow/python/ops/parallel_for/pfor.py: a while_loop body reports static facts of
    # its trace through lists of the enclosing call, which makes a fresh tf.function each time
    src = """
    import tensorflow as tf

    def convert(n):
        stacked = [None]
        mismatched = []

        def body(i):
            stacked[0] = i.shape.rank
            mismatched[:] = [0]
            return i + 1

        @tf.function
        def while_fn():
            return tf.while_loop(lambda i: i < n, body, [tf.constant(0)])

        _ = while_fn.get_concrete_function()
        return while_fn(), stacked[0]

    def looped(ds):
        seen = []

        def body(i):
            seen.append(i)
            return i + 1

        @tf.function
        def run(x):
            return tf.while_loop(lambda i: i < x, body, [tf.constant(0)])

        for x in ds:
            run(x)
    """
    assert lines("TFL102", src) == [24]


def test_tensor_parameters_exclude_python_flags_passed_by_callers():
    src = """
    import logging
    import tensorflow as tf

    @tf.function
    def step(x, training, scale=2.0):
        logging.info("training=%s scale=%s", training, scale)
        if bool(training):
            x = x * scale
        logging.info("x=%s", x)
        return x

    step(tf.ones([2]), True)
    step(tf.ones([2]), training=False)
    """
    assert lines("TFL108", src) == [10]
    assert lines("TFL107", src) == []


def test_tfl107_casts_in_keras2_layers_run_under_autograph():
    # tf_keras (Keras 2) wraps `call` with AutoGraph: int()/float() become casts there
    src = """
    import tensorflow as tf
    import tf_keras

    class Crop(tf_keras.layers.Layer):
        def call(self, inputs):
            n = int(tf.shape(inputs)[0])
            flag = bool(inputs[0, 0] > 0)
            return inputs[: n // 2]
    """
    assert lines("TFL107", src) == [8]
