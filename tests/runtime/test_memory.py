"""Memory sampling and the growth trend, on real TensorFlow (CPU)."""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tflint.runtime import watch  # noqa: E402
from tflint.runtime.memory import analyze, analyze_runs, mann_kendall_z, theil_sen  # noqa: E402

HERE = __file__
MiB = 1024 * 1024


def here() -> int:
    return sys._getframe(1).f_lineno


@tf.function
def train_step(x):
    return tf.reduce_sum(x * 2.0)


def test_leaking_list_of_arrays_is_reported_with_rate_projection_and_cause():
    x = tf.ones([16])
    kept = []
    with watch(signals={"memory-growth"}) as s:
        for _ in range(400):
            line = here() + 1
            train_step(x)
            kept.append(np.ones(128 * 1024, np.float32) + len(kept))  # 512 KiB per step
    rep = s.report()
    sigs = rep.signals_of("memory-growth")
    assert len(sigs) == 1, rep.metrics["memory_trend"]
    sig = sigs[0]
    slope = sig.details["slope_bytes_per_step"]
    assert 0.8 * 512 * 1024 < slope < 1.3 * 512 * 1024
    # projected no further than observed: as many steps again as the run had
    assert sig.details["projected_bytes_after_steps"]["steps"] == 400
    assert sig.details["projected_bytes_after_steps"]["bytes"] > 400 * 0.8 * 512 * 1024
    assert sig.location.file == HERE and sig.location.line == line
    kinds = {c["kind"] for c in sig.details["causes"]}
    assert "accumulated-tensors" in kinds
    acc = next(c for c in sig.details["causes"] if c["kind"] == "accumulated-tensors")
    assert (acc["name"], acc["line"], acc["count"]) == ("kept", line + 1, 400)  # measured, with its line
    assert "ndarray" in sig.message and "/step" in sig.message
    del kept


def test_a_growing_list_of_data_is_told_to_be_bounded_and_one_of_results_to_hold_numbers():
    """The fix depends on what the list holds: frames of a replay memory (keras-io's DQN keeps
    100,000) are data to bound; a loss tensor per step is a result to keep as a number."""
    import keras

    for data in (True, False):
        w = tf.Variable(1.0)
        opt = keras.optimizers.SGD(0.01)

        @tf.function
        def update():
            with tf.GradientTape() as tape:
                loss = w * w
            opt.apply_gradients([(tape.gradient(loss, w), w)])
            return loss

        kept = []
        with watch(signals={"memory-growth"}) as s:
            for i in range(200):
                loss = update()
                kept.append(np.full(4096, i, np.uint8) if data else loss)
        (sig,) = s.report().signals_of("memory-growth")
        assert ("deque(maxlen=N)" if data else "float(loss)") in sig.message, sig.message
        del kept


def test_clean_loop_reports_no_growth_but_records_series():
    x = tf.ones([16])
    with watch(signals={"memory-growth"}) as s:
        for _ in range(400):
            train_step(x)
    rep = s.report()
    assert rep.signals_of("memory-growth") == []
    assert len(rep.metrics["host_rss_bytes"]) >= 12
    assert all(v > 0 for _, v in rep.metrics["host_rss_bytes"])
    assert rep.metrics["memory_trend"]["host_rss"]["growth"] is False


def test_live_persistent_tape_named_as_cause():
    x = tf.ones([64, 64])
    w = tf.Variable(tf.ones([64, 64]))
    tapes = []
    with watch(signals={"memory-growth", "none-gradient"}) as s:
        for _ in range(300):
            with tf.GradientTape(persistent=True) as tape:
                y = tf.reduce_sum(x @ w)
            tape.gradient(y, w)
            tapes.append(tape)
            tapes.append(np.ones(64 * 1024, np.float64))  # plus 512 KiB per step
    sig = s.report().signals_of("memory-growth")[0]
    causes = {c["kind"]: c for c in sig.details["causes"]}
    assert causes["persistent-tape"]["count"] == 300
    assert "persistent GradientTape" in sig.message
    del tapes


# ---- the trend on synthetic series (pure function) ---------------------------------------
def _series(n, f):
    return [[i, f(i)] for i in range(n)]


def test_trend_ignores_warmup_spike_and_slow_creep():
    rng = random.Random(1)
    base = 500 * MiB
    # warm-up ramp of 200 MiB over the first 15% then flat with noise
    warm = _series(400, lambda i: base + min(i, 60) * 3.4 * MiB + rng.randint(-MiB, MiB))
    assert analyze(warm)["growth"] is False
    # one big spike
    spike = _series(400, lambda i: base + (300 * MiB if i == 250 else 0) + rng.randint(-MiB, MiB))
    assert analyze(spike)["growth"] is False
    # steady slow creep (0.1 KiB/step): significant but tiny
    creep = _series(400, lambda i: base + i * 100)
    t = analyze(creep)
    assert t["mk_z"] > 3 and t["growth"] is False


def test_trend_ignores_growth_that_levels_off():
    """Shapes measured on short real ``fit`` runs: a rise when a second ``fit`` retraces (or the
    validation and evaluate functions are first traced), then flat; and a rise that slows to a
    creep. The whole window's slope is significant, but over its last third memory is flat."""
    rng = random.Random(3)
    base = 895 * MiB
    # 330 steps: flat, +52 MiB at step 165, +15 MiB over the next 48 steps, then flat (+-2 MiB)
    shift = _series(330, lambda i: base + (52 * MiB if i >= 165 else 0) + min(max(i - 165, 0), 48) * 0.3 * MiB
                    + rng.randint(-2 * MiB, 2 * MiB))
    t = analyze(shift)
    assert t["mk_z"] > 3 and t["slope_bytes_per_step"] > 4 * 1024  # what reported it before
    assert t["growth"] is False and "levelled off" in t["reason"]
    # 825 steps: +110 KiB/step up to step 490, then +24 KiB/step (8 MiB in all)
    slowing = _series(825, lambda i: 700 * MiB + min(i, 490) * 110 * 1024 + max(i - 490, 0) * 24 * 1024
                      + rng.randint(-MiB, MiB))
    assert analyze(slowing)["growth"] is False
    # host RSS (MiB) of a real run: an autoencoder's two fits, 141 steps each; the second fit's
    # pipelines and retrace add ~80 MiB over its first two epochs, then it is flat for 70 steps
    two_fits = [(0, 500), (8, 830), (16, 834), (28, 852), (48, 862), (64, 866), (72, 875), (88, 875), (94, 900),
                (95, 857), (103, 887), (111, 867), (119, 890), (135, 890), (141, 894), (142, 881), (150, 922),
                (158, 916), (166, 923), (182, 924), (188, 935), (197, 937), (205, 939), (213, 962), (221, 962),
                (229, 962), (236, 964), (244, 964), (252, 964), (260, 964), (268, 964), (276, 964), (282, 966)]
    assert analyze([[x, y * MiB] for x, y in two_fits])["growth"] is False


def test_trend_is_judged_per_training_run():
    """A guide that fits four models in turn: memory is flat within each fit, and jumps by
    ~210 MiB when the last, larger model starts, inside the last third of the whole window. Per
    run, that jump is the new run's warm-up. A leak inside one run is still found, and runs too
    short to judge alone (a fit per batch) are judged together."""
    from tflint.runtime.memory import analyze_runs

    rng = random.Random(4)
    # fast steps sampled every 16th (the first three fits), the last model's slow steps each
    steps = list(range(0, 353, 16)) + list(range(353, 403))
    four_fits = [[i, (530 + (6 if i > 96 else 0) + (9 if i > 256 else 0)) * MiB if i <= 352 else
                  (755 + min(i - 353, 8) * 5 + rng.randint(0, 60)) * MiB] for i in steps]
    assert analyze(four_fits)["growth"] is True  # the premise: as one series, it grows
    assert analyze_runs(four_fits, [96, 256, 352])["growth"] is False
    leak_in_last = [[i, (530 + (max(i - 352, 0) * 2.0)) * MiB + rng.randint(-MiB, MiB)] for i in range(0, 503, 2)]
    t = analyze_runs(leak_in_last, [96, 256, 352])
    assert t["growth"] is True and t["window_steps"][0] > 352
    per_batch = [[i, 500 * MiB + i * 256 * 1024] for i in range(400)]
    assert analyze_runs(per_batch, list(range(1, 400)))["growth"] is True


def test_trend_flags_real_growth_and_allocator_steps():
    rng = random.Random(2)
    base = 500 * MiB
    leak = _series(400, lambda i: base + i * 256 * 1024 + rng.randint(-4 * MiB, 4 * MiB))
    t = analyze(leak)
    assert t["growth"] is True and abs(t["slope_bytes_per_step"] - 256 * 1024) < 32 * 1024
    # allocator-style staircase growth: +64 MiB every 50 steps
    stairs = _series(400, lambda i: base + (i // 50) * 64 * MiB)
    assert analyze(stairs)["growth"] is True


def test_theil_sen_and_mann_kendall_basics():
    assert theil_sen([0, 1, 2, 3, 4], [0, 2, 4, 6, 100]) == pytest.approx(2.0)
    assert mann_kendall_z(list(range(30))) > 3
    assert abs(mann_kendall_z([5] * 30)) == 0
    assert analyze([[0, 1], [1, 2]])["growth"] is False


def test_a_rise_over_a_few_steps_is_not_a_per_step_trend():
    """An 18-step run sampled every step (slow steps) whose retraces took 155 MiB: a rise that
    passes every test but the number of steps (longer runs of it were flat)."""
    base = 1000 * 2**20
    pts = [(x, base + 11 * 2**20 * x + random.Random(x).uniform(-2, 2) * 2**20) for x in range(1, 19)]
    r = analyze(pts)
    assert not r["growth"] and r["reason"].startswith("too few steps after warm-up"), r
    longer = [(x, base + 11 * 2**20 * x) for x in range(1, 60)]
    assert analyze(longer)["growth"]


# host RSS (MiB) of a deep-dream loop (3 image sizes x 20 steps of one tf.function; retraces at
# steps 20 and 40), as profiled: a jump and a ramp after each new size, level after ~120 more steps
DEEP_DREAM_RSS = [707, 715, 716, 717, 717, 717, 718, 718, 719, 719, 719, 720, 720, 720, 720, 720, 720, 720, 720, 720,
                  752, 761, 750, 751, 751, 761, 754, 754, 756, 756, 756, 757, 758, 758, 758, 760, 760, 760, 760, 760,
                  806, 813, 817, 825, 826, 834, 836, 837, 837, 838, 838, 838, 839, 843, 844, 850, 851, 851, 852, 852]


def test_memory_after_a_retrace_is_a_warm_up_of_its_own():
    """Each new input size allocates anew for some steps after its trace. Judged over the whole
    run that reads as growth per step ("3.1 MiB/step", in 4 of 5 runs of keras-io's deep_dream);
    judged from each retrace on, each stretch has its own warm-up."""
    pts = [(i + 1, mib * 2**20) for i, mib in enumerate(DEEP_DREAM_RSS)]
    assert analyze_runs(pts, [])["growth"]
    assert not analyze_runs(pts, [20, 40])["growth"]


def test_a_multi_scale_loop_is_not_reported_as_memory_growth():
    model = tf.keras.Sequential([tf.keras.Input((None, None, 3))]
                                + [tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu") for _ in range(3)])

    @tf.function
    def ascent_step(img):
        with tf.GradientTape() as tape:
            tape.watch(img)
            loss = tf.reduce_mean(tf.square(model(img)))
        grads = tape.gradient(loss, img)
        return img + 0.01 * grads / tf.maximum(tf.reduce_mean(tf.abs(grads)), 1e-6)

    img = tf.random.stateless_uniform((1, 64, 64, 3), seed=(0, 0))
    with watch() as s:
        for size in (64, 96, 144):
            img = tf.image.resize(img, (size, size))
            for _ in range(20):
                img = ascent_step(img)
    rep = s.report()
    assert s.retrace.retraces >= 2
    assert rep.signals_of("memory-growth") == [], ([x.message for x in rep.signals_of("memory-growth")],
                                                   rep.metrics["memory_trend"], s.retrace.retraces)
