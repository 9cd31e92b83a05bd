"""Input-pipeline stalls: time spent waiting for the next batch versus the step time.

* Eager loops (``for x in ds`` / ``next(it)``): ``OwnedIterator._next_internal`` is wrapped at
  class level with ``time.perf_counter`` (a few µs per batch). Between the steady steps of a
  loop, a fetch is only logged, and counted with the steps in the step tracker's next batch
  (see :meth:`tflint.runtime.steps.StepTracker.log_fetch`).
* Inside a trace (Keras ``fit`` fetches batches inside its ``tf.function``): the same wrapper, at
  trace time, brackets the ``IteratorGetNext`` op with in-graph ``tf.timestamp`` probes and adds
  ``[wait, 1]`` to a float64 variable created eagerly (``init_scope``) at install. The variable is
  read at most every ``READ_INTERVAL_S`` and at the end. The variable is created at the first
  in-graph probe, and only if TensorFlow's runtime is already initialised (creating it earlier
  would stop a script from configuring its devices at start-up).
* Distributed iterators (``tf.distribute``): ``DistributedIteratorBase.get_next`` (and
  ``get_next_as_optional``) is wrapped the same way, eagerly and at trace time. It fetches one
  batch per replica through per-device iterators; those inner fetches are not timed again (a
  thread-local flag), so each step's wait is measured once, around the whole distributed fetch.
  Eager distributed fetches also give the per-step timing of ``metrics["worker"]``
  (:meth:`InputHook.distributed_timing`).
* Datasets: ``DatasetV2.__init__`` is wrapped to remember where (user frame) each dataset was
  built; ``OwnedIterator.__init__`` remembers which dataset an eager iterator reads, so a stall can
  point at the pipeline and say whether it has ``prefetch``, parallel ``map``, ``py_function`` or
  ``from_generator``.

The dataset judged is the one that feeds the steps: the one read inside the training
``tf.function`` (described at trace time, so Keras' adapter pipelines for NumPy arrays, which live
no longer than their iterator, are seen as they are) or the eager iterator with the most waiting.
Its description reads the pipeline's real options: TensorFlow 2.21 appends a prefetch to a
pipeline whose last transformation is synchronous unless
``experimental_optimization.inject_prefetch`` or autotuning is off (``injected_prefetch``), and
no advice ever suggests a transformation that is present or injected.

The wait is attributed to the training loops of :mod:`tflint.runtime.steps` and judged over the
same steps, start-up included (the interval ending with a loop's first step holds shuffle-buffer
fills and first file reads, reported as start-up waiting). Classification follows TensorBoard's
input-pipeline analyzer: waiting >= 20% of that time is "highly" input-bound, >= 5%
"moderately". Nothing is reported for a moderate steady wait on a prefetched pipeline, nor for a
prefetched pipeline of TensorFlow ops (no Python map or generator) whose batches arrive in under
``READY_FETCH_S`` per step after start-up: the data is ready, and only a very short step makes
the hand-over look large.
"""

from __future__ import annotations

import os
import sys
import time
import weakref
from typing import Any

from tflint.profiler.report import Location, Signal
from tflint.runtime.hookbase import DENSE_STEPS, NEVER, Hook, ThreadFlags, is_library_file, next_tick, runtime_initialized, user_frame

KIND = "input-stall"
HIGH = 0.20
MODERATE = 0.05
# a read right after a step costs ~150-280 µs (cold caches), ~7 µs in a tight loop; windows close
# on a clock grid of this interval, shared with the training-health reads
READ_INTERVAL_S = 0.2
FRESH_READ_S = 0.005  # a read of the in-graph totals this recent is used as it is
WINDOW_STEPS = 8  # eager fetches only: for the first DENSE_STEPS steps, a window also closes after this many steps
SLOW_FETCH_S = 50e-6  # tf.data guide: a ready batch is returned in <= 50 µs
MIN_STEPS = 5
READY_FETCH_S = 1e-3  # a prefetched, all-TensorFlow pipeline answering this fast has its data ready
MIN_OUTSIDE_S = 1e-3  # without tf.data, only a gap of >= 1 ms per step between step calls counts
MAX_DATASETS = 64
MAX_DIST_SAMPLES = 4096


def _first_input(d: Any) -> Any:
    try:
        ins = d._inputs()
    except Exception:  # noqa: BLE001
        ins = []
    return ins[0] if ins else None


_ASYNC_FINAL = ("Prefetch", "ParallelMap", "ParallelInterleave", "ParallelBatch", "MapAndBatch")
_FILE_SOURCES = ("TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset", "ListFilesDataset")


def _fn_name(f: Any) -> str | None:
    name = getattr(f, "__name__", None) or getattr(f, "__qualname__", None)
    return str(name) if name else None


def _py_callables(graph: Any) -> list[str]:
    """Names of the Python functions run by the py_function/numpy_function ops of a graph."""
    names: list[str] = []
    try:
        from tensorflow.python.ops import script_ops

        for op in graph.get_operations():
            if op.type not in ("EagerPyFunc", "PyFunc", "PyFuncStateless"):
                continue
            token = op.get_attr("token")
            token = token.decode() if isinstance(token, bytes) else token
            f = script_ops._py_funcs.get(token)
            f = getattr(f, "_func", f)
            n = _fn_name(f)
            if n and n not in names:
                names.append(n)
    except Exception:  # noqa: BLE001 - the names are a courtesy
        pass
    return names


def _scalar(t: Any) -> int | None:
    try:
        return int(t.numpy()) if hasattr(t, "numpy") else int(t)
    except Exception:  # noqa: BLE001
        return None


def _injected_prefetch(ds: Any, final_async: bool) -> tuple[bool, str]:
    """Whether tf.data's static optimizations append a prefetch to this pipeline.

    ``tf.data.Options().experimental_optimization.inject_prefetch`` (TensorFlow 2.21, options.py):
    "Whether to inject prefetch transformation as the last transformation when the last
    transformation is a synchronous transformation. If None, defaults to True." It is an
    autotuning rewrite, so ``autotune.enabled = False`` turns it off too."""
    if final_async:
        return False, "the final transformation is already asynchronous"
    try:
        import warnings

        from tensorflow.python.framework import ops

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # read at trace time: no warning in the user's output
            try:
                with ops.init_scope():
                    opts = ds.options()
            except Exception:  # noqa: BLE001 - a dataset built inside a graph
                opts = ds.options()
        inject = opts.experimental_optimization.inject_prefetch
        autotune = opts.autotune.enabled
    except Exception:  # noqa: BLE001
        return False, "options unreadable"
    if inject is False:
        return False, "experimental_optimization.inject_prefetch = False"
    if autotune is False:
        return False, "autotune.enabled = False"
    return True, "tf.data injects a final prefetch (experimental_optimization.inject_prefetch defaults to True)"


def describe_dataset(ds: Any, max_depth: int = 64) -> dict[str, Any]:
    """Facts about a tf.data pipeline, walking from the final dataset to its sources."""
    chain: list[str] = []
    flags = {"prefetch": False, "final_prefetch": False, "parallel_map": False, "sequential_map": False,
             "py_function": False, "from_generator": False, "cache": False}
    sites: list[list[Any]] = []
    iter_site = None
    map_functions: list[dict[str, Any]] = []
    shuffle: dict[str, Any] | None = None
    file_source = None
    slow_before_shuffle: list[str] = []
    top = None
    d = ds
    depth = 0
    while d is not None and depth < max_depth:
        if not chain and getattr(d, "_tflint_distribute_internal", False):
            # datasets tf.distribute wrapped around the user's pipeline: describe the pipeline
            if iter_site is None:
                iter_site = getattr(d, "_tflint_iter_site", None)
            d = _first_input(d)
            depth += 1
            continue
        if top is None:
            top = d
        name = type(d).__name__.lstrip("_")
        chain.append(name)
        site = getattr(d, "_tflint_site", None)
        if site and list(site) not in sites:
            sites.append(list(site))
        if len(chain) == 1 and iter_site is None:
            iter_site = getattr(d, "_tflint_iter_site", None)
        if "Prefetch" in name:
            flags["prefetch"] = True
            if len(chain) == 1 or all(c in ("OptionsDataset", "PrefetchDataset") for c in chain):
                flags["final_prefetch"] = True
        if "Cache" in name:
            flags["cache"] = True
        mf = getattr(d, "_map_func", None)
        fname = _fn_name(getattr(mf, "_func", None)) if mf is not None else None
        qualname = str(getattr(getattr(mf, "_func", None), "__qualname__", "")) if mf is not None else ""
        keras_internal = "DataAdapter." in qualname  # Keras' own adapter pipeline
        if keras_internal:
            flags["keras_adapter"] = True
        if "ParallelMap" in name or "ParallelInterleave" in name or "ParallelBatch" in name:
            flags["parallel_map"] = True
        elif name in ("MapDataset", "MapAndBatchDataset") and not keras_internal:
            flags["sequential_map"] = True
        if "Shuffle" in name and shuffle is None:
            shuffle = {"buffer_size": _scalar(getattr(d, "_buffer_size", None)), "position": len(chain) - 1}
        if any(f in name for f in _FILE_SOURCES) and file_source is None:
            file_source = name
        if mf is not None:
            try:
                graph = mf.function.graph
                types = {op.type for op in graph.get_operations()}
                entry: dict[str, Any] = {"transformation": name, "function": fname}
                if types & {"EagerPyFunc", "PyFunc", "PyFuncStateless"}:
                    flags["py_function"] = True
                    entry["py_function"] = _py_callables(graph)
                if "GeneratorDataset" in types:
                    flags["from_generator"] = True
                if len(map_functions) < 8:
                    map_functions.append(entry)
                if shuffle is not None and entry.get("py_function"):
                    slow_before_shuffle.append(entry.get("function") or name)
            except Exception:  # noqa: BLE001
                pass
        if "Generator" in name:
            flags["from_generator"] = True
            if shuffle is not None:
                slow_before_shuffle.append("from_generator")
        d = _first_input(d)
        depth += 1
    if not sites and iter_site:
        sites.append(list(iter_site))
    final_async = bool(chain) and any(a in c for a in _ASYNC_FINAL for c in chain[:1])
    if chain and chain[0] == "OptionsDataset":
        final_async = any(a in c for a in _ASYNC_FINAL for c in chain[1:2])
    injected, why = _injected_prefetch(top, final_async or flags["final_prefetch"]) if top is not None else (False, "")
    out = {"chain": chain, "sites": sites[:8],
           "created_before_watch": bool(iter_site and not sites[1:] and sites and list(iter_site) == sites[0]), **flags}
    out["injected_prefetch"] = injected
    out["prefetch_note"] = why
    out["map_functions"] = map_functions
    if shuffle is not None:
        shuffle["filled_by"] = slow_before_shuffle  # slow stages upstream of the buffer
        out["shuffle"] = shuffle
    if file_source:
        out["file_source"] = file_source
    return out


_DISTRIBUTE_DIR = os.sep + os.path.join("tensorflow", "python", "distribute") + os.sep


def _creation_site(frame: Any) -> tuple[tuple[str, int] | None, bool]:
    """(user call site, made by tf.distribute) for a dataset being constructed: the first frame
    outside the libraries, and whether tf.distribute code stands between it and the dataset
    (the shard/rebatch/restructure datasets wrapped around the user's pipeline)."""
    internal = False
    f = frame
    while f is not None:
        fn = f.f_code.co_filename
        if not is_library_file(fn):
            return (fn, f.f_lineno), internal
        if _DISTRIBUTE_DIR in fn:
            internal = True
        f = f.f_back
    return None, internal


def _distributed_iterator_class() -> Any:
    try:
        from tensorflow.python.distribute import input_lib
    except Exception:  # noqa: BLE001
        return None
    cls = getattr(input_lib, "DistributedIteratorBase", None)
    return cls if cls is not None and "get_next" in cls.__dict__ else None


def _dataset_of(it: Any) -> Any:
    """The dataset an iterator reads: a tf.data iterator's own, or for a distributed iterator
    the dataset of its (first) worker iterator."""
    ds = getattr(it, "_dataset", None) or getattr(it, "_tflint_dataset", None)
    if ds is not None:
        return ds
    inner = getattr(it, "_iterators", None)
    if isinstance(inner, (list, tuple)) and inner:
        return getattr(inner[0], "_dataset", None)
    return None


class _IterStats:
    __slots__ = ("wait", "loop_wait", "count", "slow", "dataset", "desc", "site", "max_wait")

    def __init__(self) -> None:
        self.wait = 0.0
        self.loop_wait = 0.0  # waited once a training loop had begun (not a preprocessing pass before it)
        self.count = 0
        self.slow = 0
        self.max_wait = 0.0
        self.dataset: Any = None
        self.desc: dict[str, Any] | None = None
        self.site: Any = None


class InputHook(Hook):
    kind = KIND

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.eager_wait = 0.0
        self.eager_count = 0
        self._acc: Any = None
        self._acc_read = (0.0, 0.0, 0.0)
        self._graph_probes = 0
        self._by_iter: dict[int, _IterStats] = {}
        self._last_dataset: Any = None
        self._graph_stats = _IterStats()
        self._win_t: float | None = None
        self._win_due = 0.0
        self._win_wait = 0.0
        self._win_step = 0
        self._first: tuple[float, float] | None = None  # (t, total wait) at the first step tick
        self._last_read_t = 0.0
        self._read_op: Any = None  # gen_resource_variable_ops.read_variable_op, once installed
        self.series = self.store.series("input_wait_share", 400)
        self._tls = ThreadFlags()  # .inside: within a distributed fetch (inner fetches not timed)
        # eager distributed fetches: one per step; step i's length is the time between fetch
        # starts i and i+1, its wait the duration of fetch i (the first step is not counted)
        self._dist_calls = 0
        self._dist_last_start = 0.0
        self._dist_pending_wait = 0.0
        self._dist_intervals: list[float] = []
        self._dist_waits: list[float] = []
        self._dist_stride = 1
        self._dist_sum_wait = 0.0
        self._dist_sum_interval = 0.0
        self._dist_first_batch_seen = False
        self._dist_peers: list[float] = []
        self._dist_pending_peer = 0.0
        self._dist_sum_peer = 0.0
        self._dist_coll_mark = 0.0
        self._dist_inner_timed = False
        self.first_fetch_t0: float | None = None  # start of the first eager fetch
        self._fetch_start: float | None = None  # start of the first eager fetch since the last step
        self._graph_ds: dict[Any, Any] = {}  # loop key -> description of the dataset read in its trace

    def check(self) -> str | None:
        try:
            from tensorflow.python.data.ops import dataset_ops, iterator_ops
        except ImportError as exc:
            return f"tf.data internals not importable: {exc}"
        for owner, name in ((iterator_ops.OwnedIterator, "_next_internal"), (iterator_ops.OwnedIterator, "__init__"),
                            (dataset_ops.DatasetV2, "__init__")):
            if name not in owner.__dict__:
                return f"{owner.__name__}.{name} not found in this TensorFlow"
        return None

    def _install(self) -> None:
        import tensorflow as tf
        from tensorflow.python.data.ops import dataset_ops, iterator_ops
        from tensorflow.python.eager import context
        from tensorflow.python.framework import ops
        from tensorflow.python.ops import gen_resource_variable_ops
        from tensorflow.python.util import nest

        hook = self
        steps = self.session.steps
        perf = time.perf_counter
        executing_eagerly = context.executing_eagerly
        tls = self._tls
        self._read_op = gen_resource_variable_ops.read_variable_op

        def accumulator() -> Any:
            if hook._acc is None:
                if not runtime_initialized():
                    return None  # never initialise the runtime from here: this trace is not timed
                from tensorflow.python.ops import resource_variable_ops

                # a plain resource variable on the host, outside any strategy's variable creator
                # (inside strategy.scope() tf.Variable would make a distributed variable)
                with ops.init_scope(), ops.device("/device:CPU:0"):
                    hook._acc = resource_variable_ops.ResourceVariable(
                        tf.zeros([3], tf.float64), trainable=False, name="tflint_input_wait")
            return hook._acc

        def probe(fetch: Any, it: Any) -> Any:
            # in-graph: t0 -> get_next -> t1; acc += [t1 - t0, 1, excess over 50 µs]
            acc = accumulator()
            if acc is None:
                return fetch()
            t0 = tf.timestamp()
            with ops.control_dependencies([t0]):
                result = fetch()
            try:
                variant = getattr(result, "_variant_tensor", None)
                flat = [variant] if isinstance(variant, tf.Tensor) else [
                    t for t in nest.flatten(result, expand_composites=True) if isinstance(t, tf.Tensor)]
                if not flat:
                    return result
                with ops.control_dependencies(flat):
                    t1 = tf.timestamp()
                dt = t1 - t0
                hook._note_graph_dataset(it)
                acc.assign_add(tf.stack([dt, tf.constant(1.0, tf.float64), tf.maximum(dt - SLOW_FETCH_S, 0.0)]))
                hook._graph_probes += 1
            except Exception as exc:  # noqa: BLE001
                hook.fail(exc, "in-graph input probe")
            return result

        def make_next(orig: Any) -> Any:
            def _next_internal(it: Any) -> Any:
                if not hook.active:
                    return orig(it)
                if tls.inside:
                    return inner_fetch(orig, it)
                if executing_eagerly():
                    t0 = perf()
                    result = orig(it)
                    t1 = perf()
                    if steps is None or not steps.log_fetch(it, t0, t1):  # else counted with the steps
                        hook.count_fetch(it, t0, t1)
                    return result
                if not ops.inside_function():
                    return orig(it)
                return probe(lambda: orig(it), it)

            return _next_internal

        def make_iter_init(orig: Any) -> Any:
            def __init__(it: Any, dataset: Any = None, components: Any = None, element_spec: Any = None) -> None:
                orig(it, dataset=dataset, components=components, element_spec=element_spec)
                if (hook.active and dataset is not None and executing_eagerly()
                        and not getattr(dataset, "_tflint_distribute_internal", False)):
                    try:
                        object.__setattr__(it, "_tflint_dataset", dataset)  # what it reads, for in-graph fetches
                    except Exception:  # noqa: BLE001
                        pass
                    try:
                        hook._last_dataset = weakref.ref(dataset)
                        if getattr(dataset, "_tflint_site", None) is None:
                            # built before the session started: point at where it is iterated
                            site = user_frame()
                            if site is not None:
                                object.__setattr__(dataset, "_tflint_iter_site", site)
                    except TypeError:
                        hook._last_dataset = None

            return __init__

        def make_ds_init(orig: Any) -> Any:
            def __init__(ds: Any, *args: Any, **kwargs: Any) -> None:
                orig(ds, *args, **kwargs)
                if hook.active:
                    try:
                        site, internal = _creation_site(sys._getframe(1))
                        if internal:
                            # made by tf.distribute around the user's pipeline (shard, rebatch...)
                            object.__setattr__(ds, "_tflint_distribute_internal", True)
                        elif site is not None:
                            object.__setattr__(ds, "_tflint_site", site)
                    except Exception:  # noqa: BLE001 - a dataset without the attribute is fine
                        pass

            return __init__

        def inner_fetch(orig: Any, it: Any) -> Any:
            # a fetch of this worker's own pipeline inside a distributed fetch: timed apart
            if not executing_eagerly():
                return orig(it)
            t0 = perf()
            try:
                return orig(it)
            finally:
                tls.inner = tls.inner + (perf() - t0)
                tls.inner_n = tls.inner_n + 1

        def make_next_optional(orig: Any) -> Any:
            # Keras fit with steps_per_execution > 1 fetches through get_next_as_optional
            def get_next_as_optional(it: Any) -> Any:
                if hook.active and tls.inside:
                    return inner_fetch(orig, it)
                if not hook.active or tls.inside or executing_eagerly() or not ops.inside_function():
                    return orig(it)
                return probe(lambda: orig(it), it)

            return get_next_as_optional

        def make_dist_next(orig: Any) -> Any:
            # one distributed fetch = one batch for every replica of this worker
            def get_next(it: Any, *args: Any, **kwargs: Any) -> Any:
                if not hook.active or tls.inside:
                    return orig(it, *args, **kwargs)
                if executing_eagerly():
                    tls.inside = True
                    tls.inner, tls.inner_n = 0.0, 0
                    t0 = perf()
                    try:
                        result = orig(it, *args, **kwargs)
                    finally:
                        tls.inside = False
                    t1 = perf()
                    try:
                        hook._on_dist_wait(it, t0, t1, result, tls.inner if tls.inner_n else None)
                    except Exception as exc:  # noqa: BLE001
                        hook.fail(exc, "distributed iterator wait")
                    return result
                if not ops.inside_function():
                    return orig(it, *args, **kwargs)
                hook._note_distributed_dataset()  # at trace time only
                tls.inside = True
                try:
                    return probe(lambda: orig(it, *args, **kwargs), it)
                finally:
                    tls.inside = False

            return get_next

        def make_dist_optional(orig: Any) -> Any:
            def get_next_as_optional(it: Any) -> Any:
                if not hook.active or tls.inside or executing_eagerly() or not ops.inside_function():
                    return orig(it)
                hook._note_distributed_dataset()
                tls.inside = True
                try:
                    return probe(lambda: orig(it), it)
                finally:
                    tls.inside = False

            return get_next_as_optional

        self.patch(iterator_ops.OwnedIterator, "_next_internal", make_next)
        if "get_next_as_optional" in iterator_ops.OwnedIterator.__dict__:
            self.patch(iterator_ops.OwnedIterator, "get_next_as_optional", make_next_optional)
        self.patch(iterator_ops.OwnedIterator, "__init__", make_iter_init)
        self.patch(dataset_ops.DatasetV2, "__init__", make_ds_init)
        dist_base = _distributed_iterator_class()
        if dist_base is not None:
            self.patch(dist_base, "get_next", make_dist_next)
            if "get_next_as_optional" in dist_base.__dict__:
                self.patch(dist_base, "get_next_as_optional", make_dist_optional)
        else:
            self.store.values["input.distributed"] = "distributed iterators not timed: input_lib.DistributedIteratorBase.get_next not found"

    # ---------------------------------------------------------------------------------
    def count_fetch(self, it: Any, t0: float, t1: float) -> None:
        """An eager fetch from ``it`` that ran from ``t0`` to ``t1`` (as it happened, or later,
        in order, from the step tracker's log); a failure disables this hook only."""
        if self.status == "failed":
            return
        try:
            self._on_eager_wait(it, t1 - t0, t0)
        except Exception as exc:  # noqa: BLE001
            self.fail(exc, "iterator wait")

    def _on_eager_wait(self, it: Any, dt: float, t0: float | None = None) -> None:
        self.eager_wait += dt
        self.eager_count += 1
        if t0 is not None:
            if self.first_fetch_t0 is None:
                self.first_fetch_t0 = t0
            if self._fetch_start is None:
                self._fetch_start = t0
        st = self._by_iter.get(id(it))
        if st is None:
            if len(self._by_iter) >= MAX_DATASETS:
                st = self._graph_stats
            else:
                st = self._by_iter[id(it)] = _IterStats()
                ds = _dataset_of(it)
                if ds is not None:
                    st.desc = describe_dataset(ds)
        st.wait += dt
        st.count += 1
        if dt > SLOW_FETCH_S:
            st.slow += 1
        if dt > st.max_wait:
            st.max_wait = dt
        steps = self.session.steps
        if steps is not None and steps.has_loops:
            st.loop_wait += dt
        # the iterator is a fallback source: once a training loop is known, its ticks count for
        # nothing (and a logged fetch, counted by the step tracker, never ticks)
        if steps is not None and not steps.has_loops and (steps.primary is None or steps.primary.kind == "iterator"):
            steps.tick(("iterator", id(it)), "iterator", "iterator", time.perf_counter())

    def _note_distributed_dataset(self) -> None:
        """A distributed fetch is being traced (e.g. Keras fit under a strategy): the in-graph
        waits are for the user's dataset last handed to the strategy."""
        try:
            from tflint.runtime.distribute import last_distributed_dataset

            ds = last_distributed_dataset()
            if ds is not None:
                self._last_dataset = weakref.ref(ds)
        except Exception:  # noqa: BLE001 - only the description of the dataset is lost
            pass

    def _on_dist_wait(self, it: Any, t0: float, t1: float, result: Any, own: float | None = None) -> None:
        """An eager fetch from a distributed iterator (one step's batch for all replicas).
        ``own``: the part spent in this worker's own pipeline (None when it was not timed)."""
        fetch = t1 - t0
        self._dist_inner_timed = self._dist_inner_timed or own is not None
        own = fetch if own is None else min(own, fetch)
        self._on_eager_wait(it, own, t0)
        dist = getattr(self.session, "distribute", None)
        coll = dist.collective_wait() if dist is not None and dist.collective_probes else 0.0
        with self._lock:
            self._dist_calls += 1
            if self._dist_calls >= 3:
                closed = self._dist_calls - 3
                interval = t0 - self._dist_last_start
                self._dist_sum_interval += interval
                self._dist_sum_wait += self._dist_pending_wait
                peer = self._dist_pending_peer + max(0.0, coll - self._dist_coll_mark)
                self._dist_sum_peer += peer
                if closed % self._dist_stride == 0:
                    self._dist_intervals.append(interval)
                    self._dist_waits.append(self._dist_pending_wait)
                    self._dist_peers.append(peer)
                    if len(self._dist_intervals) >= MAX_DIST_SAMPLES:
                        self._dist_intervals = self._dist_intervals[::2]
                        self._dist_waits = self._dist_waits[::2]
                        self._dist_peers = self._dist_peers[::2]
                        self._dist_stride *= 2
            self._dist_last_start = t0
            self._dist_pending_wait = own
            self._dist_pending_peer = fetch - own  # e.g. agreeing with the peers on end of data
            self._dist_coll_mark = coll
        if not self._dist_first_batch_seen:
            self._dist_first_batch_seen = True
            from tflint.runtime.distribute import observe_first_batch

            observe_first_batch(result)

    def distributed_timing(self) -> dict[str, Any]:
        """Per-step timing of the loop over distributed iterators (empty if none was seen):
        ``steps_observed``, ``step_time_s`` and ``input_wait_s`` (``{"median", "p90", "n"}``)
        and ``input_wait_share``. The first step (tracing, warm-up) is excluded."""
        from tflint.runtime.distribute import summarize

        with self._lock:
            intervals, waits, peers = list(self._dist_intervals), list(self._dist_waits), list(self._dist_peers)
            total_i, total_w, total_p = self._dist_sum_interval, self._dist_sum_wait, self._dist_sum_peer
        if not intervals:
            return {}
        dist = getattr(self.session, "distribute", None)
        probes = bool(dist is not None and dist.collective_probes)
        compute = max(0.0, total_i - total_w - total_p)

        def share(v: float) -> float | None:
            return round(v / total_i, 4) if total_i > 0 else None

        return {
            "steps_observed": len(intervals),
            "step_time_s": summarize(intervals),
            "input_wait_s": summarize(waits),
            "input_wait_share": share(total_w),
            "peer_wait_s": summarize(peers),
            "split": {
                "time_s": round(total_i, 6),
                "input_wait_s": round(total_w, 6),
                "peer_wait_s": round(total_p, 6),
                "compute_s": round(compute, 6),
                "input_wait_share": share(total_w),
                "peer_wait_share": share(total_p),
                "compute_share": share(compute),
                "collectives_timed": probes,
                "own_pipeline_timed": self._dist_inner_timed,
            },
        }

    def _graph_totals(self, force: bool = False) -> tuple[float, float, float]:
        if self._acc is None or (self._graph_probes == 0 and not force):
            return self._acc_read
        self._last_read_t = time.perf_counter()
        try:
            # the raw read op: ResourceVariable.numpy() runs several times more Python per read
            v = self._read_op(self._acc.handle, self._acc.dtype).numpy()
            self._acc_read = (float(v[0]), float(v[1]), float(v[2]))
        except Exception:  # noqa: BLE001
            pass
        return self._acc_read

    def wait_now(self, force: bool = False, max_age: float = READ_INTERVAL_S) -> float:
        """All input wait so far: eager fetches exactly (those the step tracker logged
        included), in-graph fetches as last read (read again when ``force`` or when the last
        read is ``max_age`` old)."""
        steps = self.session.steps
        if steps is not None:
            steps.flush()
        if self._acc is not None and self._graph_probes:
            if force or time.perf_counter() - self._last_read_t >= max_age:
                self._graph_totals(force=True)
        return self.eager_wait + self._acc_read[0]

    def take_fetch_start(self) -> float | None:
        """Start of the first eager fetch since the previous call (then forgotten)."""
        t, self._fetch_start = self._fetch_start, None
        return t

    def _note_graph_dataset(self, it: Any) -> None:
        """At trace time: the dataset read by the tf.function being traced (the step)."""
        steps = self.session.steps
        fn = getattr(steps, "_calling", None) if steps is not None else None
        if fn is None:
            return
        key = steps.loop_key(fn)
        if key in self._graph_ds or len(self._graph_ds) >= MAX_DATASETS:
            return
        ds = _dataset_of(it)
        if ds is None:
            ref = self._last_dataset
            ds = ref() if ref is not None else None
        if ds is not None:
            # described now: Keras' adapter datasets live no longer than their iterator
            self._graph_ds[key] = describe_dataset(ds)

    def reads_in_graph(self, key: Any) -> bool:
        """Whether the tf.function of loop ``key`` fetched batches inside its trace."""
        return key in self._graph_ds

    def reset_window(self) -> None:
        self._win_t = None

    def on_step(self, step: int, now: float) -> tuple[float, float] | None:
        """Close the input-wait window at the next tick of the ``READ_INTERVAL_S`` clock grid
        (or, when only eager fetches are timed, in the first ``DENSE_STEPS`` steps, after
        ``WINDOW_STEPS`` steps); returns when the next window is due."""
        if step < 2:
            return None  # the first step includes tracing: measure from the end of it
        if self._win_t is None:
            self._win_t = now
            self._win_due = next_tick(now, READ_INTERVAL_S)
            self._win_step = step
            # the read the step tracker just made at the loop's transition serves, if there was one
            self._win_wait = self.wait_now(max_age=FRESH_READ_S)
            if self._first is None:
                self._first = (now, self._win_wait)
            return self._due()
        if now < self._win_due and not (self._by_steps() and step - self._win_step >= WINDOW_STEPS):
            return self._due()
        # one read of the in-graph totals serves the window and the step tracker: the window
        # closes at the step count that read them (see READ_INTERVAL_S), or reads them itself
        w = self.wait_now(max_age=FRESH_READ_S)
        span = now - self._win_t
        if span > 0:
            self.series.add(step, max(0.0, min(1.0, (w - self._win_wait) / span)))
        self._win_t, self._win_step, self._win_wait = now, step, w
        self._win_due = next_tick(now, READ_INTERVAL_S)
        return self._due()

    def _by_steps(self) -> bool:
        """Whether the open window also closes after ``WINDOW_STEPS`` steps: only eager fetches
        are timed, and it would close within the first ``DENSE_STEPS`` steps."""
        return not self._graph_probes and self._win_step + WINDOW_STEPS <= DENSE_STEPS

    def _due(self) -> tuple[float, float]:
        return (self._win_step + WINDOW_STEPS if self._by_steps() else NEVER), self._win_due

    # ---------------------------------------------------------------------------------
    def _main_dataset(self, loops: list[Any]) -> tuple[dict[str, Any] | None, Any]:
        """Description of the dataset that feeds the steps with the most waiting, and its stats:
        the dataset read inside the training tf.function (fit's adapter pipeline, a distributed
        dataset's pipeline), else the eager iterator with the most waiting. Eager iterators are
        ranked by their waits once a training loop had begun: a pass over a dataset before
        training (building a vocabulary, materialising sequences) does not feed the steps."""
        in_loops = any(st.loop_wait > 0 for st in self._by_iter.values())
        best = None
        for st in self._by_iter.values():
            w = st.loop_wait if in_loops else st.wait
            if best is None or w > (best.loop_wait if in_loops else best.wait):
                best = st
        best_wait = (best.loop_wait if in_loops else best.wait) if best is not None else 0.0
        gw, gc, _ = self._acc_read
        graph_loop = any(lp.key in self._graph_ds for lp in loops)
        if gc and (best is None or gw > best_wait or (graph_loop and not in_loops)):
            desc = None
            for lp in sorted(loops, key=lambda lp: -(lp.steady_wait_s + lp.startup_wait_s)):
                if lp.key in self._graph_ds:
                    desc = self._graph_ds[lp.key]
                    break
            if desc is None:
                descs = list(self._graph_ds.values())
                ref = self._last_dataset
                ds = ref() if ref is not None else None
                desc = descs[0] if len(descs) == 1 else (describe_dataset(ds) if ds is not None else None)
            stats = _IterStats()
            stats.wait, stats.count = gw, int(gc)
            return desc, stats
        if best is None:
            return None, None
        if best.desc is None and best.dataset is not None:
            ds = best.dataset()
            if ds is not None:
                best.desc = describe_dataset(ds)
        return best.desc, best

    def summary(self) -> dict[str, Any]:
        steps = self.session.steps
        if steps is not None:
            try:
                steps.finish()
            except Exception as exc:  # noqa: BLE001
                steps.fail(exc, "final input-wait attribution")
        gw, gc, gx = self._graph_totals(force=True)
        loops = steps.loops() if steps is not None else []
        n_steps = sum(lp.n for lp in loops)
        startup_wait = sum(lp.startup_wait_s for lp in loops)
        steady_wait = sum(lp.steady_wait_s for lp in loops)
        startup_span = sum(lp.startup_s for lp in loops)
        steady_span = sum(lp.total for lp in loops)
        intervals = sum(lp.intervals for lp in loops)
        span = startup_span + steady_span
        share = max(0.0, min(1.0, (startup_wait + steady_wait) / span)) if span > 0 else None
        desc, stats = self._main_dataset(loops)
        fetches = self.eager_count + int(gc)
        out: dict[str, Any] = {
            "share": share,
            "steady_share": (max(0.0, min(1.0, steady_wait / steady_span)) if steady_span > 0 else None),
            "series": self.series.downsample(200),
            "wait_s": startup_wait + steady_wait,
            "startup_wait_s": startup_wait,
            "steady_wait_s": steady_wait,
            "time_s": span,
            "startup_time_s": startup_span,
            "steady_wait_per_step_s": (steady_wait / intervals) if intervals else None,
            "all_fetches_wait_s": self.eager_wait + gw,
            "fetches": fetches,
            "eager_fetches": self.eager_count,
            "in_graph_fetches": int(gc),
            "mean_fetch_s": ((self.eager_wait + gw) / fetches) if fetches else None,
            "steps": n_steps,
        }
        if stats is not None and stats.count:
            out["slow_fetch_fraction"] = (stats.slow / stats.count) if stats is not self._graph_stats and stats.slow else None
        if desc is not None:
            out["dataset"] = desc
        # loops fed without tf.data (e.g. a Python generator): time spent outside the step function
        prim = steps.main_loop() if steps is not None else None
        if prim is not None and prim.kind == "function" and prim.total > 0 and prim.n >= 2:
            # between the steps, less the time in other tf.functions (measured: not input)
            outside = max(0.0, prim.total - prim.calls_time)
            other = min(outside, sum(prim.other_fns.values()))
            out["outside_step_share"] = max(0.0, min(1.0, (outside - other) / prim.total))
            out["outside_step_mean_s"] = (outside - other) / (prim.n - 1)
            out["other_functions_share"] = other / prim.total
            out["other_functions"] = sorted(prim.other_fns, key=lambda k: -prim.other_fns[k])[:3]
            out["step_function"] = prim.name
            out["step_site"] = list(prim.site) if prim.site else None
            out["step_takes_arguments"] = prim.takes_args
        if share is None:
            out["classification"] = "unknown"
        elif share >= HIGH:
            out["classification"] = "highly input-bound"
        elif share >= MODERATE:
            out["classification"] = "moderately input-bound"
        else:
            out["classification"] = "not input-bound"
        return out

    def signals(self, summary: dict[str, Any]) -> list[Signal]:
        share = summary.get("share")
        if not summary.get("fetches"):
            return self._outside_signals(summary)
        if share is None or summary.get("steps", 0) < MIN_STEPS or share < MODERATE:
            return []
        desc = summary.get("dataset") or {}
        high = share >= HIGH
        prefetched = bool(desc.get("final_prefetch") or desc.get("injected_prefetch"))
        wait = summary.get("wait_s") or 0.0
        startup = summary.get("startup_wait_s") or 0.0
        startup_bound = wait > 0 and startup >= 0.5 * wait
        python_stage = any(desc.get(k) for k in ("py_function", "from_generator", "sequential_map"))
        shuffle = desc.get("shuffle") or {}
        # A start-up wait is worth a finding when something slow fills it (a Python stage, a
        # shuffle buffer filled through a map); the first fetch of a prefetched pipeline of
        # TensorFlow ops always costs a little, and on a short run it dominates the share.
        startup_bound = startup_bound and (python_stage or bool(shuffle.get("filled_by")))
        if not high and prefetched and not startup_bound:
            return []  # moderate wait with prefetch already in place: nothing actionable
        per_step = summary.get("steady_wait_per_step_s")
        if prefetched and not python_stage and not startup_bound and (per_step if per_step is not None else 0.0) < READY_FETCH_S:
            # a prefetched pipeline of TensorFlow ops handing over each batch in under a
            # millisecond: the batches are ready, the share only reflects a very short step
            return []
        slow = _slow_stages(desc)
        advice = []
        for m in desc.get("map_functions") or []:
            for py in m.get("py_function") or []:
                advice.append(f"`{py}` runs in Python under the GIL (tf.py_function/numpy_function in map "
                              f"`{m.get('function') or m['transformation']}`): rewrite it with TensorFlow ops")
        if desc.get("from_generator"):
            advice.append("the pipeline runs a Python generator (from_generator), which is single-threaded and holds the GIL: "
                          "move the work into tf.data ops, or precompute/cache the data")
        if startup_bound and shuffle.get("filled_by"):
            advice.append(f"shuffle({shuffle.get('buffer_size') or ''}) waits for its whole buffer to be filled through "
                          f"{', '.join(f'`{x}`' for x in shuffle['filled_by'])} before the first batch: shuffle cheap "
                          "elements (file names, indices) before the expensive map, or use a smaller buffer")
        if desc.get("sequential_map"):
            advice.append("map() runs sequentially: pass num_parallel_calls=tf.data.AUTOTUNE")
        if not prefetched:
            advice.append("end the pipeline with .prefetch(tf.data.AUTOTUNE) so the next batch is prepared during the step")
        if not desc.get("cache") and not desc.get("from_generator") and (desc.get("py_function") or desc.get("sequential_map")):
            advice.append("cache() the dataset after expensive, deterministic preprocessing")
        if not advice:
            advice.append("make the producer faster (more parallelism, less per-element Python work) or the input smaller")
        level = "HIGHLY" if high else "MODERATELY"
        n = summary.get("steps", 0)
        msg = (f"{level} input-bound: {share * 100:.1f}% of the time of the {n:,} steps counted is spent waiting for "
               f"the next batch ({_secs(wait)} of {_secs(summary.get('time_s') or 0.0)}; "
               f"TensorBoard's thresholds: >= 20% highly, >= 5% moderately)")
        if startup > 0.05 * wait and startup > 0.01:
            msg += f"; {_secs(startup)} of it at start-up, before the first step"
            if shuffle.get("filled_by"):
                msg += f" (filling shuffle's buffer of {shuffle.get('buffer_size')} elements)"
        if per_step:
            msg += f"; after start-up a step waits {per_step * 1e3:.2f} ms for its batch"
        if slow:
            msg += f". Slow stage: {', '.join(slow)}"
        if desc.get("chain"):
            msg += f". Pipeline (last transformation first): {' <- '.join(desc['chain'][:8])}"
            if len(desc["chain"]) > 8:
                msg += " <- …"
            if desc.get("injected_prefetch"):
                msg += " (tf.data appends a prefetch)"
        msg += ". Fix: " + "; ".join(advice) + "."
        sites = desc.get("sites") or []
        loc = Location(str(sites[0][0]), int(sites[0][1])) if sites else None
        return [
            Signal(
                kind=KIND,
                severity="warning" if high else "info",
                message=msg,
                location=loc,
                details={
                    "wait_share": share,
                    "classification": summary.get("classification"),
                    "wait_s": wait,
                    "startup_wait_s": startup,
                    "steady_wait_per_step_s": per_step,
                    "mean_fetch_s": summary.get("mean_fetch_s"),
                    "fetches": summary.get("fetches"),
                    "slow_stages": slow,
                    "dataset": desc or None,
                    "advice": advice,
                },
            )
        ]

    def _outside_signals(self, summary: dict[str, Any]) -> list[Signal]:
        """No tf.data iterator fed the loop: judge the time between calls of the step function."""
        out_share = summary.get("outside_step_share")
        if out_share is None or summary.get("steps", 0) < MIN_STEPS or out_share < HIGH:
            return []
        if (summary.get("outside_step_mean_s") or 0.0) < MIN_OUTSIDE_S:
            return []  # Python loop overhead around a tiny step, not a slow producer
        if summary.get("step_takes_arguments") is False:
            return []  # the step is given no batch: the time between its calls does not feed it
        fn = summary.get("step_function") or "the step function"
        site = summary.get("step_site")
        gap = summary.get("outside_step_mean_s") or 0.0
        others = summary.get("other_functions") or []
        other_share = summary.get("other_functions_share") or 0.0
        besides = (f", besides {other_share * 100:.1f}% in other tf.functions ({', '.join(f'`{o}`' for o in others)})"
                   if others and other_share >= 0.01 else "")
        msg = (f"POTENTIALLY input-bound: {out_share * 100:.1f}% of the time between calls of `{fn}` "
               f"({gap * 1e3:.1f} ms per step) is spent outside it in Python or eager TensorFlow code{besides}, "
               "and no tf.data iterator feeds the loop. If that code makes the next batch (a generator, file reads, "
               "per-step numpy work), the step waits for it. Fix: feed the loop with tf.data "
               "(Dataset.from_generator(...).prefetch(tf.data.AUTOTUNE), or tf.data ops with num_parallel_calls) "
               "so batches are prepared while the step runs; if it is other work (eager model calls, an environment "
               "step), move it into a tf.function or run it less often.")
        return [
            Signal(
                kind=KIND,
                severity="warning" if out_share >= 0.5 else "info",
                message=msg,
                location=Location(str(site[0]), int(site[1])) if site else None,
                details={"outside_step_share": out_share, "other_functions_share": other_share,
                         "other_functions": others, "classification": "potentially input-bound",
                         "step_function": fn, "source": "python-loop", "dataset": None},
            )
        ]


def _secs(s: float) -> str:
    return f"{s * 1e3:.0f} ms" if s < 1.0 else f"{s:.1f} s"


def _slow_stages(desc: dict[str, Any]) -> list[str]:
    """What in the pipeline runs Python or reads files, as far as its structure tells."""
    out = []
    for m in desc.get("map_functions") or []:
        py = m.get("py_function") or []
        if py:
            out.append(f"map `{m.get('function') or m['transformation']}` calling Python `{'`, `'.join(py)}`")
    if desc.get("from_generator"):
        out.append("a Python generator (from_generator)")
    if desc.get("file_source"):
        out.append(f"file reads ({desc['file_source']})")
    return out
