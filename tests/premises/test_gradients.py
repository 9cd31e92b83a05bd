"""Premises of TFL301-TFL307, shown on real TensorFlow.

For each rule: a small program shows the misbehaviour the rule describes (run for real, with the
TensorFlow the project targets), the rule's "Use instead" removes it, tflint flags the first
program and not the second. A rule whose description was not what TensorFlow does was changed
to what it does (see each test).
"""

from __future__ import annotations

import textwrap

import pytest

from tests.premises._gradients_helpers import lint, run_programs


def _p(text: str) -> str:
    return textwrap.dedent(text).lstrip()


PROGRAMS = {
    # --- TFL301: gradient with respect to an unwatched tensor ---------------------------------
    "301_bad": _p("""
        import tensorflow as tf

        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(x ** 2)
        dy_dx = tape.gradient(y, x)
        SEEN["none"] = dy_dx is None
    """),
    "301_good": _p("""
        import tensorflow as tf

        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(x ** 2)
        dy_dx = tape.gradient(y, x)
        SEEN["none"] = dy_dx is None
        SEEN["value"] = dy_dx.numpy().tolist()
    """),
    # --- TFL302: target (or forward pass) computed outside the tape ----------------------------
    "302_bad": _p("""
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
        x = tf.ones([2, 3])
        y = tf.zeros([2, 1])
        preds = model(x, training=True)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(preds - y))
        grads = tape.gradient(loss, model.trainable_variables)
        SEEN["none"] = [g is None for g in grads]
    """),
    "302_good": _p("""
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
        x = tf.ones([2, 3])
        y = tf.zeros([2, 1])
        with tf.GradientTape() as tape:
            preds = model(x, training=True)
            loss = tf.reduce_mean(tf.square(preds - y))
        grads = tape.gradient(loss, model.trainable_variables)
        SEEN["none"] = [g is None for g in grads]
    """),
    # re-entering a tape resumes its recording: the loss computed in `with tape:` is connected
    "302_reentered": _p("""
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
        x = tf.ones([2, 3])
        y = tf.zeros([2, 1])
        with tf.GradientTape() as tape:
            preds = model(x, training=True)
        with tape:
            loss = tf.reduce_mean(tf.square(preds - y))
        grads = tape.gradient(loss, model.trainable_variables)
        SEEN["none"] = [g is None for g in grads]
    """),
    "302_reentered_assigned": _p("""
        import tensorflow as tf

        w = tf.Variable(2.0)
        tape = tf.GradientTape()
        with tape:
            h = w * w
        with tape:
            z = h * h
        g = tape.gradient(z, w)
        SEEN["none"] = g is None
        SEEN["value"] = float(g)
    """),
    # --- TFL303: a non-differentiable op on the only path ---------------------------------------
    "303_good": _p("""
        import tensorflow as tf

        w = tf.Variable([0.5, -0.5])
        with tf.GradientTape() as tape:
            h = w * 3.0
            loss = tf.reduce_sum(h ** 2)
        g = tape.gradient(loss, w)
        SEEN["none"] = g is None
        SEEN["value"] = g.numpy().tolist()
    """),
    # straight-through estimator: a path around the rounding
    "303_straight_through": _p("""
        import tensorflow as tf

        w = tf.Variable([0.5, -0.5])
        with tf.GradientTape() as tape:
            h = w * 3.0
            q = h + tf.stop_gradient(tf.round(h) - h)
            loss = tf.reduce_sum(q ** 2)
        g = tape.gradient(loss, w)
        SEEN["none"] = g is None
    """),
}

# TFL303's cutting operations: each line replaces `CUT` in the program below; what TensorFlow
# returns for the gradient.
_LOSS = "loss = tf.reduce_sum(h ** 2)"
CUTS = {
    "argmax": ("h = tf.cast(tf.argmax(w * 3.0), tf.float32)", _LOSS, "none"),
    "round": ("h = tf.round(w * 3.0)", _LOSS, "none"),
    "cast_int": ("h = tf.cast(tf.cast(w * 3.0, tf.int32), tf.float32)", _LOSS, "none"),
    "stop_gradient": ("h = tf.stop_gradient(w * 3.0)", _LOSS, "none"),
    "numpy_function": ("h = tf.numpy_function(lambda a: a * 2.0, [w * 3.0], tf.float32)", _LOSS, "none"),
    "float": ("h = tf.constant(float(tf.reduce_sum(w * 3.0)))", _LOSS, "none"),
    "sign": ("h = tf.sign(w * 3.0)", _LOSS, "zeros"),
    # leaving TensorFlow: None once converted back, AttributeError when the target is NumPy
    "numpy_method": ("h = (w * 3.0).numpy() * 2.0", _LOSS, "none"),
    "numpy_call": ("h = np.square(w * 3.0)", _LOSS, "none"),
    "numpy_target": ("h = (w * 3.0).numpy()", "loss = np.mean(h ** 2)", "raises"),
}
_CUT_PROGRAM = """
import numpy as np
import tensorflow as tf

w = tf.Variable([0.5, -0.5])
with tf.GradientTape() as tape:
    CUT
    LOSS
SEEN["outcome"] = "pending"
g = tape.gradient(loss, w)
SEEN["outcome"] = "none" if g is None else ("zeros" if not g.numpy().any() else "value")
"""
for _name, (_line, _loss, _want) in CUTS.items():
    PROGRAMS[f"303_{_name}"] = _CUT_PROGRAM.replace("CUT", _line).replace("LOSS", _loss).lstrip()

PROGRAMS.update({
    # --- TFL304: a non-persistent tape used twice -----------------------------------------------
    "304_bad": _p("""
        import tensorflow as tf

        x = tf.Variable(2.0)
        with tf.GradientTape() as tape:
            y = x * x
            z = y * x
        dy = tape.gradient(y, x)
        SEEN["first"] = float(dy)
        dz = tape.gradient(z, x)
        SEEN["second"] = float(dz)
    """),
    "304_good": _p("""
        import tensorflow as tf

        x = tf.Variable(2.0)
        with tf.GradientTape(persistent=True) as tape:
            y = x * x
            z = y * x
        dy = tape.gradient(y, x)
        SEEN["first"] = float(dy)
        dz = tape.gradient(z, x)
        SEEN["second"] = float(dz)
        del tape
    """),
    # --- TFL305: a persistent tape kept alive holds what it recorded ----------------------------
    "305_bad": _p("""
        import gc
        import weakref

        import tensorflow as tf

        class Trainer:
            def __init__(self):
                self.w = tf.Variable(tf.ones([100_000]))

            def step(self):
                with tf.GradientTape(persistent=True) as self.tape:
                    h = self.w * 2.0
                    y = tf.reduce_sum(h * h)
                SEEN["h"] = weakref.ref(h)
                return self.tape.gradient(y, self.w)

        trainer = Trainer()
        trainer.step()
        gc.collect()
        SEEN["alive"] = SEEN.pop("h")() is not None
    """),
    "305_good": _p("""
        import gc
        import weakref

        import tensorflow as tf

        class Trainer:
            def __init__(self):
                self.w = tf.Variable(tf.ones([100_000]))

            def step(self):
                with tf.GradientTape(persistent=True) as tape:
                    h = self.w * 2.0
                    y = tf.reduce_sum(h * h)
                SEEN["h"] = weakref.ref(h)
                g = tape.gradient(y, self.w)
                del tape
                return g

        trainer = Trainer()
        trainer.step()
        gc.collect()
        SEEN["alive"] = SEEN.pop("h")() is not None
    """),
    # --- TFL306: trainable_variables read before the model has variables ------------------------
    "306_bad": _p("""
        import tensorflow as tf
        from tensorflow import keras

        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.d = keras.layers.Dense(1)

            def call(self, x):
                return self.d(x)

        model = Net()
        opt = keras.optimizers.SGD(0.1)
        x = tf.ones([4, 3])
        y = tf.zeros([4, 1])
        params = model.trainable_variables
        SEEN["n_params"] = len(params)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        grads = tape.gradient(loss, params)
        SEEN["n_grads"] = len(grads)
        opt.apply_gradients(zip(grads, params))
        SEEN["applied"] = True
    """),
    "306_good": _p("""
        import tensorflow as tf
        from tensorflow import keras

        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.d = keras.layers.Dense(1)

            def call(self, x):
                return self.d(x)

        model = Net()
        opt = keras.optimizers.SGD(0.1)
        x = tf.ones([4, 3])
        y = tf.ones([4, 1])
        model(x[:1])
        params = model.trainable_variables
        SEEN["n_params"] = len(params)
        before = params[0].numpy().copy()
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        SEEN["changed"] = bool((before != params[0].numpy()).any())
    """),
    # the advice the rule used to give for subclassed models: `build` without a `build()` method
    "306_build_subclassed": _p("""
        from tensorflow import keras

        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.d = keras.layers.Dense(1)

            def call(self, x):
                return self.d(x)

        model = Net()
        model.build((None, 3))
        SEEN["n_params"] = len(model.trainable_variables)
    """),
    "306_bad_optimizer_build": _p("""
        import tensorflow as tf
        from tensorflow import keras

        model = keras.Sequential([keras.layers.Dense(8), keras.layers.Dense(1)])
        opt = keras.optimizers.Adam()
        opt.build(model.trainable_variables)
        SEEN["n_params"] = len(model.trainable_variables)
        x = tf.ones([4, 3])
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        SEEN["applied"] = True
    """),
    "306_good_optimizer_build": _p("""
        import tensorflow as tf
        from tensorflow import keras

        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(8), keras.layers.Dense(1)])
        opt = keras.optimizers.Adam()
        opt.build(model.trainable_variables)
        SEEN["n_params"] = len(model.trainable_variables)
        x = tf.ones([4, 3])
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        SEEN["applied"] = True
    """),
    # --- TFL307: gradients applied to another variable list -------------------------------------
    "307_bad": _p("""
        import tensorflow as tf

        w = tf.Variable(1.0)
        b = tf.Variable(10.0)
        opt = tf.keras.optimizers.SGD(1.0)
        with tf.GradientTape() as tape:
            loss = w * 5.0 + b * 0.0
        grads = tape.gradient(loss, [w, b])
        opt.apply_gradients(zip(grads, [b, w]))
        SEEN["w"] = float(w.numpy())
        SEEN["b"] = float(b.numpy())
    """),
    "307_good": _p("""
        import tensorflow as tf

        w = tf.Variable(1.0)
        b = tf.Variable(10.0)
        opt = tf.keras.optimizers.SGD(1.0)
        with tf.GradientTape() as tape:
            loss = w * 5.0 + b * 0.0
        grads = tape.gradient(loss, [w, b])
        opt.apply_gradients(zip(grads, [w, b]))
        SEEN["w"] = float(w.numpy())
        SEEN["b"] = float(b.numpy())
    """),
})


@pytest.fixture(scope="module")
def ran():
    return run_programs(PROGRAMS)


def test_tfl301_unwatched_tensor_gradient_is_none(ran):
    assert ran["301_bad"]["raised"] is None and ran["301_bad"]["seen"]["none"] is True
    assert ran["301_good"]["seen"] == {"none": False, "value": [2.0, 4.0]}
    assert len(lint(PROGRAMS["301_bad"], "TFL301")) == 1
    assert lint(PROGRAMS["301_good"], "TFL301") == []


SOURCES_301 = """
import tensorflow as tf

x0 = tf.Variable(3.0)
x1 = tf.Variable(3.0, trainable=False)
x2 = tf.Variable(2.0) + 1.0
x3 = tf.constant(3.0)

with tf.GradientTape() as tape:
    y = x0 ** 2 + x1 ** 2 + x2 ** 2 + x3 ** 2

GRADS = tape.gradient(y, [x0, x1, x2, x3])
"""


def test_tfl301_a_non_trainable_variable_and_every_plain_tensor_get_none():
    """The tf.GradientTape guide's four sources: a tape watches trainable variables only, so a
    ``trainable=False`` variable's gradient is None like a plain tensor's; one finding names
    the three, and ``tape.watch([x1, x2, x3])`` gives all four gradients."""
    from tests.premises._probe import run

    grads = run(SOURCES_301)["GRADS"]
    assert [g is None for g in grads] == [False, True, True, True]
    found = lint(SOURCES_301, "TFL301")
    assert len(found) == 1 and all(f"`{n}`" in found[0].message for n in ("x1", "x2", "x3"))
    fixed = SOURCES_301.replace("    y = x0", "    tape.watch([x1, x2, x3])\n    y = x0")
    assert [float(g) for g in run(fixed)["GRADS"]] == [6.0, 6.0, 6.0, 6.0]
    assert lint(fixed, "TFL301") == []


def test_tfl302_forward_pass_outside_the_tape_gives_none(ran):
    assert ran["302_bad"]["seen"]["none"] == [True, True]
    assert ran["302_good"]["seen"]["none"] == [False, False]
    assert len(lint(PROGRAMS["302_bad"], "TFL302")) == 1
    assert lint(PROGRAMS["302_good"], "TFL302") == []


@pytest.mark.parametrize("name", ["302_reentered", "302_reentered_assigned"])
def test_reentering_a_tape_records_and_no_gradient_rule_fires(ran, name):
    seen = ran[name]["seen"]
    assert ran[name]["raised"] is None
    assert seen["none"] in (False, [False, False])
    if "value" in seen:
        assert seen["value"] == 32.0  # d(w^4)/dw at 2: both blocks were recorded
    for code in ("TFL301", "TFL302", "TFL303", "TFL304", "TFL305"):
        assert lint(PROGRAMS[name], code) == [], code


@pytest.mark.parametrize("cut", list(CUTS))
def test_tfl303_each_cutting_op_does_what_the_message_says(ran, cut):
    _line, _loss, want = CUTS[cut]
    got = ran[f"303_{cut}"]
    if want == "raises":
        # a NumPy value as the target: `gradient()` raises instead of returning None
        assert got["raised"] is not None and got["raised"]["type"] == "AttributeError", got
        assert got["seen"]["outcome"] == "pending"
    else:
        assert got["raised"] is None, got
        assert got["seen"]["outcome"] == want
    found = lint(PROGRAMS[f"303_{cut}"], "TFL303")
    assert len(found) == 1, cut
    message = found[0].message
    if want == "none":
        assert "is None" in message, message
    elif want == "zeros":
        assert "zero" in message and "is None" not in message, message
    else:
        assert "AttributeError" in message, message
    if cut.startswith("numpy_m") or cut.startswith("numpy_c") or cut in ("numpy_target", "float"):
        assert "is None" in message and "AttributeError" in message, message  # both outcomes


def test_tfl303_differentiable_paths_are_not_flagged(ran):
    assert ran["303_good"]["seen"] == {"none": False, "value": [9.0, -9.0]}  # d/dw sum((3w)^2) = 18w
    assert ran["303_straight_through"]["seen"]["none"] is False
    assert lint(PROGRAMS["303_good"], "TFL303") == []
    assert lint(PROGRAMS["303_straight_through"], "TFL303") == []


def test_tfl304_second_gradient_of_a_non_persistent_tape_raises(ran):
    bad = ran["304_bad"]
    assert bad["seen"] == {"first": 4.0}
    assert bad["raised"]["type"] == "RuntimeError"
    assert "non-persistent" in bad["raised"]["message"]
    assert ran["304_good"]["raised"] is None and ran["304_good"]["seen"] == {"first": 4.0, "second": 12.0}
    assert len(lint(PROGRAMS["304_bad"], "TFL304")) == 1
    assert lint(PROGRAMS["304_good"], "TFL304") == []


def test_tfl305_persistent_tape_kept_alive_holds_its_tensors(ran):
    assert ran["305_bad"]["raised"] is None and ran["305_bad"]["seen"]["alive"] is True
    assert ran["305_good"]["raised"] is None and ran["305_good"]["seen"]["alive"] is False
    assert len(lint(PROGRAMS["305_bad"], "TFL305")) == 1
    assert lint(PROGRAMS["305_good"], "TFL305") == []


def test_tfl306_variables_read_before_build_are_empty_and_the_update_raises(ran):
    # Keras 3: the list is empty, and the first update raises (not a silent no-op)
    bad = ran["306_bad"]
    assert bad["seen"] == {"n_params": 0, "n_grads": 0}
    assert bad["raised"]["type"] == "ValueError"
    opt_bad = ran["306_bad_optimizer_build"]
    assert opt_bad["seen"] == {"n_params": 0}
    assert opt_bad["raised"]["type"] == "ValueError" and "Unknown variable" in opt_bad["raised"]["message"]
    # the fixes: call the model once (a subclassed model) / give the input shape (Sequential)
    assert ran["306_good"]["raised"] is None and ran["306_good"]["seen"] == {"n_params": 2, "changed": True}
    good_opt = ran["306_good_optimizer_build"]
    assert good_opt["raised"] is None and good_opt["seen"] == {"n_params": 4, "applied": True}
    # `build(shape)` on a subclassed model without a `build()` method creates nothing
    assert ran["306_build_subclassed"]["seen"] == {"n_params": 0}
    for name in ("306_bad", "306_bad_optimizer_build"):
        found = lint(PROGRAMS[name], "TFL306")
        assert len(found) == 1, name
        assert "ValueError" in found[0].message
    for name in ("306_good", "306_good_optimizer_build"):
        assert lint(PROGRAMS[name], "TFL306") == [], name


def test_tfl307_zip_pairs_gradients_with_the_wrong_variables(ran):
    # loss = 5w: w's gradient (5) went to b, b's (0) to w
    assert ran["307_bad"]["seen"] == {"w": 1.0, "b": 5.0}
    assert ran["307_good"]["seen"] == {"w": -4.0, "b": 10.0}
    assert len(lint(PROGRAMS["307_bad"], "TFL307")) == 1
    assert lint(PROGRAMS["307_good"], "TFL307") == []
