"""Which worker of a ``tf.distribute`` job this process is, and the strategy it trains with.

:func:`describe_worker` returns a plain dict that tags a report (``report.metrics["worker"]``):

``id``                     ``"worker:1"``, ``"chief:0"``... or ``"local"`` outside a cluster
``task_type``/``task_index``  from ``TF_CONFIG`` (or the strategy's cluster resolver)
``cluster``                ``{"worker": 2, "chief": 1}``: tasks per job
``cluster_size``           total number of tasks in the cluster (1 outside a cluster)
``is_chief``               the task that should write checkpoints and summaries
``role_source``            ``"TF_CONFIG"``, ``"cluster_resolver"`` or ``None``
``host``/``pid``           where the process ran
``strategy``               public name (``"MultiWorkerMirroredStrategy"``) or ``None``
``num_replicas``           ``num_replicas_in_sync`` (all workers), ``local_replicas`` on this one
``global_batch_size``      batch of one step over all replicas, when visible
``per_replica_batch_size`` batch one replica sees per step, when visible
``batch_source``           where the batch sizes were read from

and, when the loop fetched from a distributed dataset eagerly (timed by the input-stall hook,
:meth:`tflint.runtime.input.InputHook.distributed_timing`), ``steps_observed``, ``step_time_s``
(``{"median", "p90", "n"}``: time between two consecutive batches, i.e. one step),
``input_wait_s`` (same, time spent inside ``next()``) and ``input_wait_share`` (total wait /
total step time, first step excluded).

:class:`DistributeHook` observes strategies as they are created (a class-level wrapper of
``StrategyBase.__init__``) and the datasets handed to ``experimental_distribute_dataset`` /
``distribute_datasets_from_function`` (their batch size). It installs nothing that runs per step
and never initialises TensorFlow's runtime. Waiting for distributed batches is measured in one
place only, the input-stall hook, which wraps ``DistributedIteratorBase.get_next``.

Per-worker time split
---------------------
A synchronous step of a worker is its own input wait, its compute, and the time it waits for its
peers in collectives. Two measurements give the peer wait:

* inside ``tf.function`` (the gradient all-reduce of ``strategy.run``) on a worker that runs one
  replica (a multi-worker job; not the several local replicas of MirroredStrategy), the hook wraps
  ``CollectiveReplicaLauncher.all_reduce``/``_all_gather`` at trace time and brackets each
  collective op with in-graph ``tf.timestamp`` probes: one probe once the op's input is ready
  (this worker's compute is done), one when its output is (every peer has contributed). The
  difference, accumulated in a host variable, is the time this worker spent in collectives:
  mostly waiting for the slowest peer;
* an eager fetch from a distributed iterator times the worker's own pipeline (the inner
  per-device fetches) apart from the rest of the fetch (for a multi-worker dataset, agreeing with
  the peers whether every worker still has data).

``split`` of ``metrics["worker"]`` holds, over the same steps as ``step_time_s``,
``input_wait_s``, ``peer_wait_s``, ``compute_s`` (the rest) and ``time_s``, with their shares.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import weakref
from typing import Any

from tflint.runtime.hookbase import Hook, missing_names

# Public names of strategy classes whose class name differs from their ``tf.distribute`` name.
_PUBLIC_NAMES = {
    "CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
    "ParameterServerStrategyV2": "ParameterServerStrategy",
    "TPUStrategyV2": "TPUStrategy",
    "CentralStorageStrategy": "CentralStorageStrategy",
}
_MAX_SAMPLES = 4096

# Shared observations (module level so that describe_worker() needs no handle on a session).
_state: dict[str, Any] = {
    "strategy": None,  # weakref to the last strategy created while a hook was active
    "global_batch_size": None,
    "per_replica_batch_size": None,
    "batch_source": None,
    "dataset": None,  # weakref to the user's dataset last handed to a strategy
}
_state_lock = threading.Lock()


# -- role ---------------------------------------------------------------------------------
def _role_from_tf_config(env: dict[str, str]) -> dict[str, Any]:
    raw = env.get("TF_CONFIG")
    if not raw:
        return {}
    try:
        cfg = json.loads(raw)
        if not isinstance(cfg, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        return {"tf_config_error": f"TF_CONFIG is not valid JSON: {exc}"}
    out: dict[str, Any] = {"role_source": "TF_CONFIG"}
    cluster = cfg.get("cluster") or {}
    if isinstance(cluster, dict):
        out["cluster"] = {
            str(job): (len(tasks) if isinstance(tasks, (list, dict)) else 1)
            for job, tasks in cluster.items()
        }
    task = cfg.get("task") or {}
    if isinstance(task, dict):
        if task.get("type") is not None:
            out["task_type"] = str(task["type"])
        if task.get("index") is not None:
            try:
                out["task_index"] = int(task["index"])
            except (TypeError, ValueError):
                out["tf_config_error"] = f"TF_CONFIG task index is not an integer: {task['index']!r}"
    return out


def _role_from_resolver(strategy: Any) -> dict[str, Any]:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return {}
    out: dict[str, Any] = {}
    try:
        spec = resolver.cluster_spec().as_dict()
        if spec:
            out["cluster"] = {
                str(job): (len(tasks) if isinstance(tasks, (list, dict)) else 1)
                for job, tasks in spec.items()
            }
        if getattr(resolver, "task_type", None) is not None:
            out["task_type"] = str(resolver.task_type)
        if getattr(resolver, "task_id", None) is not None:
            out["task_index"] = int(resolver.task_id)
    except Exception:  # noqa: BLE001 - a resolver that cannot answer tells nothing
        return {}
    if out:
        out["role_source"] = "cluster_resolver"
    return out


def _is_chief(task_type: str | None, task_index: int | None, cluster: dict[str, int]) -> bool:
    if task_type is None:
        return True  # a single process is its own chief
    if task_type == "chief":
        return True
    return task_type == "worker" and task_index == 0 and "chief" not in cluster


# -- strategy -----------------------------------------------------------------------------
def _current_strategy() -> Any:
    """The strategy in scope now, else the last one created; never the default strategy.
    Does not import TensorFlow: a process that did not load it has no strategy."""
    if "tensorflow" not in sys.modules:
        return None
    strategy = None
    try:
        from tensorflow.python.distribute import distribute_lib

        if distribute_lib.has_strategy():
            strategy = distribute_lib.get_strategy()
    except Exception:  # noqa: BLE001
        strategy = None
    if strategy is None or _is_default(strategy):
        ref = _state.get("strategy")
        strategy = ref() if ref is not None else None
    return None if strategy is None or _is_default(strategy) else strategy


def _is_default(strategy: Any) -> bool:
    return type(strategy).__name__.startswith("_Default")


def strategy_name(strategy: Any) -> str:
    cls = type(strategy)
    for api in getattr(cls, "_tf_api_names", ()) or ():
        if api.startswith("distribute.") and "experimental" not in api:
            return api.rsplit(".", 1)[-1]
    return _PUBLIC_NAMES.get(cls.__name__, cls.__name__)


def _describe_strategy(strategy: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"strategy": strategy_name(strategy)}
    try:
        out["num_replicas"] = int(strategy.num_replicas_in_sync)
    except Exception:  # noqa: BLE001
        pass
    try:
        out["local_replicas"] = len(strategy.extended.worker_devices)
    except Exception:  # noqa: BLE001
        pass
    return out


def describe_worker() -> dict[str, Any]:
    """This process's role in its ``tf.distribute`` job and the strategy it uses (plain data)."""
    out: dict[str, Any] = {
        "id": "local",
        "task_type": None,
        "task_index": None,
        "cluster": {},
        "cluster_size": 1,
        "is_chief": True,
        "role_source": None,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "strategy": None,
        "num_replicas": None,
        "local_replicas": None,
        "global_batch_size": None,
        "per_replica_batch_size": None,
        "batch_source": None,
    }
    role = _role_from_tf_config(dict(os.environ))
    strategy = _current_strategy()
    if strategy is not None:
        out.update(_describe_strategy(strategy))
        if not role.get("task_type"):
            resolved = _role_from_resolver(strategy)
            if resolved.get("task_type"):
                role = {**role, **resolved}
    out.update(role)
    cluster = out.get("cluster") or {}
    out["cluster_size"] = max(1, sum(cluster.values())) if cluster else 1
    if out["task_type"] is not None:
        idx = out["task_index"] if out["task_index"] is not None else 0
        out["id"] = f"{out['task_type']}:{idx}"
    out["is_chief"] = _is_chief(out["task_type"], out["task_index"], cluster)
    with _state_lock:
        g, p, src = _state["global_batch_size"], _state["per_replica_batch_size"], _state["batch_source"]
    n = out.get("num_replicas")
    if g is None and p is not None and n:
        g = p * n
    if p is None and g is not None and n and g % n == 0:
        p = g // n
    out["global_batch_size"], out["per_replica_batch_size"], out["batch_source"] = g, p, src
    return out


# -- batch sizes ----------------------------------------------------------------------------
def _leading_dim(spec_or_value: Any) -> int | None:
    """Static leading dimension of the first component of a (nested) spec or value."""
    try:
        import tensorflow as tf

        flat = tf.nest.flatten(spec_or_value)
    except Exception:  # noqa: BLE001
        return None
    for item in flat:
        values = getattr(item, "values", None)  # PerReplica -> its first replica's value
        if isinstance(values, (tuple, list)) and values:
            item = values[0]
        specs = getattr(item, "_value_specs", None)  # PerReplicaSpec -> first spec
        if isinstance(specs, (tuple, list)) and specs:
            item = specs[0]
        shape = getattr(item, "shape", None)
        if shape is None:
            continue
        try:
            dims = shape.as_list() if hasattr(shape, "as_list") else list(shape)
        except (ValueError, TypeError):
            return None  # unknown rank
        if dims and dims[0] is not None:
            return int(dims[0])
        return None
    return None


def _note_batch(global_batch: int | None = None, per_replica: int | None = None, source: str = "") -> None:
    with _state_lock:
        if global_batch is not None:
            _state["global_batch_size"] = global_batch
            _state["batch_source"] = source
        if per_replica is not None:
            _state["per_replica_batch_size"] = per_replica
            if global_batch is None:
                prev = _state["batch_source"]
                _state["batch_source"] = f"{prev}, {source}" if prev and prev != source else source


def _note_dataset(dataset: Any) -> None:
    try:
        _state["dataset"] = weakref.ref(dataset)
    except TypeError:
        _state["dataset"] = None


def last_distributed_dataset() -> Any:
    """The user's dataset last handed to a strategy (weakly held), or None."""
    ref = _state.get("dataset")
    return ref() if ref is not None else None


def observe_first_batch(batch: Any) -> None:
    """Per-replica batch size from the first batch a distributed iterator returned, when the
    distributed dataset did not tell it."""
    if _state.get("per_replica_batch_size") is not None:
        return
    p = _leading_dim(batch)
    if p is not None:
        _note_batch(per_replica=p, source="first distributed batch")


def reset_observations() -> None:
    """Forget the strategy and batch sizes seen so far (a new watch session starts clean)."""
    with _state_lock:
        _state.update(strategy=None, global_batch_size=None, per_replica_batch_size=None, batch_source=None,
                      dataset=None)


# -- the hook -------------------------------------------------------------------------------
class DistributeHook(Hook):
    """Observes strategy creation and distributed datasets (batch sizes); nothing per step."""

    kind = "distribute"

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        reset_observations()  # a new session starts clean; re-entering it keeps what it saw
        self._acc: Any = None
        self._collective_read = (0.0, 0.0)
        self.collective_probes = 0
        self.collective_note: str | None = None

    def check(self) -> str | None:
        from tensorflow.python.distribute import distribute_lib

        return missing_names([
            (distribute_lib, "StrategyBase"),
            (distribute_lib.StrategyBase, "experimental_distribute_dataset"),
            (distribute_lib.StrategyBase, "distribute_datasets_from_function"),
        ])

    def _install(self) -> None:
        from tensorflow.python.distribute import distribute_lib

        hook = self
        base = distribute_lib.StrategyBase

        def wrap_init(original):
            def __init__(self, *args, **kwargs):
                original(self, *args, **kwargs)
                if hook.active:
                    try:
                        if not _is_default(self):
                            _state["strategy"] = weakref.ref(self)
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "strategy creation")

            return __init__

        def wrap_distribute_dataset(original):
            def experimental_distribute_dataset(self, dataset, *args, **kwargs):
                result = original(self, dataset, *args, **kwargs)
                if hook.active:
                    try:
                        _state["strategy"] = weakref.ref(self)
                        _note_dataset(dataset)
                        g = _leading_dim(getattr(dataset, "element_spec", None))
                        if g is not None:
                            _note_batch(global_batch=g, source="experimental_distribute_dataset")
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "experimental_distribute_dataset")
                return result

            return experimental_distribute_dataset

        def wrap_from_function(original):
            def distribute_datasets_from_function(self, dataset_fn, *args, **kwargs):
                result = original(self, dataset_fn, *args, **kwargs)
                if hook.active:
                    try:
                        _state["strategy"] = weakref.ref(self)
                        datasets = getattr(result, "_datasets", None)
                        if isinstance(datasets, (list, tuple)) and datasets:
                            _note_dataset(datasets[0])
                        p = _leading_dim(getattr(result, "element_spec", None))
                        if p is not None:
                            _note_batch(per_replica=p, source="distribute_datasets_from_function")
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "distribute_datasets_from_function")
                return result

            return distribute_datasets_from_function

        self.patch(base, "__init__", wrap_init)
        self.patch(base, "experimental_distribute_dataset", wrap_distribute_dataset)
        self.patch(base, "distribute_datasets_from_function", wrap_from_function)
        self._install_collective_probe()

    # -- collectives ------------------------------------------------------------------------
    def _install_collective_probe(self) -> None:
        try:
            from tensorflow.python.distribute import cross_device_utils
        except Exception as exc:  # noqa: BLE001
            self.collective_note = f"collectives not timed: {type(exc).__name__}: {exc}"
            return
        launcher = getattr(cross_device_utils, "CollectiveReplicaLauncher", None)
        if launcher is None or "all_reduce" not in launcher.__dict__:
            self.collective_note = "collectives not timed: CollectiveReplicaLauncher.all_reduce not found"
            return
        import tensorflow as tf
        from tensorflow.python.eager import context
        from tensorflow.python.framework import ops
        from tensorflow.python.util import nest

        hook = self

        def probed(orig: Any) -> Any:
            def wrapper(launcher_self: Any, input_tensor: Any, *args: Any, **kwargs: Any) -> Any:
                if (not hook.active or context.executing_eagerly() or not ops.inside_function()
                        or _inside_distributed_fetch(hook.session) or not _one_local_replica()):
                    return orig(launcher_self, input_tensor, *args, **kwargs)
                acc = hook._collective_acc()
                if acc is None:
                    return orig(launcher_self, input_tensor, *args, **kwargs)
                with ops.control_dependencies([input_tensor]):
                    t0 = tf.timestamp()  # this worker's contribution is ready
                with ops.control_dependencies([t0]):
                    result = orig(launcher_self, input_tensor, *args, **kwargs)
                try:
                    outs = [t for t in nest.flatten(result) if isinstance(t, tf.Tensor)]
                    if outs:
                        with ops.control_dependencies(outs):
                            t1 = tf.timestamp()  # every peer has contributed
                        acc.assign_add(tf.stack([t1 - t0, tf.constant(1.0, tf.float64)]))
                        hook.collective_probes += 1
                except Exception as exc:  # noqa: BLE001
                    hook.fail(exc, "collective probe")
                return result

            return wrapper

        self.patch(launcher, "all_reduce", probed)
        if "_all_gather" in launcher.__dict__:
            self.patch(launcher, "_all_gather", probed)

    def _collective_acc(self) -> Any:
        if self._acc is None:
            from tflint.runtime.hookbase import runtime_initialized

            if not runtime_initialized():
                return None
            import tensorflow as tf
            from tensorflow.python.framework import ops
            from tensorflow.python.ops import resource_variable_ops

            with ops.init_scope(), ops.device("/device:CPU:0"):
                self._acc = resource_variable_ops.ResourceVariable(
                    tf.zeros([2], tf.float64), trainable=False, name="tflint_collective_wait")
        return self._acc

    def collective_wait(self) -> float:
        """Seconds spent in probed collectives so far (0.0 when none ran)."""
        if self._acc is None or not self.collective_probes:
            return 0.0
        try:
            v = self._acc.numpy()
            self._collective_read = (float(v[0]), float(v[1]))
        except Exception:  # noqa: BLE001
            pass
        return self._collective_read[0]

    def timing(self) -> dict[str, Any]:
        """Per-step timing of the loop over distributed iterators, as measured by the session's
        input-stall hook (empty when that hook is off or no distributed iterator was used)."""
        inp = getattr(self.session, "input", None)
        if inp is None or not hasattr(inp, "distributed_timing"):
            return {}
        return inp.distributed_timing()

    def metrics(self) -> dict[str, Any]:
        """``describe_worker()`` plus the loop timing: the value of ``metrics["worker"]``."""
        out = describe_worker()
        out.update(self.timing())
        return out


def _one_local_replica() -> bool:
    """Collectives are probed only where this process runs one replica (a worker of a
    multi-worker job): the replicas of one process (MirroredStrategy over several devices) run
    their collectives in one graph, where extra dependencies around them can stall the run."""
    try:
        from tensorflow.python.distribute import distribute_lib

        devices = distribute_lib.get_strategy().extended.worker_devices
        return len(devices) == 1
    except Exception:  # noqa: BLE001
        return False


def _inside_distributed_fetch(session: Any) -> bool:
    inp = getattr(session, "input", None)
    tls = getattr(inp, "_tls", None)
    return bool(getattr(tls, "inside", False))


def summarize(values: list[float]) -> dict[str, Any]:
    """``{"median", "p90", "n"}`` of a sample (nearest-rank percentiles)."""
    if not values:
        return {"median": None, "p90": None, "n": 0}
    s = sorted(values)
    return {"median": round(_percentile(s, 50), 6), "p90": round(_percentile(s, 90), 6), "n": len(s)}


def _percentile(sorted_values: list[float], q: float) -> float:
    n = len(sorted_values)
    if n == 1:
        return sorted_values[0]
    pos = (n - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def tag_report(report: Any, hook: DistributeHook | None = None) -> Any:
    """Set ``report.metrics["worker"]`` (the worker's role, strategy and loop timing)."""
    report.metrics["worker"] = hook.metrics() if hook is not None else describe_worker()
    return report
