"""Training health: the per-step probe behind ``nan-inf``, ``dead-parameter``,
``exploding-gradient``, ``vanishing-gradient``, ``loss-stall`` and ``loss-broadcast``.

Fed by the ``GradientTape.gradient`` / optimizer / tape-enter wrappers of
:mod:`tflint.runtime.gradients` (hook points ``on_gradient``, ``on_apply``, ``on_tape_enter``) and
by the session's step tick (``on_step``). What it costs:

* **inside a ``tf.function``** (custom loops and Keras ``fit``), added once per trace of a
  gradient call, with no control flow and nothing read back during the step: a shared counter
  increment, one ``l2_loss`` per gradient, one sum per tracked tensor (the few tensors around
  risky ops that :mod:`tflint.runtime.nan_inf` picks, constants left out), one stack of those
  scalars and the loss, one finiteness test of the stack, and two scatter ops into a small state
  vector: the running sums of the loss and the squared norms (``ResourceScatterAdd``) and the
  first non-finite step of each tracked value (``ResourceScatterMin``, which also keeps the label
  range) — ``V + R + 10`` small ops for ``V`` gradients and ``R`` tracked tensors, plus four when the
  labels are seen (less the sum of the labels when they are a tracked input). No
  ``SelectV2``: on CPU one costs about as much as the rest of the probe. Gradients of more than
  ``COND_MIN_ELEMENTS`` elements in all get their norms only every ``LARGE_SAMPLE_EVERY``-th
  step (a pass over them is memory-bound), their whole update under a lowered cond, and the
  loss's part is packed and latched on its own, so that it runs during the backward pass and
  only the cond's Switches wait for the last gradient.
  The state vector is read every ``SAMPLE_EVERY`` steps (after ``DENSE_READ_STEPS`` steps, at
  most every ``READ_INTERVAL_S``): the series get the mean loss and the
  mean squared norms since the last read, so they do not alias with the order of the batches;
* **eagerly**: the loss is read each step (one host copy of a scalar); gradients are reduced to
  squared norms with numpy every ``SAMPLE_EVERY`` steps and when the loss is not finite.

A gradient of a loss that ``optimizer.scale_loss`` scaled for mixed precision (``fit`` does it,
custom loops with a ``LossScaleOptimizer`` do) is measured unscaled: the probe takes the loss
before scaling and divides the squared norms by the scale² the step used; under dynamic scaling a
step whose gradients overflowed, which the optimizer skips, is left out of the norms. About ten
ops more, for such probes only.

Locating a non-finite value's origin (the decoding of the first-step vector into an op, a line
and a cause) runs once, at report time, and only when one was seen.
"""

from __future__ import annotations

import itertools
import math
import weakref
from typing import Any

from tflint.runtime.hookbase import DENSE_STEPS, NEVER, Hook, next_tick, user_site_tf_stack

KIND = "training-health"
SAMPLE_EVERY = 8
# the graph probes are read every SAMPLE_EVERY steps for the first DENSE_READ_STEPS steps (short
# runs keep their resolution), then on a READ_INTERVAL_S clock grid shared with the input hook's
# reads (a read is an eager op, a host copy and Python run right after a step, with cold caches:
# ~150-280 µs in place; at 1 ms steps, reading every 8 steps costs ~2% of the step time, every
# 0.1 s ~0.2% of any run)
DENSE_READ_STEPS = DENSE_STEPS
READ_INTERVAL_S = 0.2
# gradients this large (512 KB of float32) get their norms and finiteness sampled every
# LARGE_SAMPLE_EVERY steps, not computed every step: a pass over them is memory-bound, ~0.4 ns
# per element on a CPU, and it ends the step (it waits for the last gradient). Measured on
# Keras `fit` steps of 2.5-4.5 ms with 6 traces per arm in one process: at 186k elements the
# sampled probe adds ~140 µs per step against ~210 µs for norms on every step; at 82k elements
# the two cost the same (~115 µs)
COND_MIN_ELEMENTS = 1 << 17
LARGE_SAMPLE_EVERY = 32
MAX_PROBES_READ = 8
STALE_READ_S = 1.0
MAX_PROBES = 256
MAX_LOSS_SITES = 16
MAX_NEW_VARIABLE_STARTS = 64
EAGER_SITE_CALLS = 64  # eager gradient calls whose place in the code is looked up (a GAN shows both at once)
MAX_WALK = 20000  # ops walked back from the loss and the gradients, per probe
MAX_TRACKED_TENSORS = 4000
MAX_VARIABLES = 4096
SNAPSHOT_MAX_ELEMENTS = 8_000_000
HEALTH_KINDS = ("nan-inf", "dead-parameter", "exploding-gradient", "vanishing-gradient", "loss-stall", "loss-broadcast")

_cell_ids = itertools.count()


class Cell:
    """A resource variable made of raw ops: invisible to ``tf.function``'s variable-creation
    check (which forbids ``tf.Variable`` on later traces) and to Keras' tracking."""

    def __init__(self, tf: Any, init: Any) -> None:
        from tensorflow.python.ops import gen_resource_variable_ops as rv

        self._rv = rv
        self.dtype = init.dtype
        self.shape = init.shape
        self.handle = rv.var_handle_op(dtype=init.dtype, shape=init.shape,
                                       shared_name=f"tflint_health_{next(_cell_ids)}")
        rv.assign_variable_op(self.handle, init)

    def read(self) -> Any:
        t = self._rv.read_variable_op(self.handle, self.dtype)
        # the raw read has no static shape: give it one, or a cond on the step number adds a
        # Squeeze of its predicate to every step
        t.set_shape(self.shape)
        return t

    def assign(self, value: Any) -> Any:
        return self._rv.assign_variable_op(self.handle, value)

    def numpy(self) -> Any:
        return self.read().numpy()


def var_name(v: Any) -> str:
    for attr in ("path", "name"):
        try:
            n = getattr(v, attr, None)
        except Exception:  # noqa: BLE001
            n = None
        if isinstance(n, str) and n:
            return n[:-2] if n.endswith(":0") else n
    return f"<{type(v).__name__}>"


def layer_of(name: str) -> str:
    """``sequential/dense_1/kernel`` -> ``sequential/dense_1``; ``w0`` -> ``w0``."""
    return name.rsplit("/", 1)[0] if "/" in name else name


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return list(x)
    try:
        from tensorflow.python.util import nest

        return nest.flatten(x)
    except Exception:  # noqa: BLE001
        return [x]


def _is_float_tensor(t: Any) -> bool:
    try:
        return bool(t.dtype.is_floating)
    except Exception:  # noqa: BLE001
        return False


class Probe:
    """What one trace of one ``tape.gradient`` call adds to its graph, and how to read it."""

    def __init__(self, pid: int, site: Any, names: list[str], var_ids: list[int]) -> None:
        self.pid = pid
        self.site = site
        self.names = names  # sources with a gradient, in order
        self.var_ids = var_ids
        # the state vector: sums of [steps, loss, norm samples, ½‖g_0‖²...], a scratch slot, the
        # first non-finite step of each tracked tensor (inf: never), the smallest label and minus
        # the largest (when labels are seen), a scratch slot
        self.status: Cell | None = None
        self.tensors: list[dict[str, Any]] = []  # what each tracked entry is
        self.last_sums: list[float] = [0.0]
        self.calls = 0
        self.labels: tuple[float, float, int] | None = None  # the smallest and largest label, over how many steps
        self.first_bad: int | None = None  # first step the loss or a gradient was not finite
        self.first_steps: list[int] = []  # first non-finite step of each tracked tensor (-1: never)
        self.layout = (0, 0, 0)  # (gradients, tracked tensors, label stats) in the state vector
        self.localised: dict[str, Any] | None = None
        # under a strategy with several replicas in sync, the gradient calls of one step (one per
        # replica): each replica's loss is its share of the global batch's, so their sum is the loss
        self.replica_group: Any = None
        self.sample_every = 1  # a large model: gradients checked every LARGE_SAMPLE_EVERY steps
        # False: a gradient with respect to inputs only (a gradient penalty, a saliency map): its
        # target is no training loss and its norm no training gradient; probed for NaN only
        self.trains = True
        # the tf.function whose call traced the probe (a weakref; None: not traced by a call), its
        # eager calls when the probe was last read, and when: a probe whose function has not run
        # since is not read again for up to STALE_READ_S (each read is an eager op and a host copy)
        self.fn: Any = None
        self.read_calls: int | None = None
        self.read_t = 0.0

    @property
    def sampled_gradients(self) -> bool:
        return self.sample_every > 1


_NO_SITE = object()


class SiteSeries:
    """The loss and global gradient norm of the gradient calls made at one place in the code."""

    def __init__(self, loss: Any, grad_norm: Any) -> None:
        self.loss = loss
        self.grad_norm = grad_norm
        self._sum = 0.0
        self._n = 0
        self.calls = 0  # eager gradient calls made here

    def add_eager_loss(self, call: int, loss: float) -> None:
        """Eagerly, the mean over each ``SAMPLE_EVERY`` calls made here (the first alone)."""
        self._sum += loss
        self._n += 1
        if self._n >= SAMPLE_EVERY or len(self.loss) == 0:
            self.loss.add(call, self._sum / self._n)
            self._sum = 0.0
            self._n = 0


class HealthMonitor(Hook):
    kind = KIND

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.probes: list[Probe] = []
        self.eager_calls = 0
        self._eager_sum = 0.0
        self._eager_n = 0
        self.graph_calls_cell: Cell | None = None
        self.loss = self.store.series("loss", 512)
        self.grad_norm = self.store.series("grad_norm", 512)
        self.layer_norms: dict[str, Any] = {}  # layer -> Series
        self.layer_order: list[str] = []
        self.variables: dict[int, dict[str, Any]] = {}  # id(var) -> info (weakref, name, ...)
        self.applied_ids: dict[int, int] = {}  # id(var) -> id of the optimizer that applied it last
        self.optimizers: dict[int, Any] = {}
        self.applies = 0
        self.empty_sources_sites: list[Any] = []
        # gradient call site -> names of the variables differentiated there (see separate_losses)
        self.loss_sites: dict[Any, set[str]] = {}
        # gradient call site -> its own loss and global-norm series (a GAN's two players each
        # have theirs; the shared series interleave them); eager calls find their site by the
        # first variable they differentiate
        self.site_series: dict[Any, SiteSeries] = {}
        self._eager_site: dict[int, Any] = {}
        # (step count, eager gradient calls, the gradient call's place in the code) where a
        # gradient call differentiated only variables never differentiated before, after others
        # had been: a new model or a new optimisation (a style transfer's second image) begins,
        # from another loss
        self.new_variable_starts: list[tuple[int, int, tuple[str, int] | None]] = []
        # the most elements of a gradient's target: tape.gradient sums a target that is not a
        # scalar (an unreduced loss), and its gradient is that many times the mean's
        self.target_elements = 1
        self.nonfinite: dict[str, Any] | None = None  # first non-finite event
        # id(scaled loss) -> (scaled loss, loss, scale, dynamic): what ``optimizer.scale_loss``
        # returned lately (mixed precision). A gradient of a scaled loss is judged on the loss and
        # the gradients unscaled; under dynamic scaling a step whose gradients overflowed is
        # skipped by the optimizer, and by the norms
        self._scaled: dict[int, tuple[Any, Any, Any, bool]] = {}
        self._sample_step = 0  # step of the last read
        self._next_read = 0.0
        self._graph_steps: dict[int, tuple[Any, Any]] = {}  # id(graph) -> (weakref, its step tensor)
        self._tf: Any = None

    # the individual signals (hooks of their own kinds; each can fail on its own)
    def sig(self, kind: str) -> Any:
        h = self.session.hooks.get(kind)
        return h if h is not None and h.active else None

    def check(self) -> str | None:
        try:
            import numpy  # noqa: F401
        except ImportError as exc:
            return f"numpy not importable: {exc}"
        g = self.session.gradients
        if g is None:
            return "needs the GradientTape hook, which is not installed"
        return None

    def _install(self) -> None:
        import tensorflow as tf

        self._tf = tf

    # -- hook points -----------------------------------------------------------------------
    def on_tape_enter(self, tape: Any, eager: bool) -> None:
        b = self.sig("loss-broadcast")
        if b is not None and eager:
            try:
                b.on_eager_tape_enter(tape)
            except Exception as exc:  # noqa: BLE001
                b.fail(exc, "eager tape enter")

    def on_gradient(self, tape: Any, target: Any, sources: Any, result: Any, eager: bool, trains: bool = True) -> None:
        """A ``tape.gradient`` call; ``trains``: its sources hold variables (else it is a gradient
        with respect to inputs only)."""
        flat_sources = _flat(sources)
        flat_grads = _flat(result)
        if len(flat_grads) != len(flat_sources):
            return
        if not flat_sources:
            d = self.sig("dead-parameter")
            if d is not None and len(self.empty_sources_sites) < 8:
                site = user_site_tf_stack()
                self.empty_sources_sites.append(site)
                try:
                    d.on_empty_sources(site)
                except Exception as exc:  # noqa: BLE001
                    d.fail(exc, "empty gradient sources")
            return
        self._remember_variables(flat_sources, flat_grads)
        b = self.sig("loss-broadcast")
        if b is not None:
            try:
                b.check_target(tape, target, eager)
            except Exception as exc:  # noqa: BLE001
                b.fail(exc, "loss shape check")
        # a gradient with respect to inputs only (WGAN-GP's penalty, a saliency map) is no
        # training loss: it is checked for NaN, and kept out of the loss and norm series and of
        # the loss sites (it would pass for a GAN's third player)
        if trains and (not eager or self.eager_calls < EAGER_SITE_CALLS):
            n = _elements(target)
            if n > self.target_elements:
                self.target_elements = n
        if eager:
            if self.eager_calls < EAGER_SITE_CALLS and trains:
                site = user_site_tf_stack()
                self._note_loss_site(site, flat_sources)
                if len(self._eager_site) < MAX_LOSS_SITES:
                    self._eager_site.setdefault(id(flat_sources[0]), site)
            self._eager_step(target, flat_sources, flat_grads, trains)
        else:
            n_probes = len(self.probes)
            self._build_probe(target, flat_sources, flat_grads)
            if len(self.probes) > n_probes:
                self.probes[-1].trains = trains
                if trains:
                    self._note_loss_site(self.probes[-1].site, flat_sources)

    def on_scale_loss(self, opt: Any, loss: Any, scaled: Any, eager: bool) -> None:
        """``optimizer.scale_loss(loss)`` returned ``scaled`` (a loss scaled for mixed precision):
        remembers the loss and the scale, for a gradient of ``scaled`` to be unscaled. In a graph
        the scale is the other operand of the multiplication (the value the step used); eagerly
        it is the optimizer's scale, read when a gradient is sampled (before the update changes
        it)."""
        if scaled is loss or loss is None:
            return
        dynamic = _dynamic_scaling(opt)
        if eager:
            scale: Any = _eager_scale(opt)
        else:
            op = getattr(scaled, "op", None)
            if op is None or op.type != "Mul" or len(op.inputs) != 2:
                return
            a, b = op.inputs
            scale = b if a is loss or a.op is getattr(loss, "op", None) else a
        if scale is None:
            return
        if len(self._scaled) >= 8:
            self._scaled.pop(next(iter(self._scaled)))
        self._scaled[id(scaled)] = (scaled, loss, scale, dynamic)

    def _unscaled(self, target: Any) -> tuple[Any, Any, bool] | None:
        """(loss, scale, dynamic) when ``target`` is a loss that ``scale_loss`` scaled."""
        if not self._scaled:
            return None
        entry = self._scaled.get(id(target))
        if entry is None or entry[0] is not target:
            return None
        return entry[1], entry[2], entry[3]

    def _note_loss_site(self, site: Any, sources: list[Any]) -> None:
        if len(self.loss_sites) < MAX_LOSS_SITES or site in self.loss_sites:
            self.loss_sites.setdefault(site, set()).update(var_name(s) for s in sources)
            if site not in self.site_series:
                n = len(self.site_series)
                self.site_series[site] = SiteSeries(self.store.series(f"loss@{n}", 512),
                                                    self.store.series(f"grad_norm@{n}", 512))

    def segments(self, points: list[Any], graph_steps: bool) -> list[tuple[list[Any], Any]]:
        """``points`` of a step-indexed series split into the runs judged apart: at each
        ``model.fit`` call, and where gradients were first taken of variables never
        differentiated before (a new model or optimisation); a point at a start belongs to the
        part before it (it holds that part's last steps). Each part comes with the place in the
        code it ran from: its ``fit`` call or its gradient call (None where it is not known).
        ``graph_steps``: the x are step counts (else eager gradient calls)."""
        from tflint.profiler import stats

        steps = self.session.steps
        starts = list(steps.fit_starts if steps is not None else []) + list(self.new_variable_starts)
        keyed = sorted((s[0] if graph_steps else s[1], s[2]) for s in starts)
        out = []
        for part in stats.split_at(points, [x for x, _ in keyed]):
            x0 = part[0][0]
            site = None
            for x, where in keyed:  # the last start before the part's first point
                if x < x0 and where is not None:
                    site = where
            out.append((part, site))
        return out

    def site_of(self, window: Any = None, norms: bool = False) -> Any:
        """The gradient call site whose loss (or, with ``norms``, gradient-norm) series has the
        most points in ``window`` (first and last step); without one, or where no series has
        any, the last probe's site."""
        best, site = 0, None
        if window is not None:
            x0, x1 = window
            for where, ss in self.site_series.items():
                n = sum(1 for x, _ in (ss.grad_norm if norms else ss.loss).points if x0 <= x <= x1)
                if n > best:
                    best, site = n, where
        if site is None and self.probes and self.probes[-1].site:
            site = self.probes[-1].site
        return site

    def site_groups(self) -> list[tuple[Any, SiteSeries]]:
        """The gradient call sites whose losses are judged apart (see :meth:`separate_losses`),
        each with its own series; empty when the run has one loss."""
        if not self.separate_losses():
            return []
        return [(site, ss) for site, ss in self.site_series.items() if len(ss.loss) or len(ss.grad_norm)]

    def separate_losses(self) -> bool:
        """Two gradient calls, at two places in the code, differentiate disjoint sets of variables:
        a GAN's discriminator and generator losses (or two models trained side by side). Their
        losses share the loss series, and neither is meant to fall with the other. The replicas of
        a strategy make their gradient calls at one place."""
        sets = list(self.loss_sites.values())
        return any(a.isdisjoint(b) for i, a in enumerate(sets) for b in sets[i + 1:])

    def on_apply(self, opt: Any, grads: list[Any], variables: list[Any]) -> None:
        self.applies += 1
        if len(self.optimizers) < 16:
            self.optimizers.setdefault(id(opt), weakref.ref(opt) if _weakrefable(opt) else (lambda o=opt: o))
        for g, v in zip(grads, variables):
            if g is not None and (len(self.applied_ids) < MAX_VARIABLES or id(v) in self.applied_ids):
                self.applied_ids[id(v)] = id(opt)

    def on_step(self, step: int, now: float) -> tuple[float, float]:
        """Reads the probes when due; returns when the next read is due."""
        next_step = self._sample_step + SAMPLE_EVERY
        if step < next_step and step >= self._sample_step:
            return next_step, NEVER
        if step > DENSE_READ_STEPS and now < self._next_read:
            return NEVER, self._next_read
        self._sample_step = step
        self._next_read = next_tick(now, READ_INTERVAL_S)
        self._read_probes(self.probes[-MAX_PROBES_READ:], now=now)
        d = self.sig("dead-parameter")
        if d is not None:
            try:
                d.snapshot(self.variables)
            except Exception as exc:  # noqa: BLE001
                d.fail(exc, "variable snapshot")
        return step + SAMPLE_EVERY, NEVER

    def defer_read(self, now: float) -> None:
        """Hooks turned on again: the next timed read is at the next tick of the clock grid, not
        at once for a tick that passed while they were off (the probes kept counting)."""
        self._next_read = max(self._next_read, next_tick(now, READ_INTERVAL_S))

    def read_now(self) -> None:
        """Read every probe at once (a new ``fit`` begins: the steps since the last read belong
        to the one before)."""
        self._read_probes(self.probes, final=True)

    def collect(self) -> None:
        """Final read of every probe, once, when the report is built."""
        self._read_probes(self.probes, final=True)
        n = self.session.hooks.get("nan-inf")
        if n is not None and n.status != "ok":
            n = None
        for p in self.probes:
            if p.first_bad is not None and p.localised is None and n is not None:
                try:
                    p.localised = n.localise(p)
                except Exception as exc:  # noqa: BLE001
                    n.fail(exc, "localisation")

    # -- variables -------------------------------------------------------------------------
    def _remember_variables(self, sources: list[Any], grads: list[Any]) -> None:
        had = bool(self.variables)
        new = known = 0
        for s, g in zip(sources, grads):
            key = id(s)
            info = self.variables.get(key)
            if info is None:
                if len(self.variables) >= MAX_VARIABLES or not hasattr(s, "assign"):
                    continue
                try:
                    ref = weakref.ref(s)
                except TypeError:
                    continue
                new += 1
                name = var_name(s)
                info = self.variables[key] = {"ref": ref, "name": name, "layer": layer_of(name),
                                              "none": 0, "grads": 0, "maxsq": 0.0, "sampled": 0}
                lay = info["layer"]
                if lay not in self.layer_norms:
                    self.layer_order.append(lay)
                    self.layer_norms[lay] = self.store.series(f"grad_norm.{lay}", 256) if len(self.layer_norms) < 64 else None
            else:
                known += 1
            if g is None:
                info["none"] += 1
                if "none_site" not in info:
                    info["none_site"] = user_site_tf_stack()
            else:
                info["grads"] += 1
        if had and new and not known and len(self.new_variable_starts) < MAX_NEW_VARIABLE_STARTS:
            steps = self.session.steps
            self.new_variable_starts.append((steps.count if steps is not None else 0, self.eager_calls,
                                             user_site_tf_stack()))

    # -- eager -----------------------------------------------------------------------------
    def _eager_step(self, target: Any, sources: list[Any], grads: list[Any], trains: bool = True) -> None:
        import numpy as np

        n = self.eager_calls + 1
        if trains:
            self.eager_calls = n
        unscaled = self._unscaled(target)
        loss = _eager_loss(target if unscaled is None else unscaled[0])
        ss = self.site_series.get(self._eager_site.get(id(sources[0]), _NO_SITE)) if self._eager_site else None
        if not trains:  # checked for NaN only, on every call
            if loss is not None and not math.isfinite(loss) and self.nonfinite is None:
                self._eager_nonfinite({"step": n, "tensor": "the target of a gradient with respect to inputs",
                                       "loss": loss, "variable": None, "gradient_of": None})
            return
        if loss is not None:  # the mean over each SAMPLE_EVERY steps, like the graph probe's
            self._eager_sum += loss
            self._eager_n += 1
            if self._eager_n >= SAMPLE_EVERY or n == 1:
                self.loss.add(n, self._eager_sum / self._eager_n)
                self._eager_sum = 0.0
                self._eager_n = 0
            if ss is not None:
                ss.add_eager_loss(n, loss)
        # sampled per place: two gradient calls a step (a GAN) would otherwise only ever sample one
        k = n
        if ss is not None:
            ss.calls += 1
            k = ss.calls
        sample = k % SAMPLE_EVERY == 1 or SAMPLE_EVERY == 1
        finite_loss = loss is None or math.isfinite(loss)
        if not sample and finite_loss:
            return
        inv_sq = 1.0  # 1 / scale² for the gradients of a scaled loss
        if unscaled is not None:
            try:
                scale = float(np.asarray(unscaled[1]))
                inv_sq = 1.0 / (scale * scale)
            except (TypeError, ValueError, ZeroDivisionError, OverflowError):
                inv_sq = 1.0
        vals: list[tuple[Any, float]] = []
        bad_grad = None
        for s, g in zip(sources, grads):
            if g is None:
                continue
            try:
                arr = np.asarray(getattr(g, "values", g), dtype=np.float64)
            except Exception:  # noqa: BLE001
                continue
            v = float(np.sum(arr * arr)) * inv_sq
            vals.append((s, v))
            if bad_grad is None and not math.isfinite(v) and not np.isfinite(arr).all():
                bad_grad = var_name(s)
        if bad_grad is not None and unscaled is not None and unscaled[2]:
            # dynamic loss scaling: the optimizer skips a step whose gradients overflowed (and
            # lowers the scale); so do the norms, and it is no non-finite event
            vals, bad_grad = [], None
        for s, v in vals:
            info = self.variables.get(id(s))
            if info is not None:
                info["sampled"] += 1
                if math.isfinite(v) and v > info["maxsq"]:
                    info["maxsq"] = v
        self._add_norms(n, [var_name(s) for s, _ in vals], [v for _, v in vals], ss)
        if self.nonfinite is None and (not finite_loss or bad_grad is not None):
            bad_var = None
            for s in sources:
                try:
                    if not np.isfinite(np.asarray(s)).all():
                        bad_var = var_name(s)
                        break
                except Exception:  # noqa: BLE001
                    continue
            tensor = (f"variable {bad_var}" if bad_var else "the loss" if not finite_loss else f"the gradient of {bad_grad}")
            self._eager_nonfinite({"step": n, "tensor": tensor, "loss": loss, "variable": bad_var, "gradient_of": bad_grad})

    def _eager_nonfinite(self, event: dict[str, Any]) -> None:
        """Hands the first eager non-finite value to ``nan-inf``, with the user's line."""
        ni = self.sig("nan-inf")
        if ni is None:
            return
        try:
            ni.on_nonfinite({**event, "eager": True, "site": user_site_tf_stack()})
        except Exception as exc:  # noqa: BLE001
            ni.fail(exc, "eager non-finite record")

    def _add_norms(self, step: int, names: list[str], sq: list[float], ss: SiteSeries | None = None) -> None:
        if not sq:
            return
        total = sum(sq)
        norm = math.sqrt(total) if math.isfinite(total) else float("inf")
        self.grad_norm.add(step, norm)
        if ss is not None:
            ss.grad_norm.add(step, norm)
        per: dict[str, float] = {}
        for name, v in zip(names, sq):
            lay = layer_of(name)
            per[lay] = per.get(lay, 0.0) + v
        for lay, v in per.items():
            series = self.layer_norms.get(lay)
            if series is not None:
                series.add(step, math.sqrt(v) if math.isfinite(v) else float("inf"))

    # -- graph -----------------------------------------------------------------------------
    def _build_probe(self, target: Any, sources: list[Any], grads: list[Any]) -> None:
        """Add the per-step probe to the graph being traced. One state vector per probe, written
        by two scatter ops and never read inside the step (see :class:`Probe` for its layout):
        the step's values ``[1, loss, Σ of each tracked tensor..., label min, -label max, norm
        count, ½‖g_i‖²...]`` are packed once; their sums are accumulated (``ResourceScatterAdd``) and,
        for the loss, the gradients and the tracked tensors, the first step each was not finite
        is latched (``ResourceScatterMin`` of ``step / not_finite``: the step where a value is
        not finite, ``+inf`` where it is — a division, because ``SelectV2`` costs several times
        more than the four small ops on CPU). With a shared step counter that is ``V + R + 10``
        small ops for ``V`` gradients and ``R`` tracked tensors. The labels' minimum and minus
        their maximum, when seen, join the pack and are kept as minimums by the same
        ``ResourceScatterMin`` (its updates are the latch and the packed values), four ops more;
        a tracked input that is the labels is not summed, its range says whether it is finite.
        Large gradients (sampled every ``LARGE_SAMPLE_EVERY`` steps) get a pack, a latch and
        two scatters of their own, inside the cond."""
        tf = self._tf
        from tensorflow.python.framework import ops

        targets = [t for t in _flat(target) if _is_float_tensor(t)]
        scale, dynamic = None, False
        unscaled = self._unscaled(target)
        if unscaled is not None and _is_float_tensor(unscaled[0]) and _is_float_tensor(unscaled[1]):
            targets, scale, dynamic = [unscaled[0]], unscaled[1], unscaled[2]
        pairs = [(s, g) for s, g in zip(sources, grads)
                 if g is not None and _is_float_tensor(getattr(g, "values", g))]
        gvals = [getattr(g, "values", g) for _, g in pairs]
        probe = Probe(len(self.probes), user_site_tf_stack(), [var_name(s) for s, _ in pairs], [id(s) for s, _ in pairs])
        calling = getattr(self.session.steps, "_calling", None)
        if calling is not None and _weakrefable(calling):
            probe.fn = weakref.ref(calling)
        nv = len(gvals)
        graph = ops.get_default_graph()
        order = ancestor_ops(targets + gvals, graph)  # what the loss and the gradients depend on
        ni = self.sig("nan-inf")
        risky: list[Any] = []
        if ni is not None:
            try:
                risky = ni.tracked_tensors(probe, targets, pairs, order)
            except Exception as exc:  # noqa: BLE001
                ni.fail(exc, "choosing the tensors to track")
                risky = []
        probe.replica_group = _replica_group(graph, probe.site)
        labels = self._step_labels(graph, {id(op) for op in order}) if targets else None
        nl = 2 if labels is not None else 0
        nt = 1 + nv + len(risky)  # tracked for finiteness: the loss, each gradient, risky tensors
        probe.layout = (nv, nt, nl)
        nacc = 3 + nv
        probe.last_sums = [0.0] * nacc
        size = nacc + 1 + nt + nl + 1  # sums | scratch | first non-finite steps | label min, -max | scratch
        with ops.init_scope():
            if self.graph_calls_cell is None:  # gradient calls counted over all traces
                self.graph_calls_cell = Cell(tf, tf.constant(0.0, tf.float64))
            never = tf.fill([size - nacc - 1], tf.constant(math.inf, tf.float64))
            init = tf.concat([tf.zeros([nacc + 1], tf.float64), never], 0)
            probe.status = Cell(tf, init)
        f32 = tf.float32
        scratch_add, first0, label0, scratch_min = nacc, nacc + 1, nacc + 1 + nt, size - 1
        # a tracked input that is the labels themselves gets its finiteness from the label range
        # (reduce_min and reduce_max propagate NaN): no sum of its own
        label_j = None
        if labels is not None:
            label_j = next((j for j, t in enumerate(risky)
                            if t.op is labels.op and t.value_index == labels.value_index), None)
        with ops.name_scope("tflint_health"):
            step = self._graph_step(ops.get_default_graph())

            def as32(t: Any) -> Any:
                return t if t.dtype == f32 else tf.cast(t, f32)

            if targets:
                parts = [as32(t if t.shape.rank == 0 else tf.reduce_mean(t)) for t in targets]
                loss32 = parts[0] if len(parts) == 1 else tf.add_n(parts)
            else:
                loss32 = tf.constant(float("nan"), f32)

            def l2(g: Any) -> Any:  # half the sum of squares, in float32 (float16 would overflow)
                return tf.nn.l2_loss(as32(g))

            def pack(head: list[Any]) -> Any:
                """``head`` and then the norm count and ``½‖g_i‖²`` of each gradient. Those of a
                scaled loss are unscaled (÷ scale²); under dynamic scaling a step whose gradients
                overflowed, which the optimizer skips, counts 0 and adds 0 (``MulNoNan``)."""
                sq = [l2(g) for g in gvals]
                if scale is None:
                    return tf.stack(head + [tf.constant(1.0, f32)] + sq)
                v = tf.stack(sq)
                ok = tf.cast(tf.math.is_finite(tf.reduce_sum(v)), f32) if dynamic else tf.constant(1.0, f32)
                s32 = as32(scale)
                parts = [tf.reshape(ok, [1]), tf.math.multiply_no_nan(v, ok / (s32 * s32))]
                return tf.concat(([tf.stack(head)] if head else []) + parts, 0)

            def total(t: Any) -> Any:  # non-finite iff an element is (or the sum overflows)
                if t.dtype in (tf.float16, tf.bfloat16):
                    t = tf.cast(t, f32)
                return as32(tf.reduce_sum(t))

            # the step's values, packed once: [1, loss, Σ of each tracked tensor..., label min,
            # -label max, norm count, ½‖g_i‖²...]; where each goes in the sums (ScatterAdd) and in
            # the first-step latch (ScatterMin); a scratch slot for the rest
            scal = [tf.constant(1.0, f32), loss32]
            add_idx, first_idx = [0, 1], [scratch_min, first0]
            for j, t in enumerate(risky):
                if j != label_j:
                    scal.append(total(t))
                    add_idx.append(scratch_add)
                    first_idx.append(first0 + 1 + nv + j)
            lab_at = len(scal)
            if labels is not None:
                scal += [as32(tf.reduce_min(labels)), -as32(tf.reduce_max(labels))]
                add_idx += [scratch_add] * 2
                first_idx += [first0 + 1 + nv + label_j if label_j is not None else scratch_min] * 2
            add_idx += [2] + list(range(3, 3 + nv))
            first_idx += [scratch_min] + [first0 + 1 + i for i in range(nv)]

            n_scal = len(scal)
            lab_idx = None
            if labels is not None:  # the label minimum and minus the maximum are kept as minimums
                lab_idx = [scratch_min] * len(add_idx)
                lab_idx[lab_at], lab_idx[lab_at + 1] = label0, label0 + 1
            if nv and _num_elements(gvals) >= COND_MIN_ELEMENTS:
                # large gradients: the norms (and their count, and their finiteness) only every
                # LARGE_SAMPLE_EVERY-th step, under a lowered cond that holds their whole update: on
                # the other steps nothing of the probe waits for the last gradient but the cond's
                # Switches. The loss, the tracked tensors and the label range are packed and latched
                # on their own, every step, mostly while the backward pass runs (a tracked tensor of
                # the backward pass waits for its own op only). The label range stays on every
                # step: labels that repeat with the batch order would look constant on sampled
                # steps alone
                probe.sample_every = LARGE_SAMPLE_EVERY
                self._accumulate(probe, step, tf.stack(scal), add_idx[:n_scal], first_idx[:n_scal],
                                 None if lab_idx is None else lab_idx[:n_scal])
                sample = tf.equal(tf.math.floormod(step, float(LARGE_SAMPLE_EVERY)), 1.0)
                tf.cond(sample,
                        lambda: self._accumulate(probe, step, pack([]), add_idx[n_scal:], first_idx[n_scal:]),
                        tf.no_op)
            else:  # one pack, one latch: fewer ops than two, and the norms are on every step anyway
                self._accumulate(probe, step, pack(scal), add_idx, first_idx, lab_idx)
        self.probes.append(probe)

    def _accumulate(self, probe: Probe, step: Any, vals: Any, add_idx: list[int], first_idx: list[int],
                    lab_idx: list[int] | None = None) -> Any:
        """Adds ``vals`` into the sums at ``add_idx`` and latches, at ``first_idx``, the step where
        each is not finite; with ``lab_idx``, also keeps the values there as minimums (the label
        range)."""
        tf = self._tf
        from tensorflow.python.ops import gen_resource_variable_ops as rv

        f64 = tf.float64
        vals64 = tf.cast(vals, f64)
        latch = step / tf.cast(tf.logical_not(tf.math.is_finite(vals)), f64)
        rv.resource_scatter_add(probe.status.handle, tf.constant(add_idx, tf.int32), vals64)
        if lab_idx is None:
            return rv.resource_scatter_min(probe.status.handle, tf.constant(first_idx, tf.int32), latch)
        return rv.resource_scatter_min(probe.status.handle, tf.constant(first_idx + lab_idx, tf.int32),
                                       tf.concat([latch, vals64], 0))

    def _graph_step(self, graph: Any) -> Any:
        """The step number in ``graph``: the shared counter, incremented once per run of the graph
        however many gradient calls it makes (one per replica under ``MirroredStrategy``, two in a
        GAN step)."""
        tf = self._tf
        from tensorflow.python.ops import gen_resource_variable_ops as rv

        entry = self._graph_steps.get(id(graph))
        if entry is not None and entry[0]() is graph:
            return entry[1]
        inc = rv.assign_add_variable_op(self.graph_calls_cell.handle, tf.constant(1.0, tf.float64))
        with tf.control_dependencies([inc]):
            step = self.graph_calls_cell.read()
        if len(self._graph_steps) >= MAX_PROBES:
            self._graph_steps.clear()
        self._graph_steps[id(graph)] = (weakref.ref(graph), step)
        return step

    def _step_labels(self, graph: Any, ancestors: set[int]) -> Any:
        """The labels of the step being traced, when a Keras loss received them from the input
        data in this graph and the loss depends on them (see :mod:`tflint.runtime.loss_stall`)."""
        ls = self.sig("loss-stall")
        if ls is None:
            return None
        try:
            return ls.labels_in(graph, ancestors)
        except Exception as exc:  # noqa: BLE001
            ls.fail(exc, "finding the labels")
            return None

    def _read_probes(self, probes: list[Probe], final: bool = False, now: float | None = None) -> None:
        """One read of each probe's state vector; the series get the means since the last read.
        Before the final read, a probe whose tf.function has not been called since its last read
        is skipped (for up to ``STALE_READ_S``): a run that traced many steps reads only those
        that run."""
        tracker = self.session.steps
        steps = tracker.count if tracker is not None else 0
        calls = getattr(tracker, "fn_calls", None) if not final else None
        replica_losses: dict[Any, list[float]] = {}  # the replicas of one step: their losses add up
        replica_site: dict[Any, Any] = {}
        for p in probes:
            if p.status is None:
                continue
            if calls is not None and p.fn is not None and now is not None:
                fn = p.fn()
                n = calls.get(id(fn)) if fn is not None else None
                if n is not None and n == p.read_calls and now - p.read_t < STALE_READ_S:
                    continue
                p.read_calls, p.read_t = n, now
            try:
                st = p.status.numpy()
            except Exception:  # noqa: BLE001 - e.g. the runtime is shutting down
                continue
            nv, nt, nl = p.layout
            count = float(st[0])
            if count <= p.last_sums[0]:
                continue
            d = [float(a) - b for a, b in zip(st[:3 + nv], p.last_sums)]
            p.last_sums = [float(a) for a in st[:3 + nv]]
            p.calls += int(d[0])
            x = steps or p.calls
            mean_loss = d[1] / d[0]  # the mean loss since the last read: no aliasing with batch order
            ss = self.site_series.get(p.site)
            if not p.trains:
                pass  # a gradient with respect to inputs: no training loss, no training gradient
            elif p.replica_group is None:
                self.loss.add(x, mean_loss)
                if ss is not None:
                    ss.loss.add(x, mean_loss)
            else:
                replica_losses.setdefault((p.replica_group, x), []).append(mean_loss)
                replica_site.setdefault((p.replica_group, x), ss)
            if nl:  # the smallest and the largest label so far, and over how many steps
                p.labels = (float(st[3 + nv + 1 + nt]), -float(st[3 + nv + 2 + nt]), p.calls)
            if d[2] > 0 and p.trains:
                sq = [2.0 * v / d[2] for v in d[3:3 + nv]]  # l2_loss is half the sum of squares
                self._add_norms(x, p.names, sq, ss)
                for vid, v in zip(p.var_ids, sq):
                    info = self.variables.get(vid)
                    if info is not None:
                        info["sampled"] += 1
                        if math.isfinite(v) and v > info["maxsq"]:
                            info["maxsq"] = v
            first = st[3 + nv + 1:3 + nv + 1 + nt]
            p.first_steps = [int(f) if math.isfinite(f) else -1 for f in first]
            bad = [f for f in p.first_steps[:1 + nv] if f >= 0]  # the loss or a gradient, not an intermediate
            if bad and p.first_bad is None:
                p.first_bad = min(bad)
        for key, losses in replica_losses.items():
            self.loss.add(key[1], sum(losses))
            ss = replica_site.get(key)
            if ss is not None:
                ss.loss.add(key[1], sum(losses))

    # -- report ----------------------------------------------------------------------------
    def learning_rates(self, optimizer_ids: Any = None) -> list[tuple[str, float | None]]:
        """(class name, constant learning rate or None) of each optimizer that applied updates;
        of those in ``optimizer_ids`` only, when given."""
        out = []
        for oid, ref in self.optimizers.items():
            if optimizer_ids is not None and oid not in optimizer_ids:
                continue
            opt = ref()
            if opt is None:
                continue
            lr = None
            try:
                val = getattr(opt, "learning_rate", None)
                lr = float(val.numpy() if hasattr(val, "numpy") else val)
            except Exception:  # noqa: BLE001 - a schedule: not a constant
                lr = None
            out.append((type(opt).__name__, lr))
        return out


def ancestor_ops(roots: list[Any], graph: Any, limit: int = MAX_WALK) -> list[Any]:
    """The ops of ``graph`` that ``roots`` depend on (themselves included), in creation order;
    at most ``limit`` of them. Walked once per probe, at trace time."""
    seen: set[int] = set()
    order = []
    stack = [t.op for t in roots if t is not None]
    while stack and len(seen) < limit:
        op = stack.pop()
        if id(op) in seen or op.graph is not graph:
            continue
        seen.add(id(op))
        order.append(op)
        stack.extend(i.op for i in op.inputs)
    order.sort(key=lambda o: o._id)
    return order


def _replica_group(graph: Any, site: Any) -> Any:
    """``(graph, gradient call site)`` when tracing one replica's step of several in sync."""
    try:
        from tensorflow.python.distribute import distribute_lib

        ctx = distribute_lib.get_replica_context()
        if ctx is None or int(ctx.num_replicas_in_sync) <= 1:
            return None
    except Exception:  # noqa: BLE001
        return None
    return (id(graph), tuple(site) if site else None)


def _num_elements(tensors: list[Any]) -> int:
    n = 0
    for t in tensors:
        try:
            n += int(t.shape.num_elements() or 0)
        except Exception:  # noqa: BLE001 - unknown shape: count as large
            n += COND_MIN_ELEMENTS
    return n


def _weakrefable(o: Any) -> bool:
    try:
        weakref.ref(o)
        return True
    except TypeError:
        return False


def _elements(target: Any) -> int:
    """The elements of a gradient's target, from its static shape (1 where unknown)."""
    n = 0
    for t in _flat(target):
        try:
            k = t.shape.num_elements()
        except Exception:  # noqa: BLE001
            k = None
        n += k if k else 1
    return max(1, n)


def _dynamic_scaling(opt: Any) -> bool:
    """A ``LossScaleOptimizer``: it skips steps whose gradients are not finite."""
    return hasattr(opt, "inner_optimizer") and hasattr(opt, "initial_scale")


def _eager_scale(opt: Any) -> Any:
    """The scale ``opt.scale_loss`` multiplies by: a ``LossScaleOptimizer``'s dynamic scale (its
    initial scale before it is built), or an optimizer's ``loss_scale_factor``."""
    if _dynamic_scaling(opt):
        if getattr(opt, "built", False) and getattr(opt, "dynamic_scale", None) is not None:
            return opt.dynamic_scale
        return getattr(opt, "initial_scale", None)
    return getattr(opt, "loss_scale_factor", None)


def _eager_loss(target: Any) -> float | None:
    import numpy as np

    total = 0.0
    seen = False
    for t in _flat(target):
        if t is None or not _is_float_tensor(t):
            continue
        try:
            arr = np.asarray(t)
        except Exception:  # noqa: BLE001
            continue
        total += float(arr.mean()) if arr.ndim else float(arr)
        seen = True
    return total if seen else None


__all__ = ["HealthMonitor", "Cell", "Probe", "HEALTH_KINDS", "SAMPLE_EVERY", "var_name", "layer_of"]
