"""Every rule's fix, proven three ways.

For each case: ``--fix`` (through :func:`tflint.check.fix.fix_file`, unsafe fixes included)
rewrites the program as expected; the fixed text parses (``ast`` and libcst), is stable under a
second run and no longer reports the rule; and, run under real TensorFlow, the original shows
the misbehaviour the rule describes while the fixed program does not.

Programs run in-process (small tensors), except the tf.distribute ones, which need two logical
CPU devices configured before TensorFlow starts and so run in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import Callable

import pytest

from tflint.check.fix import fix_file, parses
from tflint.check.engine import lint_text
from tflint.rules import all_rules

FIXABLE = sorted(r.code for r in all_rules() if r.fixable)


@dataclass
class Case:
    code: str
    before: str
    after: str
    # observe(namespace after running the program) -> a value; the premise: observe(before)
    # shows the bug, observe(after) does not (checked by ``bug``)
    observe: Callable[[dict], object] | None = None
    bug: Callable[[object], bool] | None = None
    subprocess: bool = False


def fix(code: str, source: str) -> str:
    out = fix_file("example.py", source.encode(), frozenset({code}), unsafe=True)
    assert out.problem is None, out.problem
    return out.new_text if out.new_raw is not None else source


def run(source: str, observe: Callable[[dict], object]) -> object:
    ns: dict = {"__name__": "__fixed__"}
    exec(compile(source, "<program>", "exec"), ns)
    return observe(ns)


def run_subprocess(source: str) -> str:
    prelude = textwrap.dedent(
        """
        import os
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", prelude + source], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def d(src: str) -> str:
    return textwrap.dedent(src).lstrip("\n")


CASES = [
    Case(
        "TFL101",
        d(
            """
            import tensorflow as tf

            calls = []

            @tf.function
            def step(x):
                print("step", x)
                return x + 1

            for i in range(3):
                step(tf.constant(i))
            """
        ),
        d(
            """
            import tensorflow as tf

            calls = []

            @tf.function
            def step(x):
                tf.print("step", x)
                return x + 1

            for i in range(3):
                step(tf.constant(i))
            """
        ),
        # the observation is the number of printed lines, read from the captured output below
    ),
    Case(
        "TFL104",
        d(
            """
            import random
            import tensorflow as tf

            @tf.function
            def jitter(x):
                return x * random.uniform(0.9, 1.1)

            draws = [float(jitter(tf.constant(1.0))) for _ in range(5)]
            """
        ),
        d(
            """
            import random
            import tensorflow as tf

            @tf.function
            def jitter(x):
                return x * tf.random.uniform([], 0.9, 1.1)

            draws = [float(jitter(tf.constant(1.0))) for _ in range(5)]
            """
        ),
        observe=lambda ns: len(set(ns["draws"])),
        bug=lambda distinct: distinct == 1,
    ),
    Case(
        "TFL105",
        d(
            """
            import time
            import tensorflow as tf

            @tf.function
            def stamp(x):
                return x + time.time()

            reads = []
            for _ in range(3):
                reads.append(float(stamp(tf.constant(0.0, tf.float64))))
                time.sleep(0.02)
            """
        ),
        d(
            """
            import time
            import tensorflow as tf

            @tf.function
            def stamp(x):
                return x + tf.timestamp()

            reads = []
            for _ in range(3):
                reads.append(float(stamp(tf.constant(0.0, tf.float64))))
                time.sleep(0.02)
            """
        ),
        observe=lambda ns: len(set(ns["reads"])),
        bug=lambda distinct: distinct == 1,
    ),
    Case(
        "TFL201",
        d(
            """
            import tensorflow as tf

            @tf.function
            def train_step(x, step):
                return x * tf.cast(step, tf.float32)

            for step in range(6):
                train_step(tf.ones([2]), step)
            """
        ),
        d(
            """
            import tensorflow as tf

            @tf.function
            def train_step(x, step):
                return x * tf.cast(step, tf.float32)

            for step in range(6):
                train_step(tf.ones([2]), tf.constant(step))
            """
        ),
        observe=lambda ns: ns["train_step"].experimental_get_tracing_count(),
        bug=lambda traces: traces > 1,
    ),
    Case(
        "TFL202",
        d(
            """
            import tensorflow as tf

            traces = []

            def double(x):
                traces.append(1)
                return x * 2

            for i in range(4):
                fast = tf.function(double)
                fast(tf.constant(1.0))
            """
        ),
        d(
            """
            import tensorflow as tf

            traces = []

            def double(x):
                traces.append(1)
                return x * 2

            fast = tf.function(double)
            for i in range(4):
                fast(tf.constant(1.0))
            """
        ),
        observe=lambda ns: len(ns["traces"]),
        bug=lambda traces: traces > 1,
    ),
    Case(
        "TFL203",
        d(
            """
            import time
            import numpy as np
            import keras

            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
            batches = [np.full((2, 4), i, dtype="float32") for i in range(12)]
            outputs = []
            start = time.perf_counter()
            for xb in batches:
                outputs.append(np.asarray(model.predict(xb, verbose=0)))
            elapsed = time.perf_counter() - start
            reference = np.asarray(model(np.stack(batches).reshape(-1, 4), training=False)).reshape(12, 2, 3)
            """
        ),
        d(
            """
            import time
            import numpy as np
            import keras

            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
            batches = [np.full((2, 4), i, dtype="float32") for i in range(12)]
            outputs = []
            start = time.perf_counter()
            for xb in batches:
                outputs.append(np.asarray(model.predict_on_batch(xb)))
            elapsed = time.perf_counter() - start
            reference = np.asarray(model(np.stack(batches).reshape(-1, 4), training=False)).reshape(12, 2, 3)
            """
        ),
        observe=lambda ns: (ns["elapsed"], bool(_allclose(ns["outputs"], ns["reference"]))),
    ),
    Case(
        "TFL204",
        FIT_PER_BATCH := d(
            """
            import time
            import numpy as np
            import keras

            keras.utils.set_random_seed(0)
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
            model.compile(optimizer="sgd", loss="mse")
            x = np.linspace(-1, 1, 96 * 4, dtype="float32").reshape(96, 4)
            y = np.cos(x[:, :3])
            model.fit(x[:8], y[:8], epochs=1, verbose=0)
            start = time.perf_counter()
            for i in range(0, 96, 8):
                model.fit(x[i:i + 8], y[i:i + 8], epochs=1, verbose=0)
            elapsed = time.perf_counter() - start
            """
        ),
        FIT_PER_BATCH.replace(
            "model.fit(x[i:i + 8], y[i:i + 8], epochs=1, verbose=0)", "model.train_on_batch(x[i:i + 8], y[i:i + 8])"
        ),
        observe=lambda ns: (ns["elapsed"], [w.copy() for w in ns["model"].get_weights()]),
    ),
    Case(  # the premise (two fresh interpreters) is in tests/premises/test_catalog_v2.py
        "TFL609",
        d(
            """
            import tensorflow as tf

            tf.random.set_seed(0)
            model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
            """
        ),
        d(
            """
            import tensorflow as tf

            tf.keras.utils.set_random_seed(0)
            model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
            """
        ),
    ),
    Case(
        "TFL301",
        d(
            """
            import tensorflow as tf

            x = tf.constant([1.0, 2.0])
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(x ** 2)
            dy_dx = tape.gradient(y, x)
            """
        ),
        d(
            """
            import tensorflow as tf

            x = tf.constant([1.0, 2.0])
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.reduce_sum(x ** 2)
            dy_dx = tape.gradient(y, x)
            """
        ),
        observe=lambda ns: None if ns["dy_dx"] is None else ns["dy_dx"].numpy().tolist(),
        bug=lambda g: g is None,
    ),
    Case(
        "TFL304",
        d(
            """
            import tensorflow as tf

            w = tf.Variable(2.0)
            b = tf.Variable(1.0)
            with tf.GradientTape() as tape:
                loss = w * w + b
            try:
                gw = tape.gradient(loss, w)
                gb = tape.gradient(loss, b)
                error = None
            except RuntimeError as exc:
                error = str(exc)
            """
        ),
        d(
            """
            import tensorflow as tf

            w = tf.Variable(2.0)
            b = tf.Variable(1.0)
            with tf.GradientTape(persistent=True) as tape:
                loss = w * w + b
            try:
                gw = tape.gradient(loss, w)
                gb = tape.gradient(loss, b)
                error = None
            except RuntimeError as exc:
                error = str(exc)
            """
        ),
        observe=lambda ns: ns["error"],
        bug=lambda error: error is not None,
    ),
    Case(
        "TFL307",
        d(
            """
            import tensorflow as tf

            class Net(tf.Module):
                def __init__(self):
                    self.w = tf.Variable(1.0)

                def __call__(self, x):
                    return self.w * x

            gen, disc = Net(), Net()
            opt = tf.keras.optimizers.SGD(0.1)

            def step(x):
                with tf.GradientTape() as tape:
                    loss = gen(x) ** 2
                grads = tape.gradient(loss, gen.trainable_variables)
                opt.apply_gradients(zip(grads, disc.trainable_variables))

            step(tf.constant(1.0))
            moved = (float(gen.w) != 1.0, float(disc.w) != 1.0)
            """
        ),
        d(
            """
            import tensorflow as tf

            class Net(tf.Module):
                def __init__(self):
                    self.w = tf.Variable(1.0)

                def __call__(self, x):
                    return self.w * x

            gen, disc = Net(), Net()
            opt = tf.keras.optimizers.SGD(0.1)

            def step(x):
                with tf.GradientTape() as tape:
                    loss = gen(x) ** 2
                grads = tape.gradient(loss, gen.trainable_variables)
                opt.apply_gradients(zip(grads, gen.trainable_variables))

            step(tf.constant(1.0))
            moved = (float(gen.w) != 1.0, float(disc.w) != 1.0)
            """
        ),
        observe=lambda ns: ns["moved"],
        bug=lambda moved: moved != (True, False),
    ),
    Case(
        "TFL401",
        d(
            """
            import time
            import tensorflow as tf

            def slow_read(x):
                time.sleep(0.02)
                return x

            def load(x):
                return tf.py_function(slow_read, [x], tf.int64)

            options = tf.data.Options()
            options.experimental_optimization.inject_prefetch = False
            ds = tf.data.Dataset.range(12).map(load).with_options(options)
            start = time.perf_counter()
            for x in ds:
                time.sleep(0.02)  # the training step
            elapsed = time.perf_counter() - start
            """
        ),
        d(
            """
            import time
            import tensorflow as tf

            def slow_read(x):
                time.sleep(0.02)
                return x

            def load(x):
                return tf.py_function(slow_read, [x], tf.int64)

            options = tf.data.Options()
            options.experimental_optimization.inject_prefetch = False
            ds = tf.data.Dataset.range(12).map(load).with_options(options).prefetch(tf.data.AUTOTUNE)
            start = time.perf_counter()
            for x in ds:
                time.sleep(0.02)  # the training step
            elapsed = time.perf_counter() - start
            """
        ),
        observe=lambda ns: ns["elapsed"],
    ),
    Case(
        "TFL402",
        d(
            """
            import time
            import tensorflow as tf

            def slow_read(x):
                time.sleep(0.02)
                return x

            def load(x):
                return tf.py_function(slow_read, [x], tf.int64)

            ds = tf.data.Dataset.range(12).map(load)
            start = time.perf_counter()
            for x in ds:
                pass
            elapsed = time.perf_counter() - start
            """
        ),
        d(
            """
            import time
            import tensorflow as tf

            def slow_read(x):
                time.sleep(0.02)
                return x

            def load(x):
                return tf.py_function(slow_read, [x], tf.int64)

            ds = tf.data.Dataset.range(12).map(load, num_parallel_calls=tf.data.AUTOTUNE)
            start = time.perf_counter()
            for x in ds:
                pass
            elapsed = time.perf_counter() - start
            """
        ),
        observe=lambda ns: ns["elapsed"],
    ),
    Case(
        "TFL403",
        d(
            """
            import tensorflow as tf

            ds = tf.data.Dataset.range(40).batch(8).shuffle(5, seed=1)
            batches = [b.numpy().tolist() for b in ds]
            """
        ),
        d(
            """
            import tensorflow as tf

            ds = tf.data.Dataset.range(40).shuffle(5, seed=1).batch(8)
            batches = [b.numpy().tolist() for b in ds]
            """
        ),
        # bug: every batch is a run of consecutive examples, the same groups each epoch
        observe=lambda ns: all(b == list(range(b[0], b[0] + len(b))) for b in ns["batches"]),
        bug=lambda contiguous: contiguous,
    ),
    Case(
        "TFL404",
        d(
            """
            def augment(x):
                return x + tf.random.uniform([], maxval=1000, dtype=tf.int64)

            ds = tf.data.Dataset.range(4).map(augment, num_parallel_calls=2).cache()
            epochs = [[int(v) for v in ds] for _ in range(2)]
            print(epochs[0] == epochs[1])
            """
        ),
        d(
            """
            def augment(x):
                return x + tf.random.uniform([], maxval=1000, dtype=tf.int64)

            ds = tf.data.Dataset.range(4).cache().map(augment, num_parallel_calls=2)
            epochs = [[int(v) for v in ds] for _ in range(2)]
            print(epochs[0] == epochs[1])
            """
        ),
        # in a fresh process: a global seed set by other code would make every epoch's draws
        # repeat whatever the order of the steps
        bug=lambda same: same == "True",
        subprocess=True,
    ),
    Case(
        "TFL406",
        d(
            """
            import tensorflow as tf

            ds = tf.data.Dataset.range(100).shuffle(100)
            train = ds.take(80)
            test = ds.skip(80)
            seen = [{int(v) for v in train} for _ in range(2)]
            leaked = len((seen[0] | seen[1]) & {int(v) for v in test})
            """
        ),
        d(
            """
            import tensorflow as tf

            ds = tf.data.Dataset.range(100).shuffle(100, reshuffle_each_iteration=False)
            train = ds.take(80)
            test = ds.skip(80)
            seen = [{int(v) for v in train} for _ in range(2)]
            leaked = len((seen[0] | seen[1]) & {int(v) for v in test})
            """
        ),
        # bug: test elements show up in the training part (over two epochs)
        observe=lambda ns: ns["leaked"],
        bug=lambda leaked: leaked > 0,
    ),
    Case(
        "TFL503",
        d(
            """
            import tensorflow as tf

            w = tf.Variable(1.0)
            opt = tf.keras.optimizers.SGD(0.01)

            @tf.function
            def train_step(x):
                with tf.GradientTape() as tape:
                    loss = (w * x) ** 2
                opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
                return loss

            losses = []
            for step in range(5):
                loss = train_step(tf.constant(1.0))
                losses.append(loss)
            """
        ),
        d(
            """
            import tensorflow as tf

            w = tf.Variable(1.0)
            opt = tf.keras.optimizers.SGD(0.01)

            @tf.function
            def train_step(x):
                with tf.GradientTape() as tape:
                    loss = (w * x) ** 2
                opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
                return loss

            losses = []
            for step in range(5):
                loss = train_step(tf.constant(1.0))
                losses.append(loss.numpy())
            """
        ),
        observe=lambda ns: sum(isinstance(v, tf_tensor_type()) for v in ns["losses"]),
        bug=lambda tensors_held: tensors_held > 0,
    ),
    Case(
        "TFL506",
        d(
            """
            strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
            ds = tf.data.Dataset.range(8).batch(4)
            seen = []

            def step(x):
                return tf.shape(x)[0]

            for x in ds:
                sizes = strategy.run(step, args=(x,))
                seen.extend(int(v) for v in strategy.experimental_local_results(sizes))
            print(sum(seen))
            """
        ),
        d(
            """
            strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
            ds = tf.data.Dataset.range(8).batch(4)
            seen = []

            def step(x):
                return tf.shape(x)[0]

            for x in strategy.experimental_distribute_dataset(ds):
                sizes = strategy.run(step, args=(x,))
                seen.extend(int(v) for v in strategy.experimental_local_results(sizes))
            print(sum(seen))
            """
        ),
        # examples processed over all replicas: 16 (each replica got every batch) vs 8
        bug=lambda processed: int(processed) != 8,
        subprocess=True,
    ),
    Case(
        "TFL508",
        d(
            """
            strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
            with strategy.scope():
                w = tf.Variable(1.0)
            data = tf.data.Dataset.from_tensor_slices(tf.ones([8])).batch(8)
            dist = strategy.experimental_distribute_dataset(data)

            @tf.function
            def train(x):
                def step(x):
                    with tf.GradientTape() as tape:
                        per_example = (w * x) ** 2
                        loss = tf.reduce_mean(per_example)
                    return tape.gradient(loss, w)
                return strategy.reduce("SUM", strategy.run(step, args=(x,)), axis=None)

            grad = train(next(iter(dist)))
            # the gradient of the mean loss over the 8 examples on one device: 2 * w * x**2 = 2
            print(float(grad) / 2.0)
            """
        ),
        d(
            """
            strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
            with strategy.scope():
                w = tf.Variable(1.0)
            data = tf.data.Dataset.from_tensor_slices(tf.ones([8])).batch(8)
            dist = strategy.experimental_distribute_dataset(data)

            @tf.function
            def train(x):
                def step(x):
                    with tf.GradientTape() as tape:
                        per_example = (w * x) ** 2
                        loss = tf.nn.compute_average_loss(per_example)
                    return tape.gradient(loss, w)
                return strategy.reduce("SUM", strategy.run(step, args=(x,)), axis=None)

            grad = train(next(iter(dist)))
            # the gradient of the mean loss over the 8 examples on one device: 2 * w * x**2 = 2
            print(float(grad) / 2.0)
            """
        ),
        # ratio of the summed replica gradients to the single-device gradient: 2.0 when unscaled
        bug=lambda ratio: abs(float(ratio) - 1.0) > 1e-6,
        subprocess=True,
    ),
    Case(
        "TFL601",
        d(
            """
            import numpy as np
            import tensorflow as tf
            import keras

            model = keras.Sequential([keras.Input((16,)), keras.layers.Dropout(0.5)])

            @tf.function(input_signature=[tf.TensorSpec([None, 16])])
            def serve(x):
                return model(x, training=True)

            x = tf.ones([1, 16])
            answers = {serve(x).numpy().tobytes() for _ in range(4)}
            """
        ),
        d(
            """
            import numpy as np
            import tensorflow as tf
            import keras

            model = keras.Sequential([keras.Input((16,)), keras.layers.Dropout(0.5)])

            @tf.function(input_signature=[tf.TensorSpec([None, 16])])
            def serve(x):
                return model(x, training=False)

            x = tf.ones([1, 16])
            answers = {serve(x).numpy().tobytes() for _ in range(4)}
            """
        ),
        observe=lambda ns: len(ns["answers"]),
        bug=lambda distinct: distinct > 1,
    ),
    Case(
        "TFL602",
        d(
            """
            import numpy as np
            import keras

            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])
            model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy())
            x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
            y = np.arange(8) % 4
            probs = np.asarray(keras.ops.softmax(model(x)))
            true_loss = float(-np.mean(np.log(probs[np.arange(8), y])))
            reported = float(model.evaluate(x, y, verbose=0))
            """
        ),
        d(
            """
            import numpy as np
            import keras

            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])
            model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
            y = np.arange(8) % 4
            probs = np.asarray(keras.ops.softmax(model(x)))
            true_loss = float(-np.mean(np.log(probs[np.arange(8), y])))
            reported = float(model.evaluate(x, y, verbose=0))
            """
        ),
        observe=lambda ns: abs(ns["reported"] - ns["true_loss"]),
        bug=lambda error: error > 1e-3,
    ),
    Case(
        "TFL603",
        d(
            """
            import tensorflow as tf

            logits = tf.constant([[0.0, 200.0]])
            log_probs = tf.math.log(tf.nn.softmax(logits))
            """
        ),
        d(
            """
            import tensorflow as tf

            logits = tf.constant([[0.0, 200.0]])
            log_probs = tf.nn.log_softmax(logits)
            """
        ),
        observe=lambda ns: bool(tf_is_finite(ns["log_probs"])),
        bug=lambda finite: not finite,
    ),
    Case(
        "TFL604",
        d(
            """
            import numpy as np
            import keras

            class Block(keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.drop = keras.layers.Dropout(0.5)

                def call(self, x, training=None):
                    return self.drop(x, training=True)

            model = keras.Sequential([keras.Input((16,)), Block()])
            x = np.ones((1, 16), dtype="float32")
            answers = {model.predict(x, verbose=0).tobytes() for _ in range(4)}
            """
        ),
        d(
            """
            import numpy as np
            import keras

            class Block(keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.drop = keras.layers.Dropout(0.5)

                def call(self, x, training=None):
                    return self.drop(x, training=training)

            model = keras.Sequential([keras.Input((16,)), Block()])
            x = np.ones((1, 16), dtype="float32")
            answers = {model.predict(x, verbose=0).tobytes() for _ in range(4)}
            """
        ),
        observe=lambda ns: len(ns["answers"]),
        bug=lambda distinct: distinct > 1,
    ),
]

BY_CODE = {c.code: c for c in CASES}


def _allclose(outputs, reference) -> bool:
    import numpy as np

    return np.allclose(np.stack(outputs), reference, atol=1e-5)


def tf_tensor_type():
    import tensorflow as tf

    return tf.Tensor


def tf_is_finite(t) -> bool:
    import tensorflow as tf

    return bool(tf.reduce_all(tf.math.is_finite(t)))


STATIC_ONLY: set[str] = set()
# timed cases: the fixed program overlaps or parallelizes what the original ran one after
# the other (sleep-based stages, so the effect is large on a busy machine too)
TIMED = {"TFL203", "TFL204", "TFL401", "TFL402"}


def test_every_fixable_rule_has_a_case():
    missing = [c for c in FIXABLE if c not in BY_CODE and c not in STATIC_ONLY]
    assert not missing, f"fixable rules without a fix case: {missing}"
    assert len(FIXABLE) >= 20


@pytest.mark.parametrize("case", CASES, ids=[c.code for c in CASES])
def test_fix_rewrites_parses_is_stable_and_clears_the_rule(case):
    before = case.before if not case.subprocess else "import tensorflow as tf\n" + case.before
    after = case.after if not case.subprocess else "import tensorflow as tf\n" + case.after
    codes = lambda text: [f.code for f in lint_text("example.py", text, frozenset({case.code})).findings]  # noqa: E731
    assert case.code in codes(before), "the rule does not fire on the case"
    fixed = fix(case.code, before)
    assert fixed == after
    assert parses(fixed) is None
    assert case.code not in codes(fixed)
    assert fix(case.code, fixed) == fixed


@pytest.mark.parametrize("case", [c for c in CASES if c.bug or c.code == "TFL101" or c.code in TIMED], ids=lambda c: c.code)
def test_fixed_program_no_longer_misbehaves(case, capfd):
    if case.code == "TFL101":
        run(case.before, lambda ns: None)
        before_lines = capfd.readouterr()
        run(case.after, lambda ns: None)
        after_lines = capfd.readouterr()
        count = lambda out: sum(ln.startswith("step") for ln in (out.out + out.err).splitlines())  # noqa: E731
        assert count(before_lines) == 1  # printed once, while tracing
        assert count(after_lines) == 3  # once per call
        return
    if case.code == "TFL203":
        slow, same_before = run(case.before, case.observe)
        fast, same_after = run(case.after, case.observe)
        assert same_before and same_after  # the same predictions
        assert slow > 2 * fast, (slow, fast)  # `predict` per batch pays its setup on each call
        return
    if case.code == "TFL204":
        slow, before_weights = run(case.before, case.observe)
        fast, after_weights = run(case.after, case.observe)
        import numpy as np

        # the same twelve SGD steps on the same batches
        assert all(np.allclose(a, b, atol=1e-5) for a, b in zip(before_weights, after_weights))
        assert slow > 3 * fast, (slow, fast)  # `fit` per batch pays its setup on each call
        return
    if case.code in ("TFL401", "TFL402"):
        # alternate the two and compare the fastest of each: single timings are noisy
        slow = min(run(case.before, case.observe) for _ in range(2))
        fast = min(run(case.after, case.observe) for _ in range(2))
        assert slow > 1.4 * fast, (slow, fast)
        return
    if case.subprocess:
        bad = run_subprocess(case.before)
        good = run_subprocess(case.after)
    else:
        bad = run(case.before, case.observe)
        good = run(case.after, case.observe)
    assert case.bug(bad), f"the original program does not show the bug: {bad!r}"
    assert not case.bug(good), f"the fixed program still shows the bug: {good!r}"


def test_fixes_compose_in_one_run_including_two_in_one_chain():
    """Overlapping fixes of one chain are deferred to the next pass of the same run."""
    before = d(
        """
        import tensorflow as tf

        def augment(x):
            return x + tf.random.uniform([], maxval=3, dtype=tf.int64)

        @tf.function
        def step(x, i):
            print("step", i)
            return x * 2

        ds = tf.data.Dataset.range(40).map(augment, num_parallel_calls=4).batch(8).shuffle(5).cache()
        for i in range(3):
            for x in ds:
                step(x, i)
        """
    )
    enabled = frozenset({"TFL101", "TFL201", "TFL403", "TFL404"})
    out = fix_file("example.py", before.encode(), enabled, unsafe=True)
    assert out.problem is None and out.fixed == 4
    assert out.new_text == before.replace('print("step"', 'tf.print("step"').replace(
        ".map(augment, num_parallel_calls=4).batch(8).shuffle(5).cache()",
        ".cache().map(augment, num_parallel_calls=4).shuffle(5).batch(8)",
    ).replace("step(x, i)\n", "step(x, tf.constant(i))\n")
    assert lint_text("example.py", out.new_text, enabled).findings == []
