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
"""

from __future__ import annotations

import ast
from functools import cached_property
from typing import Any

from tflint.analysis.imports import ImportMap

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class Analysis:
    def __init__(self, tree: ast.Module, source: str = "") -> None:
        self.tree = tree
        self.source = source

    @cached_property
    def imports(self) -> ImportMap:
        return ImportMap(self.tree)

    @cached_property
    def parents(self) -> dict[ast.AST, ast.AST]:
        parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        return parents

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(node)

    def ancestors(self, node: ast.AST):
        p = self.parents.get(node)
        while p is not None:
            yield p
            p = self.parents.get(p)

    def enclosing_function(self, node: ast.AST) -> FunctionNode | None:
        for a in self.ancestors(node):
            if isinstance(a, _FUNCS):
                return a
        return None

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        for a in self.ancestors(node):
            if isinstance(a, ast.ClassDef):
                return a
        return None

    def qualname(self, expr: ast.AST | None) -> str | None:
        """Qualified name of ``expr``, following assignments in its own function."""
        if expr is None:
            return None
        return self.imports.qualname(expr, self.enclosing_function(expr))

    def call_name(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Call):
            return self.qualname(node.func)
        return None

    @cached_property
    def functions(self) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
        """Every ``def`` in the module by name (module-level, nested and methods)."""
        out: dict[str, list[Any]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(node.name, []).append(node)
        return out

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
