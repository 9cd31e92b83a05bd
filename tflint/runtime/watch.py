"""``watch()``: install tflint's TensorFlow hooks for the duration of a ``with`` block.

::

    from tflint.runtime import watch
    with watch() as session:
        train()
    print(session.report().to_json())

A session can be entered and left any number of times (its findings accumulate); leaving it
restores every patched TensorFlow/Keras attribute to the exact object that was there before.
Only one session can be active at a time: entering a second one while another is active raises
``RuntimeError`` (the Keras callback reuses the active session instead).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable

from tflint.profiler.report import SIGNAL_GROUPS, SIGNAL_KINDS, expand_signal_names
from tflint.runtime.health import HEALTH_KINDS
from tflint.runtime.hookbase import NEVER
from tflint.runtime.store import Store

_ACTIVE: "ProfileSession | None" = None
_ACTIVE_LOCK = threading.Lock()
LIVE_INTERVAL_S = 0.5


def active_session() -> "ProfileSession | None":
    return _ACTIVE


class ProfileSession:
    """Hooks, their store, and the report built from it."""

    def __init__(self, signals: Iterable[str] | None = None, live: Callable[[dict[str, Any]], None] | None = None) -> None:
        if signals is None:
            chosen = set(SIGNAL_KINDS)
        else:
            chosen, unknown = expand_signal_names(signals)
            if unknown:
                raise ValueError(f"unknown signal kind(s) {', '.join(unknown)}; choose from {', '.join(SIGNAL_KINDS)}, "
                                 f"{', '.join(SIGNAL_GROUPS)}")
        self.signals = chosen
        self.live = live
        self.store = Store()
        self.t0 = time.perf_counter()
        self.active_time = 0.0
        self._t_enter: float | None = None
        self._enabled = True
        self._inside = False
        self._last_live = 0.0
        # the per-step handlers are called only when one of them is due: at this step or time
        self._due_step = 0
        self._due_t = 0.0
        self._built = False
        self.steps: Any = None
        self.hooks: dict[str, Any] = {}
        self.memory: Any = None
        self.gpu: Any = None
        self.input: Any = None
        self.placement: Any = None
        self.retrace: Any = None
        self.gradients: Any = None
        self.distribute: Any = None
        self.health: Any = None

    # -- construction -------------------------------------------------------------------
    def _build(self) -> None:
        if self._built:
            return
        from tflint.runtime.gpu import GpuSampler
        from tflint.runtime.memory import MemorySampler
        from tflint.runtime.steps import StepTracker

        self.steps = StepTracker(self)
        self.memory = MemorySampler(self)
        self.gpu = GpuSampler(self)
        if "retrace" in self.signals:
            from tflint.runtime.retrace import RetraceHook

            self.retrace = self.hooks["retrace"] = RetraceHook(self)
        health_kinds = [k for k in HEALTH_KINDS if k in self.signals]
        if "none-gradient" in self.signals or health_kinds:
            from tflint.runtime.gradients import GradientHook

            # the tape/optimizer wrappers also feed the training-health probe
            self.gradients = self.hooks["none-gradient"] = GradientHook(self)
        if health_kinds:
            self._build_health(health_kinds)
        if "input-stall" in self.signals:
            try:
                from tflint.runtime.input import InputHook
            except ImportError:
                InputHook = None  # noqa: N806
            if InputHook is not None:
                self.input = self.hooks["input-stall"] = InputHook(self)
        if "soft-placement" in self.signals:
            try:
                from tflint.runtime.placement import PlacementHook
            except ImportError:
                PlacementHook = None  # noqa: N806
            if PlacementHook is not None:
                self.placement = self.hooks["soft-placement"] = PlacementHook(self)
        if "memory-growth" in self.signals:
            self.hooks["memory-growth"] = self.memory
        try:
            from tflint.runtime.distribute import DistributeHook
        except ImportError:
            DistributeHook = None  # noqa: N806
        if DistributeHook is not None:
            # which worker of a tf.distribute job this is: tags every report (nothing per step)
            self.distribute = DistributeHook(self)
        self._built = True

    def _build_health(self, kinds: list[str]) -> None:
        from tflint.runtime.dead_params import DeadParameterHook
        from tflint.runtime.grad_norms import ExplodingGradientHook, VanishingGradientHook
        from tflint.runtime.health import HealthMonitor
        from tflint.runtime.loss_broadcast import LossBroadcastHook
        from tflint.runtime.loss_stall import LossStallHook
        from tflint.runtime.nan_inf import NanInfHook

        classes = {"nan-inf": NanInfHook, "dead-parameter": DeadParameterHook,
                   "exploding-gradient": ExplodingGradientHook, "vanishing-gradient": VanishingGradientHook,
                   "loss-stall": LossStallHook, "loss-broadcast": LossBroadcastHook}
        self.health = HealthMonitor(self)
        for k in kinds:
            self.hooks[k] = classes[k](self)

    def _all_hooks(self) -> list[Any]:
        hs = [self.steps, self.memory, self.gpu]
        hs += [h for k, h in self.hooks.items() if h is not self.memory]
        if self.health is not None:
            hs.append(self.health)
        if self.distribute is not None:
            hs.append(self.distribute)
        return hs

    # -- context manager ----------------------------------------------------------------
    def __enter__(self) -> "ProfileSession":
        global _ACTIVE
        with _ACTIVE_LOCK:
            if _ACTIVE is not None:
                if _ACTIVE is self:
                    raise RuntimeError("this tflint watch() session is already active (nested use of the same session)")
                raise RuntimeError("another tflint watch() session is already active; nested watch() is not supported")
            _ACTIVE = self
        try:
            self._build()
            self._inside = True
            self._t_enter = time.perf_counter()
            if self._enabled:
                self._install_all()
        except BaseException:
            self._inside = False
            with _ACTIVE_LOCK:
                _ACTIVE = None
            raise
        return self

    def __exit__(self, *exc: Any) -> bool:
        global _ACTIVE
        try:
            self._uninstall_all()
            if self.memory is not None:
                self.memory.close()
        finally:
            if self._t_enter is not None:
                self.active_time += time.perf_counter() - self._t_enter
                self._t_enter = None
            self._inside = False
            with _ACTIVE_LOCK:
                if _ACTIVE is self:
                    _ACTIVE = None
        return False

    start = __enter__

    def stop(self) -> None:
        self.__exit__(None, None, None)

    def _install_all(self) -> None:
        for h in self._all_hooks():
            h.install()
        if self.steps is not None:
            self.steps.reset_timing()
        if self.input is not None:
            self.input.reset_window()
        if self.health is not None:
            self.health.defer_read(time.perf_counter())
        self.reschedule()

    def _uninstall_all(self) -> None:
        for h in reversed(self._all_hooks()):
            try:
                h.uninstall()
            except Exception:  # noqa: BLE001 - keep restoring the others
                pass

    def set_enabled(self, enabled: bool) -> None:
        """Turn the hooks off (restoring TensorFlow) or on again, safely, mid-run."""
        enabled = bool(enabled)
        if enabled == self._enabled:
            return
        self._enabled = enabled
        if not self._inside:
            return
        if enabled:
            self._install_all()
        else:
            self._uninstall_all()

    @property
    def enabled(self) -> bool:
        return self._enabled

    # -- events -------------------------------------------------------------------------
    def reschedule(self) -> None:
        """Call every per-step handler at the next step (after a pause, or when the step count
        restarts from another source)."""
        self._due_step = 0
        self._due_t = 0.0

    def _on_step(self, step: int, now: float) -> None:
        """A training step at which a per-step handler is due. Each handler returns when it
        next needs a call (a step and a time, whichever comes first; None: the next step); the
        step tracker calls this only once ``step >= _due_step or now >= _due_t``, so most steps
        cost two comparisons instead of a call of every handler."""
        due_step = NEVER
        due_t = NEVER
        # a failing hook disables itself only (not the step source that called us)
        for hook, handler, what in (
            (self.memory, "sample", "per-step memory sample"),
            (self.gpu, "sample", "per-step GPU sample"),
            (self.input, "on_step", "per-step input-wait window"),
            (self.placement, "on_step", "per-step placement check"),
            (self.health, "on_step", "per-step training-health sample"),
        ):
            if hook is not None and hook.active:
                try:
                    due = getattr(hook, handler)(step, now)
                except Exception as exc:  # noqa: BLE001
                    hook.fail(exc, what)
                    continue
                if due is None:
                    due_step = step + 1
                else:
                    due_step = min(due_step, due[0])
                    due_t = min(due_t, due[1])
        if self.live is not None:
            if now - self._last_live >= LIVE_INTERVAL_S:
                self._last_live = now
                try:
                    self.live(self.status())
                except Exception:  # noqa: BLE001 - a broken live display never stops training
                    self.live = None
            due_t = min(due_t, self._last_live + LIVE_INTERVAL_S)
        self._due_step = due_step
        self._due_t = due_t

    # -- results ------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        st = self.steps
        return {
            "steps": st.count if st is not None else 0,
            "last_step_time_s": st.last_step_time if st is not None else None,
            "retraces": self.retrace.retraces if self.retrace is not None else 0,
        }

    def report(
        self,
        script: str = "<watch>",
        argv: list[str] | None = None,
        exit_code: int | None = None,
        duration_s: float | None = None,
    ) -> Any:
        from tflint.profiler.aggregate import build_report

        return build_report(self, script=script, argv=list(argv or []), exit_code=exit_code, duration_s=duration_s)

    def elapsed(self) -> float:
        t = self.active_time
        if self._t_enter is not None:
            t += time.perf_counter() - self._t_enter
        return t


def watch(signals: Iterable[str] | None = None, live: Callable[[dict[str, Any]], None] | None = None) -> ProfileSession:
    """A new :class:`ProfileSession`; use it as a context manager."""
    return ProfileSession(signals=signals, live=live)
