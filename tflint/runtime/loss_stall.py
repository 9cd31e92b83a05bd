"""``loss-stall``: the loss does not decrease.

Judged once, when the report is built, on the sampled loss series of
:mod:`tflint.runtime.health`: after the warm-up (the first ``WARMUP_FRACTION`` of the steps)
the Theil–Sen trend changes the loss by less than ``FLAT_RELATIVE`` of its level over the rest
of the run, *and* the loss at the end is not materially below the loss at the start (so a run
that converged early and then plateaued is not a stall). A loss at ~0 (already fitted) or
non-finite (``nan-inf`` says why) is not judged. Causes looked for: all gradients ``None`` or
zero, a learning rate of 0 or tiny, a one-unit softmax/sigmoid-free output, constant labels.
"""

from __future__ import annotations

import math
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


class LossStallHook(Hook):
    kind = KIND

    def _install(self) -> None:
        pass

    def judge(self, points: list[tuple[float, float]]) -> dict[str, Any] | None:
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
        if trend["level"] < 1e-6 or trend["relative"] >= FLAT_RELATIVE:
            return None
        k = max(3, len(pts) // 5)
        start = stats.median(y for _, y in pts[:k])
        end = stats.median(y for _, y in pts[-k:])
        if start - end > START_END_RELATIVE * max(abs(start), 1e-12):
            return None  # it did go down (early), then plateaued: converged, not stalled
        return {"steps": int(x1 - x0), "window_steps": [int(xs[0]), int(xs[-1])], "level": trend["level"],
                "relative_change": trend["relative"], "slope_per_step": trend["slope"], "start": start, "end": end,
                "constant": max(ys) == min(ys)}


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
    return out


def signals(session: Any) -> list[Any]:
    from tflint.profiler.report import Location, Signal

    mon = session.health
    hook = session.hooks.get(KIND)
    if mon is None or hook is None:
        return []
    j = hook.judge(mon.loss.downsample(400))
    if j is None:
        return []
    cs = causes(session)
    what = ("the loss is exactly constant" if j["constant"] else
            f"the loss stays at {j['level']:.4g} (trend {100 * j['relative_change']:.2f}% over the run after warm-up)")
    fixes = []
    kinds = {c["kind"] for c in cs}
    if "one-unit-softmax" in kinds:
        fixes.append("use activation='sigmoid' (or none, with from_logits=True) for a one-unit output")
    if kinds & {"lr-zero", "lr-tiny"}:
        fixes.append("raise the learning rate (1e-3 for Adam is a usual start)")
    if kinds & {"all-none", "all-zero", "no-trainable-variables"}:
        fixes.append("make the loss depend on trainable variables (see the dead-parameter / none-gradient findings)")
    if not fixes:
        fixes.append("check the learning rate, that labels vary and match the loss, and that the output activation suits it")
    msg = (f"Loss does not decrease: {what} for {j['steps']} steps"
           + (". Likely cause: " + "; ".join(c["text"] for c in cs) if cs else "")
           + ". Fix: " + "; ".join(fixes) + ".")
    site = mon.probes[-1].site if mon.probes and mon.probes[-1].site else None
    if site is None:
        src = session.steps.primary if session.steps is not None else None
        site = getattr(src, "site", None)
    loc = Location(str(site[0]), int(site[1])) if site else None
    return [Signal(kind=KIND, severity="warning", message=msg, location=loc,
                   details={**j, "causes": cs, "fix": "; ".join(fixes)})]
