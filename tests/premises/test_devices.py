"""Premises of the device and memory rules (TFL501-TFL503), shown on TensorFlow 2.21.

TFL501 (soft-device-placement) is retired: its premise does not hold (soft placement is on by
default, so turning it on changes nothing); the test below is the evidence and keeps it retired.
Device configuration must happen before TensorFlow starts its runtime, so those programs run in
fresh interpreters.
"""

from __future__ import annotations

import pytest

from tests.premises._probe import codes, run, run_isolated, run_isolated_many

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.timeout(300)


# -- TFL501 (retired) ---------------------------------------------------------------------

SOFT_TEMPLATE = """
import tensorflow as tf
{setting}
with tf.device("/GPU:0"):  # no GPU on this machine
    x = tf.constant([1.0]) + 1.0
RESULT = [tf.config.get_soft_device_placement(), x.device.rsplit(":", 2)[-2]]
"""


def test_tfl501_soft_placement_is_already_the_default_so_the_rule_is_retired():
    default = SOFT_TEMPLATE.format(setting="")
    explicit = SOFT_TEMPLATE.format(setting="tf.config.set_soft_device_placement(True)")
    strict = SOFT_TEMPLATE.format(setting="tf.config.set_soft_device_placement(False)")
    # One interpreter, in this order: each program sets the placement it is about.
    got = run_isolated({"default": default, "explicit": explicit, "strict": strict})
    # Turning soft placement on changes nothing: it is on, and the op falls back to the CPU.
    assert got["default"] == got["explicit"] == {"result": [True, "CPU"]}, got
    # Only turning it off changes behaviour (the misplaced op then fails loudly).
    assert "error" in got["strict"] and "GPU" in got["strict"]["error"], got["strict"]
    assert "TFL501" not in codes(explicit)
    from tflint.rules import RETIRED, get_rule

    assert "TFL501" in RETIRED and get_rule("TFL501") is None


# -- TFL502 -------------------------------------------------------------------------------

CONFIG_502 = """
import tensorflow as tf
{before}
cpus = tf.config.list_physical_devices("CPU")
try:
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    outcome = "configured"
except RuntimeError as e:
    outcome = "RuntimeError: " + str(e)
{after}
RESULT = [outcome, len(tf.config.list_logical_devices("CPU"))]
"""


def test_tfl502_device_configuration_after_the_first_tensor_is_rejected():
    bad = CONFIG_502.format(before="warmup = tf.constant([1.0])", after="")
    good = CONFIG_502.format(before="", after="warmup = tf.constant([1.0])")
    # reading the version string starts nothing (NVIDIA's BERT pretraining asserts it first)
    version = CONFIG_502.format(before="assert tf.version.VERSION.startswith('2.'), tf.__version__", after="")
    got = run_isolated_many([({"bad": bad}, 1), ({"good": good}, 1), ({"version": version}, 1)])
    got_bad, got_good = got[0]["bad"]["result"], got[1]["good"]["result"]
    assert got_bad[0].startswith("RuntimeError") and got_bad[1] == 1, got_bad  # swallowed: one device
    assert got_good == ["configured", 2]
    assert got[2]["version"]["result"] == ["configured", 2], got[2]
    assert "TFL502" in codes(bad) and "TFL502" not in codes(good) and "TFL502" not in codes(version)


# -- TFL503 -------------------------------------------------------------------------------

ACCUMULATE_503 = """
import weakref
import tensorflow as tf

w = tf.Variable(tf.ones([64]))

@tf.function
def train_step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(x * w)
    w.assign_sub(0.001 * tape.gradient(loss, w))
    return loss

# a loop whose length the code does not state (a bounded `range(n)` of per-epoch values is
# not a finding): 300 steps here
data = tf.data.Dataset.from_tensors(tf.ones([64])).repeat(300)
history = []
refs = []
for x in data:
    loss = train_step(x)
    refs.append(weakref.ref(loss))
    history.append({keep})
del loss
RESULT = sum(r() is not None for r in refs)
"""


def test_tfl503_tensors_appended_every_step_stay_alive():
    bad = ACCUMULATE_503.format(keep="loss")
    good = ACCUMULATE_503.format(keep="float(loss)")
    assert run(bad)["RESULT"] == 300  # one live tensor per step, for as long as the list lives
    assert run(good)["RESULT"] <= 1  # at most the step's result still being referenced
    assert "TFL503" in codes(bad) and "TFL503" not in codes(good)
