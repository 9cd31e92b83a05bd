"""tf.data chains across statements.

A *chain* is what one dataset value was built from: the constructor (``tf.data.Dataset.range``,
``tf.data.TFRecordDataset``, ``keras.utils.image_dataset_from_directory``...) and the ordered
transformations applied to it (``map``, ``batch``, ``prefetch``...), each with its call node.
Chains are followed through assignments in execution order, across statements
(``ds = ds.map(f)`` on one line, ``ds = ds.prefetch(2)`` on another), through ``if``/``else``
branches (a name then has several alternative chains), and through calls of functions of the
module that return a dataset (``def make_ds(): ...; return ds`` then ``ds = make_ds()``).
Parameters annotated ``tf.data.Dataset`` are datasets of unknown origin.

Facts offered to rules:

- ``is_dataset(expr)`` — whether an expression evaluates to a dataset;
- ``chains_of(expr)`` — the alternative chains of an expression;
- ``transformations`` — every dataset method call with the chains of its receiver;
- ``consumptions`` — where datasets are consumed: ``for`` loops (also over ``enumerate(ds)``,
  ``ds.as_numpy_iterator()``), ``iter(ds)``, and ``fit``/``evaluate``/``predict`` (``x=`` and
  ``validation_data=``);
- ``map_functions(call)`` — the function nodes a ``Dataset.map(...)`` call runs;
- ``method_position(call)`` — where the method name of ``recv.method(...)`` starts, so a finding
  on a multi-line chain points at its own line;
- ``options_off(chain)`` — which of tf.data's automatic optimizations (``inject_prefetch``,
  ``map_parallelization``) the ``tf.data.Options`` applied with ``with_options`` switch off;
- ``stateful_op(call)`` — the first operation that makes a ``map`` function *stateful* in
  tf.data's sense (random ops, ``py_function``, variable and lookup-table reads...), which
  keeps tf.data from running it in parallel on its own.

What TensorFlow 2.21 does with a pipeline, read in its source and measured in
``tests/premises/test_input_pipeline.py`` (the node kinds of the pipeline tf.data really runs):

- the ``inject_prefetch`` optimization (default on; ``OptimizationOptions.inject_prefetch``)
  appends a ``prefetch`` when the last step is synchronous; it is off when the pipeline's
  options set ``experimental_optimization.inject_prefetch = False``,
  ``experimental_optimization.apply_default_optimizations = False`` or
  ``autotune.enabled = False``;
- the ``map_parallelization`` optimization (default on) turns a ``map`` whose function is
  stateless into a parallel map (order kept); a stateful function stays sequential; it is off
  with ``experimental_optimization.map_parallelization = False`` or
  ``apply_default_optimizations = False``;
- ``image_dataset_from_directory``, ``text_dataset_from_directory``,
  ``timeseries_dataset_from_array`` and ``make_csv_dataset`` end with their own ``prefetch``
  even when injection is off.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tflint.analysis.astutil import dotted

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis

DATASET_ROOTS = ("tensorflow.data.", "keras.utils.image_dataset_from_directory",
                 "keras.utils.text_dataset_from_directory", "keras.utils.timeseries_dataset_from_array",
                 "keras.preprocessing.image_dataset_from_directory")

# Constructors that return a dataset.
_ROOT_PREFIXES = ("tensorflow.data.Dataset.", "tensorflow.compat.v1.data.Dataset.")
_ROOT_NAMES = frozenset(
    {
        "tensorflow.data.TFRecordDataset",
        "tensorflow.data.TextLineDataset",
        "tensorflow.data.FixedLengthRecordDataset",
        "tensorflow.data.experimental.CsvDataset",
        "tensorflow.data.experimental.SqlDataset",
        "tensorflow.data.experimental.RandomDataset",
        "tensorflow.data.experimental.Counter",
        "tensorflow.data.experimental.load",
        "tensorflow.data.experimental.sample_from_datasets",
        "tensorflow.data.experimental.choose_from_datasets",
        "tensorflow.data.experimental.from_list",
    }
)
# Constructors that end their own pipeline with ``prefetch``.
_PREFETCHING_ROOTS = frozenset(
    {
        "keras.utils.image_dataset_from_directory",
        "keras.utils.text_dataset_from_directory",
        "keras.utils.timeseries_dataset_from_array",
        "keras.utils.audio_dataset_from_directory",
        "keras.preprocessing.image_dataset_from_directory",
        "keras.preprocessing.text_dataset_from_directory",
        "keras.preprocessing.timeseries_dataset_from_array",
        "tensorflow.data.experimental.make_csv_dataset",
        "tensorflow.data.experimental.make_batched_features_dataset",
        "tensorflow_datasets.load",
    }
)
# Options settings (path below ``tf.data.Options()``) that, set to False, switch off an
# automatic optimization; see the module docstring.
OPTIONS_OFF: dict[str, frozenset[str]] = {
    "experimental_optimization.inject_prefetch": frozenset({"inject_prefetch"}),
    "experimental_optimization.map_parallelization": frozenset({"map_parallelization"}),
    "experimental_optimization.apply_default_optimizations": frozenset({"inject_prefetch", "map_parallelization"}),
    "autotune.enabled": frozenset({"inject_prefetch"}),
    "experimental_optimization.autotune": frozenset({"inject_prefetch"}),
}
_OPTIONS_CTORS = frozenset({"tensorflow.data.Options", "tensorflow.compat.v1.data.Options"})

# Operations that make a tf.data function stateful (tf.data then does not parallelize it).
_STATEFUL_PREFIXES = (
    "tensorflow.random.",
    "tensorflow.image.random_",
    "tensorflow.compat.v1.random_",
    "tensorflow.compat.v1.image.random_",
    "tensorflow.summary.",
    "keras.random.",
)
_NOT_STATEFUL_PREFIXES = (
    "tensorflow.random.stateless_",
    "tensorflow.random.experimental.stateless_",
    "tensorflow.random.set_seed",
    "tensorflow.random.experimental.index_shuffle",
    "tensorflow.random.experimental.create_rng_state",
    "keras.random.SeedGenerator",
)
_STATEFUL_NAMES = frozenset(
    {
        "tensorflow.py_function",
        "tensorflow.compat.v1.py_func",
        "tensorflow.compat.v1.py_function",
        "tensorflow.numpy_function",
        "tensorflow.compat.v1.numpy_function",
        "tensorflow.experimental.numpy_function",
        "tensorflow.print",
        "tensorflow.nn.dropout",
        "tensorflow.random_uniform",
        "tensorflow.random_normal",
        "tensorflow.Variable",
    }
)
# Module values whose use in a function reads variables or lookup tables (stateful).
_STATEFUL_VALUE_PREFIXES = (
    "tensorflow.Variable",
    "tensorflow.lookup.",
    "tensorflow.random.Generator",
    "keras.layers.StringLookup",
    "keras.layers.IntegerLookup",
    "keras.layers.TextVectorization",
    "keras.layers.Normalization",
    "keras.layers.Random",
    "keras.layers.experimental.preprocessing.Random",
    "keras.layers.experimental.preprocessing.StringLookup",
    "keras.layers.experimental.preprocessing.IntegerLookup",
    "keras.layers.experimental.preprocessing.TextVectorization",
    "keras.layers.experimental.preprocessing.Normalization",
    "keras.Sequential",
    "keras.models.Sequential",
    "keras.Model",
    "keras.models.load_model",
    "keras.applications.",
)

# A Keras random preprocessing layer draws its randomness in ``__call__`` (through
# ``get_random_transformation``); its ``transform_*`` methods given a transformation only apply
# it: a map calling those alone stays stateless, and tf.data runs it in parallel (checked on
# TensorFlow 2.21). RandomColorJitter draws inside ``transform_images`` as well.
_RANDOM_LAYER_PREFIXES = ("keras.layers.Random", "keras.layers.experimental.preprocessing.Random")
_APPLIES_GIVEN_TRANSFORMATION = frozenset(
    {"transform_images", "transform_labels", "transform_bounding_boxes", "transform_segmentation_masks"}
)
_DRAWS_IN_TRANSFORM = ("keras.layers.RandomColorJitter",)

# Methods of ``tf.data.Dataset`` that return another dataset.
DATASET_METHODS = frozenset(
    {
        "apply", "assert_cardinality", "batch", "bucket_by_sequence_length", "cache",
        "concatenate", "enumerate", "filter", "filter_with_legacy_function", "flat_map",
        "group_by_window", "ignore_errors", "interleave", "map", "map_with_legacy_function",
        "padded_batch", "prefetch", "ragged_batch", "rebatch", "rejection_resample", "repeat",
        "scan", "shard", "shuffle", "skip", "snapshot", "sparse_batch", "take", "take_while",
        "unbatch", "unique", "window", "with_options",
    }
)
# Methods that leave the data where it is and only cheaply reshape the stream: a pipeline
# that prefetches and is then only changed this way still prefetches.
_CHEAP_METHODS = frozenset(
    {"take", "skip", "repeat", "with_options", "shard", "assert_cardinality", "cache", "enumerate"}
)
BATCHING_METHODS = frozenset({"batch", "padded_batch", "ragged_batch", "sparse_batch"})
_DISTRIBUTE_METHODS = frozenset({"experimental_distribute_dataset", "distribute_datasets_from_function"})
_ITER_WRAPPERS = frozenset({"iter", "enumerate", "zip", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "itertools.islice"})
CONSUMING_MODEL_METHODS = frozenset({"fit", "evaluate", "predict"})

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


@dataclass(frozen=True, slots=True)
class Step:
    """One transformation: ``method`` called at ``node`` (the ``Call``)."""

    method: str
    node: ast.Call

    @property
    def line(self) -> int:
        return self.node.lineno


@dataclass(frozen=True, slots=True)
class Chain:
    """A dataset value: its origin and the transformations applied to it, in order (equal
    when both are: the same pipeline, however many times it was derived).

    ``kind`` is ``"constructor"`` (built by a tf.data constructor of this module),
    ``"prefetching"`` (a constructor that ends with its own ``prefetch``, like
    ``image_dataset_from_directory``) or ``"parameter"`` (a parameter annotated as a dataset:
    its earlier transformations are unknown).
    """

    root: ast.AST
    kind: str
    steps: tuple[Step, ...] = ()

    def extend(self, method: str, node: ast.Call) -> Chain:
        return Chain(self.root, self.kind, (*self.steps, Step(method, node)))

    @property
    def known(self) -> bool:
        return self.kind in ("constructor", "prefetching")

    @property
    def line(self) -> int:
        return getattr(self.root, "lineno", 0)

    @property
    def last_node(self) -> ast.AST:
        return self.steps[-1].node if self.steps else self.root

    def methods(self) -> list[str]:
        return [s.method for s in self.steps]

    def find(self, *methods: str) -> list[Step]:
        return [s for s in self.steps if s.method in methods]

    @property
    def distributed(self) -> bool:
        return any(s.method == "distribute" for s in self.steps)

    def has_prefetch(self) -> bool:
        """True when the pipeline ends up prefetching: a ``prefetch`` step (or
        ``apply(prefetch_to_device(...))``), or a prefetching constructor followed only by
        cheap steps."""
        for s in self.steps:
            if s.method == "prefetch":
                return True
            if s.method == "apply" and s.node.args and "prefetch" in ast.dump(s.node.args[0]):
                return True
        if self.kind == "prefetching":
            return all(s.method in _CHEAP_METHODS for s in self.steps)
        return False


@dataclass(slots=True)
class Consumption:
    """Where a dataset is consumed.

    ``kind``: ``"for"`` (``node`` is the ``For``), ``"iter"`` (``node`` is the ``iter(...)``
    call), or the model method name ``"fit"``/``"evaluate"``/``"predict"`` (``node`` is the call).
    ``expr`` is the dataset expression consumed and ``role`` how it is passed (``"x"`` or
    ``"validation_data"`` for model methods, ``"iterable"`` otherwise).
    """

    node: ast.AST
    kind: str
    expr: ast.AST
    chains: tuple[Chain, ...]
    role: str = "iterable"


@dataclass(slots=True)
class Transformation:
    """A dataset method call ``recv.method(...)`` and the chains of its receiver."""

    node: ast.Call
    method: str
    receiver: tuple[Chain, ...]


class _Env:
    __slots__ = ("parent", "vars")

    def __init__(self, parent: _Env | None = None, vars: dict | None = None) -> None:
        self.vars: dict[str, tuple[Chain, ...]] = vars if vars is not None else {}
        self.parent = parent

    def lookup(self, name: str) -> tuple[Chain, ...]:
        env: _Env | None = self
        while env is not None:
            if name in env.vars:
                return env.vars[name]
            env = env.parent
        return ()

    def copy(self) -> _Env:
        return _Env(self.parent, dict(self.vars))

    def merge(self, *others: _Env) -> None:
        keys = set(self.vars)
        for o in others:
            keys |= set(o.vars)
        for k in keys:
            out: list[Chain] = []
            for o in others:
                for c in (o.vars[k] if k in o.vars else self.lookup(k)):
                    if c not in out:
                        out.append(c)
            self.vars[k] = tuple(out)


@dataclass(slots=True)
class _FuncInfo:
    node: ast.AST
    env: _Env  # the defining scope
    state: int = 0  # 0 not analyzed, 1 in progress, 2 done
    returns: list[Chain] = field(default_factory=list)
    hints: dict | None = None  # the parameter hints its last analysis started from


_MAX_REANALYSIS_ROUNDS = 4


def _position(node: ast.AST | None) -> tuple[int, int]:
    """Where ``node`` starts (module level, ``None``, first): a stable order for AST nodes."""
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0)) if node is not None else (-1, -1)


def _union(*alts: tuple[Chain, ...]) -> tuple[Chain, ...]:
    out: list[Chain] = []
    for a in alts:
        for c in a:
            if c not in out:
                out.append(c)
    return tuple(out)


class DatasetFacts:
    def __init__(self, analysis: Analysis) -> None:
        self.a = analysis
        self._done = False
        self._values: dict[ast.AST, tuple[Chain, ...]] = {}
        self._funcs: dict[ast.AST, _FuncInfo] = {}
        self._func_stack: list[_FuncInfo] = []
        self._no_consume: set[ast.AST] = set()
        self._transformations: list[Transformation] = []
        self._transform_by_node: dict[ast.AST, Transformation] = {}
        self._consumptions: list[Consumption] = []
        self._by_name: dict[str, list[ast.AST]] = {}
        self._class_methods: dict[ast.ClassDef, dict[str, ast.AST]] = {}
        self._classes: dict[str, ast.ClassDef] = {}
        # function node -> functions (or None for module level) that call it
        self._callers: dict[ast.AST, set] = {}
        # function node -> parameter name -> chains passed by the module's call sites
        self._param_hints: dict[ast.AST, dict[str, tuple[Chain, ...]]] = {}
        # (class, attribute) -> chains assigned to ``self.attribute`` in any method
        self._class_attrs: dict[tuple[ast.ClassDef, str], tuple[Chain, ...]] = {}
        self._visiting: set[ast.AST] = set()
        self._returning: dict[ast.AST, bool] = {}
        self._lines: list[str] | None = None

    # -- public queries ------------------------------------------------------------------
    def is_dataset(self, expr: ast.AST) -> bool:
        self._ensure()
        if expr in self._values:
            return bool(self._values[expr])
        return self._structural_is_dataset(expr)

    def chains_of(self, expr: ast.AST) -> tuple[Chain, ...]:
        self._ensure()
        return self._values.get(expr, ())

    @property
    def transformations(self) -> list[Transformation]:
        self._ensure()
        return self._transformations

    def transformation(self, call: ast.AST) -> Transformation | None:
        self._ensure()
        return self._transform_by_node.get(call)

    @property
    def consumptions(self) -> list[Consumption]:
        self._ensure()
        return self._consumptions

    def iterated_once(self, node: ast.AST) -> bool:
        """Every consumption of what the transformation at ``node`` yields is a ``for`` loop (or
        ``iter()``) of the module's own code (a function may be called every epoch) that no
        other loop encloses, and there is one: it is read once, never an epoch again
        (``for batch in ds.take(2).cache(): print(batch)``)."""
        found = False
        for c in self.consumptions:
            if any(s.node is node for chain in c.chains for s in chain.steps):
                found = True
                if (c.kind not in ("for", "iter") or self.a.enclosing_function(c.node) is not None
                        or self.a.loops.enclosing_loops(c.node)):
                    return False
        return found

    def only_evaluated(self, node: ast.AST) -> bool:
        """Every consumption of what the transformation at ``node`` yields is a model's
        ``validation_data``, ``evaluate`` or ``predict`` (whose order and repetition do not
        change what is learned), and there is one."""
        found = False
        for c in self.consumptions:
            if any(s.node is node for chain in c.chains for s in chain.steps):
                found = True
                if not (c.kind in ("evaluate", "predict") or c.role == "validation_data"):
                    return False
        return found

    def only_sampled(self, node: ast.AST) -> bool:
        """Every consumption of what the transformation at ``node`` yields reads it through a
        later ``.take(n)`` of at most ``SAMPLE_TAKE`` elements (a look at a batch or two: plot
        one, print one), and there is one; a pipeline that is returned, or passed where the
        module does not show how it is read, is not."""
        found = False
        for c in self.consumptions:
            for chain in c.chains:
                idx = next((i for i, s in enumerate(chain.steps) if s.node is node), None)
                if idx is None:
                    continue
                found = True
                if not any(s.method == "take" and small_take(s.node) for s in chain.steps[idx + 1:]):
                    return False
        return found

    def map_functions(self, call: ast.Call) -> list[ast.AST]:
        """Function nodes (``def`` or ``lambda``) of this module that a ``.map(...)`` runs."""
        fn = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg in ("map_func", "predicate")), None
        )
        if fn is None:
            return []
        return self.resolve_callable(fn, call)

    def resolve_callable(self, expr: ast.AST, at: ast.AST, depth: int = 0) -> list[ast.AST]:
        if isinstance(expr, ast.Lambda):
            return [expr]
        if isinstance(expr, ast.Call):
            if expr.args and self.a.call_name(expr) in ("functools.partial", "tensorflow.function"):
                return self.resolve_callable(expr.args[0], at, depth)
            return []
        if isinstance(expr, ast.Name):
            if expr.id in self.a.imports.aliases:
                return []
            found = self.a.lookup_function(expr.id, at)
            if not found and depth < 3:
                found = self._passed_for_parameter(expr.id, at, depth)
            return found
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
            cls = self.a.enclosing_class(at)
            if cls is not None:
                m = self._methods_of(cls).get(expr.attr)
                return [m] if m is not None else []
        return []

    def _passed_for_parameter(self, name: str, at: ast.AST, depth: int) -> list[ast.AST]:
        """``def make(parser): ds.map(parser)``: the functions the module's callers of
        ``make`` pass for the parameter ``parser``."""
        owner = self.a.enclosing_function(at)
        if owner is None or isinstance(owner, ast.Lambda):
            return []
        params = [p.arg for p in (*owner.args.posonlyargs, *owner.args.args)]
        kwonly = {p.arg for p in owner.args.kwonlyargs}
        if name not in params and name not in kwonly:
            return []
        out: list[ast.AST] = []
        for site in self.a.traced.call_sites(owner):
            arg = next((k.value for k in site.keywords if k.arg == name), None)
            if arg is None and name in params:
                i = params.index(name)
                if i < len(site.args) and not any(isinstance(x, ast.Starred) for x in site.args[: i + 1]):
                    arg = site.args[i]
            if arg is not None:
                for f in self.resolve_callable(arg, getattr(site, "original", site), depth + 1):
                    if f not in out:
                        out.append(f)
        return out

    def method_position(self, call: ast.Call) -> tuple[int, int]:
        """(line, col) of the method name in ``recv.method(...)``; the call's start otherwise."""
        func = call.func
        if not isinstance(func, ast.Attribute):
            return call.lineno, call.col_offset
        if self._lines is None:
            # Lines as the parser counts them (not str.splitlines: form feeds, \x1c... are no breaks).
            self._lines = self.a.source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        lines = self._lines
        if not lines:
            return func.lineno, func.col_offset
        line, col = func.value.end_lineno, func.value.end_col_offset
        # Scan forward to the attribute name, past ")", whitespace, line continuations and comments.
        while line - 1 < len(lines):
            text = lines[line - 1]
            while col < len(text):
                ch = text[col]
                if text.startswith(func.attr, col) and (col == 0 or not (text[col - 1].isalnum() or text[col - 1] == "_")):
                    return line, col
                if ch == "#":
                    break
                col += 1
            line += 1
            col = 0
        return func.lineno, func.col_offset

    def options_off(self, chain: Chain) -> frozenset[str]:
        """The automatic optimizations (``"inject_prefetch"``, ``"map_parallelization"``) that
        the options applied to ``chain`` with ``with_options`` switch off. Options the module
        does not show (a parameter, a call's result) switch off nothing."""
        off: set[str] = set()
        for s in chain.steps:
            if s.method != "with_options":
                continue
            arg = s.node.args[0] if s.node.args else next(
                (k.value for k in s.node.keywords if k.arg == "options"), None
            )
            if isinstance(arg, ast.Name):
                for path, value in self._options_settings(arg.id, s.node):
                    if value is False and path in OPTIONS_OFF:
                        off |= OPTIONS_OFF[path]
        return frozenset(off)

    def options_off_at(self, call: ast.Call) -> frozenset[str]:
        """What the options of every pipeline that runs the dataset method call ``call``
        switch off (options apply to the whole pipeline, upstream steps included)."""
        self._ensure()
        off: set[str] = set()
        t = self._transform_by_node.get(call)
        if t is not None:
            for c in t.receiver:
                off |= self.options_off(c)
        for w in self._transformations:
            if w.method == "with_options" and any(any(s.node is call for s in c.steps) for c in w.receiver):
                for c in w.receiver:
                    off |= self.options_off(c.extend("with_options", w.node))
        return frozenset(off)

    def _options_settings(self, name: str, at: ast.AST) -> list[tuple[str, object]]:
        """``(path, constant)`` for each ``name.a.b = constant`` in the scope of ``at`` where
        ``name`` is bound to ``tf.data.Options()`` (or a dataset's ``.options()``)."""
        scope = self.a.enclosing_function(at)
        if scope is not None:
            got = self._options_settings_in(name, scope)
            if got is not None:
                return got
        return self._options_settings_in(name, self.a.tree) or []

    def _options_settings_in(self, name: str, scope: ast.AST) -> list[tuple[str, object]] | None:
        """The settings of ``name`` in ``scope`` (its own statements, not nested functions);
        ``None`` when ``scope`` does not bind ``name`` to options."""
        memo = self.__dict__.setdefault("_options_memo", {})
        key = (id(scope), name)
        if key in memo:
            return memo[key]
        bound = False
        settings: list[tuple[str, object]] = []
        for node in ast.walk(scope):
            if not isinstance(node, ast.Assign) or self.a.enclosing_function(node) is not (
                scope if scope is not self.a.tree else None
            ):
                continue
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id == name and isinstance(node.value, ast.Call):
                    f = node.value.func
                    if self.a.call_name(node.value) in _OPTIONS_CTORS or (
                        isinstance(f, ast.Attribute) and f.attr == "options"
                    ):
                        bound = True
                elif isinstance(t, ast.Attribute):
                    parts = []
                    e: ast.AST = t
                    while isinstance(e, ast.Attribute):
                        parts.append(e.attr)
                        e = e.value
                    if isinstance(e, ast.Name) and e.id == name and isinstance(node.value, ast.Constant):
                        settings.append((".".join(reversed(parts)), node.value.value))
        memo[key] = settings if bound else None
        return memo[key]

    def stateful_op(self, call: ast.Call) -> ast.AST | None:
        """The first operation that makes the function of ``Dataset.map`` call ``call``
        stateful (in it, or in the module's functions it calls), preferring one that is not a
        mere attribute read of a stateful object; ``None`` when none is seen."""
        memo = self.__dict__.setdefault("_stateful_memo", {})
        if call in memo:
            return memo[call]
        found = None
        top = self.map_functions(call)
        flags = self.python_flags(call, top)
        for f in functions_run_by(self, top, flags=flags):
            op, attribute_read = self._stateful_in(f, flags if f in top else {})
            if op is not None:
                found = op  # a use that reads state: the place to point at
                break
            found = found or attribute_read
        memo[call] = found
        return found

    def python_flags(self, call: ast.Call, funcs: list[ast.AST]) -> dict[str, bool]:
        """The Python booleans the map function's parameters hold when ``call`` runs it: their
        literal defaults, or what ``functools.partial(f, flag=True)`` binds. A branch under
        ``if flag:`` is then taken, or not, while tracing, once for every element."""
        fn = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "map_func"), None)
        bound: dict[str, bool] = {}
        if isinstance(fn, ast.Call) and self.a.call_name(fn) == "functools.partial":
            for k in fn.keywords:
                if k.arg and isinstance(k.value, ast.Constant) and isinstance(k.value.value, bool):
                    bound[k.arg] = k.value.value
        out: dict[str, bool] = {}
        for f in funcs:
            if isinstance(f, ast.Lambda):
                continue
            args = f.args
            positional = [*args.posonlyargs, *args.args]
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            for arg, default in pairs:
                if isinstance(default, ast.Constant) and isinstance(default.value, bool):
                    out[arg.arg] = default.value
        out.update(bound)
        return out

    def _stateful_in(self, func: ast.AST, flags: dict[str, bool] | None = None) -> tuple[ast.AST | None, ast.AST | None]:
        """The first stateful operation in ``func``, and the first attribute read of a stateful
        object (``tokenizer.start_token_id``), which counts only when there is no operation: the
        finding points at the call that reads state (``tokenizer(text)``) where there is one."""
        a = self.a
        values = self._stateful_values()
        body = [func.body] if isinstance(func, ast.Lambda) else list(func.body)
        stack = list(reversed(body))
        attribute_read = None
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if flags and isinstance(node, ast.If):
                value = _flag_value(node.test, flags)
                if value is not None:  # decided while tracing: only the branch taken runs
                    stack.extend(reversed(node.body if value else node.orelse))
                    continue
            if isinstance(node, ast.Call):
                if self._applies_given_transformation(node, values):
                    stack.extend(reversed([*node.args, *(k.value for k in node.keywords)]))
                    continue  # the layer's own state is not touched
                q = a.call_name(node)
                if q and not q.startswith(_NOT_STATEFUL_PREFIXES):
                    if q in _STATEFUL_NAMES:
                        stateless = q.endswith("numpy_function") and any(
                            k.arg == "stateful" and isinstance(k.value, ast.Constant) and k.value.value is False
                            for k in node.keywords
                        )
                        if not stateless:
                            return node, attribute_read
                    elif q.startswith(_STATEFUL_PREFIXES) or _stateful_value_name(q):
                        return node, attribute_read
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in values:
                if not self._attribute_read(node):
                    return node, attribute_read
                attribute_read = attribute_read or node
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and "self." + node.attr in values
            ):
                return node, attribute_read
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
        return None, attribute_read

    def _attribute_read(self, name: ast.Name) -> bool:
        """``name.attr`` read as a value (``tokenizer.start_token_id``), not called or indexed."""
        parent = self.a.parent(name)
        if not isinstance(parent, ast.Attribute):
            return False
        use = self.a.parent(parent)
        return not ((isinstance(use, ast.Call) and use.func is parent)
                    or (isinstance(use, ast.Subscript) and use.value is parent))

    def _applies_given_transformation(self, call: ast.Call, values: dict[str, ast.AST]) -> bool:
        """``layer.transform_images(x, transformation)`` (and the other ``transform_*``) of a
        Keras random layer, with a transformation passed in: no random draw."""
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in _APPLIES_GIVEN_TRANSFORMATION:
            return False
        recv = func.value
        if isinstance(recv, ast.Name):
            key = recv.id
        elif isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self":
            key = "self." + recv.attr
        else:
            return False
        assign = values.get(key)
        if not isinstance(assign, ast.Assign) or not isinstance(assign.value, ast.Call):
            return False
        q = self.a.call_name(assign.value) or ""
        if not q.startswith(_RANDOM_LAYER_PREFIXES) or q.startswith(_DRAWS_IN_TRANSFORM):
            return False
        given = call.args[1] if len(call.args) >= 2 else next(
            (k.value for k in call.keywords if k.arg == "transformation"), None)
        return given is not None and not (isinstance(given, ast.Constant) and given.value is None)

    def _stateful_values(self) -> dict[str, ast.AST]:
        """Names (and ``self.attr``) assigned a variable, a lookup table, a random generator or
        a Keras model/layer that reads variables: using them in a function reads state."""
        got = self.__dict__.get("_stateful_values_memo")
        if got is None:
            got = {}
            for node in self.a.nodes(ast.Assign):
                value = node.value
                if not isinstance(value, ast.Call):
                    continue
                q = self.a.call_name(value)
                if not q or not _stateful_value_name(q) or q.startswith(_NOT_STATEFUL_PREFIXES):
                    continue
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        got.setdefault(t.id, node)
                    elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        got.setdefault("self." + t.attr, node)
            self.__dict__["_stateful_values_memo"] = got
        return got

    # -- analysis ------------------------------------------------------------------------
    def _ensure(self) -> None:
        if self._done:
            return
        self._done = True
        for node in self.a.nodes(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._by_name.setdefault(node.name, []).append(node)
            else:
                self._classes.setdefault(node.name, node)
        # Every dataset comes from a constructor or a parameter annotated ``tf.data.Dataset``:
        # ``tensorflow.data...`` names need an import of ``tensorflow`` (spelled in the module)
        # and the others (``..._dataset_from_...``, ``tensorflow_datasets``) say "dataset".
        if not self._may_have_datasets():
            return
        self._collect_callers()
        module_env = _Env()
        self._block(self.a.tree.body, module_env)
        # Functions not yet reached are analyzed on their own, callers first, so that the
        # datasets their call sites pass in are known when their bodies are walked.
        while True:
            pending = [f for f in self._funcs.values() if f.state == 0]
            if not pending:
                break
            for f in pending:
                self._visit(f)
        # A function analyzed when it was first called (its returned datasets were needed) saw
        # only the call sites analyzed before it; call sites found later pass more. Analyze
        # such functions again with every call site's datasets, until nothing changes: the
        # facts are then the same whatever order the functions were reached in.
        for _ in range(_MAX_REANALYSIS_ROUNDS):
            stale = [f for f in self._funcs.values()
                     if f.state == 2 and f.hints != self._param_hints.get(f.node, {})]
            if not stale:
                break
            for f in sorted(stale, key=lambda f: (getattr(f.node, "lineno", 0), getattr(f.node, "col_offset", 0))):
                self._reanalyze(f)

    def _reanalyze(self, info: _FuncInfo) -> None:
        """Forget what the last analysis of ``info``'s function derived from its body (values,
        transformations, consumptions, its nested functions) and analyze it again."""
        inside = set(ast.walk(info.node))
        inside.discard(info.node)
        for n in inside:
            self._values.pop(n, None)
            self._transform_by_node.pop(n, None)
            nested = self._funcs.get(n)
            if nested is not None and nested.state == 2:
                nested.state = 0
        self._transformations = [t for t in self._transformations if t.node not in inside]
        self._consumptions = [c for c in self._consumptions if c.node not in inside]
        info.state = 0
        self._analyze_function(info)

    def _may_have_datasets(self) -> bool:
        """Whether the module can hold a dataset at all. Every dataset comes from a constructor
        or a parameter annotated ``tf.data.Dataset``, and each of their qualified names has a
        part that says "Dataset" (``tf.data.Dataset.range``, ``TFRecordDataset``), "dataset"
        (``image_dataset_from_directory``, ``make_csv_dataset``, ``tensorflow_datasets``) or
        "experimental" (``tf.data.experimental.Counter``); every part of a qualified name is
        spelled in the module, as an attribute or in an import."""
        a = self.a
        if not a.mentions("ataset", "experimental"):
            return False
        aliases = a.imports.aliases.values()
        if any("ataset" in v or (v.startswith("tensorflow") and "experimental" in v) for v in aliases):
            return True
        # "experimental" counts only under an import of TensorFlow (``tf.data.experimental``).
        words = ("ataset", "experimental") if any(v.startswith("tensorflow") for v in aliases) else ("ataset",)
        return any(w in n.attr for n in a.nodes(ast.Attribute) for w in words)

    def _visit(self, info: _FuncInfo) -> None:
        if info.state != 0 or info.node in self._visiting:
            return
        self._visiting.add(info.node)
        for caller in sorted(self._callers.get(info.node, ()), key=_position):
            c = self._funcs.get(caller)
            if c is not None and c.state == 0:
                self._visit(c)
        if info.state == 0:
            self._analyze_function(info)

    def _collect_callers(self) -> None:
        names = self._by_name
        for node in self.a.nodes(ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name not in names:
                continue
            if isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id in ("self", "cls")):
                continue
            caller = self.a.enclosing_function(node)
            for target in self.resolve_callable(f, node):
                self._callers.setdefault(target, set()).add(caller)

    def _methods_of(self, cls: ast.ClassDef) -> dict[str, ast.AST]:
        cached = self._class_methods.get(cls)
        if cached is not None:
            return cached
        out: dict[str, ast.AST] = {}
        by_name = self._classes
        todo, seen = [cls], set()
        while todo:
            c = todo.pop(0)
            if c.name in seen:
                continue
            seen.add(c.name)
            for stmt in c.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.setdefault(stmt.name, stmt)
            todo.extend(by_name[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in by_name)
        self._class_methods[cls] = out
        return out

    def _self_class(self, attr: ast.Attribute) -> ast.ClassDef | None:
        """The class whose instance ``self.x`` refers to, when ``attr`` is ``self.x`` in a method."""
        if not (isinstance(attr.value, ast.Name) and attr.value.id == "self"):
            return None
        func = self.a.enclosing_function(attr)
        parent = self.a.parent(func) if func is not None else None
        return parent if isinstance(parent, ast.ClassDef) else None

    def _register_function(self, node: ast.AST, env: _Env) -> None:
        info = self._funcs.get(node)
        if info is None:
            self._funcs[node] = _FuncInfo(node, env)
        elif info.state == 0:
            info.env = env  # its defining scope is being analyzed again

    def _analyze_function(self, info: _FuncInfo) -> list[Chain]:
        if info.state == 2:
            return info.returns
        if info.state == 1:  # recursion
            return []
        info.state = 1
        node = info.node
        info.hints = dict(self._param_hints.get(node, {}))
        env = _Env(parent=info.env)
        args = node.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is None:
                continue
            chains: tuple[Chain, ...] = self._param_hints.get(node, {}).get(arg.arg, ())
            ann = getattr(arg, "annotation", None)
            if ann is not None:
                q = self.a.qualname(ann) or ""
                if q in ("tensorflow.data.Dataset", "tensorflow.compat.v1.data.Dataset"):
                    chains = chains or (Chain(arg, "parameter"),)
            env.vars[arg.arg] = chains
        self._func_stack.append(info)
        try:
            if isinstance(node, ast.Lambda):
                info.returns = list(self._eval(node.body, env))
            else:
                self._block(node.body, env)
        finally:
            self._func_stack.pop()
        info.state = 2
        return info.returns

    # statements
    def _block(self, stmts: list[ast.stmt], env: _Env) -> None:
        for s in stmts:
            self._stmt(s, env)

    def _stmt(self, s: ast.stmt, env: _Env) -> None:
        if isinstance(s, ast.Assign):
            value = self._eval(s.value, env)
            for t in s.targets:
                self._bind(t, value, env, s.value)
        elif isinstance(s, ast.AnnAssign):
            value = self._eval(s.value, env) if s.value is not None else ()
            self._eval_children(s.annotation, env)
            if s.value is not None:
                self._bind(s.target, value, env, s.value)
        elif isinstance(s, ast.AugAssign):
            self._eval(s.value, env)
            self._eval(s.target, env)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self._for(s, env)
        elif isinstance(s, ast.While):
            self._eval(s.test, env)
            body = env.copy()
            self._block(s.body, body)
            orelse = env.copy()
            self._block(s.orelse, orelse)
            env.merge(env.copy(), body, orelse)
        elif isinstance(s, ast.If):
            self._eval(s.test, env)
            then, other = env.copy(), env.copy()
            self._block(s.body, then)
            self._block(s.orelse, other)
            env.merge(then, other)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self._eval(item.context_expr, env)
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, (), env, None)
            self._block(s.body, env)
        elif isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self._block(s.body, env)
            branches = [env.copy()]
            for h in s.handlers:
                if h.type is not None:
                    self._eval(h.type, env)
                b = env.copy()
                self._block(h.body, b)
                branches.append(b)
            other = env.copy()
            self._block(s.orelse, other)
            branches[0] = other
            env.merge(*branches)
            self._block(s.finalbody, env)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in s.decorator_list:
                self._eval(d, env)
            for d in (*s.args.defaults, *[d for d in s.args.kw_defaults if d is not None]):
                self._eval(d, env)
            self._register_function(s, env)
            env.vars[s.name] = ()
        elif isinstance(s, ast.ClassDef):
            for b in (*s.bases, *s.decorator_list):
                self._eval(b, env)
            self._block(s.body, _Env(parent=env))
            env.vars[s.name] = ()
        elif isinstance(s, ast.Return):
            if s.value is not None:
                value = self._eval(s.value, env)
                if self._func_stack:
                    ret = self._func_stack[-1].returns
                    for c in value:
                        if c not in ret:
                            ret.append(c)
        elif isinstance(s, ast.Expr):
            self._eval(s.value, env)
        elif hasattr(ast, "Match") and isinstance(s, ast.Match):
            self._eval(s.subject, env)
            branches = []
            for case in s.cases:
                b = env.copy()
                self._block(case.body, b)
                branches.append(b)
            if branches:
                env.merge(env.copy(), *branches)
        else:
            self._eval_children(s, env)

    def _for(self, s: ast.For | ast.AsyncFor, env: _Env) -> None:
        candidates = self._iterated(s.iter)
        self._eval(s.iter, env)
        for expr in candidates:
            chains = self._values.get(expr, ())
            if chains:
                self._consumptions.append(Consumption(s, "for", expr, chains))
        self._bind(s.target, (), env, None)
        body = env.copy()
        self._block(s.body, body)
        orelse = env.copy()
        self._block(s.orelse, orelse)
        env.merge(env.copy(), body, orelse)

    def _iterated(self, expr: ast.AST) -> list[ast.AST]:
        """The expressions a ``for`` loop over ``expr`` actually iterates: ``enumerate(ds)``,
        ``zip(a, b)``, ``iter(ds)``, ``tqdm(ds)``, ``ds.as_numpy_iterator()`` unwrap."""
        out = [expr]
        if isinstance(expr, ast.Call):
            f = expr.func
            name = f.id if isinstance(f, ast.Name) and self.a.qualname(f) is None else self.a.qualname(f)
            if name in _ITER_WRAPPERS:
                self._no_consume.add(expr)
                out = []
                for arg in expr.args:
                    out.extend(self._iterated(arg))
            elif isinstance(f, ast.Attribute) and f.attr in ("as_numpy_iterator", "__iter__"):
                self._no_consume.add(expr)
                out = [f.value]
        return out

    def _bind(self, target: ast.AST, value: tuple[Chain, ...], env: _Env, value_expr: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            env.vars[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            # ``train_ds, val_ds = image_dataset_from_directory(..., subset="both")``: every
            # element of a multi-dataset constructor is a dataset of the same origin.
            multi = value and all(c.kind == "prefetching" and not c.steps for c in value)
            for elt in target.elts:
                if isinstance(elt, ast.Starred):
                    elt = elt.value
                self._bind(elt, value if multi else (), env, None)
        elif isinstance(target, ast.Attribute):
            self._eval(target.value, env)
            key = dotted(target)
            if key is not None:
                env.vars[key] = value
            cls = self._self_class(target)
            if cls is not None and value:
                k = (cls, target.attr)
                self._class_attrs[k] = _union(self._class_attrs.get(k, ()), value)
        elif isinstance(target, ast.Subscript):
            self._eval(target.value, env)
            self._eval(target.slice, env)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, (), env, None)

    # expressions
    def _eval_children(self, node: ast.AST, env: _Env) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._eval(child, env)
            elif isinstance(child, (ast.keyword, ast.comprehension, ast.arguments, ast.withitem)):
                self._eval_children(child, env)
            elif isinstance(child, ast.stmt):
                self._stmt(child, env)

    def _eval(self, expr: ast.AST | None, env: _Env) -> tuple[Chain, ...]:
        if expr is None:
            return ()
        if expr in self._values:
            return self._values[expr]
        self._values[expr] = ()  # guards against cycles
        result = self._compute(expr, env)
        self._values[expr] = result
        return result

    def _compute(self, expr: ast.AST, env: _Env) -> tuple[Chain, ...]:
        if isinstance(expr, ast.Name):
            return env.lookup(expr.id) if isinstance(expr.ctx, ast.Load) else ()
        if isinstance(expr, ast.Attribute):
            self._eval(expr.value, env)
            key = dotted(expr)
            found = env.lookup(key) if key is not None else ()
            if not found:
                cls = self._self_class(expr)
                if cls is not None:
                    found = self._class_attrs.get((cls, expr.attr), ())
            return found
        if isinstance(expr, ast.Call):
            return self._call(expr, env)
        if isinstance(expr, ast.IfExp):
            self._eval(expr.test, env)
            return _union(self._eval(expr.body, env), self._eval(expr.orelse, env))
        if isinstance(expr, ast.NamedExpr):
            value = self._eval(expr.value, env)
            self._bind(expr.target, value, env, expr.value)
            return value
        if isinstance(expr, ast.Lambda):
            for d in (*expr.args.defaults, *[d for d in expr.args.kw_defaults if d is not None]):
                self._eval(d, env)
            self._register_function(expr, env)
            self._analyze_function(self._funcs[expr])
            return ()
        if isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = _Env(parent=env)
            for gen in expr.generators:
                self._eval(gen.iter, inner)
                self._bind(gen.target, (), inner, None)
                for cond in gen.ifs:
                    self._eval(cond, inner)
            for part in ("elt", "key", "value"):
                sub = getattr(expr, part, None)
                if sub is not None:
                    self._eval(sub, inner)
            return ()
        self._eval_children(expr, env)
        return ()

    def _call(self, call: ast.Call, env: _Env) -> tuple[Chain, ...]:
        func = call.func
        receiver: tuple[Chain, ...] = ()
        if isinstance(func, ast.Attribute):
            receiver = self._eval(func.value, env)
        else:
            self._eval(func, env)
        args = [self._eval(a, env) for a in call.args]
        kwargs = {k.arg: self._eval(k.value, env) for k in call.keywords}

        if isinstance(func, ast.Attribute):
            attr = func.attr
            if receiver and attr in DATASET_METHODS:
                t = Transformation(call, attr, receiver)
                self._transformations.append(t)
                self._transform_by_node[call] = t
                return tuple(c.extend(attr, call) for c in receiver)
            if attr in _DISTRIBUTE_METHODS and args and args[0]:
                return tuple(c.extend("distribute", call) for c in args[0])
            if attr in CONSUMING_MODEL_METHODS:
                self._model_consumption(call, attr)
                return ()

        q = self.a.call_name(call)
        if q:
            if q in _PREFETCHING_ROOTS:
                if q == "tensorflow_datasets.load" and not any(k.arg == "split" for k in call.keywords):
                    return ()
                return (Chain(call, "prefetching"),)
            if q.startswith(_ROOT_PREFIXES) or q in _ROOT_NAMES:
                return (Chain(call, "constructor"),)
        if isinstance(func, ast.Name) and func.id == "iter" and self.a.qualname(func) is None:
            if call.args and args[0] and call not in self._no_consume:
                self._consumptions.append(Consumption(call, "iter", call.args[0], args[0]))
            return ()
        # A function of this module that returns a dataset.
        targets = self.resolve_callable(func, call) if isinstance(func, (ast.Name, ast.Attribute)) else []
        out: tuple[Chain, ...] = ()
        for t in targets:
            self._record_hints(t, call, args, kwargs)
            if not self._returns_value(t):
                continue  # analyzed later, once every call site has passed its datasets
            info = self._funcs.get(t)
            if info is None:
                # Defined later in execution order than the call site is analyzed (a method, or a
                # function nested elsewhere): analyze it with its defining scope unknown.
                info = _FuncInfo(t, _Env())
                self._funcs[t] = info
            # Datasets built inside the callee are the same for every call site; of what it returns
            # of its arguments, this call gets what grew from the datasets it passed itself
            # (``train = prepare(raw)`` with ``def prepare(ds): return ds.map(f).batch(32)``).
            lo, hi = getattr(t, "lineno", 0), getattr(t, "end_lineno", 0) or 0
            passed = {c.root for chains in (*args, *kwargs.values()) for c in chains}
            own = tuple(c for c in self._analyze_function(info)
                        if lo <= getattr(c.root, "lineno", -1) <= hi or c.root in passed)
            out = _union(out, own)
        return out

    def _returns_value(self, func: ast.AST) -> bool:
        if isinstance(func, ast.Lambda):
            return True
        cached = self._returning.get(func)
        if cached is None:
            stack = list(func.body)
            cached = False
            while stack:
                n = stack.pop()
                if isinstance(n, ast.Return) and n.value is not None:
                    cached = True
                    break
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    continue
                stack.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.stmt))
            self._returning[func] = cached
        return cached

    def _record_hints(self, func: ast.AST, call: ast.Call, args: list, kwargs: dict) -> None:
        if not any(args) and not any(kwargs.values()):
            return
        params = [*func.args.posonlyargs, *func.args.args]
        if isinstance(call.func, ast.Attribute) and params and not isinstance(func, ast.Lambda):
            params = params[1:]  # self.method(...): the first parameter is self
        hints = self._param_hints.setdefault(func, {})
        for param, chains in zip(params, args):
            if any(isinstance(a, ast.Starred) for a in call.args):
                break
            if chains:
                hints[param.arg] = _union(hints.get(param.arg, ()), chains)
        for name, chains in kwargs.items():
            if name is not None and chains:
                hints[name] = _union(hints.get(name, ()), chains)

    def _model_consumption(self, call: ast.Call, attr: str) -> None:
        cands: list[tuple[ast.AST, str]] = []
        if call.args:
            cands.append((call.args[0], "x"))
        for k in call.keywords:
            if k.arg == "x":
                cands.append((k.value, "x"))
            elif k.arg == "validation_data" and attr == "fit":
                cands.append((k.value, "validation_data"))
        for expr, role in cands:
            chains = self._values.get(expr, ())
            if chains:
                self._consumptions.append(Consumption(call, attr, expr, chains, role))

    # -- fallback for nodes the flow walk did not reach ------------------------------------
    def _structural_is_dataset(self, expr: ast.AST, _depth: int = 0) -> bool:
        if _depth > 20:
            return False
        node = expr
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DATASET_METHODS:
            node = node.func.value
        if isinstance(node, ast.Call):
            q = self.a.call_name(node)
            return bool(q) and (q.startswith(_ROOT_PREFIXES) or q in _ROOT_NAMES or q in _PREFETCHING_ROOTS)
        if isinstance(node, ast.Name) and node in self._values:
            return bool(self._values[node])
        return False


def _iter_calls(func: ast.AST, flags: dict[str, bool] | None = None):
    """Calls in a function body, nested functions excluded (a lambda's body included); with
    ``flags`` (Python booleans of its parameters), only in the branches they take."""
    body = [func.body] if isinstance(func, ast.Lambda) else list(func.body)
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if flags and isinstance(node, ast.If):
            value = _flag_value(node.test, flags)
            if value is not None:
                stack.extend(reversed(node.body if value else node.orelse))
                continue
        if isinstance(node, ast.Call):
            yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _stateful_value_name(q: str) -> bool:
    """A constructor of an object that reads state (a variable, a lookup table, a Keras model);
    of ``keras.applications`` only the models (``ResNet50``), not the functions beside them
    (``preprocess_input``, ``decode_predictions``: stateless ops, checked on TensorFlow 2.21)."""
    if not q.startswith(_STATEFUL_VALUE_PREFIXES):
        return False
    return not q.startswith("keras.applications.") or q.rsplit(".", 1)[-1][:1].isupper()


SAMPLE_TAKE = 16


def small_take(call: ast.Call) -> bool:
    """``.take(n)`` of a literal ``n`` of at most ``SAMPLE_TAKE`` elements: a few elements to
    look at (plot one batch, print one) or a fixed sample replayed on purpose, not a stream."""
    n = call.args[0] if len(call.args) == 1 and not call.keywords else None
    return isinstance(n, ast.Constant) and type(n.value) is int and 0 <= n.value <= SAMPLE_TAKE


def _flag_value(test: ast.AST, flags: dict[str, bool]) -> bool | None:
    """The value of ``flag`` / ``not flag`` for a Python boolean parameter, else ``None``."""
    if isinstance(test, ast.Name) and test.id in flags:
        return flags[test.id]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _flag_value(test.operand, flags)
        return None if inner is None else not inner
    return None


def functions_run_by(facts: DatasetFacts, funcs: list[ast.AST], depth: int = 3,
                     flags: dict[str, bool] | None = None) -> list[ast.AST]:
    """``funcs`` and the functions of the module they call, transitively (``depth`` levels);
    ``flags``: the Python booleans of ``funcs``' parameters (calls in branches they do not take
    are not followed)."""
    out: list[ast.AST] = []
    frontier = list(funcs)
    for _ in range(depth + 1):
        nxt: list[ast.AST] = []
        for f in frontier:
            if f in out:
                continue
            out.append(f)
            for call in _iter_calls(f, flags if f in funcs else None):
                if isinstance(call.func, (ast.Name, ast.Attribute)):
                    for g in facts.resolve_callable(call.func, call) if not isinstance(call.func, ast.Lambda) else []:
                        if g not in out and not isinstance(g, ast.Lambda):
                            nxt.append(g)
        frontier = nxt
    return out


def calls_in(func: ast.AST, flags: dict[str, bool] | None = None):
    """Public alias of the body walk used by rules."""
    return _iter_calls(func, flags)
