"""Turn a profiling session's store into a :class:`~tflint.profiler.report.Report`.

Each signal is judged here, from aggregated records: which retraces exceed what is expected,
which None gradients to report (deduplicated), whether memory grows (robust trend), whether the
loop is input-bound, which ops fell back to another device. Messages say what happens, where,
and how to fix it.
"""

from __future__ import annotations

import math
import os
from typing import Any

from tflint import __version__
from tflint.profiler.report import Location, Report, Signal

PROJECT_STEPS = 10_000
UNTRACED_REASON = ("the training step was traced before the hooks were on (in an earlier cell or watch() session), "
                   "so its graph carries no probe; trace it again with the hooks on to measure it (compile the "
                   "model again, or create the tf.function anew)")
INPUT_HIGH = 0.20
INPUT_MODERATE = 0.05


def _loc(site: Any) -> Location | None:
    if not site:
        return None
    try:
        return Location(str(site[0]), int(site[1]))
    except (TypeError, ValueError, IndexError):
        return None


def _mib(b: float) -> str:
    if abs(b) >= 1024**3:
        return f"{b / 1024**3:.2f} GiB"
    if abs(b) >= 1024**2:
        return f"{b / 1024**2:.1f} MiB"
    return f"{b / 1024:.1f} KiB"


def _hook_status(session: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("retrace", "none-gradient", "soft-placement", "input-stall", "memory-growth"):
        h = session.hooks.get(kind)
        if kind not in session.signals:
            out[kind] = {"status": "off", "reason": "not selected"}
        elif h is None:
            out[kind] = {"status": "unavailable", "reason": "not implemented in this tflint build"}
        else:
            out[kind] = h.status_dict()
    if session.steps is not None:
        out["steps"] = session.steps.status_dict()
        if out["steps"].get("status") == "failed":
            # memory and input wait are sampled per step: without steps they were not measured
            for kind in ("input-stall", "memory-growth"):
                if out[kind].get("status") == "ok":
                    out[kind] = {"status": "failed",
                                 "reason": f"sampled per step, and step counting failed: {out['steps'].get('reason')}"}
        main = session.steps.main_loop()
        if main is not None and main.key in session.steps.untraced_loops and out["input-stall"].get("status") == "ok":
            # fit reads its batches inside its train function, timed by probes traced with it
            out["input-stall"] = {"status": "unavailable", "reason": UNTRACED_REASON.replace("no probe", "no input probe")}
    if getattr(session, "distribute", None) is not None:
        out["distribute"] = session.distribute.status_dict()
    if session.input is not None and out["input-stall"].get("status") == "ok":
        out["input-stall"]["note"] = ("tf.data iterators are timed (eager and inside tf.function/fit); "
                                      "plain Python generators iterated directly are not")
    gh = session.gradients
    if gh is not None and gh.keras_note:
        out["none-gradient"]["note"] = gh.keras_note
    return out


# ------------------------------------------------------------------------------ retrace
def _retrace_fix(causes: dict[str, int], examples: list[dict[str, Any]], recreated: bool) -> str:
    text = " ".join(c for e in examples for c in e.get("causes", []))
    fixes = []
    if recreated:
        fixes.append("create the tf.function once (outside the loop or function that runs each step) and reuse it")
    if "Python int" in text or "Python float" in text or "Python bool" in text:
        fixes.append("pass changing Python numbers as tensors (e.g. tf.constant(step)) so they do not become part of the trace key")
    if "container type" in text:
        fixes.append("pass the same container type on every call (a tuple each time, or a list each time)")
    if "TensorSpec(shape=" in text:
        fixes.append("give the function an input_signature with None for the varying dimensions, or use reduce_retracing=True")
    if "dtype " in text:
        fixes.append("cast inputs to one dtype before calling the function")
    if "new Python object" in text:
        fixes.append("pass tensors or tf.Variables instead of new Python objects (custom objects are matched by identity), "
                     "or define __tf_tracing_type__ on the class")
    if "captures changed" in text:
        fixes.append("do not rebind globals/closure variables used by the function between calls; use a tf.Variable")
    if not fixes:
        fixes.append("keep argument shapes, dtypes and Python values stable between calls, or use input_signature")
    return "; ".join(fixes)


MAX_PARTIAL_RETRACES = 3  # a training set's, a validation set's and a test set's last batch
MIN_STEPS_AFTER = 8  # training steps without a trace that show each place reusing its own


def _partial_batches(rec: dict[str, Any], examples: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``{"args", "full", "partial", "partials"}`` when each of a function's few retraces is a
    batch that shrank (the last batch of each dataset it is called on), else None."""
    from tflint.runtime.retrace import partial_batch_change

    n = rec["retraces"]
    if not 1 <= n <= MAX_PARTIAL_RETRACES or len(examples) < n:
        return None
    changes = [partial_batch_change(e.get("causes") or []) for e in examples[:n]]
    if any(c is None for c in changes) or any(c["args"] != changes[0]["args"] for c in changes):
        return None
    partials = sorted({c["partial"] for c in changes}, reverse=True)
    out = {"args": changes[0]["args"], "full": max(c["full"] for c in changes), "partial": partials[0],
           "partials": partials}
    if any(c.get("per_replica") for c in changes):
        out["per_replica"] = True
    return out


def _per_call_site(rec: dict[str, Any], examples: list[dict[str, Any]], steps: int) -> int | None:
    """The number of places that call the function when each of its few traces was made from a
    place of its own, all by the training step after the first trace, and none in the
    ``MIN_STEPS_AFTER`` or more steps since (of ``steps`` in all): one function called from two
    places with arguments of two structures (a soft update of two target networks) is traced once
    per place, and each place reuses its trace. None otherwise."""
    n = rec["retraces"]
    first_site, first_step = rec.get("first_site"), rec.get("first_step")
    if not 1 <= n <= MAX_PARTIAL_RETRACES or len(examples) < n or not first_site or first_step is None:
        return None
    sites = [tuple(first_site)] + [tuple(e.get("site") or ()) for e in examples[:n]]
    if not all(sites) or len(set(sites)) != len(sites):
        return None
    if any(e.get("step", 0) > first_step + 1 for e in examples[:n]) or steps < first_step + 1 + MIN_STEPS_AFTER:
        return None
    return len(sites)


def _retrace_signals(session: Any) -> list[Signal]:
    out = []
    for rec in session.store.records_of("retrace"):
        allowed = 1 if rec.get("reduce_retracing") else 0
        # a new tf.function object per call of the code that creates it (created inside a loop);
        # not the objects of a tf.function method, one per instance, each traced once
        recreated = (not rec.get("library")) and rec.get("n_objects", 0) >= 5 and not (rec.get("method") and rec["retraces"] == 0)
        if rec["retraces"] <= allowed and not recreated:
            continue
        examples = rec.get("examples", [])
        first_causes = examples[0]["causes"] if examples else []
        if recreated and rec["retraces"] <= allowed:
            what = (f"tf.function `{rec['function']}` was created {rec['n_objects']} times and traced {rec['traces']} times: "
                    "a new tf.function object for the same Python function re-traces from scratch each time")
            first_causes = ["new tf.function object (created inside a loop?)"]
        else:
            what = f"tf.function `{rec['function']}` {_trace_counts(rec)}; first cause: {first_causes[0] if first_causes else 'unknown'}"
        fix = _retrace_fix(rec.get("causes", {}), examples, recreated)
        site = rec.get("retrace_site") or rec.get("first_site")
        sev = "warning"
        cost = "Each retrace rebuilds the graph (slow, and each trace is kept in the function's cache)"
        partial = _partial_batches(rec, examples) if not recreated else None
        places = (_per_call_site(rec, examples, session.steps.count if session.steps is not None else 0)
                  if not recreated and partial is None else None)
        if places is not None:
            sev = "info"
            what = (f"tf.function `{rec['function']}` {_trace_counts(rec)}, once for each of the {places} places that call it "
                    f"with arguments of another structure (first cause: {first_causes[0] if first_causes else 'unknown'}); "
                    "each place has reused its own trace since")
            cost = "This costs one trace per place, made at the start, not one per step"
            fix = ("nothing is needed; to trace once, pass arguments of one structure from every place, "
                   "or use one tf.function per place")
        if partial is not None:
            # one extra trace for the last, smaller batch of each dataset: expected, once per shape
            sev = "info"
            args = ", ".join(f"`{a}`" for a in partial["args"])
            sizes = " and ".join(str(n) for n in partial["partials"])
            what = (f"tf.function `{rec['function']}` {_trace_counts(rec)}: the final partial batch"
                    f"{'es' if len(partial['partials']) > 1 else ''} ({sizes} instead of {partial['full']}"
                    f"{' per replica' if partial.get('per_replica') else ''}) give"
                    f"{'' if len(partial['partials']) > 1 else 's'} {args} a new leading dimension")
            cost = "This costs one trace per new batch size, not one per step"
            fix = ("drop the partial batch with .batch(batch_size, drop_remainder=True), or give the function an "
                   "input_signature with a None batch dimension (e.g. tf.TensorSpec([None, ...])) so one trace serves every batch size")
        out.append(
            Signal(
                kind="retrace",
                severity=sev,
                message=f"{what}. {cost}. Fix: {fix}.",
                location=_loc(site),
                details={
                    "function": rec["function"],
                    "qualname": rec.get("qualname"),
                    "defined_at": _loc(rec.get("defined_at")).__dict__ if rec.get("defined_at") else None,
                    "traces": rec["traces"],
                    "retraces": rec["retraces"],
                    "expected_retraces": allowed,
                    "function_objects": rec.get("n_objects", 1),
                    "reduce_retracing": rec.get("reduce_retracing", False),
                    "causes": first_causes,
                    "cause_counts": rec.get("causes", {}),
                    "examples": examples,
                    "fix": fix,
                    "partial_batch": partial,
                    "call_sites": places,
                },
            )
        )
    return out


def _trace_counts(rec: dict[str, Any]) -> str:
    """'was traced 4 times: 3 first traces (one per function object or calling context) + 1 retrace'."""
    traces, retraces = int(rec["traces"]), int(rec["retraces"])
    first = traces - retraces
    if first == 1:
        return f"was traced {traces} times: the first trace + {retraces} retrace{'s' if retraces != 1 else ''}"
    return (f"was traced {traces} times: {first} first traces (one per function object or calling context) "
            f"+ {retraces} retrace{'s' if retraces != 1 else ''}")


# ------------------------------------------------------------------------- none-gradient
def _gradient_signals(session: Any) -> list[Signal]:
    from tflint.runtime.gradients import FIX_TEXT, REASON_TEXT

    recs = session.store.records_of("none-gradient")
    grad_names: dict[Any, set[str]] = {}
    for r in recs:
        if r["api"] == "gradient":
            grad_names.setdefault(tuple(r["site"]) if r["site"] else None, set()).update(v["name"] for v in r["variables"])
    out = []
    for r in recs:
        site = tuple(r["site"]) if r["site"] else None
        names = [v["name"] for v in r["variables"]]
        if r["api"] != "gradient":
            if r.get("empty"):
                out.append(
                    Signal(
                        kind="none-gradient",
                        severity="error",
                        message=(f"optimizer.{r['api']}() received no gradients/variables: the update does nothing "
                                 "(or raises). Fix: pass the (gradient, variable) pairs of the model's trainable variables."),
                        location=_loc(site),
                        details={"api": r["api"], "empty": True, "count": r["count"], "variables": []},
                    )
                )
                continue
            # already explained by a GradientTape.gradient finding at the same site
            if site in grad_names and set(names) <= grad_names[site]:
                continue
            all_none = r.get("all_none")
            out.append(
                Signal(
                    kind="none-gradient",
                    severity="error" if all_none else "warning",
                    message=(f"optimizer.{r['api']}() received None gradients for {_names(names)}"
                             + (": Keras raises 'No gradients provided for any variable'" if all_none else
                                ": Keras skips them silently, so they are never trained")
                             + ". Fix: find why the tape returns None for them (see the gradient call), or leave them out."),
                    location=_loc(site),
                    details={"api": r["api"], "variables": r["variables"], "count": r["count"], "all_none": bool(all_none),
                             **_replica_details(r)},
                )
            )
            continue
        by_reason: dict[str, list[dict[str, Any]]] = {}
        for v in r["variables"]:
            by_reason.setdefault(v["reason"], []).append(v)
        parts = []
        fixes = []
        for reason, vs in by_reason.items():
            dtype = vs[0].get("dtype")
            parts.append(f"{_names([_vdesc(v) for v in vs])}: {REASON_TEXT.get(reason, reason).format(dtype=dtype)}")
            fixes.append(FIX_TEXT.get(reason, ""))
        n = len(r["variables"])
        mode = "in eager mode" if r.get("eager") else "while tracing a tf.function (every call of that trace returns None)"
        msg = (f"GradientTape.gradient returned None for {n} of {r.get('n_sources', n)} source(s) {mode}"
               + _replicas_text(r) + " — "
               + "; ".join(parts) + ". Fix: " + "; ".join(f for f in fixes if f) + ".")
        out.append(
            Signal(
                kind="none-gradient",
                severity="warning",
                message=msg,
                location=_loc(site),
                details={
                    "api": "GradientTape.gradient",
                    "variables": r["variables"],
                    "reasons": sorted(by_reason),
                    "count": r["count"],
                    "eager": r.get("eager"),
                    "sources": r.get("n_sources"),
                    **_replica_details(r),
                },
            )
        )
    return out


def _replica_details(r: dict[str, Any]) -> dict[str, Any]:
    if not r.get("replicas"):
        return {}
    return {"replicas": list(r["replicas"]), "replicas_in_sync": r.get("replicas_in_sync")}


def _replicas_text(r: dict[str, Any]) -> str:
    """' on every replica (0, 1 of 2)' / ' on replica 1 of 4' under a tf.distribute strategy."""
    reps = r.get("replicas")
    if not reps:
        return ""
    n = r.get("replicas_in_sync")
    ids = ", ".join(str(i) for i in reps)
    if n and len(reps) == n and n > 1:
        return f" on every replica ({ids} of {n})"
    return f" on replica{'s' if len(reps) > 1 else ''} {ids}" + (f" of {n}" if n else "")


def _vdesc(v: dict[str, Any]) -> str:
    shape = v.get("shape")
    return f"'{v['name']}'" + (f" (shape {tuple(shape)})" if shape is not None else "")


def _names(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# ------------------------------------------------------------------------- memory-growth
DATA_ITEM_BYTES = 1024  # a list item larger than this is data (a frame, a batch), not a step's result
MIN_MEMORY_RETRACES = 3  # fewer retraces are a few one-off allocations (a multi-scale loop's stages)


def _memory_signals(session: Any, metrics: dict[str, Any]) -> list[Signal]:
    from tflint.runtime.memory import analyze_runs

    out = []
    trends: dict[str, Any] = {}
    series = {"host_rss": session.store.series("host_rss_bytes").downsample(400)}
    if session.memory is not None:
        for d, s in session.memory.tf_mem.items():
            series[f"tf:{d}"] = s.downsample(400)
    starts = session.steps.run_starts() if session.steps is not None else []
    # a retrace starts a stretch of its own: a new input size allocates anew for some steps (a
    # multi-scale loop's next stage), a warm-up like a new run's, not growth per step
    retraced = _retrace_steps(session)
    for name, pts in series.items():
        trends[name] = analyze_runs(pts, starts + retraced)
    metrics["memory_trend"] = trends
    if "memory-growth" not in session.signals:
        return out
    containers = _growing_containers(session)
    growing = {k: t for k, t in trends.items() if t.get("growth")}
    if not growing and len(retraced) >= MIN_MEMORY_RETRACES and not containers:
        # flat between the retraces, higher after each: memory that follows the retraces
        across = {k: t for k, pts in series.items()
                  if (t := analyze_runs(pts, starts)).get("growth") and _retraces_in(session, t["window_steps"]) >= MIN_MEMORY_RETRACES}
        if across:
            name, t = max(across.items(), key=lambda kv: kv[1]["growth_bytes"])
            out.append(_retrace_memory_signal(session, name, t, _retraces_in(session, t["window_steps"])))
            return out
    if not growing:
        # a list that gains an item per call of a loop that trains nothing (predictions, Grad-CAM
        # heatmaps collected call by call) is the program's output, not a leak of its steps
        if containers and session.steps is not None and session.steps.trains:
            out.append(_container_signal(containers[0], session))
        return out
    name, t = max(growing.items(), key=lambda kv: kv[1]["slope_bytes_per_step"])
    slope = t["slope_bytes_per_step"]
    first_step, last_step = int(t["window_steps"][0]), int(t["window_steps"][1])
    # project no further than this run went: as many steps again, at most PROJECT_STEPS
    run_steps = session.steps.count if session.steps is not None else last_step
    horizon = int(max(1, min(PROJECT_STEPS, run_steps or last_step)))
    rate = t.get("late_slope_bytes_per_step", slope)  # the rate of the window's last third: the growth going on
    projected = t["last_bytes"] + rate * horizon
    what = "host RSS" if name == "host_rss" else f"TensorFlow {name[3:]} allocator memory"
    causes = _memory_causes(session, t, containers)
    msg = (f"{what} grows {_mib(slope)}/step ({_mib(t['growth_bytes'])} over steps {first_step}–{last_step}, "
           f"after warm-up; {_mib(rate)}/step over its last third); if it keeps that rate, another {horizon:,} "
           f"steps (as many as this run) add {_mib(rate * horizon)} (≈{_mib(projected)} in all).")
    if causes:
        msg += " Measured cause: " + "; ".join(c["text"] for c in causes) + "."
    else:
        n_re = _retraces_in(session, t["window_steps"])
        re_text = "no retraces" if n_re == 0 else f"only {n_re} retrace"
        msg += (" No cause was measured (no growing container of tensors in the loop's frames, no live persistent "
                f"tape, {re_text} while it grew).")
    msg += (" Fix: do not keep per-step tensors/arrays alive (append float(loss) or loss.numpy(), not the tensor), "
            "release persistent tapes (del tape), and stop retracing.")
    site = session.steps.site_at(first_step) if session.steps is not None else None  # the loop that grew
    out.append(
        Signal(
            kind="memory-growth",
            severity="warning",
            message=msg,
            location=_loc(site),
            details={
                "series": name,
                "slope_bytes_per_step": slope,
                "mk_z": t["mk_z"],
                "growth_bytes": t["growth_bytes"],
                "baseline_bytes": t["baseline_bytes"],
                "projected_bytes_after_steps": {"steps": horizon, "bytes": projected},
                "window_steps": t["window_steps"],
                "causes": causes,
                "all_series": {k: {kk: vv for kk, vv in v.items()} for k, v in growing.items()},
            },
        )
    )
    return out


def _retrace_steps(session: Any) -> list[int]:
    rt = session.retrace
    if rt is None or not rt.retraces:
        return []
    return sorted({int(p[0]) for p in session.store.series("retraces").downsample(400)})


def _retrace_memory_signal(session: Any, name: str, t: dict[str, Any], n_retraces: int) -> Signal:
    """Memory that grew over the run but not between its retraces: each trace keeps its graph in
    the function's cache. It grows for as long as the function retraces, not with the steps."""
    what = "host RSS" if name == "host_rss" else f"TensorFlow {name[3:]} allocator memory"
    lo, hi = int(t["window_steps"][0]), int(t["window_steps"][1])
    msg = (f"{what} grew {_mib(t['growth_bytes'])} over steps {lo}–{hi} with the {n_retraces} retraces there, and not "
           "between them: each trace keeps a graph alive in the function's cache, so memory grows for as long as "
           "the function retraces (see the retrace finding). Fix: stop the retraces (tensors instead of changing "
           "Python numbers, an input_signature with None dimensions).")
    site = session.steps.site_at(lo) if session.steps is not None else None
    cause = {"kind": "retrace", "count": n_retraces,
             "text": f"{n_retraces} retraces while it grew (steps {lo}–{hi}); no growth between them"}
    return Signal(kind="memory-growth", severity="warning", message=msg, location=_loc(site),
                  details={"series": name, "slope_bytes_per_step": t["slope_bytes_per_step"], "mk_z": t["mk_z"],
                           "growth_bytes": t["growth_bytes"], "baseline_bytes": t["baseline_bytes"],
                           "window_steps": t["window_steps"], "between_retraces": False, "causes": [cause]})


def _growing_containers(session: Any) -> list[dict[str, Any]]:
    st = session.steps
    watch = getattr(st, "containers", None) if st is not None else None
    if watch is None:
        return []
    found = watch.growing(st.count)
    for c in found:
        per = "one" if 0.75 <= c["per_step"] <= 1.5 else f"{c['per_step']:g}"
        c["text"] = (f"the list `{c['name']}` ({c['scope']}, {os.path.basename(c['file'])}:{c['line']}) grows by {per} "
                     f"{c['type']} per step: {c['count']:,} held, ≈{_mib(c['bytes_each'])} each")
    return found


def _container_signal(c: dict[str, Any], session: Any) -> Signal:
    """A list that gains a tensor/array every step: the pattern is the finding, whatever the bytes.
    Its fix depends on what it holds: results of a step (a loss, a metric: a few elements each)
    are kept as Python numbers; data (observation frames of a replay memory, predictions) is
    bounded."""
    msg = (f"the list `{c['name']}` grows by {'one' if 0.75 <= c['per_step'] <= 1.5 else format(c['per_step'], 'g')} "
           f"{c['type']} per training step ({c['count']:,} held after {session.steps.count:,} steps, "
           f"≈{_mib(c['bytes_held'])} so far): each one stays alive, with its buffer, as long as the list holds it, "
           "so memory grows with the run for as long as the list does.")
    if c.get("bytes_each", 0) > DATA_ITEM_BYTES:
        msg += (" Fix: if it is a buffer of data (a replay memory, collected inputs or predictions), bound it to what "
                "memory allows: collections.deque(maxlen=N), or a preallocated numpy array used as a ring buffer; "
                "if it keeps per-step results, keep them as Python numbers or a running aggregate instead.")
    else:
        msg += (" Fix: keep Python numbers (float(loss) or loss.numpy().item()) or a running aggregate "
                "(keras.metrics.Mean), or clear the list at the end of each epoch.")
    causes = [c]
    gh = session.gradients
    n_tapes = gh.live_persistent_tapes() if gh is not None else 0
    if n_tapes:  # measured too: the tapes alive now keep every tensor they recorded
        causes.append({"kind": "persistent-tape", "count": n_tapes,
                       "text": f"{n_tapes} persistent GradientTape(s) still alive (they keep every recorded tensor)"})
        msg += f" Also: {causes[-1]['text']}; release them (del tape)."
    return Signal(
        kind="memory-growth",
        severity="warning",
        message=msg,
        location=_loc((c["file"], c["line"])),
        details={"causes": causes, "container": c["name"], "count": c["count"], "per_step": c["per_step"]},
    )


def _memory_causes(session: Any, trend: dict[str, Any], containers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only what was measured: live persistent tapes, retraces during the growth window, lists
    measured growing with the steps."""
    causes: list[dict[str, Any]] = []
    gh = session.gradients
    if gh is not None:
        n = gh.live_persistent_tapes()
        if n:
            causes.append({"kind": "persistent-tape", "count": n,
                           "text": f"{n} persistent GradientTape(s) still alive (they keep every recorded tensor)"})
    n_re = _retraces_in(session, trend["window_steps"])
    if n_re >= 2:
        lo, hi = trend["window_steps"]
        causes.append({"kind": "retrace", "count": n_re,
                       "text": f"{n_re} retraces while it grew (steps {int(lo)}–{int(hi)}; each trace keeps a graph alive)"})
    causes.extend(containers[:3])
    return causes


def _retraces_in(session: Any, window: list[float]) -> int:
    """Retraces recorded at steps inside ``window``."""
    rt = session.retrace
    if rt is None or not rt.retraces:
        return 0
    lo, hi = window
    return sum(1 for p in session.store.series("retraces").downsample(400) if lo <= p[0] <= hi)


# --------------------------------------------------------------------------- input-stall
def _input_signals(session: Any, metrics: dict[str, Any]) -> list[Signal]:
    inp = session.input
    if inp is None:
        metrics["input_wait_share"] = {"overall": None, "series": []}
        return []
    summary = inp.summary()
    metrics["input_wait_share"] = {"overall": summary.get("share"), "series": summary.get("series", [])}
    metrics["input"] = {k: v for k, v in summary.items() if k not in ("series",)}
    return inp.signals(summary) if "input-stall" in session.signals else []


def _placement_signals(session: Any, metrics: dict[str, Any]) -> list[Signal]:
    pl = session.placement
    if pl is None:
        return []
    try:
        pl.collect()
    except Exception as exc:  # noqa: BLE001
        pl.fail(exc, "collect")
    metrics["placement"] = pl.summary()
    return pl.signals()


# ---------------------------------------------------------------------------- distribute
def _tag_worker(session: Any, metrics: dict[str, Any]) -> None:
    """``metrics["worker"]``: this process's role in a tf.distribute job, its strategy and the
    timing of its loop over distributed batches (``tflint report merge`` reads it)."""
    try:
        from tflint.runtime.distribute import describe_worker

        hook = getattr(session, "distribute", None)
        metrics["worker"] = hook.metrics() if hook is not None else describe_worker()
    except Exception as exc:  # noqa: BLE001
        metrics.setdefault("aggregation_errors", []).append(f"worker tag: {type(exc).__name__}: {exc}")


# ------------------------------------------------------------------------ training health
def _health_hook_status(session: Any, out: dict[str, Any]) -> None:
    """Status of the training-health kinds: the shared probe's, unless the kind's own failed."""
    from tflint.profiler.report import TRAINING_HEALTH_KINDS

    mon = getattr(session, "health", None)
    base = mon.status_dict() if mon is not None else None
    for kind in TRAINING_HEALTH_KINDS:
        h = session.hooks.get(kind)
        if kind not in session.signals:
            out[kind] = {"status": "off", "reason": "not selected"}
        elif h is None or base is None:
            out[kind] = {"status": "unavailable", "reason": "not implemented in this tflint build"}
        elif h.status != "ok":
            out[kind] = h.status_dict()
        elif base.get("status") != "ok":
            out[kind] = {"status": base["status"], "reason": f"training-health probe: {base.get('reason')}"}
        else:
            out[kind] = {"status": "ok"}
    if mon is not None and out.get("none-gradient", {}).get("status") == "unavailable" and base and base.get("status") == "ok":
        for kind in TRAINING_HEALTH_KINDS:
            if out[kind].get("status") == "ok":
                out[kind] = {"status": "unavailable", "reason": "needs the GradientTape hook, which is unavailable"}
    steps = session.steps
    if (mon is not None and not mon.probes and not mon.eager_calls and steps is not None and steps.count
            and steps.trained_untraced()):
        # training ran, in a tf.function traced before the hooks were on (an earlier notebook
        # cell or watch() session): its graph has no probe, and nothing was measured
        for kind in TRAINING_HEALTH_KINDS:
            if out[kind].get("status") == "ok":
                out[kind] = {"status": "unavailable", "reason": UNTRACED_REASON}


def _health_signals(session: Any, metrics: dict[str, Any]) -> list[Signal]:
    """nan-inf, dead-parameter, exploding/vanishing gradients, loss stall and loss broadcasting,
    each judged by its own module; the loss and gradient-norm series go into the metrics."""
    mon = getattr(session, "health", None)
    if mon is None:
        return []
    try:
        mon.collect()
    except Exception as exc:  # noqa: BLE001
        mon.fail(exc, "final read")
    def finite(pts: list[list[float]]) -> list[list[float]]:
        # JSON has no NaN/Inf: non-finite points are left out (the nan-inf signal says when)
        return [p for p in pts if math.isfinite(p[1])]

    metrics["loss"] = finite(mon.loss.downsample(200))
    metrics["grad_norm"] = {
        "global": finite(mon.grad_norm.downsample(200)),
        "layers": {lay: finite(s.downsample(100)) for lay, s in mon.layer_norms.items() if s is not None and len(s)},
    }
    # gradient calls that train different models (a GAN's players): the shared series above
    # interleave their values; each gets its own, named by the line of its gradient call
    metrics["losses"] = [
        {"location": {"file": str(site[0]), "line": int(site[1])} if site else None,
         "loss": finite(ss.loss.downsample(200)), "grad_norm": finite(ss.grad_norm.downsample(200))}
        for site, ss in mon.site_groups()
    ]
    from tflint.runtime import dead_params, grad_norms, loss_broadcast, loss_stall, nan_inf

    out: list[Signal] = []
    for kind, module in (("nan-inf", nan_inf), ("dead-parameter", dead_params), ("loss-stall", loss_stall),
                         ("loss-broadcast", loss_broadcast)):
        h = session.hooks.get(kind)
        if kind not in session.signals or h is None or h.status != "ok":
            continue
        try:
            out += module.signals(session)
        except Exception as exc:  # noqa: BLE001 - this kind is lost, the others are kept
            h.fail(exc, "judging the run")
    try:
        out += grad_norms.signals(session)
    except Exception as exc:  # noqa: BLE001
        for kind in ("exploding-gradient", "vanishing-gradient"):
            if session.hooks.get(kind) is not None:
                session.hooks[kind].fail(exc, "judging the run")
    return [s for s in out if session.hooks.get(s.kind) is not None and session.hooks[s.kind].status == "ok"]


# --------------------------------------------------------------------------------- main
def build_report(session: Any, script: str = "<watch>", argv: list[str] | None = None,
                 exit_code: int | None = None, duration_s: float | None = None) -> Report:
    metrics: dict[str, Any] = {}
    signals: list[Signal] = []
    if session.steps is not None and session.input is not None:
        try:  # in-graph input waits read since the last step, before the loops are summed up
            session.steps.finish()
        except Exception as exc:  # noqa: BLE001
            session.steps.fail(exc, "final input-wait attribution")
    steps_summary = session.steps.summary() if session.steps is not None else {"steps": 0}
    steps = int(steps_summary.get("steps") or 0)
    metrics["steps"] = steps
    metrics["step_source"] = steps_summary.get("source")
    metrics["step_time_s"] = steps_summary.get("step_time_s", [])
    metrics["mean_step_time_s"] = steps_summary.get("mean_step_time_s")
    metrics["median_step_time_s"] = steps_summary.get("median_step_time_s")
    metrics["loops"] = steps_summary.get("loops", [])

    # each builder is isolated: a bug in one never loses the others
    def guarded(fn: Any, *args: Any) -> list[Signal]:
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001
            metrics.setdefault("aggregation_errors", []).append(f"{getattr(fn, '__name__', fn)}: {type(exc).__name__}: {exc}")
            return []

    if "retrace" in session.signals:
        signals += guarded(_retrace_signals, session)
    if "none-gradient" in session.signals:
        signals += guarded(_gradient_signals, session)
    signals += guarded(_placement_signals, session, metrics)
    signals += guarded(_input_signals, session, metrics)
    metrics.setdefault("input_wait_share", {"overall": None, "series": []})
    signals += guarded(_memory_signals, session, metrics)
    signals += guarded(_health_signals, session, metrics)

    metrics["host_rss_bytes"] = session.store.series("host_rss_bytes").downsample(200)
    metrics["host_rss_source"] = session.memory.rss_source if session.memory is not None else None
    metrics["device_memory_bytes"] = session.memory.tf_memory_summary() if session.memory is not None else {}
    st = session.store
    metrics["retraces"] = st.count("retrace.retraces")
    metrics["traces"] = st.count("retrace.traces")
    metrics["retraces_series"] = st.series("retraces").downsample(200)
    try:
        from tensorflow.python.eager.polymorphic_function import tracing_compilation

        metrics["graph_building_time_s"] = tracing_compilation._graph_building_time_counter.get_cell().value() / 1e6
    except Exception:  # noqa: BLE001
        pass
    metrics["gpu"] = session.gpu.summary() if session.gpu is not None else {"available": False, "reason": "not sampled"}
    metrics["hooks"] = _hook_status(session)
    try:
        _health_hook_status(session, metrics["hooks"])
    except Exception as exc:  # noqa: BLE001
        metrics.setdefault("aggregation_errors", []).append(f"training-health status: {type(exc).__name__}: {exc}")
    if st.overflow:
        metrics["dropped_records"] = dict(st.overflow)

    _tag_worker(session, metrics)

    order = {"error": 0, "warning": 1, "info": 2}
    signals.sort(key=lambda s: (order.get(s.severity, 3), s.kind))
    return Report(
        tflint_version=__version__,
        script=os.fspath(script),
        argv=list(argv or []),
        exit_code=exit_code,
        duration_s=float(duration_s if duration_s is not None else session.elapsed()),
        steps=steps,
        signals=signals,
        metrics=metrics,
    )
