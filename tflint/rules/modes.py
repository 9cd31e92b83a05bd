"""TFL6xx: train/serve mode and losses."""

from __future__ import annotations

import ast
import re

from tflint.analysis.loops import walk_body
from tflint.finding import Fix, Severity
from tflint.rules._fixes import end_of, replace_span, set_keyword, start_of, tensorflow_alias
from tflint.rules.base import Rule, RuleContext

_TF_FUNCTION = frozenset({"tensorflow.function", "tensorflow.compat.v1.function"})
_SAVE_FUNCS = frozenset({"tensorflow.saved_model.save", "tensorflow.keras.models.save_model", "keras.models.save_model", "keras.saving.save_model"})
_GRADIENT_MARKERS = frozenset({"gradient", "apply_gradients", "minimize", "jacobian", "batch_jacobian"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_TRAINING_TRUE_TEXT = re.compile(r"training\s*=\s*True")


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _training_true(call: ast.Call) -> ast.keyword | None:
    for k in call.keywords:
        if k.arg == "training" and _is_true(k.value):
            return k
    return None


def _walk_own(func: ast.AST):
    """Nodes of a function body, nested functions and classes excluded."""
    return walk_body(list(func.body))


class TrainingTrueInServing(Rule):
    code = "TFL601"
    name = "training-true-in-serving-function"
    severity = Severity.ERROR
    summary = "A serving/export function calls a model or layer with `training=True`"
    fixable = True
    fix_safety = (
        "The fix replaces `training=True` with `training=False`. It is safe: the serving "
        "function then runs Dropout as identity and BatchNormalization with its moving "
        "statistics, as `predict` does; training code is not touched."
    )
    what = (
        "Checks for calls with `training=True` inside a function that is exported for serving: "
        "passed as `signatures=` to `tf.saved_model.save`/`model.save`/`model.export`, or a "
        "`tf.function` with an `input_signature` that computes no gradients."
    )
    why = (
        "`training=True` makes Dropout drop units and BatchNormalization normalize with the "
        "statistics of the request batch (and update its moving averages) instead of the "
        "learned ones. The exported model serves noisy, batch-dependent predictions; nothing "
        "fails. Omitting `training` (or passing `training=False`) runs inference mode."
    )
    example = (
        """
        @tf.function(input_signature=[tf.TensorSpec([None, 28, 28], tf.float32)])
        def serve(images):
            return model(images, training=True)
        """
    )
    use_instead = (
        """
        @tf.function(input_signature=[tf.TensorSpec([None, 28, 28], tf.float32)])
        def serve(images):
            return model(images, training=False)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.layers.Dense(2)])

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def serve(x):
            return model(x)

        tf.saved_model.save(model, '/tmp/m', signatures=serve)
        """,
        """
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
        opt = tf.keras.optimizers.SGD()

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32), tf.TensorSpec([None, 2], tf.float32)])
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        """,
        """
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.layers.Dense(2)])

        @tf.function
        def step(x):
            return model(x, training=True)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.layers.Dropout(0.5), tf.keras.layers.Dense(2)])

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def serve(x):
            return model(x, training=True)  # expect: TFL601
        """,
        """
        import tensorflow as tf

        class Exporter(tf.Module):
            def __init__(self, model):
                self.model = model

            @tf.function
            def serve(self, x):
                return {'probs': self.model(x, training=True)}  # expect: TFL601

        exporter = Exporter(tf.keras.Sequential([tf.keras.layers.Dense(2)]))
        tf.saved_model.save(exporter, '/tmp/e', signatures={'serving_default': exporter.serve.get_concrete_function(tf.TensorSpec([None, 4]))})
        """,
        """
        from tensorflow import keras
        import tensorflow as tf

        model = keras.Sequential([keras.layers.BatchNormalization(), keras.layers.Dense(1)])

        def predict_fn(x):
            return model(x, training=True)  # expect: TFL601

        serve = tf.function(predict_fn, input_signature=[tf.TensorSpec([None, 3])])
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if not _TRAINING_TRUE_TEXT.search(ctx.source):
            return  # cheap text test: nothing to look at
        a = ctx.analysis
        serving: dict[ast.AST, str] = {}
        for node in ctx.analysis.nodes(*_FUNCS, ast.Call):
            if isinstance(node, _FUNCS):
                for dec in node.decorator_list:
                    if isinstance(dec, ast.Call) and a.qualname(dec.func) in _TF_FUNCTION and any(
                        k.arg == "input_signature" for k in dec.keywords
                    ):
                        if not self._computes_gradients(node):
                            serving.setdefault(node, f"has an `input_signature` (line {dec.lineno})")
            elif isinstance(node, ast.Call):
                q = a.call_name(node)
                if q in _TF_FUNCTION and node.args and any(k.arg == "input_signature" for k in node.keywords):
                    for f in self._resolve(ctx, node.args[0], node):
                        if not self._computes_gradients(f):
                            serving.setdefault(f, f"is wrapped with an `input_signature` (line {node.lineno})")
                sig = next((k.value for k in node.keywords if k.arg == "signatures"), None)
                if sig is not None and (
                    q in _SAVE_FUNCS or (isinstance(node.func, ast.Attribute) and node.func.attr in ("save", "export", "save_model"))
                ):
                    for f in self._signature_functions(ctx, sig, node):
                        serving[f] = f"is exported as a serving signature (line {node.lineno})"
        for func, why in serving.items():
            name = getattr(func, "name", "<lambda>")
            for n in _walk_own(func):
                if isinstance(n, ast.Call) and (kw := _training_true(n)) is not None:
                    ctx.report(
                        n,
                        f"`{name}` {why} but calls `training=True`: Dropout stays active and "
                        "BatchNormalization uses the request batch's statistics in serving. Omit "
                        "`training` or pass `training=False`",
                        fix=Fix(
                            "Pass `training=False`",
                            (replace_span(start_of(kw.value), end_of(kw.value), "False"),),
                        ),
                    )

    @staticmethod
    def _computes_gradients(func: ast.AST) -> bool:
        for n in _walk_own(func):
            if isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Attribute) and f.attr in _GRADIENT_MARKERS:
                    return True
                if isinstance(f, ast.Attribute) and f.attr in ("GradientTape", "gradients"):
                    return True
                if isinstance(f, ast.Name) and f.id in ("GradientTape", "gradients"):
                    return True
        return False

    def _signature_functions(self, ctx: RuleContext, sig: ast.AST, at: ast.AST, depth: int = 0) -> list[ast.AST]:
        if isinstance(sig, ast.Dict):
            out: list[ast.AST] = []
            for v in sig.values:
                if v is not None:
                    out.extend(self._signature_functions(ctx, v, at, depth + 1))
            return out
        if isinstance(sig, ast.Call) and isinstance(sig.func, ast.Attribute) and sig.func.attr == "get_concrete_function":
            return self._resolve(ctx, sig.func.value, at)
        found = self._resolve(ctx, sig, at)
        if not found and isinstance(sig, ast.Name) and depth < 3:
            # signature = serve.get_concrete_function(...); save(..., signatures=signature)
            value = _single_value(ctx, sig.id, at)
            if value is not None:
                return self._signature_functions(ctx, value, at, depth + 1)
        return found

    def _resolve(self, ctx: RuleContext, expr: ast.AST, at: ast.AST) -> list[ast.AST]:
        """Function definitions of the module that ``expr`` names: a def, a name bound to
        ``tf.function(f)``, or ``obj.method`` / ``self.method`` (by method name)."""
        a = ctx.analysis
        if isinstance(expr, ast.Name):
            defs = a.functions.get(expr.id, [])
            if defs:
                return [d for d in defs if a.parent(d) is ctx.tree] or defs[:1]
            for n in walk_body(ctx.tree.body):
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets):
                    v = n.value
                    if isinstance(v, ast.Call) and a.call_name(v) in _TF_FUNCTION and v.args:
                        return self._resolve(ctx, v.args[0], at)
            return []
        if isinstance(expr, ast.Attribute):
            return [d for d in a.functions.get(expr.attr, []) if isinstance(a.parent(d), ast.ClassDef)]
        if isinstance(expr, ast.Call) and a.call_name(expr) in _TF_FUNCTION and expr.args:
            return self._resolve(ctx, expr.args[0], at)
        return []


# -- TFL602 ---------------------------------------------------------------------------------

_PROB_ACTIVATIONS = frozenset({"softmax", "sigmoid"})
_PROBABILISTIC_LOSSES = {
    # loss class or function → (kind of input it expects by default)
    "keras.losses.SparseCategoricalCrossentropy": "softmax",
    "keras.losses.CategoricalCrossentropy": "softmax",
    "keras.losses.BinaryCrossentropy": "sigmoid",
    "keras.losses.CategoricalFocalCrossentropy": "softmax",
    "keras.losses.BinaryFocalCrossentropy": "sigmoid",
    "keras.losses.sparse_categorical_crossentropy": "softmax",
    "keras.losses.categorical_crossentropy": "softmax",
    "keras.losses.binary_crossentropy": "sigmoid",
    "keras.metrics.sparse_categorical_crossentropy": "softmax",
    "keras.metrics.categorical_crossentropy": "softmax",
    "keras.metrics.binary_crossentropy": "sigmoid",
}
_STRING_LOSSES = frozenset(
    {
        "sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy",
        "categorical_focal_crossentropy", "binary_focal_crossentropy",
    }
)


class LogitsProbabilitiesMismatch(Rule):
    code = "TFL602"
    name = "logits-probabilities-mismatch"
    severity = Severity.ERROR
    summary = "`from_logits` does not match the model's last layer (softmax/sigmoid vs raw logits)"
    fixable = True
    fix_safety = (
        "The fix sets `from_logits` on the loss constructor to match the last layer "
        "(`False` after softmax/sigmoid, `True` after a linear layer). It is unsafe: the loss "
        "values change (to the correct ones), so training curves, tuned learning rates and "
        "checkpoints' metrics are no longer comparable; removing the activation instead is "
        "equally valid. Losses given as strings or with a positional `from_logits` get no fix."
    )
    what = (
        "Checks `model.compile(loss=...)` against the model's definition in the module "
        "(`Sequential` list and `add` calls, or the functional `outputs`): a cross-entropy loss "
        "with the default `from_logits=False` (string losses such as "
        "`\"sparse_categorical_crossentropy\"` included) on a last layer without activation. "
        "When the target is Keras 2, also `from_logits=True` on a model whose last layer applies "
        "softmax/sigmoid. Keras 3 (TensorFlow 2.16 and later without tf-keras) takes the logits "
        "behind a softmax/sigmoid output itself when `from_logits=True` (with a warning), so it "
        "trains exactly as with `from_logits=False` (measured on TensorFlow 2.21): not reported."
    )
    why = (
        "With `from_logits=False` on raw logits, Keras treats unbounded scores as probabilities "
        "(normalizing and clipping them to [eps, 1-eps]): the loss is wrong and training "
        "plateaus or diverges. Nothing raises. (With `from_logits=True` on probabilities, Keras 2 "
        "applies softmax a second time and the gradients become tiny.)"
    )
    example = (
        """
        model = keras.Sequential([keras.layers.Dense(64, activation='relu'), keras.layers.Dense(10)])
        model.compile(optimizer='adam', loss='sparse_categorical_crossentropy')
        """
    )
    use_instead = (
        """
        model = keras.Sequential([keras.layers.Dense(64, activation='relu'), keras.layers.Dense(10)])
        model.compile(optimizer='adam',
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        """
    )
    VALID = [
        """
        from tensorflow import keras

        model = keras.Sequential([keras.layers.Dense(10, activation='softmax')])
        model.compile(optimizer='adam', loss='sparse_categorical_crossentropy')
        """,
        """
        from tensorflow import keras

        model = keras.Sequential([keras.layers.Dense(10)])
        model.compile(optimizer='adam', loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        """,
        """
        import keras

        inputs = keras.Input((4,))
        x = keras.layers.Dense(8, activation='relu')(inputs)
        outputs = keras.layers.Dense(1, activation='sigmoid')(x)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer='adam', loss='binary_crossentropy')
        """,
        """
        from tensorflow import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        model.compile(optimizer='adam', loss='mse')
        """,
        """
        import tensorflow as tf

        # Keras 3 uses the logits behind the softmax itself: trains as with from_logits=False.
        model = tf.keras.Sequential()
        model.add(tf.keras.layers.Dense(10))
        model.add(tf.keras.layers.Softmax())
        model.compile(optimizer='adam',
                      loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))
        """,
    ]
    INVALID = [
        """
        from tensorflow import keras

        model = keras.Sequential([keras.layers.Dense(64, activation='relu'), keras.layers.Dense(10)])
        model.compile(optimizer='adam', loss='sparse_categorical_crossentropy')  # expect: TFL602
        """,
        """
        import keras
        from keras import layers

        def build():
            inputs = keras.Input((4,))
            x = layers.Dense(8, activation='relu')(inputs)
            outputs = layers.Dense(1)(x)
            return keras.Model(inputs=inputs, outputs=outputs)

        model = build()
        loss = keras.losses.BinaryCrossentropy()  # expect: TFL602
        model.compile(optimizer='adam', loss=loss)
        """,
        """
        import tensorflow as tf

        model = tf.keras.Sequential()
        model.add(tf.keras.layers.Dense(10))
        model.compile(optimizer='adam', loss=tf.keras.losses.CategoricalCrossentropy())  # expect: TFL602
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if "compile(" not in ctx.source:
            return  # cheap text test: nothing to look at
        for node in ctx.analysis.nodes(ast.Call):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compile"):
                continue
            loss = next((k.value for k in node.keywords if k.arg == "loss"), None)
            if loss is None and len(node.args) >= 2:
                loss = node.args[1]
            if loss is None:
                continue
            loss_node, wants = self._loss_kind(ctx, loss, node)
            if wants is None:
                continue
            model = node.func.value
            last = ctx.analysis.models.last_layer(model, node)
            if last is None:
                continue
            layer_node, act = last
            if wants == "logits" and act in _PROB_ACTIVATIONS and ctx.analysis.target.keras < 3:
                ctx.report(
                    loss_node,
                    f"Loss uses `from_logits=True` but the model's last layer (line "
                    f"{layer_node.lineno}) already applies {act}: the loss applies it again and "
                    "gradients vanish. Remove the activation or use `from_logits=False`",
                    fix=self._from_logits_fix(ctx, loss_node, "False"),
                )
            elif wants == "probabilities" and act == "linear":
                ctx.report(
                    loss_node,
                    f"Loss expects probabilities (`from_logits=False`) but the model's last layer "
                    f"(line {layer_node.lineno}) outputs raw logits: the loss is computed on "
                    "clipped scores. Pass `from_logits=True` to the loss",
                    fix=self._from_logits_fix(ctx, loss_node, "True"),
                )

    @staticmethod
    def _from_logits_fix(ctx: RuleContext, loss: ast.AST, value: str) -> Fix | None:
        """``from_logits=<value>`` on a loss constructor call written in the ``compile`` call."""
        if not isinstance(loss, ast.Call) or loss.args:  # a positional `from_logits` stays as it is
            return None
        return Fix(f"Pass `from_logits={value}` to the loss", (set_keyword(ctx, loss, "from_logits", value),), "unsafe")

    # loss side
    def _loss_kind(self, ctx: RuleContext, loss: ast.AST, at: ast.AST, depth: int = 0) -> tuple[ast.AST, str | None]:
        a = ctx.analysis
        if depth > 3:
            return loss, None
        if isinstance(loss, ast.Constant) and isinstance(loss.value, str):
            return loss, ("probabilities" if loss.value in _STRING_LOSSES else None)
        if isinstance(loss, ast.Call):
            q = a.call_name(loss)
            if q in _PROBABILISTIC_LOSSES and q.rsplit(".", 1)[-1][:1].isupper():
                flag = next((k.value for k in loss.keywords if k.arg == "from_logits"), None)
                if flag is None:
                    return loss, "probabilities"
                if isinstance(flag, ast.Constant) and isinstance(flag.value, bool):
                    return loss, "logits" if flag.value else "probabilities"
            return loss, None
        if isinstance(loss, (ast.Attribute, ast.Name)):
            q = a.qualname(loss)
            if q in _PROBABILISTIC_LOSSES and not q.rsplit(".", 1)[-1][:1].isupper():
                return loss, "probabilities"
            if isinstance(loss, ast.Name):
                value = _single_value(ctx, loss.id, at)
                if value is not None:
                    return self._loss_kind(ctx, value, value, depth + 1)
        return loss, None


def _single_value(ctx: RuleContext, name: str, at: ast.AST) -> ast.AST | None:
    """The value of the only assignment to ``name`` in the scope of ``at`` (or the module)."""
    return ctx.analysis.models.single_value(name, at)


# -- TFL603 ---------------------------------------------------------------------------------

_LOGS = frozenset({"tensorflow.math.log", "tensorflow.log", "tensorflow.compat.v1.log", "keras.ops.log", "tensorflow.experimental.numpy.log"})
_SOFTMAX = {
    "tensorflow.nn.softmax": "tf",
    "tensorflow.math.softmax": "tf",
    "tensorflow.compat.v1.nn.softmax": "tf",
    "keras.activations.softmax": "keras",
    "keras.ops.softmax": "keras",
    "keras.ops.nn.softmax": "keras",
}
_SIGMOID = {
    "tensorflow.sigmoid": "tf",
    "tensorflow.math.sigmoid": "tf",
    "tensorflow.nn.sigmoid": "tf",
    "keras.activations.sigmoid": "keras",
    "keras.ops.sigmoid": "keras",
    "keras.ops.nn.sigmoid": "keras",
}


class LogOfSoftmax(Rule):
    code = "TFL603"
    name = "log-of-softmax"
    severity = Severity.WARNING
    fixable = True
    summary = "`log(softmax(x))` / `log(sigmoid(x))` by hand underflows to `-inf`"
    what = (
        "Checks for the logarithm of a softmax or sigmoid written as two ops: "
        "`tf.math.log(tf.nn.softmax(x))`, `tf.math.log(tf.sigmoid(x))`, `keras.ops.log(keras.ops.softmax(x))`; "
        "and `log(p)` of probabilities made elsewhere, followed through variables, containers, "
        "`tf.TensorArray`s, "
        "function returns and the output of a model whose last layer applies softmax/sigmoid."
    )
    why = (
        "softmax and sigmoid round small probabilities to exactly 0 in float32 (and much earlier "
        "in float16): `log` then returns `-inf`, the loss becomes `inf` or `NaN`, and the "
        "gradients are NaN from then on. `log_softmax` / `log_sigmoid` compute the same value "
        "in a numerically stable way (`x - logsumexp(x)`), and never underflow."
    )
    example = (
        """
        log_probs = tf.math.log(tf.nn.softmax(logits, axis=-1))
        """
    )
    use_instead = (
        """
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        """
    )
    fix_safety = (
        "The fix rewrites `log(softmax(x, axis))` to `log_softmax(x, axis)` and "
        "`log(sigmoid(x))` to `log_sigmoid(x)`, in the same API family (`tf.nn.log_softmax`, "
        "`tf.math.log_sigmoid`, `keras.ops.log_softmax`, `keras.ops.log_sigmoid`), keeping the "
        "arguments. The result equals the original wherever the original is finite, so the fix "
        "is safe. There is no fix when the axis is not a single axis, or when comments sit "
        "between the two calls."
    )
    VALID = [
        """
        import tensorflow as tf

        def policy_loss(logits):
            log_probs = tf.TensorArray(tf.float32, size=2)
            log_probs = log_probs.write(0, tf.nn.log_softmax(logits))
            return -tf.reduce_mean(log_probs.stack())
        """,
        """
        import tensorflow as tf

        log_probs = tf.nn.log_softmax(tf.constant([[1.0, 2.0]]))
        """,
        """
        import tensorflow as tf

        probs = tf.nn.softmax(tf.constant([[1.0, 2.0]]))
        entropy = -tf.reduce_sum(probs * tf.math.log(probs + 1e-9))
        """,
        """
        import numpy as np

        x = np.log(np.exp([1.0]) / np.exp([1.0]).sum())
        """,
        """
        import tensorflow as tf

        lp = tf.math.log(tf.nn.relu(tf.constant([1.0])) + 1.0)
        """,
        """
        import tensorflow as tf
        from tensorflow import keras

        critic = keras.Sequential([keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)])
        values = critic(tf.zeros((1, 8)))
        log_values = tf.math.log(values[0, 1])
        """,
        """
        import tensorflow as tf

        def nll(probs):
            return -tf.math.log(probs)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        @tf.function
        def policy_loss(logits):
            probs = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            for t in tf.range(tf.shape(logits)[0]):
                probs = probs.write(t, tf.nn.softmax(logits[t]))
            return -tf.reduce_mean(tf.math.log(probs.stack()))  # expect: TFL603
        """,
        """
        import tensorflow as tf

        logits = tf.constant([[1.0, 2.0]])
        log_probs = tf.math.log(tf.nn.softmax(logits, axis=-1))  # expect: TFL603
        """,
        """
        import tensorflow as tensorflow_lib

        z = tensorflow_lib.constant([0.5])
        ll = tensorflow_lib.math.log(tensorflow_lib.sigmoid(z))  # expect: TFL603
        """,
        """
        from keras import ops

        def loss(logits):
            return -ops.log(ops.softmax(logits))  # expect: TFL603
        """,
        """
        import tensorflow as tf

        def policy(logits):
            probs = tf.nn.softmax(logits)
            return probs

        action_probs = policy(tf.constant([[1.0, 2.0]]))
        log_prob = tf.math.log(action_probs[0, 1])  # expect: TFL603
        """,
        """
        import tensorflow as tf
        from tensorflow import keras

        actor = keras.Sequential([
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(4, activation="softmax"),
        ])
        action_probs = actor(tf.zeros((1, 8)))
        chosen = [action_probs]
        loss = -tf.math.log(chosen[0][0, 2])  # expect: TFL603
        """,
        """
        import tensorflow as tf
        from tensorflow import keras

        inputs = keras.Input((8,))
        outputs = keras.layers.Dense(3, activation="softmax")(inputs)
        model = keras.Model(inputs, outputs)
        p = model(tf.zeros((1, 8)))
        nll = -tf.math.log(p)  # expect: TFL603
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if "log(" not in ctx.source:
            return  # cheap text test: nothing to look at
        a = ctx.analysis
        for node in ctx.analysis.nodes(ast.Call):
            if not (isinstance(node, ast.Call) and len(node.args) == 1):
                continue
            if a.call_name(node) not in _LOGS:
                continue
            if not isinstance(node.args[0], ast.Call):
                self._followed(ctx, node)
                continue
            inner = node.args[0]
            iq = a.call_name(inner)
            if iq in _SOFTMAX:
                kind, family = "softmax", _SOFTMAX[iq]
            elif iq in _SIGMOID:
                kind, family = "sigmoid", _SIGMOID[iq]
            else:
                self._followed(ctx, node)  # `log(ta.stack())`: a TensorArray of probabilities
                continue
            fix, target = self._fix(ctx, node, inner, kind, family)
            ctx.report(
                node,
                f"`log({kind}(x))` underflows to `-inf` when a probability rounds to 0, making "
                f"the loss and gradients NaN. Use `{target}(x)`",
                fix=fix,
            )

    def _followed(self, ctx: RuleContext, node: ast.Call) -> None:
        """``log(p)`` where ``p`` holds probabilities made elsewhere: through a variable, a
        container, a ``tf.TensorArray``, a function's return value, or the output of a model
        whose last layer applies softmax/sigmoid."""
        from tflint.analysis.values import producers

        arg = node.args[0]
        reads_array = (  # `ta.stack()`, `ta.read(i)` of a TensorArray
            isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
            and arg.func.attr in ("stack", "read", "gather", "concat")
        )
        if not (isinstance(arg, (ast.Name, ast.Subscript, ast.Attribute)) or reads_array):
            return
        found = producers(ctx.analysis, arg)
        if not found:
            return
        kinds = {_probability_kind(ctx, p) for p in found}
        if len(kinds) != 1 or None in kinds:
            return
        (kind,) = kinds
        where = min(found, key=lambda p: p.lineno)
        target = "tf.nn.log_softmax" if kind == "softmax" else "tf.math.log_sigmoid"
        ctx.report(
            node,
            f"`{ctx.segment(node) or 'log(p)'}` takes the log of {kind} probabilities (line "
            f"{where.lineno}): it underflows to `-inf` when one rounds to 0, making the loss and "
            f"gradients NaN. Keep the logits and use `{target}(logits)`",
        )

    def _fix(self, ctx: RuleContext, outer: ast.Call, inner: ast.Call, kind: str, family: str) -> tuple[Fix | None, str]:
        tf_target = "tf.nn.log_softmax" if kind == "softmax" else "tf.math.log_sigmoid"
        new_name = "log_softmax" if kind == "softmax" else "log_sigmoid"
        if outer.keywords:
            return None, tf_target
        # Text around the inner call inside the outer one must be only the brackets.
        outer_text = ctx.segment(outer)
        inner_text = ctx.segment(inner)
        if "#" in outer_text.replace(inner_text, "", 1):
            return None, tf_target
        if kind == "softmax":
            axis = inner.args[1] if len(inner.args) >= 2 else next((k.value for k in inner.keywords if k.arg == "axis"), None)
            if axis is not None and not self._single_axis(axis):
                return None, tf_target
        if not inner.args:
            return None, tf_target
        args_start = (inner.func.end_lineno, inner.func.end_col_offset)
        args_text = self._text_between(ctx, args_start, (inner.end_lineno, inner.end_col_offset))
        iq = ctx.analysis.call_name(inner) or ""
        uses_tf = _imports_tensorflow(ctx.tree)
        if iq.startswith("keras.activations.") and uses_tf:
            family = "tf"  # tf.keras.activations may lack log_* (Keras 2); tf.nn/tf.math never do
        if family == "keras" and isinstance(inner.func, ast.Attribute):
            func_text = ctx.segment(inner.func.value) + "." + new_name
            import_edits: tuple = ()
            target = func_text
        else:
            alias, import_edits = tensorflow_alias(ctx)
            func_text = f"{alias}.nn.log_softmax" if kind == "softmax" else f"{alias}.math.log_sigmoid"
            target = func_text
        if args_text is None or not args_text.lstrip().startswith("("):
            return None, target
        return (
            Fix(
                message=f"Replace with `{target}(...)`",
                edits=(ctx.replace(outer, func_text + args_text), *import_edits),
            ),
            target,
        )

    @staticmethod
    def _single_axis(axis: ast.AST) -> bool:
        if isinstance(axis, ast.Constant):
            return isinstance(axis.value, int) or axis.value is None
        if isinstance(axis, ast.UnaryOp) and isinstance(axis.operand, ast.Constant):
            return isinstance(axis.operand.value, int)
        return isinstance(axis, (ast.Name, ast.Attribute))

    @staticmethod
    def _text_between(ctx: RuleContext, start: tuple[int, int], end: tuple[int, int]) -> str | None:
        lines = ctx.source.splitlines(keepends=True)
        (l1, c1), (l2, c2) = start, end
        if l1 < 1 or l2 > len(lines):
            return None
        if l1 == l2:
            return _cut(lines[l1 - 1], c1, c2)
        parts = [_cut(lines[l1 - 1], c1, None)]
        parts.extend(lines[l1:l2 - 1])
        parts.append(_cut(lines[l2 - 1], 0, c2))
        return "".join(parts)


def _activation_kind(ctx: RuleContext, act: ast.AST | None) -> str | None:
    if act is None:
        return None
    if isinstance(act, ast.Constant) and act.value in ("softmax", "sigmoid"):
        return act.value
    q = ctx.analysis.qualname(act)
    if q in _SOFTMAX:
        return "softmax"
    if q in _SIGMOID:
        return "sigmoid"
    return None


def _layer_kind(ctx: RuleContext, layer: ast.AST) -> str | None:
    """The probability activation a Keras layer (a constructor call) ends with."""
    if not isinstance(layer, ast.Call):
        return None
    q = ctx.analysis.call_name(layer) or ""
    last = q.rsplit(".", 1)[-1]
    if not q.startswith("keras."):
        return None
    if last == "Softmax":
        return "softmax"
    if last == "Activation":
        return _activation_kind(ctx, layer.args[0] if layer.args else None)
    if last in ("Dense", "EinsumDense", "Conv1D", "Conv2D"):
        act = layer.args[1] if len(layer.args) > 1 and last == "Dense" else next(
            (k.value for k in layer.keywords if k.arg == "activation"), None
        )
        return _activation_kind(ctx, act)
    return None


def _probability_kind(ctx: RuleContext, p: ast.AST) -> str | None:
    """"softmax"/"sigmoid" when ``p`` (a producer) makes probabilities, else None."""
    if not isinstance(p, ast.Call):
        return None
    q = ctx.analysis.call_name(p)
    if q in _SOFTMAX:
        return "softmax"
    if q in _SIGMOID:
        return "sigmoid"
    if q is not None and q.startswith("keras.") and q.rsplit(".", 1)[-1] == "Sequential":
        layers = p.args[0] if p.args else next((k.value for k in p.keywords if k.arg == "layers"), None)
        if isinstance(layers, (ast.List, ast.Tuple)) and layers.elts:
            return _layer_kind(ctx, layers.elts[-1])
        return None
    if isinstance(p.func, ast.Call):  # a layer applied: Dense(n, activation="softmax")(x)
        return _layer_kind(ctx, p.func)
    if q is not None and q.startswith("keras.") and q.rsplit(".", 1)[-1] == "Model":
        outputs = p.args[1] if len(p.args) > 1 else next((k.value for k in p.keywords if k.arg == "outputs"), None)
        if outputs is None:
            return None
        from tflint.analysis.values import producers

        found = producers(ctx.analysis, outputs)
        kinds = {_probability_kind(ctx, x) for x in found or ()}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _imports_tensorflow(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "tensorflow" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tensorflow":
            return True
    return False


def _cut(line: str, start: int, end: int | None) -> str:
    """Slice a line by ``ast`` column offsets (UTF-8 bytes)."""
    raw = line.encode("utf-8")
    return raw[start:end].decode("utf-8", errors="replace")


# -- TFL604 ---------------------------------------------------------------------------------

_MODE_LAYERS = (
    "keras.layers.Dropout",
    "keras.layers.SpatialDropout1D",
    "keras.layers.SpatialDropout2D",
    "keras.layers.SpatialDropout3D",
    "keras.layers.AlphaDropout",
    "keras.layers.GaussianDropout",
    "keras.layers.GaussianNoise",
    "keras.layers.BatchNormalization",
    "keras.layers.SyncBatchNormalization",
    "keras.layers.experimental.SyncBatchNormalization",
)


class HardCodedTrainingInCall(Rule):
    code = "TFL604"
    name = "hard-coded-training-in-layer-call"
    severity = Severity.ERROR
    summary = "`training=True` hard-coded for Dropout/BatchNormalization inside a layer's `call`"
    fixable = True
    fix_safety = (
        "When `call` has a `training` parameter, the fix passes it through "
        "(`training=training`). It is safe: `fit` still trains with Dropout active, and "
        "`predict`, `evaluate` and serving now run in inference mode. Without such a parameter "
        "there is no fix."
    )
    what = (
        "Checks a Keras layer's or model's `call` for Dropout / BatchNormalization sub-layers "
        "called with the constant `training=True` instead of the `training` argument."
    )
    why = (
        "The constant wins over the mode Keras passes in: `model.predict`, `evaluate` and "
        "serving still drop units and normalize with the current batch statistics (and update "
        "the moving averages during inference). Predictions are noisy and depend on the batch; "
        "validation metrics are wrong. Nothing fails."
    )
    example = (
        """
        class Block(keras.layers.Layer):
            def call(self, x, training=None):
                return self.dropout(x, training=True)
        """
    )
    use_instead = (
        """
        class Block(keras.layers.Layer):
            def call(self, x, training=None):
                return self.dropout(x, training=training)
        """
    )
    VALID = [
        """
        from tensorflow import keras

        class Block(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.dropout = keras.layers.Dropout(0.5)

            def call(self, x, training=None):
                return self.dropout(x, training=training)
        """,
        """
        from tensorflow import keras

        class Block(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.inner = keras.layers.Dense(4)

            def call(self, x):
                return self.inner(x, training=True) if False else self.inner(x)
        """,
        """
        from tensorflow import keras

        inputs = keras.Input((4,))
        x = keras.layers.Dropout(0.5)(inputs, training=True)
        model = keras.Model(inputs, x)
        """,
    ]
    INVALID = [
        """
        from tensorflow import keras

        class Block(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.dropout = keras.layers.Dropout(0.5)

            def call(self, x, training=None):
                return self.dropout(x, training=True)  # expect: TFL604
        """,
        """
        import tensorflow as tf
        from tensorflow.keras import layers

        class Net(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.bn = layers.BatchNormalization()
                self.out = layers.Dense(2)

            def call(self, x):
                x = self.bn(x, training=True)  # expect: TFL604
                return self.out(x)
        """,
        """
        import keras

        class Noisy(keras.layers.Layer):
            def call(self, x):
                return keras.layers.Dropout(0.1)(x, training=True)  # expect: TFL604
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if not _TRAINING_TRUE_TEXT.search(ctx.source):
            return  # cheap text test: nothing to look at
        a = ctx.analysis
        for cls in ctx.analysis.nodes(ast.ClassDef):
            if not (isinstance(cls, ast.ClassDef) and a.traced.is_keras_class(cls)):
                continue
            attrs = self._layer_attrs(ctx, cls)
            for func in cls.body:
                if not (isinstance(func, _FUNCS) and func.name == "call"):
                    continue
                for n in _walk_own(func):
                    if not (isinstance(n, ast.Call) and _training_true(n) is not None):
                        continue
                    kind = None
                    f = n.func
                    if isinstance(f, ast.Call):
                        kind = self._mode_layer(ctx, f)
                    elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                        kind = attrs.get(f.attr)
                    if kind is None:
                        continue
                    fix = None
                    params = {p.arg for p in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
                    kw = _training_true(n)
                    if "training" in params and kw is not None:
                        fix = Fix(
                            "Pass `training=training`",
                            (replace_span(start_of(kw.value), end_of(kw.value), "training"),),
                        )
                    ctx.report(
                        n,
                        f"`{kind}` is called with `training=True` inside `{cls.name}.call`: it "
                        "stays in training mode in `predict`, `evaluate` and serving. Pass the "
                        "`training` argument of `call` through",
                        fix=fix,
                    )

    def _mode_layer(self, ctx: RuleContext, expr: ast.AST) -> str | None:
        q = ctx.analysis.call_name(expr) if isinstance(expr, ast.Call) else None
        if q and q in _MODE_LAYERS:
            return q.rsplit(".", 1)[-1]
        return None

    def _layer_attrs(self, ctx: RuleContext, cls: ast.ClassDef) -> dict[str, str]:
        out: dict[str, str] = {}
        for n in ast.walk(cls):
            if isinstance(n, ast.Assign):
                kind = self._mode_layer(ctx, n.value)
                if kind is None:
                    continue
                for t in n.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        out[t.attr] = kind
        return out


_SOFTMAX_NAMES = frozenset({"keras.activations.softmax", "tensorflow.nn.softmax", "keras.ops.softmax", "tensorflow.math.softmax"})


class SoftmaxOnOneUnit(Rule):
    code = "TFL605"
    name = "softmax-on-one-unit"
    severity = Severity.ERROR
    summary = "`Dense(1, activation=\"softmax\")` outputs 1.0 for every input"
    what = (
        "Checks for a Keras `Dense` layer with one unit and a softmax activation "
        "(`\"softmax\"`, `keras.activations.softmax`, `tf.nn.softmax`)."
    )
    why = (
        "Softmax normalises over the last axis; over an axis of size 1 it is exp(x)/exp(x) = 1.0 "
        "for every input. The model's output is a constant, its gradient is zero and it cannot "
        "learn: accuracy stays at the share of the positive class and nothing fails (Keras 3 "
        "emits one `UserWarning`, easily lost in a training log). A binary classifier wants one "
        "unit with `sigmoid`, or two units with `softmax`."
    )
    example = (
        """
        model = keras.Sequential([
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1, activation="softmax"),
        ])
        """
    )
    use_instead = (
        """
        model = keras.Sequential([
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ])
        """
    )
    VALID = [
        """
        from tensorflow import keras

        out = keras.layers.Dense(1, activation="sigmoid")
        """,
        """
        from tensorflow import keras

        out = keras.layers.Dense(2, activation="softmax")
        """,
        """
        import keras

        n_classes = 10
        out = keras.layers.Dense(units=n_classes, activation=keras.activations.softmax)
        """,
    ]
    INVALID = [
        """
        from tensorflow import keras

        model = keras.Sequential([
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dense(1, activation="softmax"),  # expect: TFL605
        ])
        """,
        """
        import tensorflow as tf

        head = tf.keras.layers.Dense(units=1, activation=tf.nn.softmax)  # expect: TFL605
        """,
        """
        from keras import layers, activations

        out = layers.Dense(1, activations.softmax)  # expect: TFL605
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if "softmax" not in ctx.source:
            return
        a = ctx.analysis
        for call in a.nodes(ast.Call):
            name = a.call_name(call)
            if name is None or not name.startswith("keras.") or name.rsplit(".", 1)[-1] != "Dense":
                continue
            units = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "units"), None)
            act = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "activation"), None)
            if not (isinstance(units, ast.Constant) and units.value == 1 and not isinstance(units.value, bool)):
                continue
            if act is None:
                continue
            if isinstance(act, ast.Constant):
                softmax = act.value == "softmax"
            else:
                softmax = a.qualname(act) in _SOFTMAX_NAMES
            if softmax:
                ctx.report(
                    call,
                    "softmax over one unit is always 1.0: the output is constant and the model "
                    "cannot learn. Use `Dense(1, activation=\"sigmoid\")` for a binary output, or "
                    "one unit per class with softmax",
                )


_TF_VARIABLE = frozenset({"tensorflow.Variable", "tensorflow.compat.v1.Variable"})


def _keras_major(ctx: RuleContext) -> int:
    """The Keras major version the code targets: the analysis's ``target`` when the
    configuration gives one, else 3 (TensorFlow >= 2.16 ships Keras 3); 2 for ``tf_keras``."""
    if "tf_keras" in ctx.source:
        return 2
    target = getattr(ctx.analysis, "target", None)
    for attr in ("keras_major", "keras"):
        value = getattr(target, attr, None)
        if value is not None:
            text = str(value).strip().lower().lstrip("keras").strip("=<> ")
            if text[:1] in ("2", "3"):
                return int(text[:1])
    return 3


class UntrackedVariableInKerasClass(Rule):
    code = "TFL608"
    name = "tf-variable-untracked-by-keras-3"
    severity = Severity.ERROR
    summary = "Plain `tf.Variable` attribute of a Keras 3 `Layer`/`Model` is not trained or not saved"
    what = (
        "Checks for `self.<name> = tf.Variable(...)` in a method of a Keras `Layer` or `Model` "
        "subclass, for Keras 3 (the Keras of TensorFlow 2.16 and later; code importing "
        "`tf_keras` is Keras 2 and is not checked): a trainable one (the default, not updated by "
        "hand with `.assign()`) is not trained; state (`trainable=False`, or updated with "
        "`.assign()`) that the module updates is not saved, unless the module saves with "
        "`tf.train.Checkpoint` or `tf.saved_model.save`."
    )
    why = (
        "Keras 3 tracks its own `keras.Variable`s, not `tf.Variable`s: a plain `tf.Variable` "
        "attribute is missing from `trainable_variables`, so `fit` computes no gradient for it and "
        "never updates it. Training runs, the loss stays where it started, and nothing fails (a "
        "TensorFlow 2 tutorial ported to Keras 3 trains for ten epochs with a constant loss). "
        "State kept that way (a counter, running statistics) is updated, but it is missing from "
        "`weights` too: `model.save()` and `save_weights()` leave it out, and the loaded model "
        "silently starts it again from its initial value."
    )
    example = (
        """
        class Linear(keras.Model):
            def __init__(self):
                super().__init__()
                self.w = tf.Variable(tf.zeros((3, 1)))

            def call(self, x):
                return tf.matmul(x, self.w)
        """
    )
    use_instead = (
        """
        class Linear(keras.Model):
            def __init__(self):
                super().__init__()
                self.w = self.add_weight(shape=(3, 1), initializer="zeros")

            def call(self, x):
                return tf.matmul(x, self.w)
        """
    )
    VALID = [
        """
        import keras
        import tensorflow as tf

        class Linear(keras.Model):
            def __init__(self):
                super().__init__()
                self.w = self.add_weight(shape=(3, 1), initializer="zeros")
        """,
        """
        import tensorflow as tf

        class Linear(tf.Module):
            def __init__(self):
                self.w = tf.Variable(tf.zeros((3, 1)))
        """,
        """
        import keras

        class Scale(keras.layers.Layer):
            def build(self, shape):
                self.s = keras.Variable(1.0)
        """,
        """
        import keras
        import tensorflow as tf

        class Standardize(keras.layers.Layer):
            def build(self, shape):
                self.mean = self.add_weight(shape=shape[-1:], initializer="zeros", trainable=False)
        """,
        """
        import keras
        import tensorflow as tf

        class Counter(keras.layers.Layer):
            def build(self, shape):
                self.seen = tf.Variable(0.0, trainable=False)

            def call(self, x):
                self.seen.assign_add(1.0)
                return x

        model = keras.Sequential([Counter()])
        checkpoint = tf.train.Checkpoint(model=model)  # saves TensorFlow objects, this one too
        """,
        """
        import tf_keras as keras
        import tensorflow as tf

        class Linear(keras.Model):
            def __init__(self):
                super().__init__()
                self.w = tf.Variable(tf.zeros((3, 1)))
        """,
    ]
    INVALID = [
        """
        import keras
        import tensorflow as tf

        class Linear(keras.Model):
            def __init__(self):
                super().__init__()
                self.w = tf.Variable(tf.zeros((3, 1)))  # expect: TFL608
        """,
        """
        import tensorflow as tf

        class Scale(tf.keras.layers.Layer):
            def build(self, input_shape):
                self.scale = tf.Variable(1.0, trainable=True)  # expect: TFL608
        """,
        """
        from tensorflow import keras
        import tensorflow as tf

        class Base(keras.layers.Layer):
            pass

        class Bias(Base):
            def __init__(self, n):
                super().__init__()
                self.b, self.n = tf.Variable(tf.zeros(n)), n  # expect: TFL608
        """,
        """
        import keras
        import tensorflow as tf

        class Standardize(keras.layers.Layer):
            def build(self, shape):
                self.mean = tf.Variable(tf.zeros(shape[-1:]), trainable=False)  # expect: TFL608
                self.count = tf.Variable(0.0)  # expect: TFL608
                self.scale = tf.Variable(1.0, trainable=False)  # a constant: nothing to save

            def call(self, x):
                self.count.assign_add(1.0)
                return (x - self.mean) * self.scale

        layer = Standardize()
        layer.build((None, 4))
        layer.mean.assign(tf.ones(4))  # adapted from the data
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if "Variable" not in ctx.source or _keras_major(ctx) < 3:
            return
        a = ctx.analysis
        traced = a.traced
        # a module that saves with TensorFlow's own checkpoints or SavedModel saves what the
        # layer tracks as a TensorFlow object, plain tf.Variables included
        tf_checkpoints = any(a.call_name(n) in _TF_CHECKPOINTS for n in a.nodes(ast.Call))
        # attributes the module updates with `.assign()` (`self.v.assign(...)`, `layer.v.assign(...)`):
        # state that changes, whose value a save would have to keep
        updated = {
            n.func.value.attr
            for n in a.nodes(ast.Call)
            if isinstance(n.func, ast.Attribute) and n.func.attr in ("assign", "assign_add", "assign_sub")
            and isinstance(n.func.value, ast.Attribute)
        }
        for cls in a.nodes(ast.ClassDef):
            if not traced.is_keras_class(cls):
                continue
            # state the class updates by hand (`self.v.assign(...)`) is not meant for the optimizer
            assigned = {
                n.func.value.attr
                for n in ast.walk(cls)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("assign", "assign_add", "assign_sub")
                and isinstance(n.func.value, ast.Attribute) and isinstance(n.func.value.value, ast.Name)
                and n.func.value.value.id == "self"
            }
            for stmt in cls.body:
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(stmt):
                    if not isinstance(node, ast.Assign):
                        continue
                    for t in node.targets:
                        pairs = [(t, node.value)]
                        if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(node.value.elts):
                            pairs = list(zip(t.elts, node.value.elts))
                        for tt, v in pairs:
                            if not (
                                isinstance(tt, ast.Attribute)
                                and isinstance(tt.value, ast.Name)
                                and tt.value.id == "self"
                                and isinstance(v, ast.Call)
                                and a.call_name(v) in _TF_VARIABLE
                            ):
                                continue
                            frozen = any(
                                k.arg == "trainable" and isinstance(k.value, ast.Constant) and k.value.value is False
                                for k in v.keywords
                            )
                            if not frozen and tt.attr not in assigned:
                                ctx.report(
                                    node,
                                    f"`self.{tt.attr} = tf.Variable(...)` in Keras 3 `{cls.name}` is not tracked: "
                                    f"it is missing from `trainable_variables` and `fit` never updates it. "
                                    f"Use `self.add_weight(...)` or `keras.Variable(...)`",
                                )
                            elif tt.attr in updated and not tf_checkpoints:
                                ctx.report(
                                    node,
                                    f"`self.{tt.attr} = tf.Variable(...)` in Keras 3 `{cls.name}` is state Keras "
                                    f"does not track: it is missing from `weights`, so `model.save()` and "
                                    f"`save_weights()` do not save it and a loaded model starts it from its "
                                    f"initial value. Use `self.add_weight(..., trainable=False)`",
                                )


# TensorFlow's own saving (object-based: it follows attributes, plain tf.Variables included)
_TF_CHECKPOINTS = frozenset({"tensorflow.train.Checkpoint", "tensorflow.train.CheckpointManager",
                             "tensorflow.compat.v2.train.Checkpoint", "tensorflow.saved_model.save"})


_SET_POLICY = frozenset(
    {
        "keras.mixed_precision.set_global_policy", "keras.mixed_precision.experimental.set_policy",
        "keras.mixed_precision.set_dtype_policy", "keras.config.set_dtype_policy",
    }
)
_LOSS_SCALING_WORDS = ("LossScaleOptimizer", "scale_loss", "get_scaled_loss", "get_unscaled_gradients", "loss_scale")


class UnscaledLossWithMixedFloat16(Rule):
    code = "TFL607"
    name = "mixed-float16-without-loss-scaling"
    severity = Severity.ERROR
    summary = "`mixed_float16` with a custom training loop that never scales the loss"
    what = (
        "Checks for a module that sets the `mixed_float16` policy (at module level, or in the "
        "function around the loop) and computes gradients with `GradientTape.gradient` in its "
        "own loop, but never scales the loss "
        "(`LossScaleOptimizer`, `optimizer.scale_loss`, `get_scaled_loss`). `model.fit` scales "
        "the loss by itself and is not concerned."
    )
    why = (
        "Under `mixed_float16` the forward and backward passes run in float16, whose smallest "
        "positive value is about 6e-8: small gradients flush to exactly zero and the variables "
        "they belong to stop learning, with no error. `fit` wraps the optimizer in a "
        "`LossScaleOptimizer`; a custom loop has to scale the loss before `tape.gradient` and "
        "unscale the gradients itself."
    )
    example = (
        """
        keras.mixed_precision.set_global_policy("mixed_float16")
        optimizer = keras.optimizers.SGD(0.1)

        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        """
    )
    use_instead = (
        """
        keras.mixed_precision.set_global_policy("mixed_float16")
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))

        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x))
            scaled = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)  # unscales
        """
    )
    VALID = [
        """
        import keras

        keras.mixed_precision.set_global_policy("mixed_float16")
        model = keras.Sequential([keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        model.fit(x, y)
        """,
        """
        import keras
        import tensorflow as tf

        keras.mixed_precision.set_global_policy("mixed_float16")
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
        with tf.GradientTape() as tape:
            scaled = optimizer.scale_loss(loss_fn(model(x)))
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        """,
        """
        import keras
        import tensorflow as tf

        keras.mixed_precision.set_global_policy("float32")
        with tf.GradientTape() as tape:
            loss = loss_fn(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        """,
        """
        import keras
        import tensorflow as tf

        def test_float16_inference():
            keras.mixed_precision.set_global_policy("mixed_float16")
            return model(x)

        def test_training():
            with tf.GradientTape() as tape:
                loss = loss_fn(model(x))
            return tape.gradient(loss, model.trainable_variables)
        """,
    ]
    INVALID = [
        """
        import keras
        import tensorflow as tf

        keras.mixed_precision.set_global_policy("mixed_float16")
        optimizer = keras.optimizers.SGD(0.1)
        with tf.GradientTape() as tape:
            loss = loss_fn(model(x))
        grads = tape.gradient(loss, model.trainable_variables)  # expect: TFL607
        optimizer.apply(grads, model.trainable_variables)
        """,
        """
        import tensorflow as tf
        from tensorflow.keras import mixed_precision

        mixed_precision.set_global_policy("mixed_float16")

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            grads = tape.gradient(loss, model.trainable_variables)  # expect: TFL607
            opt.apply_gradients(zip(grads, model.trainable_variables))
        """,
        """
        import keras
        import tensorflow as tf

        keras.config.set_dtype_policy(keras.DTypePolicy("mixed_float16"))

        def step(x):
            with tf.GradientTape() as g:
                loss = model(x)
            return g.gradient(loss, model.trainable_variables)  # expect: TFL607
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        src = ctx.source
        if "mixed_float16" not in src or "gradient" not in src:
            return
        if any(w in src for w in _LOSS_SCALING_WORDS):
            return
        a = ctx.analysis
        # where the policy is set: module level (None) or inside these functions
        policies: dict[ast.AST | None, int] = {}
        for call in a.nodes(ast.Call):
            if a.call_name(call) in _SET_POLICY and call.args and "mixed_float16" in ast.unparse(call.args[0]):
                policies.setdefault(a.enclosing_function(call), call.lineno)
        if not policies:
            return
        for call in a.nodes(ast.Call):
            f = call.func
            if not (isinstance(f, ast.Attribute) and f.attr == "gradient" and call.args):
                continue
            if not self._is_tape(ctx, f.value):
                continue
            # the policy governs this loop: set at module level, or in a function around it
            scopes = [None, *(p for p in a.ancestors(call) if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)))]
            policy_line = next((policies[s] for s in scopes if s in policies), None)
            if policy_line is None:
                continue
            ctx.report(
                call,
                f"`mixed_float16` (line {policy_line}) with a custom loop that never scales the loss: "
                f"float16 gradients below ~6e-8 flush to zero and stop learning. Wrap the optimizer in "
                f"`keras.optimizers.LossScaleOptimizer` and differentiate `optimizer.scale_loss(loss)`",
            )

    @staticmethod
    def _is_tape(ctx: RuleContext, expr: ast.AST) -> bool:
        from tflint.analysis.values import origins

        a = ctx.analysis
        if (a.qualname(expr) or "").startswith("tensorflow.GradientTape"):
            return True
        values = origins(a, expr) or []
        return bool(values) and all(
            isinstance(v, ast.Call) and a.call_name(v) == "tensorflow.GradientTape" for v in values
        )


# -- TFL606 ---------------------------------------------------------------------------------

_NP_RANK1_SIZE = frozenset({"numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full"})
_NP_RANK1_ARGS = frozenset({"numpy.random.rand", "numpy.random.randn"})
_NP_RANK1_ALWAYS = frozenset({"numpy.arange", "numpy.linspace"})
_NP_SIZE_KW = frozenset(
    {"numpy.random.randint", "numpy.random.normal", "numpy.random.uniform", "numpy.random.binomial", "numpy.random.choice"}
)
_TF_SHAPED = frozenset(
    {"tensorflow.zeros", "tensorflow.ones", "tensorflow.random.normal", "tensorflow.random.uniform", "tensorflow.fill"}
)
_FROM_SLICES = frozenset({"tensorflow.data.Dataset.from_tensor_slices"})
_KEEP_ELEMENT = frozenset({"shuffle", "repeat", "prefetch", "cache", "take", "skip"})
_LOSS_WRAPPERS = frozenset(
    {
        "tensorflow.square", "tensorflow.math.square", "tensorflow.abs", "tensorflow.math.abs",
        "tensorflow.reduce_mean", "tensorflow.math.reduce_mean", "tensorflow.reduce_sum",
        "tensorflow.math.reduce_sum", "keras.ops.square", "keras.ops.abs", "keras.ops.mean",
        "keras.ops.sum", "numpy.square", "numpy.abs", "numpy.mean",
    }
)


def _int_const(ctx: RuleContext, node: ast.AST | None, at: ast.AST) -> bool:
    """``node`` is an int literal, or a name whose only assignment is one."""
    if isinstance(node, ast.Name):
        node = _single_value(ctx, node.id, at)
    return isinstance(node, ast.Constant) and type(node.value) is int


def _shape_rank(ctx: RuleContext, node: ast.AST | None, at: ast.AST, scalar_ok: bool) -> int | None:
    """The rank a literal shape argument gives (1 or 2), ``None`` when not known."""
    if isinstance(node, (ast.List, ast.Tuple)):
        if 1 <= len(node.elts) <= 2 and all(_int_const(ctx, e, at) for e in node.elts):
            return len(node.elts)
        return None
    return 1 if scalar_ok and _int_const(ctx, node, at) else None


class RankOneLabelsMinusColumnPrediction(Rule):
    code = "TFL606"
    name = "rank-one-labels-column-prediction"
    severity = Severity.ERROR
    summary = "Elementwise loss between `[B]` labels and a `Dense(1)` output `[B, 1]` broadcasts to `[B, B]`"
    what = (
        "Checks hand-written elementwise losses (`y - model(x)` under `tf.square`, `tf.abs`, "
        "`** 2` or a reduction) where both shapes are known from the module: the labels are "
        "rank 1 (built by `np.zeros(N)`, `np.random.randint(0, 2, size=N)`, `tf.zeros([N])`..., "
        "or the second element of a batched `tf.data.Dataset.from_tensor_slices((x, y))` of "
        "such an array iterated in the same function) and the prediction is the call of a "
        "model whose last layer, defined in the module, is `Dense(1)`. Losses passed to "
        "`model.compile` are not reported: Keras aligns the ranks of `y_true` and `y_pred` itself."
    )
    why = (
        "`[B]` minus `[B, 1]` broadcasts to `[B, B]`: every prediction is compared with every "
        "label, so the loss is minimized by predicting the mean label for every input. Nothing "
        "raises; the loss decreases, then stalls, and the model learns nothing about its inputs."
    )
    example = (
        """
        ds = tf.data.Dataset.from_tensor_slices((x, np.zeros(256))).batch(32)
        model = tf.keras.Sequential([tf.keras.layers.Dense(16), tf.keras.layers.Dense(1)])
        for xb, yb in ds:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(yb - model(xb)))
        """
    )
    use_instead = (
        """
        for xb, yb in ds:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(yb - tf.squeeze(model(xb), -1)))
        # or give the labels the prediction's shape: tf.reshape(yb, [-1, 1])
        """
    )
    VALID = [
        """
        import numpy as np
        import tensorflow as tf

        y = np.zeros(256)
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        model.compile(optimizer="adam", loss="mse")
        """,
        """
        import numpy as np
        import tensorflow as tf

        x = np.random.rand(256, 4)
        y = np.random.rand(256)
        model = tf.keras.Sequential([tf.keras.layers.Dense(8), tf.keras.layers.Dense(1)])
        loss = tf.reduce_mean(tf.square(y - tf.squeeze(model(x), -1)))
        """,
        """
        import numpy as np
        import tensorflow as tf

        x = np.random.rand(256, 4)
        y = np.random.rand(256, 1)
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        loss = tf.reduce_mean(tf.square(y - model(x)))
        """,
        """
        import numpy as np
        import tensorflow as tf

        x = np.random.rand(256, 4)
        y = np.random.rand(256)
        model = tf.keras.Sequential([tf.keras.layers.Dense(3)])
        loss = tf.reduce_mean(tf.abs(y - model(x)))
        """,
        """
        import numpy as np
        import tensorflow as tf

        y = np.zeros(64)
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])

        def step(x, y):  # these labels arrive as a parameter: shape unknown, not reported
            return tf.reduce_mean(tf.square(y - model(x)))
        """,
        """
        import numpy as np
        import tensorflow as tf

        x = np.random.rand(64, 4)
        ds = tf.data.Dataset.from_tensor_slices((x, np.zeros(64))).map(lambda a, b: (a, b[None])).batch(8)
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        for xb, yb in ds:  # the map changes the element: labels' rank unknown
            loss = tf.reduce_mean(tf.square(yb - model(xb)))
        """,
    ]
    INVALID = [
        """
        import numpy as np
        import tensorflow as tf

        x = np.random.rand(256, 4).astype("float32")
        y = np.random.rand(256).astype("float32")
        model = tf.keras.Sequential([tf.keras.layers.Dense(8), tf.keras.layers.Dense(1)])
        loss = tf.reduce_mean(tf.square(y - model(x)))  # expect: TFL606
        """,
        """
        import numpy as np
        import tensorflow as tf

        N = 512
        x = np.random.rand(N, 4)
        labels = np.random.randint(0, 2, size=N)
        ds = tf.data.Dataset.from_tensor_slices((x, labels)).shuffle(N).batch(32)
        inputs = tf.keras.Input((4,))
        outputs = tf.keras.layers.Dense(1)(inputs)
        model = tf.keras.Model(inputs, outputs)

        def train():
            for xb, yb in ds:
                with tf.GradientTape() as tape:
                    pred = model(xb, training=True)
                    loss = tf.reduce_mean(tf.abs(yb - pred))  # expect: TFL606
        """,
        """
        import tensorflow as tf

        x = tf.random.normal([128, 3])
        y = tf.zeros([128])
        model = tf.keras.Sequential()
        model.add(tf.keras.layers.Dense(4))
        model.add(tf.keras.layers.Dense(units=1))

        @tf.function
        def step():
            y_pred = model(x)
            return tf.reduce_mean((y - y_pred) ** 2)  # expect: TFL606
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if "Dense" not in ctx.source:
            return
        a = ctx.analysis
        for node in a.nodes(ast.BinOp):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)) or not self._in_loss(ctx, node):
                continue
            for labels, pred in ((node.left, node.right), (node.right, node.left)):
                if self._rank1(ctx, labels, node, 0) and self._column_prediction(ctx, pred, node):
                    ctx.report(
                        node,
                        f"`{ctx.segment(labels)}` has shape [B] and `{ctx.segment(pred)}` (a `Dense(1)` "
                        "output) shape [B, 1]: the difference broadcasts to [B, B] and the model learns "
                        "to predict the mean. Use `tf.squeeze(pred, -1)` or reshape the labels to [B, 1]",
                    )
                    break

    @staticmethod
    def _in_loss(ctx: RuleContext, node: ast.AST) -> bool:
        a = ctx.analysis
        parent = a.parent(node)
        for _ in range(3):
            if parent is None:
                return False
            if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Pow):
                return True
            if isinstance(parent, ast.Call) and node in parent.args and a.call_name(parent) in _LOSS_WRAPPERS:
                return True
            if not isinstance(parent, ast.Call):
                return False
            node, parent = parent, a.parent(parent)
        return False

    def _column_prediction(self, ctx: RuleContext, pred: ast.AST, at: ast.AST) -> bool:
        if isinstance(pred, ast.Name):
            value = _single_value(ctx, pred.id, at)
            if value is None or not _only_assigned(ctx, pred.id, at):
                return False
            pred = value
        if not (isinstance(pred, ast.Call) and isinstance(pred.func, ast.Name)):
            return False
        model = _single_value(ctx, pred.func.id, at)
        if model is None or not _only_assigned(ctx, pred.func.id, at):
            return False
        last = ctx.analysis.models.last_layer(pred.func, model)  # resolved where the model is defined
        if last is None:
            return False
        layer = last[0]
        if isinstance(layer, ast.Call) and isinstance(layer.func, ast.Call):  # functional: Dense(1)(x)
            layer = layer.func
        if not isinstance(layer, ast.Call) or (ctx.analysis.call_name(layer) or "").rsplit(".", 1)[-1] != "Dense":
            return False
        units = layer.args[0] if layer.args else next((k.value for k in layer.keywords if k.arg == "units"), None)
        return isinstance(units, ast.Constant) and units.value == 1 and type(units.value) is int

    def _rank1(self, ctx: RuleContext, node: ast.AST, at: ast.AST, depth: int) -> bool:
        return self._rank(ctx, node, at, depth) == 1

    def _rank(self, ctx: RuleContext, node: ast.AST, at: ast.AST, depth: int) -> int | None:
        """The rank of an array the module builds with a known shape (1 or 2); else ``None``."""
        a = ctx.analysis
        if depth > 6:
            return None
        if isinstance(node, ast.Name):
            loop = self._loop_labels(ctx, node.id, at, depth)
            if loop is not None:
                return 1 if loop else None
            value = _single_value(ctx, node.id, at)
            if value is None or not _only_assigned(ctx, node.id, at):
                return None
            return self._rank(ctx, value, value, depth + 1)  # a name: one step further
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return 0
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self._rank(ctx, node.operand, at, depth)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            left = self._rank(ctx, node.left, at, depth)
            right = self._rank(ctx, node.right, at, depth)
            if left is None or right is None:
                return None
            if left == right or 0 in (left, right):
                return max(left, right)
            return None
        if isinstance(node, ast.Subscript):  # x[:, k] of a rank-2 array
            sl = node.slice
            if (
                isinstance(sl, ast.Tuple) and len(sl.elts) == 2
                and isinstance(sl.elts[0], ast.Slice) and sl.elts[0].lower is None and sl.elts[0].upper is None
                and sl.elts[0].step is None and _int_const(ctx, sl.elts[1], at)
                and self._rank(ctx, node.value, at, depth) == 2
            ):
                return 1
            return None
        if not isinstance(node, ast.Call):
            return None
        if isinstance(node.func, ast.Attribute) and node.func.attr == "astype":
            return self._rank(ctx, node.func.value, at, depth)
        q = a.call_name(node) or ""
        kw = {k.arg: k.value for k in node.keywords}
        if q in _NP_RANK1_ALWAYS:
            return 1
        if q in _NP_RANK1_SIZE:
            return _shape_rank(ctx, node.args[0] if node.args else kw.get("shape"), at, True)
        if q in _NP_RANK1_ARGS:
            if node.keywords or not node.args or not all(_int_const(ctx, e, at) for e in node.args):
                return None
            return len(node.args) if len(node.args) <= 2 else None
        if q in _NP_SIZE_KW:
            return _shape_rank(ctx, kw["size"], at, True) if "size" in kw else None
        if q in _TF_SHAPED:
            return _shape_rank(ctx, node.args[0] if node.args else (kw.get("shape") or kw.get("dims")), at, False)
        return None

    def _loop_labels(self, ctx: RuleContext, name: str, at: ast.AST, depth: int) -> bool | None:
        """For a loop variable ``name`` around ``at``: whether it is the rank-1 label batch of a
        batched ``from_tensor_slices((x, y))``. ``None`` when ``name`` is not such a loop target."""
        a = ctx.analysis
        node = a.parent(at)
        while node is not None and not isinstance(node, _FUNCS):
            if isinstance(node, ast.For):
                target, it = node.target, node.iter
                if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" and it.args:
                    if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                        target, it = target.elts[1], it.args[0]
                if isinstance(target, ast.Tuple) and any(isinstance(e, ast.Name) and e.id == name for e in ast.walk(target)):
                    if not (len(target.elts) == 2 and isinstance(target.elts[1], ast.Name) and target.elts[1].id == name):
                        return False
                    func = a.enclosing_function(at)
                    body = func.body if isinstance(func, _FUNCS) else ctx.tree.body
                    if any(
                        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
                        for n in walk_body(body)
                    ):
                        return False
                    return self._batched_slices_labels(ctx, it, at, depth + 1)
            node = a.parent(node)
        return None

    def _batched_slices_labels(self, ctx: RuleContext, ds: ast.AST, at: ast.AST, depth: int) -> bool:
        a = ctx.analysis
        if isinstance(ds, ast.Name):
            ds = _single_value(ctx, ds.id, at)
        batches = 0
        while isinstance(ds, ast.Call) and isinstance(ds.func, ast.Attribute) and a.call_name(ds) not in _FROM_SLICES:
            meth = ds.func.attr
            if meth == "batch":
                batches += 1
            elif meth not in _KEEP_ELEMENT:
                return False
            ds = ds.func.value
        if batches != 1 or not (isinstance(ds, ast.Call) and a.call_name(ds) in _FROM_SLICES and len(ds.args) == 1):
            return False
        elems = ds.args[0]
        return (
            isinstance(elems, ast.Tuple) and len(elems.elts) == 2
            and self._rank1(ctx, elems.elts[1], ds, depth + 1)
        )


def _only_assigned(ctx: RuleContext, name: str, at: ast.AST) -> bool:
    """``name`` is bound only by plain assignments in the function around ``at`` (and in the
    module): not a parameter, loop target, ``with ... as``, augmented assignment or import."""
    func = ctx.analysis.enclosing_function(at)
    bodies = [ctx.tree.body]
    if isinstance(func, _FUNCS):
        args = func.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        if any(p is not None and p.arg == name for p in params):
            return False
        bodies.append(func.body)
    for body in bodies:
        for n in walk_body(body):
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
                parent = ctx.analysis.parent(n)
                if not (isinstance(parent, (ast.Assign, ast.AnnAssign)) and n is not getattr(parent, "value", None)):
                    return False
            elif isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
                return False
            elif isinstance(n, (ast.Import, ast.ImportFrom)) and any((al.asname or al.name) == name for al in n.names):
                return False
    return True


_TF_SET_SEED = frozenset({"tensorflow.random.set_seed", "tensorflow.compat.v2.random.set_seed"})
# calls that seed what Keras 3 draws its default seeds from (Python's `random`); call names are
# canonical (`tf.keras.X` reads as `keras.X`)
_KERAS_SEEDERS = frozenset({"keras.utils.set_random_seed", "random.seed"})
_KERAS_RANDOM_USERS = ("keras.layers.", "keras.Sequential", "keras.models.Sequential", "keras.applications.",
                       "keras.initializers.")


class TfSeedDoesNotSeedKeras3(Rule):
    code = "TFL609"
    name = "tf-seed-does-not-seed-keras-3"
    severity = Severity.WARNING
    summary = "`tf.random.set_seed()` does not seed Keras 3's initializers and dropout"
    fixable = True
    fix_safety = (
        "The fix calls `tf.keras.utils.set_random_seed(seed)` instead, which sets TensorFlow's "
        "seed as before and seeds Python's `random` and NumPy's global generator too. It is "
        "unsafe: other code of the program that draws from `random` or `np.random` gets "
        "different (now repeatable) values."
    )
    what = (
        "Checks for `tf.random.set_seed(...)` in a module that builds Keras layers or models, "
        "for Keras 3 (the Keras of TensorFlow 2.16 and later; code importing `tf_keras` is "
        "Keras 2 and is not checked), when the module never calls `keras.utils.set_random_seed` "
        "or `random.seed`."
    )
    why = (
        "Keras 3 draws the seed of every unseeded initializer and dropout layer from Python's "
        "`random` module, not from TensorFlow's global seed. `tf.random.set_seed(0)` still "
        "seeds `tf.random` ops and `tf.data` shuffles, so the script looks reproducible, but "
        "every run starts from different weights: two runs of the same script give different "
        "losses, and a comparison between two settings measures the initialization as well. "
        "TensorFlow 2 with Keras 2 seeded both."
    )
    example = (
        """
        import tensorflow as tf

        tf.random.set_seed(0)
        model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
        """
    )
    use_instead = (
        """
        import tensorflow as tf

        tf.keras.utils.set_random_seed(0)  # Python, NumPy and TensorFlow
        model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
        """
    )
    VALID = [
        """
        import tensorflow as tf

        tf.random.set_seed(0)
        noise = tf.random.normal([4, 4])  # TensorFlow's own random ops follow its seed
        """,
        """
        import random

        import numpy as np
        import tensorflow as tf

        random.seed(0)
        np.random.seed(0)
        tf.random.set_seed(0)
        model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
        """,
        """
        import keras
        import tensorflow as tf

        keras.utils.set_random_seed(0)
        tf.random.set_seed(0)
        model = keras.Sequential([keras.layers.Dense(10)])
        """,
        """
        import tensorflow as tf
        import tf_keras as keras

        tf.random.set_seed(0)
        model = keras.Sequential([keras.layers.Dense(10)])
        """,
        """
        import tensorflow as tf

        def test_noise(self):
            tf.random.set_seed(2)  # seeds this test's tf.random noise; no Keras layer here
            self.assertAllClose(add_noise(x), add_noise(x))

        def test_model(self):
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        tf.random.set_seed(42)  # expect: TFL609
        model = tf.keras.Sequential([tf.keras.layers.Dense(10), tf.keras.layers.Dropout(0.5)])
        """,
        """
        import keras
        import tensorflow as tf

        def main(seed):
            tf.random.set_seed(seed)  # expect: TFL609
            inputs = keras.Input((8,))
            outputs = keras.layers.Dense(1)(inputs)
            return keras.Model(inputs, outputs)
        """,
        """
        import numpy as np
        from tensorflow import keras
        from tensorflow.random import set_seed

        np.random.seed(0)  # NumPy's seed does not reach Keras 3's seeds either
        set_seed(0)  # expect: TFL609
        base = keras.applications.MobileNetV2(weights=None)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if "set_seed" not in ctx.source or _keras_major(ctx) < 3:
            return
        a = ctx.analysis
        calls = a.nodes(ast.Call)
        names = [a.call_name(n) or "" for n in calls]
        if any(n in _KERAS_SEEDERS for n in names):
            return
        # Keras calls that draw a default seed (an initializer given `seed=` draws none)
        users = {
            id(n) for n, name in zip(calls, names)
            if name.startswith(_KERAS_RANDOM_USERS) and not any(k.arg == "seed" for k in n.keywords)
        }
        if not users:
            return  # no Keras layer draws a seed here: TensorFlow's seed covers its own ops
        for node, name in zip(calls, names):
            if name not in _TF_SET_SEED:
                continue
            scope = a.enclosing_function(node)
            # a seed set inside a function (a test method seeding a noise draw) is about what
            # that function builds; a module-level seed about the whole script
            if scope is not None and not any(id(n) in users for n in ast.walk(scope)):
                continue
            ctx.report(
                node,
                "`tf.random.set_seed()` does not seed Keras 3: its initializers and dropout draw "
                "their seeds from Python's `random`, so every run starts from different weights; "
                "call `tf.keras.utils.set_random_seed(...)`, which seeds TensorFlow too",
                fix=self._fix(ctx, node),
            )

    @staticmethod
    def _fix(ctx: RuleContext, call: ast.Call) -> Fix:
        alias, edits = tensorflow_alias(ctx)
        text = f"{alias}.keras.utils.set_random_seed"
        return Fix(f"Seed Python, NumPy and TensorFlow: `{text}(...)`",
                   (*edits, replace_span(start_of(call.func), end_of(call.func), text)), "unsafe")
