"""Soft-placement fallbacks: ops that asked for a device and ran elsewhere.

TensorFlow 2 allows soft placement by default, so ``with tf.device('/GPU:0')`` on a machine (or
for an op) without a GPU silently runs on the CPU. Three mechanisms, all cheap:

* **Traced graphs** — a callback in ``transform.CONCRETE_FUNCTION_CALLBACKS`` (once per new trace)
  scans the new graph's ops for requested devices of a type this process does not have; the
  op's creation traceback gives the user's line. Cost: per trace only.
* **Eager ops** — an op callback (``op_callbacks.add_op_callback``) compares the requested device
  (the context's device) with the output tensor's actual device. It costs ~1.6 µs per op, so it
  runs only for a probe window (the first ``PROBE_STEPS`` steps / ``PROBE_OPS`` ops).
* **Executed functions** (probe window too) — graph collection (``context.enable_graph_collection`` +
  ``export_run_metadata``) gives the requested device of each node before optimisation and the
  device it was assigned; this catches ops without a kernel for an available device (e.g. GPU).

Listing devices and graph collection initialise TensorFlow's runtime, which a script may still
need to configure (logical devices, memory growth, collective ops): they wait until the runtime
is up (checked at each new trace, eager op and step until then); graphs traced before are
scanned then.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tflint.profiler.report import Location, Signal
from tflint.runtime.hookbase import (
    NEVER,
    Hook,
    is_library_file,
    runtime_initialized,
    user_frame,
)

KIND = "soft-placement"
PROBE_OPS = 20000
PROBE_STEPS = 50
EXPORT_INTERVAL_S = 2.0
MAX_PENDING_GRAPHS = 64
_SKIP_NODE_OPS = {"_Send", "_Recv", "_HostSend", "_HostRecv", "_Arg", "_Retval", "NoOp", "_DeviceArg", "_DeviceRetval"}


def short_device(name: str | None) -> str | None:
    """'/job:localhost/replica:0/task:0/device:GPU:0' -> 'GPU:0'; '' -> None."""
    if not name:
        return None
    if "device:" in name:
        return name.rsplit("device:", 1)[1].upper()
    tail = name.rstrip("/").rsplit("/", 1)[-1]
    if ":" in tail and not tail.startswith(("job:", "replica:", "task:")):
        return tail.upper()
    return None


def _on_resource_device(inputs: Any, actual: str) -> bool:
    """True when an input is a resource handle (variable, iterator) living on ``actual``:
    TensorFlow always runs ops on a resource where the resource lives, whatever device scope is
    active (e.g. a mirrored variable's replica copies are initialised by reading the primary).
    That is colocation, not a fallback. Runs only for a mismatch, so it costs nothing per op."""
    try:
        for t in inputs or ():
            if getattr(getattr(t, "dtype", None), "name", None) == "resource" and short_device(getattr(t, "device", None)) == actual:
                return True
    except Exception:  # noqa: BLE001
        return False
    return False


def _dtype(dev: str | None) -> str | None:
    return dev.split(":", 1)[0] if dev else None


class PlacementHook(Hook):
    kind = KIND

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._op_cb = None
        self._cf_cb = None
        self._probe_ops = 0
        self._probe_done = False
        self._available: set[str] = set()
        self._available_devs: set[str] = set()
        self._collecting = False
        self._last_export = 0.0
        self._saved_execute: Any = None
        self._ready = False
        self._pending: list[Any] = []  # graphs traced before the runtime was up
        self._tf: Any = None
        self.graph_nodes_checked = 0

    def check(self) -> str | None:
        try:
            from tensorflow.python.eager import context, execute  # noqa: F401
            from tensorflow.python.eager.polymorphic_function import transform
            from tensorflow.python.framework import op_callbacks
        except ImportError as exc:
            return f"placement internals not importable: {exc}"
        if not isinstance(getattr(transform, "CONCRETE_FUNCTION_CALLBACKS", None), list):
            return "transform.CONCRETE_FUNCTION_CALLBACKS not found"
        for n in ("add_op_callback", "remove_op_callback"):
            if not hasattr(op_callbacks, n):
                return f"op_callbacks.{n} not found"
        return None

    def _install(self) -> None:
        import tensorflow as tf
        from tensorflow.python.eager import context, execute
        from tensorflow.python.eager.polymorphic_function import transform
        from tensorflow.python.framework import op_callbacks

        self._transform = transform
        self._context = context
        self._execute_mod = execute
        self._op_callbacks = op_callbacks
        self._tf = tf
        hook = self

        def cf_callback(cf: Any) -> None:
            if not hook.active:
                return
            try:
                if hook._ready or hook._ensure_ready():
                    hook._scan_graph(cf)
                elif len(hook._pending) < MAX_PENDING_GRAPHS:
                    hook._pending.append(cf)  # scanned once the runtime is up
            except Exception as exc:  # noqa: BLE001
                hook.fail(exc, "graph placement scan")

        self._cf_cb = cf_callback
        transform.CONCRETE_FUNCTION_CALLBACKS.append(cf_callback)

        # eager probe window
        if not self._probe_done:
            ctx = context.context()

            def op_callback(op_type: str, inputs: Any, attrs: Any, outputs: Any, op_name: Any = None, graph: Any = None) -> None:
                if graph is not None or not hook.active or hook._probe_done:
                    return None
                if not hook._ready:
                    try:
                        hook._ensure_ready()  # an eager op ran: the runtime is up
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "placement set-up")
                        return None
                hook._probe_ops += 1
                if hook._probe_ops > PROBE_OPS:
                    hook._probe_done = True
                    hook.session.reschedule()  # the window ends at the next step
                    return None
                try:
                    req = ctx.device_name
                    if not req or not outputs:
                        return None
                    rq = short_device(req)
                    if rq is None:
                        return None
                    out0 = outputs[0]
                    actual = short_device(getattr(out0, "device", None))
                    if actual is None or actual == rq:
                        return None
                    if _on_resource_device(inputs, actual):
                        return None  # ops on a variable/iterator run where it lives: by design
                    if op_type.startswith("__inference") or op_type.startswith("__forward"):
                        op_type = "function call"
                    hook._record(op_type, rq, actual, user_frame(sys._getframe(1)), "eager")
                except Exception as exc:  # noqa: BLE001
                    hook.fail(exc, "eager placement probe")
                return None

            self._saved_execute = execute.execute
            self._op_cb = op_callback
            op_callbacks.add_op_callback(op_callback)

        # Devices and graph collection need TensorFlow's runtime, which must not be initialised
        # here (the script may configure its devices first): done now if it is already up, else
        # at the first trace, eager op or step after it is.
        self._ready = False
        self._ensure_ready()

    def _ensure_ready(self) -> bool:
        """List the available devices and start graph collection, once the runtime is up."""
        if self._ready:
            return True
        if not runtime_initialized():
            return False
        self._ready = True
        devs = self._tf.config.list_logical_devices()
        self._available = {d.device_type.upper() for d in devs}
        self._available_devs = {short_device(d.name) for d in devs if short_device(d.name)}
        # executed functions: requested vs assigned devices. Graph collection also records every
        # eager op as a one-node function, which is costly in eager loops: probe window only.
        if not self._probe_done and not self._collecting:
            try:
                self._context.context().enable_graph_collection()
                self._collecting = True
            except Exception as exc:  # noqa: BLE001
                self.store.values["placement.graph_collection"] = f"unavailable: {type(exc).__name__}: {exc}"
        pending, self._pending = self._pending, []
        for cf in pending:
            self._scan_graph(cf)
        return True

    def _remove_op_callback(self) -> None:
        cb = self._op_cb
        if cb is None:
            return
        self._op_cb = None
        try:
            self._op_callbacks.remove_op_callback(cb)
        except Exception:  # noqa: BLE001 - already removed
            pass
        # add_op_callback swapped execute.execute; put back the exact original if no one else
        # still needs callbacks
        try:
            if not self._context.context().op_callbacks and self._saved_execute is not None:
                self._execute_mod.execute = self._saved_execute
        except Exception:  # noqa: BLE001
            pass

    def _uninstall(self) -> None:
        lst = self._transform.CONCRETE_FUNCTION_CALLBACKS
        while self._cf_cb in lst:
            lst.remove(self._cf_cb)
        self._cf_cb = None
        self._pending = []
        self._remove_op_callback()
        self._stop_collection()

    def _stop_collection(self) -> None:
        if not self._collecting:
            return
        try:
            self.collect()
        finally:
            try:
                self._context.context().disable_graph_collection()
            except Exception:  # noqa: BLE001
                pass
            self._collecting = False

    def on_step(self, step: int, now: float) -> tuple[float, float] | None:
        """Ends the probe window after ``PROBE_STEPS`` steps and exports the collected graphs
        every ``EXPORT_INTERVAL_S``; returns when it next has something to do."""
        ready = self._ready or self._ensure_ready()
        if (self._op_cb is not None or self._collecting) and (self._probe_done or step >= PROBE_STEPS):
            self._probe_done = True
            self._remove_op_callback()
            self._stop_collection()
            return NEVER, NEVER
        if self._collecting and now - self._last_export >= EXPORT_INTERVAL_S:
            self._last_export = now
            try:
                self.collect()
            except Exception as exc:  # noqa: BLE001
                self.store.values["placement.graph_collection"] = f"failed: {type(exc).__name__}: {exc}"
                self._collecting = False
        if not ready:
            return None  # the runtime is not up yet: look again at the next step
        if self._op_cb is not None or self._collecting:
            return PROBE_STEPS, (self._last_export + EXPORT_INTERVAL_S) if self._collecting else NEVER
        return NEVER, NEVER

    # ---------------------------------------------------------------------------------
    def _record(self, op_type: str, requested: str, actual: str, site: Any, how: str, node: str | None = None) -> None:
        if node and any(part.startswith("tflint_") for part in node.split("/")):
            return  # the profiler's own probes (their state lives on one device), not the user's ops
        key = (op_type, requested, actual, tuple(site) if site else None, how)
        rec = self.store.record(
            KIND,
            key,
            lambda: {"op": op_type, "requested": requested, "actual": actual, "site": list(site) if site else None,
                     "count": 0, "how": how, "nodes": []},
        )
        self.store.incr("placement.fallbacks")
        if rec is not None:
            rec["count"] += 1
            if node and len(rec["nodes"]) < 5 and node not in rec["nodes"]:
                rec["nodes"].append(node)

    def _scan_graph(self, cf: Any) -> None:
        graph = getattr(cf, "graph", None)
        if graph is None:
            return
        for op in graph.get_operations():
            dev = op.device
            if not dev:
                continue
            rq = short_device(dev)
            if rq is None:
                continue
            if rq in self._available_devs or (rq.split(":")[0] in self._available and rq.endswith(":*")):
                continue
            actual = "CPU:0" if "CPU" in self._available else "?"
            site = None
            try:
                for fr in reversed(list(op.traceback)):
                    if not is_library_file(fr.filename):
                        site = (fr.filename, int(fr.lineno))
                        break
            except Exception:  # noqa: BLE001
                pass
            self._record(op.type, rq, actual, site, "graph", node=op.name)

    def collect(self) -> None:
        """Export graph-collection metadata and compare requested/assigned devices."""
        if not self._collecting:
            return
        md = self._context.context().export_run_metadata()
        if md is None:
            return
        for fg in md.function_graphs:
            requested: dict[str, str] = {}
            pre = fg.pre_optimization_graph
            lib = {f.signature.name: f for f in pre.library.function}

            def add_nodes(nodes: Any, prefix: str, depth: int) -> None:
                for n in nodes:
                    name = prefix + n.name
                    if n.device:
                        requested[name] = n.device
                    if depth < 3 and n.op in ("PartitionedCall", "StatefulPartitionedCall") and "f" in n.attr:
                        fn = lib.get(n.attr["f"].func.name)
                        if fn is not None:
                            add_nodes(fn.node_def, name + "/", depth + 1)

            add_nodes(pre.node, "", 0)
            if not requested:
                continue
            for pg in fg.partition_graphs:
                for n in pg.node:
                    if n.op in _SKIP_NODE_OPS:
                        continue
                    self.graph_nodes_checked += 1
                    req = requested.get(n.name)
                    if req is None:
                        continue
                    rq, actual = short_device(req), short_device(n.device)
                    if rq is None or actual is None or rq == actual:
                        continue
                    if _dtype(rq) == _dtype(actual) and rq.endswith(":*"):
                        continue
                    site = self._site_for(n.name, rq)
                    self._record(n.op, rq, actual, site, "executed", node=n.name)

    def _site_for(self, node: str, requested: str) -> Any:
        base = node.rsplit("/", 1)[-1]
        for rec in self.store.records_of(KIND):
            if rec["how"] == "graph" and rec["requested"] == requested and rec["site"] and (node in rec["nodes"] or base in rec["nodes"]):
                return rec["site"]
        return None

    # ---------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        if not self._ready and self._tf is not None:
            self._ensure_ready()
        return {
            "available_devices": sorted(self._available_devs),
            "eager_ops_probed": min(self._probe_ops, PROBE_OPS),
            "graph_collection": self.store.values.get(
                "placement.graph_collection", "on" if self._collecting else f"probe window done (first {PROBE_STEPS} steps)" if self._probe_done else "off"),
            "graph_nodes_checked": self.graph_nodes_checked,
            "fallbacks": self.store.count("placement.fallbacks"),
        }

    def signals(self) -> list[Signal]:
        if KIND not in self.session.signals:
            return []
        recs = self.store.records_of(KIND)
        # merge: an "executed" finding duplicates a "graph" finding with the same op/devices
        seen = {(n.rsplit("/", 1)[-1], r["requested"]) for r in recs if r["how"] == "graph" for n in r["nodes"]}
        by_site: dict[Any, list[dict[str, Any]]] = {}
        for r in recs:
            if r["how"] == "executed" and r["nodes"] and all((n.rsplit("/", 1)[-1], r["requested"]) in seen for n in r["nodes"]):
                continue
            by_site.setdefault((tuple(r["site"]) if r["site"] else None, r["requested"], r["actual"]), []).append(r)
        out = []
        for (site, rq, actual), rs in by_site.items():
            ops = sorted({r["op"] for r in rs})
            count = sum(r["count"] for r in rs)
            hows = sorted({r["how"] for r in rs})
            where = "in eager code" if hows == ["eager"] else "inside a tf.function" if "eager" not in hows else "in eager code and tf.functions"
            missing = _dtype(rq) not in self._available
            why = (f"this process has no {_dtype(rq)} device (available: {', '.join(sorted(self._available_devs)) or 'none'})"
                   if missing else f"there is no {_dtype(rq)} kernel for these ops, or an input lives on {actual}")
            fix = ("install the GPU build of TensorFlow / check CUDA visibility, or remove the tf.device request"
                   if missing else "move these ops outside the device scope, or use ops that have kernels for the device")
            msg = (f"{', '.join(ops[:6])}{' ...' if len(ops) > 6 else ''} requested /{rq} but ran on /{actual} {where} "
                   f"({count} time(s) seen): soft placement silently moved them because {why}. Fix: {fix}; "
                   "tf.config.set_soft_device_placement(False) turns such fallbacks into errors.")
            out.append(
                Signal(
                    kind=KIND,
                    severity="warning",
                    message=msg,
                    location=Location(str(site[0]), int(site[1])) if site else None,
                    details={"ops": ops, "requested": rq, "actual": actual, "count": count, "mechanisms": hows,
                             "nodes": [n for r in rs for n in r["nodes"]][:10]},
                )
            )
        return out


__all__ = ["PlacementHook", "short_device", "time"]
