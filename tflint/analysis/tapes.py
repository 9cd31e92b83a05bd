"""``GradientTape`` blocks and the dataflow through them.

Facts computed once per module:

- every tape: ``with tf.GradientTape(...) as tape:`` in any spelling, several context managers
  in one ``with``, ``tape = tf.GradientTape(); with tape:`` (all blocks entering the same name
  form one tape), ``persistent=`` / ``watch_accessed_variables=`` when literal;
- the calls on each tape: ``tape.watch(x)`` and the consuming calls
  ``tape.gradient/jacobian/batch_jacobian(target, sources)``;
- a flow for each consuming call (:class:`GradientFlow`): an abstract interpretation of the
  function that holds the tape, statement by statement, tracking for every local name

  * ``deps``  — what the tape recorded the value from: ``("n", name)`` tokens for variables,
    watched tensors, objects whose variables were read (``model(x)``, ``self.w`` → ``model``,
    ``self``) and recorded intermediates, plus ``("unknown",)`` after calls the analysis cannot
    see into. Operations run outside the tape block record nothing, so their result has no deps.
  * ``cuts``  — operations inside the block that dropped recorded deps (``.numpy()``, numpy
    calls, ``tf.argmax/argmin/round/sign``, integer/bool casts, ``tf.stop_gradient``,
    ``tf.numpy_function``, ``float()``/``int()``), each with the deps it dropped.
  * ``kind``  — variable (``tf.Variable``, ``add_weight``, ``*.trainable_variables``), tensor
    (TensorFlow op results, constants, converted arrays, model outputs), object (a constructed
    model or layer), or unknown (parameters, calls of unknown functions).
  * where it was defined (inside or outside the block) and which forward-pass results computed
    outside the block it was built from.

It also answers questions about variables and optimizers that gradient rules share:
which model reads of ``trainable_variables`` happen before the model has variables, what
``grads`` passed to ``apply_gradients`` were computed for, and persistent tapes kept alive.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from tflint.analysis.astutil import flatten_targets, walk_own

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis

GRADIENT_TAPE = frozenset(
    {
        "tensorflow.GradientTape",
        "tensorflow.autodiff.GradientTape",
        "tensorflow.compat.v1.GradientTape",
        "tensorflow.python.eager.backprop.GradientTape",
    }
)
CONSUMING = ("gradient", "jacobian", "batch_jacobian")
VARIABLE_CTORS = frozenset(
    {
        "tensorflow.Variable",
        "tensorflow.compat.v1.Variable",
        "tensorflow.compat.v1.get_variable",
        "keras.Variable",
        "keras.backend.Variable",
        "keras.variables.Variable",
    }
)
VARIABLE_METHODS = frozenset({"add_weight", "add_variable", "get_variable"})
VARIABLE_ATTRS = frozenset(
    {
        "trainable_variables",
        "trainable_weights",
        "variables",
        "weights",
        "kernel",
        "bias",
        "embeddings",
        "gamma",
        "beta",
        "recurrent_kernel",
    }
)
LIST_ATTRS = frozenset(
    {"trainable_variables", "trainable_weights", "variables", "weights", "non_trainable_variables",
     "non_trainable_weights"}
)
TRAINABLE_ATTRS = frozenset({"trainable_variables", "trainable_weights"})
_CUT_LAST = frozenset({"argmax", "argmin", "round", "sign", "stop_gradient", "numpy_function"})
_CUT_PREFIXES = ("tensorflow.", "tensorflow.math.", "keras.ops.", "keras.backend.",
                 "tensorflow.experimental.", "tensorflow.compat.v1.", "keras.ops.numpy.")
_CAST = frozenset({"tensorflow.cast", "tensorflow.dtypes.cast", "keras.ops.cast",
                   "tensorflow.saturate_cast", "keras.backend.cast"})
_INT_DTYPES = frozenset(
    {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "qint8",
     "qint32", "quint8"}
)
_PURE_PREFIXES = ("tensorflow.", "keras.ops.", "keras.losses.", "keras.activations.",
                  "keras.backend.", "keras.metrics.", "math.", "operator.", "tensorflow_probability.")
_NON_OP_TF = ("tensorflow.data.", "tensorflow.summary.", "tensorflow.config.", "tensorflow.io.",
              "tensorflow.saved_model.", "tensorflow.distribute.", "tensorflow.train.",
              "tensorflow.debugging.", "tensorflow.print")
_CONTAINER_PREFIXES = ("tensorflow.nest.", "keras.tree.", "tree.", "tensorflow.python.util.nest.")
_CONVERSIONS = frozenset({"float", "int", "bool", "complex", "round"})
_PY_METHODS_CUT = frozenset({"numpy", "item", "tolist", "__array__"})
_STATIC_ATTRS = frozenset({"shape", "dtype", "ndim", "name", "device", "op", "graph"})
_BUILTINS = frozenset(dir(builtins))
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
UNKNOWN = ("unknown",)


def pos(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def attr_root(expr: ast.AST) -> ast.AST:
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr


def _kw(call: ast.Call, name: str, index: int) -> ast.AST | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    if len(call.args) > index and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    return None


def _literal_bool(node: ast.AST | None, default: bool) -> bool | None:
    if node is None:
        return default
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    return None


# ---------------------------------------------------------------------------------------------
# Tapes and gradient calls


@dataclass(eq=False)
class Tape:
    """One gradient tape: the ``GradientTape(...)`` call and the ``with`` blocks that enter it."""

    call: ast.Call | None
    scope: ast.AST  # the function (or module) holding the tape
    name: str | None  # local name bound to the tape
    binding: ast.AST | None  # ``as`` target or assignment target
    withs: list[ast.With | ast.AsyncWith] = field(default_factory=list)
    items: list[ast.withitem] = field(default_factory=list)
    persistent: bool | None = False
    watch_accessed_variables: bool | None = True
    watches: list[ast.Call] = field(default_factory=list)
    calls: list[ast.Call] = field(default_factory=list)  # gradient / jacobian / batch_jacobian

    @property
    def line(self) -> int:
        if self.withs:
            return self.withs[0].lineno
        return getattr(self.call, "lineno", 0)

    @property
    def end_line(self) -> int:
        return max((w.end_lineno or w.lineno) for w in self.withs) if self.withs else self.line

    @property
    def label(self) -> str:
        return self.name or (ast.unparse(self.binding) if self.binding is not None else "the tape")


@dataclass(frozen=True)
class Val:
    """Abstract value of an expression (see the module docstring)."""

    deps: frozenset = frozenset()
    cuts: frozenset = frozenset()  # (op node, frozenset of deps it dropped)
    kind: str = "unknown"  # variable | tensor | array | python | object | class | function | module | builtin | unknown
    origin: str | None = None  # short description: "`tf.constant(...)`", "a parameter"
    defs: frozenset = frozenset()  # (line, inside the tape block)
    fwd: frozenset = frozenset()  # (name, line): results computed outside the block used inside
    elts: tuple | None = None  # names, for a list/tuple literal of names
    roots: frozenset = frozenset()  # objects an attribute alias reads from (`v = model.trainable_variables`)
    op: str | None = None  # "call" / "op": the value was computed by an operation
    qual: str | None = None  # qualified name of the call that produced it ("keras.losses.MSE()")
    trainable: bool = True  # False: a variable created with ``trainable=False`` (tapes do not watch it)


NONE_VAL = Val(kind="python")


def join(a: Val, b: Val) -> Val:
    if a is b:
        return a
    return Val(
        deps=a.deps | b.deps,
        cuts=a.cuts | b.cuts,
        kind=a.kind if a.kind == b.kind else "unknown",
        origin=a.origin if a.origin == b.origin else (a.origin or b.origin),
        defs=a.defs | b.defs,
        fwd=a.fwd | b.fwd,
        elts=a.elts if a.elts == b.elts else None,
        roots=a.roots | b.roots,
        op=a.op if a.op == b.op else (a.op or b.op),
        qual=a.qual if a.qual == b.qual else None,
        trainable=a.trainable or b.trainable,
    )


@dataclass
class SourceFact:
    expr: ast.AST
    name: str | None
    val: Val
    watched: bool


@dataclass
class GradientFlow:
    """What one ``tape.gradient(target, sources)`` call computes from."""

    call: ast.Call
    tape: Tape
    method: str
    target: ast.AST | None
    sources: ast.AST | None
    inside: bool  # the call itself is inside the tape block
    target_val: Val
    source_tokens: frozenset | None  # None: the sources could be anything
    source_facts: list[SourceFact]

    def reaches(self, token) -> bool:
        deps = self.target_val.deps
        return token in deps or UNKNOWN in deps

    @property
    def connected(self) -> bool:
        deps = self.target_val.deps
        if not deps:
            return False
        if self.source_tokens is None or UNKNOWN in deps:
            return True
        return bool(deps & self.source_tokens)

    @property
    def missing_tokens(self) -> frozenset:
        """Source tokens the target does not depend on (nothing when unknown)."""
        if self.source_tokens is None or UNKNOWN in self.target_val.deps:
            return frozenset()
        return frozenset(t for t in self.source_tokens if t not in self.target_val.deps)

    def cutting_ops(self) -> list[ast.AST]:
        """Operations inside the tape that cut the path from a requested source to the target."""
        out: list[ast.AST] = []
        if self.source_tokens is None:
            if self.target_val.deps:
                return []
            out = [node for node, removed in self.target_val.cuts if removed]
        else:
            missing = self.missing_tokens
            if not missing:
                return []
            for node, removed in self.target_val.cuts:
                if removed & missing or (UNKNOWN in removed and not self.connected):
                    out.append(node)
        return sorted(set(out), key=pos)


# ---------------------------------------------------------------------------------------------
# The abstract interpreter


class _Interp:
    """Runs over one function (or module) body for one tape (or none)."""

    def __init__(self, facts: TapeFacts, scope: ast.AST, tape: Tape | None) -> None:
        self.facts = facts
        self.a = facts.a
        self.scope = scope
        self.tape = tape
        self.items = set(tape.items) if tape else set()
        self.calls = set(tape.calls) if tape else set()
        self.inside = False
        self.env: dict[str, Val] = {}
        self.watched: set[str] = set()
        self.flows: dict[ast.Call, GradientFlow] = {}
        self.params: set[str] = set()
        if isinstance(scope, _FUNCS):
            args = scope.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                if arg is not None:
                    self.params.add(arg.arg)
        self.auto_watch = tape is None or tape.watch_accessed_variables is not False

    # -- driving -------------------------------------------------------------------------
    def run(self) -> _Interp:
        body = getattr(self.scope, "body", [])
        if isinstance(body, list):
            self.block(body)
        return self

    def snapshot(self):
        return dict(self.env), set(self.watched)

    def restore(self, snap) -> None:
        self.env, self.watched = dict(snap[0]), set(snap[1])

    def merge(self, snaps) -> None:
        env: dict[str, Val] = {}
        watched: set[str] = set()
        for e, w in snaps:
            watched |= w
            for k, v in e.items():
                env[k] = join(env[k], v) if k in env else v
        self.env, self.watched = env, watched

    def block(self, stmts) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ast.AST) -> None:
        handler = getattr(self, "s_" + type(s).__name__, None)
        if handler is not None:
            handler(s)
            return
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self.expr(child)

    # -- statements ----------------------------------------------------------------------
    def s_Assign(self, s: ast.Assign) -> None:
        v = self.expr(s.value)
        for t in s.targets:
            self.bind(t, v, s, s.value)

    def s_AnnAssign(self, s: ast.AnnAssign) -> None:
        if s.value is not None:
            self.bind(s.target, self.expr(s.value), s, s.value)

    def s_AugAssign(self, s: ast.AugAssign) -> None:
        rhs = self.expr(s.value)
        if isinstance(s.target, ast.Name):
            cur = self.read_name(s.target.id)
            self.bind(s.target, self.op([cur, rhs], "op"), s, None)
        elif isinstance(s.target, ast.Subscript):
            self.bind(s.target, rhs, s, None)
        else:
            self.expr(s.target.value) if isinstance(s.target, ast.Attribute) else None

    def s_Expr(self, s: ast.Expr) -> None:
        self.expr(s.value)

    def s_Return(self, s: ast.Return) -> None:
        if s.value is not None:
            self.expr(s.value)

    def s_Delete(self, s: ast.Delete) -> None:
        for t in s.targets:
            if isinstance(t, ast.Name):
                self.env.pop(t.id, None)
                self.watched.discard(t.id)

    def s_FunctionDef(self, s) -> None:
        self.env[s.name] = Val(kind="function", origin=f"function `{s.name}`")

    s_AsyncFunctionDef = s_FunctionDef

    def s_ClassDef(self, s: ast.ClassDef) -> None:
        self.env[s.name] = Val(kind="class", origin=f"class `{s.name}`")

    def s_Import(self, s) -> None:
        for a in s.names:
            self.env.pop((a.asname or a.name).split(".")[0], None)

    s_ImportFrom = s_Import

    def s_If(self, s: ast.If) -> None:
        self.expr(s.test)
        before = self.snapshot()
        self.block(s.body)
        after_body = self.snapshot()
        self.restore(before)
        self.block(s.orelse)
        self.merge([after_body, self.snapshot()])

    def _loop(self, s, bind_target) -> None:
        before = self.snapshot()
        bind_target()
        self.block(s.body)
        self.merge([before, self.snapshot()])
        bind_target()
        self.block(s.body)
        self.merge([before, self.snapshot()])
        self.block(s.orelse)

    def s_For(self, s: ast.For) -> None:
        it = self.expr(s.iter)
        elem = replace(it, elts=None, defs=frozenset(), op=None)
        if it.kind in ("variable",):
            elem = replace(elem, kind="variable")
        self._loop(s, lambda: self.bind(s.target, elem, s, None))

    s_AsyncFor = s_For

    def s_While(self, s: ast.While) -> None:
        self.expr(s.test)
        self._loop(s, lambda: self.expr(s.test))

    def s_Try(self, s) -> None:
        before = self.snapshot()
        self.block(s.body)
        after = self.snapshot()
        outs = []
        for h in s.handlers:
            self.merge([before, after])
            if h.name:
                self.env[h.name] = Val(kind="python")
            self.block(h.body)
            outs.append(self.snapshot())
        self.restore(after)
        self.block(s.orelse)
        outs.append(self.snapshot())
        self.merge(outs)
        self.block(s.finalbody)

    s_TryStar = s_Try

    def s_Match(self, s) -> None:
        self.expr(s.subject)
        before = self.snapshot()
        outs = [before]
        for case in s.cases:
            self.restore(before)
            self.block(case.body)
            outs.append(self.snapshot())
        self.merge(outs)

    def s_With(self, s) -> None:
        enters = False
        for item in s.items:
            v = self.expr(item.context_expr)
            if item in self.items:
                enters = True
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, Val(kind="object", origin="a GradientTape"), s, None)
            elif item.optional_vars is not None:
                self.bind(item.optional_vars, v, s, None)
        if enters:
            prev = self.inside
            self.inside = True
            self.block(s.body)
            self.inside = prev
        else:
            self.block(s.body)

    s_AsyncWith = s_With

    # -- binding -------------------------------------------------------------------------
    def bind(self, target: ast.AST, v: Val, stmt: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            deps = v.deps
            if self.inside and deps:
                deps = deps | {("n", target.id)}
            roots = v.roots
            if value is not None:
                r = self.facts.attribute_roots(value)
                if r:
                    roots = roots | r
            self.env[target.id] = replace(
                v, deps=deps, defs=frozenset({(stmt.lineno, self.inside)}), roots=roots
            )
            self.watched.discard(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if (
                isinstance(value, (ast.Tuple, ast.List))
                and len(value.elts) == len(target.elts)
                and not any(isinstance(e, ast.Starred) for e in (*value.elts, *target.elts))
            ):
                for t, e in zip(target.elts, value.elts):
                    self.bind(t, self.expr(e), stmt, e)
            else:
                part = replace(v, elts=None, roots=frozenset())
                for t in target.elts:
                    self.bind(t, part, stmt, None)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, v, stmt, None)
        elif isinstance(target, ast.Subscript):
            base = attr_root(target)
            self.expr(target.slice)
            if isinstance(base, ast.Name) and base.id in self.env:
                cur = self.env[base.id]
                self.env[base.id] = replace(join(cur, v), defs=cur.defs, elts=None)
        elif isinstance(target, ast.Attribute):
            self.expr(target.value)

    # -- expressions ---------------------------------------------------------------------
    def default(self, name: str) -> Val:
        if name in self.params:
            if name in ("self", "cls"):
                return Val(kind="object", origin="`self`")
            return Val(kind="unknown", origin="a parameter")
        if name in self.a.imports.aliases:
            return Val(kind="module")
        if not isinstance(self.scope, ast.Module):
            mv = self.facts.module_env.get(name)
            if mv is not None:
                origin = mv.origin
                if origin and mv.defs and " line " not in origin:
                    origin = f"{origin} on line {min(line for line, _ in mv.defs)}"
                return replace(
                    mv, deps=frozenset(), cuts=frozenset(), fwd=frozenset(), defs=frozenset(), origin=origin
                )
        if name in _BUILTINS:
            return Val(kind="builtin")
        return Val(kind="unknown")

    def read_name(self, name: str) -> Val:
        v = self.env.get(name)
        if v is None:
            v = self.default(name)
        if not self.inside:
            return v
        deps, fwd = v.deps, v.fwd
        if name in self.watched or (self.auto_watch and v.kind in ("variable", "unknown") and v.trainable):
            deps = deps | {("n", name)}
        if (
            v.op == "model"
            and v.defs
            and not any(inside for _, inside in v.defs)
            and not v.deps
            and v.kind in ("tensor", "unknown")
        ):
            fwd = fwd | {(name, min(line for line, _ in v.defs))}
        if deps is v.deps and fwd is v.fwd:
            return v
        return replace(v, deps=deps, fwd=fwd)

    @staticmethod
    def _merge(vals) -> tuple[frozenset, frozenset, frozenset, set]:
        """Union of the values' dependencies, cuts and forward-pass links, and their kinds."""
        deps: frozenset = frozenset()
        cuts: frozenset = frozenset()
        fwd: frozenset = frozenset()
        kinds = set()
        for v in vals:
            deps |= v.deps
            cuts |= v.cuts
            fwd |= v.fwd
            kinds.add(v.kind)
        return deps, cuts, fwd, kinds

    def op(self, vals, kind_hint: str = "op", kind: str | None = None, **extra) -> Val:
        vals = list(vals)
        deps, cuts, fwd, kinds = self._merge(vals)
        if kind is None:
            if kinds & {"tensor", "variable", "array"}:
                kind = "tensor"
            elif kinds <= {"python", "builtin", "module"}:
                kind = "python"
            else:
                kind = "unknown"
        if kind_hint != "model" and any(v.op == "model" or v.kind == "variable" for v in vals):
            kind_hint = "model"
        if not self.inside:
            deps, cuts = frozenset(), frozenset()
        return Val(deps=deps, cuts=cuts, fwd=fwd, kind=kind, op=kind_hint, **extra)

    def passthrough(self, vals, kind: str | None = None) -> Val:
        deps, cuts, fwd, kinds = self._merge(vals)
        if kind is None:
            kind = kinds.pop() if len(kinds) == 1 else "unknown"
        return Val(deps=deps, cuts=cuts, fwd=fwd, kind=kind)

    def cut(self, node: ast.AST, vals, kind: str = "tensor", origin: str | None = None) -> Val:
        base = self.op(vals, "call", kind=kind, origin=origin)
        if not self.inside or not base.deps:
            return base
        return replace(base, deps=frozenset(), cuts=base.cuts | {(node, base.deps)})

    def expr(self, node: ast.AST | None) -> Val:
        if node is None:
            return NONE_VAL
        if isinstance(node, ast.Name):
            return self.read_name(node.id)
        if isinstance(node, ast.Constant):
            return NONE_VAL
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp):
            left, right = self.expr(node.left), self.expr(node.right)
            if isinstance(node.op, ast.Add) and (
                (self.listish(node.left, left) and self.listish(node.right, right))
                or self.variable_list(node.left, left)
                or self.variable_list(node.right, right)
            ):
                # list concatenation (`a.trainable_variables + b.trainable_variables`)
                kind = "variable" if "variable" in (left.kind, right.kind) else "container"
                return replace(self.passthrough([left, right], kind=kind), roots=left.roots | right.roots)
            return self.op([left, right], "op", origin="an expression")
        if isinstance(node, ast.UnaryOp):
            v = self.expr(node.operand)
            if isinstance(node.op, ast.Not):
                return self.op([v], "op", kind="python")
            return self.op([v], "op")
        if isinstance(node, ast.Compare):
            return self.op([self.expr(node.left), *map(self.expr, node.comparators)], "op")
        if isinstance(node, ast.BoolOp):
            return self.passthrough([self.expr(v) for v in node.values])
        if isinstance(node, ast.IfExp):
            self.expr(node.test)
            return self.passthrough([self.expr(node.body), self.expr(node.orelse)])
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Subscript):
            v = self.expr(node.value)
            self.expr(node.slice)
            kind = v.kind if v.kind in ("tensor", "array", "variable") else "unknown"
            return replace(v, kind=kind, elts=None, roots=frozenset(), op=v.op)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            vals = [self.expr(e) for e in node.elts]
            names = tuple(e.id for e in node.elts if isinstance(e, ast.Name))
            kinds = {v.kind for v in vals}
            kind = "variable" if vals and kinds == {"variable"} else "container"
            v = self.passthrough(vals, kind=kind)
            if names and len(names) == len(node.elts):
                v = replace(v, elts=names)
            return v
        if isinstance(node, ast.Dict):
            vals = [self.expr(k) for k in node.keys if k is not None] + [self.expr(x) for x in node.values]
            return self.passthrough(vals, kind="container")
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(node)
        if isinstance(node, ast.Starred):
            return self.expr(node.value)
        if isinstance(node, ast.NamedExpr):
            v = self.expr(node.value)
            self.bind(node.target, v, node, node.value)
            return v
        if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom)):
            return self.expr(node.value) if node.value is not None else NONE_VAL
        if isinstance(node, ast.Lambda):
            return Val(kind="function")
        if isinstance(node, ast.JoinedStr):
            for v in node.values:
                self.expr(v)
            return NONE_VAL
        if isinstance(node, ast.FormattedValue):
            self.expr(node.value)
            return NONE_VAL
        if isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                self.expr(part)
            return NONE_VAL
        return Val()

    @staticmethod
    def variable_list(node: ast.AST, v: Val) -> bool:
        """Certainly a Python list of variables (`m.trainable_variables`, an alias of one)."""
        if isinstance(node, ast.Attribute):
            return node.attr in LIST_ATTRS
        return isinstance(node, ast.Name) and bool(v.roots)

    def listish(self, node: ast.AST, v: Val) -> bool:
        if isinstance(node, ast.IfExp):
            return self.listish(node.body, v) or self.listish(node.orelse, v)
        if isinstance(node, (ast.List, ast.Tuple, ast.ListComp)):
            return True
        if isinstance(node, ast.Attribute):
            return node.attr in LIST_ATTRS
        if isinstance(node, ast.Name):
            return bool(v.roots or v.elts) or v.kind == "container"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return v.kind in ("variable", "container")
        return False

    def comprehension(self, node) -> Val:
        saved = dict(self.env)
        for gen in node.generators:
            it = self.expr(gen.iter)
            elem = replace(it, elts=None, defs=frozenset(), op=None)
            self.bind(gen.target, elem, node, None)
            for cond in gen.ifs:
                self.expr(cond)
        if isinstance(node, ast.DictComp):
            v = self.passthrough([self.expr(node.key), self.expr(node.value)], kind="container")
        else:
            inner = self.expr(node.elt)
            v = replace(inner, kind="variable" if inner.kind == "variable" else "container",
                        elts=None, roots=frozenset())
        self.env = saved  # comprehension variables do not leak
        return v

    def attribute(self, node: ast.Attribute) -> Val:
        root = attr_root(node)
        if isinstance(root, ast.Name) and root.id not in self.env and root.id not in self.params:
            if self.a.imports.aliases.get(root.id) is not None:
                qual = self.a.qualname(node)
                if qual is not None:
                    return Val(kind="python", qual=qual)
        if node.attr in _STATIC_ATTRS:
            self.expr(node.value)
            return Val(kind="python")
        recv = self.expr(node.value)
        if recv.kind in ("tensor", "array"):
            return replace(recv, elts=None, roots=frozenset())
        deps = recv.deps
        if self.inside and isinstance(root, ast.Name) and (self.auto_watch or root.id in self.watched):
            deps = deps | {("n", root.id)}
        kind = "variable" if node.attr in VARIABLE_ATTRS else "unknown"
        return Val(deps=deps, cuts=recv.cuts, fwd=recv.fwd, kind=kind, origin=f"`{ast.unparse(node)}`")

    # -- calls ---------------------------------------------------------------------------
    def call(self, node: ast.Call) -> Val:
        f = node.func
        tape = self.tape
        if (
            tape is not None
            and isinstance(f, ast.Attribute)
            and f.attr == "watch"
            and isinstance(f.value, ast.Name)
            and f.value.id == tape.name
        ):
            for arg in node.args:
                self.expr(arg)
                self.watched |= self.facts_watch_names(arg)
            return NONE_VAL
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        allargs = [*args, *kwargs.values()]
        origin = f"`{_short(f)}(...)`"
        if node in self.calls:
            self.record_flow(node, args, kwargs)
            return self.op(allargs, "call", kind="tensor", origin=origin)

        if isinstance(f, ast.Attribute):
            root = attr_root(f)
            is_module = (
                isinstance(root, ast.Name)
                and root.id not in self.env
                and root.id not in self.params
                and self.a.imports.aliases.get(root.id) is not None
            )
            # A chain through a subscript (`plt.rcParams['k'].by_key()`) has no qualified
            # name: whatever the module root, the callee is a method of some object.
            qn = self.a.qualname(f) if is_module else None
            if qn is None:
                return self.method_call(node, f, allargs, origin)
            return self.known_call(node, qn, args, kwargs, allargs, origin)
        if isinstance(f, ast.Name):
            v = self.env.get(f.id)
            if v is None and f.id not in self.params and not isinstance(self.scope, ast.Module):
                mv = self.facts.module_env.get(f.id)
                if mv is not None and mv.kind in ("object", "class", "function") and not (
                    mv.qual and _is_loss_instance(mv.qual)
                ):
                    v = self.default(f.id)
            if v is None and f.id not in self.params:
                qn = self.a.imports.aliases.get(f.id)
                if qn is None:
                    qn = self.a.qualname(f)
                if qn is not None:
                    return self.known_call(node, qn, args, kwargs, allargs, origin)
                if f.id in _BUILTINS and (
                    isinstance(self.scope, ast.Module) or f.id not in self.facts.module_env
                ):
                    return self.builtin_call(node, f.id, allargs)
            if v is None:
                v = self.default(f.id)
            return self.value_call(node, f.id, v, allargs, origin)
        callee = self.expr(f)
        if callee.qual and _is_loss_instance(callee.qual):
            return self.op(allargs, "call", kind="tensor", origin=origin)
        return self.op([*allargs, replace(callee, deps=callee.deps | {UNKNOWN})], "model",
                       kind="unknown", origin=origin)

    def value_call(self, node, name: str, v: Val, allargs, origin) -> Val:
        if v.qual and _is_loss_instance(v.qual):
            return self.op(allargs, "call", kind="tensor", origin=origin)
        if v.kind == "class":
            return Val(kind="object", origin=origin, op="call")
        if v.kind == "object":
            extra = Val(deps=frozenset({("n", name)}) | v.deps if self.inside else frozenset())
            return self.op([*allargs, extra], "model", kind="tensor", origin=origin)
        if v.kind in ("tensor", "variable", "array"):
            return self.op([*allargs, v], "call", kind="tensor", origin=origin)
        extra = Val(deps=frozenset({UNKNOWN, ("n", name)}) | v.deps)
        return self.op([*allargs, extra], "model", kind="unknown", origin=origin)

    def method_call(self, node: ast.Call, f: ast.Attribute, allargs, origin) -> Val:
        m = f.attr
        recv = self.expr(f.value)
        root = attr_root(f)
        rname = root.id if isinstance(root, ast.Name) else None
        if m in _PY_METHODS_CUT:
            return self.cut(node, [recv, *allargs], kind="array", origin=origin)
        if m in CONSUMING:
            return self.op([*allargs], "call", kind="tensor", origin=origin)
        if m in VARIABLE_METHODS:
            return Val(kind="variable", origin=origin, op="call")
        if m in ("watch", "reset", "stop_recording", "watched_variables"):
            return Val(kind="unknown")
        if m == "astype" and recv.kind in ("tensor", "array") and node.args and _is_int_dtype(node.args[0], self.a):
            return self.cut(node, [recv, *allargs], kind="array", origin=origin)
        if recv.kind in ("tensor", "array", "variable"):
            return self.op([recv, *allargs], "call", kind="tensor", origin=origin)
        if recv.qual and _is_loss_instance(recv.qual):
            return self.op(allargs, "call", kind="tensor", origin=origin)
        if m == "append" or m == "extend" or m == "insert":
            if rname and rname in self.env and isinstance(f.value, ast.Name):
                cur = self.env[rname]
                self.env[rname] = replace(join(cur, self.passthrough(allargs)), defs=cur.defs, elts=None)
            return NONE_VAL
        deps = recv.deps
        if self.inside and rname is not None:
            deps = deps | {("n", rname)}
        extra = Val(deps=deps, cuts=recv.cuts, fwd=recv.fwd)
        # a method of an object may return anything (tensors, variables, lists of them)
        return self.op([*allargs, extra], "model", kind="unknown", origin=origin)

    def builtin_call(self, node: ast.Call, name: str, allargs) -> Val:
        if name in _CONVERSIONS and allargs and any(v.kind in ("tensor", "array", "variable", "unknown") for v in allargs):
            return self.cut(node, allargs, kind="python", origin=f"`{name}(...)`")
        if name in ("len", "isinstance", "hasattr", "type", "id", "print", "range", "callable", "str", "repr"):
            return Val(kind="python")
        return self.passthrough(allargs)

    def known_call(self, node: ast.Call, qn: str, args, kwargs, allargs, origin) -> Val:
        last = qn.rsplit(".", 1)[-1]
        if qn in VARIABLE_CTORS:
            trainable = _kw(node, "trainable", 1) if qn.rsplit(".", 1)[-1] == "Variable" else None
            if isinstance(trainable, ast.Constant) and trainable.value is False:
                return Val(kind="variable", origin=f"`{_short(node.func)}(..., trainable=False)`", op="call",
                           qual=qn + "()", trainable=False)
            return Val(kind="variable", origin=origin, op="call", qual=qn + "()")
        if qn in GRADIENT_TAPE:
            return Val(kind="object", origin="a GradientTape", op="call", qual=qn + "()")
        if qn.startswith("numpy."):
            if last[:1].isupper() or qn.startswith("numpy.random."):
                return self.op(allargs, "call", kind="array", origin=origin, qual=qn + "()")
            return self.cut(node, allargs, kind="array", origin=origin)
        if last in _CUT_LAST and any(qn == p + last for p in _CUT_PREFIXES):
            return self.cut(node, allargs, kind="tensor", origin=origin)
        if qn in _CAST:
            dtype = _kw(node, "dtype", 1)
            if dtype is not None and _is_int_dtype(dtype, self.a):
                return self.cut(node, allargs, kind="tensor", origin=origin)
            return self.op(allargs, "call", kind="tensor", origin=origin)
        if qn.endswith("()"):  # calling an instance (loss object, metric, layer, model)
            if _is_loss_instance(qn):
                return self.op(allargs, "call", kind="tensor", origin=origin)
            extra = frozenset({UNKNOWN})
            if isinstance(node.func, ast.Name):
                extra |= {("n", node.func.id)}
            return self.op([*allargs, Val(deps=extra)], "model", kind="unknown", origin=origin)
        if qn.startswith(_CONTAINER_PREFIXES):
            return self.passthrough(allargs)
        if last[:1].isupper():
            return Val(kind="object", origin=origin, op="call", qual=qn + "()")
        if qn.startswith(_NON_OP_TF):
            return self.op(allargs, "call", kind="unknown", origin=origin)
        if qn.startswith(_PURE_PREFIXES):
            return self.op(allargs, "call", kind="tensor", origin=origin, qual=qn + "()")
        return self.op([*allargs, Val(deps=frozenset({UNKNOWN}))], "model", kind="unknown", origin=origin)

    def facts_watch_names(self, arg: ast.AST) -> set[str]:
        out: set[str] = set()
        if isinstance(arg, ast.Name):
            out.add(arg.id)
            v = self.env.get(arg.id)
            if v is not None and v.elts:
                out.update(v.elts)
        elif isinstance(arg, (ast.List, ast.Tuple)):
            for e in arg.elts:
                out |= self.facts_watch_names(e)
        elif isinstance(arg, ast.Starred):
            out |= self.facts_watch_names(arg.value)
        else:
            out.add("expr:" + ast.unparse(arg))
            root = attr_root(arg)
            if isinstance(root, ast.Name):
                out.add("root:" + root.id)
        return out

    # -- gradient calls ------------------------------------------------------------------
    def record_flow(self, node: ast.Call, args, kwargs) -> None:
        tape = self.tape
        assert tape is not None
        method = node.func.attr  # type: ignore[attr-defined]
        target = _kw(node, "target", 0)
        sources = _kw(node, "sources", 1)
        tv = args[0] if node.args else kwargs.get("target", NONE_VAL)
        tokens: frozenset | None = frozenset()
        facts: list[SourceFact] = []
        if sources is None:
            tokens = None
        else:
            tokens = self.source_tokens(sources)
            for e in list(flatten_targets(sources)):
                name = e.id if isinstance(e, ast.Name) else None
                v = self.read_quiet(e)
                watched = name is not None and name in self.watched
                if not watched and not isinstance(e, ast.Name):
                    watched = ("expr:" + ast.unparse(e)) in self.watched
                facts.append(SourceFact(e, name, v, watched))
        inside = self.facts.encloses(tape, node)
        self.flows[node] = GradientFlow(
            call=node,
            tape=tape,
            method=method,
            target=target,
            sources=sources,
            inside=inside,
            target_val=tv,
            source_tokens=tokens,
            source_facts=facts,
        )

    def read_quiet(self, e: ast.AST) -> Val:
        prev = self.inside
        self.inside = False
        try:
            if isinstance(e, ast.Name):
                return self.env.get(e.id) or self.default(e.id)
            return self.expr(e)
        finally:
            self.inside = prev

    def source_tokens(self, expr: ast.AST) -> frozenset | None:
        if isinstance(expr, ast.Name):
            v = self.env.get(expr.id) or self.default(expr.id)
            toks = {("n", expr.id)}
            toks |= {("n", r) for r in v.roots}
            if v.elts:
                for e in v.elts:
                    toks.add(("n", e))
                    ev = self.env.get(e) or self.default(e)
                    toks |= {("n", r) for r in ev.roots}
            if v.roots or v.elts or v.deps or v.kind in ("tensor", "array"):
                return frozenset(toks)
            if v.kind == "variable" and v.op == "call":  # one variable created here
                return frozenset(toks)
            return None
        if isinstance(expr, ast.Attribute):
            root = attr_root(expr)
            if isinstance(root, ast.Name) and self.a.imports.aliases.get(root.id) is None:
                v = self.env.get(root.id)
                toks = {("n", root.id)}
                if v is not None:
                    toks |= {("n", r) for r in v.roots}
                return frozenset(toks)
            return None
        if isinstance(expr, (ast.List, ast.Tuple)):
            out: set = set()
            for e in expr.elts:
                t = self.source_tokens(e)
                if t is None:
                    return None
                out |= t
            return frozenset(out)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            left, right = self.source_tokens(expr.left), self.source_tokens(expr.right)
            if left is None or right is None:
                return None
            return left | right
        if isinstance(expr, ast.Subscript):
            return self.source_tokens(expr.value)
        if isinstance(expr, ast.Starred):
            return self.source_tokens(expr.value)
        return None


def _short(f: ast.AST) -> str:
    text = ast.unparse(f)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_loss_instance(qual: str) -> bool:
    return qual.startswith(("keras.losses.", "keras.metrics.")) and qual.endswith("()")


def _is_int_dtype(node: ast.AST, a: Analysis) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in _INT_DTYPES
    if isinstance(node, ast.Name) and node.id in ("int", "bool") and a.qualname(node) is None:
        return True
    qn = a.qualname(node)
    if qn and qn.startswith(("tensorflow.", "numpy.", "keras.")):
        return qn.rsplit(".", 1)[-1] in _INT_DTYPES
    return False


# ---------------------------------------------------------------------------------------------
# Facts


class TapeFacts:
    def __init__(self, analysis: Analysis) -> None:
        self.a = analysis
        self.tapes: list[Tape] = []
        self.persistent_calls: list[ast.Call] = []  # every GradientTape(persistent=True) call
        self._tape_of_call: dict[ast.Call, Tape] = {}
        self._collect()

    # -- discovery -----------------------------------------------------------------------
    def scope_of(self, node: ast.AST) -> ast.AST:
        fn = self.a.enclosing_function(node)
        return fn if fn is not None else self.a.tree

    def is_tape_call(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        f = node.func
        if isinstance(f, ast.Attribute):
            if f.attr != "GradientTape":
                return False
        elif isinstance(f, ast.Name):
            if not (self.a.imports.aliases.get(f.id) or "").endswith("GradientTape"):
                return False
        else:
            return False
        return self.a.qualname(f) in GRADIENT_TAPE

    def _collect(self) -> None:
        a = self.a
        if a.source and "GradientTape" not in a.source:
            return
        if not a.imports.uses_tensorflow:
            return
        by_name: dict[tuple[int, str], list[Tape]] = {}
        assigned: dict[tuple[int, str], ast.Call] = {}
        withs: list[ast.AST] = []
        tape_calls: list[ast.Call] = []
        for node in a.parents:
            if isinstance(node, (ast.With, ast.AsyncWith)):
                withs.append(node)
            elif isinstance(node, ast.Call) and self.is_tape_call(node):
                tape_calls.append(node)
        for call in tape_calls:
            if _literal_bool(_kw(call, "persistent", 0), False) is True:
                self.persistent_calls.append(call)
            parent = a.parent(call)
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
                assigned[(id(self.scope_of(call)), parent.targets[0].id)] = call
        claimed: set[ast.Call] = set()
        for w in sorted(withs, key=pos):
            for item in w.items:
                ce = item.context_expr
                scope = self.scope_of(w)
                if self.is_tape_call(ce):
                    ov = item.optional_vars
                    tape = Tape(
                        call=ce,  # type: ignore[arg-type]
                        scope=scope,
                        name=ov.id if isinstance(ov, ast.Name) else None,
                        binding=ov,
                    )
                    claimed.add(ce)  # type: ignore[arg-type]
                    self._configure(tape)
                    tape.withs.append(w)
                    tape.items.append(item)
                    self.tapes.append(tape)
                    if tape.name:
                        by_name.setdefault((id(scope), tape.name), []).append(tape)
                elif isinstance(ce, ast.Name) and (id(scope), ce.id) in by_name | assigned:
                    key = (id(scope), ce.id)
                    # `with tape:` enters the tape last bound to that name: one created by
                    # `tape = tf.GradientTape()`, or one bound by an earlier `with ... as tape:`
                    # (re-entering a tape resumes its recording).
                    bound = [t for t in by_name.get(key, []) if t.withs and pos(t.withs[0]) < pos(w)
                             and t.call is not assigned.get(key)]
                    earlier_as = max(bound, key=lambda t: pos(t.withs[0]), default=None)
                    call = assigned.get(key)
                    if earlier_as is not None and call is not None and pos(earlier_as.withs[0]) < pos(call) < pos(w):
                        earlier_as = None  # the name was bound again, to the assigned tape
                    if earlier_as is None and call is None:
                        continue
                    existing = [t for t in by_name.get(key, []) if call is not None and t.call is call]
                    if earlier_as is not None:
                        tape = earlier_as
                    elif existing:
                        tape = existing[0]
                    else:
                        claimed.add(call)
                        tape = Tape(call=call, scope=scope, name=ce.id, binding=a.parent(call).targets[0])  # type: ignore[union-attr]
                        self._configure(tape)
                        self.tapes.append(tape)
                        by_name.setdefault(key, []).append(tape)
                    tape.withs.append(w)
                    tape.items.append(item)
                    if item.optional_vars is not None and isinstance(item.optional_vars, ast.Name):
                        # `with tape as t:` binds the same tape to another name
                        pass
        # Calls on tapes: the latest tape bound to that name before the call in the same scope.
        for node in a.parents:
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.attr in (*CONSUMING, "watch")
            ):
                continue
            key = (id(self.scope_of(node)), node.func.value.id)
            candidates = [t for t in by_name.get(key, []) if pos(t.withs[0]) < pos(node)]
            if not candidates:
                continue
            tape = max(candidates, key=lambda t: pos(t.withs[0]))
            if node.func.attr == "watch":
                tape.watches.append(node)
            else:
                tape.calls.append(node)
                self._tape_of_call[node] = tape

    def _configure(self, tape: Tape) -> None:
        if tape.call is None:
            return
        tape.persistent = _literal_bool(_kw(tape.call, "persistent", 0), False)
        tape.watch_accessed_variables = _literal_bool(_kw(tape.call, "watch_accessed_variables", 1), True)

    # -- queries -------------------------------------------------------------------------
    def tape_of(self, call: ast.Call) -> Tape | None:
        """The tape a ``gradient``/``jacobian`` call is made on, when it is known."""
        return self._tape_of_call.get(call)

    @property
    def gradient_calls(self) -> list[ast.Call]:
        return sorted(self._tape_of_call, key=pos)

    def encloses(self, tape: Tape, node: ast.AST) -> bool:
        """True when ``node`` runs inside one of the tape's ``with`` bodies."""
        ancestors = set(self.a.ancestors(node))
        for w in tape.withs:
            if w in ancestors and any(s is node or s in ancestors for s in w.body):
                return True
        return False

    @cached_property
    def module_env(self) -> dict[str, Val]:
        interp = _Interp(self, self.a.tree, None)
        interp.run()
        return interp.env

    @cached_property
    def _flows(self) -> dict[ast.Call, GradientFlow]:
        out: dict[ast.Call, GradientFlow] = {}
        for tape in self.tapes:
            if not tape.calls or tape.name is None:
                continue
            try:
                interp = _Interp(self, tape.scope, tape).run()
            except RecursionError:  # pathological nesting: no flow facts for this tape
                continue
            out.update(interp.flows)
        return out

    def flow(self, call: ast.Call) -> GradientFlow | None:
        """The dataflow facts of one ``tape.gradient(...)`` call (``None`` when unknown)."""
        return self._flows.get(call)

    def flows(self) -> list[GradientFlow]:
        return [self._flows[c] for c in sorted(self._flows, key=pos)]

    def attribute_roots(self, value: ast.AST) -> frozenset:
        """Objects whose variables an alias like ``v = model.trainable_variables`` (or a sum,
        list or conditional of such) refers to; empty when ``value`` is not such an expression."""
        roots = self._roots(value)
        return roots or frozenset()

    def _roots(self, value: ast.AST) -> frozenset | None:
        """``None`` when ``value`` is not (only) made of variable lists of named objects."""
        if isinstance(value, ast.Attribute):
            root = attr_root(value)
            if (
                isinstance(root, ast.Name)
                and self.a.imports.aliases.get(root.id) is None
                and _mentions_variable_attr(value)
            ):
                return frozenset({root.id})
            return None
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
            left, right = self._roots(value.left), self._roots(value.right)
            return None if left is None or right is None else left | right
        if isinstance(value, ast.IfExp):
            body, orelse = self._roots(value.body), self._roots(value.orelse)
            return None if body is None or orelse is None else body | orelse
        if isinstance(value, (ast.List, ast.Tuple)):
            out: frozenset = frozenset()
            for e in value.elts:
                part = self._roots(e.value if isinstance(e, ast.Starred) else e)
                if part is None:
                    return None
                out |= part
            return out
        return None

    # -- repeated gradient calls -----------------------------------------------------------
    def repeated_calls(self, tape: Tape) -> list[tuple[ast.Call, ast.AST]]:
        """Consuming calls that run a second time on a tape: (call, the earlier call or the
        loop/comprehension that repeats it)."""
        out: list[tuple[ast.Call, ast.AST]] = []
        calls = sorted(tape.calls, key=pos)
        reported: set[ast.Call] = set()
        for c in calls:
            rep = self._repeating_construct(tape, c)
            if rep is not None:
                out.append((c, rep))
                reported.add(c)
        for i, c2 in enumerate(calls):
            if c2 in reported:
                continue
            for c1 in calls[:i]:
                if self._one_path(c1, c2):
                    out.append((c2, c1))
                    reported.add(c2)
                    break
        return sorted(out, key=lambda p: pos(p[0]))

    def _repeating_construct(self, tape: Tape, call: ast.Call) -> ast.AST | None:
        for anc in self.a.ancestors(call):
            if isinstance(anc, _FUNCS) or anc is tape.scope:
                return None
            if isinstance(anc, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                # the element of a comprehension runs once per item
                if not any(call in set(ast.walk(g.iter)) for g in anc.generators):
                    return anc
            if isinstance(anc, (ast.For, ast.AsyncFor, ast.While)):
                in_body = any(call is s or call in set(ast.walk(s)) for s in anc.body)
                if not in_body:
                    continue
                if any(w is anc or anc in set(self.a.ancestors(w)) for w in tape.withs):
                    return None  # the tape itself is re-created in the loop
                if _exits_after(anc.body, call):
                    continue
                return anc
        return None

    def _one_path(self, c1: ast.AST, c2: ast.AST) -> bool:
        """Can ``c2`` run after ``c1`` in one execution of the function?"""
        anc1 = [c1, *self.a.ancestors(c1)]
        anc2 = [c2, *self.a.ancestors(c2)]
        set2 = set(anc2)
        lca = next((n for n in anc1 if n in set2), None)
        if lca is None:
            return False
        child1 = anc1[anc1.index(lca) - 1] if anc1.index(lca) > 0 else None
        child2 = anc2[anc2.index(lca) - 1] if anc2.index(lca) > 0 else None
        if isinstance(lca, ast.If):
            if (child1 in lca.body) != (child2 in lca.body) and child1 is not lca.test and child2 is not lca.test:
                return False
        if isinstance(lca, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            groups = [lca.body, *[h.body for h in lca.handlers], lca.orelse, lca.finalbody]

            def group(ch):
                for g_i, g in enumerate(groups):
                    if ch in g:
                        return g_i
                return -1

            g1, g2 = group(child1), group(child2)
            if g1 != g2 and 0 < g1 <= len(lca.handlers) and 0 < g2 <= len(lca.handlers):
                return False
            if g1 == 0 and 0 < g2 <= len(lca.handlers):
                return False
        if isinstance(lca, ast.IfExp):
            return False
        if hasattr(ast, "Match") and isinstance(lca, ast.match_case):
            pass
        if hasattr(ast, "Match") and isinstance(lca, ast.Match):
            return False
        # c1's path must not leave the function (return/raise) before reaching c2
        node = c1
        for anc in anc1[1:]:
            if isinstance(node, ast.Return) or isinstance(node, ast.Raise):
                return False
            if anc is lca:
                break
            for body_name in ("body", "orelse", "finalbody"):
                body = getattr(anc, body_name, None)
                if isinstance(body, list) and node in body:
                    later = body[body.index(node) + 1:]
                    if any(isinstance(s, (ast.Return, ast.Raise, ast.Continue, ast.Break)) for s in later):
                        return False
            if isinstance(anc, ast.ExceptHandler) and node in anc.body:
                later = anc.body[anc.body.index(node) + 1:]
                if any(isinstance(s, (ast.Return, ast.Raise)) for s in later):
                    return False
            node = anc
        if isinstance(node, (ast.Return, ast.Raise)):
            return False
        if isinstance(lca, list):
            return True
        for body_name in ("body", "orelse", "finalbody"):
            body = getattr(lca, body_name, None)
            if isinstance(body, list) and child1 in body and child2 in body:
                between = body[body.index(child1) + 1: body.index(child2)]
                if any(isinstance(s, (ast.Return, ast.Raise)) for s in between):
                    return False
        return True

    # -- persistent tapes ------------------------------------------------------------------
    def kept_alive(self) -> list[tuple[ast.Call, str]]:
        """Eager ``GradientTape(persistent=True)`` tapes that outlive their use: (call, where
        the tape is kept)."""
        out: list[tuple[ast.Call, str]] = []
        for call in self.persistent_calls:
            if self.a.is_traced(call):
                continue
            fn = self.a.enclosing_function(call)
            scope = fn if fn is not None else self.a.tree
            holder = self._holder(call, scope)
            if holder is None:
                continue
            where, released_by = holder
            if self._released(scope, call, released_by):
                continue
            out.append((call, where))
        return out

    def _holder_target(self, call: ast.Call) -> ast.AST | None:
        """The name or attribute that ``with <call> as x`` / ``x = <call>`` binds."""
        parent = self.a.parent(call)
        if isinstance(parent, ast.withitem):
            return parent.optional_vars
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            return parent.targets[0]
        return None

    def _holder(self, call: ast.Call, scope: ast.AST) -> tuple[str, set[str]] | None:
        target = self._holder_target(call)
        if target is None:
            return None
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            text = ast.unparse(target)
            return f"stored in `{text}`", {text}
        if not isinstance(target, ast.Name):
            return None
        name = target.id
        module_level = scope is self.a.tree or any(
            isinstance(n, ast.Global) and name in n.names for n in walk_own(getattr(scope, "body", []))
        )
        if module_level:
            return f"bound to the module-level name `{name}`", {name}
        # a local tape stored on an object or in a container
        for node in walk_own(scope.body):  # type: ignore[attr-defined]
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name:
                for t in node.targets:
                    if isinstance(t, (ast.Attribute, ast.Subscript)):
                        text = ast.unparse(t)
                        return f"stored in `{text}` (line {node.lineno})", {text, name}
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "add", "insert", "extend", "setdefault")
                and any(isinstance(x, ast.Name) and x.id == name for x in node.args)
            ):
                text = ast.unparse(node.func.value)
                return f"stored in the container `{text}` (line {node.lineno})", {text, name + "@container"}
        return None

    def _released(self, scope: ast.AST, call: ast.Call, names: set[str]) -> bool:
        body = getattr(scope, "body", [])
        own_target = self._holder_target(call)
        for node in walk_own(body):
            if pos(node) <= pos(call):
                continue
            if (scope is self.a.tree and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
                    and node.id in names and node is not own_target):
                return True  # a module-level name bound again (the next cell's tape) drops the tape
            if isinstance(node, ast.Delete):
                for t in node.targets:
                    if ast.unparse(t) in names:
                        return True
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is None:
                if any(ast.unparse(t) in names for t in node.targets):
                    return True
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("clear", "pop", "remove")
                and ast.unparse(node.func.value) in names
            ):
                return True
        if isinstance(scope, _FUNCS):
            # released in another method of the same class (`del self.tape` in a cleanup method)
            cls = self.a.enclosing_class(scope)
            if cls is not None:
                for node in ast.walk(cls):
                    if isinstance(node, ast.Delete) and any(ast.unparse(t) in names for t in node.targets):
                        return True
                    if (
                        isinstance(node, ast.Assign)
                        and isinstance(node.value, ast.Constant)
                        and node.value.value is None
                        and any(ast.unparse(t) in names for t in node.targets)
                    ):
                        return True
        return False

    # -- assignments, optimizers, models ---------------------------------------------------
    @cached_property
    def _assignments(self) -> dict[tuple[int, str], list[tuple[tuple[int, int], ast.AST, ast.AST, int | None]]]:
        """(scope id, name) → [(position, statement, value, index in a tuple target)]."""
        out: dict[tuple[int, str], list] = {}
        for node in self.a.parents:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                scope = id(self.scope_of(node))
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        out.setdefault((scope, t.id), []).append((pos(node), node, node.value, None))
                    elif isinstance(t, (ast.Tuple, ast.List)):
                        for i, e in enumerate(t.elts):
                            if isinstance(e, ast.Name):
                                out.setdefault((scope, e.id), []).append((pos(node), node, node.value, i))
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                scope = id(self.scope_of(node))
                for e in ast.walk(node.target):
                    if isinstance(e, ast.Name):
                        out.setdefault((scope, e.id), []).append((pos(node), node, None, None))
        for v in out.values():
            v.sort(key=lambda x: x[0])
        return out

    def assignments(self, name: str, at: ast.AST) -> list[tuple[tuple[int, int], ast.AST, ast.AST | None, int | None]]:
        return self._assignments.get((id(self.scope_of(at)), name), [])

    def last_assignment(self, name: str, at: ast.AST):
        """The last assignment to ``name`` before ``at`` in its scope: (statement, value, index)."""
        best = None
        for p, stmt, value, index in self.assignments(name, at):
            if p < pos(at):
                best = (stmt, value, index)
        return best

    def gradient_sources_of(self, expr: ast.AST, at: ast.AST, depth: int = 0) -> tuple[ast.Call, ast.AST] | None:
        """For gradients ``expr`` (``grads``), the ``tape.gradient(...)`` call that computed them
        and its sources expression, following names, ``tf.clip_by_global_norm`` and
        list comprehensions over the gradients."""
        if depth > 6:
            return None
        if isinstance(expr, ast.Call):
            f = expr.func
            if isinstance(f, ast.Attribute) and f.attr == "gradient":
                src = _kw(expr, "sources", 1)
                return (expr, src) if src is not None else None
            qn = self.a.qualname(f)
            if (qn in ("tensorflow.clip_by_global_norm",) or (isinstance(f, ast.Attribute) and f.attr in ("get_unscaled_gradients",))) and expr.args:
                return self.gradient_sources_of(expr.args[0], at, depth + 1)
            if qn == "list" and expr.args:
                return self.gradient_sources_of(expr.args[0], at, depth + 1)
            return None
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp)) and len(expr.generators) == 1:
            return self.gradient_sources_of(expr.generators[0].iter, at, depth + 1)
        if isinstance(expr, ast.Name):
            d = self.last_assignment(expr.id, at)
            if d is None or d[1] is None:
                return None
            stmt, value, index = d
            if index is not None:
                if isinstance(value, (ast.Tuple, ast.List)) and index < len(value.elts):
                    return self.gradient_sources_of(value.elts[index], stmt, depth + 1)
                if index == 0 and isinstance(value, ast.Call) and self.a.qualname(value.func) == "tensorflow.clip_by_global_norm":
                    return self.gradient_sources_of(value, stmt, depth + 1)
                return None
            return self.gradient_sources_of(value, stmt, depth + 1)
        return None

    def canonical(self, expr: ast.AST, at: ast.AST, depth: int = 0) -> tuple[str, bool]:
        """A canonical text for a variable-list expression, following simple names:
        (text, resolved) — ``resolved`` is False when a bare name of unknown content remains."""
        if depth > 8:
            return ast.unparse(expr), False
        if isinstance(expr, ast.Name):
            d = self.last_assignment(expr.id, at)
            if d is not None and d[2] is None and d[1] is not None:
                value = d[1]
                if isinstance(value, (ast.Attribute, ast.List, ast.Tuple, ast.BinOp, ast.Name)):
                    return self.canonical(value, d[0], depth + 1)
                if isinstance(value, ast.Call) and self.a.qualname(value.func) in VARIABLE_CTORS:
                    return f"var:{expr.id}@{d[0].lineno}", True
                if isinstance(value, ast.Call) and self.a.qualname(value.func) in ("list", "tuple") and len(value.args) == 1:
                    return self.canonical(value.args[0], d[0], depth + 1)
            return f"name:{expr.id}", False
        if isinstance(expr, ast.Attribute):
            attr = "trainable_variables" if expr.attr == "trainable_weights" else expr.attr
            inner, ok = self.canonical(expr.value, at, depth + 1) if not isinstance(expr.value, ast.Name) else (expr.value.id, True)
            return f"{inner}.{attr}", ok
        if isinstance(expr, (ast.List, ast.Tuple)):
            parts = [self.canonical(e, at, depth + 1) for e in expr.elts]
            return "[" + ",".join(p for p, _ in parts) + "]", all(ok for _, ok in parts)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            left, lok = self.canonical(expr.left, at, depth + 1)
            right, rok = self.canonical(expr.right, at, depth + 1)
            return f"{left}+{right}", lok and rok
        if isinstance(expr, ast.Starred):
            return self.canonical(expr.value, at, depth + 1)
        return ast.unparse(expr), False

    @cached_property
    def premature_reads(self) -> list[tuple[ast.Attribute, str, ast.AST, ast.AST]]:
        """Reads of ``m.trainable_variables``/``trainable_weights`` that are used for gradients
        or an optimizer while ``m`` (a model or layer built in the same scope without an input
        shape) has not created its variables yet: (read, model name, constructor call, use)."""
        out = []
        a = self.a
        if a.source and "trainable_" not in a.source:
            return out
        if not a.imports.uses_tensorflow:
            return out
        reads = []
        for node in a.parents:
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)
                and node.attr in TRAINABLE_ATTRS
                and isinstance(node.value, ast.Name)
            ):
                use = self._gradient_use(node)
                if use is not None:
                    reads.append((node, use))
        if not reads:
            return out
        unbuilt = self._unbuilt_constructions({r.value.id for r, _ in reads})
        for node, use in reads:
            name = node.value.id
            scope = self.scope_of(node)
            ctor = unbuilt.get((id(scope), name))
            if ctor is None:
                continue
            ctor_stmt, ctor_call = ctor
            if pos(ctor_stmt) >= pos(node):
                continue
            # the last construction before the read must be the unbuilt one
            last = self.last_assignment(name, node)
            if last is None or last[0] is not ctor_stmt:
                continue
            if self._built_between(name, scope, ctor_stmt, node):
                continue
            out.append((node, name, ctor_call, use))
        return out

    def _gradient_use(self, read: ast.Attribute) -> ast.AST | None:
        """The gradient/optimizer call that consumes ``read`` (directly or through a name)."""
        node: ast.AST = read
        for anc in self.a.ancestors(read):
            if isinstance(anc, ast.Call):
                use = self._consumer(anc, node)
                if use is not None:
                    return use
            if isinstance(anc, ast.Assign):
                if len(anc.targets) == 1 and isinstance(anc.targets[0], ast.Name) and anc.value is node:
                    return self._name_gradient_use(anc.targets[0].id, anc)
                return None
            if isinstance(anc, (ast.stmt,)):
                return None
            node = anc
        return None

    def _consumer(self, call: ast.Call, arg: ast.AST) -> ast.AST | None:
        f = call.func
        if not isinstance(f, ast.Attribute):
            if isinstance(f, ast.Name) and f.id == "zip":
                outer = self.a.parent(call)
                while isinstance(outer, ast.Call) and isinstance(outer.func, ast.Name) and outer.func.id == "list":
                    call, outer = outer, self.a.parent(outer)
                if isinstance(outer, ast.Call) and isinstance(outer.func, ast.Attribute) and outer.func.attr == "apply_gradients":
                    return outer
            return None
        if f.attr == "gradient" and _kw(call, "sources", 1) is arg:
            return call
        if f.attr in ("build", "minimize", "apply") and arg in (*call.args, *(k.value for k in call.keywords)):
            if f.attr == "build" and not _looks_like_optimizer(f.value):
                return None
            if f.attr == "apply" and not _looks_like_optimizer(f.value):
                return None
            if f.attr == "minimize" and _kw(call, "var_list", 1) is not arg:
                return None
            return call
        return None

    def _name_gradient_use(self, name: str, assign: ast.Assign) -> ast.AST | None:
        scope = self.scope_of(assign)
        if scope is self.a.tree:
            # a module-level name is also read by the functions of the module
            nodes = (
                n for n in self.a.parents
                if isinstance(n, ast.Name) and n.id == name
                and (self.scope_of(n) is scope or not self.assignments(name, n))
            )
        else:
            nodes = walk_own(getattr(scope, "body", []))
        for node in nodes:
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load) and (
                pos(node) > pos(assign) or self.scope_of(node) is not scope
            ):
                parent = self.a.parent(node)
                if isinstance(parent, ast.Call):
                    use = self._consumer(parent, node)
                    if use is not None:
                        return use
        return None

    def _unbuilt_constructions(self, names: set[str]) -> dict[tuple[int, str], tuple[ast.AST, ast.Call]]:
        out: dict[tuple[int, str], tuple[ast.AST, ast.Call]] = {}
        classes = {c.name: c for c in self.a.parents if isinstance(c, ast.ClassDef)}
        for node in self.a.parents:
            if not (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in names
                and isinstance(node.value, ast.Call)
            ):
                continue
            call = node.value
            if self._is_unbuilt_model(call, classes):
                out[(id(self.scope_of(node)), node.targets[0].id)] = (node, call)
        return out

    def _is_unbuilt_model(self, call: ast.Call, classes: dict[str, ast.ClassDef]) -> bool:
        f = call.func
        if isinstance(f, ast.Name) and f.id in classes and self.a.qualname(f) is None:
            cls = classes[f.id]
            if not self.a.traced.is_keras_class(cls):
                return False
            return not _class_builds_itself(cls, classes)
        qn = self.a.qualname(f)
        if qn is None:
            return False
        if qn in ("keras.Sequential", "keras.models.Sequential"):
            layers = _kw(call, "layers", 0)
            if layers is None:
                return True  # built later through `add`; handled as a build event
            if not isinstance(layers, (ast.List, ast.Tuple)):
                return False
            if not layers.elts:
                return True
            return not any(self._gives_input(e) for e in layers.elts)
        if qn.startswith("keras.layers."):
            last = qn.rsplit(".", 1)[-1]
            if last in ("Input", "InputLayer") or not last[:1].isupper():
                return False
            return True
        return False

    def _gives_input(self, layer: ast.AST) -> bool:
        if not isinstance(layer, ast.Call):
            return True  # a layer built elsewhere: unknown, assume it brings its shape
        qn = self.a.qualname(layer.func) or ""
        if qn.rsplit(".", 1)[-1] in ("Input", "InputLayer"):
            return True
        if any(k.arg in ("input_shape", "input_dim", "batch_input_shape", "batch_shape", None) for k in layer.keywords):
            return True
        return not qn.startswith("keras.")

    def _built_between(self, name: str, scope: ast.AST, start: ast.AST, read: ast.AST) -> bool:
        """Is ``name`` possibly built (called, built, fitted, passed somewhere) between the
        construction and the read, or in the same loop as the read?"""
        read_loops = set()
        for anc in self.a.ancestors(read):
            if isinstance(anc, _FUNCS):
                break
            if isinstance(anc, (ast.For, ast.AsyncFor, ast.While)):
                read_loops.add(anc)
        local_funcs_mentioning: set[str] = set()
        for fname, defs in self.a.functions.items():
            for d in defs:
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(d)):
                    local_funcs_mentioning.add(fname)
        for node in walk_own(getattr(scope, "body", [])):
            if not isinstance(node, ast.Call):
                continue
            in_loop = any(lp in set(self.a.ancestors(node)) for lp in read_loops)
            if not (pos(start) < pos(node) < pos(read) or in_loop):
                continue
            if node is start.value:  # type: ignore[attr-defined]
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id == name:
                return True
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == name:
                if f.attr == "compile":
                    continue
                if f.attr == "add":
                    if node.args and self._gives_input(node.args[0]) or (node.args and _is_input(node.args[0], self.a)):
                        return True
                    continue
                return True
            if any(isinstance(x, ast.Name) and x.id == name for x in (*node.args, *(k.value for k in node.keywords))):
                return True
            if isinstance(f, ast.Name) and f.id in local_funcs_mentioning:
                return True
            if isinstance(f, ast.Attribute) and f.attr in local_funcs_mentioning:
                return True
        return False


def _is_input(node: ast.AST, a: Analysis) -> bool:
    return isinstance(node, ast.Call) and (a.qualname(node.func) or "").rsplit(".", 1)[-1] in ("Input", "InputLayer")


def _looks_like_optimizer(expr: ast.AST) -> bool:
    text = ast.unparse(expr).lower()
    return "opt" in text


def _class_builds_itself(cls: ast.ClassDef, classes: dict[str, ast.ClassDef], depth: int = 0) -> bool:
    """Does the class create its variables in ``__init__`` (``self.build(...)``, a functional
    ``super().__init__(inputs, outputs)``, or ``self.add_weight`` in ``__init__``)?"""
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            for node in ast.walk(stmt):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                    continue
                if node.func.attr in ("build", "add_weight", "add_variable") or (
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "self" and node.func.attr in ("__call__",)
                ):
                    return True
                if node.func.attr == "__init__" and (len(node.args) >= 2 or any(k.arg in ("inputs", "outputs") for k in node.keywords)):
                    return True
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("Variable",):
                    return True
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Variable":
                    return True
    if depth < 5:
        for b in cls.bases:
            if isinstance(b, ast.Name) and b.id in classes and classes[b.id] is not cls:
                if _class_builds_itself(classes[b.id], classes, depth + 1):
                    return True
    return False


def _exits_after(body: list[ast.stmt], call: ast.AST) -> bool:
    """Does the loop body leave the loop (break/return/raise) after the statement holding
    ``call``, on the same straight-line path?"""
    for i, s in enumerate(body):
        if s is call or call in set(ast.walk(s)):
            later = body[i + 1:]
            if isinstance(s, (ast.Return, ast.Raise, ast.Break)):
                return True
            return any(isinstance(x, (ast.Return, ast.Raise, ast.Break)) for x in later)
    return False


def _mentions_variable_attr(expr: ast.AST) -> bool:
    node = expr
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and node.attr in VARIABLE_ATTRS:
            return True
        node = node.value
    return False


__all__ = ["GRADIENT_TAPE", "GradientFlow", "SourceFact", "Tape", "TapeFacts", "Val"]
