#!/usr/bin/env python
"""Overhead of `tflint profile`'s instrumentation, measured side by side in one process.

Whole processes on shared machines vary by 20-40% from run to run, so step-time overhead is
measured inside one process: short blocks of training steps alternate with the hooks on and off
(``session.set_enabled``), in ABBA order, and the result is the median of the paired block
ratios (on/off) with its interquartile range and a 95% confidence interval. Each block's median
step is compared as well ("stepwise"), which a machine that pre-empts single steps disturbs less. Three workloads, each at about 1 ms (0.8-1.2 ms)
and about 5 ms per step (the model's width is calibrated to the machine; graph and ``fit`` to 5-6.25 ms,
where the training-health target applies to steps >= 5 ms, eager to 4-6 ms):

* ``graph``  -- a custom loop: ``next()`` on a ``tf.data`` iterator + a ``tf.function`` step
  (a hand-written MLP: variables, ``GradientTape``, ``assign_sub``), traced once with the hooks
  on (in-graph probes) and once, as a twin, with them off, like ``fit``;
* ``fit``    -- Keras ``model.fit``. Its train function is traced once with the hooks on (so it
  carries the in-graph input probe) and a twin model's once with the hooks off; blocks
  alternate between the two, timed from batch end to batch end by a callback;
* ``eager``  -- the same step without ``tf.function``.

Two traces of one step run at speeds a few % apart on their own, for as long as they live
(measured at ~5 ms with the hooks off in both arms: the median ratio of one pair of traces
ranged from 0.94 to 1.05 over 8 and 16 pairs, a spread of about 2.5% per pair), so each arm has
``--twins`` traces (default 8), each ABBA group of blocks runs on the next pair of twins in turn,
and the verdict's 95% confidence interval counts that spread as well as the blocks' noise (a
two-level bootstrap over the pairs of traces and their blocks; the JSON keeps the blocks-only
interval and each pair of traces' median ratio).

``--control`` runs the same pairing with the hooks off in both arms (twin ``k`` against twin
``k + 1``): the spread it shows is the noise floor of the method on the machine at hand.

Start-up overhead is measured separately, as whole processes: ``python -c "import tensorflow"``
against ``python -m tflint profile fixtures/profile/empty.py``, alternated, median difference;
and, less exposed to the machine's noise, inside one process: the time ``tflint profile
empty.py`` takes once TensorFlow is imported (CLI, hooks, report).

Targets (issue 4, the five original signals): step-time overhead <= 2% (graph, fit) / <= 5%
(eager) at ~5 ms steps, <= 5% / <= 15% at ~1 ms steps; start-up <= 0.5 s beyond TensorFlow's own
import. With every signal on, training health included (issue 11): graph and fit <= 3% with steps
>= 5 ms and <= 8% at ~1 ms. The verdict column uses the targets of the signals that are on.

At ~5 ms the paired ratios of a shared 2-core machine have an IQR of about +-7%, and the traces'
own spread adds about +-2.5% per pair of traces: with 8 pairs of traces (the default) the 95%
interval of the median is about +-2.5-3%, with 16 (``--twins 16 --pairs 480``) +-1.5-2.5%, so
judging the 3% target takes a long run.

Usage: python bench/profile_overhead.py [--pairs 100] [--twins 8] [--quick] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EMPTY_SCRIPT = ROOT / "fixtures" / "profile" / "empty.py"
TARGETS = {  # (workload, nominal step ms) -> max overhead ratio, the five original signals (issue 4)
    ("graph", 1): 1.05, ("fit", 1): 1.05, ("eager", 1): 1.15,
    ("graph", 5): 1.02, ("fit", 5): 1.02, ("eager", 5): 1.05,
}
# every signal on, training health included (issue 11): graph and fit loops; eager as above
TARGETS_ALL_SIGNALS = {**TARGETS, ("graph", 1): 1.08, ("fit", 1): 1.08, ("graph", 5): 1.03, ("fit", 5): 1.03}
STARTUP_TARGET_S = 0.5
FEATURES = 64


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median_ci(xs: list[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free confidence interval of the median (95% for ``z`` = 1.96): the order
    statistics at ranks n/2 -/+ z*sqrt(n)/2, from the binomial law of how many values fall
    below the true median. The verdict uses the median; the interval says whether the run
    could tell it from the target."""
    s = sorted(xs)
    n = len(s)
    if not n:
        return float("nan"), float("nan")
    half = z * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)) - 1)
    return s[lo], s[max(lo, hi)]


def clustered_median_ci(groups: list[list[float]], reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 95% confidence interval of the median of the pooled ``groups`` (one group per pair of
    traces) that counts the traces' own speed spread as well as the blocks' noise: a two-level
    bootstrap, which draws the groups with replacement and then each drawn group's values. Two
    traces of one step run at speeds a few % apart for as long as they live, so with a handful
    of traces per arm the order-statistics interval of :func:`median_ci` (block noise only) is
    far too narrow."""
    groups = [g for g in groups if g]
    if not groups:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    medians = []
    for _ in range(reps):
        pooled: list[float] = []
        for g in rng.choices(groups, k=len(groups)):
            pooled += rng.choices(g, k=len(g))
        medians.append(statistics.median(pooled))
    return quantile(medians, 0.025), quantile(medians, 0.975)


# ------------------------------------------------------------------------------ workloads
class Workload:
    name = "?"

    def __init__(self, tf: Any, width: int, batch: int, twins: int = 1) -> None:
        self.tf = tf
        self.width = width
        self.batch = batch
        self.twins = max(1, twins)

    def _model(self, layers: list[Any] | None = None) -> Any:
        """The MLP; on ``layers`` when given (models on the same layers share their weights)."""
        tf = self.tf
        if layers is None:
            layers = [tf.keras.layers.Dense(self.width, activation="relu"),
                      tf.keras.layers.Dense(self.width, activation="relu"),
                      tf.keras.layers.Dense(1)]
        return tf.keras.Sequential([tf.keras.Input((FEATURES,)), *layers])

    def _dataset(self) -> Any:
        tf = self.tf
        import numpy as np

        rng = np.random.default_rng(0)
        n = self.batch * 16
        x = rng.standard_normal((n, FEATURES)).astype("float32")
        y = rng.standard_normal((n, 1)).astype("float32")
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(self.batch, drop_remainder=True)
        return ds.cache().repeat().prefetch(tf.data.AUTOTUNE)

    step_times: list[float] = []  # per-step seconds of the last block

    def block(self, steps: int, hooks_on: bool, twin: int = 0) -> float:
        """Seconds per step over ``steps`` steps (and ``step_times`` per step), on trace ``twin``
        of the arm."""
        raise NotImplementedError


class GraphLoop(Workload):
    """A hand-written MLP step (variables, tape, ``assign_sub``) over a tf.data iterator."""

    name = "graph"

    def __init__(self, tf: Any, width: int, batch: int, depth: int = 2, session: Any = None,
                 twins: int = 1) -> None:
        super().__init__(tf, width, batch, twins)
        self.depth = depth
        self.it = iter(self._dataset())
        sizes = [FEATURES] + [width] * depth + [1]
        self.variables = []
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            self.variables.append(tf.Variable(tf.random.normal([a, b], seed=i) * 0.05, name=f"w{i}"))
            self.variables.append(tf.Variable(tf.zeros([b]), name=f"b{i}"))
        variables = self.variables

        def train_step(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                h = x
                for i in range(0, len(variables), 2):
                    h = h @ variables[i] + variables[i + 1]
                    if i + 2 < len(variables):
                        h = tf.nn.relu(h)
                loss = tf.reduce_mean((h - y) ** 2)
            grads = tape.gradient(loss, variables)
            for g, v in zip(grads, variables):
                v.assign_sub(0.01 * g)
            return loss

        # traced with the hooks on (carrying the in-graph probes) and, as twins, with them off, so
        # that on/off blocks compare the graphs as each would really run; ``twins`` traces per
        # arm, because two traces of one function can differ in speed by a few % on their own
        self.steps: dict[bool, list[Callable[..., Any]]] = {True: [], False: []}
        for k in range(self.twins):
            for on in (True, False):
                if session is not None:
                    session.set_enabled(on)
                self.steps[on].append(self._wrap(train_step))
                self.block(3, on, k)
        if session is not None:
            session.set_enabled(True)

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return self.tf.function(fn)

    def block(self, steps: int, hooks_on: bool, twin: int = 0) -> float:
        it, step = self.it, self.steps[hooks_on][twin]
        perf = time.perf_counter
        marks = [perf()]
        for _ in range(steps):
            x, y = next(it)
            loss = step(x, y)
            marks.append(perf())
        float(loss)  # wait for the last step
        marks[-1] = perf()
        self.step_times = [b - a for a, b in zip(marks, marks[1:])]
        return (marks[-1] - marks[0]) / steps


class EagerLoop(GraphLoop):
    name = "eager"

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn


class FitLoop(Workload):
    name = "fit"

    def __init__(self, tf: Any, width: int, batch: int, session: Any, twins: int = 1) -> None:
        super().__init__(tf, width, batch, twins)
        self.session = session
        self.ds = self._dataset()
        times: list[float] = []
        self.times = times

        class Timer(tf.keras.callbacks.Callback):
            def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                times.append(time.perf_counter())

        self.timer = Timer()
        # models traced with the hooks on (in-graph probes), their twins with the hooks off, all
        # on the same layers: models with weights of their own differ in speed by up to ~7% at
        # ~5 ms steps (where their weights lie in memory), which would swamp the hooks' share
        self.models: dict[bool, list[Any]] = {True: [], False: []}
        layers = self._model().layers
        for _ in range(self.twins):
            for on in (True, False):
                session.set_enabled(on)
                m = self._model(layers)
                m.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
                m.fit(self.ds, epochs=1, steps_per_epoch=3, verbose=0)
                self.models[on].append(m)
        session.set_enabled(True)

    def block(self, steps: int, hooks_on: bool, twin: int = 0) -> float:
        self.times.clear()
        self.models[hooks_on][twin].fit(self.ds, epochs=1, steps_per_epoch=steps + 1, verbose=0,
                                  callbacks=[self.timer])
        t = self.times
        self.step_times = [b - a for a, b in zip(t, t[1:])]
        return (t[-1] - t[0]) / (len(t) - 1)


# ------------------------------------------------------------------------------ measuring
def make(tf: Any, kind: str, width: int, batch: int, session: Any, depth: int = 2, twins: int = 1) -> Workload:
    session.set_enabled(True)  # built as in a profiled run: datasets/iterators seen by the hooks
    if kind == "fit":
        return FitLoop(tf, width, batch, session, twins)
    return (GraphLoop if kind == "graph" else EagerLoop)(tf, width, batch, depth, session, twins)


def calibration_window(kind: str, nominal_ms: int) -> tuple[float, float]:
    """The step times a calibrated workload may have, as multiples of the nominal one. The
    training-health target for graph and ``fit`` loops holds "with steps >= 5 ms" (issue 11), so
    those rows are calibrated to 5-6.25 ms, not to 4-6 ms: a 4.5 ms step would measure a case the
    target does not cover (a fixed cost per step weighs 10% more there). Elsewhere: +-20%."""
    if nominal_ms >= 5 and kind in ("graph", "fit"):
        return 1.0, 1.25
    return 0.8, 1.2


def window_note(kind: str, nominal_ms: int, step_s: float) -> str:
    """"" when ``step_s`` (a row's hooks-off step) lies in the row's calibration window; else a
    note naming the step and the window: a row measured at 4 ms is no verdict on a target for
    steps >= 5 ms (the machine can change speed between calibration and measurement)."""
    lo, hi = (f * nominal_ms for f in calibration_window(kind, nominal_ms))
    ms = step_s * 1e3
    if lo <= ms <= hi:
        return ""
    return f" (measured at {ms:.2f} ms, outside the {lo:g}-{hi:g} ms window of this row)"


def calibrate(tf: Any, kind: str, target_s: float, session: Any,
              window: tuple[float, float] = (0.8, 1.2)) -> tuple[Workload, float]:
    """A workload whose step takes ``window`` times ``target_s`` (hooks off), by scaling the
    width (and, for an eager step that is too slow even when narrow, dropping hidden layers)."""
    batch, width, depth = 64, 64, 2
    lo, hi = window[0] * target_s, window[1] * target_s
    aim = (lo + hi) / 2
    best: tuple[Workload, float] | None = None
    for _ in range(7):
        wl = make(tf, kind, width, batch, session, depth)
        session.set_enabled(False)
        wl.block(5, False)
        measured = statistics.median(wl.block(10, False) for _ in range(5))
        if best is None or abs(measured - aim) < abs(best[1] - aim):
            best = (wl, measured)
        if lo <= measured <= hi:
            break
        if measured > aim and width <= 16:
            if depth == 0 or kind == "fit":
                break  # the step cannot get any cheaper (eager Python overhead)
            depth -= 1
            continue
        exponent = 1.0 if measured < 0.5 * aim else 0.5  # small steps are overhead-bound
        width = int(min(4096, max(16, width * (aim / measured) ** exponent)))
    assert best is not None
    return best


def off_step_s(wl: Workload, session: Any, steps: int) -> float:
    """The workload's step time with the hooks off (on the hooks-off trace of twin 0), in
    blocks of ``steps`` (a ``fit`` block's first steps are slower than the rest)."""
    session.set_enabled(False)
    try:
        wl.block(5, False)
        return statistics.median(wl.block(steps, False) for _ in range(5))
    finally:
        session.set_enabled(True)


def with_twins(tf: Any, kind: str, wl: Workload, target_s: float, window: tuple[float, float], session: Any,
               twins: int, block_s: float) -> tuple[Workload, float]:
    """The calibrated shape traced ``twins`` times per arm, re-measured in blocks as long as the
    paired ones: twins share their weights, so their step can differ from the calibrated
    model's by several %; out of the window, the width is scaled again (at most twice)."""
    lo, hi = window[0] * target_s, window[1] * target_s
    depth = getattr(wl, "depth", 2)
    width = wl.width
    for _ in range(3):
        wl = make(tf, kind, width, wl.batch, session, depth, twins)
        measured = off_step_s(wl, session, max(10, int(block_s / target_s)))
        if lo <= measured <= hi:
            break
        width = int(min(4096, max(16, width * ((lo + hi) / 2 / measured) ** 0.5)))
        if width == wl.width:
            break
    return wl, measured


def paired(wl: Workload, session: Any, pairs: int, steps: int, control: bool = False) -> dict[str, Any]:
    """Median on/off ratio over ABBA-ordered block pairs. ``control``: both arms off (an A/A
    run showing the noise floor of the method on this machine)."""
    ratios: list[float] = []
    step_ratios: list[float] = []
    by_twin: dict[int, list[float]] = {}
    on_times: list[float] = []
    off_times: list[float] = []
    for twin in range(wl.twins):
        for warm in (True, False):  # one untimed round in each state
            session.set_enabled(warm)
            wl.block(steps, warm, twin)
    for i in range(pairs):
        order = (True, False) if i % 2 == 0 else (False, True)
        twin = (i // 2) % wl.twins  # each ABBA group on one pair of twins, in turn
        got: dict[bool, float] = {}
        med: dict[bool, float] = {}
        for on in order:
            session.set_enabled(on and not control)
            # the control runs both arms on the hooks-off traces: twin ``twin`` against the next
            # one, so that it shows the traces' own spread as well as the machine's
            tw = (twin + 1) % wl.twins if control and on else twin
            got[on] = wl.block(steps, on and not control, tw)
            med[on] = statistics.median(wl.step_times)
        step_ratios.append(med[True] / med[False])
        on_times.append(got[True])
        off_times.append(got[False])
        ratio = got[True] / got[False]
        ratios.append(ratio)
        by_twin.setdefault(twin, []).append(ratio)
    session.set_enabled(True)
    groups = [by_twin[k] for k in sorted(by_twin)]  # one per pair of traces
    return {
        "ratio_median": statistics.median(ratios),
        "ratio_q25": quantile(ratios, 0.25),
        "ratio_q75": quantile(ratios, 0.75),
        # the verdict's interval: blocks' noise and the traces' own spread (see clustered_median_ci)
        "ratio_ci95": list(clustered_median_ci(groups)),
        "ratio_ci95_blocks": list(median_ci(ratios)),  # the blocks' noise only
        # the same from each block's median step (robust to the machine pre-empting a step)
        "stepwise_ratio_median": statistics.median(step_ratios),
        "stepwise_ratio_q25": quantile(step_ratios, 0.25),
        "stepwise_ratio_q75": quantile(step_ratios, 0.75),
        "step_s_on": statistics.median(on_times),
        "step_s_off": statistics.median(off_times),
        "pairs": pairs,
        "block_steps": steps,
        "twins": wl.twins,
        "twin_ratio_medians": [statistics.median(g) for g in groups],
    }


def _closure_objects(fn: Any, wanted: set[int], depth: int = 4) -> list[int]:
    """ids among ``wanted`` of the objects that ``fn`` closes over, through nested functions,
    ``__wrapped__`` and bound methods."""
    found: list[int] = []
    todo = [(fn, 0)]
    seen: set[int] = set()
    while todo:
        f, d = todo.pop()
        if f is None or id(f) in seen or d > depth:
            continue
        seen.add(id(f))
        owner = getattr(f, "__self__", None)
        if id(owner) in wanted:
            found.append(id(owner))
        todo.append((getattr(f, "__wrapped__", None), d + 1))
        todo.append((getattr(f, "__func__", None), d + 1))
        for cell in getattr(f, "__closure__", None) or ():
            try:
                obj = cell.cell_contents
            except ValueError:
                continue
            if id(obj) in wanted:
                found.append(id(obj))
            elif callable(obj):
                todo.append((obj, d + 1))
    return found


def trimmed_mean(xs: list[float], cut: float = 0.02) -> float:
    """The mean without the slowest ``cut`` share (the machine pre-empting a call), which keeps
    the steps that do more work now and then (sampled gradient norms) in, unlike a median."""
    s = sorted(xs)
    return statistics.fmean(s[:max(1, len(s) - int(cut * len(s)))])


def probe_cost(tf: Any, wl: Workload, session: Any, calls: int) -> dict[str, Any] | None:
    """The in-graph share of the overhead, measured finely: the steps traced with the hooks on
    (their probes) and their twins traced with them off are called in turn, one call each, with
    the hooks off, on one batch. Alternating single calls cancels the machine's drifts, which
    blocks of steps do not; averaging over the twins cancels the traces' own spread; what is left
    is what the probes add to each step's graph."""
    import gc

    session.set_enabled(False)
    try:
        call: list[tuple[bool, Callable[[], Any]]] = []
        if isinstance(wl, GraphLoop) and not isinstance(wl, EagerLoop):
            x, y = next(wl.it)
            for on in (True, False):
                for fn in wl.steps[on]:
                    call.append((on, lambda f=fn.get_concrete_function(x, y): f(x, y)))
        elif isinstance(wl, FitLoop):
            from tensorflow.python.eager.polymorphic_function.polymorphic_function import Function

            found: dict[int, Any] = {}
            models = {id(m): on for on, ms in wl.models.items() for m in ms}
            for f in [o for o in gc.get_objects() if isinstance(o, Function) and o._name == "one_step_on_data"]:
                # Keras' one_step_on_data closes (a few functions deep) over its model: only this
                # workload's twins count
                owners = _closure_objects(getattr(f, "_python_function", None), set(models))
                if not owners:
                    continue
                for cf in f._list_all_concrete_functions():
                    probed = any(op.name.startswith("tflint_") for op in cf.graph.get_operations())
                    if probed == models[owners[0]]:
                        found.setdefault(owners[0], cf)
            if set(found) != set(models):
                return None
            x, y = next(iter(wl.ds))
            call = [(models[m], lambda f=cf: f((x, y))) for m, cf in found.items()]
            # and each model's whole train function (Keras' step loop around the traced step:
            # the input probe included), on one shared iterator
            it = iter(wl.ds)
            call += [(on, lambda f=m.train_function: f(it)) for on, ms in wl.models.items() for m in ms]
        else:
            return None
        for _, c in call:
            c()
        times: list[list[float]] = [[] for _ in call]
        perf = time.perf_counter
        for i in range(calls):
            for j in (range(len(call)) if i % 2 else reversed(range(len(call)))):
                t0 = perf()
                call[j][1]()
                times[j].append(perf() - t0)
    finally:
        session.set_enabled(True)

    n_step = len(call) if not isinstance(wl, FitLoop) else 2 * wl.twins  # the traced steps; then train functions

    def arm(on: bool, stat: Callable[[list[float]], float], part: slice = slice(0, n_step)) -> float:
        return statistics.fmean(stat(t) for (o, _), t in list(zip(call, times))[part] if o == on)

    on_s, off_s = arm(True, statistics.median), arm(False, statistics.median)
    mean_on, mean_off = arm(True, trimmed_mean), arm(False, trimmed_mean)
    out = {"graph_call_s_on": on_s, "graph_call_s_off": off_s, "graph_added_s": on_s - off_s,
           "graph_added_mean_s": mean_on - mean_off, "calls": calls, "twins": wl.twins,
           "twin_medians_s": {"on": [statistics.median(t) for (o, _), t in list(zip(call, times))[:n_step] if o],
                              "off": [statistics.median(t) for (o, _), t in list(zip(call, times))[:n_step] if not o]}}
    if n_step < len(call):  # fit: Keras' whole train function, probed against plain, hooks off
        rest = slice(n_step, len(call))
        out["train_fn_call_s_on"] = arm(True, statistics.median, rest)
        out["train_fn_call_s_off"] = arm(False, statistics.median, rest)
        out["train_fn_added_s"] = out["train_fn_call_s_on"] - out["train_fn_call_s_off"]
    return out


def startup(runs: int) -> dict[str, Any]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cmds = {
        "import": [sys.executable, "-c", "import tensorflow"],
        "profile": [sys.executable, "-m", "tflint", "profile", str(EMPTY_SCRIPT)],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for i in range(runs):
        order = list(cmds) if i % 2 == 0 else list(reversed(cmds))
        for key in order:
            t0 = time.perf_counter()
            subprocess.run(cmds[key], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
            times[key].append(time.perf_counter() - t0)
    diffs = [p - q for p, q in zip(times["profile"], times["import"])]
    # the same inside one process, where the machine's noise between processes does not count:
    # time to import TensorFlow, then everything tflint adds (CLI, hooks, report) on top of it
    code = (
        "import sys, time\n"
        "t0 = time.perf_counter()\nimport tensorflow\nt1 = time.perf_counter()\n"
        f"sys.argv = ['tflint', 'profile', {str(EMPTY_SCRIPT)!r}]\n"
        "from tflint.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "t2 = time.perf_counter()\nprint('PHASES', t1 - t0, t2 - t1, file=sys.stderr)\n"
    )
    beyond: list[float] = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=True)
        line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("PHASES"))
        beyond.append(float(line.split()[2]))
    return {
        "in_process_beyond_import_s_median": statistics.median(beyond),
        "in_process_beyond_import_s_min": min(beyond),
        "import_tensorflow_s": statistics.median(times["import"]),
        "tflint_profile_empty_s": statistics.median(times["profile"]),
        "overhead_s_median": statistics.median(diffs),
        "overhead_s_q25": quantile(diffs, 0.25),
        "overhead_s_q75": quantile(diffs, 0.75),
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=100, help="on/off block pairs per workload (0: only the probe cost)")
    ap.add_argument("--block-s", type=float, default=0.08, help="approximate duration of one block")
    ap.add_argument("--workloads", default="graph,fit,eager")
    ap.add_argument("--steps-ms", default="1,5", help="nominal step times to calibrate to")
    ap.add_argument("--startup-runs", type=int, default=6, help="0 to skip")
    ap.add_argument("--control", action="store_true",
                    help="A/A run: both arms with the hooks off (the method's noise floor)")
    ap.add_argument("--quick", action="store_true", help="fewer pairs and start-up runs")
    ap.add_argument("--signals", default=None,
                    help="comma-separated signal kinds to turn on (default: all), e.g. to see one signal's share")
    ap.add_argument("--threads", type=int, default=0,
                    help="TensorFlow's inter- and intra-op threads (default: TensorFlow's choice); 1 makes the "
                         "steps serial, which is steadier on a shared machine and does not let the probes overlap "
                         "with the step")
    ap.add_argument("--probe-calls", type=int, default=300,
                    help="alternating calls of the probed and the plain traced step, to measure what the "
                         "in-graph probes add per step (0 to skip)")
    ap.add_argument("--twins", type=int, default=8,
                    help="traces per arm, taken in turn: two traces of one step can differ in speed by a few "
                         "%% on their own (1: one trace with the hooks on against one with them off)")
    ap.add_argument("--json", dest="json_path", help="write the results here")
    args = ap.parse_args(argv)
    if args.quick:
        args.pairs, args.startup_runs = min(args.pairs, 10), min(args.startup_runs, 2)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    import importlib

    import tensorflow as tf

    if args.threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    watch = importlib.import_module("tflint.runtime.watch").watch
    results: list[dict[str, Any]] = []
    print(f"{'workload':8} {'step':>5} {'width':>9} {'step off':>10} {'step on':>10} "
          f"{'ratio':>7} {'IQR':>15} {'stepwise':>8} {'target':>7}  verdict", flush=True)
    with watch(signals=args.signals) as session:
        for ms in [int(s) for s in args.steps_ms.split(",") if s]:
            for kind in [w for w in args.workloads.split(",") if w]:
                window = calibration_window(kind, ms)
                wl, measured = calibrate(tf, kind, ms / 1000.0, session, window)
                if args.twins > 1:  # the calibrated shape, traced ``twins`` times per arm
                    wl, measured = with_twins(tf, kind, wl, ms / 1000.0, window, session, args.twins, args.block_s)
                steps = max(10, int(args.block_s / max(measured, 1e-4)))
                # a row at another step time is judged by the target of its range: ~1 ms below 5 ms,
                # the ">= 5 ms" one from 5 ms up
                target = (TARGETS_ALL_SIGNALS if args.signals is None else TARGETS)[(kind, 1 if ms < 5 else 5)]
                r: dict[str, Any] = {"control": args.control, "workload": kind, "nominal_ms": ms, "width": wl.width,
                                     "hidden_layers": getattr(wl, "depth", 2), "target_ratio": target}
                results.append(r)
                shape = f"{wl.width}x{getattr(wl, 'depth', 2)}"
                if args.pairs > 0:
                    r.update(paired(wl, session, args.pairs, steps, control=args.control))
                    r["meets_target"] = r["ratio_median"] <= target
                    lo, hi = r["ratio_ci95"]
                    noise = " (target inside the 95% CI)" if lo <= target <= hi else ""
                    outside = window_note(kind, ms, r["step_s_off"])
                    r["step_in_window"] = not outside
                    noise += outside
                    print(f"{kind:8} {ms:>3}ms {shape:>9} {r['step_s_off'] * 1e3:>8.3f}ms "
                          f"{r['step_s_on'] * 1e3:>8.3f}ms {r['ratio_median']:>7.3f} "
                          f"{r['ratio_q25']:>7.3f}-{r['ratio_q75']:<7.3f} {r['stepwise_ratio_median']:>8.3f} "
                          f"{target:>7.2f}  "
                          f"{'ok' if r['meets_target'] else 'OVER'}{noise}; 95% CI {lo:.3f}-{hi:.3f} (traces "
                          f"{min(r['twin_ratio_medians']):.3f}-{max(r['twin_ratio_medians']):.3f})", flush=True)
                else:
                    print(f"{kind:8} {ms:>3}ms {shape:>9} (no paired blocks: --pairs 0)", flush=True)
                if args.probe_calls and not args.control:
                    pc = probe_cost(tf, wl, session, args.probe_calls)
                    if pc is not None:
                        r["probe_cost"] = pc
                        print(f"{'':8} {'':5} in-graph probes: +{pc['graph_added_s'] * 1e6:.1f} us per step "
                              f"(median call; mean call +{pc['graph_added_mean_s'] * 1e6:.1f} us) "
                              f"({pc['graph_call_s_off'] * 1e3:.3f} -> {pc['graph_call_s_on'] * 1e3:.3f} ms per call "
                              f"of the traced step, alternating calls, hooks off, {pc['twins']} twin(s) each)",
                              flush=True)
                        if "train_fn_added_s" in pc:
                            print(f"{'':8} {'':5} Keras' whole train function: +{pc['train_fn_added_s'] * 1e6:.1f} us "
                                  f"per call ({pc['train_fn_call_s_off'] * 1e3:.3f} -> "
                                  f"{pc['train_fn_call_s_on'] * 1e3:.3f} ms, alternating calls, hooks off)", flush=True)
        status = session.status()
    out: dict[str, Any] = {"step_overhead": results, "session_status": status}
    if args.startup_runs > 0:
        s = startup(args.startup_runs)
        s["target_s"] = STARTUP_TARGET_S
        s["meets_target"] = s["in_process_beyond_import_s_median"] <= STARTUP_TARGET_S
        out["startup"] = s
        print(f"start-up: import tensorflow {s['import_tensorflow_s']:.2f}s, tflint profile "
              f"empty.py {s['tflint_profile_empty_s']:.2f}s, overhead {s['overhead_s_median']:+.2f}s "
              f"(IQR {s['overhead_s_q25']:+.2f}..{s['overhead_s_q75']:+.2f}); in one process, "
              f"after TensorFlow's import: {s['in_process_beyond_import_s_median']:.2f}s median, "
              f"{s['in_process_beyond_import_s_min']:.2f}s best; target {STARTUP_TARGET_S}s: "
              f"{'ok' if s['meets_target'] else 'OVER'}", flush=True)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
