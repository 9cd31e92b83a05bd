"""None gradients: ``GradientTape.gradient`` results that are ``None`` for a source, and optimizer
``apply``/``apply_gradients`` calls that receive ``None`` gradients or nothing at all.

``GradientTape.gradient`` is wrapped at class level, so eager loops, ``tf.function`` bodies (at
trace time: the Python body runs once per trace) and Keras ``train_step`` are all covered. The
wrapper only tests ``g is None`` on the results; it never converts a tensor to a Python value
(that would fail inside a trace). The analysis, call site and naming run only when a ``None``
is found, and each (call site, variables) pair is recorded once with a count.

Under a ``tf.distribute`` strategy the replica function is traced once per replica: the same
None gradient from every replica is one record, which lists the replicas it was seen on
(``replicas``, ids in the sync group, and ``replicas_in_sync``).
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from tflint.runtime.hookbase import Hook, ThreadFlags, drop_own_frame, user_site_tf_stack
from tflint.runtime.store import add_example

KIND = "none-gradient"
MAX_REPLICAS = 256

REASON_INT = "integer-dtype"
REASON_NOT_READ = "not-read-in-tape"
REASON_UNWATCHED_TENSOR = "unwatched-tensor"
REASON_NO_PATH = "no-differentiable-path"
REASON_NOT_WATCHING = "watch-accessed-variables-off"

REASON_TEXT = {
    REASON_INT: "integer dtype {dtype}: gradients only flow to floating-point sources",
    REASON_NOT_READ: "never read inside the tape (used outside the `with tape:` block, or not used at all)",
    REASON_UNWATCHED_TENSOR: "a plain tensor, not a Variable: the tape does not watch it unless you call tape.watch()",
    REASON_NO_PATH: "read inside the tape but not connected to the target (unused in the loss, or cut by "
    "tf.stop_gradient, an integer cast, argmax/round, or a .numpy() round-trip)",
    REASON_NOT_WATCHING: "the tape has watch_accessed_variables=False and the variable was not passed to tape.watch()",
}

FIX_TEXT = {
    REASON_INT: "cast the source to a float dtype, or leave it out of the sources",
    REASON_NOT_READ: "compute the loss from this variable inside the `with tf.GradientTape()` block, "
    "or leave it out of the sources (e.g. pass model.trainable_variables)",
    REASON_UNWATCHED_TENSOR: "call tape.watch(x) inside the tape, or make it a tf.Variable",
    REASON_NO_PATH: "check that the loss depends on it through differentiable ops; drop it from the sources if it is not trained",
    REASON_NOT_WATCHING: "call tape.watch(variable) inside the tape",
}


def _replica() -> tuple[int, int | None] | None:
    """(replica id in sync group, replicas in sync) when called from a replica of a
    ``tf.distribute`` strategy (``strategy.run``), else None. Only runs when a None is found."""
    try:
        from tensorflow.python.distribute import distribute_lib

        ctx = distribute_lib.get_replica_context()
        if ctx is None or type(ctx.strategy).__name__.startswith("_Default"):
            return None
        rid = getattr(ctx, "_replica_id_in_sync_group", None)
        if isinstance(rid, bool) or not isinstance(rid, int):
            return None
        n = ctx.num_replicas_in_sync
        return rid, (n if isinstance(n, int) else None)
    except Exception:  # noqa: BLE001 - attribution is best effort
        return None


def _is_float(dtype: Any) -> bool:
    try:
        return bool(dtype.is_floating or dtype.is_complex)
    except Exception:  # noqa: BLE001
        return True


def _var_name(s: Any) -> str:
    for attr in ("path", "name"):
        try:
            v = getattr(s, attr, None)
        except Exception:  # noqa: BLE001 - eager tensors have no name
            v = None
        if isinstance(v, str) and v:
            return v
    return f"<{type(s).__name__}>"


def _shape(s: Any) -> list[int | None] | None:
    try:
        return list(s.shape.as_list()) if hasattr(s.shape, "as_list") else list(s.shape)
    except Exception:  # noqa: BLE001
        return None


def _handle_id(v: Any) -> int | None:
    try:
        inner = v.__dict__.get("_value") if hasattr(v, "__dict__") else None
        if inner is not None and hasattr(inner, "handle"):
            v = inner
        return id(v.handle)
    except Exception:  # noqa: BLE001
        return None


def _is_variable(s: Any) -> bool:
    try:
        return hasattr(s, "handle") and (hasattr(s, "assign") or hasattr(s, "_value"))
    except Exception:  # noqa: BLE001
        return False



def _differentiates_variables(sources: Any) -> bool:
    """Whether ``tape.gradient``'s sources hold a variable among their first few leaves (a list
    of a model's variables is answered by its first element)."""
    todo = [sources]
    for _ in range(64):
        if not todo:
            return False
        s = todo.pop(0)
        if isinstance(s, (list, tuple)):
            todo[:0] = list(s[:8])
        elif isinstance(s, dict):
            todo[:0] = list(s.values())[:8]
        elif hasattr(s, "assign"):
            return True
    return False

class GradientHook(Hook):
    kind = KIND

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.persistent_tapes: weakref.WeakSet[Any] = weakref.WeakSet()
        self.keras_note: str | None = None
        self._tls = ThreadFlags()

    def check(self) -> str | None:
        try:
            from tensorflow.python.eager import backprop
        except ImportError as exc:
            return f"tensorflow.python.eager.backprop not importable: {exc}"
        for name in ("gradient", "watch", "watched_variables", "__enter__"):
            if not hasattr(backprop.GradientTape, name):
                return f"GradientTape.{name} not found in this TensorFlow"
        return None

    def _install(self) -> None:
        from tensorflow.python.eager import backprop, context
        from tensorflow.python.util import nest

        hook = self
        executing_eagerly = context.executing_eagerly
        tape_cls = backprop.GradientTape

        steps = self.session.steps
        perf = time.perf_counter

        def make_gradient(orig: Any) -> Any:
            def gradient(tape: Any, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
                result = orig(tape, target, sources, *args, **kwargs)
                if hook.active:
                    # a training step differentiates variables: gradients with respect to inputs
                    # only (saliency maps, Grad-CAM, a gradient penalty) train nothing
                    trains = True
                    try:
                        trains = _differentiates_variables(sources)
                        if executing_eagerly():
                            prim = steps.primary
                            if (prim is None or prim.prio <= 1) and trains:
                                steps.tick(("gradient", 0), "GradientTape.gradient", "gradient", perf())
                        elif steps is not None and trains:
                            steps.on_traced_gradient()  # at trace time only
                        flat = result if isinstance(result, (list, tuple)) else nest.flatten(result)
                        for g in flat:
                            if g is None:
                                hook._on_none(tape, sources, flat, nest, executing_eagerly())
                                break
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "GradientTape.gradient wrapper")
                    health = hook.session.health
                    if health is not None and health.active:  # hook point: training-health probe
                        try:
                            health.on_gradient(tape, target, sources, result, executing_eagerly(), trains)
                        except Exception as exc:  # noqa: BLE001
                            health.fail(exc, "GradientTape.gradient probe")
                return result

            return gradient

        def make_watch(orig: Any) -> Any:
            def watch(tape: Any, tensor: Any) -> Any:
                result = orig(tape, tensor)
                if hook.active:
                    try:
                        ids = tape.__dict__.setdefault("_tflint_watched", set())
                        if len(ids) < 10000:
                            for t in nest.flatten(tensor):
                                ids.add(id(t))
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "GradientTape.watch wrapper")
                return result

            return watch

        def make_enter(orig: Any) -> Any:
            def __enter__(tape: Any) -> Any:
                result = orig(tape)
                if hook.active and getattr(tape, "_persistent", False):
                    try:
                        hook.persistent_tapes.add(tape)
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "GradientTape.__enter__ wrapper")
                health = hook.session.health
                if hook.active and health is not None and health.active:
                    try:
                        health.on_tape_enter(tape, executing_eagerly())
                    except Exception as exc:  # noqa: BLE001
                        health.fail(exc, "GradientTape.__enter__ probe")
                return result

            return __enter__

        self.patch(tape_cls, "gradient", make_gradient)
        self.patch(tape_cls, "watch", make_watch)
        self.patch(tape_cls, "__enter__", make_enter)
        self._install_keras(executing_eagerly)

    def _install_keras(self, executing_eagerly: Any) -> None:
        try:
            from keras.src.optimizers import base_optimizer
        except Exception as exc:  # noqa: BLE001
            self.keras_note = f"Keras optimizer checks unavailable: {type(exc).__name__}: {exc}"
            return
        cls = getattr(base_optimizer, "BaseOptimizer", None)
        if cls is None or not hasattr(cls, "apply") or not hasattr(cls, "apply_gradients"):
            self.keras_note = "Keras BaseOptimizer.apply/apply_gradients not found"
            return
        hook = self
        tls = self._tls

        def make_apply_gradients(orig: Any) -> Any:
            def apply_gradients(opt: Any, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
                if not hook.active:
                    return orig(opt, grads_and_vars, *args, **kwargs)
                if not isinstance(grads_and_vars, (list, tuple)):
                    try:
                        grads_and_vars = list(grads_and_vars)
                    except TypeError:
                        return orig(opt, grads_and_vars, *args, **kwargs)
                try:
                    pairs = [p for p in grads_and_vars if isinstance(p, (list, tuple)) and len(p) == 2]
                    hook._check_apply(opt, [g for g, _ in pairs], [v for _, v in pairs], "apply_gradients", len(grads_and_vars) == 0)
                except Exception as exc:  # noqa: BLE001
                    hook.fail(exc, "optimizer.apply_gradients wrapper")
                hook._health_apply(opt, grads_and_vars)
                depth = tls.depth
                tls.depth = depth + 1
                try:
                    return orig(opt, grads_and_vars, *args, **kwargs)
                except BaseException as exc:
                    drop_own_frame(exc)  # the user's traceback reads as it would without tflint
                    raise
                finally:
                    tls.depth = depth

            return apply_gradients

        def make_apply(orig: Any) -> Any:
            def apply(opt: Any, grads: Any, trainable_variables: Any = None, *args: Any, **kwargs: Any) -> Any:
                if not hook.active:
                    return orig(opt, grads, trainable_variables, *args, **kwargs)
                depth = tls.depth
                if depth == 0 and isinstance(grads, (list, tuple)):
                    try:
                        tv = trainable_variables
                        if tv is None:
                            tv = getattr(opt, "_trainable_variables", None) or []
                        hook._check_apply(opt, list(grads), list(tv) if isinstance(tv, (list, tuple)) else [], "apply", len(grads) == 0)
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "optimizer.apply wrapper")
                    hook._health_apply(opt, list(zip(grads, tv)) if isinstance(tv, (list, tuple)) else [])
                tls.depth = depth + 2
                try:
                    return orig(opt, grads, trainable_variables, *args, **kwargs)
                except BaseException as exc:
                    drop_own_frame(exc)
                    raise
                finally:
                    tls.depth = depth

            return apply

        def make_scale_loss(orig: Any) -> Any:
            def scale_loss(opt: Any, loss: Any) -> Any:
                scaled = orig(opt, loss)
                if scaled is not loss and hook.active:
                    health = hook.session.health
                    if health is not None and health.active:  # hook point: mixed precision's scaled loss
                        try:
                            health.on_scale_loss(opt, loss, scaled, executing_eagerly())
                        except Exception as exc:  # noqa: BLE001
                            health.fail(exc, "optimizer.scale_loss probe")
                return scaled

            return scale_loss

        self.patch(cls, "apply_gradients", make_apply_gradients)
        self.patch(cls, "apply", make_apply)
        if hasattr(cls, "scale_loss"):
            self.patch(cls, "scale_loss", make_scale_loss)
        try:
            from keras.src.optimizers.loss_scale_optimizer import LossScaleOptimizer
        except Exception:  # noqa: BLE001 - no mixed precision in this Keras: nothing to unscale
            LossScaleOptimizer = None  # noqa: N806
        if LossScaleOptimizer is not None and "scale_loss" in vars(LossScaleOptimizer):
            self.patch(LossScaleOptimizer, "scale_loss", make_scale_loss)

    def _health_apply(self, opt: Any, grads_and_vars: Any) -> None:
        """Hook point: which variables the optimizer was given (dead-parameter, loss-stall)."""
        health = self.session.health
        if health is None or not health.active:
            return
        try:
            pairs = [p for p in grads_and_vars if isinstance(p, (list, tuple)) and len(p) == 2]
            health.on_apply(opt, [g for g, _ in pairs], [v for _, v in pairs])
        except Exception as exc:  # noqa: BLE001
            health.fail(exc, "optimizer probe")

    # ---------------------------------------------------------------------------------
    def _on_none(self, tape: Any, sources: Any, flat_grads: Any, nest: Any, eager: bool) -> None:
        flat_sources = sources if isinstance(sources, (list, tuple)) else nest.flatten(sources)
        if len(flat_sources) != len(flat_grads):
            try:
                flat_sources = nest.flatten(sources)
            except Exception:  # noqa: BLE001
                return
        watched_ids: set[int] | None = None
        watched_tensors = tape.__dict__.get("_tflint_watched", set())
        watch_accessed = getattr(tape, "_watch_accessed_variables", True)
        entries = []
        for s, g in zip(flat_sources, flat_grads):
            if g is not None:
                continue
            dtype = getattr(s, "dtype", None)
            if dtype is not None and not _is_float(dtype):
                reason = REASON_INT
            elif _is_variable(s):
                if watched_ids is None:
                    try:
                        watched_ids = {i for i in (_handle_id(v) for v in tape.watched_variables()) if i is not None}
                    except Exception:  # noqa: BLE001
                        watched_ids = set()
                hid = _handle_id(s)
                if hid is not None and hid in watched_ids:
                    reason = REASON_NO_PATH
                elif not watch_accessed and id(s) not in watched_tensors:
                    reason = REASON_NOT_WATCHING
                else:
                    reason = REASON_NOT_READ
            else:
                reason = REASON_NO_PATH if id(s) in watched_tensors else REASON_UNWATCHED_TENSOR
            entries.append(
                {
                    "name": _var_name(s),
                    "shape": _shape(s),
                    "dtype": getattr(dtype, "name", str(dtype)),
                    "reason": reason,
                }
            )
        if not entries:
            return
        site = user_site_tf_stack()
        self._add(
            site,
            entries,
            "gradient",
            eager,
            n_sources=len(flat_sources),
        )

    def _check_apply(self, opt: Any, grads: list[Any], variables: list[Any], api: str, empty: bool) -> None:
        if empty:
            site = user_site_tf_stack()
            self._add(site, [], api, None, empty=True)
            return
        missing = [i for i, g in enumerate(grads) if g is None]
        if not missing:
            return
        entries = []
        for i in missing:
            v = variables[i] if i < len(variables) else None
            entries.append({"name": _var_name(v) if v is not None else f"#{i}", "shape": _shape(v) if v is not None else None, "dtype": getattr(getattr(v, "dtype", None), "name", None), "reason": "none-passed-to-optimizer"})
        site = user_site_tf_stack()
        self._add(site, entries, api, None, n_sources=len(grads), all_none=len(missing) == len(grads))

    def _add(self, site: Any, entries: list[dict[str, Any]], api: str, eager: bool | None, **extra: Any) -> None:
        names = tuple(e["name"] for e in entries)
        key = (api, tuple(site) if site else None, names)
        rec = self.store.record(
            KIND,
            key,
            lambda: {
                "api": api,
                "site": list(site) if site else None,
                "variables": entries,
                "count": 0,
                "eager": eager,
                **extra,
            },
        )
        self.store.incr("none_gradient.events")
        if rec is not None:
            rec["count"] += 1
            if eager is not None and rec.get("eager") is not eager:
                rec["eager"] = rec.get("eager") or eager
            replica = _replica()
            if replica is not None:
                rid, n = replica
                seen = rec.setdefault("replicas", [])
                if rid not in seen and len(seen) < MAX_REPLICAS:
                    seen.append(rid)
                    seen.sort()
                rec["replicas_in_sync"] = n

    def live_persistent_tapes(self) -> int:
        try:
            return len(self.persistent_tapes)
        except Exception:  # noqa: BLE001
            return 0


__all__ = ["GradientHook", "KIND", "REASON_TEXT", "FIX_TEXT", "add_example"]
