"""TFL4xx: tf.data input pipelines that starve the accelerator or feed it the wrong data."""

from __future__ import annotations

import ast
import re
from types import SimpleNamespace

from tflint.analysis.datasets import BATCHING_METHODS, calls_in, functions_run_by, small_take
from tflint.analysis.values import number_value
from tflint.finding import Edit, Fix, Severity
from tflint.rules._fixes import move_step_before, tensorflow_alias
from tflint.rules.base import Rule, RuleContext

_EAGER_WRAPPERS = frozenset(
    {
        "tensorflow.py_function",
        "tensorflow.numpy_function",
        "tensorflow.compat.v1.py_func",
        "tensorflow.compat.v1.py_function",
        "tensorflow.compat.v1.numpy_function",
        "tensorflow.experimental.numpy_function",
    }
)
_RANDOM_PREFIXES = (
    "tensorflow.random.",
    "tensorflow.image.random_",
    "tensorflow.image.stateless_random_",
    "tensorflow.compat.v1.random_",
    "tensorflow.compat.v1.image.random_",
    "keras.random.",
    "keras.layers.Random",
    "keras.layers.experimental.preprocessing.Random",
    "keras_cv.layers.Rand",
)
_RANDOM_EXACT = frozenset(
    {
        "tensorflow.random_uniform",
        "tensorflow.random_normal",
        "tensorflow.nn.dropout",
        "keras.layers.RandAugment",
        "keras.layers.AugMix",
        "keras.layers.MixUp",
        "keras.layers.CutMix",
        "keras.layers.RandomErasing",
        "keras.layers.RandomGrayscale",
    }
)
_NOT_RANDOM = frozenset({"tensorflow.random.set_seed", "keras.random.SeedGenerator"})
_SEQUENTIAL = frozenset({"keras.Sequential", "keras.models.Sequential"})


def _method_span(ctx: RuleContext, call: ast.Call) -> SimpleNamespace:
    line, col = ctx.analysis.datasets.method_position(call)
    return SimpleNamespace(lineno=line, col_offset=col)


def _is_random_name(q: str | None) -> bool:
    if not q or q in _NOT_RANDOM:
        return False
    return q.startswith(_RANDOM_PREFIXES) or q in _RANDOM_EXACT


class _RandomOps:
    """Whether a function (and what it calls in the module) draws random numbers per element."""

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.a = ctx.analysis
        self._values: dict[str, list[ast.AST]] | None = None

    def _assigned(self) -> dict[str, list[ast.AST]]:
        if self._values is None:
            vals: dict[str, list[ast.AST]] = {}
            for node in self.a.nodes(ast.Assign, ast.AnnAssign):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name):
                            vals.setdefault(t.id, []).append(node.value)
                        elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            vals.setdefault("self." + t.attr, []).append(node.value)
            self._values = vals
        return self._values

    def is_random_layer(self, expr: ast.AST, depth: int = 0) -> bool:
        if depth > 4 or not isinstance(expr, ast.Call):
            return False
        q = self.a.call_name(expr)
        if _is_random_name(q):
            return True
        if q in _SEQUENTIAL:
            layers = expr.args[0] if expr.args else next((k.value for k in expr.keywords if k.arg == "layers"), None)
            if isinstance(layers, (ast.List, ast.Tuple)):
                return any(self.is_random_layer(e, depth + 1) for e in layers.elts)
        return False

    def random_call(self, funcs: list[ast.AST], flags: dict[str, bool] | None = None) -> ast.Call | None:
        """The first call that draws random numbers in ``funcs`` (and the functions they call);
        ``flags``: the Python booleans of ``funcs``' parameters (branches they do not take
        draw nothing)."""
        for f in functions_run_by(self.a.datasets, funcs, flags=flags):
            for call in calls_in(f, flags if f in funcs else None):
                if _is_random_name(self.a.call_name(call)):
                    return call
                callee = call.func
                if isinstance(callee, ast.Call) and self.is_random_layer(callee):
                    return call
                key = None
                if isinstance(callee, ast.Name):
                    key = callee.id
                elif isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id == "self":
                    key = "self." + callee.attr
                if key and any(self.is_random_layer(v) for v in self._assigned().get(key, ())):
                    return call
        return None


class DatasetWithoutPrefetch(Rule):
    code = "TFL401"
    name = "dataset-without-prefetch"
    severity = Severity.WARNING
    fixable = True
    summary = "A dataset is consumed without `.prefetch()` while tf.data's automatic prefetch is off"
    what = (
        "Checks for tf.data pipelines that are consumed (iterated with `for` or `iter()`, or "
        "passed to `fit`/`evaluate`) while no step prefetches *and* tf.data will not add a "
        "prefetch on its own: the pipeline's `tf.data.Options` switch the automatic prefetch "
        "off (`experimental_optimization.inject_prefetch = False`, "
        "`experimental_optimization.apply_default_optimizations = False` or "
        "`autotune.enabled = False`, applied with `with_options`), or the target TensorFlow "
        "version is older than 2.9, which does not inject a prefetch. Since TensorFlow 2.9 the "
        "default `inject_prefetch` optimization appends a prefetch to a pipeline whose last step "
        "is synchronous, so a pipeline without `.prefetch()` is overlapped all the same and is "
        "not reported. Pipelines built by sources that prefetch themselves "
        "(`image_dataset_from_directory`, `text_dataset_from_directory`, "
        "`timeseries_dataset_from_array`, `make_csv_dataset`...) are never reported. The chain "
        "is followed across statements and through functions of the module that return it."
    )
    why = (
        "Without a prefetch, tf.data produces the next batch only when the training step asks "
        "for it: reading, decoding and batching run one after the other with the step, and the "
        "accelerator sits idle while the input pipeline works (measured on TensorFlow 2.21 with "
        "the automatic prefetch switched off: a producer and a consumer of equal cost take "
        "about twice as long as with `.prefetch()`). `prefetch` overlaps the two by preparing "
        "batches in the background."
    )
    example = (
        """
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        ds = tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.batch(64).with_options(options)
        model.fit(ds, epochs=10)
        """
    )
    use_instead = (
        """
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        ds = tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.batch(64).with_options(options).prefetch(tf.data.AUTOTUNE)
        model.fit(ds, epochs=10)
        """
    )
    fix_safety = (
        "The fix appends `.prefetch(tf.data.AUTOTUNE)` (with the module's own TensorFlow alias, "
        "adding `import tensorflow as tf` when there is none) to the last transformation of the "
        "chain. Prefetching does not change the elements, so the fix is safe. There is no fix "
        "when the chain ends differently on different branches."
    )
    VALID = [
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100)
        ds = ds.batch(8)
        for x in ds:  # TensorFlow >= 2.9 injects the prefetch
            pass
        """,
        """
        import tensorflow as tf

        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        ds = tf.data.Dataset.range(100).batch(8).with_options(options)
        ds = ds.prefetch(tf.data.AUTOTUNE)
        for x in ds:
            pass
        """,
        """
        from tensorflow import keras
        import tensorflow as tf

        options = tf.data.Options()
        options.autotune.enabled = False
        train_ds = keras.utils.image_dataset_from_directory('images/', batch_size=32)
        train_ds = train_ds.map(lambda x, y: (x / 255.0, y)).with_options(options)
        model = keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(10)])
        model.fit(train_ds, epochs=5)
        """,
        """
        import tensorflow as tf

        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        ds = tf.data.Dataset.range(10).batch(2).with_options(options)
        for x in ds.take(1):
            print(x.shape)
        """,
        """
        import tensorflow as tf

        def evaluate(model, ds: tf.data.Dataset):
            return model.evaluate(ds.batch(8))
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        ds = tf.data.Dataset.range(100)
        ds = ds.batch(8).with_options(options)
        for x in ds:  # expect: TFL401
            pass
        """,
        """
        import tensorflow as tf

        def make_ds(x, y):
            options = tf.data.Options()
            options.experimental_optimization.apply_default_optimizations = False
            ds = tf.data.Dataset.from_tensor_slices((x, y)).with_options(options)
            return ds.shuffle(1000).batch(32)

        def train(model, x, y):
            train_ds = make_ds(x, y)
            model.fit(train_ds, epochs=3)  # expect: TFL401
        """,
        """
        import tensorflow as tensorflow_lib

        opts = tensorflow_lib.data.Options()
        opts.autotune.enabled = False
        files = ['a.tfrecord']
        ds = tensorflow_lib.data.TFRecordDataset(files).batch(4).with_options(opts)
        it = iter(ds)  # expect: TFL401
        batch = next(it)
        """,
    ]

    @staticmethod
    def _peek(ctx: RuleContext, node: ast.AST) -> bool:
        parent = ctx.analysis.parent(node)
        return (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id == "next"
            and parent.args[:1] == [node]
        )

    _VERBS = {"for": "iterated", "iter": "iterated", "fit": "passed to `fit()`", "evaluate": "passed to `evaluate()`"}

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.analysis.datasets
        target = ctx.analysis.target
        fixed: set[ast.AST] = set()
        seen: set[tuple[int, int]] = set()
        for cons in facts.consumptions:
            if cons.kind not in self._VERBS:
                continue
            chains = cons.chains
            if not all(c.known and c.steps for c in chains):
                continue
            if any(c.has_prefetch() or c.distributed or c.kind == "prefetching" for c in chains):
                continue
            # tf.data appends a prefetch itself unless the target version predates it or the
            # pipeline's options switch it off.
            options_off = all("inject_prefetch" in facts.options_off(c) for c in chains)
            if target.injects_prefetch and not options_off:
                continue
            if cons.kind == "for" and all(c.steps[-1].method == "take" for c in chains):
                continue  # a look at the first batches, not a training loop
            if cons.kind == "iter" and self._peek(ctx, cons.node):
                continue  # next(iter(ds)): one element, nothing to overlap
            key = (id(cons.node), id(cons.expr))
            if key in seen:
                continue
            seen.add(key)
            alias, import_edits = tensorflow_alias(ctx)
            lasts = {c.last_node for c in chains}
            fix = None
            last = next(iter(lasts))
            if len(lasts) == 1 and isinstance(last, ast.Call) and last not in fixed:
                fixed.add(last)
                fix = Fix(
                    message=f"Append `.prefetch({alias}.data.AUTOTUNE)`",
                    edits=(
                        Edit(last.end_lineno, last.end_col_offset, last.end_lineno, last.end_col_offset,
                             f".prefetch({alias}.data.AUTOTUNE)"),
                        *import_edits,
                    ),
                )
            verb = self._VERBS[cons.kind]
            if cons.role == "validation_data":
                verb = "passed to `fit(validation_data=...)`"
            built = chains[0].line
            last_line = facts.method_position(last)[0] if isinstance(last, ast.Call) else last.lineno
            why = (
                "its options switch off tf.data's automatic prefetch"
                if options_off
                else f"TensorFlow {target} (the target version) adds no prefetch on its own"
            )
            node = cons.node
            end = node.iter if isinstance(node, (ast.For, ast.AsyncFor)) else node
            ctx.report(
                node,
                f"Dataset built on line {built} is {verb} without `.prefetch()` and {why}: the "
                f"accelerator waits while each batch is prepared. Append "
                f"`.prefetch({alias}.data.AUTOTUNE)` to the pipeline (last step on line {last_line})",
                fix=fix,
                end_node=end,
            )


class MapWithoutParallelCalls(Rule):
    code = "TFL402"
    name = "map-without-num-parallel-calls"
    severity = Severity.WARNING
    fixable = True
    summary = "A stateful `Dataset.map(fn)` without `num_parallel_calls` runs on one element at a time"
    what = (
        "Checks for `Dataset.map(...)` calls without `num_parallel_calls` that tf.data will not "
        "parallelize on its own: the map function is *stateful* (it draws random numbers with "
        "`tf.random.*`/`tf.image.random_*`, calls `tf.py_function`/`tf.numpy_function` or "
        "`tf.print`, reads a `tf.Variable`, a lookup table, a random Keras layer or a Keras "
        "model), or the pipeline's options switch `map_parallelization` off "
        "(`experimental_optimization.map_parallelization = False` or "
        "`apply_default_optimizations = False`), or the target TensorFlow version is older than "
        "2.6. Since TensorFlow 2.6 the default `map_parallelization` optimization runs a "
        "stateless map function in parallel without being asked, so such maps are not reported; "
        "nor are maps of a pipeline that is only read through `.take(n)` of a few (at most 16) "
        "elements, a look at a batch or two."
    )
    why = (
        "tf.data keeps a stateful map function sequential: it applies it to one element at a "
        "time, on one thread, so decoding and augmenting become a bottleneck while the other "
        "CPU cores stay idle and the accelerator waits for input (measured on TensorFlow 2.21: "
        "the pipeline runs a plain `Map` for a function using `tf.random.uniform`, a "
        "`ParallelMapV2` for the same function without it). `num_parallel_calls` lets tf.data "
        "process several elements in parallel, tuned automatically with `AUTOTUNE`."
    )
    example = (
        """
        def augment(image, label):
            return tf.image.random_flip_left_right(image), label

        ds = ds.map(augment)
        """
    )
    use_instead = (
        """
        def augment(image, label):
            return tf.image.random_flip_left_right(image), label

        ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
        """
    )
    fix_safety = (
        "The fix adds `num_parallel_calls=tf.data.AUTOTUNE` (with the module's own TensorFlow "
        "alias). The output order is kept (`deterministic` defaults to true), so the fix is "
        "safe; a map function with Python side effects may see them run concurrently, and "
        "random draws may be assigned to other elements."
    )
    VALID = [
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(10)
        ds = ds.map(lambda x: x + tf.random.uniform([], maxval=2, dtype=tf.int64), num_parallel_calls=tf.data.AUTOTUNE)
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(10).map(lambda x: tf.py_function(lambda v: v, [x], tf.int64), 4)
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(10)
        ds = ds.map(lambda x: x * 2)  # stateless: tf.data parallelizes it
        """,
        """
        import tensorflow as tf

        def parse(record):
            return tf.io.parse_tensor(record, tf.float32)

        ds = tf.data.TFRecordDataset(['a.tfrecord']).map(parse).batch(32)
        """,
        """
        results = {'a': 1}
        squares = map(lambda v: v * v, [1, 2, 3])
        rows = results.map(str) if hasattr(results, 'map') else None
        """,
        """
        import pandas as pd
        import tensorflow as tf

        df = pd.DataFrame({'a': [1, 2]})
        df['b'] = df['a'].map(str)
        """,
        """
        import tensorflow as tf
        from tensorflow import keras

        flip = keras.layers.RandomFlip("horizontal")
        transformation = {"flips": tf.ones([2, 1, 1, 1], tf.bool), "input_shape": (2, 8, 8, 3)}
        images = tf.data.Dataset.from_tensor_slices(tf.zeros([4, 8, 8, 3])).batch(2)
        # applies the given transformation: nothing random is drawn, tf.data parallelizes it
        images = images.map(lambda x: flip.transform_images(x, transformation=transformation))
        """,
        """
        import functools

        import keras
        import tensorflow as tf

        def preprocess(image, label, randomize=False):
            if randomize:
                image = tf.image.random_flip_left_right(image)
            image = tf.image.resize(image, [224, 224])
            return keras.applications.xception.preprocess_input(image), label

        train = train_raw.map(functools.partial(preprocess, randomize=True),
                              num_parallel_calls=tf.data.AUTOTUNE)
        valid = valid_raw.map(preprocess)  # randomize=False: nothing random, tf.data parallelizes it
        """,
        """
        import tensorflow as tf

        def add_noise(x):
            return x + tf.random.uniform(tf.shape(x))

        test_ds = tf.data.Dataset.from_tensor_slices(tf.zeros([64, 8])).batch(8)
        test_ds = test_ds.map(add_noise)
        for batch in test_ds.take(1):  # one batch to look at: nothing to speed up
            print(batch)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf
        from tensorflow import keras

        flip = keras.layers.RandomFlip("horizontal")
        images = tf.data.Dataset.from_tensor_slices(tf.zeros([4, 8, 8, 3])).batch(2)
        images = images.map(lambda x: flip(x, training=True))  # expect: TFL402
        jitter = keras.layers.RandomColorJitter(value_range=(0, 1), brightness_factor=0.2)
        images = images.map(lambda x: jitter.transform_images(x, None))  # expect: TFL402
        """,
        """
        import tensorflow as tf

        def augment(image):
            return tf.image.random_flip_left_right(image)

        ds = tf.data.Dataset.from_tensor_slices(tf.zeros([4, 8, 8, 3]))
        ds = ds.map(augment)  # expect: TFL402
        """,
        """
        import functools

        import tensorflow as tf

        def preprocess(image, randomize=False):
            if randomize:
                image = tf.image.random_flip_left_right(image)
            return image

        ds = tf.data.Dataset.from_tensor_slices(tf.zeros([4, 8, 8, 3]))
        train = ds.map(functools.partial(preprocess, randomize=True))  # expect: TFL402
        """,
        """
        import tensorflow as tf

        def load(path):
            return tf.py_function(lambda p: p, [path], tf.string)

        def make(files):
            ds = tf.data.Dataset.from_tensor_slices(files)
            return (
                ds.shuffle(100)
                .map(load)  # expect: TFL402
                .batch(32)
            )
        """,
        """
        import tensorflow as tf

        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(['a']), tf.constant([0], tf.int64)), -1)
        ds = tf.data.Dataset.from_tensor_slices(['a', 'b'])
        ds = ds.map(lambda w: table.lookup(w))  # expect: TFL402
        """,
        """
        import tensorflow as tf

        options = tf.data.Options()
        options.experimental_optimization.map_parallelization = False
        ds = tf.data.Dataset.range(10)
        ds = ds.map(lambda x: x * 2).with_options(options)  # expect: TFL402
        """,
        """
        import tensorflow as tf

        def add_noise(x):
            return x + tf.random.uniform(tf.shape(x))

        test_ds = tf.data.Dataset.from_tensor_slices(tf.zeros([64, 8])).batch(8)
        test_ds = test_ds.map(add_noise)  # expect: TFL402
        for batch in test_ds.take(1):
            print(batch)
        for batch in test_ds:
            print(batch)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.analysis.datasets
        target = ctx.analysis.target
        for t in facts.transformations:
            if t.method != "map":
                continue
            call = t.node
            if len(call.args) >= 2 or any(k.arg is None or k.arg == "num_parallel_calls" for k in call.keywords):
                continue
            if any(isinstance(arg, ast.Starred) for arg in call.args):
                continue  # `*args` may carry num_parallel_calls
            if not call.args and not call.keywords:
                continue
            if facts.only_sampled(call):
                continue  # read for a batch or two: nothing to speed up
            if not target.parallelizes_maps:
                reason = f"TensorFlow {target} (the target version) does not parallelize a map on its own"
            elif "map_parallelization" in facts.options_off_at(call):
                reason = "the pipeline's options switch off tf.data's automatic map parallelization"
            else:
                op = facts.stateful_op(call)
                if op is None:
                    continue  # stateless: tf.data runs it in parallel by itself
                what = ctx.segment(op.func if isinstance(op, ast.Call) else op).strip() or "state"
                if len(what) > 40:
                    what = what[:37] + "..."
                reason = (
                    f"its function is stateful (`{what}`, line {op.lineno}), so tf.data does not "
                    "parallelize it on its own"
                )
            alias, import_edits = tensorflow_alias(ctx)
            parts = [*call.args, *(k for k in call.keywords)]
            last = max(parts, key=lambda n: (n.end_lineno, n.end_col_offset))
            fix = Fix(
                message=f"Add `num_parallel_calls={alias}.data.AUTOTUNE`",
                edits=(
                    Edit(last.end_lineno, last.end_col_offset, last.end_lineno, last.end_col_offset,
                         f", num_parallel_calls={alias}.data.AUTOTUNE"),
                    *import_edits,
                ),
            )
            ctx.report(
                _method_span(ctx, call),
                f"`.map()` without `num_parallel_calls` runs on one element at a time: {reason}. "
                f"Pass `num_parallel_calls={alias}.data.AUTOTUNE`",
                fix=fix,
                end_node=call,
            )


class ShuffleAfterBatch(Rule):
    code = "TFL403"
    name = "shuffle-after-batch"
    severity = Severity.WARNING
    summary = "`.shuffle()` after `.batch()` shuffles whole batches, not examples"
    fixable = True
    fix_safety = (
        "The fix moves `.shuffle(...)` in front of the batching call when both are links of one "
        "chain expression. It is unsafe: the buffer then counts examples instead of batches, so "
        "the same `buffer_size` mixes fewer examples at a time; raise it (ideally to the "
        "dataset's size, memory permitting). Pipelines split over several statements get no fix."
    )
    what = (
        "Checks for `Dataset.shuffle(...)` applied to a dataset that was already batched and "
        "is not batched again after the shuffle (a first `batch` that groups tokens into "
        "sequences, shuffled and then batched, shuffles the examples). A "
        "shuffle followed by `.take(n)` of at most 16 batches (one random batch to plot or "
        "print) is a look at the data, not a pipeline that epochs replay, and is not reported."
    )
    why = (
        "After `batch`, each element of the dataset is a whole batch: `shuffle` then reorders "
        "batches, but the examples inside each batch stay together, in file order, every epoch. "
        "The model sees the same groupings over and over (often all one class when the data is "
        "sorted), which slows or biases training, and the buffer holds whole batches in memory."
    )
    example = (
        """
        ds = ds.batch(32).shuffle(1000)
        """
    )
    use_instead = (
        """
        ds = ds.shuffle(10_000).batch(32)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100).shuffle(100).batch(8)
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100).batch(8).unbatch().shuffle(100).batch(8)
        """,
        """
        import random

        batches = [[1, 2], [3, 4]]
        random.shuffle(batches)
        """,
        """
        import tensorflow as tf

        train_ds = tf.data.Dataset.range(100).batch(8)
        for batch in train_ds.shuffle(4).take(1):  # one random batch to look at
            print(batch)
        """,
        """
        import tensorflow as tf

        ids = tf.data.Dataset.range(10_000)
        sequences = ids.batch(101, drop_remainder=True)  # 101 tokens: one training example
        dataset = sequences.map(lambda s: (s[:-1], s[1:]))
        dataset = dataset.shuffle(10_000).batch(64, drop_remainder=True)
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100).batch(1).shuffle(100)  # batches of one example
        """,
        """
        import tensorflow as tf

        batch_size = 1
        ds = tf.data.Dataset.range(100).batch(batch_size).prefetch(100).shuffle(100)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100).batch(8).shuffle(10)  # expect: TFL403
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100)
        ds = ds.batch(8)
        ds = ds.map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.shuffle(10)  # expect: TFL403
        """,
        """
        import tensorflow as tf

        def make(x):
            ds = tf.data.Dataset.from_tensor_slices(x).padded_batch(4)
            return ds

        ds = make([1, 2, 3]).shuffle(8)  # expect: TFL403
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100).batch(8).shuffle(10).take(1000)  # expect: TFL403
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        transformations = ctx.analysis.datasets.transformations
        # steps that a later batching call follows: a shuffle among them reorders the elements
        # of that later batch (the earlier batch grouped tokens into sequences, frames into
        # clips), which is what shuffling before batching means
        rebatched = {s.node for t in transformations if t.method in BATCHING_METHODS
                     for c in t.receiver for s in c.steps}
        for t in transformations:
            if t.method != "shuffle" or t.node in rebatched:
                continue
            batch = None
            for chain in t.receiver:
                last_batch = None
                for s in chain.steps:
                    if s.method in BATCHING_METHODS:
                        last_batch = s
                    elif s.method in ("unbatch", "rebatch"):
                        last_batch = None
                if last_batch is not None:
                    batch = last_batch
                    break
            if batch is None or self._one_look(ctx, t.node) or _batch_of_one(ctx, batch.node):
                continue
            edit = move_step_before(ctx, t.node, batch.node)
            ctx.report(
                _method_span(ctx, t.node),
                f"`.shuffle()` after `.{batch.method}()` (line {batch.line}) shuffles whole batches: the "
                "same examples stay together every epoch. Shuffle before batching",
                end_node=t.node,
                fix=Fix(f"Move `.shuffle()` before `.{batch.method}()`", (edit,), "unsafe") if edit else None,
            )


    @staticmethod
    def _one_look(ctx: RuleContext, shuffle: ast.Call) -> bool:
        """``ds.shuffle(n).take(1)``: a few random batches to look at (plot one, print one), not
        a stream that epochs replay."""
        attr = ctx.analysis.parent(shuffle)
        call = ctx.analysis.parent(attr) if isinstance(attr, ast.Attribute) else None
        return (isinstance(attr, ast.Attribute) and attr.attr == "take" and isinstance(call, ast.Call)
                and call.func is attr and small_take(call))


class CacheAfterRandomness(Rule):
    code = "TFL404"
    name = "cache-after-random-step"
    severity = Severity.WARNING
    summary = "`.cache()` after random augmentation or `.shuffle()` freezes the first epoch"
    fixable = True
    fix_safety = (
        "The fix moves `.cache()` in front of the random step when both are links of one chain "
        "expression, so the random work runs again every epoch. It is safe: each epoch now sees "
        "new augmentations or a new order, which is what the pipeline asked for; the cache then "
        "holds the elements before the random step. Pipelines split over several statements get "
        "no fix. One case the move does not cure: with a global seed (`tf.random.set_seed`, "
        "`keras.utils.set_random_seed`), an unseeded `tf.random.*` op in a map draws the same "
        "values in every epoch, because each epoch's iterator starts the op from the same seed; "
        "draw from a `tf.random.Generator` or use Keras random layers there, whose state carries "
        "over from epoch to epoch."
    )
    what = (
        "Checks for `Dataset.cache()` applied after a `.map(...)` whose function draws random "
        "numbers (`tf.random.*`, `tf.image.random_*`, stateless random ops, Keras random "
        "preprocessing layers) or after a `.shuffle(...)` that reshuffles every epoch, unless "
        "a later `.shuffle(...)` reshuffles the cached elements every epoch (with a buffer "
        "not smaller than the first one's), nor for a dataset that is only evaluated "
        "(`validation_data`, `evaluate`, `predict`), only read once (one `for` loop that no "
        "other loop encloses) or cut to a fixed sample of a few elements before the cache "
        "(`take(n)`, n ≤ 16: one batch looped as fake data)."
    )
    why = (
        "`cache` stores the elements produced during the first epoch and replays them in every "
        "later epoch. Placed after random augmentation, every epoch sees exactly the augmented "
        "images of epoch one, so augmentation stops working; placed after `shuffle`, every "
        "epoch replays the same order."
    )
    example = (
        """
        ds = ds.map(random_flip, num_parallel_calls=tf.data.AUTOTUNE).cache()
        """
    )
    use_instead = (
        """
        ds = ds.cache().map(random_flip, num_parallel_calls=tf.data.AUTOTUNE)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        def augment(x):
            return tf.image.random_flip_left_right(x)

        ds = tf.data.Dataset.from_tensor_slices(tf.zeros([4, 8, 8, 3]))
        ds = ds.cache().map(augment, num_parallel_calls=tf.data.AUTOTUNE)
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(10).map(lambda x: x * 2, num_parallel_calls=2).cache().shuffle(10)
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(10).shuffle(10, reshuffle_each_iteration=False).cache()
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100).shuffle(100).cache()
        ds = ds.shuffle(1000).batch(8)  # a new order every epoch, after the cache
        """,
        """
        import tensorflow as tf

        train = tf.data.Dataset.range(100).cache().shuffle(100).batch(8)
        val = tf.data.Dataset.range(20).shuffle(20).batch(8).cache()  # evaluated only: order is moot
        model.fit(train, validation_data=val, epochs=5)
        model.evaluate(val)
        """,
        """
        import tensorflow as tf

        train = tf.data.Dataset.range(100).shuffle(100).batch(4)
        for batch in train.take(2).cache():  # read once, to print two batches
            print(batch)
        """,
        """
        import tensorflow as tf

        def input_fn(fake_data):
            ds = tf.data.TFRecordDataset(files).shuffle(1024).map(parse).batch(32).repeat()
            if fake_data:
                ds = ds.take(1).cache().repeat()  # one batch, looped on purpose
            return ds
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        def augment(x):
            return tf.image.random_flip_left_right(x)

        ds = tf.data.Dataset.from_tensor_slices(tf.zeros([4, 8, 8, 3]))
        ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.cache()  # expect: TFL404
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(10).shuffle(10).batch(2).cache()  # expect: TFL404
        """,
        """
        import tensorflow as tf
        from tensorflow.keras import layers

        augment = tf.keras.Sequential([layers.RandomFlip('horizontal'), layers.RandomRotation(0.1)])
        ds = tf.data.Dataset.from_tensor_slices((tf.zeros([4, 8, 8, 3]), tf.zeros([4])))
        ds = ds.map(lambda x, y: (augment(x, training=True), y), num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.cache()  # expect: TFL404
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(10).map(lambda x: x + tf.random.uniform([], maxval=2, dtype=tf.int64), num_parallel_calls=2).cache()  # expect: TFL404
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(10000).shuffle(10000).cache()  # expect: TFL404
        ds = ds.shuffle(16).batch(8)  # a small buffer: mostly the first epoch's order
        """,
        """
        import tensorflow as tf

        def train_epoch(dataset):
            for batch in dataset:  # once per call, and it is called every epoch
                step(batch)

        train = tf.data.Dataset.range(100).shuffle(100).batch(4).cache()  # expect: TFL404
        for epoch in range(5):
            train_epoch(train)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.analysis.datasets
        randoms = _RandomOps(ctx)
        verdicts: dict[ast.AST, bool] = {}
        # reshuffling shuffles and the steps before each: a cache among those steps has its
        # replayed order shuffled again every epoch
        reshuffles = [(t.node, {s.node for c in t.receiver for s in c.steps}) for t in facts.transformations
                      if t.method == "shuffle" and _reshuffles(t.node)]
        # a shuffle that a take/skip split follows is TFL406's: caching before it is no cure
        splits = _split_shuffles(facts.transformations)
        for t in facts.transformations:
            if t.method != "cache":
                continue
            culprit = None
            for chain in t.receiver:
                for i, s in enumerate(chain.steps):
                    if s.method == "shuffle":
                        if _reshuffles(s.node) and s.node not in splits and not any(
                            t.node in before and not _smaller_buffer(later, s.node) for later, before in reshuffles
                        ):
                            culprit = ("shuffle", s)
                    elif s.method == "map":
                        if s.node not in verdicts:
                            funcs = facts.map_functions(s.node)
                            verdicts[s.node] = randoms.random_call(funcs, facts.python_flags(s.node, funcs)) is not None
                        if verdicts[s.node]:
                            culprit = ("map", s)
                    if culprit is not None:
                        # take(n) of a few elements after it: a fixed sample replayed on purpose
                        # (one batch looped as fake data: take(1).cache().repeat())
                        if any(later.method == "take" and small_take(later.node) for later in chain.steps[i + 1:]):
                            culprit = None
                        break
                if culprit:
                    break
            if culprit is None or facts.only_evaluated(t.node) or facts.iterated_once(t.node):
                continue  # an evaluation set, or read once: nothing replays the cache
            kind, step = culprit
            if kind == "shuffle":
                msg = (
                    f"`.cache()` after `.shuffle()` (line {step.line}) stores the first epoch's "
                    "order and replays it every epoch. Cache before shuffling"
                )
            else:
                msg = (
                    f"`.cache()` after the random augmentation `.map()` (line {step.line}) "
                    "stores the first epoch's augmented elements: every later epoch sees the "
                    "same augmentation. Cache before the random map"
                )
            edit = move_step_before(ctx, t.node, step.node)
            fix = Fix(f"Move `.cache()` before `.{kind}()`", (edit,)) if edit else None
            ctx.report(_method_span(ctx, t.node), msg, end_node=t.node, fix=fix)


class SplitOfReshuffledDataset(Rule):
    code = "TFL406"
    name = "split-of-reshuffled-dataset"
    severity = Severity.ERROR
    summary = "`take`/`skip` split of a dataset that is reshuffled every epoch: the splits overlap"
    fixable = True
    fix_safety = (
        "The fix adds `reshuffle_each_iteration=False` to the `shuffle(...)` call, so every "
        "iteration draws the same order and `take`/`skip` cut the same two disjoint parts. It "
        "is unsafe: the training part then arrives in the same order every epoch; shuffle it "
        "again after the split (`train = train.shuffle(n)`), which reorders only the training "
        "examples."
    )
    what = (
        "Checks for a dataset shuffled with `reshuffle_each_iteration` left on (the default) "
        "and then cut in two with `.take(n)` and `.skip(n)`: a train/test (or train/validation) "
        "split drawn from a new random order on every iteration. A `cache()` between the "
        "shuffle and the split is not judged."
    )
    why = (
        "`shuffle` draws a new order each time the dataset is iterated, and the two parts are "
        "iterated separately: `take(n)` reads the first `n` elements of one order and "
        "`skip(n)` the rest of another, so test examples are trained on, and every epoch trains "
        "on a different subset. Nothing fails; validation scores are inflated by the leak "
        "(measured on TensorFlow 2.21: with `range(100).shuffle(100)` split 80/20, 16-18 of the "
        "20 test elements are in the training part; a seed and a `cache()` of the training part "
        "still leave 15)."
    )
    example = (
        """
        ds = ds.shuffle(10_000)
        train = ds.take(8_000)
        test = ds.skip(8_000)
        """
    )
    use_instead = (
        """
        ds = ds.shuffle(10_000, seed=42, reshuffle_each_iteration=False)
        train = ds.take(8_000).shuffle(8_000)
        test = ds.skip(8_000)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100).shuffle(100, seed=42, reshuffle_each_iteration=False)
        train = ds.take(80).shuffle(80)
        test = ds.skip(80)
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100)
        train = ds.take(80).shuffle(80)
        test = ds.skip(80)
        sample = tf.data.Dataset.range(100).shuffle(100).take(5)  # five random elements
        """,
        """
        import tensorflow as tf

        files = tf.data.Dataset.list_files("data/*.tfrecord", shuffle=False)
        train_files = files.take(8)
        valid_files = files.skip(8)
        train = train_files.shuffle(8).interleave(tf.data.TFRecordDataset)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(100)
        ds = ds.shuffle(100)  # expect: TFL406
        train = ds.take(80).batch(8)
        test = ds.skip(80).batch(8)
        """,
        """
        import tensorflow as tf

        ratings = tf.data.Dataset.range(100_000).shuffle(100_000, seed=42)  # expect: TFL406
        train_ds = ratings.take(80_000).batch(1024).cache()
        test_ds = ratings.skip(80_000).batch(1024).take(20_000).cache()
        """,
        """
        import tensorflow as tf

        def split(ds, n_train):
            ds = ds.shuffle(10_000)  # expect: TFL406
            return ds.take(n_train), ds.skip(n_train)

        train, valid = split(tf.data.Dataset.range(12_000), 10_000)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        # one part only (`shuffle(n).take(k)`) is a random sample, not a split
        for shuffle, where in _split_shuffles(ctx.analysis.datasets.transformations).items():
            fix = None
            if (shuffle.args or shuffle.keywords) and ctx.segment(shuffle).rstrip().endswith(")") \
                    and not ctx.segment(shuffle).rstrip()[:-1].rstrip().endswith(","):
                at = (shuffle.end_lineno, shuffle.end_col_offset - 1)
                fix = Fix("Add `reshuffle_each_iteration=False`",
                          (Edit(*at, *at, ", reshuffle_each_iteration=False"),), "unsafe")
            ctx.report(
                _method_span(ctx, shuffle),
                f"`.shuffle()` draws a new order every epoch, and `.take()` (line {where['take']}) and "
                f"`.skip()` (line {where['skip']}) read different orders: the split parts overlap "
                "(test data is trained on) and change every epoch. Pass "
                "`reshuffle_each_iteration=False` (and a `seed`) before splitting",
                end_node=shuffle,
                fix=fix,
            )


# Stateful random ops whose random stream is fixed by the global seed and their op seed: a new
# iterator of the dataset starts them over (tf.random.Generator and Keras random layers keep
# their state from one epoch to the next; stateless ops take their seed as an argument)
_SEEDED_RANDOM_PREFIXES = (
    "tensorflow.random.", "tensorflow.image.random_", "tensorflow.compat.v1.random_",
    "tensorflow.compat.v1.image.random_",
)
_SEEDED_RANDOM_EXACT = frozenset({"tensorflow.random_uniform", "tensorflow.random_normal", "tensorflow.nn.dropout"})
_NOT_SEEDED_RANDOM = ("tensorflow.random.Generator", "tensorflow.random.stateless_", "tensorflow.random.set_seed",
                      "tensorflow.random.experimental.", "tensorflow.random.get_global_generator",
                      "tensorflow.random.set_global_generator", "tensorflow.random.create_rng_state",
                      "tensorflow.random.uniform_candidate_sampler", "tensorflow.random.fixed_unigram_candidate_sampler",
                      "tensorflow.random.learned_unigram_candidate_sampler", "tensorflow.random.log_uniform_candidate_sampler",
                      "tensorflow.random.all_candidate_sampler")
_GLOBAL_SEEDS = frozenset({
    "tensorflow.random.set_seed", "tensorflow.compat.v1.set_random_seed",
    "tensorflow.compat.v1.random.set_random_seed", "keras.utils.set_random_seed",
})


def _seeded_random(q: str | None) -> bool:
    if not q or q.startswith(_NOT_SEEDED_RANDOM):
        return False
    return q.startswith(_SEEDED_RANDOM_PREFIXES) or q in _SEEDED_RANDOM_EXACT


class RandomMapWithFixedSeed(Rule):
    code = "TFL407"
    name = "random-map-with-fixed-seed"
    severity = Severity.WARNING
    summary = "A `tf.random`/`tf.image.random_*` op in `Dataset.map` under a fixed seed draws the same values every epoch"
    what = (
        "Checks for `Dataset.map(f)` where `f` (or a function of the module it calls) draws with "
        "a stateful TensorFlow random op (`tf.random.uniform`, `tf.image.random_flip_left_right`, "
        "`tf.nn.dropout`...) while its seed is fixed — the module sets a global seed "
        "(`tf.random.set_seed`, `keras.utils.set_random_seed`) or the op gets a `seed=` — and "
        "the dataset is iterated anew each epoch: `fit` with several epochs over a finite "
        "dataset and no `steps_per_epoch` (with it, Keras keeps one iterator across epochs), or "
        "a loop over it inside another loop. A `cache()` after the map is TFL404's."
    )
    why = (
        "With its seed fixed, a stateful random op's stream starts over whenever its kernel is "
        "created again, and every new iterator of the dataset (each epoch of `fit`, each "
        "`for x in ds`) creates it again: every epoch draws exactly the values of the first. "
        "Augmentation (random flips, crops, noise) then shows one variant of each example for "
        "the whole run (measured on TensorFlow 2.21: under `tf.random.set_seed(0)` a map adding "
        "`tf.random.uniform` noise gives identical losses in each epoch of `fit` with frozen "
        "weights). Nothing fails; the model overfits as if there were no augmentation."
    )
    example = (
        """
        tf.random.set_seed(42)

        def augment(image, label):
            return tf.image.random_flip_left_right(image), label

        model.fit(ds.map(augment).batch(32), epochs=20)
        """
    )
    use_instead = (
        """
        tf.random.set_seed(42)
        rng = tf.random.Generator.from_seed(42)

        def augment(image, label):
            seed = rng.make_seeds(1)[:, 0]
            return tf.image.stateless_random_flip_left_right(image, seed), label

        model.fit(ds.map(augment).batch(32), epochs=20)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        def augment(image, label):
            return tf.image.random_flip_left_right(image), label

        ds = tf.data.Dataset.from_tensor_slices((images, labels)).map(augment).batch(32)
        model.fit(ds, epochs=20)  # no fixed seed: a new stream each epoch
        """,
        """
        import tensorflow as tf

        tf.random.set_seed(42)
        rng = tf.random.Generator.from_seed(42)

        def augment(image, label):
            seed = rng.make_seeds(1)[:, 0]
            return tf.image.stateless_random_flip_left_right(image, seed), label

        ds = tf.data.Dataset.from_tensor_slices((images, labels)).map(augment).batch(32)
        model.fit(ds, epochs=20)
        """,
        """
        import tensorflow as tf

        tf.random.set_seed(42)

        def augment(image, label):
            return tf.image.random_flip_left_right(image), label

        ds = tf.data.Dataset.from_tensor_slices((images, labels)).map(augment).batch(32).repeat()
        model.fit(ds, epochs=20, steps_per_epoch=100)  # one iterator: the stream goes on
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        tf.random.set_seed(42)

        def augment(image, label):
            return tf.image.random_flip_left_right(image), label

        ds = tf.data.Dataset.from_tensor_slices((images, labels))
        ds = ds.map(augment).batch(32)  # expect: TFL407
        model.fit(ds, epochs=20)
        """,
        """
        import tensorflow as tf

        noisy = tf.data.Dataset.range(100).map(  # expect: TFL407
            lambda x: tf.cast(x, tf.float32) + tf.random.normal([], seed=7))
        for epoch in range(10):
            for x in noisy:
                train_step(x)
        """,
        """
        import keras
        import tensorflow as tf

        keras.utils.set_random_seed(0)

        def jitter(x):
            return x + tf.random.uniform(tf.shape(x), maxval=0.1)

        train = tf.data.Dataset.from_tensor_slices(x_train).map(jitter).batch(64)  # expect: TFL407
        model.fit(train, epochs=num_epochs)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if not a.mentions("random"):
            return
        facts = a.datasets
        seed_call = next((n for n in a.nodes(ast.Call) if a.call_name(n) in _GLOBAL_SEEDS), None)
        for t in facts.transformations:
            if t.method != "map":
                continue
            funcs = facts.map_functions(t.node)
            flags = facts.python_flags(t.node, funcs)
            op = None
            for f in functions_run_by(facts, funcs, flags=flags):
                for call in calls_in(f, flags if f in funcs else None):
                    if _seeded_random(a.call_name(call)) and (
                        seed_call is not None or any(k.arg == "seed" for k in call.keywords)
                    ):
                        op = call
                        break
                if op is not None:
                    break
            if op is None or not self._iterated_again(ctx, t.node):
                continue
            name = ctx.segment(op.func).strip()
            why = (f"the global seed (line {seed_call.lineno})" if seed_call is not None
                   else "its `seed=`")
            ctx.report(
                _method_span(ctx, t.node),
                f"`{name}` (line {op.lineno}) in this map draws the same values every epoch: {why} "
                "restarts its random stream with each new iterator of the dataset, so the "
                "augmentation repeats epoch after epoch. Draw from a `tf.random.Generator` (or "
                "use Keras random layers, whose state carries over)",
                end_node=t.node,
            )

    @staticmethod
    def _iterated_again(ctx: RuleContext, node: ast.Call) -> bool:
        """A consumption of the dataset the map at ``node`` yields makes a new iterator per
        epoch, and nothing after the map caches it: ``fit`` with ``epochs`` not a literal 1 (absent:
        one epoch) and no ``steps_per_epoch`` (with it, Keras keeps one iterator across epochs
        until the data runs out) over a finite dataset; or ``for`` over it inside another loop."""
        a = ctx.analysis
        for c in a.datasets.consumptions:
            for chain in c.chains:
                idx = next((i for i, s in enumerate(chain.steps) if s.node is node), None)
                if idx is None or any(s.method == "cache" for s in chain.steps[idx + 1:]):
                    continue
                if c.kind == "fit" and c.role == "x":
                    keywords = {k.arg: k.value for k in c.node.keywords}
                    epochs = keywords.get("epochs")
                    infinite = any(s.method == "repeat" and not s.node.args and not s.node.keywords
                                   for s in chain.steps)
                    if (epochs is not None and not (isinstance(epochs, ast.Constant) and epochs.value == 1)
                            and "steps_per_epoch" not in keywords and not infinite):
                        return True
                elif c.kind == "for" and a.loops.enclosing_loops(c.node):
                    return True
        return False


def _split_shuffles(transformations) -> dict[ast.Call, dict[str, int]]:
    """Reshuffling ``shuffle`` calls whose dataset is cut in two by a later ``take(n)`` and
    ``skip(n)`` (no ``cache``, ``unbatch`` or other cut in between): shuffle -> {method: line}."""
    cuts: dict[ast.Call, dict[str, int]] = {}
    for t in transformations:
        if t.method not in ("take", "skip"):
            continue
        for chain in t.receiver:
            shuffle = None
            for step in chain.steps:
                if step.method == "shuffle":
                    shuffle = step.node if _reshuffles(step.node) else None
                elif step.method in ("cache", "take", "skip", "unbatch"):
                    shuffle = None  # replayed, or cut already: not judged
            if shuffle is not None:
                cuts.setdefault(shuffle, {}).setdefault(t.method, t.node.lineno)
    return {s: where for s, where in cuts.items() if len(where) == 2}


def _batch_of_one(ctx: RuleContext, call: ast.Call) -> bool:
    """``batch(1)`` (or ``batch(batch_size)`` with ``batch_size = 1``): each batch is one
    example, so shuffling batches shuffles the examples."""
    size = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "batch_size"), None)
    return number_value(ctx.analysis, size) == 1


def _reshuffles(call: ast.Call) -> bool:
    """A ``shuffle(...)`` that draws a new order every epoch (``reshuffle_each_iteration`` not
    set to a literal ``False``)."""
    return not (
        any(k.arg == "reshuffle_each_iteration" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in call.keywords)
        or (len(call.args) >= 3 and isinstance(call.args[2], ast.Constant) and call.args[2].value is False)
    )


def _buffer(call: ast.Call) -> int | None:
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "buffer_size"), None)
    return arg.value if isinstance(arg, ast.Constant) and type(arg.value) is int else None


def _smaller_buffer(later: ast.Call, earlier: ast.Call) -> bool:
    """The later shuffle's buffer is a literal smaller than the earlier one's: it reorders only
    locally, and most of the replayed order survives."""
    a, b = _buffer(later), _buffer(earlier)
    return a is not None and b is not None and a < b


class PyFunctionInDatasetMap(Rule):
    code = "TFL405"
    name = "py-function-in-dataset-map"
    severity = Severity.WARNING
    summary = "`tf.py_function`/`tf.numpy_function` inside `Dataset.map` runs its Python one call at a time"
    what = (
        "Checks for `tf.py_function` / `tf.numpy_function` called in a function passed to "
        "`Dataset.map` (directly, or in a function of the module it calls)."
    )
    why = (
        "The wrapped function runs in the Python interpreter, and its Python code holds the GIL: "
        "`num_parallel_calls` threads wait for each other while it runs, so pure-Python work "
        "(parsing, per-element loops) gains (almost) nothing from parallel calls however many "
        "cores there are, and the accelerator waits for input (measured on TensorFlow 2.21: "
        "pure-Python work in `numpy_function` with `AUTOTUNE` runs about as fast as with one "
        "call at a time). Work that releases the GIL (file reads, large numpy operations) "
        "overlaps only in those parts. The dataset also cannot be serialized (tf.data service, "
        "distributed workers): its graph holds a Python function that is not part of it."
    )
    example = (
        """
        def parse(line):
            return np.array([float(f) for f in line.decode().split(",")], np.float32)

        ds = ds.map(lambda line: tf.numpy_function(parse, [line], tf.float32),
                    num_parallel_calls=tf.data.AUTOTUNE)
        """
    )
    use_instead = (
        """
        def parse(line):
            return tf.strings.to_number(tf.strings.split(line, ","), tf.float32)

        ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        def load(path):
            return tf.io.parse_tensor(tf.io.read_file(path), tf.float32)

        ds = tf.data.Dataset.list_files('*.bin').map(load, num_parallel_calls=tf.data.AUTOTUNE)
        """,
        """
        import numpy as np
        import tensorflow as tf

        @tf.function
        def step(x):
            return tf.numpy_function(np.sort, [x], tf.float32)
        """,
        """
        import tensorflow as tf

        def load(path):
            return tf.py_function(lambda p: p, [path], tf.string)

        result = load(tf.constant('a'))
        """,
    ]
    INVALID = [
        """
        import numpy as np
        import tensorflow as tf

        def load(path):
            return tf.numpy_function(lambda p: np.load(p), [path], tf.float32)  # expect: TFL405

        ds = tf.data.Dataset.list_files('*.npy').map(load, num_parallel_calls=tf.data.AUTOTUNE)
        """,
        """
        import tensorflow as tf

        ds = tf.data.Dataset.range(10)
        ds = ds.map(lambda x: tf.py_function(lambda v: v + 1, [x], tf.int64), num_parallel_calls=2)  # expect: TFL405
        """,
        """
        import tensorflow as tensorflow_lib

        def decode(raw):
            return raw

        def wrapped(raw):
            return tensorflow_lib.py_function(decode, [raw], tensorflow_lib.string)  # expect: TFL405

        def parse(raw):
            return wrapped(raw)

        ds = tensorflow_lib.data.TextLineDataset(['a.txt']).map(parse, num_parallel_calls=4)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.analysis.datasets
        a = ctx.analysis
        done: set[ast.AST] = set()
        for t in facts.transformations:
            if t.method != "map":
                continue
            for f in functions_run_by(facts, facts.map_functions(t.node)):
                for call in calls_in(f):
                    if call in done or a.call_name(call) not in _EAGER_WRAPPERS:
                        continue
                    done.add(call)
                    name = "tf." + a.call_name(call).rsplit(".", 1)[-1]
                    ctx.report(
                        call,
                        f"`{name}` in the function given to `Dataset.map` (line {t.node.lineno}) "
                        "runs Python under the GIL: parallel calls wait for each other while "
                        "its Python code runs, and the pipeline cannot be serialized. Use "
                        "TensorFlow ops",
                        end_node=call.func,
                    )


# Constructors that list files and shuffle them by default, each with a seed of its own unless
# given one: (keyword of the shuffle flag, its position, keyword of the seed, its position)
_SHUFFLED_LISTINGS = {
    "tensorflow.data.Dataset.list_files": ("shuffle", 1, "seed", 2),
    "keras.utils.image_dataset_from_directory": ("shuffle", 7, "seed", 8),
    "keras.preprocessing.image_dataset_from_directory": ("shuffle", 7, "seed", 8),
    "keras.utils.text_dataset_from_directory": ("shuffle", 6, "seed", 7),
    "keras.preprocessing.text_dataset_from_directory": ("shuffle", 6, "seed", 7),
}
# Constructors that keep their input's order
_ORDERED_ROOTS = frozenset({
    "tensorflow.data.Dataset.from_tensor_slices",
    "tensorflow.data.TFRecordDataset",
    "tensorflow.data.TextLineDataset",
    "tensorflow.data.FixedLengthRecordDataset",
})
_DATASET_ZIP = frozenset({"tensorflow.data.Dataset.zip", "tensorflow.compat.v1.data.Dataset.zip"})


class ZipOfShuffledFileListings(Rule):
    code = "TFL408"
    name = "zip-of-shuffled-file-listing"
    severity = Severity.ERROR
    summary = "`Dataset.zip` pairs a file listing that shuffles in an order of its own: the pairs do not match"
    what = (
        "Checks for `tf.data.Dataset.zip` of datasets that should line up element by element "
        "(images and masks, inputs and targets, files and labels) when one of them comes from "
        "`Dataset.list_files(...)` or `image_dataset_from_directory(...)` with its default "
        "shuffling and no `seed`, and another is a listing or array that keeps its own order "
        "(`list_files(..., shuffle=False)`, `from_tensor_slices(labels)`), the same listing "
        "read again (`zip((files.map(load_image), files.map(load_mask)))`), or a second "
        "listing that shuffles its own way and whose name or pattern says it holds each "
        "element's partner (`masks`, `labels`, `targets`, `sharp`, `clean`, `y`...). Listings "
        "that shuffle with the same `seed`, two shuffled listings of unrelated names (unpaired "
        "data, as CycleGAN's `trainA`/`trainB`, is zipped at random on purpose), and datasets "
        "shuffled with an explicit `.shuffle()` are not reported."
    )
    why = (
        "`list_files` shuffles the file names by default, and `image_dataset_from_directory` "
        "too (`shuffle=True`); without a `seed` each draws a random seed of its own. `zip` then "
        "pairs the i-th element of one random order with the i-th element of another order: "
        "each image meets some other file's mask or label, and the model trains on noise "
        "without an error (measured on TensorFlow 2.21: zipping `list_files` of 20 images with "
        "`list_files` of their 20 masks pairs 2 of them correctly; with `shuffle=False`, or "
        "the same `seed` on both, all 20). One listing read by both sides (`zip((files.map("
        "load_image), files.map(load_mask)))`) is no better: each side iterates it anew, and "
        "each iteration reshuffles (0 of 20 pairs matched)."
    )
    example = (
        """
        images = tf.data.Dataset.list_files("data/images/*.png")
        masks = tf.data.Dataset.list_files("data/masks/*.png")
        ds = tf.data.Dataset.zip((images, masks)).map(load_pair)
        """
    )
    use_instead = (
        """
        images = tf.data.Dataset.list_files("data/images/*.png", shuffle=False)
        masks = tf.data.Dataset.list_files("data/masks/*.png", shuffle=False)
        ds = tf.data.Dataset.zip((images, masks)).shuffle(1000).map(load_pair)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        images = tf.data.Dataset.list_files("data/images/*.png", shuffle=False)
        masks = tf.data.Dataset.list_files("data/masks/*.png", shuffle=False)
        ds = tf.data.Dataset.zip((images, masks)).shuffle(1000)
        """,
        """
        import keras
        import tensorflow as tf

        SEED = 123
        images = keras.utils.image_dataset_from_directory("img", labels=None, seed=SEED)
        masks = keras.utils.image_dataset_from_directory("mask", labels=None, seed=SEED)
        ds = tf.data.Dataset.zip((images, masks))
        """,
        """
        import tensorflow as tf

        # unpaired domains (CycleGAN), shuffled on purpose
        horses = tf.data.Dataset.from_tensor_slices(horse_files).shuffle(1000)
        zebras = tf.data.Dataset.from_tensor_slices(zebra_files).shuffle(1000)
        ds = tf.data.Dataset.zip((horses, zebras))
        """,
        """
        import tensorflow as tf

        files = tf.data.Dataset.list_files("shards/*.tfrecord")
        ds = tf.data.Dataset.zip((files, tf.data.Dataset.range(1000)))  # an index, not a pair
        """,
        """
        import tensorflow as tf

        # unpaired domains (CycleGAN): each listing shuffles its own way, on purpose
        train_a = tf.data.Dataset.list_files("monet2photo/trainA/*.jpg")
        train_b = tf.data.Dataset.list_files("monet2photo/trainB/*.jpg")
        ds = tf.data.Dataset.zip((train_a, train_b))
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        images = tf.data.Dataset.list_files("data/images/*.png")  # expect: TFL408
        masks = tf.data.Dataset.list_files("data/masks/*.png", shuffle=False)
        ds = tf.data.Dataset.zip((images, masks))
        """,
        """
        import tensorflow as tf

        paths = tf.data.Dataset.list_files("photos/*.jpg").map(tf.io.read_file)  # expect: TFL408
        labels = tf.data.Dataset.from_tensor_slices(label_list)
        train = tf.data.Dataset.zip((paths, labels)).batch(32)
        """,
        """
        import keras
        import tensorflow as tf

        def load(folder):
            return keras.utils.image_dataset_from_directory(folder, labels=None)  # expect: TFL408

        train = tf.data.Dataset.zip((load("blurred"), load("sharp")))
        """,
        """
        import tensorflow as tf

        files = tf.data.Dataset.list_files("data/*.png")  # expect: TFL408
        images = files.map(load_image)
        masks = files.map(mask_path_of).map(load_image)
        ds = tf.data.Dataset.zip((images, masks))
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        facts = a.datasets
        for call in a.nodes(ast.Call):
            if a.call_name(call) not in _DATASET_ZIP:
                continue
            known = [(p, o) for p in _zipped(call) if (o := self._order(ctx, facts.chains_of(p))) is not None]
            found = self._mismatch(ctx, known, call)
            if found is None:
                continue
            (_, (kind, _, root)), other = found
            name = a.call_name(root).rsplit(".", 1)[-1]
            how = "a random order of its own" if kind == "shuffled" else "the order of its `seed`"
            ctx.report(
                root,
                f"`{name}()` shuffles in {how}, and `Dataset.zip` (line {call.lineno}) pairs it "
                f"with `{ctx.segment(other)}`, which has another order: elements meet the wrong "
                "partners (an image another file's mask or label). Pass `shuffle=False` (or one "
                "`seed` to every listing) and shuffle after `zip`",
                end_node=root.func,
            )

    @staticmethod
    def _mismatch(ctx: RuleContext, known: list, zip_call: ast.Call) -> tuple[tuple, ast.AST] | None:
        """A zipped listing that shuffles and a partner in another order, when the two are
        meant to line up: the partner keeps a fixed order (labels, a listing with
        ``shuffle=False``), or it is the same listing read again (one constructor in the zip's
        own function, not a helper that makes a new listing per call), or its name or pattern
        says it holds what belongs to each element (``masks``, ``labels``, ``targets``,
        ``sharp``...). Two listings of unrelated names that each shuffle are unpaired data
        (CycleGAN's ``trainA``/``trainB``), zipped at random on purpose; two seeds written
        differently may still be equal (``seed=SEED``, ``seed=args.seed``): only two different
        numbers count."""
        for part, order in known:
            if order[0] == "ordered":
                continue
            for other, o in known:
                if other is part or o[1] == order[1]:
                    continue
                if o[0] == order[0] == "seeded" and not all(isinstance(k[1][1], (int, float)) for k in (o, order)):
                    continue
                same = o[2] is order[2] and ctx.analysis.enclosing_function(o[2]) is ctx.analysis.enclosing_function(zip_call)
                if o[0] == "ordered" or same or _names_a_partner(ctx, other, o[2]) \
                        or _names_a_partner(ctx, part, order[2]):
                    return (part, order), other
        return None

    @staticmethod
    def _order(ctx: RuleContext, chains) -> tuple[str, object, ast.Call | None] | None:
        """How one zipped dataset orders its elements: ``("shuffled", key, root)`` for a listing
        that shuffles with a seed of its own (``key`` unique to it), ``("seeded", ("seed", the
        seed's value or text), root)``, ``("ordered", "ordered", root)``: two datasets line up
        when their keys are equal. ``None`` when not known (an explicit
        ``.shuffle()``, a counter, a parameter, several possible pipelines)."""
        if len(chains) != 1:
            return None
        chain = chains[0]
        if not chain.known or chain.find("shuffle"):
            return None
        root = chain.root
        if not isinstance(root, ast.Call):
            return None
        q = ctx.analysis.call_name(root)
        spec = _SHUFFLED_LISTINGS.get(q or "")
        if spec is None:
            return ("ordered", "ordered", root) if q in _ORDERED_ROOTS else None
        flag_kw, flag_at, seed_kw, seed_at = spec
        pattern = root.args[0] if root.args else None
        if (q.endswith("list_files") and isinstance(pattern, ast.Constant) and isinstance(pattern.value, str)
                and not any(ch in pattern.value for ch in "*?[")):
            return None  # one file
        flag = _argument_at(root, flag_kw, flag_at)
        if flag is not None:
            if isinstance(flag, ast.Constant) and flag.value is False:
                return ("ordered", "ordered", root)
            if not (isinstance(flag, ast.Constant) and flag.value in (True, None)):
                return None  # shuffled or not, as a variable says
        seed = _argument_at(root, seed_kw, seed_at)
        if seed is not None and not (isinstance(seed, ast.Constant) and seed.value is None):
            value = number_value(ctx.analysis, seed)
            return ("seeded", ("seed", value if value is not None else ctx.segment(seed)), root)
        return ("shuffled", object(), root)


# words naming what belongs to each element of a paired dataset
_PARTNER_WORDS = frozenset({
    "mask", "masks", "label", "labels", "annotation", "annotations", "seg", "segmentation",
    "gt", "groundtruth", "target", "targets", "sharp", "clean", "hr", "depth", "y",
})


def _names_a_partner(ctx: RuleContext, part: ast.AST, root: ast.Call) -> bool:
    """The zipped dataset's own text or its listing's pattern names a partner of each element
    (``masks``, ``"data/labels/*.png"``, ``y_ds``)."""
    text = ctx.segment(part) + " " + (ctx.segment(root.args[0]) if root.args else "")
    words = re.split(r"[^a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower())
    return any(w in _PARTNER_WORDS for w in words)


def _zipped(call: ast.Call) -> list[ast.AST]:
    """The datasets ``Dataset.zip`` pairs: ``zip((a, b))``, ``zip(a, b)``, ``zip({"x": a, "y": b})``."""
    if len(call.args) == 1:
        arg = call.args[0]
        if isinstance(arg, (ast.Tuple, ast.List)):
            return list(arg.elts)
        if isinstance(arg, ast.Dict):
            return [v for v in arg.values if v is not None]
        return []
    return list(call.args)


def _argument_at(call: ast.Call, keyword: str, position: int) -> ast.AST | None:
    for k in call.keywords:
        if k.arg == keyword:
            return k.value
    return call.args[position] if len(call.args) > position else None
