"""``dead-parameter``: trainable variables exactly unchanged at the end of the run although the
optimizer applied updates, with the reason; and a model that trains with no trainable
variables at all.

Each variable given to ``tape.gradient`` is copied once (``SNAPSHOT_MAX_ELEMENTS`` at most), at
the first sampled step after it was first seen, and compared bit for bit when the report is
built. The reason, in order: the gradient was always ``None`` (the gradient call and the
none-gradient reason; TFL301/TFL302/TFL303 predict it statically), the variable was never
passed to the optimizer, its gradient was always exactly zero (an integer cast or
``stop_gradient`` on the path, a dead ReLU upstream, float16 underflow), or the optimizer's
learning rate is 0.

Keras 3 tracks only ``keras.Variable``s and layers assigned to a ``Layer``/``Model``: plain
``tf.Variable`` attributes (a TensorFlow 2 tutorial ported as is) are not trainable weights, so
``fit`` never computes a gradient (Keras' ``train_step`` only warns). A class-level wrapper of
Keras' TensorFlow ``train_step`` notices an empty ``trainable_weights`` at trace time and names
the untracked attributes (TFL608 predicts it); a custom loop that asks a tape for the gradient
of an empty variable list is reported the same way.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from tflint.runtime.health import SNAPSHOT_MAX_ELEMENTS
from tflint.runtime.hookbase import Hook, user_frame

KIND = "dead-parameter"
MIN_STEPS_AFTER_SNAPSHOT = 4
RULE_FOR_REASON = {"not-read-in-tape": "TFL302", "no-differentiable-path": "TFL303", "unwatched-tensor": "TFL301",
                   "watch-accessed-variables-off": "TFL301"}


def untracked_variables(model: Any) -> list[dict[str, Any]]:
    """Plain ``tf.Variable`` attributes of a Keras 3 layer/model (and its sublayers' own)."""
    import tensorflow as tf

    try:
        import keras

        kvar = keras.Variable
    except Exception:  # noqa: BLE001
        kvar = ()
    out: list[dict[str, Any]] = []
    for name, value in list(vars(model).items()):
        vals = value if isinstance(value, (list, tuple)) else [value]
        for v in vals:
            if isinstance(v, tf.Variable) and not isinstance(v, kvar) and getattr(v, "trainable", True):
                out.append({"attribute": name, "variable": getattr(v, "name", name), "shape": _shape(v),
                            "site": _assignment_site(type(model), name)})
                break
    return out


def _shape(v: Any) -> list[int | None] | None:
    try:
        return list(v.shape.as_list())
    except Exception:  # noqa: BLE001
        return None


def _assignment_site(cls: type, attr: str) -> tuple[str, int] | None:
    """File and line of ``self.<attr> = ...`` in the class (or a base class defined by the user)."""
    pat = re.compile(r"\bself\." + re.escape(attr) + r"\s*=")
    for klass in cls.__mro__:
        mod = getattr(klass, "__module__", "") or ""
        if mod.startswith(("keras", "tensorflow", "builtins")):
            continue
        try:
            lines, start = inspect.getsourcelines(klass)
            fn = inspect.getsourcefile(klass)
        except (OSError, TypeError):
            continue
        for i, line in enumerate(lines):
            if pat.search(line):
                return (fn, start + i) if fn else None
    return None


class DeadParameterHook(Hook):
    kind = KIND

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.snapshots: dict[int, Any] = {}
        self.snapshot_step: dict[int, int] = {}
        self.no_weights: dict[int, dict[str, Any]] = {}

    def check(self) -> str | None:
        return None

    def _install(self) -> None:
        try:
            from keras.src.backend.tensorflow.trainer import TensorFlowTrainer
        except Exception:  # noqa: BLE001 - no Keras 3: custom loops are still checked
            return
        if not hasattr(TensorFlowTrainer, "train_step"):
            return
        hook = self

        def make(orig: Any) -> Any:
            def train_step(model: Any, data: Any) -> Any:
                out = orig(model, data)
                # after the step: a model built lazily (a subclass, a Sequential without an Input)
                # gets its weights in its first forward pass, inside the first train_step
                if hook.active:
                    try:
                        hook._on_train_step(model)
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "Keras train_step wrapper")
                return out

            return train_step

        self.patch(TensorFlowTrainer, "train_step", make)

    def _on_train_step(self, model: Any) -> None:
        if model.trainable_weights or id(model) in self.no_weights or len(self.no_weights) >= 8:
            return
        self.no_weights[id(model)] = {"model": type(model).__name__, "name": str(getattr(model, "name", "") or ""),
                                      "untracked": untracked_variables(model), "site": user_frame(), "api": "fit"}

    def on_empty_sources(self, site: Any) -> None:
        key = ("tape", tuple(site) if site else None)
        if key in self.no_weights:
            return
        self.no_weights[key] = {"model": None, "untracked": [], "site": site, "api": "GradientTape.gradient"}  # type: ignore[index]

    def snapshot(self, variables: dict[int, dict[str, Any]]) -> None:
        import numpy as np

        step = self.session.steps.count if self.session.steps is not None else 0
        for vid, info in variables.items():
            if vid in self.snapshots:
                continue
            v = info["ref"]()
            if v is None:
                continue
            try:
                n = int(np.prod(v.shape))
            except Exception:  # noqa: BLE001
                continue
            if n > SNAPSHOT_MAX_ELEMENTS:
                self.snapshots[vid] = None
                continue
            self.snapshots[vid] = np.array(v.numpy(), copy=True)
            self.snapshot_step[vid] = step

    def dead(self, health: Any) -> list[dict[str, Any]]:
        import numpy as np

        steps = self.session.steps.count if self.session.steps is not None else 0
        out = []
        for vid, snap in self.snapshots.items():
            info = health.variables.get(vid)
            if snap is None or info is None or steps - self.snapshot_step.get(vid, steps) < MIN_STEPS_AFTER_SNAPSHOT:
                continue
            v = info["ref"]()
            if v is None or not getattr(v, "trainable", True):
                continue
            try:
                now = v.numpy()
            except Exception:  # noqa: BLE001
                continue
            if not np.array_equal(now, snap):
                continue
            out.append({"vid": vid, "name": info["name"], "shape": list(snap.shape), "info": info})
        return out


def _bias_of_a_training_layer(d: dict[str, Any], mon: Any, dead_names: set[str]) -> bool:
    """``d`` is a layer's bias (rank 1, named ``bias``) and the layer's other variables changed."""
    from tflint.runtime.health import layer_of

    name = d["name"]
    if len(d["shape"]) != 1 or name.rsplit("/", 1)[-1].split(":")[0] != "bias" or "/" not in name:
        return False
    layer = layer_of(name)
    siblings = [i["name"] for i in mon.variables.values() if i["name"] != name and layer_of(i["name"]) == layer]
    return bool(siblings) and not any(n in dead_names for n in siblings)


def _none_reasons(session: Any) -> dict[str, tuple[str, Any]]:
    out: dict[str, tuple[str, Any]] = {}
    for r in session.store.records_of("none-gradient"):
        if r.get("api") != "gradient":
            continue
        for v in r.get("variables", []):
            out.setdefault(v["name"][:-2] if v["name"].endswith(":0") else v["name"], (v.get("reason"), r.get("site")))
    return out


def _lr_zero(lrs: list[tuple[str, float | None]]) -> bool:
    return bool(lrs) and all(lr == 0 for _, lr in lrs if lr is not None) and any(lr is not None for _, lr in lrs)


def signals(session: Any) -> list[Any]:
    from tflint.profiler.report import Location, Signal
    from tflint.runtime.gradients import REASON_TEXT

    mon = session.health
    hook = session.hooks.get(KIND)
    if mon is None or hook is None:
        return []
    out = []
    for rec in hook.no_weights.values():
        if rec["api"] == "fit":
            un = rec["untracked"]
            names = ", ".join(f"`self.{u['attribute']}`" for u in un)
            named = f" `{rec['name']}`" if rec.get("name") and rec["name"] != rec["model"] else ""
            msg = (f"`{rec['model']}`{named} has no trainable variables, yet model.fit ran: no gradient is computed and the "
                   "loss never changes"
                   + (f". Keras 3 does not track the plain tf.Variable attribute(s) {names}" if un else "")
                   + ". Fix: create weights with self.add_weight(...) (or keras.Variable) in the layer/model, "
                   "or build it from Keras layers.")
            site = un[0]["site"] if un and un[0].get("site") else rec.get("site")
            out.append(Signal(kind=KIND, severity="error", message=msg,
                              location=Location(str(site[0]), int(site[1])) if site else None,
                              details={"reason": "no-trainable-variables", "model": rec["model"], "untracked": un,
                                       "variables": [u["attribute"] for u in un], "rule": "TFL608" if un else None,
                                       "fix": "use self.add_weight(...) or keras.Variable instead of tf.Variable"}))
        else:
            site = rec.get("site")
            out.append(Signal(kind=KIND, severity="error",
                              message=("GradientTape.gradient was asked for the gradient of an empty list of variables: "
                                       "nothing is trained (a Keras 3 model whose weights are plain tf.Variable "
                                       "attributes has empty trainable_variables). Fix: create weights with "
                                       "self.add_weight(...) or keras.Variable."),
                              location=Location(str(site[0]), int(site[1])) if site else None,
                              details={"reason": "no-trainable-variables", "variables": [], "rule": "TFL608",
                                       "fix": "use self.add_weight(...) or keras.Variable"}))
    if mon.applies == 0:
        return out
    nones = _none_reasons(session)
    groups: dict[str, list[dict[str, Any]]] = {}
    extra: dict[str, Any] = {}
    dead = hook.dead(mon)
    dead_names = {d["name"] for d in dead}
    for d in dead:
        info = d["info"]
        if info["grads"] == 0:
            reason, site = nones.get(d["name"], (None, info.get("none_site")))
            key = f"none:{reason}"
            extra.setdefault(key, (reason, site or info.get("none_site")))
        elif d["vid"] not in mon.applied_ids:
            key = "not-applied"
        elif info["sampled"] and info["maxsq"] == 0:
            key = "zero-bias" if _bias_of_a_training_layer(d, mon, dead_names) else "zero"
        elif _lr_zero(mon.learning_rates({mon.applied_ids[d["vid"]]})):  # the optimizer that applied it
            key = "lr-zero"
        else:
            continue  # changed by too little to show? not claimed
        groups.setdefault(key, []).append(d)
    for key, ds in groups.items():
        names = [d["name"] for d in ds]
        shown = ", ".join(f"`{n}`" for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        rule = None
        # the gradient call that differentiated these variables (a GAN has one per player)
        vids = {d["vid"] for d in ds}
        site = next((p.site for p in mon.probes if p.site and vids & set(p.var_ids)), None)
        if site is None and mon.probes:
            site = mon.probes[-1].site
        if key.startswith("none:"):
            reason, gsite = extra[key]
            rule = RULE_FOR_REASON.get(reason or "")
            why = ("its gradient was always None" + (f" — {REASON_TEXT[reason].format(dtype='?')}" if reason in REASON_TEXT else ""))
            fix = "compute the loss from it inside the tape, or drop it from the model if it is unused"
            site = gsite or site
            code = "gradient-none"
        elif key == "not-applied":
            why = "its gradient was computed but it was never passed to the optimizer"
            fix = "pass every trainable variable to optimizer.apply_gradients (zip(grads, model.trainable_variables))"
            code = "not-passed-to-optimizer"
        elif key == "zero-bias":
            # the layer's other weights train: the loss is blind to a constant added to the layer's
            # output, so the bias has nothing to learn (a WGAN critic's mean(fake) - mean(real))
            why = ("its gradient was always exactly zero while the rest of its layer trained: the loss does not change "
                   "when a constant is added to that layer's output (a difference of two means of it, as in a WGAN "
                   "critic's loss, or a normalisation right after it), so the bias can learn nothing")
            fix = "create that layer with use_bias=False (nothing else is wrong)"
            code = "gradient-zero"
        elif key == "zero":
            why = ("its gradient was always exactly zero (cut by an integer cast, argmax/round or stop_gradient on the "
                   "path, a ReLU that is never active upstream, float16 underflow, or a BatchNormalization after it "
                   "that normalises one value per channel, as with batch size 1 on a 1×1 feature map, and so outputs "
                   "its beta whatever its input)")
            fix = ("keep the path from this variable to the loss differentiable and in float32 (and do not "
                   "batch-normalise a single value per channel)")
            code = "gradient-zero"
            rule = "TFL303"
        else:
            why = "the optimizer's learning rate is 0"
            fix = "set a learning rate > 0"
            code = "learning-rate-zero"
        msg = f"{len(names)} trainable variable(s) never changed during training although the optimizer ran: {shown}; {why}. Fix: {fix}."
        out.append(Signal(kind=KIND, severity="info" if key == "zero-bias" else "warning", message=msg,
                          location=Location(str(site[0]), int(site[1])) if site else None,
                          details={"reason": code, "variables": names, "shapes": [d["shape"] for d in ds], "rule": rule,
                                   "fix": fix, "count": len(names)}))
    return out
