"""TFL505-TFL508: ``tf.distribute`` training code that silently computes the wrong thing, or
does all the work once per replica.

Severities: TFL505, TFL507 and TFL508 are errors (the program trains something other than it
says: undistributed or broken variables, clobbered checkpoints, a loss scaled by the number of
replicas); TFL506 is a warning (the result is a valid but slower, redundantly fed training).
"""

from __future__ import annotations

import ast

from tflint.analysis.astutil import dotted, walk_own
from tflint.finding import Fix, Severity
from tflint.rules._fixes import end_of, replace_span, start_of, tensorflow_alias, wrap
from tflint.rules.base import Rule, RuleContext

_MODEL_CALLS = frozenset({
    "keras.Sequential", "keras.Model", "keras.models.Sequential", "keras.models.Model",
    "keras.models.load_model", "keras.saving.load_model", "keras.models.clone_model",
})


def _strategy_line(ctx: RuleContext) -> int | None:
    facts = ctx.analysis.strategies
    return facts.strategies[0].call.lineno if facts.strategies else None


def _is_model_class(a, cls: ast.ClassDef, depth: int = 0) -> bool:
    if depth > 5:
        return False
    for base in cls.bases:
        q = a.qualname(base)
        if q and q.startswith("keras.") and q.rsplit(".", 1)[-1] in ("Model", "Sequential", "Functional"):
            return True
        if isinstance(base, ast.Name):
            for node in a.tree.body:
                if isinstance(node, ast.ClassDef) and node.name == base.id and _is_model_class(a, node, depth + 1):
                    return True
    return False


def creation_kind(a, call: ast.Call) -> str | None:
    """``"model"``, ``"optimizer"``, ``"metric"`` or ``"variable"`` when ``call`` creates
    TensorFlow state that a strategy must own."""
    q = a.call_name(call)
    if q:
        if q.endswith("()") or "()." in q:
            return None  # calling an instance (``metric(y, p)``, ``model(x)``) creates nothing
        last = q.rsplit(".", 1)[-1]
        if q in _MODEL_CALLS or (q.startswith("keras.applications.") and last[:1].isupper()):
            return "model"
        if (q.startswith(("keras.optimizers.", "tensorflow.optimizers.")) and last[:1].isupper()
                and ".schedules." not in q and last not in ("Optimizer", "LossScaleOptimizer")):
            return "optimizer"
        if q.startswith("keras.metrics.") and last[:1].isupper() and last != "Metric":
            return "metric"
        if q == "tensorflow.Variable":
            return "variable"
        return None
    if isinstance(call.func, ast.Name):
        for node in a.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == call.func.id and _is_model_class(a, node):
                return "model"
    return None


class VariableOutsideStrategyScope(Rule):
    code = "TFL505"
    name = "variable-outside-strategy-scope"
    severity = Severity.ERROR
    summary = "Model, optimizer, metric or `tf.Variable` created outside `strategy.scope()`"
    what = (
        "Checks, in a module that trains with a `tf.distribute` strategy (it enters "
        "`strategy.scope()` or calls `strategy.run`), for Keras models, optimizers, metrics and "
        "`tf.Variable`s created by code that runs outside every `strategy.scope()` block (at "
        "module level, or in a function called from there) and used by code that runs with "
        "the strategy: inside a scope block, in a replica function, in `strategy.run`'s "
        "arguments, or passed to a function that opens a scope or calls `run`. Objects kept "
        "apart on purpose (a model restored for evaluation, a coordinator-side metric, an "
        "eager bookkeeping variable) are not reported, nor are metrics that the strategy code "
        "only updates and reads through their own methods (`metric.update_state(loss)`) and "
        "variables updated that way outside the replica function (`epoch.assign_add(1)` in the "
        "eager loop): on TensorFlow 2.21 they end with the same values made inside or outside "
        "the scope. A counter made outside and updated in the replica function counts every "
        "replica's step, and is reported."
    )
    why = (
        "A strategy owns only the variables created inside its scope: there they become "
        "mirrored (one synchronised copy per replica). A model, optimizer or metric created "
        "outside gets ordinary variables on one device. Keras then trains without the strategy "
        "or fails when the optimizer builds its slots (\"...created under a different "
        "strategy scope\"), and a custom `strategy.run` loop updates one copy from every "
        "replica, or raises in the cross-replica update."
    )
    example = (
        """
        strategy = tf.distribute.MirroredStrategy()
        model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
        optimizer = tf.keras.optimizers.Adam()
        with strategy.scope():
            model.compile(optimizer=optimizer, loss='mse')
        """
    )
    use_instead = (
        """
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
            optimizer = tf.keras.optimizers.Adam()
            model.compile(optimizer=optimizer, loss='mse')
        """
    )
    VALID = [
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            opt = tf.keras.optimizers.SGD()
            step = tf.Variable(0)
        model.compile(optimizer=opt, loss='mse')
        """,
        """
        import tensorflow as tf

        def build():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            model.compile(optimizer=tf.keras.optimizers.Adam(), loss='mse')
            return model

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = build()
        """,
        """
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        opt = tf.keras.optimizers.Adam()
        v = tf.Variable(1.0)
        """,
        """
        from tensorflow import keras
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        dense = keras.layers.Dense(4)
        schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 100, 0.9)
        with strategy.scope():
            model = keras.Sequential([dense])
            opt = keras.optimizers.Adam(schedule)
        """,
        """
        import tensorflow as tf

        class Net(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.scale = tf.Variable(1.0)

        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            net = Net()

        def step(x):
            return net(x)

        strategy.run(step, args=(1.0,))
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            model.compile(optimizer="adam", loss="mse")
        model.fit(train_ds, epochs=2)
        model.save("model.keras")

        # evaluated without the strategy, on purpose
        restored = tf.keras.models.load_model("model.keras")
        restored.evaluate(test_ds)
        eval_model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        eval_model.load_weights("weights.h5")
        eval_accuracy = tf.keras.metrics.BinaryAccuracy()
        for x, y in test_ds:
            eval_accuracy.update_state(y, eval_model(x))
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            optimizer = tf.keras.optimizers.SGD()

        @tf.function
        def step(it):
            def replica_fn(x):
                return model(x)
            return strategy.run(replica_fn, args=(next(it),))

        epoch = tf.Variable(0)            # eager bookkeeping on the coordinator
        eval_accuracy = tf.keras.metrics.Accuracy()
        for _ in range(3):
            coordinator.schedule(step, args=(iterator,))
            epoch.assign_add(1)
        for x, y in eval_ds:
            eval_accuracy.update_state(y, tf.argmax(model(x), axis=-1))
        """,
        """
        import tensorflow as tf
        from tensorflow import keras

        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = keras.Sequential([keras.layers.Dense(1)])
            optimizer = keras.optimizers.Adam(1e-3)
        # only updated and read through their own methods: the same values as in the scope
        loss_metric = keras.metrics.Mean()
        epoch = tf.Variable(0, trainable=False)

        def replica_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            loss_metric.update_state(loss)

        with strategy.scope():
            for _ in range(3):
                strategy.run(replica_step, args=(1.0, 1.0))
                epoch.assign_add(1)
        print(float(loss_metric.result()), int(epoch.numpy()))
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # expect: TFL505
        with strategy.scope():
            opt = tf.keras.optimizers.Adam()
            model.compile(optimizer=opt, loss='mse')
        """,
        """
        import tensorflow as tf
        from tensorflow import keras

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = keras.Sequential([keras.layers.Dense(1)])
        optimizer = keras.optimizers.Adam(1e-3)  # expect: TFL505
        temperature = tf.Variable(1.0)  # expect: TFL505

        def replica_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) / temperature - y))
            params = model.trainable_variables + [temperature]
            grads = tape.gradient(loss, params)
            optimizer.apply_gradients(zip(grads, params))

        strategy.run(replica_step, args=(1.0, 1.0))
        """,
        """
        import tensorflow as tensorflow_lib

        class Net(tensorflow_lib.keras.Model):
            def call(self, x):
                return x

        def build():
            return Net()  # expect: TFL505

        def main():
            strategy = tensorflow_lib.distribute.MirroredStrategy()
            model = build()
            with strategy.scope():
                opt = tensorflow_lib.keras.optimizers.SGD()
                model.compile(optimizer=opt, loss='mse')

        main()
        """,
        """
        import keras
        import tensorflow as tf

        strategy = tf.distribute.TPUStrategy()
        base = keras.applications.ResNet50(weights=None)  # expect: TFL505
        with strategy.scope():
            head = keras.Sequential([base, keras.layers.Dense(10)])
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        facts = a.strategies
        if not facts.uses_strategy or not (facts.scope_blocks or facts.run_calls):
            return
        line = _strategy_line(ctx)
        for node in ctx.analysis.nodes(ast.Call):
            if not isinstance(node, ast.Call):
                continue
            kind = creation_kind(a, node)
            if kind is None or not facts.runs_outside_scope(node) or facts.in_scope(node):
                continue
            # restored, evaluated or counted outside the strategy on purpose; a metric only
            # updated and read through its own methods ends with the same value made outside the
            # scope, and so does a variable updated that way outside replica code (in replica
            # code it counts every replica's update: measured on TensorFlow 2.21)
            own = {"metric": "anywhere", "variable": "cross-replica"}.get(kind)
            if not facts.used_with_strategy(node, own_methods_ok=own):
                continue
            what = ctx.segment(node.func) or kind
            ctx.report(
                node,
                f"{kind.capitalize()} `{what}(...)` is created outside `strategy.scope()` "
                f"(strategy on line {line}): its variables are not mirrored, so training runs "
                f"undistributed or fails. Create it inside `with strategy.scope():`",
            )


class UndistributedDataset(Rule):
    code = "TFL506"
    name = "undistributed-dataset"
    severity = Severity.WARNING
    summary = "Dataset fed to `strategy.run` without `experimental_distribute_dataset`"
    fixable = True
    fix_safety = (
        "When the dataset is the loop's iterable or the argument of `iter(...)`, the fix wraps "
        "it in `strategy.experimental_distribute_dataset(...)` with the strategy whose `run` it "
        "feeds. It is unsafe: each replica then receives its slice of every batch (the batch "
        "size becomes the global batch size), and values returned by `strategy.run` are "
        "per-replica; reduce them with `strategy.reduce` where a single value is needed."
    )
    what = (
        "Checks for a `tf.data` dataset iterated in a custom training loop that calls "
        "`strategy.run` (directly or through a step function), where the dataset was not "
        "passed through `strategy.experimental_distribute_dataset` or created by "
        "`strategy.distribute_datasets_from_function`."
    )
    why = (
        "`strategy.run(fn, args=(batch,))` with a plain tensor gives every replica the *same* "
        "whole batch: the batch is not split, each replica repeats the same work, the "
        "effective batch is one replica's, and a loss scaled by the global batch is wrong. "
        "Across workers (MultiWorkerMirroredStrategy) every worker also reads the whole "
        "dataset instead of its shard. Nothing fails: training is just N times slower per "
        "example."
    )
    example = (
        """
        for x, y in train_ds:
            strategy.run(train_step, args=(x, y))
        """
    )
    use_instead = (
        """
        dist_ds = strategy.experimental_distribute_dataset(train_ds)
        for x, y in dist_ds:
            strategy.run(train_step, args=(x, y))
        """
    )
    VALID = [
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        ds = tf.data.Dataset.range(8).batch(4)
        dist = strategy.experimental_distribute_dataset(ds)
        def step(x):
            return x
        for batch in dist:
            strategy.run(step, args=(batch,))
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        def make(ctx):
            return tf.data.Dataset.range(8).batch(ctx.get_per_replica_batch_size(8))
        def step(x):
            return x
        @tf.function
        def train(it):
            return strategy.run(step, args=(next(it),))
        it = iter(strategy.distribute_datasets_from_function(make))
        for _ in range(10):
            train(it)
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            model.compile(loss='mse')
        ds = tf.data.Dataset.from_tensor_slices(([[1.0]], [[1.0]])).batch(1)
        model.fit(ds, epochs=2)
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        ds = tf.data.Dataset.range(4)
        for x in ds:
            print(x)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        ds = tf.data.Dataset.range(8).batch(4)
        def step(x):
            return x
        for batch in ds:  # expect: TFL506
            strategy.run(step, args=(batch,))
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        train_ds = tf.data.Dataset.range(8).batch(4).prefetch(2)
        def replica_step(x):
            return x
        @tf.function
        def distributed_step(x):
            return strategy.run(replica_step, args=(x,))
        for epoch in range(3):
            for i, batch in enumerate(train_ds):  # expect: TFL506
                distributed_step(batch)
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        ds = tf.data.Dataset.range(8).batch(4)
        def step(x):
            return x
        @tf.function
        def train(it):
            return strategy.run(step, args=(next(it),))
        iterator = iter(ds)  # expect: TFL506
        for _ in range(10):
            train(iterator)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        facts = a.strategies
        if not facts.run_calls:
            return
        reported: set[ast.AST] = set()
        for loop in a.loops.loops:
            run = facts.body_calls_run(loop.body)
            if run is None:
                continue
            candidates: list[ast.AST] = []
            if isinstance(loop, (ast.For, ast.AsyncFor)):
                candidates.append(loop.iter)
            for arg in (*run.args, *(k.value for k in run.keywords)):
                candidates.append(arg)
            for cand in candidates:
                ds = self._plain_dataset(ctx, cand)
                if ds is not None and ds not in reported:
                    reported.add(ds)
                    inner = ds.args[0] if isinstance(ds, ast.Call) and dotted(ds.func) == "iter" and ds.args else ds
                    name = dotted(inner) or ctx.segment(inner) or "dataset"
                    if len(name) > 40:
                        name = name[:37] + "..."
                    fix = None
                    strategy = run.func.value if isinstance(run.func, ast.Attribute) else None
                    direct = ds is getattr(loop, "iter", None) or inner is not ds
                    if direct and isinstance(strategy, (ast.Name, ast.Attribute)) and dotted(strategy):
                        fix = Fix(
                            f"Distribute `{name}` with `{dotted(strategy)}.experimental_distribute_dataset`",
                            wrap(inner, f"{dotted(strategy)}.experimental_distribute_dataset(", ")"),
                            "unsafe",
                        )
                    ctx.report(
                        ds,
                        f"Dataset `{name}` feeds `strategy.run` (line {run.lineno}) without "
                        f"`strategy.experimental_distribute_dataset`: every replica gets the whole "
                        f"batch and repeats the same work. Distribute it first",
                        fix=fix,
                    )

    @staticmethod
    def _undistributed(a, expr: ast.AST) -> bool:
        if not a.datasets.is_dataset(expr):
            return False
        chains = getattr(a.datasets, "chains_of", lambda e: ())(expr)
        return not any(getattr(c, "distributed", False) for c in chains)

    def _plain_dataset(self, ctx: RuleContext, expr: ast.AST, depth: int = 0) -> ast.AST | None:
        """The expression that yields an undistributed dataset (or an iterator over one)."""
        a = ctx.analysis
        if depth > 4 or expr is None:
            return None
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("enumerate", "zip", "iter"):
            for arg in expr.args:
                if self._undistributed(a, arg):
                    return expr if expr.func.id == "iter" and depth > 0 else arg
            return None
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "next" and expr.args:
            return self._plain_dataset(ctx, expr.args[0], depth + 1)
        if isinstance(expr, ast.Tuple):
            for elt in expr.elts:
                found = self._plain_dataset(ctx, elt, depth + 1)
                if found is not None:
                    return found
            return None
        if self._undistributed(a, expr):
            return expr
        if isinstance(expr, ast.Name) and not a.datasets.is_dataset(expr):
            func = a.enclosing_function(expr)
            scopes = [func.body] if func is not None and not isinstance(func, ast.Lambda) else []
            scopes.append(ctx.tree.body)
            for body in scopes:
                for node in walk_own(body):
                    if (isinstance(node, ast.Assign) and len(node.targets) == 1
                            and isinstance(node.targets[0], ast.Name) and node.targets[0].id == expr.id
                            and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                            and node.value.func.id == "iter"):
                        return self._plain_dataset(ctx, node.value, depth + 1)
        return None


_GUARD_WORDS = ("chief", "task_id", "task_index", "task_type", "worker_id", "worker_index",
                "rank", "is_primary", "primary_worker")
_PATH_KEYWORDS = ("filepath", "export_dir", "logdir", "file_prefix", "directory", "path")
_WRITE_FUNCS = frozenset({
    "tensorflow.saved_model.save", "keras.models.save_model", "keras.saving.save_model",
    "tensorflow.summary.create_file_writer",
})
_CHECKPOINTS = frozenset({"tensorflow.train.Checkpoint", "tensorflow.train.CheckpointManager"})


class UnguardedMultiWorkerWrite(Rule):
    code = "TFL507"
    name = "unguarded-multi-worker-write"
    severity = Severity.ERROR
    summary = "Checkpoint, `model.save` or summary writer under MultiWorkerMirroredStrategy without a chief guard"
    what = (
        "Checks, in a module that uses `MultiWorkerMirroredStrategy`, for `model.save`/"
        "`save_weights`, `tf.saved_model.save`, `tf.train.Checkpoint`/`CheckpointManager` "
        "`save`/`write` and `tf.summary.create_file_writer` whose path does not depend on the "
        "worker (task id, task type, `is_chief`) and that are not under an `if` on the worker's "
        "role."
    )
    why = (
        "Every worker runs the same script. Without a guard every worker writes the same path "
        "at the same time: checkpoint files are overwritten by whichever worker finishes last, "
        "shards from different workers are mixed, a half-written SavedModel can be read back, "
        "and TensorBoard shows several interleaved runs in one directory. Saving is itself a "
        "collective operation, so the documented pattern is: every worker saves, the chief to "
        "the real path and the others to a temporary per-worker path they delete."
    )
    example = (
        """
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        ...
        model.save('/shared/model')
        """
    )
    use_instead = (
        """
        resolver = strategy.cluster_resolver
        is_chief = resolver.task_type in (None, 'chief') or (resolver.task_type == 'worker' and resolver.task_id == 0)
        path = '/shared/model' if is_chief else f'/tmp/model_worker{resolver.task_id}'
        model.save(path)
        if not is_chief:
            tf.io.gfile.rmtree(path)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        task_id = strategy.cluster_resolver.task_id
        path = '/shared/model' if task_id == 0 else f'/tmp/w{task_id}'
        model.save(path)
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        def is_chief():
            return strategy.cluster_resolver.task_id == 0
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        if is_chief():
            writer = tf.summary.create_file_writer('/logs')
            model.save_weights('/shared/w.weights.h5')
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        model.save('/out/model.keras')
        ckpt = tf.train.Checkpoint(model=model)
        ckpt.save('/out/ckpt')
        """,
        """
        import tensorflow as tf
        import numpy as np

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        np.save('/tmp/x.npy', np.zeros(3))
        def train(task_type):
            if task_type != 'chief':
                return
            tf.saved_model.save(tf.Module(), '/export')
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        model.save('/shared/model.keras')  # expect: TFL507
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
        with strategy.scope():
            net = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        ckpt = tf.train.Checkpoint(model=net)
        manager = tf.train.CheckpointManager(ckpt, '/shared/ckpt', max_to_keep=3)
        for epoch in range(3):
            manager.save()  # expect: TFL507
        """,
        """
        import tensorflow as tf
        from tensorflow.distribute import MultiWorkerMirroredStrategy

        strategy = MultiWorkerMirroredStrategy()
        writer = tf.summary.create_file_writer('/shared/logs')  # expect: TFL507
        def export(model):
            tf.saved_model.save(model, '/shared/export')  # expect: TFL507
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        facts = a.strategies
        if not facts.multi_worker:
            return
        line = next(s.call.lineno for s in facts.strategies if s.kind == "MultiWorkerMirroredStrategy")
        for node in ctx.analysis.nodes(ast.Call):
            if not isinstance(node, ast.Call):
                continue
            what = self._write_kind(ctx, node)
            if what is None:
                continue
            if self._guarded(ctx, node):
                continue
            ctx.report(
                node,
                f"{what} under MultiWorkerMirroredStrategy (line {line}) with no chief guard: "
                f"every worker writes the same path and they overwrite each other. Write to the "
                f"real path on the chief only and to a per-worker temporary path elsewhere",
            )

    def _write_kind(self, ctx: RuleContext, call: ast.Call) -> str | None:
        a = ctx.analysis
        q = a.call_name(call)
        if q in _WRITE_FUNCS:
            return f"`{ctx.segment(call.func)}`"
        f = call.func
        if not isinstance(f, ast.Attribute) or f.attr not in ("save", "save_weights", "write"):
            return None
        if q and q.startswith(("numpy.", "pandas.", "matplotlib.", "PIL.")):
            return None
        recv = f.value
        origin = self._origin(ctx, recv)
        if origin in _CHECKPOINTS:
            return f"`{ctx.segment(f)}()`"
        if f.attr == "write":
            return None
        text = dotted(recv) or ""
        if origin == "model" or text.rsplit(".", 1)[-1].lower().endswith(("model", "net")):
            return f"`{ctx.segment(f)}()`"
        return None

    def _origin(self, ctx: RuleContext, recv: ast.AST) -> str | None:
        a = ctx.analysis
        name = dotted(recv)
        if name is None:
            return None
        for node in ctx.analysis.nodes(ast.Assign):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                if any(dotted(t) == name for t in node.targets):
                    q = a.call_name(node.value)
                    if q in _CHECKPOINTS:
                        return q
                    if creation_kind(a, node.value) == "model":
                        return "model"
        return None

    def _guarded(self, ctx: RuleContext, call: ast.Call) -> bool:
        a = ctx.analysis
        # under an `if` on the worker's role
        child: ast.AST = call
        for anc in a.ancestors(call):
            if isinstance(anc, (ast.If, ast.IfExp, ast.While)) and child is not anc.test and _mentions_guard(anc.test):
                return True
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                # an early `if <role>: return` before the call in this body
                for stmt in anc.body:
                    if stmt.lineno >= call.lineno:
                        break
                    if isinstance(stmt, ast.If) and _mentions_guard(stmt.test) and any(
                        isinstance(s, (ast.Return, ast.Raise)) for s in stmt.body
                    ):
                        return True
                break
            child = anc
        # a path that depends on the worker
        paths = [*call.args[:1], *(k.value for k in call.keywords if k.arg in _PATH_KEYWORDS)]
        if isinstance(call.func, ast.Attribute) and not paths:
            # manager.save(): the directory given to its CheckpointManager
            name = dotted(call.func.value)
            for node in ctx.analysis.nodes(ast.Assign):
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                        and any(dotted(t) == name for t in node.targets)):
                    paths += [*node.value.args[1:2], *(k.value for k in node.value.keywords if k.arg in _PATH_KEYWORDS)]
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("save", "save_weights") and call.args:
            paths = paths[:1]
        return any(self._path_depends_on_worker(ctx, p, 0) for p in paths)

    def _path_depends_on_worker(self, ctx: RuleContext, expr: ast.AST, depth: int) -> bool:
        if depth > 3:
            return False
        if _mentions_guard(expr):
            return True
        a = ctx.analysis
        for node in ast.walk(expr):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                # a helper that picks the path by role: ``write_path(p)`` checking ``is_chief()``
                for helper in a.functions.get(node.func.id, []):
                    if any(_mentions_guard(n) for n in walk_own(helper.body) if isinstance(n, (ast.If, ast.IfExp, ast.Return))):
                        return True
            if isinstance(node, ast.Name):
                func = a.enclosing_function(node)
                bodies = [func.body] if func is not None and not isinstance(func, ast.Lambda) else []
                bodies.append(ctx.tree.body)
                for body in bodies:
                    for stmt in walk_own(body):
                        if (isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets)
                                and self._path_depends_on_worker(ctx, stmt.value, depth + 1)):
                            return True
        return False


def _mentions_guard(expr: ast.AST) -> bool:
    for node in ast.walk(expr):
        word = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if word and any(w in word.lower() for w in _GUARD_WORDS):
            return True
    return False


_MEAN_FUNCS = frozenset({"tensorflow.reduce_mean", "tensorflow.math.reduce_mean", "keras.ops.mean"})
_TF_MEAN_FUNCS = frozenset({"tensorflow.reduce_mean", "tensorflow.math.reduce_mean"})
_LOSS_PREFIX = "keras.losses."


class UnscaledReplicaLoss(Rule):
    code = "TFL508"
    name = "unscaled-replica-loss"
    severity = Severity.ERROR
    summary = "Per-replica loss averaged over the replica's batch instead of the global batch"
    fixable = True
    fix_safety = (
        "For `tf.reduce_mean(per_example_loss)` with one argument, the fix divides by the global "
        "batch instead: `tf.nn.compute_average_loss(per_example_loss)`, which sums the losses "
        "and divides by the replica's batch size times the number of replicas. It is unsafe: "
        "it is the same average only for a rank-1 per-example loss (a `[batch, time]` loss is "
        "summed over time too), and an uneven last batch is weighted by the global batch. Pass "
        "`global_batch_size=` when it is known. Keras loss objects get no fix."
    )
    what = (
        "Checks the replica function of a custom distributed loop (the function passed to "
        "`strategy.run`) for a differentiated loss that is a plain batch mean: "
        "`tf.reduce_mean` over the batch, or a Keras loss object with its default "
        "`sum_over_batch_size` reduction, not divided by the number of replicas or the global "
        "batch."
    )
    why = (
        "Each replica's gradients are summed across replicas when they are applied. With a "
        "loss averaged over the replica's own batch, the sum is N times the gradient of the "
        "global mean (N replicas): the model trains with an N-times-larger learning rate, and "
        "changing the number of devices changes the result. The loss must be divided by the "
        "global batch size: `tf.nn.compute_average_loss`."
    )
    example = (
        """
        def replica_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            grads = tape.gradient(loss, model.trainable_variables)
        """
    )
    use_instead = (
        """
        def replica_step(x, y):
            with tf.GradientTape() as tape:
                per_example = tf.reduce_mean(tf.square(model(x) - y), axis=-1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
            grads = tape.gradient(loss, model.trainable_variables)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        GLOBAL = 64
        def step(x, y):
            with tf.GradientTape() as tape:
                per_example = tf.reduce_mean(tf.square(model(x) - y), axis=-1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL)
            return tape.gradient(loss, model.trainable_variables)
        strategy.run(step, args=(1, 2))
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction='none')
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(loss_object(y, model(x))) / GLOBAL_BATCH
            return tape.gradient(loss, model.trainable_variables)
        strategy.run(step, args=(1, 2))
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y)) / strategy.num_replicas_in_sync
            return tape.gradient(loss, model.trainable_variables)
        strategy.run(step, args=(1, 2))
        """,
        """
        import tensorflow as tf

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            return tape.gradient(loss, model.trainable_variables)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))  # expect: TFL508
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
        @tf.function
        def train(x, y):
            strategy.run(step, args=(x, y))
        """,
        """
        import tensorflow as tf
        from tensorflow import keras

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        def replica_fn(inputs):
            x, y = inputs
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))  # expect: TFL508
            grads = tape.gradient(loss, model.trainable_variables)
            return loss
        strategy.run(replica_fn, args=(batch,))
        """,
        """
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        def compute_loss(y, logits):
            per_example = tf.keras.losses.mse(y, logits)
            return tf.math.reduce_mean(per_example)  # expect: TFL508
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = compute_loss(y, model(x)) + 0.01 * tf.add_n(model.losses)
            return tape.gradient(loss, model.trainable_variables)
        strategy.run(step, args=(1, 2))
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        facts = a.strategies
        reported: set[ast.AST] = set()
        for func, run in facts.replica_functions.items():
            if isinstance(func, ast.Lambda):
                continue
            for node in walk_own(func.body):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("gradient", "minimize") and node.args):
                    continue
                for bad in self._unscaled(ctx, node.args[0], func, 0):
                    if bad in reported:
                        continue
                    reported.add(bad)
                    how = ("a Keras loss object averaging over the replica's batch"
                           if not (isinstance(bad, ast.Call) and a.call_name(bad) in _MEAN_FUNCS)
                           else f"`{ctx.segment(bad.func)}` over the replica's batch")
                    ctx.report(
                        bad,
                        f"Loss of replica function `{func.name}` (run on line {run.lineno}) is "
                        f"{how}: gradients summed over replicas are num_replicas times too large. "
                        f"Use `tf.nn.compute_average_loss(per_example_loss, global_batch_size=...)`",
                        fix=self._average_loss_fix(ctx, bad),
                    )

    @staticmethod
    def _average_loss_fix(ctx: RuleContext, bad: ast.AST) -> Fix | None:
        """``tf.reduce_mean(per_example)`` → ``tf.nn.compute_average_loss(per_example)``."""
        a = ctx.analysis
        if not (isinstance(bad, ast.Call) and a.call_name(bad) in _TF_MEAN_FUNCS):
            return None
        if len(bad.args) != 1 or bad.keywords or isinstance(bad.args[0], ast.Starred):
            return None
        tf, imports = tensorflow_alias(ctx)
        text = f"{tf}.nn.compute_average_loss({ctx.segment(bad.args[0])})"
        return Fix(f"Average over the global batch: `{text}`", (replace_span(start_of(bad), end_of(bad), text), *imports), "unsafe")

    def _unscaled(self, ctx: RuleContext, expr: ast.AST, func: ast.AST, depth: int) -> list[ast.AST]:
        a = ctx.analysis
        if depth > 5 or expr is None:
            return []
        if isinstance(expr, ast.BinOp):
            if isinstance(expr.op, (ast.Div, ast.Mult, ast.FloorDiv)):
                return []  # scaled (by the global batch or the replica count)
            return self._unscaled(ctx, expr.left, func, depth + 1) + self._unscaled(ctx, expr.right, func, depth + 1)
        if isinstance(expr, ast.Name):
            out: list[ast.AST] = []
            for stmt in walk_own(func.body):
                if isinstance(stmt, (ast.Assign, ast.AugAssign)):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    if any(isinstance(t, ast.Name) and t.id == expr.id for t in targets):
                        out += self._unscaled(ctx, stmt.value, func, depth + 1)
            return out
        if not isinstance(expr, ast.Call):
            return []
        q = a.call_name(expr)
        if q in _MEAN_FUNCS:
            return [expr] if self._batch_axis(expr) else []
        if q and q.startswith("tensorflow.nn.compute_average_loss"):
            return []
        if self._mean_loss_object(ctx, expr.func):
            return [expr]
        # a module helper computing the loss: look at what it returns
        if isinstance(expr.func, ast.Name):
            out = []
            for helper in a.functions.get(expr.func.id, []):
                for stmt in walk_own(helper.body):
                    if isinstance(stmt, ast.Return) and stmt.value is not None:
                        out += self._unscaled(ctx, stmt.value, helper, depth + 1)
            return out
        return []

    @staticmethod
    def _batch_axis(call: ast.Call) -> bool:
        axis = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "axis"), None)
        if axis is None or (isinstance(axis, ast.Constant) and axis.value in (None, 0)):
            return True
        if isinstance(axis, (ast.List, ast.Tuple)):
            return any(isinstance(e, ast.Constant) and e.value == 0 for e in axis.elts)
        return False

    def _mean_loss_object(self, ctx: RuleContext, expr: ast.AST) -> bool:
        """``expr`` is (a name bound to) a Keras loss *object* with a batch-mean reduction."""
        a = ctx.analysis
        creation: ast.AST | None = expr if isinstance(expr, ast.Call) else None
        if isinstance(expr, ast.Name):
            for node in ctx.analysis.nodes(ast.Assign):
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                        and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)):
                    creation = node.value
        if not isinstance(creation, ast.Call):
            return False
        q = a.call_name(creation)
        if not q or not q.startswith(_LOSS_PREFIX) or not q.rsplit(".", 1)[-1][:1].isupper():
            return False
        red = next((k.value for k in creation.keywords if k.arg == "reduction"), None)
        if red is None:
            return True
        text = (red.value if isinstance(red, ast.Constant) else getattr(red, "attr", "")) or ""
        return str(text).lower() in ("sum_over_batch_size", "auto", "mean")
