"""``exploding-gradient`` and ``vanishing-gradient``: judged on the sampled global and per-layer
gradient norms that :mod:`tflint.runtime.health` collects (one sum of squares per gradient per
step inside the graph, read every ``SAMPLE_EVERY`` steps; numpy every few steps eagerly).

* exploding: the global norm exceeds ``EXPLODE_ABS`` (times the elements of a target that is not
  a scalar: its gradient is their sum) or grows ``EXPLODE_GROWTH``-fold over the
  run (its robust level at the end against the start, so one spike is not enough); the report
  names the first sampled step and the layer with the largest norm there;
* vanishing: the first trainable layer's norm stays below ``VANISH_RATIO`` × the last layer's
  on most (``VANISH_SHARE``) of the sampled steps (AutoTrainer's criterion), the last layer's
  norm being non-negligible. A first layer whose gradient is *exactly* zero on most of those
  steps is told apart: nothing flows back at all (dead ReLUs, a cut path), and the fix differs.

Where gradient calls at different places train different models (a GAN's generator and
discriminator), each is judged on its own norms and layers: a shared global norm interleaves
two models' values, and one model's first layer is not another's.
"""

from __future__ import annotations

import math
from typing import Any

from tflint.runtime.hookbase import Hook

EXPLODE_ABS = 1e4
EXPLODE_GROWTH = 1e3
VANISH_RATIO = 1e-3
VANISH_SHARE = 0.8
MIN_POINTS = 4


class ExplodingGradientHook(Hook):
    kind = "exploding-gradient"

    def _install(self) -> None:
        pass

    def judge(self, health: Any, group: tuple[Any, Any] | None = None) -> dict[str, Any] | None:
        """The first run (a ``fit`` call, a new model or optimisation; see
        :meth:`HealthMonitor.segments`) whose gradients explode, with ``site``: where it ran from
        (None: not known). Runs are judged apart: a second ``fit`` that unfreezes a backbone
        starts from other gradients, not from the first one's."""
        # non-finite norms are the nan-inf signal's business: judged on the finite ones
        norms = group[1].grad_norm if group is not None else health.grad_norm
        pts = [(x, y) for x, y in norms.downsample(400) if math.isfinite(y)]
        for part, site in health.segments(pts, graph_steps=bool(health.probes)):
            j = self._judge_run(health, group, part)
            if j is not None:
                j["window_steps"] = [int(part[0][0]), int(part[-1][0])]
                j["site"] = site
                return j
        return None

    def _judge_run(self, health: Any, group: tuple[Any, Any] | None, pts: list[Any]) -> dict[str, Any] | None:
        if len(pts) < MIN_POINTS:
            return None
        # the gradient of a target that is not a scalar is the sum of its elements' (an
        # unreduced loss): the absolute level is judged per element
        limit = EXPLODE_ABS * max(1, int(getattr(health, "target_elements", 1)))
        first = next(((x, y) for x, y in pts if y > limit), None)
        k = max(1, len(pts) // 10)
        head = sorted(y for _, y in pts[:k] if math.isfinite(y))
        tail = sorted(y for _, y in pts[-k:])
        start = head[len(head) // 2] if head else None
        end = tail[len(tail) // 2] if tail else None
        growth = (end / start) if start and end is not None and start > 0 and math.isfinite(end) else None
        if first is None and not (growth is not None and growth >= EXPLODE_GROWTH):
            return None
        if first is None:
            first = next((x, y) for x, y in pts if y >= start * EXPLODE_GROWTH ** 0.5)
        step, value = first
        layer = None
        best = -1.0
        own = set(_layers(health, group))
        for lay, series in health.layer_norms.items():
            if series is None or lay not in own:
                continue
            for x, y in series.downsample(400):
                if x == step:
                    v = y if math.isfinite(y) else float("inf")
                    if v > best:
                        best, layer = v, lay
        return {"step": int(step), "norm": value, "start_norm": start, "end_norm": end, "growth": growth, "layer": layer,
                "threshold": limit}


class VanishingGradientHook(Hook):
    kind = "vanishing-gradient"

    def _install(self) -> None:
        pass

    def judge(self, health: Any, group: tuple[Any, Any] | None = None) -> dict[str, Any] | None:
        layers = _layers(health, group)
        if len(layers) < 3:
            return None
        first_l, last_l = layers[0], layers[-1]
        a = dict((x, y) for x, y in health.layer_norms[first_l].downsample(400))
        b = dict((x, y) for x, y in health.layer_norms[last_l].downsample(400))
        common = sorted(set(a) & set(b))
        if len(common) < MIN_POINTS:
            return None
        ratios = []
        zero_steps = []
        for x in common:
            if b[x] > 1e-8 and math.isfinite(b[x]) and math.isfinite(a[x]):
                ratios.append(a[x] / b[x])
                if a[x] == 0.0:
                    zero_steps.append(x)
        if len(ratios) < MIN_POINTS:
            return None
        below = sum(1 for r in ratios if r < VANISH_RATIO)
        if below < VANISH_SHARE * len(ratios):
            return None
        ratios.sort()
        out = {"first_layer": first_l, "last_layer": last_l, "median_ratio": ratios[len(ratios) // 2],
               "share_below": below / len(ratios), "samples": len(ratios), "threshold": VANISH_RATIO,
               "zero_share": len(zero_steps) / len(ratios)}
        if zero_steps:
            out["first_zero_step"] = int(zero_steps[0])
        return out


def _layers(health: Any, group: tuple[Any, Any] | None) -> list[str]:
    """The layers with a norm series, in the order their gradients were first seen; of one
    gradient call site's variables only, for a group."""
    layers = [lay for lay in health.layer_order if health.layer_norms.get(lay) is not None]
    if group is None:
        return layers
    from tflint.runtime.health import layer_of

    own = {layer_of(name) for name in health.loss_sites.get(group[0], ())}
    return [lay for lay in layers if lay in own]


def _judged(hook: Any, mon: Any) -> tuple[dict[str, Any], Any] | None:
    """The hook's verdict and the gradient call site it is about (None: the run's last); with
    several separate losses, the earliest finding among their sites."""
    if hook.status != "ok":
        return None
    try:
        groups = mon.site_groups()
        if not groups:
            j = hook.judge(mon)
            if j is None:
                return None
            # the run it is about: its fit or gradient call, or the site with most samples in it
            site = j.pop("site", None)
            if site is None and "window_steps" in j:
                site = mon.site_of(j["window_steps"], norms=True)
            return j, site
        found = [(j, site) for site, ss in groups if (j := hook.judge(mon, (site, ss))) is not None]
        for j, _ in found:
            j.pop("site", None)  # a GAN's player: located at its own gradient call
        return min(found, key=lambda f: f[0].get("step", f[0].get("first_zero_step", 0))) if found else None
    except Exception as exc:  # noqa: BLE001 - this kind is not measured; the other is kept
        hook.fail(exc, "judging the gradient norms")
        return None


def signals(session: Any) -> list[Any]:
    from tflint.profiler.report import Location, Signal

    mon = session.health
    if mon is None:
        return []
    out = []
    site = None
    if mon.probes and mon.probes[-1].site:
        site = mon.probes[-1].site
    elif session.steps is not None and session.steps.primary is not None:
        site = session.steps.primary.site  # eager loops: where the steps were counted
    def located(found: Any) -> tuple[dict[str, Any] | None, Any]:
        if found is None:
            return None, None
        j, own = found
        at = own or site
        return j, (Location(str(at[0]), int(at[1])) if at else None)

    ex = session.hooks.get("exploding-gradient")
    if ex is not None and "exploding-gradient" in session.signals:
        j, loc = located(_judged(ex, mon))
        if j is not None:
            grow = f", {j['growth']:.0f}× its level at the start" if (j.get("growth") or 0) >= 10 else ""
            msg = (f"Gradients explode: the global gradient norm reached {j['norm']:.3g} at step {j['step']}{grow}"
                   + (f"; the largest layer norm there is `{j['layer']}`" if j.get("layer") else "")
                   + ". Updates that large overshoot and usually end in NaN. Fix: lower the learning rate, clip gradients "
                   "(clipnorm=1.0 on the optimizer, or tf.clip_by_global_norm), and normalise the inputs.")
            out.append(Signal(kind="exploding-gradient", severity="warning", message=msg, location=loc,
                              details={**j, "fix": "lower the learning rate or clip gradients (clipnorm=1.0)"}))
    va = session.hooks.get("vanishing-gradient")
    if va is not None and "vanishing-gradient" in session.signals:
        j, loc = located(_judged(va, mon))
        if j is not None and j.get("zero_share", 0.0) >= VANISH_SHARE:
            # not small: none at all. Backpropagation stops upstream (ReLUs that no longer fire)
            msg = (f"No gradient reaches the early layers: the first trainable layer `{j['first_layer']}` gets a "
                   f"gradient of exactly zero on {100 * j['zero_share']:.0f}% of {j['samples']} sampled steps (from step "
                   f"{j['first_zero_step']}), while the last layer `{j['last_layer']}` trains. Usually a layer of ReLU "
                   "units that output 0 for every input (dead ReLUs: too high a learning rate, unnormalised inputs), "
                   "a path cut by an integer cast or stop_gradient, or a BatchNormalization that normalises one value "
                   "per channel (batch size 1 on a 1×1 feature map: it outputs its beta). Fix: lower the learning rate, "
                   "normalise the inputs, use LeakyReLU/GELU there, or remove the cut or that normalisation.")
            out.append(Signal(kind="vanishing-gradient", severity="warning", message=msg, location=loc,
                              details={**j, "cause": "zero-gradient",
                                       "fix": "lower the learning rate, normalise the inputs, or use LeakyReLU"}))
        elif j is not None:
            msg = (f"Gradients vanish: the first trainable layer `{j['first_layer']}` gets a gradient norm "
                   f"{j['median_ratio']:.1e}× that of the last layer `{j['last_layer']}` (median over {j['samples']} sampled "
                   f"steps, below {VANISH_RATIO:g}× on {100 * j['share_below']:.0f}% of them): the early layers barely train. "
                   "Fix: use ReLU-family activations instead of sigmoid/tanh in deep stacks, He/Glorot initialisation, "
                   "batch normalisation or residual connections.")
            out.append(Signal(kind="vanishing-gradient", severity="warning", message=msg, location=loc,
                              details={**j, "fix": "ReLU activations, normalisation or residual connections"}))
    return out
