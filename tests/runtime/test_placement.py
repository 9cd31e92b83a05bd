"""Soft-placement fallbacks on a CPU-only machine: any op pinned to /GPU:0 runs on the CPU."""

from __future__ import annotations

import sys

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tflint.runtime import watch  # noqa: E402

HERE = __file__

pytestmark = pytest.mark.skipif(bool(tf.config.list_physical_devices("GPU")), reason="needs a machine without a GPU")


def here() -> int:
    return sys._getframe(1).f_lineno


def line_of(marker: str) -> int:
    with open(HERE, encoding="utf-8") as fh:
        return next(i for i, text in enumerate(fh, 1) if marker in text and "line_of" not in text)


def test_eager_op_pinned_to_gpu_falls_back_to_cpu():
    a = tf.ones([4, 4])
    with watch(signals={"soft-placement"}) as s:
        with tf.device("/GPU:0"):
            line = here() + 1
            c = tf.matmul(a, a)
    assert c.device.endswith("CPU:0")
    sigs = s.report().signals_of("soft-placement")
    assert len(sigs) == 1
    sig = sigs[0]
    assert sig.details["ops"] == ["MatMul"]
    assert sig.details["requested"] == "GPU:0" and sig.details["actual"] == "CPU:0"
    assert sig.details["mechanisms"] == ["eager"]
    assert sig.location.file == HERE and sig.location.line == line
    assert "no GPU device" in sig.message


def test_tf_function_op_pinned_to_gpu_reported_once_with_body_line():
    @tf.function
    def f(a):
        with tf.device("/GPU:0"):
            b = tf.matmul(a, a)  # marker: pinned-matmul
        return b + 1.0

    with watch(signals={"soft-placement"}) as s:
        for _ in range(3):
            f(tf.ones([4, 4]))
    rep = s.report()
    sigs = rep.signals_of("soft-placement")
    assert len(sigs) == 1, [x.message for x in sigs]
    sig = sigs[0]
    assert sig.location.file == HERE and sig.location.line == line_of("marker: pinned-matmul")
    assert "MatMul" in sig.details["ops"]
    assert "inside a tf.function" in sig.message
    assert rep.metrics["placement"]["graph_nodes_checked"] > 0


def test_executed_graph_shows_assigned_device():
    @tf.function
    def g(a):
        with tf.device("/GPU:0"):
            return tf.reduce_sum(a * 3.0)

    with watch(signals={"soft-placement"}) as s:
        g(tf.ones([3]))
        g(tf.ones([3]))
    pl = s.placement
    executed = [r for r in s.store.records_of("soft-placement") if r["how"] == "executed"]
    assert executed, "graph collection should see the assigned device"
    assert all(r["requested"] == "GPU:0" and r["actual"] == "CPU:0" for r in executed)
    assert pl.summary()["graph_collection"] == "on" or pl.graph_nodes_checked > 0


def test_clean_code_and_op_callbacks_restored():
    from tensorflow.python.eager import context, execute

    exec_before = execute.execute
    with watch(signals={"soft-placement"}) as s:
        with tf.device("/CPU:0"):
            tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))

        @tf.function
        def h(x):
            return x + 1.0

        h(tf.ones([2]))
    assert s.report().signals_of("soft-placement") == []
    assert execute.execute is exec_before
    assert not context.context().op_callbacks
