"""TFL5xx on realistic code, and the runtime facts TFL502 rests on, checked with real TensorFlow."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.rule_harness import run_rules
from tflint.rules.devices import (
    DeviceConfigAfterInit,
    TensorsAccumulatedInLoop,
)


def lines(src: str, rule) -> list[int]:
    return [f.line for f in run_rules(textwrap.dedent(src), [rule])]


def test_tfl501_is_retired_and_never_reported():
    from tflint.rules import RETIRED, get_rule, resolve, rule_codes

    src = """
    import tensorflow as tf
    tf.config.set_soft_device_placement(True)
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    """
    assert "TFL501" in RETIRED and get_rule("TFL501") is None
    assert "TFL501" not in rule_codes() and "TFL501" not in resolve(select=["TFL5"])
    assert [f for f in run_rules(textwrap.dedent(src)) if f.code == "TFL501"] == []


def test_tfl502_order_within_module_and_function():
    src = """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    tf.config.experimental.set_memory_growth(gpus[0], True)
    tf.random.set_seed(1)
    layer = tf.keras.layers.Dense(3)
    x = tf.ones([2, 2])
    tf.config.set_visible_devices(gpus[:1], "GPU")

    def later():
        tf.config.set_logical_device_configuration(gpus[0], [])
    """
    # Only the call after `tf.ones`; `later()` is never called after an op.
    assert lines(src, DeviceConfigAfterInit) == [9]


def test_tfl502_function_called_after_module_level_ops_and_context_reset():
    src = textwrap.dedent(
        """
        import tensorflow as tf
        from tensorflow.python.eager import context

        def setup():
            tf.config.set_visible_devices([], "GPU")

        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
        setup()

        def reconfigure():
            tf.zeros([1])
            context._reset_context()
            tf.config.set_logical_device_configuration(cpus[0], [])
        """
    )
    (f,) = run_rules(src, [DeviceConfigAfterInit])
    assert f.line == 6 and "line 8" in f.message


def test_tfl503_tensor_sources_and_conversions():
    src = """
    import tensorflow as tf

    w = tf.Variable(1.0)

    @tf.function
    def train_step(x):
        w.assign_sub(0.01 * tf.reduce_mean(x))
        return tf.reduce_sum(x), tf.reduce_mean(x)

    metric = tf.keras.metrics.Mean()

    def train(ds):
        losses, accs, floats, per_epoch = [], [], [], []
        for x in ds:
            loss, acc = train_step(x)
            losses.append(loss)
            accs.append(acc.numpy())
            floats.append(float(loss))
            per_epoch.append(metric.result())
            batch_losses = []
            batch_losses.append(loss)
        return losses
    """
    assert lines(src, TensorsAccumulatedInLoop) == [17, 20]


def test_tfl503_not_outside_training_loops_or_in_traced_code():
    src = """
    import tensorflow as tf

    def collect(ds):
        out = []
        for x in ds:
            out.append(tf.reduce_sum(x))
        return out

    @tf.function
    def step(xs):
        acc = []
        for x in xs:
            acc.append(x * 2)
            tf.print(x)
        return acc
    """
    assert lines(src, TensorsAccumulatedInLoop) == []


def test_runtime_facts_behind_tfl502():
    """Configuring devices after the first tensor raises; querying the strategy does not init."""
    script = textwrap.dedent(
        """
        import tensorflow as tf
        cpus = tf.config.list_physical_devices("CPU")
        strategy = tf.distribute.get_strategy()
        tf.random.set_seed(0)
        tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
        print("configured-before")
        x = tf.constant(1.0)
        try:
            tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()])
            print("configured-after")
        except RuntimeError:
            print("rejected-after")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.split()
    assert out == ["configured-before", "rejected-after"]
