"""TFL301-TFL307: where findings are reported, what the messages name, and — run for real with
TensorFlow — that what the rules flag is what TensorFlow actually gets wrong."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.rule_harness import run_rules
from tflint.rules import get_rule

ROOT = Path(__file__).resolve().parents[1]


def findings(src: str, code: str | None = None):
    src = textwrap.dedent(src)
    rules = [get_rule(code)] if code else [get_rule(f"TFL30{i}") for i in range(1, 8)]
    return [(f.code, f.line, f.col, f.message) for f in run_rules(src, rules)]


def test_all_gradient_rules_are_registered_as_errors():
    for i in range(1, 8):
        rule = get_rule(f"TFL30{i}")
        assert rule is not None, f"TFL30{i} missing"
        assert rule.severity.value == "error"


def test_tfl301_reported_at_gradient_call_naming_the_lines():
    got = findings(
        """
        import tensorflow as tf
        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(x ** 2)
        g = tape.gradient(y, x)
        """,
        "TFL301",
    )
    assert len(got) == 1
    code, line, col, msg = got[0]
    assert (line, col) == (6, 4)
    assert "line 3" in msg and "line 4" in msg and "tape.watch(x)" in msg


def test_tfl301_silent_for_variables_watched_tensors_and_parameters():
    assert not findings(
        """
        import tensorflow as tf
        def f(x, v, model):
            w = tf.Variable(1.0)
            c = tf.constant(2.0)
            with tf.GradientTape() as tape:
                tape.watch(c)
                y = w * c * x * v + tf.reduce_sum(model(x))
            return tape.gradient(y, [w, c, x, v, model.trainable_variables])
        """,
        "TFL301",
    )


def test_tfl302_variants_name_the_other_line():
    src = """
        import tensorflow as tf
        mse = tf.keras.losses.MeanSquaredError()
        def before(model, x, y):
            pred = model(x)
            with tf.GradientTape() as tape:
                loss = mse(y, pred)
            return tape.gradient(loss, model.trainable_variables)
        def after(model, x, y):
            with tf.GradientTape() as tape:
                pred = model(x)
            loss = mse(y, pred)
            return tape.gradient(loss, model.trainable_variables)
        """
    got = findings(src, "TFL302")
    assert [(line, col) for _, line, col, _ in got] == [(8, 11), (13, 11)]
    assert "line 5" in got[0][3] and "`pred`" in got[0][3]
    assert "line 12" in got[1][3] and "lines 10-11" in got[1][3]


def test_tfl302_silent_when_gradient_is_on_forward_output():
    assert not findings(
        """
        import tensorflow as tf
        def f(model, x):
            feats = model.backbone(x)
            with tf.GradientTape() as tape:
                tape.watch(feats)
                score = tf.reduce_sum(model.head(feats))
            return tape.gradient(score, feats)
        """,
        "TFL302",
    )


def test_tfl303_reported_at_the_cut_with_gradient_line():
    got = findings(
        """
        import tensorflow as tf
        def f(model, x, y):
            with tf.GradientTape() as tape:
                logits = model(x)
                pred = tf.cast(tf.math.argmax(logits, -1), tf.float32)
                loss = tf.reduce_mean((pred - y) ** 2)
            return tape.gradient(loss, model.trainable_variables)
        """,
        "TFL303",
    )
    assert len(got) == 1
    _, line, col, msg = got[0]
    assert (line, col) == (6, 23)
    assert "line 8" in msg and "argmax" in msg


def test_tfl303_silent_for_deliberate_baselines():
    assert not findings(
        """
        import tensorflow as tf
        def f(model, value_net, x, y, returns):
            with tf.GradientTape() as tape:
                logits = model(x)
                baseline = tf.stop_gradient(value_net(x))
                ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
                loss = tf.reduce_mean(ce * (returns - baseline)) + tf.stop_gradient(tf.reduce_mean(baseline))
            return tape.gradient(loss, model.trainable_variables)
        """,
        "TFL303",
    )


def test_tfl304_second_call_reported_with_first_line_and_branches_are_not_repeats():
    got = findings(
        """
        import tensorflow as tf
        def f(model, x, which):
            with tf.GradientTape() as tape:
                a, b = model(x)
            if which:
                ga = tape.gradient(a, model.trainable_variables)
            else:
                ga = tape.gradient(b, model.trainable_variables)
            gb = tape.gradient(b, model.trainable_variables)
            return ga, gb
        """,
        "TFL304",
    )
    assert [(line, msg.count("line 7") + msg.count("line 9")) for _, line, _, msg in got] == [(10, 1)]


def test_tfl305_reported_at_tape_constructor():
    got = findings(
        """
        import tensorflow as tf
        class Trainer:
            def __init__(self):
                self.tapes = []
            def step(self, model, x):
                with tf.GradientTape(persistent=True) as tape:
                    y = model(x)
                self.tapes.append(tape)
                return tape.gradient(y, model.trainable_variables)
        """,
        "TFL305",
    )
    assert [(line, col) for _, line, col, _ in got] == [(7, 13)]
    assert "self.tapes" in got[0][3] and "line 10" in got[0][3]


def test_tfl306_reported_at_read_naming_constructor_and_use():
    got = findings(
        """
        import tensorflow as tf
        model = tf.keras.Sequential([tf.keras.layers.Dense(4), tf.keras.layers.Dense(1)])
        opt = tf.keras.optimizers.SGD()
        params = model.trainable_variables
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x) - y) ** 2)
            opt.apply_gradients(zip(tape.gradient(loss, params), params))
        """,
        "TFL306",
    )
    assert [(line, col) for _, line, col, _ in got] == [(5, 9)]
    assert "line 3" in got[0][3]


def test_tfl306_silent_once_model_is_called_or_fitted():
    assert not findings(
        """
        import tensorflow as tf
        import numpy as np
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        model.fit(np.zeros((4, 3)), np.zeros((4, 1)), verbose=0)
        opt = tf.keras.optimizers.SGD()
        opt.build(model.trainable_variables)
        """,
        "TFL306",
    )


def test_tfl307_reported_at_apply_gradients_naming_the_gradient_line():
    got = findings(
        """
        import tensorflow as tf
        def f(enc, dec, opt, x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((dec(enc(x)) - x) ** 2)
            enc_vars = enc.trainable_variables
            grads = tape.gradient(loss, enc_vars)
            opt.apply_gradients(list(zip(grads, dec.trainable_variables)))
        """,
        "TFL307",
    )
    assert [(line, col) for _, line, col, _ in got] == [(8, 4)]
    assert "line 7" in got[0][3]


def test_no_findings_and_no_crash_on_unusual_code():
    src = """
        import tensorflow as tf
        tape = None
        async def f(model, xs):
            async with tf.GradientTape() as t:
                y = [await model(x) async for x in xs]
            match y:
                case [a, *rest]:
                    return t.gradient(a, model.trainable_variables)
        def g(*args, **kwargs):
            with tf.GradientTape() as (t1):
                z = (lambda q: q)(args)[0]
            return t1.gradient(target=z, sources=kwargs["v"])
        """
    findings(src)  # must not raise


# ---------------------------------------------------------------------------------------------
# Ground truth from TensorFlow: every snippet is checked statically and run for real; the static
# finding must agree with what TensorFlow does (`BROKEN`).

SNIPPETS = {
    "unwatched_constant": (
        "TFL301",
        """
        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(x ** 2)
        g = tape.gradient(y, x)
        BROKEN = g is None
        """,
    ),
    "watched_constant": (
        None,
        """
        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(x ** 2)
        g = tape.gradient(y, x)
        BROKEN = g is None
        """,
    ),
    "forward_pass_before_tape": (
        "TFL302",
        """
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        x = tf.ones((4, 3))
        pred = model(x)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(pred))
        grads = tape.gradient(loss, model.trainable_variables)
        BROKEN = all(g is None for g in grads)
        """,
    ),
    "loss_after_tape": (
        "TFL302",
        """
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        with tf.GradientTape() as tape:
            pred = model(tf.ones((4, 3)))
        loss = tf.reduce_mean(tf.square(pred))
        grads = tape.gradient(loss, model.trainable_variables)
        BROKEN = all(g is None for g in grads)
        """,
    ),
    "forward_inside_tape": (
        None,
        """
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        with tf.GradientTape() as tape:
            pred = model(tf.ones((4, 3)))
            loss = tf.reduce_mean(tf.square(pred))
        grads = tape.gradient(loss, model.trainable_variables)
        BROKEN = any(g is None for g in grads)
        """,
    ),
    "argmax_loss": (
        "TFL303",
        """
        w = tf.Variable([[0.5, -0.2], [0.1, 0.3]])
        with tf.GradientTape() as tape:
            logits = tf.matmul(tf.ones((3, 2)), w)
            pred = tf.cast(tf.argmax(logits, axis=-1), tf.float32)
            loss = tf.reduce_mean(pred)
        BROKEN = tape.gradient(loss, w) is None
        """,
    ),
    "int_cast_loss": (
        "TFL303",
        """
        w = tf.Variable([1.5, 2.5])
        with tf.GradientTape() as tape:
            n = tf.cast(w * 3.0, tf.int32)
            loss = tf.reduce_sum(tf.cast(n, tf.float32))
        BROKEN = tape.gradient(loss, w) is None
        """,
    ),
    "stop_gradient_on_path": (
        "TFL303",
        """
        w = tf.Variable(2.0)
        with tf.GradientTape() as tape:
            h = tf.stop_gradient(w * 3.0)
            loss = h * h
        BROKEN = tape.gradient(loss, w) is None
        """,
    ),
    "stop_gradient_baseline": (
        None,
        """
        w = tf.Variable(2.0)
        b = tf.Variable(1.0)
        with tf.GradientTape() as tape:
            loss = w * w - tf.stop_gradient(b * 3.0)
        BROKEN = tape.gradient(loss, w) is None
        """,
    ),
    "straight_through": (
        None,
        """
        w = tf.Variable([0.4, 1.6])
        with tf.GradientTape() as tape:
            h = w * 1.0
            q = h + tf.stop_gradient(tf.round(h) - h)
            loss = tf.reduce_sum(q * q)
        BROKEN = tape.gradient(loss, w) is None
        """,
    ),
    "second_gradient_call": (
        "TFL304",
        """
        w = tf.Variable(2.0)
        with tf.GradientTape() as tape:
            a = w * w
            b = w * 3.0
        try:
            tape.gradient(a, w)
            tape.gradient(b, w)
            BROKEN = False
        except RuntimeError:
            BROKEN = True
        """,
    ),
    "second_gradient_call_persistent": (
        None,
        """
        w = tf.Variable(2.0)
        with tf.GradientTape(persistent=True) as tape:
            a = w * w
            b = w * 3.0
        try:
            tape.gradient(a, w)
            tape.gradient(b, w)
            BROKEN = False
        except RuntimeError:
            BROKEN = True
        del tape
        """,
    ),
    "variables_before_build": (
        "TFL306",
        """
        class Net(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.d = tf.keras.layers.Dense(2)
            def call(self, x):
                return self.d(x)
        net = Net()
        opt = tf.keras.optimizers.SGD(0.1)
        params = net.trainable_variables
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(net(tf.ones((1, 3))))
        grads = tape.gradient(loss, params)
        BROKEN = len(params) == 0
        """,
    ),
    "variables_after_input": (
        None,
        """
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        opt = tf.keras.optimizers.SGD(0.1)
        params = model.trainable_variables
        opt.build(params)
        BROKEN = len(params) == 0
        """,
    ),
    "applied_to_other_order": (
        "TFL307",
        """
        w = tf.Variable(1.0)
        b = tf.Variable(10.0)
        opt = tf.keras.optimizers.SGD(1.0)
        with tf.GradientTape() as tape:
            loss = w * 5.0 + b * 0.0
        grads = tape.gradient(loss, [w, b])
        opt.apply_gradients(zip(grads, [b, w]))
        BROKEN = float(w.numpy()) == 1.0
        """,
    ),
}


@pytest.fixture(scope="module")
def runtime_results():
    program = ["import json, tensorflow as tf", "out = {}"]
    for name, (_, body) in SNIPPETS.items():
        code = textwrap.dedent(body)
        program.append(
            f"def run_{name}():\n" + textwrap.indent(code, "    ") + "    return BROKEN\n"
            f"out[{name!r}] = bool(run_{name}())"
        )
    program.append("print('RESULT ' + json.dumps(out))")
    proc = subprocess.run(
        [sys.executable, "-c", "\n".join(program)],
        capture_output=True,
        text=True,
        timeout=240,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("name", list(SNIPPETS))
def test_static_finding_agrees_with_tensorflow(name, runtime_results):
    code, body = SNIPPETS[name]
    src = "import tensorflow as tf\n" + textwrap.dedent(body)
    got = {c for c, *_ in findings(src)}
    broken = runtime_results[name]
    assert broken is (code is not None), f"{name}: TensorFlow says broken={broken}"
    assert got == ({code} if code else set()), f"{name}: static findings {got}"


def test_tfl302_silent_on_code_in_a_reentered_tape_and_still_fires_after_it():
    reentered = """
        import tensorflow as tf
        def step(model, x, y):
            with tf.GradientTape() as tape:
                preds = model(x)
            with tape:
                loss = tf.reduce_mean(tf.square(preds - y))
            return tape.gradient(loss, model.trainable_variables)
        """
    assert findings(reentered) == []
    after = """
        import tensorflow as tf
        def step(model, x, y):
            with tf.GradientTape() as tape:
                preds = model(x)
            with tape:
                h = preds * 2.0
            loss = tf.reduce_mean(tf.square(h - y))
            return tape.gradient(loss, model.trainable_variables)
        """
    got = findings(after)
    assert [(c, line) for c, line, *_ in got] == [("TFL302", 9)]
    assert "lines 4-7" in got[0][3]  # both blocks of the tape
