"""Retrace detection: every new trace of every ``tf.function``, with the argument that changed.

Mechanism: a callback in ``transform.CONCRETE_FUNCTION_CALLBACKS``, which TensorFlow calls once
per newly created ConcreteFunction, i.e. only on a cache miss (zero cost on cache hits). The
callback reads the locals of ``tracing_compilation._maybe_define_function`` (the function type
that missed the cache, the cache and its context) and diffs the missed type against the cached
types of the same context. It runs before the new function is added to the cache.

A trace is *expected* when the cache holds nothing for the same context (the first trace, the
variable-creation re-trace, a call from a new outer graph). Every other trace is a retrace.
Traces made while ``tf.saved_model.save`` (or Keras' export) runs are neither: saving traces each
function again for its signatures, once, after training; they are counted apart.
"""

from __future__ import annotations

import re
import sys
import time
import weakref
from typing import Any

from tflint.runtime.hookbase import Hook, is_library_file, user_frame
from tflint.runtime.store import add_example

KIND = "retrace"
PER_REPLICA = " (each replica)"
MAX_DIFF_CANDIDATES = 16
MAX_LIVE_OBJECTS = 4096
_TF_MARK = "tensorflow"


def _shape_str(spec: Any) -> str:
    try:
        dims = spec.shape.as_list()
        return "(" + ", ".join("None" if d is None else str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
    except Exception:  # noqa: BLE001 - unknown rank
        return str(getattr(spec, "shape", "?"))


def _dtype_str(spec: Any) -> str:
    dt = getattr(spec, "dtype", None)
    return getattr(dt, "name", str(dt))


def _short(obj: Any, limit: int = 80) -> str:
    s = repr(obj)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _tname(t: Any) -> str:
    return type(t).__name__


def _components(t: Any) -> list[tuple[str, Any]] | None:
    """Named children of a container trace type, else None."""
    name = _tname(t)
    try:
        if name == "Tuple":
            return [(f"[{i}]", c) for i, c in enumerate(t.components)]
        if name == "List":
            return [(f"[{i}]", c) for i, c in enumerate(t.components_tuple.components)]
        if name == "NamedTuple":
            return [(f".{n}", c) for n, c in zip(t.attribute_names, t.attributes.components)]
        if name == "Dict":
            return [(f"[{k!r}]", c) for k, c in t.mapping.items()]
        if name == "Attrs":
            return [(f".{n}", c) for n, c in zip(t.named_attributes.attribute_names, t.named_attributes.attributes.components)]
    except Exception:  # noqa: BLE001
        return None
    return None


_CONTAINERS = {"Tuple": "tuple", "List": "list", "NamedTuple": "namedtuple", "Dict": "dict", "Attrs": "attrs class"}


def describe_change(path: str, old: Any, new: Any, out: list[str], limit: int = 4) -> None:
    """Append human-readable differences between two trace types to ``out``."""
    if len(out) >= limit or old == new:
        return
    on, nn = _tname(old), _tname(new)
    if on == nn:
        if on in ("TensorSpec", "BoundedTensorSpec"):
            if _dtype_str(old) != _dtype_str(new):
                out.append(f"{path}: dtype {_dtype_str(old)} -> {_dtype_str(new)}")
            if _shape_str(old) != _shape_str(new):
                out.append(f"{path}: TensorSpec(shape={_shape_str(old)}) -> {_shape_str(new)}")
            if _dtype_str(old) == _dtype_str(new) and _shape_str(old) == _shape_str(new):
                out.append(f"{path}: {_short(old)} -> {_short(new)}")
            return
        if on == "Literal":
            ov, nv = getattr(old, "value", None), getattr(new, "value", None)
            if type(ov) is type(nv):
                out.append(f"{path}: Python {type(nv).__name__} {_short(ov, 40)} -> {_short(nv, 40)}")
            else:
                out.append(f"{path}: Python {type(ov).__name__} {_short(ov, 40)} -> Python {type(nv).__name__} {_short(nv, 40)}")
            return
        if on == "Weakref":
            target = None
            try:
                target = new._ref()  # noqa: SLF001
            except Exception:  # noqa: BLE001
                pass
            cls = type(target).__name__ if target is not None else "object"
            out.append(f"{path}: new Python object ({cls}) — custom objects are matched by identity")
            return
        if on == "PerReplicaSpec":  # a tf.distribute strategy's batch: one spec per replica
            specs = [tuple(getattr(t, "_value_specs", ()) or ()) for t in (old, new)]
            if specs[0] and len(specs[0]) == len(specs[1]):
                each: list[list[str]] = []
                for o, n in zip(*specs):
                    each.append([])
                    describe_change(path, o, n, each[-1], limit)
                if all(e == each[0] for e in each):  # every replica changed alike
                    out.extend(line.replace(f"{path}:", f"{path}{PER_REPLICA}:", 1) for line in each[0][:limit - len(out)])
                else:
                    for i, e in enumerate(each):
                        out.extend(line.replace(f"{path}:", f"{path} (replica {i}):", 1) for line in e[:limit - len(out)])
                return
        oc, nc = _components(old), _components(new)
        if oc is not None and nc is not None:
            if [k for k, _ in oc] != [k for k, _ in nc]:
                out.append(f"{path}: structure changed ({len(oc)} -> {len(nc)} elements)")
                return
            for (k, o), (_, n) in zip(oc, nc):
                describe_change(path + k, o, n, out, limit)
            return
        out.append(f"{path}: {_short(old)} -> {_short(new)}")
        return
    # kind of value changed
    if on == "Literal" and nn in ("TensorSpec", "BoundedTensorSpec"):
        v = getattr(old, "value", None)
        out.append(f"{path}: Python {type(v).__name__} {_short(v, 40)} -> TensorSpec(shape={_shape_str(new)}, {_dtype_str(new)})")
        return
    if nn == "Literal" and on in ("TensorSpec", "BoundedTensorSpec"):
        v = getattr(new, "value", None)
        out.append(f"{path}: TensorSpec(shape={_shape_str(old)}, {_dtype_str(old)}) -> Python {type(v).__name__} {_short(v, 40)}")
        return
    if on in _CONTAINERS and nn in _CONTAINERS:
        out.append(f"{path}: container type {_CONTAINERS[on]} -> {_CONTAINERS[nn]} (another container type is another trace)")
        return
    if nn == "Weakref":
        describe_change(path, old, old, out, limit)
        out.append(f"{path}: {_short(old, 40)} -> new Python object — custom objects are matched by identity")
        return
    out.append(f"{path}: {_short(old, 60)} -> {_short(new, 60)}")


def diff_function_types(old: Any, new: Any) -> list[str]:
    out: list[str] = []
    try:
        op, np_ = old.parameters, new.parameters
        for name, p in np_.items():
            if name not in op:
                out.append(f"{name}: new argument")
                continue
            describe_change(name, op[name].type_constraint, p.type_constraint, out)
        for name in op:
            if name not in np_:
                out.append(f"{name}: argument no longer passed")
        if not out:
            oc, nc = dict(old.captures or {}), dict(new.captures or {})
            if oc != nc:
                changed = [k for k in nc if k not in oc or oc[k] != nc[k]]
                out.append(f"captures changed ({len(changed)} captured value(s) differ: a global or closure variable was rebound)")
    except Exception as exc:  # noqa: BLE001
        out.append(f"(could not compare function types: {type(exc).__name__})")
    return out


class RetraceHook(Hook):
    kind = KIND

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._callback = None
        self._call_code = None
        self._gcf_codes: tuple[Any, ...] = ()
        self.retraces = 0
        self.traces = 0
        self._live_objects: dict[Any, weakref.WeakSet[Any]] = {}
        self._in_save_context: Any = None

    def check(self) -> str | None:
        try:
            from tensorflow.python.eager.polymorphic_function import polymorphic_function, tracing_compilation, transform
        except ImportError as exc:
            return f"tf.function internals not importable: {exc}"
        if not isinstance(getattr(transform, "CONCRETE_FUNCTION_CALLBACKS", None), list):
            return "transform.CONCRETE_FUNCTION_CALLBACKS not found in this TensorFlow"
        if not hasattr(tracing_compilation, "_maybe_define_function"):
            return "tracing_compilation._maybe_define_function not found in this TensorFlow"
        varnames = tracing_compilation._maybe_define_function.__code__.co_varnames
        for local in ("tracing_options", "lookup_func_type", "current_func_context"):
            if local not in varnames:
                return f"_maybe_define_function has no local {local!r} in this TensorFlow"
        if not hasattr(polymorphic_function.Function, "__call__"):
            return "polymorphic_function.Function.__call__ not found"
        return None

    def _install(self) -> None:
        from tensorflow.python.eager.polymorphic_function import polymorphic_function, tracing_compilation, transform

        self._mdf_code = tracing_compilation._maybe_define_function.__code__
        fn_cls = polymorphic_function.Function
        self._call_code = getattr(fn_cls.__call__, "__code__", None)
        codes = []
        for n in ("get_concrete_function", "_get_concrete_function_garbage_collected", "_call", "__call__"):
            c = getattr(getattr(fn_cls, n, None), "__code__", None)
            if c is not None:
                codes.append(c)
        self._fn_codes = tuple(codes)
        self._transform = transform
        try:
            from tensorflow.python.saved_model.save_context import in_save_context
        except ImportError:  # pragma: no cover - older TensorFlow: export traces count as traces
            in_save_context = None
        self._in_save_context = in_save_context

        def callback(concrete_function: Any) -> None:
            if not self.active:
                return
            try:
                self._on_trace(concrete_function, sys._getframe(1))
            except Exception as exc:  # noqa: BLE001 - never break tracing
                self.fail(exc, "retrace callback")

        self._callback = callback
        transform.CONCRETE_FUNCTION_CALLBACKS.append(callback)

    def _uninstall(self) -> None:
        lst = self._transform.CONCRETE_FUNCTION_CALLBACKS
        while self._callback in lst:
            lst.remove(self._callback)
        self._callback = None

    # ---------------------------------------------------------------------------------
    def _on_trace(self, cf: Any, frame: Any) -> None:
        if self._in_save_context is not None and self._in_save_context():
            self.store.incr("retrace.export_traces")  # saving a SavedModel: one-off, not the training's
            return
        mdf = None
        fn_obj = None
        f = frame
        while f is not None:
            code = f.f_code
            if mdf is None and code is self._mdf_code:
                mdf = f
            elif code in self._fn_codes:
                fn_obj = f.f_locals.get("self")
                break
            f = f.f_back
        if fn_obj is None:
            # tf.data and other TensorFlow-internal traces are not made through tf.function
            self.store.incr("retrace.internal_traces")
            return
        site = user_frame(f)
        if mdf is None:
            self._record(cf, fn_obj, None, None, None, site)
            return
        loc = mdf.f_locals
        self._record(cf, fn_obj, loc.get("tracing_options"), loc.get("lookup_func_type"), loc.get("current_func_context"), site)

    def _is_new_object(self, key: Any, fn_obj: Any, rec: dict[str, Any]) -> bool:
        """First trace seen from this tf.function object? Objects are held weakly: an id alone
        is reused once an object is freed (tf.functions created in a loop often are)."""
        seen = self._live_objects.get(key)
        if seen is None:
            seen = self._live_objects[key] = weakref.WeakSet()
        try:
            if fn_obj in seen:
                return False
            if len(seen) < MAX_LIVE_OBJECTS:
                seen.add(fn_obj)
            return True
        except TypeError:  # not weakly referenceable: fall back to ids
            oid = id(fn_obj)
            if oid in rec["objects"]:
                return False
            if len(rec["objects"]) < 64:
                rec["objects"].append(oid)
            return True

    def _record(self, cf: Any, fn_obj: Any, options: Any, lookup_type: Any, ctx: Any, site: Any) -> None:
        # the function traced: the tf.function's own, or one TensorFlow traces on its behalf (the
        # initializer of the variables its first trace created, which is not a trace of it)
        pyfunc = getattr(options, "python_function", None) or getattr(fn_obj, "_python_function", None)
        raw = getattr(pyfunc, "__func__", pyfunc)
        for _ in range(8):  # unwrap decorators (functools.wraps / tf_decorator)
            inner = getattr(raw, "__wrapped__", None) or getattr(raw, "_tf_decorator", None) and getattr(raw._tf_decorator, "decorated_target", None)
            if inner is None or inner is raw:
                break
            raw = getattr(inner, "__func__", inner)
        code = getattr(raw, "__code__", None)
        if code is not None and is_library_file(code.co_filename) and f"{_TF_MARK}" in code.co_filename and "keras" not in code.co_filename:
            self.store.incr("retrace.internal_traces")
            return
        name = getattr(options, "name", None) or getattr(fn_obj, "_name", None) or getattr(cf, "name", "?")
        key = code if code is not None else name
        reduce_retracing = bool(getattr(fn_obj, "_reduce_retracing", False))
        rec = self.store.record(
            KIND,
            key,
            lambda: {
                "function": str(name),
                "qualname": getattr(raw, "__qualname__", str(name)),
                "defined_at": [code.co_filename, code.co_firstlineno] if code is not None else None,
                "library": bool(code is not None and is_library_file(code.co_filename)),
                "traces": 0,
                "retraces": 0,
                "objects": [],
                "n_objects": 0,
                "reduce_retracing": reduce_retracing,
                "examples": [],
                "causes": {},
                "first_site": None,
                "first_step": None,
                # a tf.function method: each instance has a tf.function object of its own (its
                # Python function wraps a method bound to the instance)
                "method": _is_method(pyfunc),
                "retrace_site": None,
            },
        )
        self.traces += 1
        self.store.incr("retrace.traces")
        if rec is None:
            return
        rec["traces"] += 1
        if self._is_new_object(key, fn_obj, rec):
            rec["n_objects"] += 1
        site_l = list(site) if site else None
        if rec["first_site"] is None:
            rec["first_site"] = site_l
            rec["first_step"] = self.session.steps.count if self.session.steps else 0

        cache = getattr(options, "function_cache", None)
        same_ctx: list[Any] = []
        if cache is not None and ctx is not None:
            primary = getattr(cache, "_primary", None)
            if primary:
                for k in list(primary.keys())[-MAX_DIFF_CANDIDATES * 4 :]:
                    try:
                        c, ft = k
                    except (TypeError, ValueError):
                        continue
                    if c == ctx:
                        same_ctx.append(ft)
        if not same_ctx:
            return  # expected: first trace in this context
        rec["retraces"] += 1
        self.retraces += 1
        self.store.incr("retrace.retraces")
        step = self.session.steps.count if self.session.steps else 0
        self.store.series("retraces", 400).add(step, self.retraces)
        if rec["retrace_site"] is None:
            rec["retrace_site"] = site_l
        causes: list[str] = []
        if lookup_type is not None:
            best: list[str] | None = None
            for ft in reversed(same_ctx[-MAX_DIFF_CANDIDATES:]):
                d = diff_function_types(ft, lookup_type)
                if best is None or len(d) < len(best):
                    best = d
                    if len(d) <= 1:
                        break
            causes = best or []
        if not causes:
            causes = ["same argument types as a cached trace (the cache was keyed on another context or garbage-collected)"]
        generalized = False
        try:
            generalized = lookup_type is not None and cf.function_type != lookup_type
        except Exception:  # noqa: BLE001
            pass
        for c in causes:
            head = c.split(":", 1)[0]
            if len(rec["causes"]) < 32 or head in rec["causes"]:
                rec["causes"][head] = rec["causes"].get(head, 0) + 1
        add_example(
            rec["examples"],
            {
                "causes": causes,
                "site": site_l,
                "step": step,
                "generalized": generalized,
                "t": round(time.perf_counter() - self.session.t0, 6),
            },
        )


def _is_method(pyfunc: Any) -> bool:
    f = pyfunc
    for _ in range(4):
        if f is None:
            return False
        if hasattr(f, "__self__") and not isinstance(f, type):
            return True
        f = getattr(f, "__wrapped__", None)
    return False


_SPEC_CHANGE = re.compile(r"^(?P<arg>[^:]+): TensorSpec\(shape=\((?P<old>[^)]*)\)\) -> \((?P<new>[^)]*)\)$")


def partial_batch_change(causes: list[str]) -> dict[str, Any] | None:
    """``{"args", "full", "partial"}`` when every cause of a retrace is a tensor argument whose
    leading (batch) dimension shrank while its other dimensions stayed: a final partial batch."""
    if not causes:
        return None
    args, full, partial = [], None, None
    for c in causes:
        m = _SPEC_CHANGE.match(c)
        if m is None:
            return None
        old = [d.strip() for d in m.group("old").split(",") if d.strip()]
        new = [d.strip() for d in m.group("new").split(",") if d.strip()]
        if len(old) != len(new) or not old or old[1:] != new[1:]:
            return None
        try:
            o, n = int(old[0]), int(new[0])
        except ValueError:
            return None
        if n >= o or (full is not None and (o, n) != (full, partial)):
            return None
        full, partial = o, n
        args.append(m.group("arg").strip())
    out: dict[str, Any] = {"args": [a.removesuffix(PER_REPLICA) for a in args], "full": full, "partial": partial}
    if any(a.endswith(PER_REPLICA) for a in args):
        out["per_replica"] = True  # a tf.distribute batch: the sizes are each replica's
    return out
