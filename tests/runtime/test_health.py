"""Training health on real TensorFlow, in process: statistics, the loss-shape check, eager and
tf.function NaN detection, the Keras callback, self-disabling hooks and exact restoration."""

from __future__ import annotations

import itertools
import json
import math
import random
import time

import numpy as np
import pytest

from tflint.profiler import stats
from tflint.runtime.loss_broadcast import broadcast_bug
from tflint.runtime.loss_stall import LossStallHook
from tflint.runtime.store import Series

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from keras.src.backend.tensorflow.trainer import TensorFlowTrainer  # noqa: E402
from tensorflow.python.eager import backprop, context  # noqa: E402

from tflint.runtime import KerasCallback, nan_inf, watch  # noqa: E402


# ------------------------------------------------------------------------------ statistics
def _theil_sen_reference(xs, ys):
    slopes = sorted((ys[j] - ys[i]) / (xs[j] - xs[i]) for i, j in itertools.combinations(range(len(xs)), 2)
                    if xs[j] != xs[i])
    if not slopes:
        return 0.0
    m = len(slopes)
    return slopes[m // 2] if m % 2 else 0.5 * (slopes[m // 2 - 1] + slopes[m // 2])


def _mk_reference(ys):
    n = len(ys)
    if n < 3:
        return 0.0
    s = sum((ys[j] > ys[i]) - (ys[j] < ys[i]) for i, j in itertools.combinations(range(n), 2))
    counts = {}
    for y in ys:
        counts[y] = counts.get(y, 0) + 1
    var = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in counts.values())) / 18.0
    if var <= 0 or s == 0:
        return 0.0
    return (s - 1) / math.sqrt(var) if s > 0 else (s + 1) / math.sqrt(var)


def test_theil_sen_and_mann_kendall_match_the_textbook_definitions():
    rnd = random.Random(1)
    for _ in range(200):
        n = rnd.randint(0, 40)
        xs = sorted(rnd.sample(range(500), n))
        if rnd.random() < 0.3:
            xs = [x // 9 for x in xs]  # repeated x: pairs with dx = 0 are skipped
        ys = [rnd.choice([rnd.random(), 1.0, 2.0]) for _ in xs]  # with ties
        assert stats.theil_sen(xs, ys) == pytest.approx(_theil_sen_reference(xs, ys), abs=1e-12)
        assert stats.mann_kendall_z(ys) == pytest.approx(_mk_reference(ys), abs=1e-12)


def test_theil_sen_ignores_spikes_and_relative_change():
    xs = list(range(100))
    ys = [10.0 + 0.5 * x for x in xs]
    ys[40] = 1e9  # one spike
    assert stats.theil_sen(xs, ys) == pytest.approx(0.5)
    flat = stats.relative_change(xs, [5.0 + (i % 2) * 0.01 for i in xs])
    assert flat["relative"] < 0.01
    assert stats.l2_norm([3.0, 4.0]) == 5.0 and stats.combine_norms([3.0, 4.0]) == 5.0
    assert stats.l2_norm(np.full(4, 60000.0, np.float16)) == pytest.approx(120000.0)  # no float16 overflow


def test_memory_trend_uses_the_shared_statistics():
    from tflint.runtime import memory

    assert memory.theil_sen is stats.theil_sen and memory.mann_kendall_z is stats.mann_kendall_z
    grow = [(i, 100e6 + i * 1e6) for i in range(100)]
    assert memory.analyze(grow)["growth"] is True
    assert memory.analyze([(i, 100e6 + (i % 7) * 1e5) for i in range(100)])["growth"] is False


# ------------------------------------------------------------------------------- judgements
def test_broadcast_pattern():
    assert broadcast_bug([32], [32, 1]) and broadcast_bug([None, 1], [None])
    assert not broadcast_bug([32, 1], [1, 32])  # same rank: explicit pairwise broadcasting
    assert not broadcast_bug([16], [32, 16])  # a bias added to a batch
    assert not broadcast_bug([1], [32, 1]) and not broadcast_bug([32, 1], [32, 1])
    assert not broadcast_bug([], [32, 1])  # a scalar


def test_loss_stall_judgement():
    judge = LossStallHook.__new__(LossStallHook).judge
    steps = range(0, 400, 8)
    assert judge([(s, 2.0 + 0.001 * ((s // 8) % 3)) for s in steps]) is not None  # flat, noisy
    assert judge([(s, 2.0 - 0.004 * s) for s in steps]) is None  # decreasing
    # converged in the first 20% and then flat: not a stall
    assert judge([(s, max(0.5, 3.0 - 0.05 * s)) for s in steps]) is None
    assert judge([(s, 1e-9) for s in steps]) is None  # already fitted
    assert judge([(s, float("nan")) for s in steps]) is None  # nan-inf's business
    assert judge([(s, 2.0) for s in range(0, 30, 8)]) is None  # too short


def test_exploding_and_vanishing_judgements():
    from tflint.runtime.grad_norms import ExplodingGradientHook, VanishingGradientHook

    class Health:  # the series the judgements read, of one run
        def __init__(self):
            self.grad_norm = Series(400)
            self.layer_norms = {}
            self.layer_order = []
            self.probes = []

        def segments(self, pts, graph_steps):
            return [(pts, None)] if pts else []

    h = Health()
    for i, lay in enumerate(["l0", "l1", "l2"]):
        h.layer_order.append(lay)
        h.layer_norms[lay] = Series(400)
    for s in range(0, 200, 8):
        h.grad_norm.add(s, 1.0 + 0.01 * s)
        h.layer_norms["l0"].add(s, 1e-6)
        h.layer_norms["l1"].add(s, 0.1)
        h.layer_norms["l2"].add(s, 1.0)
    assert ExplodingGradientHook.__new__(ExplodingGradientHook).judge(h) is None
    v = VanishingGradientHook.__new__(VanishingGradientHook).judge(h)
    assert v["first_layer"] == "l0" and v["last_layer"] == "l2" and v["median_ratio"] == pytest.approx(1e-6)
    h2 = Health()
    for s in range(0, 200, 8):
        h2.grad_norm.add(s, 2.0 ** (s / 8))
    e = ExplodingGradientHook.__new__(ExplodingGradientHook).judge(h2)
    assert e["norm"] > 1e4 and e["step"] == 112  # 2**14 is the first sample above 1e4


# ------------------------------------------------------------------------------ real runs
def _nan_function_run():
    w = tf.Variable(tf.fill([4, 1], 1.0), name="w")
    opt = keras.optimizers.SGD(0.1)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = -tf.reduce_mean(tf.sqrt(tf.matmul(x, w)))  # w grows: finite until x is 0
        grads = tape.gradient(loss, [w])
        opt.apply_gradients(zip(grads, [w]))
        return loss

    losses = []
    for i in range(40):
        x = tf.ones([8, 4]) * (1.0 if i < 30 else 0.0)  # sqrt(0): its gradient is infinite at step 31
        losses.append(float(step(x)))
    return losses


def test_nan_from_a_gradient_is_localised_to_the_backward_op():
    with watch() as s:
        losses = _nan_function_run()
    sig = [x for x in s.report().signals if x.kind == "nan-inf"]
    assert len(sig) == 1, [x.message for x in s.report().signals]
    d = sig[0].details
    assert d["step"] == 31
    assert d["tensor"] == "the gradient of w"
    assert d["op"] == "SqrtGrad" and d["backward"] is True and d["forward_op"] == "Sqrt"
    assert "square root" in d["cause"]
    assert sig[0].location.file == __file__
    # the user's run is unchanged by the probe
    assert losses[:30] == _nan_function_run()[:30]


def test_eager_nan_records_step_and_variable_state():
    w = tf.Variable([1.0, 1.0], name="w")
    with watch(signals={"nan-inf"}) as s:
        for i in range(5):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.math.log(w - (1.0 if i == 3 else 0.0)))
            tape.gradient(loss, [w])
    (sig,) = [x for x in s.report().signals if x.kind == "nan-inf"]
    assert sig.details["step"] == 4 and sig.details["tensor"] == "the loss" and not sig.details["localised"]


def test_failing_training_health_hook_disables_itself(monkeypatch):
    monkeypatch.setenv("TFLINT_DEBUG_FAIL_HOOK", "nan-inf,loss-stall")
    with watch() as s:
        losses = _nan_function_run()
    rep = s.report()
    hooks = rep.metrics["hooks"]
    assert hooks["nan-inf"]["status"] == "failed" and "forced failure" in hooks["nan-inf"]["reason"]
    assert hooks["loss-stall"]["status"] == "failed"
    assert hooks["dead-parameter"]["status"] == "ok" and hooks["loss-broadcast"]["status"] == "ok"
    assert not [x for x in rep.signals if x.kind in ("nan-inf", "loss-stall")]
    assert math.isnan(losses[-1]) and losses[:30] == _nan_function_run()[:30]


def test_keras_callback_reports_untracked_variables_and_restores():
    before_tape = dict(backprop.GradientTape.__dict__)
    before_step = TensorFlowTrainer.__dict__["train_step"]
    before_callbacks = list(context.context().op_callbacks)

    class Plain(keras.Model):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.ones([3, 1]))

        def call(self, x):
            return tf.matmul(x, self.w)

    model = Plain()
    model.compile(optimizer="sgd", loss="mse")
    cb = KerasCallback()
    x = np.ones((32, 3), np.float32)
    with pytest.warns(UserWarning, match="does not have any trainable weights"):
        model.fit(x, x[:, :1], epochs=2, batch_size=8, verbose=0, callbacks=[cb])
    (sig,) = [x for x in cb.report.signals if x.kind == "dead-parameter"]
    assert sig.details["reason"] == "no-trainable-variables"
    assert [u["attribute"] for u in sig.details["untracked"]] == ["w"]
    assert sig.location.file == __file__
    assert dict(backprop.GradientTape.__dict__) == before_tape
    assert TensorFlowTrainer.__dict__["train_step"] is before_step
    assert list(context.context().op_callbacks) == before_callbacks


def test_a_model_that_fit_builds_lazily_is_not_reported_as_having_no_trainable_variables():
    """A Sequential without an Input and a subclassed model get their weights in their first
    forward pass, inside fit's first train_step (seen on the TensorFlow regression, time-series
    and word2vec tutorials, as an error)."""

    class Sub(keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden, self.out = keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)

        def call(self, x):
            return self.out(self.hidden(x))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 4)).astype(np.float32)
    y = x @ np.array([[1.0], [2.0], [-1.0], [0.5]], np.float32)
    for model in (keras.Sequential([keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]), Sub()):
        assert not model.trainable_variables
        model.compile(optimizer="adam", loss="mse")
        with watch() as s:
            model.fit(x, y, epochs=3, batch_size=32, verbose=0)
        assert model.trainable_variables
        assert [sig.message for sig in s.report().signals if sig.kind == "dead-parameter"] == []


def test_batch_norm_over_one_value_per_channel_cuts_the_gradient_and_is_named():
    """Premise of a cause the dead-parameter and vanishing-gradient findings name (pix2pix's
    innermost block with batch size 1): BatchNormalization in training over a 1x1 map of one
    example outputs exactly its beta, so nothing before it gets a gradient; over two examples it
    passes gradients back."""
    bn = keras.layers.BatchNormalization(beta_initializer=keras.initializers.Constant(0.5))
    for batch, cut in ((1, True), (2, False)):
        x = tf.random.stateless_normal((batch, 1, 1, 4), seed=(1, 2))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = bn(x, training=True)
            loss = tf.reduce_sum(y * tf.random.stateless_normal(y.shape, seed=(3, 4)))
        g = tape.gradient(loss, x)
        assert bool(tf.reduce_all(tf.equal(g, 0.0))) is cut
        if cut:
            assert bool(tf.reduce_all(tf.equal(y, 0.5)))

    inp = keras.Input((4, 4, 3))
    h = keras.layers.Conv2D(8, 4, strides=4, use_bias=False)(inp)  # 1x1
    h = keras.layers.BatchNormalization()(h)
    out = keras.layers.Dense(1)(keras.layers.Flatten()(keras.layers.LeakyReLU()(h)))
    model = keras.Model(inp, out)
    opt = keras.optimizers.Adam(1e-3)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(xb, training=True) - yb) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    with watch() as s:
        for i in range(100):
            step(tf.random.stateless_normal((1, 4, 4, 3), seed=(i, 0)), tf.random.stateless_normal((1, 1), seed=(i, 1)))
    (sig,) = [x for x in s.report().signals if x.kind == "dead-parameter"]
    assert "conv2d" in " ".join(sig.details["variables"]) and "BatchNormalization after it" in sig.message


def test_a_first_layer_cut_off_by_dead_relus_is_told_from_vanishing_gradients():
    """A ReLU layer that outputs 0 for every input passes back no gradient at all: the layers
    before it get exactly zero, not a small gradient, and sigmoid-to-ReLU advice would not help."""
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8),
                              keras.layers.Dense(16, activation="relu", bias_initializer=keras.initializers.Constant(-100.0)),
                              keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(1e-3)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((64, 8)).astype(np.float32))
    y = tf.reduce_sum(x, axis=1, keepdims=True)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    with watch() as s:
        for _ in range(80):
            step()
    rep = s.report()
    (sig,) = [x for x in rep.signals if x.kind == "vanishing-gradient"]
    assert sig.details["cause"] == "zero-gradient" and sig.details["zero_share"] == 1.0
    assert sig.details["first_layer"].endswith("/" + model.layers[0].name)
    assert "exactly zero" in sig.message and "sigmoid" not in sig.message


def test_a_bias_the_loss_is_blind_to_is_reported_as_such_not_as_a_cut_path():
    """A WGAN critic's loss, mean(critic(fake)) - mean(critic(real)), does not change when a
    constant is added to the critic's output: its output bias gets exactly zero gradient and never
    moves while its kernel trains. Worth an info, with use_bias=False, not the cut-path advice."""
    critic = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(1e-3)
    rng = np.random.default_rng(0)
    real = tf.constant(rng.standard_normal((32, 4)).astype(np.float32) + 1.0)
    fake = tf.constant(rng.standard_normal((32, 4)).astype(np.float32))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(critic(fake)) - tf.reduce_mean(critic(real))
        grads = tape.gradient(loss, critic.trainable_variables)
        opt.apply_gradients(zip(grads, critic.trainable_variables))

    bias = critic.layers[-1].bias
    before = bias.numpy().copy()
    with watch() as s:
        for _ in range(40):
            step()
    assert np.array_equal(bias.numpy(), before)  # the premise: it never moves
    rep = s.report()
    (sig,) = [x for x in rep.signals if x.kind == "dead-parameter"]
    assert sig.severity == "info" and sig.details["variables"] == [bias.path]
    assert "use_bias=False" in sig.message and sig.details["rule"] is None


def test_a_dead_parameter_is_located_at_the_gradient_call_that_differentiated_it():
    """A WGAN step: the critic's gradient call, then the generator's. The critic's output bias
    is dead; the finding names the critic's call, not the last gradient call traced."""
    import inspect

    gen = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4)])
    critic = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    g_opt, c_opt = keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3)
    real = tf.constant(np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32) + 1.0)

    @tf.function
    def step():
        z = tf.random.normal([32, 4])
        with tf.GradientTape() as tape:
            c_loss = tf.reduce_mean(critic(gen(z))) - tf.reduce_mean(critic(real))
        c_grads = tape.gradient(c_loss, critic.trainable_variables)  # CRITIC_CALL
        c_opt.apply_gradients(zip(c_grads, critic.trainable_variables))
        with tf.GradientTape() as tape:
            g_loss = -tf.reduce_mean(critic(gen(z)))
        g_grads = tape.gradient(g_loss, gen.trainable_variables)
        g_opt.apply_gradients(zip(g_grads, gen.trainable_variables))

    with watch() as s:
        for _ in range(40):
            step()
    (sig,) = [x for x in s.report().signals if x.kind == "dead-parameter"]
    src, first = inspect.getsourcelines(test_a_dead_parameter_is_located_at_the_gradient_call_that_differentiated_it)
    line = first + next(i for i, text in enumerate(src) if "# CRITIC_CALL" in text)
    assert sig.details["variables"] == [critic.layers[-1].bias.path]
    assert (sig.location.line, sig.location.file.endswith("test_health.py")) == (line, True)


def test_a_gans_two_losses_are_not_judged_as_a_stalled_loss():
    """A GAN's discriminator and generator losses hover at equilibrium, as they should, and the
    loss series holds both: judged as one loss they can read as flat (seen on a 4000-step run of
    this loop). Two gradient calls at two places that train disjoint variables are told apart,
    and no stall is judged for them, however flat the series."""
    from tflint.runtime import loss_stall
    from tflint.runtime.store import Series

    keras.utils.set_random_seed(0)
    gen = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
    disc = keras.Sequential([keras.Input((2,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    g_opt, d_opt = keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3)
    bce = keras.losses.BinaryCrossentropy(from_logits=True)
    real = tf.constant(np.random.default_rng(0).standard_normal((64, 2)).astype(np.float32) * 0.5 + 2.0)

    @tf.function
    def step():
        z = tf.random.normal([64, 4])
        with tf.GradientTape() as d_tape:
            real_logits, fake_logits = disc(real), disc(gen(z))
            d_loss = bce(tf.ones_like(real_logits), real_logits) + bce(tf.zeros_like(fake_logits), fake_logits)
        d_grads = d_tape.gradient(d_loss, disc.trainable_variables)
        d_opt.apply_gradients(zip(d_grads, disc.trainable_variables))
        with tf.GradientTape() as g_tape:
            fake_logits = disc(gen(z))
            g_loss = bce(tf.ones_like(fake_logits), fake_logits)
        g_grads = g_tape.gradient(g_loss, gen.trainable_variables)
        g_opt.apply_gradients(zip(g_grads, gen.trainable_variables))

    with watch() as s:
        for _ in range(300):
            step()
    assert s.health.separate_losses()
    # two losses hovering around 1.39 and 0.69, interleaved as the probes' reads give them
    flat = Series(512)
    for x in range(8, 3000, 8):
        flat.add(x, 1.39 + 0.01 * ((x // 8) % 3))
        flat.add(x, 0.69 + 0.01 * ((x // 8) % 2))
    s.health.loss = flat
    assert s.hooks["loss-stall"].judge(flat.downsample(400)) is not None  # as one loss: flat
    assert loss_stall.signals(s) == []


@pytest.mark.parametrize("graph", [True, False], ids=["tf.function", "eager"])
def test_a_gans_players_get_their_own_series_and_are_judged_apart(graph):
    """A GAN's two gradient calls train two models. The shared loss and global-norm series
    interleave them (the discriminator's loss here is scaled by 1e-3, the generator's by 10, so
    the two are easy to tell apart), and judged as one network the discriminator's first layer
    gets 1e-4× the gradient of the generator's last: "vanishing". Eagerly, gradients sampled
    every 8th call of either kind only ever sampled the discriminator's. Each place gets its own
    series and its own sampling, and each model is judged on its own layers."""
    import inspect

    keras.utils.set_random_seed(0)

    def mlp(n_in, n_out):
        return keras.Sequential([keras.Input((n_in,)), keras.layers.Dense(16, activation="tanh"),
                                 keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(n_out)])

    gen, disc = mlp(4, 2), mlp(2, 1)
    g_opt, d_opt = keras.optimizers.SGD(1e-3), keras.optimizers.SGD(1e-3)
    bce = keras.losses.BinaryCrossentropy(from_logits=True)
    real = tf.constant(np.random.default_rng(0).standard_normal((64, 2)).astype(np.float32) * 0.5 + 2.0)

    def step():
        z = tf.random.normal([64, 4])
        with tf.GradientTape() as d_tape:
            real_logits, fake_logits = disc(real), disc(gen(z))
            d_loss = 1e-3 * (bce(tf.ones_like(real_logits), real_logits) + bce(tf.zeros_like(fake_logits), fake_logits))
        d_grads = d_tape.gradient(d_loss, disc.trainable_variables)
        d_opt.apply_gradients(zip(d_grads, disc.trainable_variables))
        with tf.GradientTape() as g_tape:
            fake_logits = disc(gen(z))
            g_loss = 10.0 * bce(tf.ones_like(fake_logits), fake_logits)
        g_grads = g_tape.gradient(g_loss, gen.trainable_variables)
        g_opt.apply_gradients(zip(g_grads, gen.trainable_variables))

    lines, first = inspect.getsourcelines(step)
    d_line = first + next(i for i, text in enumerate(lines) if "d_tape.gradient" in text)
    g_line = first + next(i for i, text in enumerate(lines) if "g_tape.gradient" in text)
    run = tf.function(step) if graph else step
    with watch() as s:
        for _ in range(200):
            run()
    rep = s.report()
    shared = [y for _, y in rep.metrics["loss"]]
    assert min(shared) < 0.01 and max(shared) > 1.0  # as recorded before: both players in one series
    losses = {e["location"]["line"]: e for e in rep.metrics["losses"]}
    assert set(losses) == {d_line, g_line}
    assert all(y < 0.01 for _, y in losses[d_line]["loss"]) and all(y > 1.0 for _, y in losses[g_line]["loss"])
    assert len(losses[d_line]["loss"]) >= 5 and len(losses[g_line]["grad_norm"]) >= 5
    assert all(e["location"]["file"] == __file__ for e in rep.metrics["losses"])
    if graph:  # judged as one network, the discriminator's first layer "vanishes" against the generator's last
        assert s.hooks["vanishing-gradient"].judge(s.health) is not None
    assert [x.kind for x in rep.signals if x.kind not in ("input-stall",)] == [], [x.message for x in rep.signals]
    import io

    from tflint.profiler.renderers.terminal import TerminalRenderer

    buf = io.StringIO()
    TerminalRenderer(file=buf, width=160).render(rep)
    text = buf.getvalue()
    assert f"loss (test_health.py:{d_line})" in text and f"gradient norm (test_health.py:{g_line})" in text
    from tflint.profiler.renderers.tensorboard import scalar_points

    tags = scalar_points(rep)
    assert f"tflint/loss/test_health.py:{g_line}" in tags and "tflint/loss" not in tags, sorted(tags)
    import jsonschema

    from tests.profile.test_json_schema import documented_schema

    schema = documented_schema()  # a watch() report has no `run`: its `losses` checked alone
    part = {**schema["properties"]["metrics"]["properties"]["losses"], "$defs": schema["$defs"]}
    jsonschema.Draft202012Validator(part).validate(json.loads(rep.to_json())["metrics"]["losses"])


def test_models_trained_one_after_another_each_get_their_stall_judged():
    """Two models fitted in turn (TensorFlow's regression tutorial fits four) train disjoint
    variables at two places, like a GAN's players, but one after the other: each model's loss is
    judged, and the second one's stall (learning rate 0) is found at its own fit call."""
    import inspect

    rng = np.random.default_rng(0)
    x = rng.standard_normal((320, 8)).astype(np.float32)
    y = x[:, :1] + x[:, 1:2]

    def model():
        m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
        return m

    keras.utils.set_random_seed(0)
    first, second = model(), model()
    first.compile(keras.optimizers.SGD(0.05), "mse")
    second.compile(keras.optimizers.SGD(0.0), "mse")

    def train():
        first.fit(x, y, batch_size=320, epochs=80, verbose=0)
        second.fit(x, y, batch_size=320, epochs=80, verbose=0)

    lines, start = inspect.getsourcelines(train)
    second_line = start + next(i for i, text in enumerate(lines) if "second.fit" in text)
    with watch() as s:
        train()
    assert s.health.separate_losses()
    (sig,) = [x for x in s.report().signals if x.kind == "loss-stall"]
    assert sig.location.line == second_line, sig.location
    assert "lr-zero" in {c["kind"] for c in sig.details["causes"]}


@pytest.mark.parametrize("graph", [True, False], ids=["tf.function", "eager"])
def test_two_optimisations_one_after_another_are_judged_apart(graph):
    """Two optimisations in turn, of two new variables from one place in the code (TensorFlow's
    style-transfer tutorial optimises a second image): the first converges, the second starts
    from a loss 100x larger and falls by more than half. As one series the loss reads flat; a
    gradient call on variables never differentiated before starts a new part."""
    levels: list[tuple[float, float]] = []

    def make(scale, lr):
        v = tf.Variable(tf.fill([64], 3.0))
        opt = keras.optimizers.Adam(lr)

        def step():
            with tf.GradientTape() as tape:
                loss = scale * (tf.reduce_sum((v - 1.0) ** 2) + 10.0)
            opt.apply_gradients([(tape.gradient(loss, v), v)])
            return loss

        return tf.function(step) if graph else step

    with watch() as s:
        for scale, lr, n in ((1.0, 0.1, 300), (100.0, 0.01, 100)):
            step = make(scale, lr)
            losses = [float(step()) for _ in range(n)]
            levels.append((losses[0], losses[-1]))
    assert levels[0][1] < 0.5 * levels[0][0] and levels[1][1] < 0.5 * levels[1][0]
    pts = s.health.loss.downsample(400)
    assert s.hooks["loss-stall"].judge(pts) is not None  # as one series: "flat"
    assert [x.message for x in s.report().signals if x.kind == "loss-stall"] == []
    assert len(s.health.new_variable_starts) == 1


def test_gradients_with_respect_to_inputs_only_are_not_a_stalled_loss():
    """Saliency maps (TensorFlow's integrated-gradients tutorial): a frozen model, gradients of
    a class probability with respect to the input, 150 times. Nothing is trained; the "loss"
    (the probability) is not meant to fall."""
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4)])
    model.trainable = False

    @tf.function
    def saliency(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            prob = tf.nn.softmax(model(x), axis=-1)[:, 1]
        return tape.gradient(prob, x)

    xs = [tf.random.stateless_uniform((16, 8), seed=(i, 0)) for i in range(5)]
    with watch() as s:
        for i in range(150):
            saliency(xs[i % 5])
    assert s.health.probes and not s.health.probes[0].trains  # probed, for NaN only
    assert len(s.health.loss) == 0 and len(s.health.grad_norm) == 0  # the probability is no loss
    assert [x.kind for x in s.report().signals if x.kind != "input-stall"] == []


def test_each_fit_call_is_judged_on_its_own_for_a_stall():
    """Two ``fit`` calls: the first learns, the second (its learning rate set to 0) cannot. As one
    series the run went down; judged per call, the second call's stall is found, in its steps."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.05), "mse")
    x = np.random.default_rng(0).standard_normal((320, 8)).astype(np.float32)
    y = x[:, :1] + x[:, 1:2]
    with watch() as s:
        model.fit(x, y, batch_size=320, epochs=50, verbose=0)  # 50 steps of one batch
        model.optimizer.learning_rate.assign(0.0)
        model.fit(x, y, batch_size=320, epochs=120, verbose=0)  # 120 more: nothing moves
    hook = s.hooks["loss-stall"]
    assert [st for st, *_ in hook.fit_starts] == [0, 50]
    pts = s.health.loss.downsample(400)
    segs = hook.fit_segments(pts, graph_steps=True)
    assert len(segs) == 2 and max(p[0] for p in segs[0]) <= 50 < min(p[0] for p in segs[1])
    assert hook.judge(pts) is None  # as one series, the loss went down
    (sig,) = [x for x in s.report().signals if x.kind == "loss-stall"]
    assert sig.details["window_steps"][0] > 50 and "lr-zero" in {c["kind"] for c in sig.details["causes"]}


@pytest.mark.parametrize("mode", ["fit", "tf.function", "eager"])
def test_mixed_precision_is_judged_on_the_unscaled_loss_and_gradients(mode):
    """Under ``mixed_float16`` the gradients are of the loss times a scale of 2**15 (``fit`` and
    a custom loop with ``LossScaleOptimizer.scale_loss``); while the scaled gradients overflow
    float16 the optimizer skips the step and halves the scale. The series hold the loss and the
    gradient norms unscaled, the overflowed steps are left out of the norms (one Inf sum would
    lose a layer's series for the rest of the run), the skipped steps are still steps, and none of
    it is a finding."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 16)).astype(np.float32)
    y = x @ rng.standard_normal((16, 1)).astype(np.float32) * 30.0 + 100.0  # large: the first steps overflow
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"),
                                  keras.layers.Dense(1, dtype="float32")])
        with watch() as s:
            if mode == "fit":
                model.compile(keras.optimizers.Adam(1e-2), "mse")
                hist = model.fit(x, y, batch_size=32, epochs=3, verbose=0).history["loss"]
                first_loss, opt = hist[0], model.optimizer
            else:
                opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-2))

                def step(xb, yb):
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_mean(tf.square(model(xb) - yb))
                        scaled = opt.scale_loss(loss)
                    opt.apply_gradients(zip(tape.gradient(scaled, model.trainable_variables), model.trainable_variables))
                    return loss

                step = tf.function(step) if mode == "tf.function" else step
                losses = [float(step(x[i:i + 32], y[i:i + 32])) for _ in range(3) for i in range(0, 1024, 32)]
                first_loss = float(np.mean(losses[:32]))
            scale = float(opt.dynamic_scale.numpy())
            with tf.GradientTape() as tape:
                end_loss = tf.reduce_mean(tf.square(model(x[:32]) - y[:32]))
            end_norm = float(tf.linalg.global_norm(tape.gradient(end_loss, model.trainable_variables)))
        report = s.report()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert scale < 2.0 ** 15  # steps overflowed and were skipped
    assert s.steps.count == 96
    loss = [v for _, v in s.health.loss.downsample(400)]
    assert 0.3 * first_loss < max(loss) < 3.0 * first_loss  # not 2**15 times it
    norms = [v for _, v in s.health.grad_norm.downsample(400)]
    assert len(norms) >= 5 and all(math.isfinite(v) for v in norms)
    assert 0.1 * end_norm < norms[-1] < 10.0 * end_norm, (norms[-1], end_norm, scale)
    assert not [x for x in report.signals if x.kind in ("nan-inf", "exploding-gradient", "loss-stall", "dead-parameter")]


def _line_of(fn, text):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_each_fit_call_is_judged_on_its_own_for_exploding_gradients_and_located_at_its_call():
    """Transfer learning: a head trained on a frozen base whose features are ~1e-6 has tiny
    gradients; after unfreezing, the second ``fit`` trains every layer with ordinary gradients
    that fall. Across the two calls the norm "grows" 10^4-fold; within each it does not. The
    first call's stalled loss (ln 2) is located at the first call, not at the last one."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((640, 16)).astype(np.float32)
    y = (x[:, :1] > 0).astype(np.float32)
    keras.utils.set_random_seed(0)
    base = keras.layers.Dense(32, kernel_initializer=keras.initializers.RandomNormal(stddev=1e-6))
    head = keras.layers.Dense(1, use_bias=False)
    inp = keras.Input((16,))
    model = keras.Model(inp, head(base(inp)))

    def train():
        base.trainable = False
        model.compile(keras.optimizers.Adam(1e-4), keras.losses.BinaryCrossentropy(from_logits=True))
        model.fit(x, y, batch_size=32, epochs=4, verbose=0)  # first fit
        base.trainable = True
        model.compile(keras.optimizers.RMSprop(1e-3), keras.losses.BinaryCrossentropy(from_logits=True))
        return model.fit(x, y, batch_size=32, epochs=5, verbose=0).history["loss"]

    with watch() as s:
        losses = train()
    assert losses[-1] < 0.8 * losses[0]
    mon, hook = s.health, s.hooks["exploding-gradient"]
    pts = [(a, b) for a, b in mon.grad_norm.downsample(400)]
    assert hook._judge_run(mon, None, pts) is not None  # as one series: "explodes"
    report = s.report()
    assert [x for x in report.signals if x.kind == "exploding-gradient"] == []
    (stall,) = [x for x in report.signals if x.kind == "loss-stall"]
    assert stall.location.line == _line_of(train, "# first fit"), stall.location


def test_an_evaluate_before_the_first_fit_does_not_shift_where_fit_begins():
    """``model.evaluate`` before ``fit`` (TensorFlow's transfer-learning tutorial): its batches
    are counted as steps until ``fit``'s loop begins, and the loop's steps count from 0 again. The
    fit starts where the loop's steps do, so a stalled first ``fit`` is judged whole."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((640, 16)).astype(np.float32)
    y = (x[:, :1] > 0).astype(np.float32)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.0), keras.losses.BinaryCrossentropy(from_logits=True))

    def train():
        model.evaluate(x, y, batch_size=32, verbose=0)
        model.fit(x, y, batch_size=32, epochs=4, verbose=0)  # the fit

    with watch() as s:
        train()
    assert [st for st, *_ in s.steps.fit_starts] == [0]
    assert s.steps.fit_starts[0][2][1] == _line_of(train, "# the fit")
    (stall,) = [x for x in s.report().signals if x.kind == "loss-stall"]
    assert stall.details["steps"] >= 60 and stall.location.line == _line_of(train, "# the fit")


def test_a_step_is_attributed_to_the_loop_or_fit_call_that_ran_it():
    """A ``fit`` of 40 steps, then a custom loop of 60 (the memory finding is located by this:
    growth during the ``fit`` belongs to the ``fit``, not to the loop with more steps)."""
    from tests.training_steps import dense_regression

    x, y, model, step = dense_regression(0.01)

    def train():
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)  # fit here
        for i in range(60):
            step(x[i:i + 16], y[i:i + 16])  # loop here

    with watch() as s:
        train()
    assert s.steps.count == 100
    assert s.steps.main_loop().site[1] == _line_of(train, "# loop here")
    assert s.steps.site_at(20)[1] == _line_of(train, "# fit here")
    assert s.steps.site_at(70)[1] == _line_of(train, "# loop here")


def _regression(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((512, 8)).astype(np.float32)
    return x, x @ rng.standard_normal((8, 1)).astype(np.float32) + 3.0


@pytest.mark.parametrize("graph", [True, False], ids=["tf.function", "eager"])
def test_a_gradient_with_respect_to_inputs_is_no_loss_of_its_own(graph):
    """WGAN-GP's gradient penalty: a gradient of the model's output with respect to its input,
    inside the training step. It trains nothing: it is no second loss (as one, its call site made
    the run look like a GAN, whose interleaved losses are not judged, and a stalled loss went
    unreported)."""
    x, y = _regression()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(0.0)

    def step(xb, yb):
        with tf.GradientTape() as tape:
            with tf.GradientTape() as gp_tape:
                gp_tape.watch(xb)
                out = model(xb)
            penalty = tf.reduce_mean(tf.reduce_sum(tf.square(gp_tape.gradient(out, xb)), axis=1))
            loss = tf.reduce_mean(tf.square(out - yb)) + 1e-3 * penalty
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    step = tf.function(step) if graph else step
    with watch() as s:
        for _ in range(16):
            for i in range(0, 512, 32):
                step(tf.constant(x[i:i + 32]), tf.constant(y[i:i + 32]))
    assert not s.health.separate_losses() and len(s.health.loss_sites) == 1
    kinds = {x.kind for x in s.report().signals}
    assert "loss-stall" in kinds and "dead-parameter" in kinds


def test_two_gradient_calls_of_one_model_are_one_optimisation_beside_another_model():
    """Sharpness-aware minimisation takes two gradients of the same variables a step, at two
    places; a second model trained afterwards makes the run's losses "separate". The two places
    sharing variables are one optimisation, judged on the first one's loss: its stall is found."""
    x, y = _regression()
    keras.utils.set_random_seed(0)
    sam = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    opt = keras.optimizers.SGD(0.0)

    @tf.function
    def sam_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(sam(xb) - yb))
        grads = tape.gradient(loss, sam.trainable_variables)
        eps = [0.05 * g / (tf.norm(g) + 1e-12) for g in grads]
        for v, e in zip(sam.trainable_variables, eps):
            v.assign_add(e)
        with tf.GradientTape() as tape:
            loss2 = tf.reduce_mean(tf.square(sam(xb) - yb))
        grads = tape.gradient(loss2, sam.trainable_variables)
        for v, e in zip(sam.trainable_variables, eps):
            v.assign_sub(e)
        opt.apply_gradients(zip(grads, sam.trainable_variables))

    other = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    other.compile(keras.optimizers.SGD(0.01), "mse")

    def train():
        for _ in range(16):
            for i in range(0, 512, 32):
                sam_step(tf.constant(x[i:i + 32]), tf.constant(y[i:i + 32]))  # the SAM steps
        other.fit(x, y, batch_size=32, epochs=2, verbose=0)

    with watch() as s:
        train()
    assert s.health.separate_losses()
    (stall,) = [x for x in s.report().signals if x.kind == "loss-stall"]
    assert "lr-zero" in {c["kind"] for c in stall.details["causes"]}


def test_a_learning_rate_of_zero_is_the_one_of_the_optimizer_that_applied_the_variables():
    """Model A trains with a learning rate of 0, then model B with 1e-3: A's variables never
    moved because of their own optimizer's rate, which B's does not excuse."""
    x, y = _regression()
    keras.utils.set_random_seed(0)

    def net():
        return keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])

    a, b = net(), net()
    a.compile(keras.optimizers.Adam(0.0), "mse")
    b.compile(keras.optimizers.Adam(1e-3), "mse")
    with watch() as s:
        a.fit(x, y, batch_size=32, epochs=2, verbose=0)
        b.fit(x, y, batch_size=32, epochs=2, verbose=0)
    (dead,) = [x for x in s.report().signals if x.kind == "dead-parameter"]
    assert "learning rate" in dead.message and len(dead.details["variables"]) == 4, dead.message


def test_the_gradient_of_an_unreduced_loss_is_judged_per_element():
    """keras-io's DDIM differentiates an unreduced mean absolute error, [16, 32, 32]: the tape sums
    it, and the gradient is 16,384 times that of the mean (norm ~1e4 and more). Nothing explodes:
    the loss falls, and the norm does not grow."""
    rng = np.random.default_rng(0)
    x = 300.0 * rng.standard_normal((256, 32, 32)).astype(np.float32)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32, 32)), keras.layers.Dense(32)])
    opt = keras.optimizers.Adam(1e-3)

    @tf.function
    def step(xb):
        with tf.GradientTape() as tape:
            loss = keras.losses.mean_absolute_error(xb, model(xb))  # [16, 32]: not reduced
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return tf.linalg.global_norm(grads)

    with watch() as s:
        norms = [float(step(x[i:i + 16])) for _ in range(4) for i in range(0, 256, 16)]
    assert max(norms) > 1e4  # above the absolute limit for a scalar loss
    assert s.health.target_elements == 16 * 32
    assert [x for x in s.report().signals if x.kind == "exploding-gradient"] == []


def test_a_stalled_negative_loss_is_shown_with_its_sign():
    """A negative log-likelihood stalls below 0: the message gives the loss's value, not its
    magnitude."""
    w = tf.Variable(1.0)
    opt = keras.optimizers.SGD(0.0)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = 1e-3 * w * w - 2.0 + 0.01 * tf.random.normal([])
        opt.apply_gradients([(tape.gradient(loss, w), w)])

    with watch() as s:
        for _ in range(200):
            step()
    (stall,) = [x for x in s.report().signals if x.kind == "loss-stall"]
    assert "stays at -1.99" in stall.message or "stays at -2" in stall.message, stall.message


def test_clean_eager_loop_reports_no_training_health_finding():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(1e-2)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((64, 8)).astype(np.float32))
    y = tf.reduce_sum(x, axis=1, keepdims=True)
    with watch() as s:
        for _ in range(120):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x) - y) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
    rep = s.report()
    assert [x.kind for x in rep.signals if x.kind != "input-stall"] == [], [x.message for x in rep.signals]
    assert len(rep.metrics["loss"]) >= 10 and rep.metrics["loss"][-1][1] < rep.metrics["loss"][0][1]
    assert rep.metrics["grad_norm"]["global"]


def test_dead_parameter_with_none_gradient_names_the_static_rule():
    w = tf.Variable(1.0, name="w")
    v = tf.Variable(2.0, name="v")
    opt = keras.optimizers.SGD(0.01)
    with watch() as s:
        for _ in range(24):
            y = v * 3.0  # computed before the tape: v's gradient is None
            with tf.GradientTape() as tape:
                loss = w * w + y
            grads = tape.gradient(loss, [w, v])
            opt.apply_gradients([(g, x) for g, x in zip(grads, [w, v]) if g is not None])
    assert float(v) == 2.0 and float(w) != 1.0
    (sig,) = [x for x in s.report().signals if x.kind == "dead-parameter"]
    d = sig.details
    assert d["variables"] == ["v"] and d["reason"] == "gradient-none" and d["rule"] == "TFL302"
    assert sig.location.file == __file__


# ------------------------------------------------------------------------------ the probe's cost and inputs
def _probe_ops(fn, *args):
    """The non-constant ops the probe added to ``fn``'s graph."""
    graph = fn.get_concrete_function(*args).graph
    return [op for op in graph.get_operations() if op.name.startswith("tflint_health") and op.type != "Const"
            and not (op.type == "Placeholder" and op.outputs[0].dtype == tf.resource)]


def _relu_mlp_step():
    """Three 4x4 ReLU layers and a traced SGD step on them: (variables, step)."""
    ws = [tf.Variable(tf.ones([4, 4]) * 0.1, name=f"w{i}") for i in range(3)]

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            h = x
            for w in ws:
                h = tf.nn.relu(h @ w)
            loss = tf.reduce_mean((h - y) ** 2)
        grads = tape.gradient(loss, ws)
        for g, w in zip(grads, ws):
            w.assign_sub(0.01 * g)
        return loss

    return ws, step


def test_the_probe_adds_a_handful_of_ops_per_step():
    """Per step the probe costs one reduction per gradient and per tracked tensor plus a fixed
    few ops (the overhead budget of bench/profile_overhead.py rests on this count)."""
    ws, step = _relu_mlp_step()
    x, y = tf.ones([2, 4]), tf.zeros([2, 4])
    with watch() as s:
        for _ in range(3):
            step(x, y)
        (probe,) = s.health.probes
        roles = [m["role"] for m in probe.tensors]
        tracked = [m["tensor"].op.type for m in probe.tensors[1 + len(ws):]]
        ops = _probe_ops(step, x, y)
    # the inputs x and y; not the square (it can only overflow, like the matmuls), the mean's
    # division by a constant count, or the gradient's pow(x, 1)
    assert tracked == ["Placeholder", "Placeholder"], (roles, tracked)
    per_tensor = [op for op in ops if op.type in ("L2Loss", "Sum")]
    assert len(per_tensor) == len(ws) + len(tracked)
    assert len(ops) - len(per_tensor) <= 10, sorted(op.type for op in ops)
    # no control flow, and no SelectV2 (on CPU one costs about as much as the rest of the probe)
    assert not [op for op in ops if op.type in ("Switch", "Merge", "If", "StatelessIf", "Select", "SelectV2")]


def test_powers_that_can_make_nan_from_finite_values_are_tracked():
    """``x ** 0.5`` (NaN for x < 0) and ``x ** -1`` (Inf at 0) are tracked; ``x ** 3`` can only
    overflow, like a product, and is not."""
    w = tf.Variable(tf.ones([4]), name="w")

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum((x * w) ** 0.5 + (x + w) ** -1.0 + (x - w) ** 3)
        w.assign_sub(0.01 * tape.gradient(loss, w))
        return loss

    x = tf.ones([4]) * 2.0
    with watch() as s:
        step(x)
        (probe,) = s.health.probes
        tracked = [m["tensor"].op for m in probe.tensors[2:]]
    # forward exponents 0.5, -1 and 3; the gradients' are 0.5 - 1, -1 - 1 and 3 - 1
    exponents = sorted({float(nan_inf._constant(op.inputs[1])) for op in tracked if op.type == "Pow"})
    assert exponents == [-2.0, -1.0, -0.5, 0.5], exponents


def test_a_masked_log_does_not_take_the_blame_for_a_later_nan():
    """``tf.where(x > 0, log(x), 0)`` has -inf in its masked branch from the first step, which
    never reaches the loss; the NaN that does, later, comes from the sqrt."""
    w = tf.Variable(tf.fill([4], 1.0), name="w")
    opt = keras.optimizers.SGD(0.1)

    @tf.function
    def step(x, k):
        with tf.GradientTape() as tape:
            safe = tf.where(x > 0, tf.math.log(tf.abs(x)), tf.zeros_like(x))
            loss = tf.reduce_mean(tf.stop_gradient(safe) * w) - tf.reduce_mean(tf.sqrt(w * k))
        grads = tape.gradient(loss, [w])
        opt.apply_gradients(zip(grads, [w]))
        return loss

    x = tf.constant([0.0, 1.0, 2.0, 3.0])
    with watch(signals={"nan-inf"}) as s:
        for i in range(40):
            step(x, tf.constant(1.0 if i < 30 else 0.0))
    (sig,) = [x for x in s.report().signals if x.kind == "nan-inf"]
    assert sig.details["step"] == 31 and sig.details["forward_op"] == "Sqrt", sig.details


def test_probes_of_functions_that_do_not_run_are_not_read_again(monkeypatch):
    """Each read of a probe is an eager op and a host copy (~150-230 µs right after a step): a
    run that traced several steps reads, per step tick, only the probes of the functions that
    ran since their last read; the final read still takes every probe."""
    from tflint.runtime import health

    reads = {}
    plain_numpy = health.Cell.numpy

    def counting_numpy(cell):
        reads[id(cell)] = reads.get(id(cell), 0) + 1
        return plain_numpy(cell)

    monkeypatch.setattr(health.Cell, "numpy", counting_numpy)
    monkeypatch.setattr(health, "STALE_READ_S", 1e9)  # a slow machine: no read for staleness alone
    w = tf.Variable(1.0, name="w")

    def make_step():
        @tf.function
        def step(x):
            with tf.GradientTape() as tape:
                loss = (w * x - 1.0) ** 2
            w.assign_sub(0.01 * tape.gradient(loss, w))
            return loss
        return step

    steps = [make_step() for _ in range(4)]
    with watch(signals={"dead-parameter", "loss-stall"}) as s:
        for step in steps:
            step(tf.constant(1.0))
        active = steps[-1]
        for _ in range(120):
            active(tf.constant(1.0))
        probes = list(s.health.probes)
        during = {p.pid: reads.get(id(p.status), 0) for p in probes}
        report = s.report()
    assert len(probes) == 4
    *idle, busy = probes
    assert during[busy.pid] >= 10, during  # read every few steps: the loss series
    assert all(during[p.pid] <= 1 for p in idle), during  # once after their only call, at most
    assert all(reads[id(p.status)] == during[p.pid] + 1 for p in probes)  # the final read: every probe
    assert busy.calls == 121 and [p.calls for p in idle] == [1, 1, 1]
    assert report is not None


def _keras_step(loss_of):
    """A tf.function training step of a one-unit Dense model whose loss is ``loss_of(y, pred)``."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    opt = keras.optimizers.SGD(0.01)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_of(y, model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def test_a_means_gradient_is_not_tracked_and_a_forward_division_by_a_count_is():
    """The gradient of a mean divides the upstream gradient, broadcast to the input's shape, by
    the input's element count: it cannot make NaN/Inf from finite values, even for an empty
    batch (nothing is left to divide), so the probe spends no op on it; a division by a count
    written in the forward pass (0 / 0 for an empty batch) is still tracked."""
    x = tf.zeros([0, 3])
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_mean(x)
    g = tape.gradient(loss, x)
    assert np.isnan(loss.numpy()) and g.shape == (0, 3)  # the forward mean is NaN, its gradient empty
    assert np.isnan((tf.reduce_sum(x) / tf.cast(tf.size(x), tf.float32)).numpy())

    mse = _keras_step(keras.losses.MeanSquaredError())
    w = tf.Variable(tf.ones([3, 1]))

    @tf.function(input_signature=[tf.TensorSpec([None, 3]), tf.TensorSpec([None, 1])])  # a count known only at run time
    def by_count(x, y):
        with tf.GradientTape() as tape:
            p = x @ w
            loss = tf.reduce_sum((y - p) ** 2) / tf.cast(tf.size(p), tf.float32)
        w.assign_sub(0.01 * tape.gradient(loss, w))
        return loss

    x, y = tf.ones([8, 3]), tf.ones([8, 1])
    with watch() as s:
        mse(x, y)
        by_count(x, y)
        tracked = [[m["op"] for m in p.tensors[1 + p.layout[0]:]] for p in s.health.probes]
    assert not [op.name for op in tracked[0] if op.type in ("RealDiv", "BroadcastTo", "Cast")], [
        op.name for op in tracked[0]]
    # the forward division is the loss; its inputs, the count's Cast included, are tracked
    assert [op.type for op in tracked[1] if not op.name.startswith("gradient_tape/")] == ["Placeholder"] * 2 + [
        "Sum", "Cast"], [op.name for op in tracked[1]]


def _label_layout(loss_of, steps=3, probes=None):
    """``(label entries in the probe, (smallest label, largest, steps))`` for a tf.function step
    whose loss is ``loss_of(y, pred)`` (its probe appended to ``probes`` when given)."""
    step = _keras_step(loss_of)
    x = tf.ones([8, 3])
    with watch() as s:
        for i in range(steps):
            step(x, tf.fill([8, 1], float(i % 2 + 2)))
        s.health._read_probes(s.health.probes)
        (probe,) = s.health.probes
        if probes is not None:
            probes.append(probe)
        return probe.layout[2], probe.labels


def test_labels_come_from_the_data_and_must_reach_the_loss():
    mse = keras.losses.MeanSquaredError()
    bce = keras.losses.BinaryCrossentropy(from_logits=True)

    class IgnoresTargets(keras.losses.Loss):  # the dummy-target idiom: y_true is never used
        def call(self, y_true, y_pred):
            return tf.reduce_mean(y_pred ** 2)

    nl, labels = _label_layout(lambda y, p: mse(tf.cast(y, tf.float32), p), steps=4)
    assert nl == 2 and labels == (2.0, 3.0, 4)  # labels 2, 3, 2, 3: each batch constant, the run not
    nl, labels = _label_layout(lambda y, p: mse(y[:, :0] + 4.0 + tf.zeros_like(p), p), steps=4)
    assert nl == 0  # built from constants, not read from the data
    assert _label_layout(lambda y, p: bce(tf.ones_like(p), p))[0] == 0  # a GAN's targets
    assert _label_layout(lambda y, p: IgnoresTargets()(y, p))[0] == 0
    assert _label_layout(lambda y, p: tf.reduce_mean((y - p) ** 2))[0] == 0  # no Keras loss: not seen


def test_labels_that_are_a_tracked_input_cost_four_ops_and_locate_a_nan_label():
    """The label range joins the probe's one pack and its one ``ResourceScatterMin``; labels that
    are a tracked input are not summed as well: ``reduce_min`` and ``reduce_max`` propagate NaN,
    so the range says when they stop being finite, and a NaN label is blamed on the input data at
    the step it came in."""
    assert np.isnan(tf.reduce_min([1.0, np.nan, 2.0]).numpy()) and np.isnan(tf.reduce_max([np.nan, 1.0]).numpy())
    step = _keras_step(keras.losses.MeanSquaredError())
    x, good = tf.ones([8, 3]), tf.fill([8, 1], 2.0)
    bad = tf.tensor_scatter_nd_update(good, [[5, 0]], [np.nan])
    with watch() as s:
        for i in range(12):
            step(x, bad if i == 9 else good)
        (probe,) = s.health.probes
        ops = _probe_ops(step, x, good)
    roles = [m["role"] for m in probe.tensors]
    assert roles.count("the input data") == 2 and probe.layout[2] == 2
    sums = [op for op in ops if op.type == "Sum"]
    assert len(sums) == 1 and sums[0].inputs[0].op.type == "Placeholder"  # x's; y's range stands for it
    assert sorted(op.type for op in ops if op.type in ("Min", "Max", "ResourceScatterMin")) == [
        "Max", "Min", "ResourceScatterMin"]
    (sig,) = [x for x in s.report().signals if x.kind == "nan-inf"]
    assert sig.details["step"] == 10 and sig.details["op"] == "Placeholder", sig.details
    assert "input data" in sig.details["cause"]


def test_a_large_model_keeps_the_label_range_of_every_step(monkeypatch):
    """Above COND_MIN_ELEMENTS the gradient norms are sampled (steps 1, 33, 65), but the labels'
    range is not: here every sampled step has label 2, and the odd calls' 3 must still count, or
    labels that repeat with the batch order would be reported as constant."""
    from tflint.runtime import health

    monkeypatch.setattr(health, "COND_MIN_ELEMENTS", 1)
    mse = keras.losses.MeanSquaredError()
    probes = []
    nl, labels = _label_layout(lambda y, p: mse(y, p), steps=70, probes=probes)
    assert probes[0].sampled_gradients and probes[0].sample_every == health.LARGE_SAMPLE_EVERY == 32
    assert probes[0].last_sums[2] == 3  # norms taken at steps 1, 33 and 65 only
    assert nl == 2 and labels == (2.0, 3.0, 70), labels


def test_sampled_gradients_of_a_large_model_still_find_the_backward_origin(monkeypatch):
    """Above COND_MIN_ELEMENTS the gradients are checked every LARGE_SAMPLE_EVERY steps; the
    sqrt's infinite gradient at step 31 is still named, at its own step, when the loss goes NaN
    after."""
    from tflint.runtime import health

    monkeypatch.setattr(health, "COND_MIN_ELEMENTS", 1)
    with watch() as s:
        _nan_function_run()
    assert s.health.probes[0].sampled_gradients
    (sig,) = [x for x in s.report().signals if x.kind == "nan-inf"]
    d = sig.details
    assert d["origin_step"] == 31 and d["step"] >= 31, d
    assert d["op"] == "SqrtGrad" and d["forward_op"] == "Sqrt"


def test_the_sampled_probe_of_a_large_model_adds_one_cond_and_no_squeeze(monkeypatch):
    """Above COND_MIN_ELEMENTS the norms are under one cond on the step number; the step read
    has a static shape, so the cond's predicate needs no Squeeze (an op on every step)."""
    from tflint.runtime import health

    monkeypatch.setattr(health, "COND_MIN_ELEMENTS", 1)
    _, step = _relu_mlp_step()
    x, y = tf.ones([2, 4]), tf.zeros([2, 4])
    with watch() as s:
        step(x, y)
        assert s.health.probes[0].sampled_gradients
        types = [op.type for op in _probe_ops(step, x, y)]
    assert types.count("StatelessIf") + types.count("If") == 1, types
    assert "Squeeze" not in types, types
    assert "L2Loss" not in types  # the norms are inside the cond's branch


def test_the_sampled_probe_keeps_its_every_step_part_off_the_backward_pass(monkeypatch):
    """Above COND_MIN_ELEMENTS the loss's pack and latch do not wait for any gradient: they run
    while the backward pass does, and on the steps that take no norms only the cond's Switches
    follow the last gradient (measured on a ~5 ms ``fit`` step: ~90-150 µs for the whole probe
    against ~170-250 µs with one pack after the gradients)."""
    from tflint.runtime import health

    monkeypatch.setattr(health, "COND_MIN_ELEMENTS", 1)
    _, step = _relu_mlp_step()
    x, y = tf.ones([2, 4]), tf.zeros([2, 4])
    with watch():
        step(x, y)
        ops = _probe_ops(step, x, y)
    graph = ops[0].graph
    every_step = [op for op in ops if op.type in ("ResourceScatterAdd", "ResourceScatterMin")]
    assert len(every_step) == 2, [op.type for op in ops]
    for op in every_step:
        upstream = health.ancestor_ops(list(op.inputs), graph)
        assert not [o.name for o in upstream if "gradient" in o.name.lower()], op.name


def test_timed_reads_of_health_and_input_share_one_clock_tick(monkeypatch):
    """After the dense first steps, the training-health probes and the input hook's in-graph
    totals are read on one clock grid, in the same per-step call: Python wakes up (cold, right
    after a step) once per tick, not once for each hook at a time of its own."""
    from tflint.runtime import health, input as input_hook
    from tflint.runtime.hookbase import next_tick

    interval = 0.05
    monkeypatch.setattr(health, "DENSE_READ_STEPS", 0)
    monkeypatch.setattr(health, "READ_INTERVAL_S", interval)
    monkeypatch.setattr(input_hook, "READ_INTERVAL_S", interval)
    for now in (0.0, 0.01, 0.024, 0.025, 0.026, 1.2345):  # half an interval to one and a half later
        tick = next_tick(now, interval)
        assert interval / 2 < tick - now <= 1.5 * interval and abs(tick / interval - round(tick / interval)) < 1e-9
    w = tf.Variable(tf.ones([4, 1]))
    ds = tf.data.Dataset.from_tensor_slices(tf.ones([64, 4])).batch(8).repeat()

    @tf.function
    def train(it):
        x = next(it)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(x @ w) * 1e-3
        w.assign_sub(1e-3 * tape.gradient(loss, w))
        return loss

    calls: list[list[str]] = []
    with watch(signals={"input-stall", "loss-stall"}) as s:
        plain_on_step, plain_read = s._on_step, s.health._read_probes
        plain_totals = s.input._graph_totals

        def on_step(step, now):
            calls.append([])
            plain_on_step(step, now)

        def read_probes(probes, final=False, now=None):
            if calls and not final:
                calls[-1].append("health")
            plain_read(probes, final=final, now=now)

        def graph_totals(force=False):
            if calls and force:
                calls[-1].append("input")
            return plain_totals(force)

        monkeypatch.setattr(s, "_on_step", on_step)
        monkeypatch.setattr(s.health, "_read_probes", read_probes)
        monkeypatch.setattr(s.input, "_graph_totals", graph_totals)
        it = iter(ds)
        t_end = time.perf_counter() + 1.0
        while time.perf_counter() < t_end:
            train(it)
            time.sleep(0.002)
    health_calls = [c for c in calls if "health" in c]
    assert len(health_calls) >= 8, calls  # ~1 s of steps, a tick every ~0.05 s
    # every timed health read came with a read of the input totals in the same call (the
    # first ticks may differ: the input window opens at step 2)
    assert sum("input" in c for c in health_calls[2:]) == len(health_calls) - 2, health_calls
