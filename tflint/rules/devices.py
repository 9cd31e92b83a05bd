"""TFL5xx: device placement and memory."""

from __future__ import annotations

import ast

from tflint.analysis.loops import walk_body
from tflint.finding import Severity
from tflint.rules.base import Rule, RuleContext

_SOFT_PLACEMENT = frozenset(
    {"tensorflow.config.set_soft_device_placement", "tensorflow.config.experimental.set_soft_device_placement"}
)
_CONFIG_PROTO = frozenset({"tensorflow.compat.v1.ConfigProto", "tensorflow.ConfigProto"})

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


class SoftDevicePlacement(Rule):
    code = "TFL501"
    name = "soft-device-placement"
    severity = Severity.WARNING
    summary = "`set_soft_device_placement(True)` hides ops that silently fall back to the CPU"
    what = (
        "Checks for `tf.config.set_soft_device_placement(True)` (and "
        "`ConfigProto(allow_soft_placement=True)`)."
    )
    why = (
        "With soft placement, an op pinned with `tf.device('/GPU:0')` that has no GPU kernel (or "
        "when no GPU is visible) runs on the CPU without any error or warning. Tensors then "
        "bounce between host and device every step and the model trains at CPU speed while the "
        "code says GPU. Turning it on explicitly documents the wish to hide exactly that."
    )
    example = (
        """
        tf.config.set_soft_device_placement(True)
        """
    )
    use_instead = (
        """
        # Let misplaced ops fail loudly while developing:
        tf.config.set_soft_device_placement(False)
        tf.debugging.set_log_device_placement(True)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        tf.config.set_soft_device_placement(False)
        """,
        """
        import tensorflow as tf

        print(tf.config.get_soft_device_placement())
        """,
        """
        import tensorflow as tf

        config = tf.compat.v1.ConfigProto(log_device_placement=True)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        tf.config.set_soft_device_placement(True)  # expect: TFL501
        """,
        """
        from tensorflow import config

        config.set_soft_device_placement(enabled=True)  # expect: TFL501
        """,
        """
        import tensorflow as tf

        session_config = tf.compat.v1.ConfigProto(allow_soft_placement=True)  # expect: TFL501
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if "soft" not in ctx.source:
            return  # cheap text test: nothing to look at
        a = ctx.analysis
        for node in ctx.analysis.nodes(ast.Call):
            if not isinstance(node, ast.Call):
                continue
            q = a.call_name(node)
            if q in _SOFT_PLACEMENT:
                arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "enabled"), None)
            elif q in _CONFIG_PROTO:
                arg = next((k.value for k in node.keywords if k.arg == "allow_soft_placement"), None)
            else:
                continue
            if isinstance(arg, ast.Constant) and arg.value is True:
                ctx.report(
                    node,
                    "Soft device placement makes ops that cannot run on the requested device "
                    "fall back to the CPU silently, with host-device copies every step. Leave it "
                    "off and fix the placement",
                )


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
    what = (
        "Checks for `list.append(t)` in a training loop (a loop that runs a train step, "
        "`apply_gradients` or `tape.gradient`) where `t` is a tensor — the result of a traced "
        "step, a model or loss call, or a TensorFlow op — and the list outlives the iteration."
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
    ]
    INVALID = [
        """
        import tensorflow as tf

        @tf.function
        def train_step(x):
            return tf.reduce_sum(x)

        losses = []
        for x in tf.data.Dataset.range(3).prefetch(1):
            loss = train_step(x)
            losses.append(loss)  # expect: TFL503
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
        for i in range(100):
            out = step_fn(tf.constant(float(i)))
            outs.append(tf.reduce_mean(out))  # expect: TFL503
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
            why = self._tensor_source(ctx, node.args[0], node, depth=0)
            if why is None:
                continue
            lst = ast.get_source_segment(ctx.source, target) or "list"
            ctx.report(
                node,
                f"`{lst}.append()` keeps a tensor ({why}) alive every training-loop iteration "
                "(loop on line {}): device memory grows with each step. Append `float(...)` or "
                "`.numpy()`, or use a `tf.keras.metrics.Mean`".format(loop.lineno),
            )

    @staticmethod
    def _bound_inside(target: ast.AST, loop: ast.AST) -> bool:
        if not isinstance(target, ast.Name):
            return False
        for n in walk_body(loop.body):
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == target.id for t in n.targets):
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
            if q.startswith("tensorflow.") and _creates_tensors(q):
                return f"result of `{q.replace('tensorflow.', 'tf.', 1)}`"
            if q.startswith("keras.ops.") and q != "keras.ops.convert_to_numpy":
                return f"result of `{q}`"
            base, _, method = q.rpartition(".")
            if q.endswith("()") and q.startswith(("keras.models.", "keras.Model", "keras.Sequential", "keras.layers.", "keras.losses.", "keras.applications.")):
                return "output of a Keras model or loss call"
            if base.endswith("()") and base.startswith("keras.metrics.") and method == "result":
                return "a metric's `result()`"
        # Traced functions and Keras objects of the module.
        traced = a.traced
        targets = traced._resolve_callable(f, expr, called=True)
        if any(traced.is_module_traced(t) for t in targets) or (
            isinstance(f, ast.Name) and f.id in a.loops.traced_names
        ):
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
