"""TFL3xx: gradients that silently come out as None, wrong, or never applied."""

from __future__ import annotations

import ast

from tflint.analysis.astutil import dotted
from tflint.analysis.tapes import _kw
from tflint.finding import Fix, Severity
from tflint.rules._fixes import end_of, insert_first_in_block, replace_span, set_keyword, start_of
from tflint.rules.base import Rule, RuleContext



def _text(node: ast.AST | None, limit: int = 50) -> str:
    if node is None:
        return "?"
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(defs) -> int | None:
    lines = [line for line, _ in defs]
    return min(lines) if lines else None


class UnwatchedTensorSource(Rule):
    code = "TFL301"
    name = "gradient-of-unwatched-tensor"
    severity = Severity.ERROR
    summary = "`tape.gradient` with respect to a plain tensor the tape never watched"
    fixable = True
    fix_safety = (
        "The fix inserts `tape.watch(x)` as the first statement of the tape's `with` block, when "
        "`x` is a tensor bound before the block. It is safe: the tape then records the "
        "operations on `x`, and the gradient that was None becomes the real one."
    )
    what = (
        "Checks `tape.gradient(target, sources)` calls where a source is a plain tensor — a "
        "`tf.constant`, a converted array, the result of an op or a model call — or a variable "
        "created with `trainable=False` that the tape never watched with `tape.watch(...)`; one "
        "finding names every such source of the call. Also flags variables as sources of a "
        "tape created with `watch_accessed_variables=False` that watches nothing."
    )
    why = (
        "A `GradientTape` records operations only on what it watches: trainable variables it "
        "sees read, and tensors passed to `tape.watch`. A constant or op result used as a source "
        "was never watched, so nothing links it to the target and `gradient()` returns `None` "
        "for it, without an error. The `None` then propagates: an optimizer skips the update "
        "or a saliency map is empty."
    )
    example = (
        """
        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(x ** 2)
        dy_dx = tape.gradient(y, x)  # None
        """
    )
    use_instead = (
        """
        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(x ** 2)
        dy_dx = tape.gradient(y, x)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(x ** 2)
        dy_dx = tape.gradient(y, x)
        """,
        """
        import tensorflow as tf

        w = tf.Variable([1.0, 2.0])
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(w ** 2)
        dy_dw = tape.gradient(y, w)
        """,
        """
        import tensorflow as tf

        def saliency(model, images):
            images = tf.convert_to_tensor(images)
            with tf.GradientTape() as tape:
                tape.watch(images)
                scores = model(images)
            return tape.gradient(scores, images)
        """,
        # gradient with respect to an intermediate computed inside the tape is fine
        """
        import tensorflow as tf

        def f(model, x):
            with tf.GradientTape() as tape:
                h = model.encoder(x)
                h = tf.nn.relu(h)
                y = model.head(h)
            return tape.gradient(y, h)
        """,
        """
        import tensorflow as tf

        def step(model, x, y, loss_fn):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            return tape.gradient(loss, model.trainable_variables)
        """,
        """
        import tensorflow as tf

        scale = tf.Variable(2.0, trainable=False)
        with tf.GradientTape() as tape:
            tape.watch(scale)
            y = scale * scale
        dy = tape.gradient(y, scale)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(x ** 2)
        dy_dx = tape.gradient(y, x)  # expect: TFL301
        """,
        """
        import tensorflow as tf

        import numpy as np

        def input_grad(model, batch):
            inputs = tf.convert_to_tensor(np.asarray(batch, dtype='float32'))
            with tf.GradientTape() as tape:
                out = model(inputs)
            return tape.gradient(out, inputs)  # expect: TFL301
        """,
        # watched by the other tape only
        """
        import tensorflow as tf

        x = tf.constant(3.0)
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                y = x * x
            dy = inner.gradient(y, x)  # expect: TFL301
        """,
        """
        import tensorflow as tf

        w = tf.Variable(1.0)
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            y = w * w
        g = tape.gradient(y, [w])  # expect: TFL301
        """,
        """
        import tensorflow as tf

        w = tf.Variable(3.0)
        frozen = tf.Variable(3.0, trainable=False)
        b = tf.constant(1.0)
        with tf.GradientTape() as tape:
            y = w * frozen + b
        grads = tape.gradient(y, [w, frozen, b])  # expect: TFL301
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.analysis.tapes
        for flow in facts.flows():
            tape = flow.tape
            unwatched = []  # (name, what it is, value): sources the tape never watches
            for sf in flow.source_facts:
                if sf.watched:
                    continue
                v = sf.val
                line = _first_line(v.defs)
                where = f" on line {line}" if line else ""
                if sf.name is not None and v.kind in ("tensor", "array") and not v.deps:
                    unwatched.append((sf.name, f"a plain tensor ({v.origin or 'an operation'}{where})", v))
                elif sf.name is not None and v.kind == "variable" and not v.trainable:
                    unwatched.append((sf.name, f"a non-trainable Variable ({v.origin}{where})", v))
                elif (
                    tape.watch_accessed_variables is False
                    and not tape.watches
                    and v.kind == "variable"
                ):
                    label = sf.name or _text(sf.expr)
                    ctx.report(
                        flow.call,
                        f"`{tape.label}` was created with `watch_accessed_variables=False` (line "
                        f"{tape.line}) and never watches `{label}`: its gradient is None. Call "
                        f"`{tape.label}.watch({label})` inside the block",
                        fix=_watch_fix(ctx, tape, sf.name, v) if sf.name else None,
                    )
                    break
            if not unwatched:
                continue
            names = [n for n, _, _ in unwatched]
            # a NumPy array is converted anew by each op: watching it watches nothing the
            # target depends on
            fixable = all(v.kind in ("tensor", "variable") for _, _, v in unwatched)
            fix = _watch_fix(ctx, tape, names, [v for _, _, v in unwatched]) if fixable else None
            if len(unwatched) == 1:
                name, what, _ = unwatched[0]
                ctx.report(
                    flow.call,
                    f"`{name}` is {what}, and `{tape.label}` never watches it: "
                    f"`{tape.label}.{flow.method}` returns None for it. Call `{tape.label}.watch({name})` "
                    f"inside the `with` block (line {tape.line}) or make it a trainable `tf.Variable`",
                    fix=fix,
                )
                continue
            listed = "; ".join(f"`{n}` is {what}" for n, what, _ in unwatched)
            ctx.report(
                flow.call,
                f"`{tape.label}` never watches {len(unwatched)} of the sources ({listed}): "
                f"`{tape.label}.{flow.method}` returns None for each. Call "
                f"`{tape.label}.watch([{', '.join(names)}])` inside the `with` block (line {tape.line})",
                fix=fix,
            )


def _watch_fix(ctx: RuleContext, tape, names, vals) -> Fix | None:
    """``tape.watch(x)`` (``tape.watch([x, y])`` for several) as the first statement of the
    tape's ``with`` block, when each name is bound before the block (its value is the one the
    block computes with)."""
    if isinstance(names, str):
        names, vals = [names], [vals]
    if not names or not tape.withs or tape.name is None:
        return None
    block = tape.withs[0]
    for val in vals:
        if any(inside for _, inside in val.defs) or any(line > block.lineno for line, _ in val.defs):
            return None
    arg = names[0] if len(names) == 1 else f"[{', '.join(names)}]"
    edit = insert_first_in_block(ctx, block.body, f"{tape.name}.watch({arg})")
    return Fix(f"Watch `{arg}` at the start of the `with` block", (edit,)) if edit else None


class TargetOutsideTape(Rule):
    code = "TFL302"
    name = "gradient-target-outside-tape"
    severity = Severity.ERROR
    summary = "the gradient target (or its forward pass) is computed outside the `GradientTape` block"
    what = (
        "Checks `tape.gradient(target, ...)` calls whose target is computed outside the "
        "`with tf.GradientTape()` block — before it, after it, or inline in the `gradient()` "
        "call — or is computed inside the block only from a forward pass (a model call) made "
        "before the block."
    )
    why = (
        "The tape records only the operations that run while its `with` block is active. A "
        "loss computed after the block, or from model outputs computed before it, has no "
        "recorded path to the model's variables, so `gradient()` returns `None` for every "
        "variable. `apply_gradients` then warns or raises `No gradients provided for any "
        "variable`, or — with some variables connected — those variables silently stop learning."
    )
    example = (
        """
        logits = model(x, training=True)
        with tf.GradientTape() as tape:
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)  # all None
        """
    )
    use_instead = (
        """
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        def step(model, x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = loss_fn(y, logits)
            return tape.gradient(loss, model.trainable_variables)
        """,
        # the forward result is watched and is the source
        """
        import tensorflow as tf

        def grad_wrt_logits(model, x, y):
            logits = model(x)
            with tf.GradientTape() as tape:
                tape.watch(logits)
                loss = tf.reduce_mean(tf.square(logits - y))
            return tape.gradient(loss, logits)
        """,
        # gradient taken inside the block, on a value recorded inside
        """
        import tensorflow as tf

        def step(model, x):
            with tf.GradientTape() as tape:
                out = model(x)
                loss = tf.reduce_mean(out)
                grads = tape.gradient(loss, model.trainable_variables)
            return grads
        """,
        # re-entering a tape resumes its recording
        """
        import tensorflow as tf

        def step(model, x, y):
            with tf.GradientTape() as tape:
                preds = model(x, training=True)
            with tape:
                loss = tf.reduce_mean(tf.square(preds - y))
            return tape.gradient(loss, model.trainable_variables)
        """,
        # a loss helper the analysis cannot see into may read the model itself
        """
        import tensorflow as tf

        def step(model, x, y, compute_loss):
            feats = model.backbone(x)
            with tf.GradientTape() as tape:
                loss = compute_loss(feats, y)
            return tape.gradient(loss, model.trainable_variables)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        loss_fn = tf.keras.losses.MeanSquaredError()

        def step(model, x, y):
            preds = model(x, training=True)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, preds)
            return tape.gradient(loss, model.trainable_variables)  # expect: TFL302
        """,
        """
        import tensorflow as tf

        def step(model, x, y):
            with tf.GradientTape() as tape:
                preds = model(x)
            loss = tf.reduce_mean(tf.square(preds - y))
            return tape.gradient(loss, model.trainable_variables)  # expect: TFL302
        """,
        """
        import tensorflow as tf

        w = tf.Variable(2.0)
        with tf.GradientTape() as tape:
            y = w * 3.0
        g = tape.gradient(tf.reduce_sum(y * y), w)  # expect: TFL302
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.analysis.tapes
        for flow in facts.flows():
            tape = flow.tape
            tv = flow.target_val
            block = f"the `with tf.GradientTape()` block (lines {tape.line}-{tape.end_line})"
            target = flow.target
            if isinstance(target, ast.Name):
                if tv.defs and tv.op and not any(inside for _, inside in tv.defs):
                    line = _first_line(tv.defs)
                    ctx.report(
                        flow.call,
                        f"`{target.id}` is computed on line {line}, outside {block}: the tape "
                        f"did not record it, so `{tape.label}.{flow.method}` returns None. Compute "
                        "it inside the block",
                    )
                    continue
            elif isinstance(target, (ast.Call, ast.BinOp)) and not flow.inside:
                if not flow.connected or tv.op:
                    ctx.report(
                        flow.call,
                        f"the target `{_text(target, 40)}` is computed in the `{flow.method}()` call, "
                        f"outside {block}: the tape did not record it, so the result is None. "
                        "Compute it inside the block",
                    )
                    continue
            # computed inside the block, but only from a forward pass made before it
            if flow.connected or not tv.fwd or ("unknown",) in tv.deps or flow.cutting_ops():
                continue
            source_names = {sf.name for sf in flow.source_facts if sf.name}
            fwd = sorted((line, name) for name, line in tv.fwd if name not in source_names)
            if not fwd or len(fwd) != len(tv.fwd):
                continue
            line, name = fwd[0]
            label = target.id if isinstance(target, ast.Name) else "the target"
            ctx.report(
                flow.call,
                f"{'`' + label + '`' if label != 'the target' else label} is built from `{name}`, "
                f"computed on line {line} before {block}: that forward pass was not recorded, so "
                f"`{tape.label}.{flow.method}` returns None. Run the forward pass inside the block",
            )


_NONE = "so the gradient is None"
_LEAVES = (
    "so the gradient is None (and `gradient()` raises AttributeError when the target itself is "
    "a NumPy or Python value)"
)


def _cut_description(ctx: RuleContext, node: ast.AST) -> tuple[str, str, str]:
    """(what the op is, what TensorFlow then returns, what to write instead)."""
    a = ctx.analysis
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("numpy", "item", "tolist", "__array__"):
            return f"`.{f.attr}()` leaves TensorFlow", _LEAVES, "keep the computation in TensorFlow ops"
        if isinstance(f, ast.Attribute) and f.attr == "astype":
            return "`.astype(...)` to an integer type has no gradient", _LEAVES, "keep a float dtype"
        if isinstance(f, ast.Name) and f.id in ("float", "int", "bool", "complex", "round"):
            return f"`{f.id}(...)` converts the tensor to a Python number", _LEAVES, "keep the value a tensor"
        qn = a.qualname(f) or ""
        last = qn.rsplit(".", 1)[-1]
        shown = _text(f, 30)
        if qn.startswith("numpy."):
            return f"NumPy call `{shown}` runs outside TensorFlow", _LEAVES, "use the `tf.` equivalent"
        if last == "stop_gradient":
            return f"`{shown}` blocks the only path", _NONE, "remove it, or apply it to the other operand"
        if last == "numpy_function":
            return f"`{shown}` has no gradient", _NONE, "use `tf.py_function` or TensorFlow ops"
        if last in ("cast", "saturate_cast"):
            return f"`{shown}` to an integer/bool dtype has no gradient", _NONE, "cast to a float dtype"
        if last == "sign":
            return (f"`{shown}` has a zero gradient", "so the gradient is zero everywhere",
                    "use a differentiable surrogate (e.g. tanh)")
        if last in ("argmax", "argmin", "round"):
            return f"`{shown}` has no gradient", _NONE, "use a differentiable surrogate (e.g. softmax)"
    return f"`{_text(node, 30)}`", _NONE, "keep the path differentiable"


class GradientPathCut(Rule):
    code = "TFL303"
    name = "gradient-path-cut"
    severity = Severity.ERROR
    summary = "a non-differentiable op inside the tape cuts the path from the sources to the target"
    what = (
        "Checks the operations between a tape's requested sources and its target: `.numpy()`, "
        "NumPy calls on tensors, `tf.argmax`/`argmin`/`round`/`sign`, casts to an integer or "
        "bool dtype, `tf.stop_gradient`, `tf.numpy_function` and `float()`/`int()`. It fires "
        "only when such an op is on every path from a source to the target — a "
        "`tf.stop_gradient` on a baseline or a target network, or a straight-through estimator "
        "(`x + tf.stop_gradient(tf.round(x) - x)`), still leaves a path and is not flagged."
    )
    why = (
        "These operations have no gradient (or leave TensorFlow entirely), so the tape "
        "records no differentiable link through them. When every path from a variable to the "
        "loss goes through one, `gradient()` returns `None` — zeros for `tf.sign`, whose "
        "gradient TensorFlow defines as zero — and training makes no progress, with no error. "
        "When the target itself is a NumPy or Python value (`np.mean(out.numpy())`), "
        "`gradient()` raises `AttributeError` instead."
    )
    example = (
        """
        with tf.GradientTape() as tape:
            probs = model(x)
            pred = tf.cast(tf.argmax(probs, axis=-1), tf.float32)
            loss = tf.reduce_mean(tf.square(pred - y))
        grads = tape.gradient(loss, model.trainable_variables)  # all None
        """
    )
    use_instead = (
        """
        with tf.GradientTape() as tape:
            probs = model(x)
            loss = tf.keras.losses.sparse_categorical_crossentropy(y, probs)
        grads = tape.gradient(loss, model.trainable_variables)
        """
    )
    VALID = [
        # deliberate baseline on another tensor
        """
        import tensorflow as tf

        def step(model, x, y, baseline):
            with tf.GradientTape() as tape:
                logits = model(x)
                ce = tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
                loss = tf.reduce_mean(ce) + tf.stop_gradient(baseline(x))
            return tape.gradient(loss, model.trainable_variables)
        """,
        # RL target network: the target is stopped, the online network still gets gradients
        """
        import tensorflow as tf

        def dqn_step(q_net, target_net, s, a, r, s2):
            with tf.GradientTape() as tape:
                q_next = target_net(s2)
                target = tf.stop_gradient(r + 0.99 * tf.reduce_max(q_next, axis=1))
                q = tf.reduce_sum(q_net(s) * tf.one_hot(a, 4), axis=1)
                loss = tf.reduce_mean(tf.square(target - q))
            return tape.gradient(loss, q_net.trainable_variables)
        """,
        # straight-through estimator keeps a path around the rounding
        """
        import tensorflow as tf

        def step(model, x):
            with tf.GradientTape() as tape:
                h = model(x)
                q = h + tf.stop_gradient(tf.round(h) - h)
                loss = tf.reduce_sum(q)
            return tape.gradient(loss, model.trainable_variables)
        """,
        # argmax used for a metric, not for the loss
        """
        import tensorflow as tf

        def step(model, x, y):
            with tf.GradientTape() as tape:
                logits = model(x)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
                acc = tf.reduce_mean(tf.cast(tf.argmax(logits, -1) == y, tf.float32))
            return tape.gradient(loss, model.trainable_variables), acc
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        def step(model, x, y):
            with tf.GradientTape() as tape:
                probs = model(x)
                pred = tf.cast(tf.argmax(probs, axis=-1), tf.float32)  # expect: TFL303
                loss = tf.reduce_mean(tf.square(pred - y))
            return tape.gradient(loss, model.trainable_variables)
        """,
        """
        import tensorflow as tf

        import numpy as np

        def step(model, x, y):
            with tf.GradientTape() as tape:
                out = model(x)
                loss = np.mean((out.numpy() - y) ** 2)  # expect: TFL303
            return tape.gradient(loss, model.trainable_variables)
        """,
        """
        import tensorflow as tf

        w = tf.Variable([0.5, -0.5])
        with tf.GradientTape() as tape:
            h = tf.stop_gradient(w * 2.0)  # expect: TFL303
            loss = tf.reduce_sum(h ** 2)
        g = tape.gradient(loss, w)
        """,
        """
        import tensorflow as tf

        def step(model, x):
            with tf.GradientTape() as tape:
                codes = tf.cast(model(x), tf.int32)  # expect: TFL303
                loss = tf.reduce_sum(tf.cast(codes, tf.float32))
            return tape.gradient(loss, model.trainable_variables)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        seen: set[ast.AST] = set()
        for flow in ctx.analysis.tapes.flows():
            for node in flow.cutting_ops():
                if node in seen:
                    continue
                seen.add(node)
                what, result, instead = _cut_description(ctx, node)
                target = _text(flow.target, 30)
                sources = _text(flow.sources, 40)
                ctx.report(
                    node,
                    f"{what}: it cuts the path from `{sources}` to `{target}` (gradient on line "
                    f"{flow.call.lineno}), {result}. Instead, {instead}",
                )


class RepeatedGradientCall(Rule):
    code = "TFL304"
    name = "non-persistent-tape-reused"
    severity = Severity.ERROR
    summary = "`gradient()` called more than once on a non-persistent tape"
    fixable = True
    fix_safety = (
        "The fix adds `persistent=True` to the `tf.GradientTape(...)` call. It is safe: the "
        "calls that raised RuntimeError now return gradients; the tape's memory is freed when "
        "its last reference goes (add `del tape` after the last call in a long function)."
    )
    what = (
        "Checks for a second `gradient()` (or `jacobian()`) call on a tape created without "
        "`persistent=True`, including a call in a loop or comprehension that runs once per item "
        "while the tape is created only once. Calls in different branches of an `if` are not a "
        "repeat."
    )
    why = (
        "A non-persistent tape releases what it recorded as soon as `gradient()` returns. The "
        "second call raises `RuntimeError: A non-persistent GradientTape can only be used to "
        "compute one set of gradients` — often only on a rarely taken path (a GAN's second "
        "loss, a per-variable loop), far into a run."
    )
    example = (
        """
        with tf.GradientTape() as tape:
            g_loss, d_loss = losses(gen, disc, x)
        g_grads = tape.gradient(g_loss, gen.trainable_variables)
        d_grads = tape.gradient(d_loss, disc.trainable_variables)  # RuntimeError
        """
    )
    use_instead = (
        """
        with tf.GradientTape(persistent=True) as tape:
            g_loss, d_loss = losses(gen, disc, x)
        g_grads = tape.gradient(g_loss, gen.trainable_variables)
        d_grads = tape.gradient(d_loss, disc.trainable_variables)
        del tape
        """
    )
    VALID = [
        """
        import tensorflow as tf

        def step(gen, disc, x, losses):
            with tf.GradientTape(persistent=True) as tape:
                g_loss, d_loss = losses(gen, disc, x)
            g = tape.gradient(g_loss, gen.trainable_variables)
            d = tape.gradient(d_loss, disc.trainable_variables)
            del tape
            return g, d
        """,
        """
        import tensorflow as tf

        def step(model, x, use_aux):
            with tf.GradientTape() as tape:
                out, aux = model(x)
            if use_aux:
                return tape.gradient(out + aux, model.trainable_variables)
            else:
                return tape.gradient(out, model.trainable_variables)
        """,
        """
        import tensorflow as tf

        def train(model, data):
            for x in data:
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(model(x))
                grads = tape.gradient(loss, model.trainable_variables)
        """,
        # two tapes, one gradient each
        """
        import tensorflow as tf

        def step(gen, disc, x, losses):
            with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
                g_loss, d_loss = losses(gen, disc, x)
            g = g_tape.gradient(g_loss, gen.trainable_variables)
            d = d_tape.gradient(d_loss, disc.trainable_variables)
            return g, d
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        def step(gen, disc, x, losses):
            with tf.GradientTape() as tape:
                g_loss, d_loss = losses(gen, disc, x)
            g = tape.gradient(g_loss, gen.trainable_variables)
            d = tape.gradient(d_loss, disc.trainable_variables)  # expect: TFL304
            return g, d
        """,
        """
        import tensorflow as tf

        def per_variable(model, x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x))
            grads = []
            for v in model.trainable_variables:
                grads.append(tape.gradient(loss, v))  # expect: TFL304
            return grads
        """,
        """
        import tensorflow as tf

        def per_loss(model, x):
            tape = tf.GradientTape(persistent=False)
            with tape:
                losses = model(x)
            return [tape.gradient(l, model.trainable_variables) for l in losses]  # expect: TFL304
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.analysis.tapes
        for tape in facts.tapes:
            if tape.persistent is not False:
                continue
            for call, prev in facts.repeated_calls(tape):
                method = call.func.attr  # type: ignore[attr-defined]
                if isinstance(prev, ast.Call):
                    how = f"after the `{prev.func.attr}()` call on line {prev.lineno}"  # type: ignore[attr-defined]
                elif isinstance(prev, (ast.For, ast.AsyncFor, ast.While)):
                    how = f"on every iteration of the loop on line {prev.lineno}"
                else:
                    how = f"once per item of the comprehension on line {prev.lineno}"
                fix = None
                if isinstance(tape.call, ast.Call):
                    fix = Fix(
                        "Create the tape with `persistent=True`",
                        (set_keyword(ctx, tape.call, "persistent", "True"),),
                    )
                ctx.report(
                    call,
                    f"`{tape.label}.{method}()` runs {how}, but `{tape.label}` (line {tape.line}) is "
                    "not persistent: the first call releases it and this one raises RuntimeError. "
                    "Create it with `tf.GradientTape(persistent=True)` and `del` it after the last "
                    "call",
                    fix=fix,
                )


class PersistentTapeKeptAlive(Rule):
    code = "TFL305"
    name = "persistent-tape-not-released"
    severity = Severity.ERROR
    summary = "a `persistent=True` tape kept alive (on an object, in a container or at module level) without `del`"
    what = (
        "Checks eager code for `tf.GradientTape(persistent=True)` tapes that outlive their last "
        "`gradient()` call because they are stored on an object (`self.tape`), in a container, "
        "or bound at module level, and are never deleted. Tapes in traced code are not "
        "flagged: there they exist only while tracing; nor a module-level tape whose name a "
        "later statement binds again (a notebook's next tape), which frees it there."
    )
    why = (
        "A persistent tape keeps every intermediate tensor it recorded — activations of the "
        "whole forward pass — alive until the tape itself is freed. A tape held by an object or "
        "a global is never freed until it is replaced, so each training step holds (at least) "
        "one extra step's activations: memory grows, and on GPU the run ends in an "
        "out-of-memory error that looks like a batch-size problem."
    )
    example = (
        """
        class Trainer:
            def step(self, x):
                with tf.GradientTape(persistent=True) as self.tape:
                    loss = self.model(x)
                return self.tape.gradient(loss, self.model.trainable_variables)
        """
    )
    use_instead = (
        """
        class Trainer:
            def step(self, x):
                with tf.GradientTape(persistent=True) as tape:
                    loss = self.model(x)
                grads = tape.gradient(loss, self.model.trainable_variables)
                del tape
                return grads
        """
    )
    VALID = [
        """
        import tensorflow as tf

        def step(model, x):
            with tf.GradientTape(persistent=True) as tape:
                y = model(x)
            g1 = tape.gradient(y, model.trainable_variables)
            g2 = tape.gradient(y, x)
            return g1, g2
        """,
        """
        import tensorflow as tf

        x = tf.Variable(1.0)
        with tf.GradientTape(persistent=True) as tape:
            y = x * x
        dy = tape.gradient(y, x)
        del tape
        """,
        """
        import tensorflow as tf

        class Trainer:
            @tf.function
            def step(self, x):
                with tf.GradientTape(persistent=True) as self.tape:
                    y = self.model(x)
                return self.tape.gradient(y, self.model.trainable_variables)
        """,
        """
        import tensorflow as tf

        class Trainer:
            def step(self, x):
                self.tape = tf.GradientTape(persistent=True)
                with self.tape:
                    y = self.model(x)
                g = self.tape.gradient(y, self.model.trainable_variables)
                self.tape = None
                return g
        """,
        """
        import tensorflow as tf

        x = tf.Variable(1.0)
        with tf.GradientTape(persistent=True) as tape:
            y = x * x
            z = y * y
        dy, dz = tape.gradient(y, x), tape.gradient(z, x)

        with tf.GradientTape() as tape:  # the name is bound again: the persistent tape is freed
            w = x * 3.0
        dw = tape.gradient(w, x)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        x = tf.Variable(1.0)
        with tf.GradientTape(persistent=True) as tape:  # expect: TFL305
            y = x * x
            z = y * y
        dy = tape.gradient(y, x)
        dz = tape.gradient(z, x)
        """,
        """
        import tensorflow as tf

        x = tf.Variable(1.0)
        for step in range(100):
            with tf.GradientTape(persistent=True) as tape:  # expect: TFL305
                y = x * x
            g = tape.gradient(y, x)
        # the last step's tape outlives the loop
        """,
        """
        import tensorflow as tf

        class Trainer:
            def step(self, x):
                with tf.GradientTape(persistent=True) as self.tape:  # expect: TFL305
                    y = self.model(x)
                return self.tape.gradient(y, self.model.trainable_variables)
        """,
        """
        import tensorflow as tf

        history = []

        def step(model, x):
            with tf.GradientTape(persistent=True) as tape:  # expect: TFL305
                y = model(x)
            history.append(tape)
            return tape.gradient(y, model.trainable_variables)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.analysis.tapes
        for call, where in facts.kept_alive():
            last = None
            for tape in facts.tapes:
                if tape.call is call and tape.calls:
                    last = max(c.lineno for c in tape.calls)
            after = f" after its last `gradient()` call (line {last})" if last else ""
            ctx.report(
                call,
                f"persistent GradientTape {where} is never deleted: it keeps every tensor it "
                f"recorded alive{after}, so memory grows. `del` it after the last gradient call, "
                "or keep it in a local variable",
            )


class VariablesReadBeforeBuild(Rule):
    code = "TFL306"
    name = "trainable-variables-before-build"
    severity = Severity.ERROR
    summary = "`trainable_variables` read before the model has created its variables"
    what = (
        "Checks reads of `model.trainable_variables` / `trainable_weights` that feed a "
        "gradient or an optimizer (`tape.gradient`, `apply_gradients`, `optimizer.build`, "
        "`minimize`) while the model — a subclassed model, a `Sequential` without an `Input` or "
        "`input_shape=`, or a layer — has not been called or built yet."
    )
    why = (
        "Keras creates a model's variables the first time it is called (or built with an input "
        "shape). Before that, `trainable_variables` is an empty list, and stays that same empty "
        "list when the variables appear. Gradients computed for it are an empty list too. With "
        "Keras 3 (TensorFlow 2.16 and later) the first update then fails far from the cause: "
        "`apply_gradients(zip(grads, params))` raises `ValueError: not enough values to "
        "unpack`, and an optimizer built for the empty list raises `ValueError: Unknown "
        "variable` when it meets the real variables. `model.build(shape)` does not help a "
        "subclassed model that has no `build()` method: Keras marks it built without creating "
        "any variable."
    )
    example = (
        """
        model = MyModel()
        params = model.trainable_variables  # [] — nothing built yet
        for x, y in ds:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            opt.apply_gradients(zip(tape.gradient(loss, params), params))
        """
    )
    use_instead = (
        """
        model = MyModel()
        model(next(iter(ds))[0])  # the first call creates the variables
        params = model.trainable_variables
        """
    )
    VALID = [
        """
        import tensorflow as tf

        from tensorflow import keras

        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        opt = keras.optimizers.SGD()
        params = model.trainable_variables
        opt.build(params)
        """,
        """
        import tensorflow as tf

        from tensorflow import keras

        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        opt = keras.optimizers.SGD()
        params = model.trainable_variables
        opt.build(params)
        """,
        """
        import tensorflow as tf

        from tensorflow import keras

        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.d = keras.layers.Dense(1)
            def call(self, x):
                return self.d(x)

        def train(ds):
            model = Net()
            opt = keras.optimizers.Adam()
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((model(x) - y) ** 2)
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
        """,
        """
        import tensorflow as tf

        from tensorflow import keras

        layer = keras.layers.Dense(2)
        layer.build((None, 3))
        opt = keras.optimizers.SGD()
        opt.build(layer.trainable_variables)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        from tensorflow import keras

        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.d = keras.layers.Dense(1)
            def call(self, x):
                return self.d(x)

        def train(ds):
            model = Net()
            opt = keras.optimizers.Adam()
            params = model.trainable_variables  # expect: TFL306
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((model(x) - y) ** 2)
                grads = tape.gradient(loss, params)
                opt.apply_gradients(zip(grads, params))
        """,
        """
        import tensorflow as tf

        from tensorflow import keras

        model = keras.Sequential([keras.layers.Dense(8), keras.layers.Dense(1)])
        opt = keras.optimizers.SGD()
        opt.build(model.trainable_variables)  # expect: TFL306
        """,
        """
        import keras
        from keras import layers

        head = layers.Dense(10)
        optimizer = keras.optimizers.Adam()
        optimizer.build(head.trainable_weights)  # expect: TFL306
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        for read, name, ctor, use in ctx.analysis.tapes.premature_reads:
            use_name = use.func.attr if isinstance(use, ast.Call) and isinstance(use.func, ast.Attribute) else "the update"
            ctx.report(
                read,
                f"`{name}.{read.attr}` is read before `{name}` (created on line {ctor.lineno}) has "
                f"created its variables: it is an empty list, so `{use_name}` on line {use.lineno} "
                f"covers no variable and the first update raises ValueError. Call `{name}` once on "
                "a batch (or give it an input shape) first, or read the variables after the forward "
                "pass",
            )


class AppliedToOtherVariables(Rule):
    code = "TFL307"
    name = "gradients-applied-to-other-variables"
    severity = Severity.ERROR
    summary = "`apply_gradients(zip(grads, A))` where `grads` were computed for other variables"
    fixable = True
    fix_safety = (
        "When the variables the gradients were computed for are a name or attribute chain of "
        "the same function (`generator.trainable_variables`), the fix applies the gradients to "
        "them. It is unsafe: it assumes the `gradient` call names the intended variables and "
        "the `apply_gradients` call is the mistake; when it is the other way round, fix the "
        "`gradient` call instead."
    )
    what = (
        "Checks `optimizer.apply_gradients(zip(grads, A))` (and `optimizer.apply(grads, A)`) "
        "where `grads = tape.gradient(loss, B)` — followed through names, "
        "`tf.clip_by_global_norm` and comprehensions — and `A` is not the same variable list "
        "as `B` (`trainable_variables` and `trainable_weights` count as the same list)."
    )
    why = (
        "`zip` pairs the i-th gradient with the i-th variable without checking anything. With a "
        "different list (another model, another order, a subset), each variable is updated with "
        "another variable's gradient — or the shapes happen to match and training silently "
        "diverges; extra entries are dropped by `zip` without a warning."
    )
    example = (
        """
        grads = tape.gradient(d_loss, disc.trainable_variables)
        opt.apply_gradients(zip(grads, gen.trainable_variables))
        """
    )
    use_instead = (
        """
        grads = tape.gradient(d_loss, disc.trainable_variables)
        opt.apply_gradients(zip(grads, disc.trainable_variables))
        """
    )
    VALID = [
        """
        import tensorflow as tf

        def step(model, opt, x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x))
            grads = tape.gradient(loss, model.trainable_weights)
            opt.apply_gradients(zip(grads, model.trainable_variables))
        """,
        """
        import tensorflow as tf

        def step(model, opt, x):
            params = model.trainable_variables
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x))
            grads = tape.gradient(loss, params)
            grads, _ = tf.clip_by_global_norm(grads, 1.0)
            opt.apply_gradients(zip(grads, model.trainable_variables))
        """,
        """
        import tensorflow as tf

        def step(model, opt, x, extra):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, extra))
        """,
        # gradients not from a tape: nothing to compare
        """
        import tensorflow as tf

        def step(opt, grads, w):
            opt.apply_gradients(zip(grads, [w]))
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        def gan_step(gen, disc, opt, x):
            with tf.GradientTape() as tape:
                d_loss = tf.reduce_sum(disc(gen(x)))
            grads = tape.gradient(d_loss, disc.trainable_variables)
            opt.apply_gradients(zip(grads, gen.trainable_variables))  # expect: TFL307
        """,
        """
        import tensorflow as tensorflow_lib

        def step(actor, critic, opt, s):
            with tensorflow_lib.GradientTape() as tape:
                loss = -tensorflow_lib.reduce_mean(critic(s, actor(s)))
            actor_vars = actor.trainable_variables
            critic_vars = critic.trainable_variables
            grads = tape.gradient(loss, actor_vars)
            opt.apply_gradients(zip(grads, critic_vars))  # expect: TFL307
        """,
        """
        import tensorflow as tf

        def step(model, opt, x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            grads = [tf.clip_by_norm(g, 1.0) for g in grads]
            opt.apply_gradients(zip(grads, model.encoder.trainable_variables))  # expect: TFL307
        """,
        """
        import tensorflow as tf

        w = tf.Variable(1.0)
        b = tf.Variable(0.0)
        opt = tf.keras.optimizers.SGD()
        with tf.GradientTape() as tape:
            loss = (w * 3.0 + b - 1.0) ** 2
        grads = tape.gradient(loss, [w, b])
        opt.apply_gradients(zip(grads, [b, w]))  # expect: TFL307
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.analysis.tapes
        if ".gradient(" not in ctx.source or not ctx.analysis.imports.uses_tensorflow:
            return
        for node in ctx.analysis.nodes(ast.Call):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            pair = None
            if node.func.attr == "apply_gradients":
                arg = _kw(node, "grads_and_vars", 0)
                pair = self._zip_args(ctx, arg, node)
            elif node.func.attr == "apply" and len(node.args) >= 2 and "opt" in ast.unparse(node.func.value).lower():
                pair = (node.args[0], node.args[1])
            if pair is None:
                continue
            grads, applied = pair
            found = facts.gradient_sources_of(grads, node)
            if found is None:
                continue
            gcall, computed = found
            if facts.tape_of(gcall) is None and not isinstance(gcall.func, ast.Attribute):
                continue
            ca, ra = facts.canonical(applied, node)
            cb, rb = facts.canonical(computed, gcall)
            if ca == cb:
                continue
            both_resolved = ra and rb
            both_bare = ca.startswith("name:") and cb.startswith("name:")
            if not (both_resolved or both_bare):
                continue
            fix = None
            a = ctx.analysis
            if (
                dotted(computed) is not None
                and a.enclosing_function(gcall) is a.enclosing_function(node)
                and isinstance(applied, (ast.Name, ast.Attribute))
            ):
                fix = Fix(
                    f"Apply the gradients to `{dotted(computed)}`",
                    (replace_span(start_of(applied), end_of(applied), dotted(computed)),),
                    "unsafe",
                )
            ctx.report(
                node,
                f"gradients were computed for `{_text(computed, 40)}` (line {gcall.lineno}) but are "
                f"applied to `{_text(applied, 40)}`: `zip` pairs each gradient with another "
                "variable. Pass the same variable list to `gradient` and `apply_gradients`",
                fix=fix,
            )

    @staticmethod
    def _zip_args(ctx: RuleContext, arg: ast.AST | None, at: ast.AST, depth: int = 0):
        if arg is None or depth > 4:
            return None
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name):
            if arg.func.id == "zip" and len(arg.args) == 2 and ctx.analysis.qualname(arg.func) is None:
                return arg.args[0], arg.args[1]
            if arg.func.id == "list" and len(arg.args) == 1:
                return AppliedToOtherVariables._zip_args(ctx, arg.args[0], at, depth + 1)
        if isinstance(arg, ast.Name):
            d = ctx.analysis.tapes.last_assignment(arg.id, at)
            if d is not None and d[2] is None and d[1] is not None:
                return AppliedToOtherVariables._zip_args(ctx, d[1], d[0], depth + 1)
        return None


__all__ = [
    "AppliedToOtherVariables",
    "GradientPathCut",
    "PersistentTapeKeptAlive",
    "RepeatedGradientCall",
    "TargetOutsideTape",
    "UnwatchedTensorSource",
    "VariablesReadBeforeBuild",
]
