"""``nan-inf``: the first step at which the loss, a gradient or a variable became NaN or Inf,
which tensor it was, and the first op that produced a non-finite value from finite inputs.

Cheap part (every step, in :mod:`tflint.runtime.health`): one finiteness test of
``loss + Σ‖g‖²`` inside the graph. Expensive part: the same trace holds an un-lowered ``If``
whose true branch — taken only on the first step whose cheap test failed — tests every
floating-point tensor that the loss and the gradients depend on and stores the result as one
boolean mask (so the localisation uses that step's own values, before the optimizer spreads
the NaN into the variables). The mask is decoded once, when the report is built: entries are in
op-creation order, and the origin is the first op with a non-finite output whose floating-point
inputs were all finite; its user source line comes from the op's creation traceback (which
TensorFlow maps back through autograph). In eager mode the loss is checked every step and the
gradients every few steps, so the step and the tensor are known, not the op.
"""

from __future__ import annotations

from typing import Any

from tflint.runtime.health import Cell, Probe, var_name
from tflint.runtime.hookbase import Hook, is_library_file

KIND = "nan-inf"

# op type -> (cause, fix)
CAUSES: dict[str, tuple[str, str]] = {}
for _t in ("Log", "Log1p", "Xlogy", "Xlog1py", "Digamma", "Lgamma"):
    CAUSES[_t] = ("log of zero or of a negative number",
                  "add a small epsilon (tf.math.log(x + 1e-7)), clip the argument, or use tf.nn.log_softmax / "
                  "a from_logits=True loss instead of log(softmax)")
for _t in ("RealDiv", "Div", "Reciprocal", "Inv", "FloorDiv", "TruncateDiv", "Xdivy"):
    CAUSES[_t] = ("division by zero", "add an epsilon to the denominator or use tf.math.divide_no_nan")
for _t in ("Exp", "Expm1", "Pow", "Softplus", "Sinh", "Cosh"):
    CAUSES[_t] = ("exp overflow (the argument grew too large)",
                  "compute in log space (tf.reduce_logsumexp, tf.nn.log_softmax, a from_logits=True loss), "
                  "clip the exponent, or lower the learning rate")
for _t in ("Sqrt", "Rsqrt", "SqrtGrad", "RsqrtGrad"):
    CAUSES[_t] = ("square root of zero or of a negative number (its gradient at 0 is infinite)",
                  "use tf.sqrt(x + 1e-12) or tf.sqrt(tf.maximum(x, 1e-12))")
CAUSES["Placeholder"] = ("the input data already contains NaN/Inf", "clean the data (tf.debugging.check_numerics on the input pipeline)")
CAUSES["ReadVariableOp"] = ("a variable was already non-finite when the step read it",
                            "find the code that assigned it, or lower the learning rate")
OVERFLOW = ("overflow: finite inputs produced values beyond the dtype's range (typically after the weights "
            "grew; an exploding update, e.g. a learning rate that is too high)",
            "lower the learning rate, clip gradients (clipnorm=1.0 on the optimizer), or normalise the inputs")
FLOAT16 = ("float16 overflow (max 65504) without loss scaling",
           "wrap the optimizer in keras.mixed_precision.LossScaleOptimizer (model.fit does it with the mixed_float16 "
           "policy) or keep that computation in float32")


def _site(op: Any) -> tuple[str, int] | None:
    try:
        tb = op.traceback
    except Exception:  # noqa: BLE001
        return None
    user = None
    for fr in tb:
        fn = getattr(fr, "filename", None)
        if fn and not is_library_file(fn):
            user = (fn, int(fr.lineno))
    return user


def _forward_op(graph: Any, op: Any) -> Any:
    """The forward op a ``gradient_tape/...`` op computes the gradient of, when its name says."""
    name = op.name
    if not name.startswith("gradient_tape/"):
        return None
    parts = name[len("gradient_tape/"):].split("/")
    for k in range(len(parts) - 1, 0, -1):
        cand = "/".join(parts[:k])
        try:
            return graph.get_operation_by_name(cand)
        except (KeyError, ValueError):
            continue
    for t in op.inputs:  # e.g. SqrtGrad(y, dy): y is the forward Sqrt's output
        if not t.op.name.startswith("gradient_tape/") and t.op.type not in ("Const", "Placeholder"):
            return t.op
    return None


class NanInfHook(Hook):
    kind = KIND

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.eager_event: dict[str, Any] | None = None

    def _install(self) -> None:
        pass

    # eager ------------------------------------------------------------------------------
    def on_nonfinite(self, event: dict[str, Any]) -> None:
        if self.eager_event is None:
            self.eager_event = event

    # graph ------------------------------------------------------------------------------
    def build_localiser(self, probe: Probe, targets: list[Any], pairs: list[Any], loss: Any, sq: Any, step: Any) -> Any:
        import tensorflow as tf
        from tensorflow.core.framework import attr_value_pb2
        from tensorflow.python.framework import ops

        graph = ops.get_default_graph()
        grads = [getattr(g, "values", g) for _, g in pairs]
        roots = [t for t in list(targets) + grads if t is not None]
        seen: set[int] = set()
        order = []
        stack = [t.op for t in roots]
        while stack:
            op = stack.pop()
            if id(op) in seen or op.graph is not graph:
                continue
            seen.add(id(op))
            order.append(op)
            stack.extend(i.op for i in op.inputs)
        order.sort(key=lambda o: o._id)
        # which captured handle is which variable
        handle_names: dict[str, str] = {}
        try:
            by_handle = {}
            for s, _ in pairs:
                h = _var_handle(s)
                if h is not None:
                    by_handle[id(h)] = var_name(s)
            for ext, internal in graph.captures:
                n = by_handle.get(id(ext))
                if n is not None:
                    handle_names[internal.op.name] = n
        except Exception:  # noqa: BLE001
            pass
        role: dict[int, str] = {}
        for t in targets:
            role[id(t)] = "the loss"
        for (s, _), g in zip(pairs, grads):
            role.setdefault(id(g), f"the gradient of {var_name(s)}")
        tensors = []
        meta = []
        for op in order:
            for t in op.outputs:
                if len(tensors) >= 4000:
                    break
                if not t.dtype.is_floating:
                    continue
                r = role.get(id(t))
                if r is None and op.type == "ReadVariableOp" and op.inputs:
                    vn = handle_names.get(op.inputs[0].op.name)
                    if vn:
                        r = f"variable {vn}"
                tensors.append(t)
                meta.append({"op": op, "tensor": t, "role": r, "index": len(meta)})
        if not tensors:
            return tf.constant(-1.0, tf.float64)
        probe.tensors = meta
        with ops.init_scope():
            probe.mask = Cell(tf, tf.ones([len(tensors)], tf.bool))
            first_cell = Cell(tf, tf.constant(-1.0, tf.float64))
        probe.first_cell = first_cell  # type: ignore[attr-defined]
        cheap_bad = tf.logical_and(tf.logical_not(tf.math.is_finite(loss + tf.reduce_sum(sq))), first_cell.read() < 0)

        def localise() -> Any:
            m = tf.stack([tf.reduce_all(tf.math.is_finite(t)) for t in tensors])
            any_bad = tf.logical_not(tf.reduce_all(m))
            a = probe.mask.assign(m)
            b = first_cell.assign(tf.where(any_bad, tf.cast(step, tf.float64), tf.constant(-1.0, tf.float64)))
            with tf.control_dependencies([a, b]):
                return tf.constant(True)

        def skip() -> Any:
            return tf.constant(False)

        flag = tf.cond(cheap_bad, localise, skip)
        try:
            flag.op._set_attr("_lower_using_switch_merge", attr_value_pb2.AttrValue(b=False))
        except Exception:  # noqa: BLE001 - lowered: still correct, a little slower
            pass
        with tf.control_dependencies([flag]):
            return first_cell.read()

    def localise(self, probe: Probe) -> dict[str, Any] | None:
        """Decode the mask stored on the failing step: tensor, origin op, its line, the cause."""
        if probe.mask is None or not probe.tensors:
            return None
        mask = probe.mask.numpy()
        bad = [m for m, ok in zip(probe.tensors, mask) if not ok]
        if not bad:
            return None
        bad_ids = {id(m["tensor"]) for m in bad}
        tracked = {id(m["tensor"]) for m in probe.tensors}
        origin = None
        for m in bad:
            op = m["op"]
            ins = [t for t in op.inputs if t.dtype.is_floating and id(t) in tracked]
            if not any(id(t) in bad_ids for t in ins):
                origin = m
                break
        roles = [m["role"] for m in bad if m["role"]]
        var_roles = [r for r in roles if r.startswith("variable ")]
        tensor = var_roles[0] if var_roles else ("the loss" if "the loss" in roles else (roles[0] if roles else "an intermediate tensor"))
        out: dict[str, Any] = {"tensor": tensor, "nonfinite_tensors": len(bad),
                               "gradients": [r[len("the gradient of "):] for r in roles if r.startswith("the gradient of ")][:10]}
        if origin is not None:
            op = origin["op"]
            graph = op.graph
            fwd = _forward_op(graph, op)
            site = _site(fwd if fwd is not None else op) or _site(op)
            kind_key = op.type if op.type in CAUSES else (fwd.type if fwd is not None and fwd.type in CAUSES else None)
            if op.type == "Placeholder" and origin.get("role") is None:
                kind_key = "Placeholder"
            cause, fix = CAUSES.get(kind_key, OVERFLOW) if kind_key else OVERFLOW
            dtype = origin["tensor"].dtype.name
            if dtype in ("float16", "bfloat16") and kind_key not in ("Log", "Sqrt", "RealDiv", "Div"):
                cause, fix = FLOAT16
            out.update({"op": op.type, "op_name": op.name, "backward": fwd is not None,
                        "forward_op": fwd.type if fwd is not None else None, "dtype": dtype,
                        "site": list(site) if site else None, "cause": cause, "fix": fix,
                        "inputs": [t.op.type for t in op.inputs][:4]})
        return out


def _var_handle(v: Any) -> Any:
    try:
        inner = v.__dict__.get("_value") if hasattr(v, "__dict__") else None
        if inner is not None and hasattr(inner, "handle"):
            v = inner
        return v.handle
    except Exception:  # noqa: BLE001
        return None


def signals(session: Any) -> list[Any]:
    """The ``nan-inf`` finding: the earliest non-finite event of the run."""
    from tflint.profiler.report import Location, Signal

    mon = session.health
    hook = session.hooks.get(KIND)
    if mon is None or hook is None:
        return []
    events = []
    for p in mon.probes:
        if p.first_bad is not None and p.localised:
            events.append((p.first_bad, p))
    if events:
        step, p = min(events, key=lambda e: e[0])
        d = dict(p.localised or {})
        site = d.get("site") or (list(p.site) if p.site else None)
        where = ""
        if d.get("op"):
            op_desc = f"`{d['op']}`" + (f" (the gradient of `{d['forward_op']}`)" if d.get("backward") and d.get("forward_op") else "")
            where = f"; the first op that produced a non-finite value from finite inputs is {op_desc}"
            if d.get("site"):
                where += f" at line {d['site'][1]}"
        cause = d.get("cause")
        fix = d.get("fix") or OVERFLOW[1]
        msg = (f"{d.get('tensor', 'a tensor')[0].upper() + d.get('tensor', 'a tensor')[1:]} became NaN/Inf at step {step} "
               f"(inside a tf.function){where}" + (f". Likely cause: {cause}" if cause else "")
               + ". From there on the updates (or the loss) are not finite and the model learns nothing. Fix: " + fix + ".")
        details = {"step": step, "tensor": d.get("tensor"), "op": d.get("op"), "op_name": d.get("op_name"),
                   "backward": d.get("backward"), "forward_op": d.get("forward_op"), "dtype": d.get("dtype"),
                   "cause": cause, "fix": fix, "gradients": d.get("gradients", []),
                   "nonfinite_tensors": d.get("nonfinite_tensors"), "localised": bool(d.get("op")),
                   "gradient_call": list(p.site) if p.site else None}
        loc = Location(str(site[0]), int(site[1])) if site else None
        return [Signal(kind=KIND, severity="error", message=msg, location=loc, details=details)]
    ev = hook.eager_event
    if ev is None:
        return []
    site = ev.get("site")
    tensor = ev["tensor"]
    msg = (f"{tensor[0].upper() + tensor[1:]} became NaN/Inf at step {ev['step']} (eager; gradients are checked every "
           "few steps, so the op is not localised). Every later update is non-finite too. Fix: run the step under "
           "tf.function for tflint to name the op, or tf.debugging.enable_check_numerics() for one run; guard logs and "
           "divisions with an epsilon, or lower the learning rate.")
    details = {"step": ev["step"], "tensor": tensor, "op": None, "cause": None, "localised": False,
               "fix": "localise with tf.function or tf.debugging.enable_check_numerics()"}
    loc = Location(str(site[0]), int(site[1])) if site else None
    return [Signal(kind=KIND, severity="error", message=msg, location=loc, details=details)]
