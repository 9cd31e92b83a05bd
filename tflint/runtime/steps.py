"""Step detection and the step-time series.

A *step* is one tick of the best source seen so far, in this order of preference:

4. ``keras``     — Keras ``on_train_batch_end`` (the tflint Keras callback);
3. ``optimizer`` — an optimizer ``apply``/``apply_gradients`` run eagerly (eager training loops);
2. ``function``  — calls, made eagerly, of the most-called ``tf.function`` (custom loops,
   Keras ``fit`` whose train function is a ``tf.function``);
1. ``gradient``  — ``GradientTape.gradient`` run eagerly (eager loops without an optimizer);
0. ``iterator``  — ``next()`` on a ``tf.data`` iterator.

Each source keeps its own count and series of intervals between consecutive ticks; the report
uses the preferred one. The ``function`` source comes from a class-level wrapper of
``Function.__call__`` (about 1 µs per call; nothing when called inside another trace).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tflint.runtime.hookbase import Hook, user_frame
from tflint.runtime.store import Series

MAX_SOURCES = 128
PRIORITY = {"keras": 4, "optimizer": 3, "function": 2, "gradient": 1, "iterator": 0}


class Source:
    __slots__ = ("key", "name", "kind", "prio", "n", "last", "series", "total", "calls_time", "first", "site")

    def __init__(self, key: Any, name: str, kind: str) -> None:
        self.key = key
        self.name = name
        self.kind = kind
        self.prio = PRIORITY[kind]
        self.n = 0
        self.last: float | None = None
        self.first: float | None = None
        self.series = Series(400)
        self.total = 0.0
        self.calls_time = 0.0
        self.site: tuple[str, int] | None = None


class StepTracker(Hook):
    kind = "steps"

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._sources: dict[Any, Source] = {}
        self.primary: Source | None = None
        self.count = 0
        self.last_step_time: float | None = None

    # -- hook: count eager tf.function calls ----------------------------------------------
    def check(self) -> str | None:
        try:
            from tensorflow.python.eager import context  # noqa: F401
            from tensorflow.python.eager.polymorphic_function import polymorphic_function
        except ImportError as exc:
            return f"tf.function internals not importable: {exc}"
        if not callable(getattr(polymorphic_function.Function, "__call__", None)):
            return "polymorphic_function.Function.__call__ not found"
        return None

    def _install(self) -> None:
        from tensorflow.python.eager import context
        from tensorflow.python.eager.polymorphic_function import polymorphic_function

        executing_eagerly = context.executing_eagerly
        perf = time.perf_counter
        hook = self

        def make(orig: Any) -> Any:
            def __call__(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
                if not hook.active or not executing_eagerly():
                    return orig(fn_self, *args, **kwargs)
                t0 = perf()
                result = orig(fn_self, *args, **kwargs)
                try:
                    hook.tick(id(fn_self), fn_self, "function", t0, perf())
                except Exception as exc:  # noqa: BLE001
                    hook.fail(exc, "tf.function call counter")
                return result

            return __call__

        self.patch(polymorphic_function.Function, "__call__", make)

    # -- ticks --------------------------------------------------------------------------
    def reset_timing(self) -> None:
        """Forget the last tick times (after the hooks were off) so no interval spans the gap."""
        for s in list(self._sources.values()):
            s.last = None

    def tick(self, key: Any, obj: Any, kind: str, t_start: float, t_end: float | None = None) -> None:
        """Count a step; a failure here disables step counting only, never the caller's hook."""
        if self.status == "failed":
            return
        try:
            self._tick(key, obj, kind, t_start, t_end)
        except Exception as exc:  # noqa: BLE001
            self.fail(exc, "step counter")

    def _tick(self, key: Any, obj: Any, kind: str, t_start: float, t_end: float | None) -> None:
        src = self._sources.get(key)
        if src is None:
            if len(self._sources) >= MAX_SOURCES:
                return
            name = getattr(obj, "__name__", None) or getattr(obj, "_name", None) or str(obj)
            src = Source(key, str(name), kind)
            src.site = user_frame(sys._getframe(1))
            self._sources[key] = src
        now = t_end if t_end is not None else t_start
        src.n += 1
        last = src.last
        if t_end is not None and last is not None:
            src.calls_time += t_end - t_start  # time inside the call, for each interval in ``total``
        src.last = now
        dt = None
        if last is not None:
            dt = now - last
            src.total += dt
            src.series.add(src.n, dt)
        else:
            src.first = now
        prim = self.primary
        if prim is not src:
            if prim is None or src.prio > prim.prio or (src.prio == prim.prio and src.n > prim.n):
                self.primary = prim = src
            else:
                return
        self.count = src.n
        if dt is not None:
            self.last_step_time = dt
        self.session._on_step(src.n, now)

    def keras_batch_end(self, model: Any) -> None:
        self.tick(("keras", id(model)), "keras.fit", "keras", time.perf_counter())

    def summary(self) -> dict[str, Any]:
        prim = self.primary
        d: dict[str, Any] = {"source": None, "steps": self.count}
        if prim is None:
            return d
        d["source"] = {"kind": prim.kind, "name": prim.name}
        d["step_time_s"] = prim.series.downsample(200)
        n_int = prim.series.count
        d["mean_step_time_s"] = (prim.total / n_int) if n_int else None
        pts = [p[1] for p in prim.series.points]
        if pts:
            s = sorted(pts)
            d["median_step_time_s"] = s[len(s) // 2]
        d["span_s"] = (prim.last - prim.first) if prim.last is not None and prim.first is not None else None
        return d
