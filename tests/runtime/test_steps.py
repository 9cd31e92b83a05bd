"""Step counting over every training loop of a process, on real TensorFlow in this process."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from tflint.runtime import watch  # noqa: E402


def _models():
    g = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4)])
    d = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    return g, d


def _update(model, opt, x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(x) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))


def test_eager_gan_with_two_optimizers_counts_one_step_per_iteration():
    g, d = _models()
    d_opt, g_opt = tf.keras.optimizers.Adam(1e-3), tf.keras.optimizers.Adam(1e-3)
    x = tf.zeros([8, 4])
    with watch() as s:
        for _ in range(12):
            _update(d, d_opt, x)
            _update(g, g_opt, x)
    loops = s.steps.summary()["loops"]
    assert [(lp["kind"], lp["steps"], len(lp["optimizers"])) for lp in loops] == [("optimizer", 12, 2)]
    assert s.steps.count == 12


def test_eager_loop_then_a_second_optimizer_loop_are_two_loops():
    g, d = _models()
    opt_a, opt_b = tf.keras.optimizers.SGD(0.1), tf.keras.optimizers.SGD(0.1)
    x = tf.zeros([8, 4])
    with watch() as s:
        for _ in range(7):
            _update(d, opt_a, x)
        for _ in range(5):
            _update(g, opt_b, x)
    loops = s.steps.summary()["loops"]
    assert [(lp["kind"], lp["steps"]) for lp in loops] == [("optimizer", 7), ("optimizer", 5)]
    assert s.report().steps == 12


def test_a_tf_function_without_optimizer_is_not_a_training_loop_once_one_exists():
    g, d = _models()
    opt = tf.keras.optimizers.SGD(0.1)
    x = tf.zeros([8, 4])

    @tf.function
    def evaluate(x):
        return tf.reduce_mean(d(x))

    @tf.function
    def train(x):
        _update(d, opt, x)

    with watch() as s:
        for _ in range(30):
            evaluate(x)  # called more often than the training step
        for _ in range(6):
            train(x)
    summary = s.steps.summary()
    assert [(lp["kind"], lp["name"], lp["steps"]) for lp in summary["loops"]] == [("function", "train", 6)]
    assert summary["steps"] == 6


def test_fit_counts_training_batches_only_not_validation_or_evaluate_batches():
    """Keras builds its test function like its train function, around the same model: its
    validation and ``evaluate`` batches are not training steps, and the time they take is in no
    steady step interval (the first training step after them starts again)."""
    import time

    import numpy as np

    x = np.random.default_rng(0).standard_normal((200, 4)).astype("float32")
    y = x[:, :1] * 2.0

    class SlowValidation(tf.keras.callbacks.Callback):
        def on_test_batch_end(self, batch, logs=None):
            time.sleep(0.05)

    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.SGD(0.01), "mse")
    with watch() as s:
        # 180 training samples in batches of 20: 9 steps per epoch; 20 validation samples (1 batch)
        model.fit(x, y, batch_size=20, epochs=3, validation_split=0.1, verbose=0, callbacks=[SlowValidation()])
        model.evaluate(x, y, batch_size=20, verbose=0)  # 10 more batches of the test function
    summary = s.steps.summary()
    assert [(lp["kind"], lp["steps"]) for lp in summary["loops"]] == [("keras", 27)]
    assert summary["steps"] == 27
    loop = summary["loops"][0]
    assert loop["startup_intervals"] == 3  # the first step, and the first after each validation run
    steady = [dt for _, dt in s.steps.main_loop().series.points]
    assert steady and max(steady) < 0.05, steady  # no interval holds a 50 ms validation batch


def test_fit_with_steps_per_execution_counts_every_step_not_every_call():
    """compile(steps_per_execution=4): each call of the train function runs up to 4 steps (the
    last of an epoch of 21 batches runs 1). Every step is counted, and a step's time is its
    share of the call's."""
    import numpy as np

    x = np.random.default_rng(0).standard_normal((21 * 32, 4)).astype("float32")
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.SGD(0.01), "mse", steps_per_execution=4)
    with watch() as s:
        model.fit(x, x[:, :1], batch_size=32, epochs=3, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 63
    (loop,) = s.steps.summary()["loops"]
    assert loop["steps"] == 63 and s.steps.count == 63
    # 18 calls: the steady intervals are those of ~60 steps, not of ~17 calls
    assert loop["mean_step_time_s"] * 50 <= loop["steady_time_s"], loop


def test_validation_input_waits_are_not_the_training_loops():
    """Validation batches from a slow pipeline: their waits are the test function's, not the
    training loop's start-up waits (which the first step after each validation run begins)."""
    import time

    import numpy as np

    x = np.random.default_rng(0).standard_normal((160, 4)).astype("float32")
    y = x[:, :1]

    def slow(a):
        time.sleep(0.03)
        return a

    def slowly(a, b):
        a = tf.numpy_function(slow, [a], tf.float32)
        return tf.ensure_shape(a, [None, 4]), b

    val = tf.data.Dataset.from_tensor_slices((x[:40], y[:40])).batch(20).map(slowly)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.SGD(0.01), "mse")
    with watch() as s:
        model.fit(x, y, batch_size=20, epochs=3, validation_data=val, verbose=0)  # 2 slow batches per epoch
    (loop,) = s.steps.summary()["loops"]
    assert loop["steps"] == 24
    # 6 validation batches waited >= 0.18 s in all; none of it is the training loop's
    assert loop["startup_input_wait_s"] <= loop["startup_time_s"] and loop["input_wait_s"] < 0.09, loop


def test_without_optimizer_the_most_called_tf_function_counts():
    w = tf.Variable(1.0)

    @tf.function
    def step():
        w.assign_sub(0.01)

    with watch() as s:
        for _ in range(9):
            step()
    summary = s.steps.summary()
    assert [(lp["kind"], lp["name"], lp["steps"]) for lp in summary["loops"]] == [("function", "step", 9)]


def _by_hand(w, x, forward):
    """One step of a loop that updates its variable by hand (no optimizer: TensorFlow's Core API
    guides)."""
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((forward(x) - 1.0) ** 2)
    w.assign_sub(0.01 * tape.gradient(loss, w))


def test_without_optimizer_eager_gradient_steps_outrank_a_function_that_computes_none():
    """An eager loop of gradient steps, with a ``tf.function`` forward pass called in each step
    and in validation, then one call of an exported function: the steps are the gradient steps
    (the most-called function ran 14 times, the export once; neither computes a gradient)."""
    w = tf.Variable(tf.ones([4, 1]))
    forward = tf.function(lambda x: tf.matmul(x, w))
    export = tf.function(lambda x: tf.argmax(forward(x), axis=1))
    x = tf.ones([8, 4])
    with watch() as s:
        for epoch in range(2):
            for _ in range(5):
                _by_hand(w, x, forward)
            for _ in range(2):  # validation
                forward(x)
        export(x)
    loops = s.steps.summary()["loops"]
    assert [(lp["kind"], lp["steps"]) for lp in loops] == [("gradient", 10)]


def test_without_optimizer_a_tf_function_that_computes_gradients_outranks_a_more_called_one():
    w = tf.Variable(tf.ones([4, 1]))
    forward = lambda x: tf.matmul(x, w)  # noqa: E731
    train_step = tf.function(lambda x: _by_hand(w, x, forward))
    test_step = tf.function(forward)
    x = tf.ones([8, 4])
    with watch() as s:
        for _ in range(6):
            train_step(x)
            for _ in range(3):
                test_step(x)
    loops = s.steps.summary()["loops"]
    assert [(lp["kind"], lp["steps"]) for lp in loops] == [("function", 6)]


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_gradients_with_respect_to_inputs_only_are_not_training_steps(graph):
    """Grad-CAM over 100 images (keras-io's, over 40): gradients of a class score with respect to a layer's
    output, no variable, no optimizer. They are not training steps, and the list of heatmaps the
    program builds is its output, not memory that grows with the steps."""
    import numpy as np

    inp = tf.keras.Input((8,))
    hidden = tf.keras.layers.Dense(16, activation="relu")(inp)
    model = tf.keras.Model(inp, [hidden, tf.keras.layers.Dense(3)(hidden)])

    def cam(x):
        with tf.GradientTape() as tape:
            features, preds = model(x)
            score = preds[:, 1]
        return tape.gradient(score, features) * features

    run = tf.function(cam) if graph else cam
    heatmaps = []
    with watch() as s:
        for i in range(100):  # past the first 64 calls: steady calls are counted in batches
            heatmaps.append(run(tf.random.stateless_normal((1, 8), seed=(i, 0))).numpy())
    assert len(heatmaps) == 100
    rep = s.report()
    if graph:  # a function that computes no gradient of a variable: a forward function, not a step
        assert s.steps.primary is None or s.steps.primary.prio < 1
    else:
        assert rep.steps == 0
    assert rep.signals_of("memory-growth") == [], [x.message for x in rep.signals_of("memory-growth")]


def test_tf_function_recreated_every_step_is_one_loop_with_every_step():
    g, d = _models()
    opt = tf.keras.optimizers.SGD(0.1)
    x = tf.zeros([8, 4])

    def train(x):
        _update(d, opt, x)

    with watch(signals={"retrace"}) as s:
        for _ in range(80):  # more function objects than there are loop slots
            tf.function(train)(x)
    loops = s.steps.summary()["loops"]
    assert [(lp["kind"], lp["name"], lp["steps"]) for lp in loops] == [("function", "train", 80)]


def test_fetches_with_no_step_between_them_are_counted_without_waiting_for_a_step(monkeypatch):
    """An eager evaluation after steady training steps: its fetches are logged while the loop's
    steps are, but never more than a few at a time, and none is lost."""
    from tflint.runtime import steps as steps_mod

    monkeypatch.setattr(steps_mod, "BATCH_AFTER", 4)
    ds = tf.data.Dataset.from_tensor_slices(tf.ones([64, 4])).batch(8).repeat()
    step = tf.function(lambda x: tf.reduce_sum(x))
    with watch(signals={"input-stall"}) as s:
        it = iter(ds)
        for _ in range(20):
            step(next(it))
        assert s.steps._fast_fn is step
        before = s.input.eager_count + sum(1 for _, _, i in s.steps._pending if i is not None)
        longest = 0
        for x in ds.take(200):  # no step in between
            longest = max(longest, len(s.steps._pending))
        assert 0 < longest <= steps_mod.MAX_LOGGED
        s.input.wait_now()
        assert s.input.eager_count == before + 200
        assert s.steps.count == 20


def test_steady_steps_counted_in_batches_give_every_figure_of_step_by_step_counting(monkeypatch):
    """Past its first steps a loop's steps and the eager fetches between them are logged and
    counted in batches (warm caches); the count, the intervals and the input wait are those of
    counting each step as it happens, and a reader in the middle of a batch sees every step
    and every fetch so far."""
    from tflint.runtime import steps as steps_mod

    def run(batch_after):
        monkeypatch.setattr(steps_mod, "BATCH_AFTER", batch_after)
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
        opt = tf.keras.optimizers.SGD(0.01)
        ds = tf.data.Dataset.from_tensor_slices(tf.ones([64, 4])).batch(8).repeat()

        @tf.function
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(model(x) ** 2)
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        seen = []
        with watch() as s:
            it = iter(ds)
            for i in range(1, 204):
                step(next(it))
                if i == 69:
                    logged = s.steps._pending
                    batched = (s.steps._fast_fn is step and any(it is None for _, _, it in logged)
                               and any(it is not None for _, _, it in logged))
                if i in (70, 101, 150):
                    s.input.wait_now()  # a reader of the wait: every fetch so far is counted
                    seen.append(s.input.eager_count)
                    seen.append(s.steps.count)
            s.steps.finish()
            (loop,) = s.steps.loops()
            fetch_wait = s.input.eager_wait
        return seen, loop, fetch_wait, s.steps.count, batched

    for batch_after in (10**9, 4):  # step by step, then batched from the 4th step
        seen, loop, fetch_wait, count, batched = run(batch_after)
        assert batched == (batch_after == 4)
        assert seen == [70, 70, 101, 101, 150, 150] and count == 203 and loop.n == 203
        assert loop.series.count == 202  # one interval per step after the first
        assert loop.total == pytest.approx(loop.last - loop.first, rel=1e-9)
        # every fetch's wait is attributed: the start-up interval's and the steady ones
        assert loop.steady_wait_s + loop.startup_wait_s == pytest.approx(fetch_wait, rel=1e-6, abs=1e-9)


def test_per_step_handlers_run_on_their_clock_after_the_first_steps():
    """Memory samples and eager input-wait windows follow the step count only for the first
    DENSE_STEPS steps; after that, fast steps do not call the due handlers every few steps."""
    import time

    from tflint.runtime.hookbase import DENSE_STEPS
    from tflint.runtime.memory import MIN_INTERVAL_S

    n = DENSE_STEPS + 1200
    ds = tf.data.Dataset.from_tensor_slices(tf.ones([64, 4])).batch(8).repeat()
    step = tf.function(lambda x: tf.reduce_sum(x))
    with watch(signals={"memory-growth", "input-stall"}) as s:
        calls = []
        inner = s._on_step

        def counted(at, now):
            calls.append(at)
            inner(at, now)

        s._on_step = counted
        it = iter(ds)
        t0 = None
        for i in range(n):
            step(next(it))
            if i == DENSE_STEPS + 100:
                t0, first = time.perf_counter(), len(calls)
        elapsed = time.perf_counter() - t0
        late = len(calls) - first
        rss = list(s.memory.rss.points)
    # the clock alone: at most one call per memory tick (input windows close on a coarser grid)
    assert late <= elapsed / MIN_INTERVAL_S + 3, (late, elapsed)
    # the first steps keep their resolution: a memory sample every 16 steps
    assert sum(1 for x, _ in rss if x <= DENSE_STEPS) >= DENSE_STEPS // 16 - 2
