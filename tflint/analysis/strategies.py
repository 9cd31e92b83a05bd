"""``tf.distribute`` strategies of a module: which names hold one, where their ``scope()`` blocks
are, which functions run per replica (``strategy.run(fn, ...)``), and which code runs inside a
scope (directly, or in a function whose every in-module call is inside one).

``StrategyFacts(analysis)``:

- ``strategies``           — ``Strategy`` records: the creating call, its kind (public name),
  the expression text it is bound to (``strategy``, ``self.strategy``)
- ``uses_strategy``        — the module creates a strategy
- ``kinds``                — the public names of the strategies created
- ``is_strategy(expr)``    — ``expr`` evaluates to a strategy (a bound name, a creating call,
  ``tf.distribute.get_strategy()``, or a call of a module function that returns one)
- ``scope_blocks``         — ``with <strategy>.scope():`` statements
- ``in_scope(node)``       — ``node`` runs inside a strategy scope
- ``replica_functions``    — function nodes passed to ``<strategy>.run`` (or
  ``experimental_run_v2``), and the ``run`` calls that pass them
- ``run_calls``            — every ``<strategy>.run(...)`` call
- ``calls_run(func)``      — the function's body calls ``<strategy>.run`` (directly or through
  another module function)
- ``distributed_names``    — names bound to ``experimental_distribute_dataset`` /
  ``distribute_datasets_from_function`` results (per scope)
- ``used_with_strategy(call)`` — the object a call creates reaches code that runs with the
  strategy (a scope block, a replica function, ``strategy.run``'s arguments, a function that
  opens a scope or calls ``run``); an object only restored, evaluated or counted outside is not
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from tflint.analysis.astutil import dotted, walk_own

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
STRATEGY_PREFIX = "tensorflow.distribute."
MULTI_WORKER = "MultiWorkerMirroredStrategy"
GET_STRATEGY = frozenset({"tensorflow.distribute.get_strategy"})
RUN_METHODS = frozenset({"run", "experimental_run_v2"})
DISTRIBUTE_METHODS = frozenset(
    {"experimental_distribute_dataset", "distribute_datasets_from_function",
     "experimental_distribute_datasets_from_function"}
)


def strategy_kind(qualname: str | None) -> str | None:
    """Public strategy name of a constructor's qualified name, else None."""
    if not qualname or not qualname.startswith(STRATEGY_PREFIX):
        return None
    last = qualname.rsplit(".", 1)[-1]
    if last.endswith("Strategy") and last[:1].isupper():
        return last
    return None


@dataclass(frozen=True)
class Strategy:
    call: ast.Call
    kind: str
    bound_to: str | None


class StrategyFacts:
    def __init__(self, analysis: Analysis) -> None:
        self.a = analysis

    # -- strategies -----------------------------------------------------------------------
    @cached_property
    def _returning_functions(self) -> dict[str, str]:
        """Module function name -> kind, for functions that return a strategy constructor call
        (``def make_strategy(): return tf.distribute.MirroredStrategy()``)."""
        out: dict[str, str] = {}
        if not self.a.mentions("Strategy"):  # every strategy constructor's name ends so
            return out
        for name, defs in self.a.functions.items():
            for func in defs:
                for node in walk_own(func.body):
                    if isinstance(node, ast.Return) and node.value is not None:
                        for call in _calls_in(node.value):
                            kind = strategy_kind(self.a.call_name(call))
                            if kind:
                                out[name] = kind
        return out

    def _creation_kinds(self, value: ast.AST) -> list[tuple[ast.Call, str]]:
        found: list[tuple[ast.Call, str]] = []
        for call in _calls_in(value):
            kind = strategy_kind(self.a.call_name(call))
            if kind is None and isinstance(call.func, ast.Name):
                kind = self._returning_functions.get(call.func.id)
            if kind:
                found.append((call, kind))
        return found

    @cached_property
    def strategies(self) -> list[Strategy]:
        out: list[Strategy] = []
        seen: set[int] = set()
        if not self.a.mentions("Strategy"):
            return out
        for node in self.a.nodes(ast.Assign, ast.AnnAssign):
            if node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for call, kind in self._creation_kinds(node.value):
                    for t in targets:
                        out.append(Strategy(call, kind, dotted(t)))
                    seen.add(id(call))
        for node in self.a.nodes(ast.Call):
            if id(node) not in seen:
                kind = strategy_kind(self.a.call_name(node))
                if kind:
                    out.append(Strategy(node, kind, None))
        return out

    @cached_property
    def uses_strategy(self) -> bool:
        return bool(self.strategies)

    @cached_property
    def kinds(self) -> frozenset[str]:
        return frozenset(s.kind for s in self.strategies)

    @cached_property
    def multi_worker(self) -> bool:
        return MULTI_WORKER in self.kinds

    @cached_property
    def _bound_names(self) -> frozenset[str]:
        names = {s.bound_to for s in self.strategies if s.bound_to}
        # ``self.strategy`` bound in one method is read as ``self.strategy`` elsewhere too
        return frozenset(names)

    def is_strategy(self, expr: ast.AST | None) -> bool:
        if expr is None:
            return False
        if isinstance(expr, ast.Call):
            q = self.a.call_name(expr)
            if strategy_kind(q) or q in GET_STRATEGY:
                return True
            return isinstance(expr.func, ast.Name) and expr.func.id in self._returning_functions
        d = dotted(expr)
        return d is not None and d in self._bound_names

    # -- scopes -----------------------------------------------------------------------------
    @cached_property
    def scope_blocks(self) -> list[ast.With | ast.AsyncWith]:
        out = []
        for node in self.a.nodes(ast.With, ast.AsyncWith):
            for item in node.items:
                e = item.context_expr
                if (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
                        and e.func.attr == "scope" and self.is_strategy(e.func.value)):
                    out.append(node)
                    break
        return out

    def _directly_in_scope(self, node: ast.AST) -> bool:
        """Inside a ``with <strategy>.scope():`` body in the same function."""
        blocks = self._scope_block_set
        child = node
        for anc in self.a.ancestors(node):
            if isinstance(anc, (*_FUNCS, ast.ClassDef)):
                return False
            if anc in blocks and child in anc.body:
                return True
            child = anc
        return False

    @cached_property
    def _scope_block_set(self) -> set[ast.AST]:
        return set(self.scope_blocks)

    def in_scope(self, node: ast.AST, _depth: int = 0) -> bool:
        """``node`` runs inside a strategy scope: directly, in a replica function, or in a
        function that is only ever called (in this module) from code that does."""
        if self._directly_in_scope(node):
            return True
        func = self.a.enclosing_function(node)
        if func is None or _depth > 6:
            return False
        if func in self.replica_functions:
            return True
        sites = self.call_sites(func)
        return bool(sites) and all(self.in_scope(site, _depth + 1) for site in sites)

    def runs_outside_scope(self, node: ast.AST, _depth: int = 0) -> bool:
        """``node`` visibly runs outside any strategy scope: it is module-level code outside a
        scope, or in a function called (in this module) from such code. Code in functions that
        are never called here, in methods and in replica functions is not judged."""
        if self._directly_in_scope(node):
            return False
        func = self.a.enclosing_function(node)
        if func is None:
            return self.a.enclosing_class(node) is None
        if _depth > 6 or func in self.replica_functions or isinstance(func, ast.Lambda):
            return False
        if isinstance(self.a.parent(func), ast.ClassDef):
            return False
        return any(self.runs_outside_scope(site, _depth + 1) for site in self.call_sites(func))

    def call_sites(self, func: ast.AST) -> list[ast.Call]:
        """Calls of a plain module function by its name (methods are not resolved here)."""
        name = getattr(func, "name", None)
        if name is None:
            return []
        return [c for c in self._calls_by_name.get(name, []) if self.a.enclosing_function(c) is not func]

    @cached_property
    def _calls_by_name(self) -> dict[str, list[ast.Call]]:
        out: dict[str, list[ast.Call]] = {}
        for node in self.a.nodes(ast.Call):
            if isinstance(node.func, ast.Name):
                out.setdefault(node.func.id, []).append(node)
        return out

    # -- replica functions ------------------------------------------------------------------
    @cached_property
    def run_calls(self) -> list[ast.Call]:
        return [
            n for n in self.a.nodes(ast.Call)
            if isinstance(n.func, ast.Attribute)
            and n.func.attr in RUN_METHODS and self.is_strategy(n.func.value)
        ]

    @cached_property
    def replica_functions(self) -> dict[ast.AST, ast.Call]:
        out: dict[ast.AST, ast.Call] = {}
        for call in self.run_calls:
            fn = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "fn"), None)
            for func in self._resolve(fn, call):
                out.setdefault(func, call)
        return out

    def _resolve(self, expr: ast.AST | None, at: ast.AST) -> list[ast.AST]:
        if isinstance(expr, ast.Lambda):
            return [expr]
        if isinstance(expr, ast.Name):
            return self.a.lookup_function(expr.id, at)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = self.a.enclosing_class(at)
            if cls is not None:
                return [f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and f.name == expr.attr]
        return []

    @cached_property
    def _functions_calling_run(self) -> set[ast.AST]:
        direct = {self.a.enclosing_function(c) for c in self.run_calls} - {None}
        result = set(direct)
        if not result:  # nothing can reach a run call
            return result
        changed = True
        rounds = 0
        while changed and rounds < 6:
            changed = False
            rounds += 1
            for name, defs in self.a.functions.items():
                for func in defs:
                    if func in result:
                        continue
                    for node in walk_own(func.body):
                        if isinstance(node, ast.Call) and any(t in result for t in self._resolve(node.func, node)):
                            result.add(func)
                            changed = True
                            break
        return result

    def calls_run(self, func: ast.AST) -> bool:
        return func in self._functions_calling_run

    def body_calls_run(self, stmts: list[ast.AST]) -> ast.Call | None:
        """The first call in ``stmts`` (own code) that is ``strategy.run`` or reaches it."""
        for node in walk_own(stmts):
            if not isinstance(node, ast.Call):
                continue
            if node in self._run_call_set:
                return node
            if any(self.calls_run(t) for t in self._resolve(node.func, node)):
                return node
        return None

    @cached_property
    def _run_call_set(self) -> set[ast.Call]:
        return set(self.run_calls)

    # -- what strategy code uses ------------------------------------------------------------
    def used_with_strategy(self, call: ast.Call, own_methods_ok: str | None = None) -> bool:
        """Whether the object ``call`` creates is used by code that runs with the strategy.

        The object is followed through the names it is bound to (``x = Make()``,
        ``self.x = ...``, ``ckpt = tf.train.Checkpoint(v=Make())``, the receiver of
        ``model.compile(optimizer=Make())``) and through ``return`` to the names that the
        module's calls of the function made outside a scope bind. It is used with the strategy
        when one of those names is read inside a ``strategy.scope()`` block, in a replica
        function or code only called from scope, in a function that calls ``strategy.run``,
        in ``strategy.run``'s arguments, or passed to a module function that opens a scope or
        calls ``run``. When the object cannot be followed (``f(Make())`` as a statement) it
        counts as used. Restored models, coordinator-side evaluation metrics and eager
        bookkeeping variables that never reach strategy code are not. With ``own_methods_ok``,
        a read that only calls the object or one of its methods (``metric(loss)``,
        ``metric.update_state(y, p)``, ``step.assign_add(1)``) does not count either, anywhere
        (``"anywhere"``) or outside replica code (``"cross-replica"``), and neither does
        creating it in a function that calls ``strategy.run``."""
        if not own_methods_ok and self._strategy_site(call):
            return True
        bound = self._names_bound_to(call, 0)
        if bound is None:
            return True
        # (a name bound by an expression statement is the owner the object was given to,
        # ``model.compile(metrics=[Make()])``: the owner's methods are not the object's)
        return any(self._read_by_strategy_code(name, scope, at=stmt,
                                               own_methods_ok=None if isinstance(stmt, ast.Expr) else own_methods_ok)
                   for name, scope, stmt in bound)

    def _names_bound_to(self, expr: ast.AST, depth: int) -> list[tuple[str, ast.AST, ast.stmt]] | None:
        """(dotted name, scope, binding statement) triples the value of ``expr`` is bound to;
        ``None`` if unknown."""
        if depth > 3:
            return None
        node = expr
        parent = self.a.parent(node)
        while isinstance(parent, (ast.Call, ast.keyword, ast.List, ast.Tuple, ast.Dict, ast.IfExp,
                                  ast.BoolOp, ast.Starred, ast.Subscript, ast.Attribute)):
            node, parent = parent, self.a.parent(parent)
        scope = self.a.enclosing_function(expr) or self.a.tree
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and node is parent.value:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            out = []
            for t in targets:
                for leaf in ast.walk(t):
                    if isinstance(leaf, (ast.Name, ast.Attribute)) and isinstance(leaf.ctx, ast.Store):
                        d = dotted(leaf)
                        if d is None:
                            return None
                        out.append((d, scope, parent))
            return out
        if isinstance(parent, (ast.For, ast.AsyncFor)) and node is parent.iter:
            # ``for model in [Make(), ...]``: the loop variable holds it
            names = [dotted(leaf) for leaf in ast.walk(parent.target)
                     if isinstance(leaf, (ast.Name, ast.Attribute)) and isinstance(leaf.ctx, ast.Store)]
            if not names or None in names:
                return None
            return [(d, scope, parent) for d in names]
        if isinstance(parent, ast.Return) and isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self._returned_to(scope, depth)
        if (isinstance(parent, ast.Expr) and isinstance(node, ast.Call) and node is not expr
                and isinstance(node.func, ast.Attribute)):
            # ``model.compile(optimizer=Make())``: the object belongs to the receiver
            owner = dotted(node.func.value)
            if owner is not None:
                return [(owner, scope, parent)]
        return None

    def _returned_to(self, func: ast.AST, depth: int) -> list[tuple[str, ast.AST, ast.stmt]] | None:
        """Names that the module's calls of ``func`` made outside any scope bind its result to
        (the calls made inside a scope create their objects there)."""
        sites = [s for s in self.call_sites(func) if not self.in_scope(s)]
        if not sites:
            return None  # returned to callers this module does not show
        out = []
        for site in sites:
            got = self._names_bound_to(site, depth + 1)
            if got is None:
                return None
            out.extend(got)
        return out

    def _read_by_strategy_code(self, name: str, scope: ast.AST, depth: int = 0, at: ast.stmt | None = None,
                               own_methods_ok: str | None = None) -> bool:
        """Whether a read of ``name`` bound in ``scope`` (by statement ``at``) runs with the
        strategy. A read in the same scope's own code that another binding of the name shadows
        (``model = A()`` ... ``with strategy.scope(): model = B(); model.fit()``) does not see
        the object bound at ``at``."""
        root = self.a.tree if name.startswith("self.") or isinstance(scope, ast.Module) else scope
        for node in ast.walk(root):
            if not (isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load)):
                continue
            if dotted(node) != name:
                continue
            if at is not None and self._shadowed(name, scope, at, node):
                continue
            if own_methods_ok and _calls_itself(node, self.a) and (
                    own_methods_ok == "anywhere" or not self._replica_site(node)):
                continue
            if self._strategy_site(node):
                return True
            parent = self.a.parent(node)
            if (isinstance(parent, ast.Return) and depth < 3 and isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and self.a.enclosing_function(node) is scope):
                # ``model = Make(); return model``: follow it to what the callers bind
                bound = self._returned_to(scope, depth + 1)
                if bound is None or any(self._read_by_strategy_code(n, s, depth + 1, at=b, own_methods_ok=own_methods_ok)
                                        for n, s, b in bound):
                    return True
        return False

    def _shadowed(self, name: str, scope: ast.AST, at: ast.stmt, read: ast.AST) -> bool:
        """The binding statement ``at`` of a plain name does not reach ``read``, a read in the
        same scope's own code: it comes before ``at`` (outside any loop around both), or another
        binding of the name comes between them. Reads of attributes (``self.x``) and reads in
        other functions (run when called, in any order) are always reached."""
        if "." in name or self.a.enclosing_function(read) is not self._own(scope):
            return False
        if read.lineno < at.lineno:
            return not self._common_loop(at, read, scope)
        return any(at.end_lineno < line < read.lineno for line in self._binding_lines(name, scope))

    def _own(self, scope: ast.AST) -> ast.AST | None:
        return None if isinstance(scope, ast.Module) else scope

    def _common_loop(self, a: ast.AST, b: ast.AST, scope: ast.AST) -> bool:
        loops = {id(n) for n in self.a.ancestors(a) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))}
        for anc in self.a.ancestors(b):
            if anc is scope or isinstance(anc, _FUNCS):
                return False
            if id(anc) in loops:
                return True
        return False

    def _binding_lines(self, name: str, scope: ast.AST) -> list[int]:
        """Lines where the scope's own code binds the plain name ``name``."""
        key = (name, id(scope))
        got = self._bindings.get(key)
        if got is None:
            own = self._own(scope)
            body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
            got = self._bindings[key] = [
                n.lineno for n in walk_own(body)
                if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                and self.a.enclosing_function(n) is own
            ]
        return got

    @cached_property
    def _bindings(self) -> dict[tuple[str, int], list[int]]:
        """``_binding_lines`` per (name, id(scope)), filled as rules ask."""
        return {}

    def _strategy_site(self, node: ast.AST) -> bool:
        if self.in_scope(node):
            return True
        func = self.a.enclosing_function(node)
        while func is not None:
            if func in self.replica_functions or self.calls_run(func):
                return True
            func = self.a.enclosing_function(func)
        for anc in self.a.ancestors(node):
            if isinstance(anc, ast.stmt):
                break
            if not isinstance(anc, ast.Call):
                continue
            if anc in self._run_call_set:
                return True
            if isinstance(anc.func, ast.Name):
                for target in self.a.functions.get(anc.func.id, []):
                    if self.calls_run(target) or self._opens_scope(target):
                        return True
        return False

    def _replica_site(self, node: ast.AST) -> bool:
        """``node`` runs in replica context: in a replica function, or in ``strategy.run``'s
        arguments."""
        func = self.a.enclosing_function(node)
        while func is not None:
            if func in self.replica_functions:
                return True
            func = self.a.enclosing_function(func)
        return any(anc in self._run_call_set for anc in self.a.ancestors(node) if isinstance(anc, ast.Call))

    def _opens_scope(self, func: ast.AST) -> bool:
        blocks = self._scope_block_set
        return any(n in blocks for n in walk_own(getattr(func, "body", [])))

    # -- distributed datasets ---------------------------------------------------------------
    def is_distribute_call(self, expr: ast.AST | None) -> bool:
        return (
            isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in DISTRIBUTE_METHODS
        )


def _calls_itself(node: ast.AST, a) -> bool:
    """``node`` is called (``metric(loss)``) or is the receiver of a method call
    (``metric.update_state(y, p)``, ``step.assign_add(1)``)."""
    parent = a.parent(node)
    if isinstance(parent, ast.Call) and parent.func is node:
        return True
    return (isinstance(parent, ast.Attribute) and parent.value is node
            and isinstance(a.parent(parent), ast.Call) and a.parent(parent).func is parent)


def _calls_in(expr: ast.AST) -> list[ast.Call]:
    """Calls that ``expr`` may evaluate to: itself, either branch of ``a if c else b``,
    operands of ``a or b``."""
    if isinstance(expr, ast.Call):
        return [expr]
    if isinstance(expr, ast.IfExp):
        return _calls_in(expr.body) + _calls_in(expr.orelse)
    if isinstance(expr, ast.BoolOp):
        return [c for v in expr.values for c in _calls_in(v)]
    return []
