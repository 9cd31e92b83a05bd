"""Loops, and which of them are training loops.

A training loop is a ``for``/``while`` loop whose body (not counting nested function
definitions) calls a traced function of the module, ``fit``/``train_on_batch``, an optimizer's
``apply_gradients``/``minimize``/``apply``, or ``tape.gradient``.
"""

from __future__ import annotations

import ast
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis

LoopNode = ast.For | ast.AsyncFor | ast.While
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
TRAINING_METHODS = frozenset(
    {"fit", "train_on_batch", "apply_gradients", "minimize", "apply", "gradient", "train_step"}
)


def walk_body(nodes: list[ast.AST]):
    """Walk statements without descending into nested functions or classes."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _FUNCS):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


class LoopFacts:
    def __init__(self, analysis: "Analysis") -> None:
        self.a = analysis

    @cached_property
    def loops(self) -> list[LoopNode]:
        return [n for n in ast.walk(self.a.tree) if isinstance(n, _LOOPS)]

    def enclosing_loops(self, node: ast.AST) -> list[LoopNode]:
        """Loops around ``node`` in the same function, innermost first (a loop's own
        ``iter``/``test`` does not count as inside it)."""
        out: list[LoopNode] = []
        child = node
        for anc in self.a.ancestors(node):
            if isinstance(anc, _FUNCS):
                break
            if isinstance(anc, _LOOPS) and child in (*anc.body, *anc.orelse):
                out.append(anc)
            child = anc
        return out

    @cached_property
    def _training(self) -> dict[LoopNode, bool]:
        traced = self.a.traced
        result: dict[LoopNode, bool] = {}
        for loop in self.loops:
            is_training = False
            for node in walk_body(loop.body):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                if isinstance(f, ast.Attribute) and f.attr in TRAINING_METHODS:
                    is_training = True
                    break
                targets = traced._resolve_callable(f, node, called=True)
                if any(traced.is_traced_function(t) for t in targets):
                    is_training = True
                    break
                if isinstance(f, ast.Name) and f.id in self.traced_names:
                    is_training = True
                    break
            result[loop] = is_training
        return result

    @cached_property
    def traced_names(self) -> set[str]:
        """Module-level names bound to traced callables (``step = tf.function(f)`` or a
        ``@tf.function`` def)."""
        names: set[str] = set()
        traced = self.a.traced
        for stmt in self.a.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and traced.is_traced_function(stmt):
                names.add(stmt.name)
            elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                from tflint.analysis.traced import TF_FUNCTION

                if self.a.call_name(stmt.value) in TF_FUNCTION:
                    names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        return names

    def is_training_loop(self, loop: LoopNode) -> bool:
        return self._training.get(loop, False)

    def in_training_loop(self, node: ast.AST) -> LoopNode | None:
        """The innermost training loop around ``node`` in the same function, if any."""
        for loop in self.enclosing_loops(node):
            if self.is_training_loop(loop):
                return loop
        return None

    def loop_variables(self, loop: LoopNode) -> set[str]:
        """Names that change every iteration: the ``for`` target(s) and names augmented
        (``i += 1``) in the body."""
        names: set[str] = set()
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            names.update(n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name))
        for node in walk_body(loop.body):
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
        return names
