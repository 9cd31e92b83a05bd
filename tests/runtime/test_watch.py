"""watch()/ProfileSession: lifecycle, exact restoration, self-disabling hooks, report shape."""

from __future__ import annotations

import json
import sys

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tensorflow.python.data.ops import dataset_ops, iterator_ops  # noqa: E402
from tensorflow.python.eager import backprop, context, execute  # noqa: E402
from tensorflow.python.eager.polymorphic_function import polymorphic_function, transform  # noqa: E402
from keras.src.optimizers import base_optimizer  # noqa: E402

from tflint.profiler.report import SIGNAL_KINDS, Report  # noqa: E402
from tflint.runtime import KerasCallback, ProfileSession, watch  # noqa: E402

HERE = __file__


def here() -> int:
    return sys._getframe(1).f_lineno


def snapshot():
    return {
        "tape": dict(backprop.GradientTape.__dict__),
        "function": dict(polymorphic_function.Function.__dict__),
        "iterator": dict(iterator_ops.OwnedIterator.__dict__),
        "dataset_init": dataset_ops.DatasetV2.__dict__["__init__"],
        "optimizer": dict(base_optimizer.BaseOptimizer.__dict__),
        "callbacks": list(transform.CONCRETE_FUNCTION_CALLBACKS),
        "execute": execute.execute,
        "op_callbacks": list(context.context().op_callbacks),
    }


@tf.function
def square(x, n):
    return x * x + n


def test_enter_leave_many_times_restores_tensorflow_exactly_and_accumulates():
    before = snapshot()
    s = watch()
    for i in range(3):
        with s:
            assert snapshot() != before
            square(tf.ones([2]), i)  # a Python int: retraces on every call
        assert snapshot() == before
    rep = s.report()
    assert rep.metrics["retraces"] == 2
    assert isinstance(s, ProfileSession)


def test_nested_watch_is_a_clear_error_and_the_outer_session_survives():
    before = snapshot()
    with watch() as outer:
        with pytest.raises(RuntimeError, match="already active"):
            with watch():
                pass
        with pytest.raises(RuntimeError, match="already active"):
            with outer:
                pass
        assert outer.status()["steps"] == 0
    assert snapshot() == before


def test_unknown_signal_kind_is_rejected():
    with pytest.raises(ValueError, match="unknown signal kind"):
        watch(signals={"retrace", "nope"})


def test_signal_groups_name_their_kinds():
    health = {"nan-inf", "dead-parameter", "exploding-gradient", "vanishing-gradient", "loss-stall",
              "loss-broadcast"}
    assert watch(signals="retrace,training-health").signals == {"retrace", *health}
    assert watch(signals=["all"]).signals == watch().signals


def test_user_exception_passes_through_and_hooks_are_removed():
    before = snapshot()
    with pytest.raises(ZeroDivisionError):
        with watch():
            square(tf.ones([2]), 0)
            1 / 0  # noqa: B018
    assert snapshot() == before


def test_failing_hook_disables_itself_and_never_breaks_the_user_call():
    w = tf.Variable(1.0)
    unused = tf.Variable(2.0)
    with watch(signals={"none-gradient"}) as s:
        def broken(*args, **kwargs):
            raise RuntimeError("store exploded")

        s.store.record = broken  # tflint's own code fails inside TensorFlow's call path
        with tf.GradientTape() as tape:
            loss = w * 3.0
        grads = tape.gradient(loss, [w, unused])
        assert float(grads[0]) == 3.0 and grads[1] is None  # original result, unchanged
        with tf.GradientTape() as tape:
            loss = w * 4.0
        assert float(tape.gradient(loss, w)) == 4.0
    rep = s.report()
    hook = rep.metrics["hooks"]["none-gradient"]
    assert hook["status"] == "failed" and "store exploded" in hook["reason"]


def test_set_enabled_restores_and_reinstalls_mid_run():
    before = snapshot()
    with watch() as s:
        for i in range(10):
            square(tf.ones([2]), 0)
            if i == 4:
                s.set_enabled(False)
                assert snapshot() == before
                assert not s.enabled
        steps_off = s.status()["steps"]
        s.set_enabled(True)
        assert snapshot() != before
        for _ in range(5):
            square(tf.ones([2]), 0)
    assert steps_off == 5
    assert s.status()["steps"] == 10


def test_status_live_callback_and_report_json_shape():
    seen = []
    with watch(live=seen.append) as s:
        for _ in range(20):
            square(tf.ones([2]), 1)
        st = s.status()
    assert set(st) == {"steps", "last_step_time_s", "retraces"}
    assert st["steps"] == 20 and st["last_step_time_s"] is not None and st["retraces"] == 0
    assert seen and set(seen[0]) == {"steps", "last_step_time_s", "retraces"}
    rep = s.report(script="train.py", argv=["--x"], exit_code=0, duration_s=1.5)
    d = json.loads(rep.to_json())
    assert d["script"] == "train.py" and d["argv"] == ["--x"] and d["exit_code"] == 0 and d["duration_s"] == 1.5
    assert d["steps"] == 20
    m = d["metrics"]
    for key in ("steps", "step_time_s", "input_wait_share", "host_rss_bytes", "device_memory_bytes", "retraces", "gpu", "hooks"):
        assert key in m, key
    assert len(m["step_time_s"]) <= 200 and all(len(p) == 2 for p in m["step_time_s"])
    assert set(m["input_wait_share"]) == {"overall", "series"}
    assert m["gpu"]["available"] in (True, False)
    for kind in SIGNAL_KINDS:
        assert m["hooks"][kind]["status"] in ("ok", "unavailable", "failed")
    assert Report.from_json(rep.to_json()).to_dict() == rep.to_dict()
    assert d["signals"] == []  # clean code


def test_keras_callback_owns_a_session_and_feeds_steps():
    before = snapshot()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    cb = KerasCallback()
    x = tf.random.normal([64, 4])
    y = tf.random.normal([64, 1])
    model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[cb])
    assert snapshot() == before
    rep = cb.report
    assert rep.steps == 8
    assert rep.metrics["step_source"]["kind"] == "keras"
    assert rep.signals == []


def test_keras_callback_inside_watch_reuses_the_active_session():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = tf.random.normal([32, 4])
    y = tf.random.normal([32, 1])
    with watch() as s:
        cb = KerasCallback()
        model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
        assert cb.session is s
    assert s.status()["steps"] == 4


def test_a_step_traced_before_the_session_is_said_to_be_unmeasured_not_healthy():
    """A notebook: a model fitted in one cell (a watch() session) and again in the next, and a
    custom step traced in one session and run in the next. The second session's step carries the
    first one's probes, not its own: training health (and fit's in-graph input wait) was not
    measured there, which the report says instead of "OK". fit's train function is still a
    training loop of the second session."""
    from tests.training_steps import dense_regression
    from tflint.profiler.aggregate import UNTRACED_REASON

    x, y, model, step = dense_regression(0.0)

    def custom():
        for i in range(0, 640, 32):
            step(x[i:i + 32], y[i:i + 32])

    kinds = []
    for train in (lambda: model.fit(x, y, batch_size=32, epochs=8, verbose=0), lambda: [custom() for _ in range(8)]):
        reports = []
        for _ in range(2):
            with watch() as s:
                train()
            reports.append(s.report())
        first, second = reports
        assert first.metrics["hooks"]["loss-stall"]["status"] == "ok"
        assert {x.kind for x in first.signals} >= {"dead-parameter"}
        hooks = second.metrics["hooks"]
        for kind in ("nan-inf", "dead-parameter", "loss-stall", "exploding-gradient"):
            assert hooks[kind] == {"status": "unavailable", "reason": UNTRACED_REASON}, hooks[kind]
        assert second.metrics["steps"] == 160
        assert [x.kind for x in second.signals if x.kind != "retrace"] == []
        kinds.append(second.metrics["loops"][0]["kind"])
    assert kinds == ["keras", "function"]  # fit's train function is its loop in the second session too
