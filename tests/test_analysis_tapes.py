"""GradientTape facts: tape discovery, watches, gradient calls, dataflow through the block."""

from __future__ import annotations

import ast
import textwrap

import pytest

from tflint.analysis import Analysis


def facts(src: str):
    src = textwrap.dedent(src)
    tree = ast.parse(src)
    return Analysis(tree, src).tapes


def calls_by_line(tapes):
    return {c.lineno: c for t in tapes.tapes for c in t.calls}


@pytest.mark.parametrize(
    "header,ctor",
    [
        ("import tensorflow as tf", "tf.GradientTape"),
        ("import tensorflow as tensorflow_lib", "tensorflow_lib.GradientTape"),
        ("from tensorflow import GradientTape", "GradientTape"),
        ("from tensorflow.python.eager import backprop", "backprop.GradientTape"),
        ("import tensorflow", "tensorflow.autodiff.GradientTape"),
    ],
)
def test_tape_spellings(header, ctor):
    t = facts(f"{header}\nwith {ctor}(persistent=True, watch_accessed_variables=False) as g:\n    y = 1\n")
    assert len(t.tapes) == 1
    tape = t.tapes[0]
    assert tape.name == "g"
    assert tape.persistent is True
    assert tape.watch_accessed_variables is False


def test_not_a_tape_without_tensorflow():
    t = facts("class GradientTape:\n    pass\nwith GradientTape() as tape:\n    pass\n")
    assert t.tapes == []


def test_several_context_managers_and_positional_persistent():
    t = facts(
        """
        import tensorflow as tf
        with tf.GradientTape(True) as a, tf.name_scope("x"), tf.GradientTape() as b:
            y = 1
        ga = a.gradient(y, [])
        gb = b.gradient(y, [])
        """
    )
    by_name = {tape.name: tape for tape in t.tapes}
    assert set(by_name) == {"a", "b"}
    assert by_name["a"].persistent is True and by_name["b"].persistent is False
    assert [c.lineno for c in by_name["a"].calls] == [5]
    assert [c.lineno for c in by_name["b"].calls] == [6]


def test_tape_entered_by_name_and_unknown_persistence():
    t = facts(
        """
        import tensorflow as tf
        def f(x, keep):
            tape = tf.GradientTape(persistent=keep)
            with tape:
                tape.watch(x)
                y = x * x
            return tape.gradient(y, x)
        """
    )
    (tape,) = t.tapes
    assert tape.name == "tape" and tape.persistent is None
    assert len(tape.withs) == 1 and len(tape.watches) == 1 and len(tape.calls) == 1


def test_reused_name_binds_calls_to_latest_tape():
    t = facts(
        """
        import tensorflow as tf
        def f(model, x):
            with tf.GradientTape() as tape:
                a = model(x)
            ga = tape.gradient(a, model.trainable_variables)
            with tf.GradientTape() as tape:
                b = model(x)
            gb = tape.gradient(b, model.trainable_variables)
        """
    )
    first, second = t.tapes
    assert [c.lineno for c in first.calls] == [6]
    assert [c.lineno for c in second.calls] == [9]
    assert t.repeated_calls(first) == [] and t.repeated_calls(second) == []


def flow_at(t, line):
    call = calls_by_line(t)[line]
    flow = t.flow(call)
    assert flow is not None
    return flow


def test_flow_inside_block_is_connected_to_model_variables():
    t = facts(
        """
        import tensorflow as tf
        loss_fn = tf.keras.losses.MeanSquaredError()
        def step(model, x, y):
            with tf.GradientTape() as tape:
                pred = model(x)
                loss = loss_fn(y, pred)
            return tape.gradient(loss, model.trainable_variables)
        """
    )
    flow = flow_at(t, 8)
    assert flow.connected
    assert ("n", "model") in flow.source_tokens
    assert flow.cutting_ops() == []
    assert not flow.inside


def test_forward_pass_before_the_block_is_recorded_as_fwd():
    t = facts(
        """
        import tensorflow as tf
        loss_fn = tf.keras.losses.MeanSquaredError()
        def step(model, x, y):
            pred = model(x)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, pred)
            return tape.gradient(loss, model.trainable_variables)
        """
    )
    flow = flow_at(t, 8)
    assert not flow.connected
    assert ("pred", 5) in flow.target_val.fwd
    assert all(inside for _, inside in flow.target_val.defs)


def test_target_defined_after_block_is_outside():
    t = facts(
        """
        import tensorflow as tf
        def step(model, x):
            with tf.GradientTape() as tape:
                out = model(x)
            loss = tf.reduce_mean(out)
            return tape.gradient(loss, model.trainable_variables)
        """
    )
    flow = flow_at(t, 7)
    assert flow.target_val.defs == frozenset({(6, False)})
    assert not flow.target_val.deps


def test_watched_constant_source_and_unwatched_constant_source():
    t = facts(
        """
        import tensorflow as tf
        x = tf.constant(1.0)
        z = tf.constant(2.0)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x])
            y = x * z
        gx = tape.gradient(y, x)
        gz = tape.gradient(y, z)
        """
    )
    (sx,) = flow_at(t, 8).source_facts
    (sz,) = flow_at(t, 9).source_facts
    assert sx.watched and sx.val.kind == "tensor"
    assert not sz.watched and sz.val.kind == "tensor" and not sz.val.deps
    assert flow_at(t, 8).connected and not flow_at(t, 9).connected


def test_variable_sources_and_intermediates():
    t = facts(
        """
        import tensorflow as tf
        w = tf.Variable(1.0)
        with tf.GradientTape(persistent=True) as tape:
            h = w * 2.0
            y = h * h
        gw = tape.gradient(y, [w])
        gh = tape.gradient(y, h)
        """
    )
    (sw,) = flow_at(t, 7).source_facts
    assert sw.val.kind == "variable"
    (sh,) = flow_at(t, 8).source_facts
    assert sh.val.deps  # an intermediate recorded by the tape
    assert flow_at(t, 7).connected and flow_at(t, 8).connected


@pytest.mark.parametrize(
    "expr,cut",
    [
        ("tf.argmax(h)", True),
        ("tf.math.round(h)", True),
        ("tf.sign(h)", True),
        ("tf.cast(h, tf.int32)", True),
        ("tf.cast(h, 'bool')", True),
        ("tf.cast(h, tf.float64)", False),
        ("tf.stop_gradient(h)", True),
        ("tf.numpy_function(np.sin, [h], tf.float32)", True),
        ("np.mean(h)", True),
        ("h.numpy()", True),
        ("float(h)", True),
        ("tf.nn.relu(h)", False),
        ("tf.py_function(np.sin, [h], tf.float32)", False),
        ("h + tf.stop_gradient(tf.round(h) - h)", False),
    ],
)
def test_cut_operations(expr, cut):
    t = facts(
        f"""
        import numpy as np
        import tensorflow as tf
        def step(model, x):
            with tf.GradientTape() as tape:
                h = model(x)
                y = {expr}
            return tape.gradient(y, model.trainable_variables)
        """
    )
    flow = flow_at(t, 8)
    assert bool(flow.cutting_ops()) is cut
    assert flow.connected is not cut


def test_stop_gradient_on_other_network_does_not_cut_requested_sources():
    t = facts(
        """
        import tensorflow as tf
        def step(online, target_net, s, s2, r):
            with tf.GradientTape() as tape:
                target = tf.stop_gradient(r + tf.reduce_max(target_net(s2), axis=1))
                loss = tf.reduce_mean(tf.square(target - tf.reduce_sum(online(s), axis=1)))
            return tape.gradient(loss, online.trainable_variables)
        """
    )
    flow = flow_at(t, 7)
    assert flow.connected and flow.cutting_ops() == []


def test_partial_cut_of_one_requested_variable():
    t = facts(
        """
        import tensorflow as tf
        w1 = tf.Variable(1.0)
        w2 = tf.Variable(1.0)
        with tf.GradientTape() as tape:
            loss = w1 * 2.0 + tf.stop_gradient(w2 * 3.0)
        g1, g2 = tape.gradient(loss, [w1, w2])
        """
    )
    flow = flow_at(t, 7)
    assert flow.connected
    assert flow.missing_tokens == frozenset({("n", "w2")})
    assert [n.lineno for n in flow.cutting_ops()] == [6]


def test_unknown_helper_keeps_everything_connected():
    t = facts(
        """
        import tensorflow as tf
        def step(model, x, compute_loss):
            feats = model.backbone(x)
            with tf.GradientTape() as tape:
                loss = compute_loss(feats)
            return tape.gradient(loss, model.trainable_variables)
        """
    )
    flow = flow_at(t, 7)
    assert ("unknown",) in flow.target_val.deps and flow.connected


def test_unresolvable_sources_are_a_wildcard():
    t = facts(
        """
        import tensorflow as tf
        def step(model, x, variables):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x))
            return tape.gradient(loss, variables)
        """
    )
    assert flow_at(t, 6).source_tokens is None


def test_repeated_calls_branches_loops_and_returns():
    t = facts(
        """
        import tensorflow as tf
        def f(model, x, flag, losses):
            with tf.GradientTape() as tape:
                a = model(x)
            if flag:
                g = tape.gradient(a, model.trainable_variables)
            else:
                g = tape.gradient(a * 2, model.trainable_variables)
            return g

        def g(model, x, flag):
            with tf.GradientTape() as tape:
                a = model(x)
            if flag:
                return tape.gradient(a, model.trainable_variables)
            return tape.gradient(a * 2, model.trainable_variables)

        def h(model, x):
            with tf.GradientTape() as tape:
                a = model(x)
            out = []
            for v in model.trainable_variables:
                out.append(tape.gradient(a, v))
            return out

        def k(model, xs):
            for x in xs:
                with tf.GradientTape() as tape:
                    a = model(x)
                g = tape.gradient(a, model.trainable_variables)
        """
    )
    reps = {t_.withs[0].lineno: [(c.lineno, getattr(p, "lineno", None)) for c, p in t.repeated_calls(t_)] for t_ in t.tapes}
    assert reps[4] == []
    assert reps[13] == []
    assert reps[20] == [(24, 23)]
    assert reps[29] == []


def test_kept_alive_persistent_tapes():
    t = facts(
        """
        import tensorflow as tf
        with tf.GradientTape(persistent=True) as module_tape:
            pass
        with tf.GradientTape(persistent=True) as released:
            pass
        del released

        class T:
            def step(self):
                with tf.GradientTape(persistent=True) as self.tape:
                    pass
            def local(self):
                with tf.GradientTape(persistent=True) as tape:
                    pass
                return tape.gradient(1, [])
            @tf.function
            def traced(self):
                with tf.GradientTape(persistent=True) as self.other:
                    pass
        """
    )
    kept = sorted((c.lineno, where) for c, where in t.kept_alive())
    assert [line for line, _ in kept] == [3, 11]
    assert "module-level" in kept[0][1] and "self.tape" in kept[1][1]


def test_premature_reads_and_built_models():
    t = facts(
        """
        import tensorflow as tf
        from tensorflow import keras

        class Net(keras.Model):
            def call(self, x):
                return x

        class SelfBuilt(keras.Model):
            def __init__(self):
                super().__init__()
                self.build((None, 3))

        opt = keras.optimizers.Adam()
        a = Net()
        opt.build(a.trainable_variables)
        b = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        opt.build(b.trainable_variables)
        c = SelfBuilt()
        opt.build(c.trainable_variables)
        d = Net()
        d(tf.zeros((1, 3)))
        opt.build(d.trainable_variables)
        e = keras.layers.Dense(2)
        print(e.trainable_variables)
        """
    )
    assert [(r.lineno, name) for r, name, _, _ in t.premature_reads] == [(16, "a")]


def test_gradient_sources_and_canonical_names():
    src = textwrap.dedent(
        """
        import tensorflow as tf
        def f(model, opt, tape, loss):
            params = model.trainable_weights
            grads = tape.gradient(loss, params)
            grads, _ = tf.clip_by_global_norm(grads, 1.0)
            grads = [tf.clip_by_norm(g, 1.0) for g in grads]
            opt.apply_gradients(zip(grads, model.trainable_variables))
        """
    )
    tree = ast.parse(src)
    a = Analysis(tree, src)
    apply_call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "apply_gradients")
    zip_call = apply_call.args[0]
    found = a.tapes.gradient_sources_of(zip_call.args[0], apply_call)
    assert found is not None
    gcall, sources = found
    assert gcall.lineno == 5
    assert a.tapes.canonical(sources, gcall) == a.tapes.canonical(zip_call.args[1], apply_call)
    assert a.tapes.canonical(sources, gcall) == ("model.trainable_variables", True)


# --- regressions -----------------------------------------------------------------------------

ISSUE_REPRODUCER = """\
import tensorflow as tf
import matplotlib.pyplot as plt
colors = plt.rcParams['axes.prop_cycle'].by_key()['color']
def train(model, x, y, learning_rate):
  with tf.GradientTape() as t:
    current_loss = loss(y, model(x))
  dw, db = t.gradient(current_loss, [model.w, model.b])
"""


def test_call_on_a_subscript_chain_off_a_module_does_not_crash():
    from tflint.check.engine import lint_text
    from tflint.rules import all_rules

    result = lint_text("nb.py", ISSUE_REPRODUCER, frozenset(r.code for r in all_rules()))
    assert result.errors == []
    t = facts(ISSUE_REPRODUCER)
    (flow,) = t.flows()
    assert flow.connected  # `loss(...)` is unknown: it may read the model
    # the module-level value is a method result of some object, not a module function
    assert t.module_env["colors"].kind == "unknown"


@pytest.mark.parametrize(
    "chain",
    ["plt.rcParams['k'].by_key()", "np.random.default_rng(0).normal(size=3)", "tf.nest.flatten(x)[0].numpy()",
     "plt.cm.get_cmap('x')(0.5)", "tf.config.list_physical_devices('GPU')[0].name"],
)
def test_module_rooted_chains_evaluate(chain):
    src = f"import tensorflow as tf\nimport numpy as np\nimport matplotlib.pyplot as plt\nv = {chain}\n" \
          "def f(m, x):\n    with tf.GradientTape() as g:\n        y = m(x) * v\n    return g.gradient(y, m.trainable_variables)\n"
    t = facts(src)
    assert len(t.flows()) == 1


def test_reentered_tape_bound_by_as_is_one_tape_with_two_blocks():
    t = facts("""
        import tensorflow as tf
        def step(model, x, y):
            with tf.GradientTape() as tape:
                preds = model(x)
            with tape:
                loss = tf.reduce_mean(preds - y)
            return tape.gradient(loss, model.trainable_variables)
        """)
    (tape,) = t.tapes
    assert len(tape.withs) == 2
    (flow,) = t.flows()
    assert flow.connected and any(inside for _, inside in flow.target_val.defs)


def test_reentry_follows_the_latest_binding_of_the_name():
    t = facts("""
        import tensorflow as tf
        def step(model, x):
            with tf.GradientTape() as tape:
                a = model(x)
            tape = tf.GradientTape()
            with tape:
                b = model(x)
            return tape.gradient(b, model.trainable_variables)
        """)
    assert len(t.tapes) == 2
    first, second = sorted(t.tapes, key=lambda tp: tp.line)
    assert len(first.withs) == 1 and len(second.withs) == 1
    assert second.calls and not first.calls


def test_with_on_an_unrelated_name_is_not_a_tape():
    t = facts("""
        import tensorflow as tf
        def step(model, x, lock):
            with tf.GradientTape() as tape:
                y = model(x)
            with lock:
                z = y * 2
            return tape.gradient(z, model.trainable_variables)
        """)
    (tape,) = t.tapes
    assert len(tape.withs) == 1
