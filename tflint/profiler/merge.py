"""Merge the reports of the workers of one distributed job into one report.

Plain data in, plain data out: ``merge(reports)`` reads only :class:`Report` objects (as loaded
from each worker's ``tflint profile --json`` file) and returns a new one, rendered like any other.

What the merged report holds
----------------------------
``signals``
    The union of the workers' signals. Two signals are the same finding when they have the same
    kind, location and subject (function, variable, op or dataset named in their details). A
    merged signal keeps the first worker's message, takes the worst severity, and records
    ``details["workers"]`` (the worker ids it was seen on, in report order) and, when the
    workers' messages differ, ``details["per_worker"]`` (``{worker id: message}``). Counts are
    summed; ``details["replicas"]`` (replica ids a None gradient came from) is the union.
``metrics["workers"]``
    ``{worker id: row}`` with the worker's role and strategy (from ``metrics["worker"]``, see
    :mod:`tflint.runtime.distribute`), ``steps``, ``exit_code``, ``duration_s``,
    ``step_time_s`` (``{"median", "p90", "n"}``), ``input_wait_share`` (0-1), ``signals``
    (how many findings it reported), ``retraces``, ``host_rss_peak_bytes``,
    ``device_memory_peak_bytes`` (``{device: bytes}``), ``timing_source`` and ``source`` (the
    report file).
``metrics["stragglers"]``
    One entry per straggling worker (rules below): ``{"worker", "task_type", "task_index",
    "cause"`` (``"input-wait"``, ``"compute"`` or ``"step-time"``), ``"value"``,
    ``"others_median"``, ``"ratio"``, ``"waiting_workers"`` (``{worker id: peer-wait share}``),
    ``"message"}``. Each straggler is also a signal of kind ``straggler`` (warning).
``metrics["workers"][id]["split"]``
    The worker's measured time split over its steps (own input wait, compute, waiting for
    peers in collectives; see :mod:`tflint.runtime.distribute`), and ``waiting_for``: the
    straggler its peer wait is caused by.

The straggler rules
-------------------
Each worker is compared with the **median of the other workers** (with two workers: the other
one), so one slow worker cannot hide by raising the average it is compared with.

*Measured split* (when the workers' reports carry one). In synchronous training every worker's
step is as long as the slowest one's, so step times even out; what differs is where the time
goes. The straggler is the worker the others wait for: the others spend at least
:data:`PEER_WAIT_FLOOR` (20 %) of their step time waiting for peers in collectives, at least
:data:`PEER_WAIT_MARGIN` (15 points) more than it does. Its cause is what it does instead: its own
input wait if that share stands :data:`PEER_WAIT_MARGIN` above the others' (``input-wait``),
else its compute share (``compute``).

*Without a split* (older reports, asynchronous jobs):

* *input wait*: its input-wait share is ≥ :data:`INPUT_WAIT_FLOOR` (20 %, TensorBoard's
  "highly input-bound"), ≥ :data:`RATIO` (1.5) times the others' median share, and at least
  :data:`INPUT_WAIT_MARGIN` (15 percentage points) above it;
* *step time*: its median step time is ≥ 1.5 times the others' median and at least
  :data:`STEP_TIME_FLOOR_S` (5 ms) longer.
"""

from __future__ import annotations

import copy
import os
import statistics
from typing import Any

from tflint import __version__
from tflint.profiler.report import Location, Report, Signal

RATIO = 1.5
PEER_WAIT_FLOOR = 0.20
PEER_WAIT_MARGIN = 0.15
INPUT_WAIT_FLOOR = 0.20
INPUT_WAIT_MARGIN = 0.15
STEP_TIME_FLOOR_S = 0.005

_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
_SUBJECT_KEYS = ("function", "name", "variable", "variables", "op", "op_type", "dataset", "source")
_COUNT_KEYS = ("count", "retraces", "occurrences", "calls", "ops")


class MergeError(ValueError):
    """The reports cannot be merged (none given)."""


def merge(reports: list[Report], sources: list[str] | None = None) -> Report:
    """One report for a whole job: findings with the workers they were seen on, per-worker
    timing, and stragglers. ``sources`` (the files the reports came from) name workers whose
    report carries no ``metrics["worker"]`` tag."""
    if not reports:
        raise MergeError("no reports to merge")
    sources = list(sources) if sources is not None else [""] * len(reports)
    ids = _worker_ids(reports, sources)

    workers: dict[str, dict[str, Any]] = {}
    for wid, report, src in zip(ids, reports, sources):
        workers[wid] = worker_row(report, src)

    signals = _merge_signals(ids, reports)
    stragglers = find_stragglers(workers)
    for s in stragglers:
        signals.append(_straggler_signal(s, reports[ids.index(s["worker"])]))
        for wid, share in s.get("waiting_workers", {}).items():
            workers[wid]["waiting_for"] = {"worker": s["worker"], "cause": s["cause"], "peer_wait_share": share}
    _explain_waiting(signals, stragglers, workers)

    scripts = list(dict.fromkeys(r.script for r in reports))
    codes = [r.exit_code for r in reports]
    nonzero = [c for c in codes if c not in (None, 0)]
    metrics: dict[str, Any] = {
        "merged": {"reports": len(reports), "sources": [s for s in sources if s]},
        "workers": workers,
        "stragglers": stragglers,
        "hooks": _merge_hooks(reports),
    }
    return Report(
        tflint_version=__version__,
        script=scripts[0] if len(scripts) == 1 else ", ".join(scripts),
        argv=list(reports[0].argv),
        exit_code=nonzero[0] if nonzero else (0 if any(c == 0 for c in codes) else None),
        duration_s=max(r.duration_s for r in reports),
        steps=max(r.steps for r in reports),
        signals=signals,
        metrics=metrics,
    )


# -- workers ------------------------------------------------------------------------------
def _worker_ids(reports: list[Report], sources: list[str]) -> list[str]:
    ids: list[str] = []
    for i, (report, src) in enumerate(zip(reports, sources)):
        tag = report.metrics.get("worker")
        wid = tag.get("id") if isinstance(tag, dict) else None
        if not wid or wid == "local":
            wid = os.path.splitext(os.path.basename(src))[0] if src else f"report{i + 1}"
        base, n = str(wid), 2
        while wid in ids:
            wid = f"{base}#{n}"
            n += 1
        ids.append(wid)
    return ids


def worker_row(report: Report, source: str = "") -> dict[str, Any]:
    """The per-worker line of a merged report: role, strategy, steps and timing."""
    tag = report.metrics.get("worker") if isinstance(report.metrics.get("worker"), dict) else {}
    row: dict[str, Any] = {
        key: tag.get(key)
        for key in ("task_type", "task_index", "host", "pid", "strategy", "num_replicas",
                    "local_replicas", "global_batch_size", "per_replica_batch_size")
    }
    row.update(steps=report.steps, exit_code=report.exit_code, duration_s=report.duration_s,
               signals=len(report.signals), source=source or None)
    row["retraces"] = report.metrics.get("retraces") if isinstance(report.metrics.get("retraces"), int) else None
    rss = _series(report.metrics.get("host_rss_bytes"))
    row["host_rss_peak_bytes"] = int(max(rss)) if rss else None
    row["device_memory_peak_bytes"] = _device_peaks(report.metrics.get("device_memory_bytes"))
    step, share, timing_source = _timing(report)
    row["step_time_s"] = step
    row["input_wait_share"] = share
    row["timing_source"] = timing_source
    split = tag.get("split") if isinstance(tag.get("split"), dict) else None
    row["split"] = dict(split) if split and split.get("collectives_timed") else None
    return row


def _device_peaks(value: Any) -> dict[str, int]:
    """``{"CPU:0": peak bytes, ...}`` from a report's ``device_memory_bytes``."""
    out: dict[str, int] = {}
    if not isinstance(value, dict):
        return out
    for dev, info in value.items():
        if not isinstance(info, dict):
            continue
        peak = _number(info.get("peak"))
        if peak is None:
            ys = _series(info.get("series"))
            peak = max(ys) if ys else None
        if peak is not None:
            out[str(dev)] = int(peak)
    return out


def _timing(report: Report) -> tuple[dict[str, Any], float | None, str | None]:
    """(step-time summary, input-wait share, where they came from) for one report.

    Prefers the distributed-loop timing of ``metrics["worker"]`` (one step = one batch of the
    distributed dataset), else the report's own ``step_time_s`` series and
    ``input_wait_share`` (a number or a series, summarised by its median)."""
    tag = report.metrics.get("worker")
    if isinstance(tag, dict) and tag.get("steps_observed"):
        step = tag.get("step_time_s") if isinstance(tag.get("step_time_s"), dict) else {}
        share = _number(tag.get("input_wait_share"))
        if step.get("median") is not None:
            return (_summary_dict(step), share, "distributed iterator")
    values = _series(report.metrics.get("step_time_s"))
    step = summarize(values)
    share_raw = report.metrics.get("input_wait_share")
    share = _number(share_raw)
    if share is None and isinstance(share_raw, dict):
        share = _number(share_raw.get("overall"))
    if share is None:
        share_values = _series(share_raw)
        share = statistics.median(share_values) if share_values else None
    if share is None and isinstance(report.metrics.get("input"), dict):
        share = _number(report.metrics["input"].get("wait_share"))
    return step, share, ("steps" if values else None)


def summarize(values: list[float]) -> dict[str, Any]:
    """``{"median", "p90", "n"}`` (linear-interpolated percentiles)."""
    if not values:
        return {"median": None, "p90": None, "n": 0}
    s = sorted(values)
    return {"median": _pct(s, 50), "p90": _pct(s, 90), "n": len(s)}


def _pct(s: list[float], q: float) -> float:
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return round(s[lo] + (s[hi] - s[lo]) * (pos - lo), 9)


def _summary_dict(d: dict[str, Any]) -> dict[str, Any]:
    return {"median": _number(d.get("median")), "p90": _number(d.get("p90")), "n": int(d.get("n") or 0)}


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if f == f else None


def _series(value: Any) -> list[float]:
    """The y values of a metrics series: ``[[x, y], ...]``, ``[y, ...]`` or ``{"points": ...}``."""
    if isinstance(value, dict):
        for key in ("points", "series", "values"):
            if key in value:
                return _series(value[key])
        return []
    if not isinstance(value, (list, tuple)):
        return []
    out: list[float] = []
    for item in value:
        y = item[1] if isinstance(item, (list, tuple)) and len(item) >= 2 else item
        n = _number(y)
        if n is not None:
            out.append(n)
    return out


# -- stragglers ---------------------------------------------------------------------------
def find_stragglers(workers: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Workers whose input-wait share or median step time stands well above the median of the
    other workers (the rule is in this module's documentation)."""
    out: list[dict[str, Any]] = []
    if len(workers) < 2:
        return out
    splits = {w: r.get("split") for w, r in workers.items()}
    if all(isinstance(v, dict) and _number(v.get("peer_wait_share")) is not None for v in splits.values()):
        return _split_stragglers(workers, splits)
    shares = {w: r.get("input_wait_share") for w, r in workers.items()}
    steps = {w: (r.get("step_time_s") or {}).get("median") for w, r in workers.items()}
    for wid in workers:
        share = shares[wid]
        others = [v for w, v in shares.items() if w != wid and v is not None]
        if share is not None and others:
            ref = statistics.median(others)
            if (share >= INPUT_WAIT_FLOOR and share >= RATIO * ref
                    and share - ref >= INPUT_WAIT_MARGIN):
                out.append({
                    "worker": wid,
                    "cause": "input-wait",
                    "value": round(share, 4),
                    "others_median": round(ref, 4),
                    "ratio": round(share / ref, 2) if ref > 0 else None,
                    "message": (
                        f"{wid} is a straggler: {share:.0%} of its step time is spent waiting "
                        f"for input, against {ref:.0%} on the other workers; every synchronous "
                        f"step waits for it"
                    ),
                })
                continue
        step = steps[wid]
        others = [v for w, v in steps.items() if w != wid and v is not None]
        if step is not None and others:
            ref = statistics.median(others)
            if step >= RATIO * ref and step - ref >= STEP_TIME_FLOOR_S:
                out.append({
                    "worker": wid,
                    "cause": "step-time",
                    "value": round(step, 6),
                    "others_median": round(ref, 6),
                    "ratio": round(step / ref, 2) if ref > 0 else None,
                    "message": (
                        f"{wid} is a straggler: median step {_ms(step)} against {_ms(ref)} on "
                        f"the other workers"
                    ),
                })
    return out


def _who(wid: str, row: dict[str, Any]) -> str:
    """'worker:1 (task type worker, index 1)' when the role is known."""
    if row.get("task_type") is not None and row.get("task_index") is not None:
        return f"{wid} (task type {row['task_type']}, index {row['task_index']})"
    return wid


def _split_stragglers(workers: dict[str, dict[str, Any]], splits: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    peer = {w: float(v["peer_wait_share"]) for w, v in splits.items()}
    own_input = {w: _number(v.get("input_wait_share")) or 0.0 for w, v in splits.items()}
    compute = {w: _number(v.get("compute_share")) or 0.0 for w, v in splits.items()}
    for wid in workers:
        others = [w for w in workers if w != wid]
        ref_peer = statistics.median(peer[w] for w in others)
        if ref_peer < PEER_WAIT_FLOOR or ref_peer - peer[wid] < PEER_WAIT_MARGIN:
            continue
        ref_input = statistics.median(own_input[w] for w in others)
        ref_compute = statistics.median(compute[w] for w in others)
        if own_input[wid] - ref_input >= PEER_WAIT_MARGIN:
            cause, value, ref, what = "input-wait", own_input[wid], ref_input, "waiting for its own input pipeline"
        else:
            cause, value, ref, what = "compute", compute[wid], ref_compute, "computing its step"
        waiting = {w: round(peer[w], 4) for w in others if peer[w] - peer[wid] >= PEER_WAIT_MARGIN}
        row = workers[wid]
        waiting_text = ", ".join(f"{w} {share:.0%}" for w, share in waiting.items())
        out.append({
            "worker": wid,
            "task_type": row.get("task_type"),
            "task_index": row.get("task_index"),
            "cause": cause,
            "value": round(value, 4),
            "others_median": round(ref, 4),
            "ratio": round(value / ref, 2) if ref > 0 else None,
            "peer_wait_share": round(peer[wid], 4),
            "waiting_workers": waiting,
            "message": (
                f"{_who(wid, row)} is the straggler: it spends {value:.0%} of its step time {what}, against "
                f"{ref:.0%} on the other workers, while they wait for it in collectives ({waiting_text} of their "
                f"step time; {peer[wid]:.0%} on {wid}). Every synchronous step is as slow as this worker"
            ),
        })
    return out


def _explain_waiting(signals: list[Signal], stragglers: list[dict[str, Any]], workers: dict[str, dict[str, Any]]) -> None:
    """A worker that waits for a straggler says so: its own input-stall finding, if any, is
    marked as caused by the straggler."""
    if not stragglers:
        return
    for sig in signals:
        if sig.kind != "input-stall" or not isinstance(sig.details, dict) or sig.details.get("straggler"):
            continue
        waiting = [w for w in sig.details.get("workers", []) if workers.get(w, {}).get("waiting_for")]
        if waiting:
            by = {w: workers[w]["waiting_for"]["worker"] for w in waiting}
            sig.details["caused_by"] = by
            sig.message += " On " + ", ".join(f"{w} this waiting is caused by the straggler {s}" for w, s in by.items()) + "."


def _ms(s: float) -> str:
    return f"{s * 1000:.1f} ms" if s < 10 else f"{s:.1f} s"


def _straggler_signal(s: dict[str, Any], report: Report) -> Signal:
    """The ``straggler`` signal of a merged report, located at the worker's own finding of the
    same cause when it has one (its input-stall finding for a slow input)."""
    own = report.signals_of("input-stall") if s["cause"] == "input-wait" else []
    location = copy.deepcopy(own[0].location) if own and own[0].location else None
    if s["cause"] == "input-wait":
        fix = ("speed up this worker's input (parallel map, cache, no Python in the pipeline; see its input-stall "
               "finding), or check its host and data shard")
        cause = "its input pipeline is slower than the other workers'; synchronous all-reduce makes every worker wait for it"
    elif s["cause"] == "compute":
        fix = "find why this worker computes slower (a busier or slower host, other work in its step, its data shard)"
        cause = "its step computes longer than the other workers'; synchronous all-reduce makes every worker wait for it"
    else:
        fix = "compare this worker's host, data shard and retraces with the others'"
        cause = "its steps are longer than the other workers'"
    return Signal(
        kind="straggler",
        severity="warning",
        message=s["message"] + ". Fix: " + fix + ".",
        location=location,
        details={
            "workers": [s["worker"]],
            "worker": s["worker"],
            "task_type": s.get("task_type"),
            "task_index": s.get("task_index"),
            "straggler": True,
            "cause": s["cause"],
            "value": s["value"],
            "others_median": s["others_median"],
            "waiting_workers": s.get("waiting_workers", {}),
            "explanation": cause,
            "fix": fix,
        },
    )


# -- signals ------------------------------------------------------------------------------
def _signal_key(s: Signal) -> tuple[Any, ...]:
    subject = None
    for key in _SUBJECT_KEYS:
        v = s.details.get(key) if isinstance(s.details, dict) else None
        if isinstance(v, (str, int)):
            subject = v
            break
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            subject = tuple(sorted(v))
            break
    loc = (os.path.normpath(s.location.file), s.location.line) if s.location else None
    if loc is None and subject is None:
        subject = s.message
    return (s.kind, loc, subject)


def _merge_signals(ids: list[str], reports: list[Report]) -> list[Signal]:
    merged: dict[tuple[Any, ...], Signal] = {}
    messages: dict[tuple[Any, ...], dict[str, str]] = {}
    for wid, report in zip(ids, reports):
        for s in report.signals:
            key = _signal_key(s)
            m = merged.get(key)
            if m is None:
                m = Signal(
                    kind=s.kind,
                    severity=s.severity,
                    message=s.message,
                    location=Location(s.location.file, s.location.line) if s.location else None,
                    details=copy.deepcopy(s.details) if isinstance(s.details, dict) else {},
                )
                m.details["workers"] = []
                merged[key] = m
                messages[key] = {}
            else:
                if _SEVERITY_RANK.get(s.severity, 3) < _SEVERITY_RANK.get(m.severity, 3):
                    m.severity = s.severity
                for ck in _COUNT_KEYS:
                    a, b = m.details.get(ck), (s.details or {}).get(ck)
                    if _number(a) is not None and _number(b) is not None:
                        m.details[ck] = a + b
                _union_replicas(m.details, s.details)
            if wid not in m.details["workers"]:
                m.details["workers"].append(wid)
            messages[key].setdefault(wid, s.message)
    for key, m in merged.items():
        if len(set(messages[key].values())) > 1:
            m.details["per_worker"] = messages[key]
    return list(merged.values())


def _union_replicas(into: dict[str, Any], other: Any) -> None:
    """A finding seen on several workers was seen on the replicas of all of them."""
    theirs = other.get("replicas") if isinstance(other, dict) else None
    if not isinstance(theirs, list):
        return
    mine = into.get("replicas") if isinstance(into.get("replicas"), list) else []
    ids = [x for x in mine + theirs if isinstance(x, int) and not isinstance(x, bool)]
    into["replicas"] = sorted(set(ids))


def _merge_hooks(reports: list[Report]) -> dict[str, Any]:
    """Per hook, the worst status any worker had (a hook that failed on one worker failed)."""
    rank = {"failed": 0, "unavailable": 1, "ok": 2}
    out: dict[str, Any] = {}
    for r in reports:
        hooks = r.metrics.get("hooks")
        if not isinstance(hooks, dict):
            continue
        for kind, info in hooks.items():
            if not isinstance(info, dict):
                continue
            prev = out.get(kind)
            if prev is None or rank.get(info.get("status", "ok"), 2) < rank.get(prev.get("status", "ok"), 2):
                out[kind] = dict(info)
    return out
