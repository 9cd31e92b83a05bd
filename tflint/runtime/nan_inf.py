"""``nan-inf``: the first step at which the loss, a gradient or a variable became NaN or Inf,
which tensor it was, and the first op that produced a non-finite value from finite inputs.

Inside ``tf.function`` and ``fit`` (the probe of :mod:`tflint.runtime.health`, every step, no
control flow): the finiteness of the loss, of each gradient (through its sum of squares) and of
a few *tracked* tensors — the outputs and inputs of the ops that can turn finite values into
NaN/Inf (log, division, exp, pow, sqrt and their gradients) and the step's floating-point
inputs, chosen once per trace; constants, divisions by a nonzero constant and powers of 0 or 1
are left out, they cannot turn finite values into NaN/Inf — is folded into a vector holding, for
each, the first step it was not finite (each tracked tensor through its sum, one reduction). That
vector is read every few steps with the rest of the probe's state. Only the loss and the gradients
decide that a step went non-finite: an intermediate that is non-finite without reaching them (the
masked branch of a ``tf.where``) is not a finding. Once a non-finite value has been seen, the
expensive part runs once, when the report is built: the origin is the earliest tracked op (in
creation order) whose output went non-finite at that step while its tracked inputs were finite
(for a large model whose gradients are checked every few steps, at the first step a tracked
tensor went non-finite since they were last seen finite). Its user source line comes from the
op's creation traceback, which TensorFlow maps back through autograph (and tflint through the
converted function's source map in a ``MirroredStrategy`` replica thread, where TensorFlow does
not); the op type gives the likely cause. Because each tensor keeps its *first* bad step, the
later spread of the NaN into the variables does not hide the origin. In eager mode the loss is
checked every step and the gradients every few steps, so the step and the tensor are known, not
the op: the forward ops of an eager step are gone by the time its loss is seen, and by the next
step the NaN is in the weights.
"""

from __future__ import annotations

from typing import Any

from tflint.runtime.health import Probe, var_name
from tflint.runtime.hookbase import AUTOGRAPH_MARKER, Hook, is_library_file, map_autograph

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
RISKY = {"Log", "Log1p", "Xlogy", "Xlog1py", "Digamma", "Lgamma", "RealDiv", "Div", "Reciprocal", "Inv", "Xdivy",
         "Exp", "Expm1", "Pow", "Softplus", "Sinh", "Cosh", "Sqrt", "Rsqrt", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad",
         "Atanh", "Acos", "Asin", "Tan"}
MAX_TRACKED = 32
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
        if fn and AUTOGRAPH_MARKER in fn:  # a replica thread's traceback: not mapped by TensorFlow
            mapped = map_autograph(fn, fr.lineno)
            if mapped is not None and not is_library_file(mapped[0]):
                user = mapped
        elif fn and not is_library_file(fn):
            user = (fn, int(fr.lineno))
    return user


_FOLDABLE = {"AddV2": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
             "Neg": lambda a: -a, "Identity": lambda a: a, "Cast": lambda a: a}


def _constant(t: Any, depth: int = 4) -> Any:
    """The value of ``t`` when it is known at trace time (a constant, or simple arithmetic of
    constants), else None: a constant is never tracked, it cannot turn non-finite."""
    import numpy as np

    op = t.op
    if op.type == "Const":
        try:
            from tensorflow.python.framework import tensor_util

            return np.asarray(tensor_util.constant_value(t))
        except Exception:  # noqa: BLE001
            return None
    fn = _FOLDABLE.get(op.type)
    if fn is None or depth <= 0 or not op.inputs:
        return None
    vals = [_constant(i, depth - 1) for i in op.inputs]
    if any(v is None for v in vals):
        return None
    try:
        with np.errstate(all="ignore"):
            return np.asarray(fn(*vals))
    except Exception:  # noqa: BLE001
        return None


def _element_count(t: Any, depth: int = 8) -> bool:
    """``t`` is computed from tensor shapes alone: integer arithmetic on ``Shape``, ``Size``,
    ``Rank`` and constants, cast to a float at the end (a mean's gradient divides by
    ``Cast(Prod(Gather(Shape(x), axes)))``)."""
    op = t.op
    if op.type in ("Shape", "ShapeN", "Size", "Rank", "Const"):
        return True
    if depth <= 0:
        return False
    if op.type == "Cast" and op.inputs:
        return _element_count(op.inputs[0], depth - 1)
    return t.dtype.is_integer and all(_element_count(i, depth - 1) for i in op.inputs)


def _harmless(op: Any) -> bool:
    """A risky op type that cannot turn finite inputs into NaN/Inf as used here, other than by
    overflowing like any product: a division by a nonzero constant; the gradient of a mean,
    which divides the upstream gradient, broadcast to the input's shape, by the input's element
    count (a count of 0 leaves nothing to divide: the broadcast is empty); a power by a
    constant non-negative integer (``x ** 2`` and its gradient's ``x ** 1``; only fractional or
    negative exponents make NaN/Inf from finite values, e.g. ``0 ** -1``)."""
    import numpy as np

    if op.type in ("RealDiv", "Div") and len(op.inputs) == 2:
        num, den = op.inputs
        if (op.name.startswith("gradient_tape/") and num.op.type == "BroadcastTo"
                and _element_count(den) and den.op.type != "Const"):
            return True
        d = _constant(den)
        return d is not None and bool(np.all(np.abs(d) >= 1e-30)) and bool(np.all(np.isfinite(d)))
    if op.type == "Pow" and len(op.inputs) == 2:
        e = _constant(op.inputs[1])
        return e is not None and bool(np.all((e >= 0) & (e == np.floor(e))))
    return False


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
    def tracked_tensors(self, probe: Probe, targets: list[Any], pairs: list[Any], order: list[Any]) -> list[Any]:
        """The tensors whose finiteness the probe tracks besides the loss and the gradients: the
        outputs of the ops that can turn finite values into NaN/Inf (``RISKY``, forward and
        backward), their floating-point inputs, and the floating-point inputs of the step (data),
        among ``order``, the ops the loss and the gradients depend on (in creation order); at most
        ``MAX_TRACKED`` of them. Entries of ``probe.tensors``: index 0 the loss, 1..V the
        gradients, then these."""
        grads = [getattr(g, "values", g) for _, g in pairs]
        meta: list[dict[str, Any]] = [{"op": targets[0].op if targets else None, "tensor": targets[0] if targets else None,
                                       "role": "the loss"}]
        meta += [{"op": g.op, "tensor": g, "role": f"the gradient of {var_name(s)}"} for (s, _), g in zip(pairs, grads)]
        root_ids = {id(m["tensor"]) for m in meta if m["tensor"] is not None}
        chosen: list[Any] = []
        chosen_ids: set[int] = set()

        def add(t: Any, role: str | None) -> None:
            if (len(chosen) >= MAX_TRACKED or id(t) in chosen_ids or id(t) in root_ids or not t.dtype.is_floating
                    or _constant(t) is not None):
                return
            chosen.append(t)
            chosen_ids.add(id(t))
            meta.append({"op": t.op, "tensor": t, "role": role})

        for op in order:
            if op.type == "Placeholder" and op.outputs and op.outputs[0].dtype.is_floating:
                add(op.outputs[0], "the input data")
        for op in order:
            if op.type in RISKY and not _harmless(op):
                for t in op.inputs:
                    add(t, None)
                for t in op.outputs:
                    add(t, None)
        probe.tensors = meta
        return chosen

    def localise(self, probe: Probe) -> dict[str, Any] | None:
        """From the first non-finite step of each tracked tensor: the tensor, the origin op (the
        earliest op, in step then creation order, whose output went non-finite while its tracked
        inputs were still finite), its user line and the likely cause."""
        firsts = probe.first_steps
        if not firsts or not probe.tensors:
            return None
        meta = probe.tensors[:len(firsts)]
        bad = [(f, i, m) for i, (f, m) in enumerate(zip(firsts, meta)) if f >= 0]
        if not bad:
            return None
        # the step the loss or a gradient first went non-finite; the origin is looked for at the
        # first step a tracked tensor went non-finite since they were last seen finite (the step
        # before, or the last sampled step when the gradients of a large model are sampled): a
        # tensor non-finite earlier without reaching them (a masked tf.where branch) is not it
        last = probe.first_bad if probe.first_bad is not None else min(f for f, _, _ in bad)
        lo = last - (probe.sample_every - 1)
        step0 = min((f for f, _, _ in bad if lo <= f <= last), default=last)
        roles = [m["role"] for f, _, m in bad if f == last and m["role"]]
        tensor = ("the loss" if "the loss" in roles else
                  next((r for r in roles if r.startswith("the gradient of ")), roles[0] if roles else "an intermediate tensor"))
        at_first = [m for f, _, m in bad if f == step0]
        first_of = {id(m["tensor"]): f for f, m in zip(firsts, meta) if m["tensor"] is not None}
        origin = None
        for m in sorted(at_first, key=lambda m: m["op"]._id if m["op"] is not None else 1 << 60):
            op = m["op"]
            if op is None or (m["role"] or "").startswith(("the loss", "the gradient of")):
                continue
            ins = [t for t in op.inputs if id(t) in first_of]
            if all(first_of[id(t)] < 0 or first_of[id(t)] > step0 for t in ins):
                origin = m
                break
        out: dict[str, Any] = {"tensor": tensor, "step": last, "origin_step": step0,
                               "gradients": [r[len("the gradient of "):] for r in roles if r.startswith("the gradient of ")][:10]}
        if origin is not None:
            op = origin["op"]
            fwd = _forward_op(op.graph, op)
            site = _site(fwd if fwd is not None else op) or _site(op)
            kind_key = "Placeholder" if origin.get("role") == "the input data" else (
                op.type if op.type in CAUSES else (fwd.type if fwd is not None and fwd.type in CAUSES else None))
            cause, fix = CAUSES.get(kind_key, OVERFLOW) if kind_key else OVERFLOW
            dtype = origin["tensor"].dtype.name
            if dtype in ("float16", "bfloat16") and kind_key not in ("Log", "Sqrt", "RealDiv", "Div", "Placeholder"):
                cause, fix = FLOAT16
            out.update({"op": op.type, "op_name": op.name, "backward": fwd is not None,
                        "forward_op": fwd.type if fwd is not None else None, "dtype": dtype,
                        "site": list(site) if site else None, "cause": cause, "fix": fix})
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
    # under dynamic loss scaling, an Inf gradient is expected now and then (the optimizer skips
    # that step and lowers the scale): only a non-finite loss counts
    scaled = any(name == "LossScaleOptimizer" for name, _ in mon.learning_rates())
    events = []
    for p in mon.probes:
        if p.first_bad is None:
            continue
        d = dict(p.localised or {"tensor": "the loss or a gradient"})
        step = p.first_bad
        if scaled:
            loss_step = p.first_steps[0] if p.first_steps else -1
            if loss_step < 0:
                continue
            if loss_step != step:
                d = {"tensor": "the loss"}
                step = loss_step
        events.append((step, p, d))
    if events:
        step, p, d = min(events, key=lambda e: e[0])
        site = d.get("site") or (list(p.site) if p.site else None)
        where = ""
        if d.get("op"):
            op_desc = f"`{d['op']}`" + (f" (the gradient of `{d['forward_op']}`)" if d.get("backward") and d.get("forward_op") else "")
            where = f"; the first op that produced a non-finite value from finite inputs is {op_desc}"
            if d.get("site"):
                where += f" at line {d['site'][1]}"
            if d.get("origin_step") is not None and d["origin_step"] != step:
                where += f", at step {d['origin_step']}"
        cause = d.get("cause")
        fix = d.get("fix") or OVERFLOW[1]
        msg = (f"{d.get('tensor', 'a tensor')[0].upper() + d.get('tensor', 'a tensor')[1:]} became NaN/Inf at step {step} "
               f"(inside a tf.function){where}" + (f". Likely cause: {cause}" if cause else "")
               + ". From there on the updates (or the loss) are not finite and the model learns nothing. Fix: " + fix + ".")
        details = {"step": step, "origin_step": d.get("origin_step", step), "tensor": d.get("tensor"),
                   "op": d.get("op"), "op_name": d.get("op_name"),
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
