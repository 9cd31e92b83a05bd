"""TFL5xx: device placement and memory (TFL501 is retired: see ``tflint.rules.RETIRED``)."""

from __future__ import annotations

import ast

from tflint.analysis.loops import walk_body
from tflint.finding import Fix, Severity
from tflint.rules._fixes import wrap
from tflint.rules.base import Rule, RuleContext


DEVICE_CONFIG = frozenset(
    {
        "tensorflow.config.experimental.set_memory_growth",
        "tensorflow.config.set_memory_growth",
        "tensorflow.config.set_visible_devices",
        "tensorflow.config.experimental.set_visible_devices",
        "tensorflow.config.set_logical_device_configuration",
        "tensorflow.config.experimental.set_logical_device_configuration",
        "tensorflow.config.set_virtual_device_configuration",
        "tensorflow.config.experimental.set_virtual_device_configuration",
    }
)
# TensorFlow calls that neither create tensors nor initialize the runtime.
_HARMLESS_PREFIXES = (
    "tensorflow.config.list_physical_devices",
    "tensorflow.config.experimental.list_physical_devices",
    "tensorflow.config.get_visible_devices",
    "tensorflow.config.experimental.get_visible_devices",
    "tensorflow.config.get_logical_device_configuration",
    "tensorflow.config.experimental.get_device_details",
    "tensorflow.config.experimental.get_memory_growth",
    "tensorflow.config.get_soft_device_placement",
    "tensorflow.config.set_",
    "tensorflow.config.experimental.set_",
    "tensorflow.config.experimental.enable_",
    "tensorflow.config.threading.",
    "tensorflow.config.optimizer.",
    "tensorflow.config.run_functions_eagerly",
    "tensorflow.config.experimental_run_functions_eagerly",
    "tensorflow.config.PhysicalDevice",
    "tensorflow.config.LogicalDeviceConfiguration",
    "tensorflow.config.experimental.VirtualDeviceConfiguration",
    "tensorflow.random.set_seed",
    "tensorflow.get_logger",
    "tensorflow.autograph.",
    "tensorflow.debugging.set_log_device_placement",
    "tensorflow.debugging.enable_check_numerics",
    "tensorflow.debugging.experimental.enable_dump_debug_info",
    "tensorflow.function",
    "tensorflow.TensorSpec",
    "tensorflow.RaggedTensorSpec",
    "tensorflow.SparseTensorSpec",
    "tensorflow.as_dtype",
    "tensorflow.dtypes.",
    "tensorflow.DType",
    "tensorflow.TensorShape",
    "tensorflow.io.gfile.",
    "tensorflow.sysconfig.",
    "tensorflow.version.",
    "tensorflow.__version__",
    "tensorflow.VERSION",
    "tensorflow.compat.v1.VERSION",
    "tensorflow.test.is_built_with",
    "tensorflow.executing_eagerly",
    "tensorflow.compat.v1.logging.",
    "tensorflow.compat.v1.enable_",
    "tensorflow.compat.v1.disable_",
    "tensorflow.compat.v1.ConfigProto",
    "tensorflow.compat.v1.GPUOptions",
    "tensorflow.data.Options",
    "tensorflow.experimental.numpy.experimental_enable_numpy_behavior",
    "tensorflow.keras.",
    "tensorflow.summary.experimental.",
    "tensorflow.distribute.cluster_resolver.",
    "tensorflow.distribute.experimental.CommunicationOptions",
    "tensorflow.data.experimental.enable_debug_mode",
    "tensorflow.python.eager.context._reset_context",
    "tensorflow.distribute.get_strategy",
    "tensorflow.distribute.has_strategy",
    "tensorflow.distribute.in_cross_replica_context",
    "tensorflow.distribute.get_replica_context",
)
# Keras calls that build or load a model (and so create variables).
_KERAS_INITIALIZERS = frozenset({"keras.models.load_model", "keras.saving.load_model"})
_KERAS_MODELS = frozenset({"keras.Sequential", "keras.models.Sequential", "keras.Model", "keras.models.Model"})


def _creates_tensors(q: str | None, call: ast.Call | None = None, a=None) -> bool:
    if not q:
        return False
    if q in _KERAS_INITIALIZERS or q.startswith("keras.applications."):
        return True
    if call is not None and a is not None and q in _KERAS_MODELS:
        # A model built on an ``Input`` creates its variables (and so initializes the runtime)
        # when constructed; a bare ``Sequential()`` or layer does not.
        if q.endswith("Sequential"):
            layers = call.args[0] if call.args else None
            return isinstance(layers, (ast.List, ast.Tuple)) and any(
                isinstance(e, ast.Call) and a.call_name(e) in ("keras.Input", "keras.layers.Input") for e in layers.elts
            )
        return bool(call.args or call.keywords)
    if not q.startswith("tensorflow."):
        return False
    return not q.startswith(_HARMLESS_PREFIXES)


# Results of TensorFlow calls that hold no device buffer of their own.
_NOT_TENSORS = frozenset({"TensorShape", "TensorSpec", "as_dtype", "DType", "name_scope", "device",
                          "get_static_value", "dimension_value", "executing_eagerly"})


# TFL501 (soft-device-placement) was removed: soft placement is on by default in TensorFlow 2,
# so `set_soft_device_placement(True)` changes nothing (tflint.rules.RETIRED; the premise test is
# tests/premises/test_devices.py).


class DeviceConfigAfterInit(Rule):
    code = "TFL502"
    name = "device-config-after-runtime-init"
    severity = Severity.WARNING
    summary = "Device configuration after tensors were created is rejected (often silently)"
    what = (
        "Checks for `set_memory_growth`, `set_visible_devices`, `set_logical_device_configuration` "
        "and `set_virtual_device_configuration` that run after the module (or the same "
        "function) already created tensors or ran TensorFlow ops."
    )
    why = (
        "The first tensor or op initializes the TensorFlow runtime and its devices. After that, "
        "physical devices can no longer be configured: the call raises `RuntimeError`, which "
        "the usual `try: ... except RuntimeError as e: print(e)` recipe swallows. The process then "
        "grabs all GPU memory (no memory growth) or sees every GPU, although the code says "
        "otherwise."
    )
    example = (
        """
        x = tf.constant([1.0])
        for gpu in tf.config.list_physical_devices('GPU'):
            tf.config.experimental.set_memory_growth(gpu, True)
        """
    )
    use_instead = (
        """
        for gpu in tf.config.list_physical_devices('GPU'):
            tf.config.experimental.set_memory_growth(gpu, True)
        x = tf.constant([1.0])
        """
    )
    VALID = [
        """
        import tensorflow as tf

        for gpu in tf.config.list_physical_devices('GPU'):
            tf.config.experimental.set_memory_growth(gpu, True)
        x = tf.constant(1.0)
        """,
        """
        import tensorflow as tf

        def setup():
            gpus = tf.config.list_physical_devices('GPU')
            tf.config.set_visible_devices(gpus[:1], 'GPU')

        def main():
            setup()
            return tf.zeros([2])
        """,
        """
        import tensorflow as tf

        assert tf.version.VERSION.startswith('2.'), tf.__version__
        tf.random.set_seed(0)
        tf.config.set_soft_device_placement(False)
        gpus = tf.config.list_physical_devices('GPU')
        if gpus:
            tf.config.set_logical_device_configuration(gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=1024)])
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        x = tf.constant([1.0, 2.0])
        for gpu in tf.config.list_physical_devices('GPU'):
            tf.config.experimental.set_memory_growth(gpu, True)  # expect: TFL502
        """,
        """
        import tensorflow as tf

        def main():
            strategy = tf.distribute.MirroredStrategy()
            gpus = tf.config.list_physical_devices('GPU')
            try:
                tf.config.set_visible_devices(gpus[0], 'GPU')  # expect: TFL502
            except RuntimeError as e:
                print(e)
            return strategy
        """,
        """
        import tensorflow as tensorflow_lib

        def configure():
            gpus = tensorflow_lib.config.list_physical_devices('GPU')
            tensorflow_lib.config.experimental.set_virtual_device_configuration(gpus[0], [])  # expect: TFL502

        weights = tensorflow_lib.Variable(tensorflow_lib.zeros([3]))
        configure()
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if not any(m in ctx.source for m in ("memory_growth", "visible_devices", "device_configuration")):
            return  # cheap text test: nothing to look at
        a = ctx.analysis
        configs: list[tuple[ast.Call, str]] = []
        for node in ctx.analysis.nodes(ast.Call):
            if isinstance(node, ast.Call):
                q = a.call_name(node)
                if q in DEVICE_CONFIG:
                    configs.append((node, q))
        if not configs:
            return
        module_ops = self._ops(a, ctx.tree.body)
        resets = [
            n for n in ctx.analysis.nodes(ast.Call)
            if isinstance(n, ast.Call) and (a.call_name(n) or "").endswith("context._reset_context")
            or isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "_reset_context"
        ]
        for call, q in configs:
            func = a.enclosing_function(call)
            body = func.body if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) else ctx.tree.body
            earlier = self._first_before(self._ops(a, body), call, resets)
            if earlier is None and func is not None and isinstance(func, ast.FunctionDef) and a.parent(func) is ctx.tree:
                # the configuring function called at module level after module-level ops
                for site in self._module_calls_of(ctx, func.name):
                    earlier = self._first_before(module_ops, site, resets)
                    if earlier is not None:
                        break
            if earlier is None:
                continue
            op_name = (ast.get_source_segment(ctx.source, earlier.func) or "a TensorFlow op").strip()
            ctx.report(
                call,
                f"`{q.rsplit('.', 1)[-1]}` runs after `{op_name}` (line {earlier.lineno}) already "
                "initialized the TensorFlow runtime: it raises RuntimeError and the setting is not "
                "applied. Configure devices before creating any tensor",
            )

    @staticmethod
    def _first_before(ops: list[ast.Call], at: ast.AST, resets: list[ast.Call] = ()) -> ast.Call | None:
        pos = (at.lineno, at.col_offset)
        # A context reset before ``at`` forgets everything created before it.
        floor = max(((r.lineno, r.col_offset) for r in resets if (r.lineno, r.col_offset) < pos), default=(0, 0))
        best = None
        for op in ops:
            if floor < (op.lineno, op.col_offset) < pos and (best is None or (op.lineno, op.col_offset) < (best.lineno, best.col_offset)):
                best = op
        return best

    @staticmethod
    def _ops(a, body: list[ast.stmt]) -> list[ast.Call]:
        return [n for n in walk_body(body) if isinstance(n, ast.Call) and _creates_tensors(a.call_name(n), n, a)]

    @staticmethod
    def _module_calls_of(ctx: RuleContext, name: str) -> list[ast.Call]:
        return [
            n for n in walk_body(ctx.tree.body)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
        ]


class TensorsAccumulatedInLoop(Rule):
    code = "TFL503"
    name = "tensors-accumulated-in-training-loop"
    severity = Severity.WARNING
    summary = "Tensors appended to a Python list every training step keep device memory alive"
    fixable = True
    fix_safety = (
        "The fix appends `value.numpy()` instead of the tensor, so the list holds host copies "
        "and the device buffers are freed each step. It is unsafe: the list now holds NumPy "
        "arrays (TensorFlow ops still accept them), and a value that is not a tensor (a tuple "
        "or dict of tensors returned by a step) raises `AttributeError`; unpack it first."
    )
    what = (
        "Checks for `list.append(t)` in a training loop (a loop that runs a train step, "
        "`apply_gradients` or `tape.gradient` with an update; a loop whose tf.functions update "
        "nothing, such as sampling, inference or integrated gradients, trains nothing) where "
        "`t` is a tensor — the result of a traced "
        "step, a model or loss call, or a TensorFlow op — and the list outlives the iteration. "
        "Bounded accumulation of scalars is not reported: a scalar (a reduction, a loss, a "
        "metric's `result()`) appended once per epoch, or in a loop of a stated number of "
        "iterations (`range(10)`), keeps a few bytes per entry, not a buffer per step. Loops "
        "that run once (`for x in ds.take(1)`) are not training loops."
    )
    why = (
        "Each appended tensor keeps its device buffer (and, for eager results of a recorded "
        "computation, whatever it references) alive for as long as the list lives. Over "
        "thousands of steps memory grows steadily until the job runs out of memory, and "
        "summing the list later forces a device sync per element."
    )
    example = (
        """
        losses = []
        for x, y in ds:
            loss = train_step(x, y)
            losses.append(loss)
        """
    )
    use_instead = (
        """
        mean_loss = tf.keras.metrics.Mean()
        for x, y in ds:
            loss = train_step(x, y)
            mean_loss.update_state(loss)   # or losses.append(float(loss))
        """
    )
    VALID = [
        """
        import tensorflow as tf

        @tf.function
        def train_step(x):
            return tf.reduce_sum(x)

        losses = []
        for x in tf.data.Dataset.range(3).prefetch(1):
            loss = train_step(x)
            losses.append(float(loss))
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x):
            return tf.reduce_sum(x)

        losses = []
        for x in tf.data.Dataset.range(3).prefetch(1):
            loss = train_step(x)
            losses.append(loss.numpy())
        """,
        """
        import tensorflow as tf

        def train(model, batches):
            history = []
            for x, y in batches:
                loss = model.train_on_batch(x, y)
                history.append(loss)
            return history
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x):
            return tf.reduce_sum(x)

        for epoch in range(3):
            epoch_losses = []
            for step in range(10):
                lr = 0.1 * step
                epoch_losses.append(lr)
                train_step(tf.constant(1.0))
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x):
            return tf.reduce_mean(x)

        train_loss = tf.keras.metrics.Mean()
        history = []
        for epoch in range(20):
            for x in tf.data.Dataset.range(3).map(float).batch(2):
                train_loss.update_state(train_step(x))
            history.append(train_loss.result())
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x):
            return tf.reduce_mean(x * 2.0)

        losses = []
        for epoch in range(num_epochs):
            loss = train_step(full_batch)
            losses.append(loss)
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x):
            return x * 2.0

        samples = []
        for x in dataset.take(1):
            samples.append(train_step(x))
        """,
        """
        import tensorflow as tf

        def wrap(t):
            return tf.identity(t)

        @tf.function
        def build(xs):
            return [wrap(x) for x in xs]

        def convert(inputs):
            outputs = []
            for inp in inputs:
                outputs.append(wrap(inp))
            return outputs
        """,
        """
        import numpy as np
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
        optimizer = tf.keras.optimizers.Adam()
        log_probs = []
        while True:  # one episode per iteration; the tape needs the episode's tensors
            with tf.GradientTape() as tape:
                for t in range(max_steps):
                    probs = model(observe())
                    log_probs.append(tf.math.log(probs[0, 0]))
                returns = []
                for p in log_probs:
                    returns.append(-p * 0.5)
                loss = sum(returns)
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                log_probs.clear()
        """,
        """
        import tensorflow as tf

        def compute_gradients(images, target):
            with tf.GradientTape() as tape:
                tape.watch(images)
                probs = model(images)[:, target]
            return tape.gradient(probs, images)

        @tf.function
        def one_batch(baseline, image, alphas, target):
            return compute_gradients(baseline + alphas * (image - baseline), target)

        # integrated gradients: a gradient-only loop collects its results on purpose
        gradient_batches = []
        for start in range(0, num_alphas, batch_size):
            gradient_batches.append(one_batch(baseline, image, alphas[start:start + batch_size], 3))
        total = tf.concat(gradient_batches, axis=0)
        """,
        """
        import tensorflow as tf

        @tf.function
        def sample(state):
            return tf.random.normal([]) + state

        draws = []
        for _ in range(num_samples):  # a sampling loop: it updates nothing
            draws.append(sample(0.5))
        mean = tf.reduce_mean(tf.stack(draws))
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        w = tf.Variable(0.0)

        @tf.function
        def train_step(x):
            loss = tf.cast(tf.reduce_sum(x), tf.float32) * w
            w.assign_sub(0.01 * loss)
            return loss

        losses = []
        for x in tf.data.Dataset.range(3).prefetch(1):
            loss = train_step(x)
            losses.append(loss)  # expect: TFL503
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        losses = []
        for epoch in range(num_epochs):
            for x in dataset:
                losses.append(train_step(x))  # expect: TFL503
        losses.clear()  # after training: the list grew over every step
        """,
        """
        import tensorflow as tf
        from tensorflow import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        loss_fn = keras.losses.MeanSquaredError()
        opt = keras.optimizers.Adam()

        def train(batches):
            history = []
            for x, y in batches:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                history.append(loss)  # expect: TFL503
            return history
        """,
        """
        import tensorflow as tf

        step_fn = tf.function(lambda x: x * 2)
        outs = []
        for i in range(num_steps):
            out = step_fn(tf.constant(float(i)))
            outs.append(tf.reduce_mean(out))  # expect: TFL503
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x):
            with tf.GradientTape() as tape:
                y = model(x)
                loss = tf.reduce_mean(y)
            optimizer.minimize(loss, model.trainable_variables, tape=tape)
            return y

        outputs = []
        for epoch in range(5):
            for x in dataset:
                outputs.append(train_step(x))  # expect: TFL503
        """,
        """
        import tensorflow as tf

        def apply(grads, variables, lr=0.01):
            for g, v in zip(grads, variables):
                v.assign_sub(lr * g)

        losses = []
        for x, y in dataset:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
            losses.append(loss)  # expect: TFL503
        """,
    ]

    _CONVERSIONS = frozenset({"numpy", "item", "tolist"})

    def check(self, ctx: RuleContext) -> None:
        if ".append(" not in ctx.source:
            return  # cheap text test: nothing to look at
        a = ctx.analysis
        for node in ctx.analysis.nodes(ast.Call):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and len(node.args) == 1
                and not node.keywords
            ):
                continue
            loop = a.loops.in_training_loop(node)
            if loop is None or a.is_traced(node):
                continue
            innermost = a.loops.enclosing_loops(node)[0]
            target = node.func.value
            if self._bound_inside(target, innermost) or not self._list_like(ctx, target, node):
                continue
            if self._bound_inside(target, loop) or self._emptied_in(ctx, target, loop):
                continue  # a new or emptied list each training iteration: it does not grow
            why = self._tensor_source(ctx, node.args[0], node, depth=0)
            if why is None:
                continue
            if self._bounded(ctx, target, node) and self._is_scalar(ctx, node.args[0], node, 0):
                continue  # a bounded list of scalars
            lst = ast.get_source_segment(ctx.source, target) or "list"
            value = node.args[0]
            simple = isinstance(value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
            edits = wrap(value, "" if simple else "(", ".numpy()" if simple else ").numpy()")
            ctx.report(
                node,
                f"`{lst}.append()` keeps a tensor ({why}) alive every training-loop iteration "
                "(loop on line {}): device memory grows with each step. Append `float(...)` or "
                "`.numpy()`, or use a `tf.keras.metrics.Mean`".format(loop.lineno),
                fix=Fix("Append the value as a NumPy array (`.numpy()`)", edits, "unsafe"),
            )

    # -- bounded accumulation of scalars -----------------------------------------------------
    _BOUND_LIMIT = 10_000

    def _bounded(self, ctx: RuleContext, target: ast.AST, at: ast.AST) -> bool:
        """Every loop that appends to the list without re-creating it runs a few times: over
        epochs (or folds, trials...) or a stated number of iterations."""
        a = ctx.analysis
        binding = None
        if isinstance(target, ast.Name):
            binding = self._list_binding(ctx, target.id, at)
        outer = set(a.loops.enclosing_loops(binding)) if binding is not None else set()
        for loop in a.loops.enclosing_loops(at):
            if loop in outer:
                break
            bound = a.loops.iteration_bound(loop)
            if not (a.loops.is_over_runs(loop) or (bound is not None and bound <= self._BOUND_LIMIT)):
                return False
        return True

    @staticmethod
    def _list_binding(ctx: RuleContext, name: str, at: ast.AST) -> ast.AST | None:
        """The last ``name = [...]`` before ``at`` in its function (or the module)."""
        func = ctx.analysis.enclosing_function(at)
        body = func.body if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) else ctx.tree.body
        best = None
        for n in walk_body(body):
            if (isinstance(n, ast.Assign) and (n.lineno, n.col_offset) < (at.lineno, at.col_offset)
                    and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
                    and (best is None or n.lineno > best.lineno)):
                best = n
        return best

    _REDUCTIONS = frozenset({"reduce_mean", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                             "reduce_all", "reduce_any", "reduce_logsumexp", "reduce_std",
                             "reduce_variance", "l2_loss", "compute_average_loss", "count_nonzero",
                             "mean", "sum", "max", "min", "prod", "norm", "std", "var"})

    def _is_scalar(self, ctx: RuleContext, expr: ast.AST, at: ast.AST, depth: int) -> bool:
        """``expr`` is a scalar tensor: a full reduction (``tf.reduce_mean(x)``, no axis), a
        Keras loss object's call, a metric's ``result()``, a tf.function of the module whose
        every return value is one, or a name bound to one of those."""
        a = ctx.analysis
        if depth > 4:
            return False
        if isinstance(expr, ast.Name):
            value = self._assignment_before(ctx, expr.id, at)
            return value is not None and self._is_scalar(ctx, value, value, depth + 1)
        if isinstance(expr, ast.BinOp):
            return self._is_scalar(ctx, expr.left, at, depth + 1) and self._is_scalar(ctx, expr.right, at, depth + 1)
        if isinstance(expr, ast.Constant):
            return isinstance(expr.value, (int, float))
        if not isinstance(expr, ast.Call):
            return False
        f = expr.func
        q = a.call_name(expr)
        if q:
            base, _, last = q.rpartition(".")
            if base.startswith(("tensorflow", "keras.ops")) and last in self._REDUCTIONS:
                return len(expr.args) < 2 and not any(k.arg in ("axis", "keepdims") for k in expr.keywords)
            if q.endswith("()") and q.startswith(("keras.losses.", "tensorflow.keras.losses.")):
                return True
            if base.endswith("()") and base.startswith("keras.metrics.") and last == "result":
                return True
        if isinstance(f, ast.Attribute) and f.attr == "result" and not expr.args:
            return isinstance(f.value, ast.Name) and self._metric_object(ctx, f.value, expr)
        if a.loops.is_step_call(expr) or (isinstance(f, ast.Name) and f.id in a.loops.traced_names):
            targets = a.traced._resolve_callable(f, expr, called=True)
            returns = [n for t in targets if not isinstance(t, ast.Lambda)
                       for n in walk_body(t.body) if isinstance(n, ast.Return)]
            returns += [t.body for t in targets if isinstance(t, ast.Lambda)]
            values = [r.value if isinstance(r, ast.Return) else r for r in returns]
            return bool(values) and all(
                v is not None and self._is_scalar(ctx, v, v, depth + 1) for v in values
            )
        return False

    def _metric_object(self, ctx: RuleContext, name: ast.Name, at: ast.AST) -> bool:
        value = self._assignment_before(ctx, name.id, at)
        q = ctx.analysis.call_name(value) if isinstance(value, ast.Call) else None
        return bool(q) and q.startswith(("keras.metrics.", "tensorflow.keras.metrics."))

    @staticmethod
    def _bound_inside(target: ast.AST, loop: ast.AST) -> bool:
        if not isinstance(target, ast.Name):
            return False
        for n in walk_body(loop.body):
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == target.id for t in n.targets):
                return True
        return False

    @staticmethod
    def _emptied_in(ctx: RuleContext, target: ast.AST, loop: ast.AST) -> bool:
        """The loop's body empties the list (``lst.clear()``, ``del lst[:]``): it holds one
        iteration's entries at most (an episode's log-probabilities, kept for its tape)."""
        text = ast.get_source_segment(ctx.source, target)
        if not text:
            return False

        def same(e: ast.AST) -> bool:
            return ast.get_source_segment(ctx.source, e) == text

        for n in walk_body(loop.body):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "clear"
                    and not n.args and same(n.func.value)):
                return True
            if isinstance(n, ast.Delete) and any(
                    isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Slice) and same(t.value) for t in n.targets):
                return True
        return False

    @staticmethod
    def _list_like(ctx: RuleContext, target: ast.AST, at: ast.AST) -> bool:
        """The receiver is a list built in this module (``x = []``, ``list()``) or a ``self.``
        attribute, not, e.g., a TensorArray or a queue."""
        if isinstance(target, ast.Attribute):
            return isinstance(target.value, ast.Name) and target.value.id == "self"
        if not isinstance(target, ast.Name):
            return False
        func = ctx.analysis.enclosing_function(at)
        scopes = [func.body] if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        scopes.append(ctx.tree.body)
        for body in scopes:
            for n in walk_body(body):
                if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    for t in targets:
                        pairs = [(t, n.value)]
                        if isinstance(t, (ast.Tuple, ast.List)) and isinstance(n.value, (ast.Tuple, ast.List)):
                            pairs = list(zip(t.elts, n.value.elts))  # a, b = [], []
                        for tt, v in pairs:
                            if not (isinstance(tt, ast.Name) and tt.id == target.id):
                                continue
                            if isinstance(v, ast.List) or (
                                isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "list"
                            ):
                                return True
        return False

    def _tensor_source(self, ctx: RuleContext, expr: ast.AST, at: ast.AST, depth: int) -> str | None:
        """Why ``expr`` is a tensor (a short description), or None when it is not known to be."""
        a = ctx.analysis
        if depth > 4:
            return None
        if isinstance(expr, ast.Name):
            value = self._assignment_before(ctx, expr.id, at)
            if value is None:
                return None
            return self._tensor_source(ctx, value, value, depth + 1)
        if isinstance(expr, ast.Subscript):
            return self._tensor_source(ctx, expr.value, at, depth + 1)
        if isinstance(expr, ast.BinOp):
            return self._tensor_source(ctx, expr.left, at, depth + 1) or self._tensor_source(ctx, expr.right, at, depth + 1)
        if not isinstance(expr, ast.Call):
            return None
        f = expr.func
        if isinstance(f, ast.Attribute) and f.attr in self._CONVERSIONS:
            return None
        q = a.call_name(expr)
        if q:
            if q.rsplit(".", 1)[-1] in _NOT_TENSORS:
                return None
            if q.startswith("tensorflow.") and _creates_tensors(q):
                return f"result of `{q.replace('tensorflow.', 'tf.', 1)}`"
            if q.startswith("keras.ops.") and q != "keras.ops.convert_to_numpy":
                return f"result of `{q}`"
            base, _, method = q.rpartition(".")
            if q.endswith("()") and q.startswith(("keras.models.", "keras.Model", "keras.Sequential", "keras.layers.", "keras.losses.", "keras.applications.")):
                return "output of a Keras model or loss call"
            if base.endswith("()") and base.startswith("keras.metrics.") and method == "result":
                return "a metric's `result()`"
        # tf.functions and Keras objects of the module (a helper that is traced only because
        # traced code calls it runs eagerly here: its result is whatever it returns).
        traced = a.traced
        if a.loops.is_step_call(expr):
            return "output of a traced step"
        if isinstance(f, ast.Name):
            value = self._assignment_before(ctx, f.id, expr)
            if isinstance(value, ast.Call):
                cls = self._local_class(ctx, value.func)
                if cls is not None and traced.is_keras_class(cls):
                    return f"output of the Keras model `{f.id}`"
                vq = a.call_name(value)
                if vq in ("tensorflow.function",):
                    return "output of a traced step"
        return None

    @staticmethod
    def _local_class(ctx: RuleContext, expr: ast.AST) -> ast.ClassDef | None:
        if isinstance(expr, ast.Name):
            for n in ctx.tree.body:
                if isinstance(n, ast.ClassDef) and n.name == expr.id:
                    return n
        return None

    @staticmethod
    def _assignment_before(ctx: RuleContext, name: str, at: ast.AST) -> ast.AST | None:
        """The value last assigned to ``name`` before ``at`` in its function (or the module),
        unpacking ``a, b = step(...)`` to the call itself."""
        a = ctx.analysis
        func = a.enclosing_function(at)
        bodies = [func.body] if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        bodies.append(ctx.tree.body)
        pos = (at.lineno, at.col_offset)
        for body in bodies:
            best = None
            for n in walk_body(body):
                if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    hit = False
                    for t in targets:
                        if isinstance(t, ast.Name) and t.id == name or isinstance(t, (ast.Tuple, ast.List)) and any(
                            isinstance(e, ast.Name) and e.id == name for e in t.elts
                        ):
                            hit = True
                    if hit and (n.lineno, n.col_offset) < pos and (best is None or n.lineno > best.lineno):
                        best = n
                elif isinstance(n, (ast.For, ast.AsyncFor)) and any(
                    isinstance(e, ast.Name) and e.id == name for e in ast.walk(n.target)
                ):
                    if (n.lineno, n.col_offset) < pos and (best is None or n.lineno > best.lineno):
                        best = n
            if best is not None:
                return best.value if not isinstance(best, (ast.For, ast.AsyncFor)) else None
        return None
