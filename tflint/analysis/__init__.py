"""Facts about one module that rules share, computed once and on demand.

``Analysis(tree, source)`` is built per file by the engine; each fact is a lazily computed
attribute so a rule set that does not need dataset chains never pays for them:

- ``imports``  — alias resolution (:mod:`tflint.analysis.imports`)
- ``parents`` / ``parent(node)`` / ``enclosing_function(node)`` / ``scope_of(node)``
- ``traced``   — which functions TensorFlow traces into a graph (:mod:`tflint.analysis.traced`)
- ``tapes``    — ``GradientTape`` blocks and their dataflow (:mod:`tflint.analysis.tapes`)
- ``datasets`` — tf.data chains across statements (:mod:`tflint.analysis.datasets`)
- ``loops``    — training loops (:mod:`tflint.analysis.loops`)
- ``strategies`` — tf.distribute strategies and their scopes (:mod:`tflint.analysis.strategies`)
- ``models``   — Keras models built in the module and their last layer (:mod:`tflint.analysis.models`)
- ``target``   — the TensorFlow/Keras version the code targets (:mod:`tflint.analysis.version`;
  the newest supported one unless the engine is given another)
- ``project``  — traced code reached from other modules (:mod:`tflint.analysis.project`)
"""

from __future__ import annotations

import ast
from functools import cached_property
from typing import Any

from tflint.analysis.astutil import walk_own
from tflint.analysis.imports import ImportMap

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_EMPTY: list = []
_MISSING = object()


class Analysis:
    def __init__(
        self, tree: ast.Module, source: str = "", target: Any = None, project: dict | None = None
    ) -> None:
        self.tree = tree
        self.source = source
        if target is None:
            from tflint.analysis.version import DEFAULT as target
        self.target = target
        # Functions of this module that traced code elsewhere in the project reaches:
        # qualname -> [entry qualname, entry path, entry line] (:mod:`tflint.analysis.project`).
        self.project = project or {}

    @cached_property
    def imports(self) -> ImportMap:
        return ImportMap(self)

    @cached_property
    def models(self) -> Any:
        from tflint.analysis.models import ModelFacts

        return ModelFacts(self)

    @cached_property
    def _index(self) -> tuple[list[ast.AST], dict[ast.AST, ast.AST], dict[type, list[int]]]:
        """One walk of the module: every node in ``ast.walk`` order, each node's parent, and
        the positions (in that order) of the nodes of each type."""
        tree = self.tree
        order: list[ast.AST] = [tree]
        parents: dict[ast.AST, ast.AST] = {}
        by_type: dict[type, list[int]] = {}
        append = order.append
        node_type = ast.AST
        i = 0
        while i < len(order):
            node = order[i]
            cls = node.__class__
            got = by_type.get(cls)
            if got is None:
                by_type[cls] = [i]
            else:
                got.append(i)
            i += 1
            for name in node._fields:
                try:
                    value = getattr(node, name)
                except AttributeError:
                    continue
                if value.__class__ is list:
                    for item in value:
                        if isinstance(item, node_type):
                            append(item)
                            parents[item] = node
                elif isinstance(value, node_type):
                    append(value)
                    parents[value] = node
        return order, parents, by_type

    @property
    def parents(self) -> dict[ast.AST, ast.AST]:
        """Each node's parent; iterating it gives every node but the module in ``ast.walk`` order."""
        return self._index[1]

    def walk(self) -> list[ast.AST]:
        """Every node of the module, in ``ast.walk(tree)`` order (computed once; do not modify)."""
        return self._index[0]

    def nodes(self, *types: type) -> list[ast.AST]:
        """The module's nodes of exactly these types (no subclasses), in ``ast.walk`` order
        (computed once per set of types; do not modify the list)."""
        cache = self.__dict__.get("_nodes_cache")
        if cache is None:
            cache = self.__dict__["_nodes_cache"] = {}
        got = cache.get(types)
        if got is None:
            order, _, by_type = self._index
            present = [by_type[t] for t in types if t in by_type]
            if not present:
                got = _EMPTY
            elif len(present) == 1:
                got = [order[i] for i in present[0]]
            else:
                got = [order[i] for i in sorted(i for p in present for i in p)]
            cache[types] = got
        return got

    def mentions(self, *words: str) -> bool:
        """Whether the module's text contains any of ``words`` (always true without text):
        a cheap test that lets a fact skip modules that cannot have it."""
        source = self.source
        if not source:
            return True
        return any(w in source for w in words)

    def segment(self, node: ast.AST) -> str:
        """The source text of ``node`` ("" when it has no position)."""
        return ast.get_source_segment(self.source, node) or ""

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(node)

    def ancestors(self, node: ast.AST):
        p = self.parents.get(node)
        while p is not None:
            yield p
            p = self.parents.get(p)

    def enclosing_function(self, node: ast.AST) -> FunctionNode | None:
        return self._enclosing(node, _FUNCS, "_enclosing_function")

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        return self._enclosing(node, ast.ClassDef, "_enclosing_class")

    def _enclosing(self, node: ast.AST, types: Any, memo_name: str) -> Any:
        """The nearest ancestor of ``node`` of ``types``, memoised for every node on the way."""
        memo = self.__dict__.get(memo_name)
        if memo is None:
            memo = self.__dict__[memo_name] = {}
        got = memo.get(node, _MISSING)
        if got is not _MISSING:
            return got
        parents = self.parents
        path = [node]
        result = None
        p = parents.get(node)
        while p is not None:
            if isinstance(p, types):
                result = p
                break
            got = memo.get(p, _MISSING)
            if got is not _MISSING:
                result = got
                break
            path.append(p)
            p = parents.get(p)
        for q in path:
            memo[q] = result
        return result

    def qualname(self, expr: ast.AST | None) -> str | None:
        """Qualified name of ``expr``, following assignments in its own function."""
        if expr is None:
            return None
        memo = self.__dict__.get("_qualnames")
        if memo is None:
            memo = self.__dict__["_qualnames"] = {}
        got = memo.get(expr, _MISSING)
        if got is _MISSING:
            got = memo[expr] = self.imports.qualname(expr, self.enclosing_function(expr))
        return got

    def call_name(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Call):
            return self.qualname(node.func)
        return None

    @cached_property
    def functions(self) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
        """Every ``def`` in the module by name (module-level, nested and methods)."""
        out: dict[str, list[Any]] = {}
        for node in self.nodes(ast.FunctionDef, ast.AsyncFunctionDef):
            out.setdefault(node.name, []).append(node)
        return out

    def lookup_function(self, name: str, at: ast.AST) -> list[ast.AST]:
        """The ``def`` that ``name`` refers to where ``at`` is: one of the innermost enclosing
        scope (function or module body, its compound statements included) that defines it.
        Code that runs in that body itself sees the last definition made before it (a notebook
        cell that redefines a step function does not change what earlier cells called); code
        of a function nested in it runs later, when the last definition is bound. ``[]`` if
        none."""
        tables = self.__dict__.setdefault("_scope_defs", {})
        runs_in = self.enclosing_function(at)
        for anc in self.ancestors(at):
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                table = tables.get(anc)
                if table is None:
                    table = tables[anc] = {}
                    for stmt in walk_own(anc.body):
                        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            table.setdefault(stmt.name, []).append(stmt)
                defs = table.get(name)
                if defs:
                    if len(defs) == 1:
                        return [defs[0]]
                    if runs_in is (None if isinstance(anc, ast.Module) else anc):
                        here = (getattr(at, "lineno", 0), getattr(at, "col_offset", 0))
                        before = [d for d in defs if (d.lineno, d.col_offset) < here]
                        return [before[-1] if before else defs[0]]
                    return [defs[-1]]
        return []

    @cached_property
    def traced(self):
        from tflint.analysis.traced import TracedFunctions

        return TracedFunctions(self)

    def is_traced(self, node: ast.AST) -> bool:
        """True when ``node`` runs as part of a traced function body."""
        return self.traced.is_traced(node)

    @cached_property
    def tapes(self):
        from tflint.analysis.tapes import TapeFacts

        return TapeFacts(self)

    @cached_property
    def datasets(self):
        from tflint.analysis.datasets import DatasetFacts

        return DatasetFacts(self)

    @cached_property
    def loops(self):
        from tflint.analysis.loops import LoopFacts

        return LoopFacts(self)

    @cached_property
    def strategies(self):
        from tflint.analysis.strategies import StrategyFacts

        return StrategyFacts(self)
