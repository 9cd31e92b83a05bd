"""Step detection: every training loop of the process, each with its own steps and timing.

A *training loop* is a stream of optimizer updates:

* ``function`` — a ``tf.function`` called eagerly whose trace applied an optimizer (custom
  ``tf.function`` steps, a GAN step with two optimizers): one step per call; Keras ``fit``'s
  train function is such a loop too, of kind ``keras`` and named after the model (its test
  function, which validation and ``evaluate`` run, is not: the first training step after it
  starts again), and a call of it runs ``steps_per_execution`` steps (the count is corrected
  from the optimizer's iterations when the ``fit`` ends: an epoch's last call may run fewer);
* ``optimizer`` — optimizer updates run eagerly (eager custom loops). Optimizers applied in the
  same step (a GAN's discriminator and generator) form one loop: its step is counted on the
  update of the loop's first optimizer, and an optimizer first seen while a loop is in its first
  step joins it;
* ``keras`` — ``on_train_batch_end`` of the tflint Keras callback, when no train function of the
  same model is counted already.

The optimizer update is seen through Keras' ``BaseOptimizer.apply`` (``apply_gradients`` calls
it), wrapped at class level: eagerly it ticks the eager loop, inside a trace it marks the
``tf.function`` being called as a training step. ``Function.__call__`` is wrapped at class level
too (about 1 µs per eager call; nothing for calls made inside another trace).

When no optimizer update is ever seen (variables updated by hand with ``assign_sub``), the steps
are those of the best fallback source, in this order: the most-called ``tf.function`` whose trace
computed a gradient (``function``), ``GradientTape.gradient`` run eagerly (``gradient``), the
most-called other ``tf.function`` (``function``: a model's forward pass, an exported function),
``next()`` on a ``tf.data`` iterator (``iterator``). A function that computes no gradient is not
a training step: one call of a reloaded SavedModel after 1400 eager steps would be "1 step".

Every loop keeps its own step count and series of intervals, and the input wait measured during
its steps: waits between two consecutive steps of the loop are *steady* waits; the interval that
ends with a loop's first step (or with its first step after another loop ran) is a *start-up*
interval, kept apart (it holds tracing, shuffle-buffer fills and first file reads). The input
share of a loop is its wait over the time of the same steps, so every per-step figure is computed
over the steps counted.
"""

from __future__ import annotations

import sys
import time
import weakref
from typing import Any

from tflint.runtime.hookbase import Hook, ThreadFlags, drop_own_frame, user_frame
from tflint.runtime.store import Series

MAX_SOURCES = 128
MAX_LOOPS = 64
MAX_FITS = 256
MAX_FN_KEYS = 512
PRIORITY = {"keras": 4, "optimizer": 3, "function": 2, "gradient": 1, "iterator": 0}
NO_GRADIENT_FUNCTION_PRIORITY = 0.5  # a fallback tf.function whose trace computed no gradient
KERAS_STEP_FUNCTIONS = ("multi_step_on_iterator", "one_step_on_iterator", "one_step_on_data")
BATCH = 8  # steady steps counted together (see StepTracker.log_fetch)
BATCH_AFTER = 64  # ... once the loop has this many: its start-up is counted step by step
MAX_LOGGED = 4 * BATCH  # events logged at most before they are counted, steps or not


class Source:
    """One stream of ticks: a training loop, or a fallback source."""

    __slots__ = ("key", "name", "kind", "prio", "n", "last", "series", "total", "calls_time", "first", "site",
                 "optimizers", "begin", "startup_s", "startup_wait_s", "steady_wait_s", "startups", "wait_mark",
                 "leader", "step_opts", "model", "start_step", "per_call", "extra_intervals",
                 "other_fns", "pending_other", "takes_args", "obj")

    def __init__(self, key: Any, name: str, kind: str) -> None:
        self.key = key
        self.name = name
        self.kind = kind
        self.prio = PRIORITY[kind]
        self.n = 0
        self.last: float | None = None
        self.first: float | None = None
        self.series = Series(400)
        self.total = 0.0  # sum of the intervals between consecutive steps (steady time)
        self.calls_time = 0.0  # time inside the step call, for each interval in ``total``
        self.site: tuple[str, int] | None = None
        self.optimizers: list[str] = []
        self.begin: float | None = None
        self.startup_s = 0.0  # time of the start-up intervals (first step, resumes)
        self.startup_wait_s = 0.0
        self.steady_wait_s = 0.0
        self.startups = 0
        self.wait_mark: float | None = None  # fallback sources: total wait at their last tick
        self.leader: int | None = None  # eager optimizer loops: id of the optimizer that ticks
        self.step_opts: set[int] = set()
        self.model: str | None = None
        self.start_step = 0  # training loops: the process's step count before this loop's first step
        # Keras fit with steps_per_execution = k: each call of the train function runs up to k
        # steps; an interval between calls is k step intervals
        self.per_call = 1
        self.extra_intervals = 0
        # function loops: seconds spent in other tf.functions inside the steady intervals, by
        # name (a target-network update, an eager policy's traced forward pass between steps),
        # and those of the interval going on, counted once the next step closes it
        self.other_fns: dict[str, float] = {}
        self.pending_other: dict[str, float] = {}
        self.takes_args = True  # function loops: whether the step function has parameters
        self.obj: Any = None  # fallback tf.function sources: a weak reference to the function

    @property
    def intervals(self) -> int:
        """Step intervals in ``total`` (a call of ``per_call`` steps is that many)."""
        return self.series.count + self.extra_intervals

    def to_dict(self) -> dict[str, Any]:
        n_int = self.intervals
        pts = sorted(p[1] for p in self.series.points)
        span = self.total + self.startup_s
        wait = self.steady_wait_s + self.startup_wait_s
        d: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "site": {"file": self.site[0], "line": self.site[1]} if self.site else None,
            "steps": self.n,
            "optimizers": list(self.optimizers),
            "mean_step_time_s": (self.total / n_int) if n_int else None,
            "median_step_time_s": pts[len(pts) // 2] if pts else None,
            "steady_time_s": self.total,
            "startup_time_s": self.startup_s,
            "startup_intervals": self.startups,
            "input_wait_s": wait,
            "startup_input_wait_s": self.startup_wait_s,
            "steady_input_wait_s": self.steady_wait_s,
            "input_wait_share": (wait / span) if span > 0 else None,
            "steady_input_wait_share": (self.steady_wait_s / self.total) if self.total > 0 else None,
        }
        if self.model:
            d["model"] = self.model
        return d


def _keras_model_of(fn: Any) -> Any:
    """The Keras model whose train function ``fn`` is (closure of Keras' step function), or None."""
    py = getattr(fn, "_python_function", None)
    for _ in range(3):
        if py is None:
            return None
        for cell in getattr(py, "__closure__", None) or ():
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if hasattr(v, "make_train_function") and hasattr(v, "steps_per_execution"):
                return v
        py = getattr(py, "__wrapped__", None)
    return None


def _keras_step_method(fn: Any) -> str | None:
    """The name of the model method a Keras step function runs (``train_step``, ``test_step``):
    Keras builds the train and test functions alike, around the ``step_function`` it is given
    (``_make_function(self.train_step)``), so only that closure cell tells them apart. None when
    it cannot be found."""
    todo = [getattr(fn, "_python_function", fn)]
    seen: set[int] = set()
    while todo and len(seen) < 16:
        py = todo.pop()
        if py is None or id(py) in seen:
            continue
        seen.add(id(py))
        code = getattr(py, "__code__", None)
        cells = getattr(py, "__closure__", None) or ()
        for name, cell in zip(getattr(code, "co_freevars", ()), cells):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if name == "step_function":
                return getattr(v, "__name__", None)
            if name == "one_step_on_data":  # the inner step: a tf.function or Keras' wrapper of one
                todo.append(getattr(v, "_python_function", None) or getattr(v, "__wrapped__", None) or v)
        todo.append(getattr(py, "__wrapped__", None))
    return None


class StepTracker(Hook):
    kind = "steps"

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._sources: dict[Any, Source] = {}  # fallback sources
        self._loops: dict[Any, Source] = {}  # training loops
        # where each model.fit call began, as (step count, eager gradient calls, the call's place
        # in the code): the x of the step-indexed series, and of the loss series of eager steps.
        # The count is of loop steps: a fallback source's steps (an evaluate before the first
        # fit) give way to the loop's once it begins
        self.fit_starts: list[tuple[int, int, tuple[str, int] | None]] = []
        self._per_call: dict[int, int] = {}  # id(model) -> its steps_per_execution, at its last fit
        self._train_fns: dict[Any, list[str]] = {}  # loop key -> optimizers applied in its trace
        self._fitting: set[int] = set()  # id of each model whose fit is running
        # Keras train functions known as such from a running fit, not from a trace of this
        # session: traced before the hooks were on, they carry none of its in-graph probes
        self.untraced_loops: set[Any] = set()
        self._not_adopted: set[Any] = set()
        self._grad_fns: set[Any] = set()  # loop keys of the functions whose trace computed a gradient
        self._fn_keys: dict[int, tuple[Any, Any]] = {}  # id(tf.function) -> (weakref, loop key)
        self.primary: Source | None = None  # best fallback source
        self._count = 0
        self._last_step_time: float | None = None
        # steady steps of one tf.function, and the eager fetches between them, are only logged
        # as they happen and counted in batches (see log_fetch): the bookkeeping then runs with
        # warm caches
        self._fast_fn: Any = None  # the tf.function whose calls are logged
        self._fast_src: Source | None = None  # the loop (or fallback source) they tick
        self._fast_loop = False  # _fast_src is a training loop
        # (t0, t1, None) for a step, (t0, t1, iterator) for an eager fetch, in the order they ran
        self._pending: list[tuple[float, float, Any]] = []
        self._pending_steps = 0
        self._last_loop: Source | None = None
        self._last_loop_t: float | None = None
        self._wait_mark = 0.0
        self._eager_loop: Source | None = None  # the eager optimizer loop being run
        self._calling: Any = None  # the tf.function called eagerly right now (any thread)
        # eager calls of each tf.function (by id): what the training-health probes traced in it
        # need reading for (see HealthMonitor._read_probes)
        self.fn_calls: dict[int, int] = {}
        self._tls = ThreadFlags()
        self._train_ticks_since_keras = 0
        self._loop_steps = 0
        self._eager_mark = 0.0
        self.keras_note: str | None = None
        self.containers: Any = None
        if "memory-growth" in getattr(session, "signals", ()):
            from tflint.runtime.memory import ContainerWatch

            self.containers = ContainerWatch()

    # -- hook ---------------------------------------------------------------------------
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
        tls = self._tls

        def make(orig: Any) -> Any:
            def __call__(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
                if not hook.active or tls.calling or not executing_eagerly():
                    return orig(fn_self, *args, **kwargs)
                tls.calling = True
                prev, hook._calling = hook._calling, fn_self
                t0 = perf()
                try:
                    result = orig(fn_self, *args, **kwargs)
                except BaseException as exc:
                    drop_own_frame(exc)  # the user's traceback reads as it would without tflint
                    raise
                finally:
                    tls.calling = False
                    hook._calling = prev
                t1 = perf()
                if fn_self is hook._fast_fn:  # a steady step: logged, counted later (see log_fetch)
                    hook._pending.append((t0, t1, None))
                    hook._pending_steps += 1
                    if hook._pending_steps >= BATCH:
                        hook.flush()
                    return result
                try:
                    hook._on_function_call(fn_self, t0, t1)
                except Exception as exc:  # noqa: BLE001
                    hook.fail(exc, "tf.function call counter")
                return result

            return __call__

        self.patch(polymorphic_function.Function, "__call__", make)
        self._install_optimizer(executing_eagerly)
        self._install_fit()

    def _install_fit(self) -> None:
        """``model.fit`` wrapped at class level: each call starts a run of its own (the memory
        trend and the loss are judged per run; a second ``fit`` on new data or a new task starts
        from another loss and allocates anew)."""
        try:
            from keras.src.backend.tensorflow.trainer import TensorFlowTrainer
        except Exception:  # noqa: BLE001 - no Keras: fit calls are not told apart
            return
        hook = self

        def make(orig: Any) -> Any:
            def fit(model: Any, *args: Any, **kwargs: Any) -> Any:
                start = None
                if hook.active:
                    try:
                        start = hook._on_fit_start(model)
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "noting a fit call")
                try:
                    return orig(model, *args, **kwargs)
                except BaseException as exc:
                    drop_own_frame(exc)
                    raise
                finally:
                    hook._fitting.discard(id(model))
                    if start is not None and hook.active:
                        try:
                            hook._on_fit_end(model, start)
                        except Exception as exc:  # noqa: BLE001
                            hook.fail(exc, "counting a fit call's steps")

            return fit

        self.patch(TensorFlowTrainer, "fit", make)

    def _on_fit_start(self, model: Any) -> tuple[int, int] | None:
        """Notes the fit call; with ``steps_per_execution`` > 1, returns what its end needs to
        count its steps exactly: the loop's steps and the optimizer's iterations so far."""
        spe = _steps_per_execution(model)
        self._fitting.add(id(model))
        if len(self._per_call) < MAX_FITS or id(model) in self._per_call:
            self._per_call[id(model)] = spe
        loop = self._loops.get(("keras", id(model)))
        if loop is not None:
            loop.per_call = spe
        if len(self.fit_starts) < MAX_FITS:
            mon = self.session.health
            eager_calls = 0
            if mon is not None and mon.active:
                if mon.probes:
                    mon.read_now()  # the last fit's steps since its last read are its own
                eager_calls = mon.eager_calls
            self.fit_starts.append((self._loop_steps, eager_calls, user_frame(sys._getframe(2))))
        if spe == 1:
            return None
        iterations = _optimizer_iterations(model)
        return (loop.n if loop is not None else 0, iterations) if iterations is not None else None

    def _on_fit_end(self, model: Any, start: tuple[int, int]) -> None:
        """A fit with ``steps_per_execution`` = k counted k steps per call; the last call of each
        epoch may run fewer. The optimizer's iterations say how many ran: the count is corrected."""
        self._unbatch()
        loop = self._loops.get(("keras", id(model)))
        end = _optimizer_iterations(model)
        if loop is None or end is None:
            return
        counted = loop.n - start[0]
        over = counted - (end - start[1])
        if 0 < over < counted:
            loop.n -= over
            loop.extra_intervals = max(0, loop.extra_intervals - over)
            self._loop_steps -= over
            self._count = self._loop_steps

    def _uninstall(self) -> None:
        self.flush()  # the steps recorded before the hooks go off

    def _install_optimizer(self, executing_eagerly: Any) -> None:
        try:
            from keras.src.optimizers import base_optimizer
        except Exception as exc:  # noqa: BLE001
            self.keras_note = f"Keras optimizer updates not counted: {type(exc).__name__}: {exc}"
            return
        cls = getattr(base_optimizer, "BaseOptimizer", None)
        if cls is None or "apply" not in cls.__dict__:
            self.keras_note = "Keras BaseOptimizer.apply not found: optimizer updates not counted"
            return
        hook = self
        tls = self._tls
        perf = time.perf_counter

        def make_apply(orig: Any) -> Any:
            def apply(opt: Any, *args: Any, **kwargs: Any) -> Any:
                if not hook.active or tls.applying:
                    return orig(opt, *args, **kwargs)
                eager = executing_eagerly()
                tls.applying = True  # an optimizer wrapping another counts once
                t0 = perf()
                try:
                    result = orig(opt, *args, **kwargs)
                except BaseException as exc:
                    drop_own_frame(exc)  # the user's traceback reads as it would without tflint
                    raise
                finally:
                    tls.applying = False
                try:
                    if eager:
                        hook._on_eager_apply(opt, t0, perf())
                    else:
                        hook._on_traced_apply(opt)
                except Exception as exc:  # noqa: BLE001
                    hook.fail(exc, "optimizer step counter")
                return result

            return apply

        self.patch(cls, "apply", make_apply)
        try:  # it overrides apply, and skips its inner optimizer's on a step that overflowed
            from keras.src.optimizers.loss_scale_optimizer import LossScaleOptimizer
        except Exception:  # noqa: BLE001
            return
        if "apply" in vars(LossScaleOptimizer):
            self.patch(LossScaleOptimizer, "apply", make_apply)

    # -- ticks --------------------------------------------------------------------------
    @property
    def has_loops(self) -> bool:
        """A training loop is known (fallback sources no longer define the steps)."""
        return bool(self._loops)

    @property
    def count(self) -> int:
        """Steps counted so far (every recorded step included)."""
        if self._pending:
            self.flush()
        return self._count

    @property
    def last_step_time(self) -> float | None:
        if self._pending:
            self.flush()
        return self._last_step_time

    def log_fetch(self, it: Any, t0: float, t1: float) -> bool:
        """An eager fetch from ``it`` between two steady steps: logged (True), or to be counted
        now (False: no steps are being logged).

        A step's bookkeeping run right after TensorFlow's call costs several times what it costs
        with warm caches, so the steady steps of a loop (the same tf.function as the last step,
        past its first ``BATCH_AFTER`` steps; the ``tf.function`` wrapper logs them itself) and
        the eager fetches between them are only logged, and counted in batches of ``BATCH``
        steps. Anything else (another function, an optimizer, a fallback tick, a reader of the
        count or of the input wait) counts the logged events first, so the order of events and
        every figure are the same as counting each as it happens."""
        if self._fast_fn is None:
            return False
        pend = self._pending
        pend.append((t0, t1, it))
        if len(pend) >= MAX_LOGGED:  # fetches with no step between them (an eager evaluation)
            self.flush()
        return True

    def flush(self) -> None:
        """Count the logged steps and fetches, in order; a failure disables step counting only."""
        with self._lock:
            pend = self._pending
            if not pend:
                return
            self._pending = []
            self._pending_steps = 0
        src = self._fast_src
        if src is None or self.status == "failed":
            self._count_fetches(pend)
            return
        try:
            self._count_recorded(src, pend)
        except Exception as exc:  # noqa: BLE001
            self.fail(exc, "step counter")

    def _count_fetches(self, pend: list[tuple[float, float, Any]]) -> None:
        """The logged eager fetches only (no loop to count the steps in)."""
        inp = self.session.input
        if inp is None:
            return
        for t0, t1, it in pend:
            if it is not None:
                inp.count_fetch(it, t0, t1)

    def _count_recorded(self, src: Source, pend: list[tuple[float, float, Any]]) -> None:
        inp = self.session.input
        graph_wait = None
        if inp is not None and inp.status == "ok":
            graph_wait = inp.wait_now() - inp.eager_wait  # in-graph fetches, as last read
        sess = self.session
        is_loop = self._fast_loop
        fn = self._fast_fn
        frame = sys._getframe(2)
        n_steps = 0
        t_last = None
        for t0, t1, it in pend:
            if it is not None:  # an eager fetch
                if inp is not None:
                    inp.count_fetch(it, t0, t1)
                continue
            n_steps += 1
            t_last = t1
            eager = 0.0
            if inp is not None:
                eager = inp.eager_wait
                inp.take_fetch_start()  # as a counted step does: the next start-up begins after it
            src.n += 1
            dt = t1 - (src.last if src.last is not None else t1)
            src.total += dt
            src.calls_time += t1 - t0
            src.series.add(src.n, dt)
            wait = None if graph_wait is None else eager + graph_wait
            src.last = t1
            if is_loop:
                if wait is not None:
                    src.steady_wait_s += max(0.0, wait - self._wait_mark)
                    self._wait_mark = wait
                    self._eager_mark = eager
                self._last_loop_t = t1
                self._loop_steps += 1
                self._train_ticks_since_keras += 1
                n = self._loop_steps
            else:
                if wait is not None and src.wait_mark is not None:
                    src.steady_wait_s += max(0.0, wait - src.wait_mark)
                src.wait_mark = wait
                n = src.n
            self._count = n
            self._last_step_time = dt
            if self.containers is not None and _sample_containers(src.n):
                self.containers.sample(frame, n)
        if t_last is None:
            return
        self._count_calls(fn, n_steps)
        # one call of the due handlers for the whole batch, at its last step: they read and
        # sample at most once per batch anyway, and each call runs with cold caches
        if self._count >= sess._due_step or t_last >= sess._due_t:
            sess._on_step(self._count, t_last)

    def _count_calls(self, fn: Any, n: int) -> None:
        calls, key = self.fn_calls, id(fn)
        if len(calls) >= MAX_FN_KEYS and key not in calls:
            calls.clear()
        calls[key] = calls.get(key, 0) + n

    def reset_timing(self) -> None:
        """Forget the last tick times (after the hooks were off) so no interval spans the gap."""
        self._unbatch()
        for s in list(self._sources.values()) + list(self._loops.values()):
            s.last = None
        self._last_loop = None
        self._last_loop_t = None
        self._eager_loop = None

    def loop_key(self, fn: Any) -> Any:
        """The loop a tf.function's calls belong to: its Python function (tf.function objects
        re-created for the same function are one loop), or Keras fit's model."""
        entry = self._fn_keys.get(id(fn))
        if entry is not None and entry[0]() is fn:
            return entry[1]
        py = getattr(fn, "_python_function", None)
        for _ in range(8):
            inner = getattr(py, "__wrapped__", None)
            if inner is None or inner is py:
                break
            py = inner
        code = getattr(py, "__code__", None)
        key: Any = ("function", code if code is not None else id(fn))
        if getattr(py, "__name__", None) in KERAS_STEP_FUNCTIONS:
            model = _keras_model_of(fn)
            if model is not None:
                method = _keras_step_method(fn)
                # the test function (validation, evaluate) is built like the train function and
                # closes over the same model: a key of its own keeps its batches out of the steps
                key = ("keras", id(model)) if method in (None, "train_step") else ("keras:" + method, id(model))
        if len(self._fn_keys) >= MAX_FN_KEYS:
            self._fn_keys.clear()
        try:
            self._fn_keys[id(fn)] = (weakref.ref(fn), key)
        except TypeError:
            pass
        return key

    def _on_traced_apply(self, opt: Any) -> None:
        self._unbatch()
        fn = self._calling
        if fn is None:
            return
        key = self.loop_key(fn)
        names = self._train_fns.get(key)
        if names is None:
            if len(self._train_fns) >= MAX_LOOPS:
                return
            names = self._train_fns[key] = []
        name = _opt_name(opt)
        if name not in names and len(names) < 16:
            names.append(name)

    def on_traced_gradient(self) -> None:
        """A gradient was computed while tracing: the tf.function being called is a training step
        even if it updates its variables by hand (a fallback source of the first rank)."""
        fn = self._calling
        if fn is None:
            return
        key = self.loop_key(fn)
        if key in self._grad_fns or len(self._grad_fns) >= MAX_FN_KEYS:
            return
        self._grad_fns.add(key)
        src = self._sources.get(id(fn))
        if src is not None:
            src.prio = PRIORITY["function"]

    def _on_function_call(self, fn: Any, t0: float, t1: float) -> None:
        self._unbatch()
        self._count_calls(fn, 1)
        key = self.loop_key(fn) if self._train_fns or self._fitting else None
        opts = self._train_fns.get(key) if key is not None else None
        if opts is None and self._fitting and key is not None and key[0] == "keras" and key[1] in self._fitting:
            opts = self._adopt_keras_train_function(fn, key)
        if opts is not None:
            loop = self._loops.get(key)
            if loop is None:
                loop = self._new_loop(key, fn, "function")
                if loop is None:
                    return
                if key[0] == "keras":
                    model = _keras_model_of(fn)
                    loop.model = str(getattr(model, "name", "model"))
                    loop.name = f"{loop.model}.fit"
                    loop.kind = "keras"  # Keras fit's train function
                    loop.per_call = self._per_call.get(id(model), 1)
            if len(opts) != len(loop.optimizers):
                loop.optimizers = list(opts)
            self._train_ticks_since_keras += 1
            self._loop_tick(loop, t0, t1)
            if loop.n >= BATCH_AFTER and self._last_loop is loop and loop.per_call == 1:
                self._fast_fn, self._fast_src, self._fast_loop = fn, loop, True
            return
        if key is not None and str(key[0]).startswith("keras:"):
            # a Keras model's validation or evaluate batch: the next training step starts again
            # (a start-up interval), so that no step interval holds the validation run, and the
            # input waits of its batches are not the training loop's (read now: the next training
            # step's own fetch is all its start-up wait holds)
            self._last_loop = None
            inp = self.session.input
            if inp is not None and inp.active:
                self._wait_mark = inp.wait_now(force=True)
                self._eager_mark = inp.eager_wait
        lp = self._last_loop
        if lp is not None and lp.kind == "function" and lp.last is not None:
            name = str(getattr(fn, "__name__", None) or "function")
            if name in lp.pending_other or len(lp.pending_other) < 8:
                lp.pending_other[name] = lp.pending_other.get(name, 0.0) + (t1 - t0)
        if self.status != "failed":
            self._tick(id(fn), fn, "function", t0, t1)  # the caller catches and disables us on error
            src = self._sources.get(id(fn))
            if src is not None and src is self.primary and not self._loops and src.n >= BATCH_AFTER:
                self._fast_fn, self._fast_src, self._fast_loop = fn, src, False

    def _adopt_keras_train_function(self, fn: Any, key: Any) -> list[str] | None:
        """A running fit calls its model's train function, traced before the hooks were on (the
        model was fitted in an earlier cell or watch() session): a training loop all the same,
        if its graphs compute gradients (one traced now that applied no optimizer, for a model
        with no trainable variables, is not). Looked at once per function."""
        if len(self._train_fns) >= MAX_LOOPS or key in self._not_adopted:
            return None
        if not _computes_gradients(fn):
            if len(self._not_adopted) < MAX_LOOPS:
                self._not_adopted.add(key)
            return None
        model = _keras_model_of(fn)
        opt = getattr(model, "optimizer", None)
        self._train_fns[key] = [_opt_name(opt)] if opt is not None else []
        self.untraced_loops.add(key)
        return self._train_fns[key]

    def _unbatch(self) -> None:
        """Before any other tick: count the recorded steps, and record no more until the next
        steady step says so."""
        if self._pending:
            self.flush()
        self._fast_fn = self._fast_src = None
        self._fast_loop = False

    def _on_eager_apply(self, opt: Any, t0: float, t1: float) -> None:
        self._unbatch()
        oid = id(opt)
        loop = self._eager_loop
        if loop is not None and oid in loop.step_opts:
            if loop.leader != oid:
                return  # another optimizer of the same step
        elif loop is not None and loop.n <= 1 and loop is self._last_loop:
            loop.step_opts.add(oid)  # a second optimizer within the loop's first step: same loop
            name = _opt_name(opt)
            if name not in loop.optimizers:
                loop.optimizers.append(name)
            return
        else:
            key = ("optimizer", oid)
            loop = self._loops.get(key) or self._new_loop(key, opt, "optimizer")
            if loop is None:
                return
            loop.leader = oid
            loop.step_opts.add(oid)
            if not loop.optimizers:
                loop.optimizers.append(_opt_name(opt))
            self._eager_loop = loop
        self._loop_tick(loop, t0, t1)

    def _new_loop(self, key: Any, obj: Any, kind: str) -> Source | None:
        if len(self._loops) >= MAX_LOOPS:
            return None
        name = _opt_name(obj) if kind == "optimizer" else (getattr(obj, "__name__", None) or getattr(obj, "_name", None) or str(obj))
        loop = Source(key, str(name), kind)
        if kind == "function":
            loop.takes_args = _takes_arguments(obj)
        loop.start_step = self._loop_steps
        loop.site = user_frame(sys._getframe(2))
        self._loops[key] = loop
        self.session.reschedule()  # the step count may start again from this loop's
        return loop

    def _loop_tick(self, loop: Source, t0: float, t1: float) -> None:
        """One step of a training loop (see the module docstring for the start-up intervals)."""
        if self.status == "failed":
            return
        inp = self.session.input
        transition = self._last_loop is not loop or loop.last is None
        wait = None
        fetch_t0 = None
        if inp is not None and inp.active:
            wait = inp.wait_now(force=transition)
            fetch_t0 = inp.take_fetch_start()
        k = loop.per_call
        loop.n += k
        dt = None
        if transition:
            # a loop that reads its batches inside its tf.function (fit, a step over an
            # iterator): eager fetches before its first step read other pipelines (preprocessing,
            # a vocabulary pass), not its own; its start-up is the call and its in-graph waits
            in_graph = inp is not None and inp.reads_in_graph(loop.key)
            begin = t0 if fetch_t0 is None or in_graph else min(t0, fetch_t0)
            if self._last_loop_t is not None:
                begin = max(begin, self._last_loop_t)
            if loop.first is None:
                loop.first = t1
                loop.begin = begin
            loop.startup_s += max(0.0, t1 - begin)
            loop.startups += 1
            if loop.pending_other:
                loop.pending_other = {}
            if wait is not None:
                own = wait - self._wait_mark
                if in_graph:
                    own -= inp.eager_wait - self._eager_mark
                loop.startup_wait_s += max(0.0, own)
        else:
            dt = t1 - (loop.last or t1)
            loop.total += dt
            loop.calls_time += t1 - t0
            if loop.pending_other:
                for name, s in loop.pending_other.items():
                    if name in loop.other_fns or len(loop.other_fns) < 8:
                        loop.other_fns[name] = loop.other_fns.get(name, 0.0) + s
                loop.pending_other = {}
            if k > 1:  # a call of k steps: k intervals, each the call's k-th part
                dt /= k
                loop.extra_intervals += k - 1
            loop.series.add(loop.n, dt)
            if wait is not None:
                loop.steady_wait_s += max(0.0, wait - self._wait_mark)
        if wait is not None:
            self._wait_mark = wait
            self._eager_mark = inp.eager_wait
        loop.last = t1
        self._last_loop = loop
        self._last_loop_t = t1
        self._loop_steps += k
        self._count = self._loop_steps
        if dt is not None:
            self._last_step_time = dt
        if self.containers is not None and _sample_containers(loop.n):
            self.containers.sample(sys._getframe(1), self._count)
        sess = self.session
        if self._count >= sess._due_step or t1 >= sess._due_t:  # most steps: no handler is due
            sess._on_step(self._count, t1)

    def finish(self) -> None:
        """At report time: graph waits read since the last step go to the loop that ran last."""
        self._unbatch()
        inp = self.session.input
        loop = self._last_loop
        if inp is None or loop is None or loop.n < 2:
            return
        wait = inp.wait_now(force=True)
        # in-graph waits not yet read at the last step (eager fetches after it fed no step)
        extra = max(0.0, (wait - self._wait_mark) - (inp.eager_wait - self._eager_mark))
        if extra:
            loop.steady_wait_s += extra
        self._wait_mark, self._eager_mark = wait, inp.eager_wait

    def tick(self, key: Any, obj: Any, kind: str, t_start: float, t_end: float | None = None) -> None:
        """Tick a fallback source; a failure here disables step counting only, never the caller's hook."""
        if self.status == "failed":
            return
        if not self._fast_loop:
            # (a fallback source ticking beside a training loop changes none of its figures)
            self._unbatch()
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
            if kind == "function" and self.loop_key(obj) not in self._grad_fns:
                src.prio = NO_GRADIENT_FUNCTION_PRIORITY
                try:
                    src.obj = weakref.ref(obj)
                except TypeError:
                    pass
            self._sources[key] = src
        now = t_end if t_end is not None else t_start
        inp = self.session.input
        wait = inp.wait_now() if inp is not None and inp.active else None
        src.n += 1
        last = src.last
        dt = None
        if last is not None:
            dt = now - last
            src.total += dt
            src.series.add(src.n, dt)
            if t_end is not None:
                src.calls_time += t_end - t_start
            if wait is not None and src.wait_mark is not None:
                src.steady_wait_s += max(0.0, wait - src.wait_mark)
        else:
            begin = t_start
            first_fetch = inp.first_fetch_t0 if inp is not None else None
            if first_fetch is not None:
                begin = min(begin, first_fetch)
            src.first = now
            src.begin = begin
            src.startup_s += max(0.0, now - begin)
            src.startups += 1
            if wait is not None:
                src.startup_wait_s += wait
        src.last = now
        src.wait_mark = wait
        prim = self.primary
        if prim is not src:
            if prim is None or src.prio > prim.prio or (src.prio == prim.prio and src.n > prim.n):
                self.primary = prim = src
                self.session.reschedule()  # the step count now comes from this source
            else:
                return
        if self._loops:
            return  # training loops define the steps
        self._count = src.n
        if dt is not None:
            self._last_step_time = dt
        n = src.n
        if self.containers is not None and _sample_containers(n):
            self.containers.sample(sys._getframe(1), n)
        sess = self.session
        if n >= sess._due_step or now >= sess._due_t:  # most steps: no handler is due
            sess._on_step(n, now)

    def keras_batch_end(self, model: Any) -> None:
        if self._pending:
            self.flush()
        if self._train_ticks_since_keras:
            self._train_ticks_since_keras = 0  # the model's train function counted this step
            return
        self._unbatch()
        now = time.perf_counter()
        key = ("keras", id(model))
        loop = self._loops.get(key)
        if loop is None:
            loop = self._new_loop(key, model, "keras")
            if loop is None:
                return
            loop.name = f"{getattr(model, 'name', 'model')}.fit"
            loop.model = str(getattr(model, "name", "model"))
        self._loop_tick(loop, now, now)

    # -- results ------------------------------------------------------------------------
    def loops(self) -> list[Source]:
        """The loops that define the steps: every training loop, else the best fallback source."""
        self._unbatch()
        if self._loops:
            return [lp for lp in self._loops.values() if lp.n]
        return [self.primary] if self.primary is not None and self.primary.n else []

    @property
    def trains(self) -> bool:
        """Whether the steps counted are training steps: a training loop, or a fallback source
        that computes gradients of variables (not a forward function or an iterator)."""
        return bool(self._loops) or (self.primary is not None and self.primary.prio >= PRIORITY["gradient"])

    def main_loop(self) -> Source | None:
        lps = self.loops()
        return max(lps, key=lambda lp: lp.n) if lps else None

    def run_starts(self) -> list[int]:
        """Step counts at which a training loop or a ``model.fit`` call began, after the first
        (one-off costs follow: a new model's traces and variables, a new input pipeline)."""
        starts = {lp.start_step for lp in self._loops.values()} | {st for st, *_ in self.fit_starts}
        return sorted(st for st in starts if st > 0)

    def trained_untraced(self) -> bool:
        """The steps were counted from a tf.function that this session never saw traced (it was
        traced before the hooks were on: an earlier notebook cell or watch() session) and whose
        graphs compute gradients: a training step that carries no probe of this session."""
        main = self.main_loop()
        if main is not None and main.key in self.untraced_loops:
            return True
        if self._loops or self.primary is None or self.primary.obj is None:
            return False
        fn = self.primary.obj()
        return fn is not None and _computes_gradients(fn)

    def site_at(self, step: int) -> tuple[str, int] | None:
        """Where the training loop or ``fit`` call that ran step ``step`` was started from: the
        last loop or ``fit`` to begin at or before it; else the main loop's place."""
        starts = [(lp.start_step, lp.site) for lp in self._loops.values() if lp.n and lp.site]
        starts += [(st, where) for st, _, where in self.fit_starts if where]
        before = [s for s in starts if s[0] <= step]
        if before:
            return max(before, key=lambda s: s[0])[1]
        main = self.main_loop()
        return main.site if main is not None else None

    def summary(self) -> dict[str, Any]:
        lps = self.loops()
        total_steps = sum(lp.n for lp in lps)
        d: dict[str, Any] = {"source": None, "steps": total_steps, "loops": [lp.to_dict() for lp in lps]}
        main = self.main_loop()
        if main is None:
            return d
        d["source"] = {"kind": main.kind, "name": main.name}
        d["step_time_s"] = main.series.downsample(200)
        n_int = sum(lp.intervals for lp in lps)
        steady = sum(lp.total for lp in lps)
        d["mean_step_time_s"] = (steady / n_int) if n_int else None
        pts = sorted(p[1] for lp in lps for p in lp.series.points)
        if pts:
            d["median_step_time_s"] = pts[len(pts) // 2]
        d["span_s"] = (main.last - main.first) if main.last is not None and main.first is not None else None
        return d


def _steps_per_execution(model: Any) -> int:
    try:
        return max(1, int(getattr(model, "steps_per_execution", 1) or 1))
    except (TypeError, ValueError):
        return 1


def _optimizer_iterations(model: Any) -> int | None:
    """The model's optimizer's update count (one eager read), or None."""
    try:
        it = model.optimizer.iterations
        return int(it.numpy() if hasattr(it, "numpy") else it)
    except Exception:  # noqa: BLE001 - no optimizer (a custom train_step with its own)
        return None


def _sample_containers(n: int) -> bool:
    """Steps 4, 8, 16, 32, ... of a loop, then every 4096th."""
    return n >= 4 and (n & (n - 1) == 0 or n % 4096 == 0)


def _computes_gradients(fn: Any) -> bool:
    """Whether a tf.function's traced graphs compute gradients (``GradientTape`` ops), in its own
    graph or a function it calls (Keras' step inside its loop). Walks the graphs: for a report or
    once per function, not per step."""
    try:
        concrete = fn._list_all_concrete_functions()
    except Exception:  # noqa: BLE001 - another TensorFlow: not known
        return False
    for cf in concrete[:8]:
        try:
            gd = cf.graph.as_graph_def()
        except Exception:  # noqa: BLE001
            continue
        bodies = [gd.node] + [f.node_def for f in gd.library.function]
        if any(n.name.startswith("gradient_tape/") for body in bodies[:64] for n in body):
            return True
    return False


def _takes_arguments(fn: Any) -> bool:
    """Whether a tf.function's Python function has parameters (a step called with none is not
    given its batches: it reads them from its graph, a variable or an iterator)."""
    import inspect

    py = getattr(fn, "python_function", None) or fn
    try:
        return bool(inspect.signature(py).parameters)
    except (TypeError, ValueError):
        return True


def _opt_name(opt: Any) -> str:
    name = getattr(opt, "name", None)
    cls = type(opt).__name__
    inner = getattr(opt, "inner_optimizer", None)
    if inner is not None and inner is not opt:  # LossScaleOptimizer(Adam)
        return f"{cls}({_opt_name(inner)})"
    if isinstance(name, str) and name and name.replace("_", "").lower() != cls.lower():
        return f"{cls} '{name}'"
    return cls
