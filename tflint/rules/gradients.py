"""TFL3xx: gradients that silently come out as None, wrong, or never applied."""

from __future__ import annotations

import ast

from tflint.analysis.tapes import _kw
from tflint.finding import Severity
from tflint.rules.base import Rule, RuleContext

_IMPORT = "import tensorflow as tf\n\n"


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
    what = (
        "Checks `tape.gradient(target, sources)` calls where a source is a plain tensor — a "
        "`tf.constant`, a converted array, the result of an op or a model call — that the tape "
        "never watched with `tape.watch(...)`. Also flags variables as sources of a tape "
        "created with `watch_accessed_variables=False` that watches nothing."
    )
    why = (
        "A `GradientTape` records operations only on what it watches: trainable variables it "
        "sees read, and tensors passed to `tape.watch`. A constant or op result used as a source "
        "was never watched, so nothing links it to the target and `gradient()` returns `None` "
        "for it, without an error. The `None` then propagates: an optimizer skips the update "
        "or a saliency map is empty."
    )
    example = (
        "x = tf.constant([1.0, 2.0])\n"
        "with tf.GradientTape() as tape:\n"
        "    y = tf.reduce_sum(x ** 2)\n"
        "dy_dx = tape.gradient(y, x)  # None\n"
    )
    use_instead = (
        "x = tf.constant([1.0, 2.0])\n"
        "with tf.GradientTape() as tape:\n"
        "    tape.watch(x)\n"
        "    y = tf.reduce_sum(x ** 2)\n"
        "dy_dx = tape.gradient(y, x)\n"
    )
    VALID = [
        _IMPORT + "x = tf.constant([1.0, 2.0])\nwith tf.GradientTape() as tape:\n    tape.watch(x)\n"
        "    y = tf.reduce_sum(x ** 2)\ndy_dx = tape.gradient(y, x)\n",
        _IMPORT + "w = tf.Variable([1.0, 2.0])\nwith tf.GradientTape() as tape:\n"
        "    y = tf.reduce_sum(w ** 2)\ndy_dw = tape.gradient(y, w)\n",
        _IMPORT + "def saliency(model, images):\n    images = tf.convert_to_tensor(images)\n"
        "    with tf.GradientTape() as tape:\n        tape.watch(images)\n        scores = model(images)\n"
        "    return tape.gradient(scores, images)\n",
        # gradient with respect to an intermediate computed inside the tape is fine
        _IMPORT + "def f(model, x):\n    with tf.GradientTape() as tape:\n        h = model.encoder(x)\n"
        "        h = tf.nn.relu(h)\n        y = model.head(h)\n    return tape.gradient(y, h)\n",
        _IMPORT + "def step(model, x, y, loss_fn):\n    with tf.GradientTape() as tape:\n"
        "        loss = loss_fn(y, model(x))\n    return tape.gradient(loss, model.trainable_variables)\n",
    ]
    INVALID = [
        _IMPORT + "x = tf.constant([1.0, 2.0])\nwith tf.GradientTape() as tape:\n"
        "    y = tf.reduce_sum(x ** 2)\ndy_dx = tape.gradient(y, x)  # expect: TFL301\n",
        _IMPORT + "import numpy as np\n\ndef input_grad(model, batch):\n"
        "    inputs = tf.convert_to_tensor(np.asarray(batch, dtype='float32'))\n"
        "    with tf.GradientTape() as tape:\n        out = model(inputs)\n"
        "    return tape.gradient(out, inputs)  # expect: TFL301\n",
        # watched by the other tape only
        _IMPORT + "x = tf.constant(3.0)\nwith tf.GradientTape() as outer:\n    outer.watch(x)\n"
        "    with tf.GradientTape() as inner:\n        y = x * x\n"
        "    dy = inner.gradient(y, x)  # expect: TFL301\n",
        _IMPORT + "w = tf.Variable(1.0)\nwith tf.GradientTape(watch_accessed_variables=False) as tape:\n"
        "    y = w * w\ng = tape.gradient(y, [w])  # expect: TFL301\n",
    ]

    def check(self, ctx: RuleContext) -> None:
        facts = ctx.analysis.tapes
        for flow in facts.flows():
            tape = flow.tape
            for sf in flow.source_facts:
                if sf.watched:
                    continue
                v = sf.val
                line = _first_line(v.defs)
                where = f" on line {line}" if line else ""
                if sf.name is not None and v.kind in ("tensor", "array") and not v.deps:
                    origin = v.origin or "an operation"
                    ctx.report(
                        flow.call,
                        f"`{sf.name}` is a plain tensor ({origin}{where}), not a Variable, and "
                        f"`{tape.label}` never watches it: `{tape.label}.{flow.method}` returns None "
                        f"for it. Call `{tape.label}.watch({sf.name})` inside the `with` block "
                        f"(line {tape.line}) or make it a `tf.Variable`",
                    )
                    break
                if (
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
                    )
                    break


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
        "logits = model(x, training=True)\n"
        "with tf.GradientTape() as tape:\n"
        "    loss = loss_fn(y, logits)\n"
        "grads = tape.gradient(loss, model.trainable_variables)  # all None\n"
    )
    use_instead = (
        "with tf.GradientTape() as tape:\n"
        "    logits = model(x, training=True)\n"
        "    loss = loss_fn(y, logits)\n"
        "grads = tape.gradient(loss, model.trainable_variables)\n"
    )
    VALID = [
        _IMPORT + "loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)\n\n"
        "def step(model, x, y):\n    with tf.GradientTape() as tape:\n        logits = model(x, training=True)\n"
        "        loss = loss_fn(y, logits)\n    return tape.gradient(loss, model.trainable_variables)\n",
        # the forward result is watched and is the source
        _IMPORT + "def grad_wrt_logits(model, x, y):\n    logits = model(x)\n"
        "    with tf.GradientTape() as tape:\n        tape.watch(logits)\n"
        "        loss = tf.reduce_mean(tf.square(logits - y))\n    return tape.gradient(loss, logits)\n",
        # gradient taken inside the block, on a value recorded inside
        _IMPORT + "def step(model, x):\n    with tf.GradientTape() as tape:\n        out = model(x)\n"
        "        loss = tf.reduce_mean(out)\n        grads = tape.gradient(loss, model.trainable_variables)\n"
        "    return grads\n",
        # a loss helper the analysis cannot see into may read the model itself
        _IMPORT + "def step(model, x, y, compute_loss):\n    feats = model.backbone(x)\n"
        "    with tf.GradientTape() as tape:\n        loss = compute_loss(feats, y)\n"
        "    return tape.gradient(loss, model.trainable_variables)\n",
    ]
    INVALID = [
        _IMPORT + "loss_fn = tf.keras.losses.MeanSquaredError()\n\ndef step(model, x, y):\n"
        "    preds = model(x, training=True)\n    with tf.GradientTape() as tape:\n"
        "        loss = loss_fn(y, preds)\n"
        "    return tape.gradient(loss, model.trainable_variables)  # expect: TFL302\n",
        _IMPORT + "def step(model, x, y):\n    with tf.GradientTape() as tape:\n        preds = model(x)\n"
        "    loss = tf.reduce_mean(tf.square(preds - y))\n"
        "    return tape.gradient(loss, model.trainable_variables)  # expect: TFL302\n",
        _IMPORT + "w = tf.Variable(2.0)\nwith tf.GradientTape() as tape:\n    y = w * 3.0\n"
        "g = tape.gradient(tf.reduce_sum(y * y), w)  # expect: TFL302\n",
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


def _cut_description(ctx: RuleContext, node: ast.AST) -> tuple[str, str]:
    """(what the op is, what to write instead)."""
    a = ctx.analysis
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("numpy", "item", "tolist", "__array__"):
            return f"`.{f.attr}()` leaves TensorFlow", "keep the computation in TensorFlow ops"
        if isinstance(f, ast.Attribute) and f.attr == "astype":
            return "`.astype(...)` to an integer type has no gradient", "keep a float dtype"
        if isinstance(f, ast.Name) and f.id in ("float", "int", "bool", "complex", "round"):
            return f"`{f.id}(...)` converts the tensor to a Python number", "keep the value a tensor"
        qn = a.qualname(f) or ""
        last = qn.rsplit(".", 1)[-1]
        shown = _text(f, 30)
        if qn.startswith("numpy."):
            return f"NumPy call `{shown}` runs outside TensorFlow", "use the `tf.` equivalent"
        if last == "stop_gradient":
            return f"`{shown}` blocks the only path", "remove it, or apply it to the other operand"
        if last == "numpy_function":
            return f"`{shown}` has no gradient", "use `tf.py_function` or TensorFlow ops"
        if last in ("cast", "saturate_cast"):
            return f"`{shown}` to an integer/bool dtype has no gradient", "cast to a float dtype"
        if last in ("argmax", "argmin", "round", "sign"):
            return f"`{shown}` has no gradient", "use a differentiable surrogate (e.g. softmax)"
    return f"`{_text(node, 30)}`", "keep the path differentiable"


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
        "loss goes through one, `gradient()` returns `None` (or zeros) and training makes no "
        "progress, with no error."
    )
    example = (
        "with tf.GradientTape() as tape:\n"
        "    probs = model(x)\n"
        "    pred = tf.cast(tf.argmax(probs, axis=-1), tf.float32)\n"
        "    loss = tf.reduce_mean(tf.square(pred - y))\n"
        "grads = tape.gradient(loss, model.trainable_variables)  # all None\n"
    )
    use_instead = (
        "with tf.GradientTape() as tape:\n"
        "    probs = model(x)\n"
        "    loss = tf.keras.losses.sparse_categorical_crossentropy(y, probs)\n"
        "grads = tape.gradient(loss, model.trainable_variables)\n"
    )
    VALID = [
        # deliberate baseline on another tensor
        _IMPORT + "def step(model, x, y, baseline):\n    with tf.GradientTape() as tape:\n"
        "        logits = model(x)\n        ce = tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)\n"
        "        loss = tf.reduce_mean(ce) + tf.stop_gradient(baseline(x))\n"
        "    return tape.gradient(loss, model.trainable_variables)\n",
        # RL target network: the target is stopped, the online network still gets gradients
        _IMPORT + "def dqn_step(q_net, target_net, s, a, r, s2):\n    with tf.GradientTape() as tape:\n"
        "        q_next = target_net(s2)\n        target = tf.stop_gradient(r + 0.99 * tf.reduce_max(q_next, axis=1))\n"
        "        q = tf.reduce_sum(q_net(s) * tf.one_hot(a, 4), axis=1)\n        loss = tf.reduce_mean(tf.square(target - q))\n"
        "    return tape.gradient(loss, q_net.trainable_variables)\n",
        # straight-through estimator keeps a path around the rounding
        _IMPORT + "def step(model, x):\n    with tf.GradientTape() as tape:\n        h = model(x)\n"
        "        q = h + tf.stop_gradient(tf.round(h) - h)\n        loss = tf.reduce_sum(q)\n"
        "    return tape.gradient(loss, model.trainable_variables)\n",
        # argmax used for a metric, not for the loss
        _IMPORT + "def step(model, x, y):\n    with tf.GradientTape() as tape:\n        logits = model(x)\n"
        "        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))\n"
        "        acc = tf.reduce_mean(tf.cast(tf.argmax(logits, -1) == y, tf.float32))\n"
        "    return tape.gradient(loss, model.trainable_variables), acc\n",
    ]
    INVALID = [
        _IMPORT + "def step(model, x, y):\n    with tf.GradientTape() as tape:\n        probs = model(x)\n"
        "        pred = tf.cast(tf.argmax(probs, axis=-1), tf.float32)  # expect: TFL303\n"
        "        loss = tf.reduce_mean(tf.square(pred - y))\n"
        "    return tape.gradient(loss, model.trainable_variables)\n",
        _IMPORT + "import numpy as np\n\ndef step(model, x, y):\n    with tf.GradientTape() as tape:\n"
        "        out = model(x)\n        loss = np.mean((out.numpy() - y) ** 2)  # expect: TFL303\n"
        "    return tape.gradient(loss, model.trainable_variables)\n",
        _IMPORT + "w = tf.Variable([0.5, -0.5])\nwith tf.GradientTape() as tape:\n"
        "    h = tf.stop_gradient(w * 2.0)  # expect: TFL303\n    loss = tf.reduce_sum(h ** 2)\n"
        "g = tape.gradient(loss, w)\n",
        _IMPORT + "def step(model, x):\n    with tf.GradientTape() as tape:\n"
        "        codes = tf.cast(model(x), tf.int32)  # expect: TFL303\n"
        "        loss = tf.reduce_sum(tf.cast(codes, tf.float32))\n"
        "    return tape.gradient(loss, model.trainable_variables)\n",
    ]

    def check(self, ctx: RuleContext) -> None:
        seen: set[ast.AST] = set()
        for flow in ctx.analysis.tapes.flows():
            for node in flow.cutting_ops():
                if node in seen:
                    continue
                seen.add(node)
                what, instead = _cut_description(ctx, node)
                target = _text(flow.target, 30)
                sources = _text(flow.sources, 40)
                ctx.report(
                    node,
                    f"{what}: it cuts the path from `{sources}` to `{target}` (gradient on line "
                    f"{flow.call.lineno}), so the gradient is None. Instead, {instead}",
                )


class RepeatedGradientCall(Rule):
    code = "TFL304"
    name = "non-persistent-tape-reused"
    severity = Severity.ERROR
    summary = "`gradient()` called more than once on a non-persistent tape"
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
        "with tf.GradientTape() as tape:\n"
        "    g_loss, d_loss = losses(gen, disc, x)\n"
        "g_grads = tape.gradient(g_loss, gen.trainable_variables)\n"
        "d_grads = tape.gradient(d_loss, disc.trainable_variables)  # RuntimeError\n"
    )
    use_instead = (
        "with tf.GradientTape(persistent=True) as tape:\n"
        "    g_loss, d_loss = losses(gen, disc, x)\n"
        "g_grads = tape.gradient(g_loss, gen.trainable_variables)\n"
        "d_grads = tape.gradient(d_loss, disc.trainable_variables)\n"
        "del tape\n"
    )
    VALID = [
        _IMPORT + "def step(gen, disc, x, losses):\n    with tf.GradientTape(persistent=True) as tape:\n"
        "        g_loss, d_loss = losses(gen, disc, x)\n    g = tape.gradient(g_loss, gen.trainable_variables)\n"
        "    d = tape.gradient(d_loss, disc.trainable_variables)\n    del tape\n    return g, d\n",
        _IMPORT + "def step(model, x, use_aux):\n    with tf.GradientTape() as tape:\n        out, aux = model(x)\n"
        "    if use_aux:\n        return tape.gradient(out + aux, model.trainable_variables)\n"
        "    else:\n        return tape.gradient(out, model.trainable_variables)\n",
        _IMPORT + "def train(model, data):\n    for x in data:\n        with tf.GradientTape() as tape:\n"
        "            loss = tf.reduce_sum(model(x))\n        grads = tape.gradient(loss, model.trainable_variables)\n",
        # two tapes, one gradient each
        _IMPORT + "def step(gen, disc, x, losses):\n    with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:\n"
        "        g_loss, d_loss = losses(gen, disc, x)\n    g = g_tape.gradient(g_loss, gen.trainable_variables)\n"
        "    d = d_tape.gradient(d_loss, disc.trainable_variables)\n    return g, d\n",
    ]
    INVALID = [
        _IMPORT + "def step(gen, disc, x, losses):\n    with tf.GradientTape() as tape:\n"
        "        g_loss, d_loss = losses(gen, disc, x)\n    g = tape.gradient(g_loss, gen.trainable_variables)\n"
        "    d = tape.gradient(d_loss, disc.trainable_variables)  # expect: TFL304\n    return g, d\n",
        _IMPORT + "def per_variable(model, x):\n    with tf.GradientTape() as tape:\n        loss = tf.reduce_sum(model(x))\n"
        "    grads = []\n    for v in model.trainable_variables:\n"
        "        grads.append(tape.gradient(loss, v))  # expect: TFL304\n    return grads\n",
        _IMPORT + "def per_loss(model, x):\n    tape = tf.GradientTape(persistent=False)\n    with tape:\n"
        "        losses = model(x)\n"
        "    return [tape.gradient(l, model.trainable_variables) for l in losses]  # expect: TFL304\n",
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
                ctx.report(
                    call,
                    f"`{tape.label}.{method}()` runs {how}, but `{tape.label}` (line {tape.line}) is "
                    "not persistent: the first call releases it and this one raises RuntimeError. "
                    "Create it with `tf.GradientTape(persistent=True)` and `del` it after the last "
                    "call",
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
        "flagged: there they exist only while tracing."
    )
    why = (
        "A persistent tape keeps every intermediate tensor it recorded — activations of the "
        "whole forward pass — alive until the tape itself is freed. A tape held by an object or "
        "a global is never freed until it is replaced, so each training step holds (at least) "
        "one extra step's activations: memory grows, and on GPU the run ends in an "
        "out-of-memory error that looks like a batch-size problem."
    )
    example = (
        "class Trainer:\n"
        "    def step(self, x):\n"
        "        with tf.GradientTape(persistent=True) as self.tape:\n"
        "            loss = self.model(x)\n"
        "        return self.tape.gradient(loss, self.model.trainable_variables)\n"
    )
    use_instead = (
        "class Trainer:\n"
        "    def step(self, x):\n"
        "        with tf.GradientTape(persistent=True) as tape:\n"
        "            loss = self.model(x)\n"
        "        grads = tape.gradient(loss, self.model.trainable_variables)\n"
        "        del tape\n"
        "        return grads\n"
    )
    VALID = [
        _IMPORT + "def step(model, x):\n    with tf.GradientTape(persistent=True) as tape:\n        y = model(x)\n"
        "    g1 = tape.gradient(y, model.trainable_variables)\n    g2 = tape.gradient(y, x)\n    return g1, g2\n",
        _IMPORT + "x = tf.Variable(1.0)\nwith tf.GradientTape(persistent=True) as tape:\n    y = x * x\n"
        "dy = tape.gradient(y, x)\ndel tape\n",
        _IMPORT + "class Trainer:\n    @tf.function\n    def step(self, x):\n"
        "        with tf.GradientTape(persistent=True) as self.tape:\n            y = self.model(x)\n"
        "        return self.tape.gradient(y, self.model.trainable_variables)\n",
        _IMPORT + "class Trainer:\n    def step(self, x):\n        self.tape = tf.GradientTape(persistent=True)\n"
        "        with self.tape:\n            y = self.model(x)\n        g = self.tape.gradient(y, self.model.trainable_variables)\n"
        "        self.tape = None\n        return g\n",
    ]
    INVALID = [
        _IMPORT + "x = tf.Variable(1.0)\nwith tf.GradientTape(persistent=True) as tape:  # expect: TFL305\n"
        "    y = x * x\n    z = y * y\ndy = tape.gradient(y, x)\ndz = tape.gradient(z, x)\n",
        _IMPORT + "class Trainer:\n    def step(self, x):\n"
        "        with tf.GradientTape(persistent=True) as self.tape:  # expect: TFL305\n"
        "            y = self.model(x)\n        return self.tape.gradient(y, self.model.trainable_variables)\n",
        _IMPORT + "history = []\n\ndef step(model, x):\n"
        "    with tf.GradientTape(persistent=True) as tape:  # expect: TFL305\n        y = model(x)\n"
        "    history.append(tape)\n    return tape.gradient(y, model.trainable_variables)\n",
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
        "shape). Before that, `trainable_variables` is an empty list. Gradients and updates "
        "computed for that list cover nothing: the optimizer is built for no variables and "
        "`apply_gradients` applies nothing, so the model never learns, with no error."
    )
    example = (
        "model = MyModel()\n"
        "params = model.trainable_variables  # [] — nothing built yet\n"
        "for x, y in ds:\n"
        "    with tf.GradientTape() as tape:\n"
        "        loss = loss_fn(y, model(x))\n"
        "    opt.apply_gradients(zip(tape.gradient(loss, params), params))\n"
    )
    use_instead = (
        "model = MyModel()\n"
        "model.build((None, 784))\n"
        "params = model.trainable_variables\n"
    )
    VALID = [
        _IMPORT + "from tensorflow import keras\n\nmodel = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        "opt = keras.optimizers.SGD()\nparams = model.trainable_variables\nopt.build(params)\n",
        _IMPORT + "from tensorflow import keras\n\nmodel = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])\n"
        "opt = keras.optimizers.SGD()\nparams = model.trainable_variables\nopt.build(params)\n",
        _IMPORT + "from tensorflow import keras\n\nclass Net(keras.Model):\n    def __init__(self):\n"
        "        super().__init__()\n        self.d = keras.layers.Dense(1)\n    def call(self, x):\n        return self.d(x)\n\n"
        "def train(ds):\n    model = Net()\n    opt = keras.optimizers.Adam()\n    for x, y in ds:\n"
        "        with tf.GradientTape() as tape:\n            loss = tf.reduce_mean((model(x) - y) ** 2)\n"
        "        grads = tape.gradient(loss, model.trainable_variables)\n"
        "        opt.apply_gradients(zip(grads, model.trainable_variables))\n",
        _IMPORT + "from tensorflow import keras\n\nlayer = keras.layers.Dense(2)\nlayer.build((None, 3))\n"
        "opt = keras.optimizers.SGD()\nopt.build(layer.trainable_variables)\n",
    ]
    INVALID = [
        _IMPORT + "from tensorflow import keras\n\nclass Net(keras.Model):\n    def __init__(self):\n"
        "        super().__init__()\n        self.d = keras.layers.Dense(1)\n    def call(self, x):\n        return self.d(x)\n\n"
        "def train(ds):\n    model = Net()\n    opt = keras.optimizers.Adam()\n"
        "    params = model.trainable_variables  # expect: TFL306\n    for x, y in ds:\n"
        "        with tf.GradientTape() as tape:\n            loss = tf.reduce_mean((model(x) - y) ** 2)\n"
        "        grads = tape.gradient(loss, params)\n        opt.apply_gradients(zip(grads, params))\n",
        _IMPORT + "from tensorflow import keras\n\nmodel = keras.Sequential([keras.layers.Dense(8), keras.layers.Dense(1)])\n"
        "opt = keras.optimizers.SGD()\nopt.build(model.trainable_variables)  # expect: TFL306\n",
        "import keras\nfrom keras import layers\n\nhead = layers.Dense(10)\noptimizer = keras.optimizers.Adam()\n"
        "optimizer.build(head.trainable_weights)  # expect: TFL306\n",
    ]

    def check(self, ctx: RuleContext) -> None:
        for read, name, ctor, use in ctx.analysis.tapes.premature_reads:
            use_name = use.func.attr if isinstance(use, ast.Call) and isinstance(use.func, ast.Attribute) else "the update"
            ctx.report(
                read,
                f"`{name}.{read.attr}` is read before `{name}` (created on line {ctor.lineno}) has "
                f"created its variables: it is an empty list, so `{use_name}` on line {use.lineno} "
                f"covers no variable. Call `{name}` once (or `{name}.build(input_shape)`) first, or "
                "read the variables after the forward pass",
            )


class AppliedToOtherVariables(Rule):
    code = "TFL307"
    name = "gradients-applied-to-other-variables"
    severity = Severity.ERROR
    summary = "`apply_gradients(zip(grads, A))` where `grads` were computed for other variables"
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
        "grads = tape.gradient(d_loss, disc.trainable_variables)\n"
        "opt.apply_gradients(zip(grads, gen.trainable_variables))\n"
    )
    use_instead = (
        "grads = tape.gradient(d_loss, disc.trainable_variables)\n"
        "opt.apply_gradients(zip(grads, disc.trainable_variables))\n"
    )
    VALID = [
        _IMPORT + "def step(model, opt, x):\n    with tf.GradientTape() as tape:\n        loss = tf.reduce_sum(model(x))\n"
        "    grads = tape.gradient(loss, model.trainable_weights)\n"
        "    opt.apply_gradients(zip(grads, model.trainable_variables))\n",
        _IMPORT + "def step(model, opt, x):\n    params = model.trainable_variables\n    with tf.GradientTape() as tape:\n"
        "        loss = tf.reduce_sum(model(x))\n    grads = tape.gradient(loss, params)\n"
        "    grads, _ = tf.clip_by_global_norm(grads, 1.0)\n    opt.apply_gradients(zip(grads, model.trainable_variables))\n",
        _IMPORT + "def step(model, opt, x, extra):\n    with tf.GradientTape() as tape:\n        loss = tf.reduce_sum(model(x))\n"
        "    grads = tape.gradient(loss, model.trainable_variables)\n    opt.apply_gradients(zip(grads, extra))\n",
        # gradients not from a tape: nothing to compare
        _IMPORT + "def step(opt, grads, w):\n    opt.apply_gradients(zip(grads, [w]))\n",
    ]
    INVALID = [
        _IMPORT + "def gan_step(gen, disc, opt, x):\n    with tf.GradientTape() as tape:\n        d_loss = tf.reduce_sum(disc(gen(x)))\n"
        "    grads = tape.gradient(d_loss, disc.trainable_variables)\n"
        "    opt.apply_gradients(zip(grads, gen.trainable_variables))  # expect: TFL307\n",
        "import tensorflow as tensorflow_lib\n\ndef step(actor, critic, opt, s):\n"
        "    with tensorflow_lib.GradientTape() as tape:\n        loss = -tensorflow_lib.reduce_mean(critic(s, actor(s)))\n"
        "    actor_vars = actor.trainable_variables\n    critic_vars = critic.trainable_variables\n"
        "    grads = tape.gradient(loss, actor_vars)\n"
        "    opt.apply_gradients(zip(grads, critic_vars))  # expect: TFL307\n",
        _IMPORT + "def step(model, opt, x):\n    with tf.GradientTape() as tape:\n        loss = tf.reduce_sum(model(x))\n"
        "    grads = tape.gradient(loss, model.trainable_variables)\n"
        "    grads = [tf.clip_by_norm(g, 1.0) for g in grads]\n"
        "    opt.apply_gradients(zip(grads, model.encoder.trainable_variables))  # expect: TFL307\n",
        _IMPORT + "w = tf.Variable(1.0)\nb = tf.Variable(0.0)\nopt = tf.keras.optimizers.SGD()\n"
        "with tf.GradientTape() as tape:\n    loss = (w * 3.0 + b - 1.0) ** 2\ngrads = tape.gradient(loss, [w, b])\n"
        "opt.apply_gradients(zip(grads, [b, w]))  # expect: TFL307\n",
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
            ctx.report(
                node,
                f"gradients were computed for `{_text(computed, 40)}` (line {gcall.lineno}) but are "
                f"applied to `{_text(applied, 40)}`: `zip` pairs each gradient with another "
                "variable. Pass the same variable list to `gradient` and `apply_gradients`",
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
