"""``loss-stall``: the loss does not decrease.

Judged once, when the report is built, on the sampled loss series of
:mod:`tflint.runtime.health`: after the warm-up (the first ``WARMUP_FRACTION`` of the steps)
the Theil–Sen trend changes the loss by less than ``FLAT_RELATIVE`` of its level over the rest
of the run, *and* the loss at the end is not materially below the loss at the start (so a run
that converged early and then plateaued is not a stall). A loss at ~0 (already fitted) or
non-finite (``nan-inf`` says why) is not judged, nor a run that trains nothing (gradients with
respect to inputs only, no optimizer update: saliency maps, integrated gradients). Causes looked
for: all gradients ``None`` or zero, a learning rate of 0 or tiny, a one-unit softmax output,
constant labels. Where gradient calls at different places in the code train disjoint sets of
variables, each place's own loss is judged, when they ran one after another (several models
trained in turn); when they ran together (a GAN's discriminator and generator) nothing is
judged: neither loss is meant to fall.

Labels are seen where a Keras loss (``compile(loss=...)`` or a ``keras.losses`` object called in
a custom loop) receives them inside a traced step: ``Loss.__call__`` is wrapped, and at trace
time its ``y_true`` is kept when it comes from the step's input data through value-preserving
ops only (a cast, reshape, slice, one-hot: not ``tf.ones_like``, as a GAN's targets are) and the
loss depends on it (not dummy targets that the loss ignores). The probe of
:mod:`tflint.runtime.health` then keeps the smallest and the largest label of the run (two
reductions per step, folded into its minimum). Labels that are one value over the whole run are
a cause, and enough on their own: the model can only learn to output that value, so a loss that
falls towards 0 there (which would otherwise read as converged) has learned nothing. Labels are
not seen in eager loops (nothing says which eager tensor came from the data).
"""

from __future__ import annotations

import math
import weakref
from typing import Any

from tflint.profiler import stats
from tflint.runtime.hookbase import Hook

KIND = "loss-stall"
WARMUP_FRACTION = 0.2
FLAT_RELATIVE = 0.01
START_END_RELATIVE = 0.05
MIN_POINTS = 10
MIN_STEPS = 40
TINY_LR = 1e-7
MAX_GRAPHS = 64
MAX_LABELS_PER_GRAPH = 16
MAX_LABEL_WALK = 64
# ops whose output carries its first input's values (or a selection of them)
_PASS_THROUGH = {"Identity", "Cast", "Reshape", "ExpandDims", "Squeeze", "StridedSlice", "Slice", "GatherV2",
                 "OneHot", "Unpack", "Split", "SplitV", "IdentityN", "Transpose", "EnsureShape", "StopGradient"}
_DATA_SOURCES = {"Placeholder", "IteratorGetNext", "IteratorGetNextSync", "OptionalGetValue",
                 "MultiDeviceIteratorGetNextFromShard"}


def _from_data(t: Any) -> bool:
    """``t`` carries input-data values: a data source reached through pass-through ops only."""
    op = t.op
    for _ in range(MAX_LABEL_WALK):
        if op.type in _DATA_SOURCES:
            return True
        if op.type not in _PASS_THROUGH or not op.inputs:
            return False
        op = op.inputs[0].op
    return False


class LossStallHook(Hook):
    kind = KIND

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._labels: dict[int, tuple[Any, list[Any]]] = {}  # id(graph) -> (weakref to graph, [y_true...])

    def _install(self) -> None:
        from tensorflow.python.eager import context

        try:
            from keras.src.losses.loss import Loss
        except Exception:  # noqa: BLE001 - no Keras: labels are not seen, the rest works
            return
        executing_eagerly = context.executing_eagerly
        hook = self

        def make(orig: Any) -> Any:
            def __call__(loss: Any, y_true: Any, y_pred: Any, *args: Any, **kwargs: Any) -> Any:
                if hook.active and not executing_eagerly():
                    try:
                        hook._note_labels(y_true)
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "noting the labels")
                return orig(loss, y_true, y_pred, *args, **kwargs)

            return __call__

        self.patch(Loss, "__call__", make)

    @property
    def fit_starts(self) -> list[tuple[int, int, Any]]:
        """Where each ``model.fit`` call began (see :meth:`StepTracker.fit_starts`)."""
        steps = self.session.steps
        return steps.fit_starts if steps is not None else []

    def fit_segments(self, points: list[Any], graph_steps: bool) -> list[list[Any]]:
        """``points`` split into the runs judged apart (:meth:`HealthMonitor.segments`)."""
        mon = self.session.health
        if mon is None:
            return [list(points)] if points else []
        return [part for part, _ in mon.segments(points, graph_steps)]

    def _note_labels(self, y_true: Any) -> None:
        graph = getattr(y_true, "graph", None)
        dtype = getattr(y_true, "dtype", None)
        if graph is None or dtype is None or not (dtype.is_floating or dtype.is_integer or dtype.is_bool):
            return
        if not _from_data(y_true):
            return
        entry = self._labels.get(id(graph))
        if entry is None or entry[0]() is not graph:
            if len(self._labels) >= MAX_GRAPHS:
                return
            entry = self._labels[id(graph)] = (weakref.ref(graph), [])
        if len(entry[1]) < MAX_LABELS_PER_GRAPH:
            entry[1].append(y_true)

    def labels_in(self, graph: Any, ancestors: set[int]) -> Any:
        """The data labels a Keras loss received in ``graph`` last before this gradient call, among
        those the loss depends on (``ancestors``: ids of the ops the loss and its gradients depend
        on); each replica of a strategy traces its own loss."""
        entry = self._labels.get(id(graph))
        if entry is None or entry[0]() is not graph:
            return None
        for y in reversed(entry[1]):
            if not y.dtype.is_bool and id(y.op) in ancestors:
                return y
        return None

    def judge(self, points: list[tuple[float, float]], labels_constant: bool = False) -> dict[str, Any] | None:
        """The stall over the sampled loss series, or None. With constant labels the run is judged
        stalled whatever the loss does: a loss that falls to ~0 there only learned the constant."""
        pts = [(float(x), float(y)) for x, y in points]
        if len(pts) < MIN_POINTS or not all(math.isfinite(y) for _, y in pts):
            return None
        x0, x1 = pts[0][0], pts[-1][0]
        if x1 - x0 < MIN_STEPS:
            return None
        cut = x0 + WARMUP_FRACTION * (x1 - x0)
        body = [p for p in pts if p[0] >= cut]
        if len(body) < MIN_POINTS // 2:
            return None
        body = stats.downsample(body, 200)
        xs = [p[0] for p in body]
        ys = [p[1] for p in body]
        trend = stats.relative_change(xs, ys)
        k = max(3, len(pts) // 5)
        start = stats.median(y for _, y in pts[:k])
        end = stats.median(y for _, y in pts[-k:])
        if not labels_constant:  # constant labels: whatever the loss does, there is nothing to learn
            if trend["level"] < 1e-6 or trend["relative"] >= FLAT_RELATIVE:
                return None
            if start - end > START_END_RELATIVE * max(abs(start), 1e-12):
                return None  # it did go down (early), then plateaued: converged, not stalled
        return {"steps": int(x1 - x0), "window_steps": [int(xs[0]), int(xs[-1])], "level": trend["level"],
                "value": stats.median(ys),  # signed: a negative log-likelihood can stall below 0
                "relative_change": trend["relative"], "slope_per_step": trend["slope"], "start": start, "end": end,
                "constant": max(ys) == min(ys)}


def constant_labels(session: Any) -> dict[str, Any] | None:
    """The one value every label took, when labels were seen (over at least ``MIN_STEPS``
    steps) and their smallest and largest value over the whole run are the same."""
    mon = session.health
    seen = [p.labels for p in mon.probes if p.labels is not None]
    steps = max((n for _, _, n in seen), default=0)  # the replicas of a strategy see the same steps
    if steps < MIN_STEPS:
        return None
    lows, highs = {lo for lo, _, _ in seen}, {hi for _, hi, _ in seen}
    if len(lows) != 1 or lows != highs or not all(math.isfinite(v) for v in lows):
        return None
    return {"value": lows.pop(), "steps": steps}


def _one_unit_softmax() -> list[str]:
    """Keras layers with one output unit and a softmax activation (its output is always 1)."""
    import gc

    found = []
    try:
        from keras.src import activations
        from keras.src.layers import Dense
    except Exception:  # noqa: BLE001
        return found
    try:
        for obj in gc.get_objects():
            if isinstance(obj, Dense) and getattr(obj, "units", None) == 1 and getattr(obj, "activation", None) is activations.softmax:
                found.append(getattr(obj, "path", None) or obj.name)
                if len(found) >= 5:
                    break
    except Exception:  # noqa: BLE001
        pass
    return found


def causes(session: Any) -> list[dict[str, Any]]:
    mon = session.health
    out: list[dict[str, Any]] = []
    infos = list(mon.variables.values())
    if infos and all(i["grads"] == 0 for i in infos):
        out.append({"kind": "all-none", "text": "every gradient is None (see the none-gradient finding)"})
    elif infos and all(i["sampled"] > 0 and i["maxsq"] == 0 for i in infos if i["grads"]):
        out.append({"kind": "all-zero", "text": "every gradient is exactly zero"})
    for opt, lr in mon.learning_rates():
        if lr is not None and lr == 0:
            out.append({"kind": "lr-zero", "text": f"{opt} has learning rate 0"})
        elif lr is not None and lr < TINY_LR:
            out.append({"kind": "lr-tiny", "text": f"{opt} has learning rate {lr:g}, too small to move the weights"})
    soft = _one_unit_softmax()
    if soft:
        out.append({"kind": "one-unit-softmax", "layers": soft,
                    "text": f"layer {', '.join(soft)} is Dense(1, activation='softmax'): softmax over one unit is always 1.0, "
                            "so the output and the loss never change (use 'sigmoid' for one unit)"})
    if not mon.variables and session.hooks.get("dead-parameter") is not None:
        out.append({"kind": "no-trainable-variables", "text": "the model has no trainable variables"})
    labels = constant_labels(session)
    if labels is not None:
        out.append({"kind": "labels-constant", "value": labels["value"], "steps": labels["steps"],
                    "text": f"every label is {labels['value']:g}: the model can only learn to output that one value"})
    return out


def losses_to_judge(mon: Any) -> list[tuple[list[list[float]], Any]]:
    """The loss series to judge, each with the gradient call site it belongs to (None: the
    run's one loss). Separate losses (see ``HealthMonitor.separate_losses``) that ran one after
    another are judged one by one; separate losses whose steps interleave (a GAN's players,
    each not meant to fall) are not judged at all. Places whose gradient calls share variables
    are one optimisation (sharpness-aware minimisation takes two gradients of one model a step):
    it is judged on the loss of the first of them."""
    if not mon.separate_losses():
        return [(mon.loss.downsample(400), None)]
    merged: list[tuple[set[str], Any, Any]] = []
    for site, ss in mon.site_groups():
        names = set(mon.loss_sites.get(site, ()))
        same = next((g for g in merged if not g[0].isdisjoint(names)), None)
        if same is not None:
            same[0].update(names)
        else:
            merged.append((names, site, ss))
    groups = [(pts, site) for _, site, ss in merged if (pts := ss.loss.downsample(400))]
    spans = [(min(p[0] for p in pts), max(p[0] for p in pts)) for pts, _ in groups]
    for i, (a0, a1) in enumerate(spans):
        for b0, b1 in spans[i + 1:]:
            if min(a1, b1) > max(a0, b0):
                return []
    return groups


def signals(session: Any) -> list[Any]:
    from tflint.profiler.report import Location, Signal

    mon = session.health
    hook = session.hooks.get(KIND)
    if mon is None or hook is None:
        return []
    labels_constant = constant_labels(session) is not None
    if not mon.variables and not mon.applies and not labels_constant:
        # gradients with respect to inputs only (saliency maps, integrated gradients, an
        # adversarial example): nothing is trained, and the target is not meant to fall
        return []
    j = None
    judged_site = None
    seg_site = None
    for pts, judged_site in ([(mon.loss.downsample(400), None)] if labels_constant else losses_to_judge(mon)):
        for seg, seg_site in mon.segments(pts, graph_steps=bool(mon.probes)):
            j = hook.judge(seg, labels_constant=labels_constant)
            if j is not None:
                break
        if j is not None:
            break
    if j is None:
        return []
    cs = causes(session)
    what = ("the loss is exactly constant" if j["constant"] else
            f"the loss stays at {j['value']:.4g} (trend {100 * j['relative_change']:.2f}% over the run after warm-up)")
    fixes = []
    kinds = {c["kind"] for c in cs}
    if "one-unit-softmax" in kinds:
        fixes.append("use activation='sigmoid' (or none, with from_logits=True) for a one-unit output")
    if kinds & {"lr-zero", "lr-tiny"}:
        fixes.append("raise the learning rate (1e-3 for Adam is a usual start)")
    if kinds & {"all-none", "all-zero", "no-trainable-variables"}:
        fixes.append("make the loss depend on trainable variables (see the dead-parameter / none-gradient findings)")
    if "labels-constant" in kinds:
        fixes.append("check which column or feature the labels are read from")
    if not fixes:
        fixes.append("check the learning rate, that labels vary and match the loss, and that the output activation suits it")
    labels = next((c for c in cs if c["kind"] == "labels-constant"), None)
    if labels is not None:
        value = f"{labels['value']:g}"
        others = [c["text"] for c in cs if c is not labels]
        msg = (f"Labels are constant: every label the loss saw in {labels['steps']} steps is {value}, "
               f"so the model can only learn to output {value}; the loss going from {j['start']:.4g} to {j['end']:.4g} is that, not learning"
               + (". Also: " + "; ".join(others) if others else "")
               + ". Fix: " + "; ".join(fixes) + ".")
    else:
        msg = (f"Loss does not decrease: {what} for {j['steps']} steps"
               + (". Likely cause: " + "; ".join(c["text"] for c in cs) if cs else "")
               + ". Fix: " + "; ".join(fixes) + ".")
    site = judged_site or seg_site or mon.site_of(j["window_steps"] if "window_steps" in j else None)
    if site is None:
        src = session.steps.primary if session.steps is not None else None
        site = getattr(src, "site", None)
    loc = Location(str(site[0]), int(site[1])) if site else None
    return [Signal(kind=KIND, severity="warning", message=msg, location=loc,
                   details={**j, "causes": cs, "fix": "; ".join(fixes)})]
