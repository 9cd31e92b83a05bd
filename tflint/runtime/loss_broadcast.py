"""``loss-broadcast``: a loss computed from an elementwise op whose operands broadcast to a
larger shape than either — ``y_true`` of shape ``[B]`` against ``y_pred`` of shape ``[B, 1]``
gives ``[B, B]``, and the mean of that trains every prediction towards the mean label.

Checked once per trace of a gradient call (inside ``tf.function``: the graph that produced the
target) and on the first eager tape (an op callback records the ops run inside that one tape;
it is removed at its ``gradient`` call). Only the *tail* of the loss is searched: the ops
between the target and the model's outputs (reductions, elementwise arithmetic, casts), so a
model that broadcasts on purpose in its layers is not reported. The pattern is implicit rank
promotion: the lower-rank operand is expanded along a new leading axis while the other operand
is expanded along a size-1 axis of its own (``[B]`` vs ``[B, 1]``); explicit same-rank
broadcasting (``a[:, None] - b[None, :]``) is taken as intended.
"""

from __future__ import annotations

from typing import Any

from tflint.runtime.hookbase import Hook, is_library_file, user_frame

KIND = "loss-broadcast"
ELEMENTWISE = {"Sub", "AddV2", "Add", "Mul", "RealDiv", "Div", "SquaredDifference", "Maximum", "Minimum", "Pow",
               "DivNoNan", "MulNoNan", "Xlogy", "Equal", "NotEqual", "Less", "Greater", "LessEqual", "GreaterEqual"}
TAIL = ELEMENTWISE | {"Mean", "Sum", "Square", "Abs", "Cast", "Identity", "Neg", "Sqrt", "Log", "Log1p", "Exp",
                      "Maximum", "Minimum", "Relu", "Sigmoid", "Softplus", "Select", "SelectV2", "Reshape",
                      "Squeeze", "Sign", "Reciprocal", "Tanh"}
MAX_TAIL_OPS = 200


def _dims(shape: Any) -> list[int | None] | None:
    try:
        d = shape.as_list() if hasattr(shape, "as_list") else list(shape)
        return [None if x is None else int(x) for x in d]
    except Exception:  # noqa: BLE001 - unknown rank
        return None


def broadcast_bug(a: list[int | None], b: list[int | None]) -> bool:
    """True when ``a`` (lower rank) and ``b`` broadcast to a shape larger than both by implicit
    rank promotion: ``[B]`` vs ``[B, 1]``."""
    if len(a) > len(b):
        a, b = b, a
    if not a or len(a) == len(b):
        return False
    lead = b[-len(a) - 1]
    if not (lead is None or lead > 1):
        return False  # ``a`` gains a leading axis of size 1: no growth
    for da, db in zip(reversed(a), reversed(b)):
        if db == 1 and (da is None or da > 1):
            return True
    return False


def _out_shape(a: list[int | None], b: list[int | None]) -> list[int | None]:
    n = max(len(a), len(b))
    a2 = [1] * (n - len(a)) + list(a)
    b2 = [1] * (n - len(b)) + list(b)
    out: list[int | None] = []
    for x, y in zip(a2, b2):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            out.append(x if x is not None else y)
    return out


def _graph_site(op: Any) -> tuple[str, int] | None:
    user = None
    try:
        for fr in op.traceback:
            if not is_library_file(fr.filename):
                user = (fr.filename, int(fr.lineno))
    except Exception:  # noqa: BLE001
        return None
    return user


class LossBroadcastHook(Hook):
    kind = KIND

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.findings: dict[Any, dict[str, Any]] = {}
        self._eager_done = False
        self._eager_ops: dict[int, tuple[str, list[Any], list[Any], Any]] | None = None
        self._callback: Any = None

    def _install(self) -> None:
        pass

    def _uninstall(self) -> None:
        self._remove_callback()

    def _record(self, op_type: str, a: list[Any], b: list[Any], site: Any, eager: bool) -> None:
        key = (op_type, tuple(site) if site else None)
        if key in self.findings or len(self.findings) >= 32:
            return
        self.findings[key] = {"op": op_type, "shapes": [a, b], "result_shape": _out_shape(a, b),
                              "site": list(site) if site else None, "eager": eager}

    # graph ------------------------------------------------------------------------------
    def check_target(self, tape: Any, target: Any, eager: bool) -> None:
        if eager:
            self._check_eager(target)
            return
        from tflint.runtime.health import _flat

        stack = [t.op for t in _flat(target) if hasattr(t, "op")]
        seen: set[int] = set()
        while stack and len(seen) < MAX_TAIL_OPS:
            op = stack.pop()
            if id(op) in seen:
                continue
            seen.add(id(op))
            if op.type not in TAIL:
                continue
            if op.type in ELEMENTWISE and len(op.inputs) == 2:
                a, b = _dims(op.inputs[0].shape), _dims(op.inputs[1].shape)
                if a is not None and b is not None and broadcast_bug(a, b):
                    self._record(op.type, a, b, _graph_site(op), False)
            stack.extend(t.op for t in op.inputs)

    # eager ------------------------------------------------------------------------------
    def on_eager_tape_enter(self, tape: Any) -> None:
        if self._eager_done:
            return
        if self._callback is not None:
            # the previous tape never asked for a gradient (e.g. evaluation): stop watching ops
            # rather than pay for the callback on every later eager op
            self._remove_callback()
            self._eager_ops = None
            self._eager_done = True
            return
        from tensorflow.python.framework import op_callbacks

        ops_seen: dict[int, tuple[str, list[Any], list[Any], Any]] = {}
        self._eager_ops = ops_seen

        def callback(op_type: Any, inputs: Any, attrs: Any, outputs: Any, op_name: Any = None, graph: Any = None) -> Any:
            if graph is None and len(ops_seen) < 5000:
                try:
                    ins = list(inputs or ())
                    outs = list(outputs or ())
                    t = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
                    site = user_frame() if t in ELEMENTWISE and len(ins) == 2 else None
                    for o in outs:
                        ops_seen[id(o)] = (t, ins, outs, site)
                except Exception:  # noqa: BLE001
                    pass
            return None

        op_callbacks.add_op_callback(callback)
        self._callback = callback

    def _remove_callback(self) -> None:
        cb = self._callback
        if cb is None:
            return
        self._callback = None
        try:
            from tensorflow.python.framework import op_callbacks

            op_callbacks.remove_op_callback(cb)
        except Exception:  # noqa: BLE001
            pass

    def _check_eager(self, target: Any) -> None:
        ops_seen = self._eager_ops
        if self._eager_done or ops_seen is None:
            return
        self._remove_callback()
        self._eager_done = True
        self._eager_ops = None
        from tflint.runtime.health import _flat

        stack = [id(t) for t in _flat(target)]
        seen: set[int] = set()
        while stack and len(seen) < MAX_TAIL_OPS:
            tid = stack.pop()
            entry = ops_seen.get(tid)
            if entry is None or tid in seen:
                continue
            seen.add(tid)
            op_type, ins, _outs, site = entry
            if op_type not in TAIL:
                continue
            if op_type in ELEMENTWISE and len(ins) == 2:
                a, b = _dims(ins[0].shape), _dims(ins[1].shape)
                if a is not None and b is not None and broadcast_bug(a, b):
                    self._record(op_type, a, b, site, True)
            stack.extend(id(t) for t in ins)


def signals(session: Any) -> list[Any]:
    from tflint.profiler.report import Location, Signal

    hook = session.hooks.get(KIND)
    if hook is None:
        return []
    out = []
    for f in hook.findings.values():
        a, b = f["shapes"]
        fmt = lambda s: "[" + ", ".join("B" if d is None else str(d) for d in s) + "]"  # noqa: E731
        msg = (f"The loss is computed from `{f['op']}` of shapes {fmt(a)} and {fmt(b)}, which broadcast to "
               f"{fmt(f['result_shape'])}: every prediction is compared with every label, so the model trains towards "
               "the mean label. Fix: give both the same shape, e.g. tf.squeeze(y_pred, -1) or tf.reshape(y_true, [-1, 1]), "
               "or use a Keras loss (keras.losses.MeanSquaredError aligns the ranks).")
        site = f.get("site")
        out.append(Signal(kind=KIND, severity="error", message=msg,
                          location=Location(str(site[0]), int(site[1])) if site else None,
                          details={"op": f["op"], "shapes": [a, b], "result_shape": f["result_shape"],
                                   "eager": f["eager"], "rule": "TFL606",
                                   "fix": "make y_true and y_pred the same shape before the elementwise op"}))
    return out
