"""Loops, and which of them are training loops.

A training loop is a ``for``/``while`` loop whose body (not counting nested function
definitions) calls a traced function of the module, ``fit``/``train_on_batch``, an optimizer's
``apply_gradients``/``minimize``/``apply``, or ``tape.gradient``.
"""

from __future__ import annotations

import ast
import re
from functools import cached_property
from typing import TYPE_CHECKING

from tflint.analysis.astutil import walk_own as walk_body

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis

LoopNode = ast.For | ast.AsyncFor | ast.While
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
TRAINING_METHODS = frozenset(
    {"fit", "train_on_batch", "apply_gradients", "minimize", "apply", "gradient", "train_step"}
)


class LoopFacts:
    def __init__(self, analysis: "Analysis") -> None:
        self.a = analysis

    @cached_property
    def loops(self) -> list[LoopNode]:
        return [n for n in self.a.nodes(*_LOOPS) if isinstance(n, _LOOPS)]

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
                if any(traced.is_module_traced(t) for t in targets):
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
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and traced.is_module_traced(stmt):
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

    # -- per-iteration values --------------------------------------------------------------
    def python_scalars(self, loop: LoopNode) -> dict[str, str]:
        """Names holding a Python number that changes every iteration, with how: the index of
        ``for i in range(...)`` / ``enumerate(...)`` / a literal list of numbers /
        ``itertools.count()``, and counters (``i += 1`` on a name only ever bound to numbers)."""
        cache = self.__dict__.setdefault("_scalars", {})
        got = cache.get(loop)
        if got is not None:
            return got
        out: dict[str, str] = {}
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            for name, how in self._scalar_targets(loop.target, loop.iter):
                out[name] = how
        scope = self.a.enclosing_function(loop) or self.a.tree
        traced = self.a.traced
        for node in walk_body(loop.body):
            if (
                isinstance(node, ast.AugAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(node.op, (ast.Add, ast.Sub))
                and _is_number(node.value)
            ):
                values = traced.bindings(node.target.id, scope)
                if values and all(_is_number(v) for v in values):
                    out.setdefault(node.target.id, f"counter incremented on line {node.lineno}")
        # names computed from those by plain arithmetic: `lr = base_lr * 0.5 ** epoch`
        assigns = [
            n for n in walk_body(loop.body)
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
        ]
        changed = True
        while changed:
            changed = False
            for node in assigns:
                name = node.targets[0].id
                if name not in out and _scalar_expr(node.value, out, self.a):
                    out[name] = f"computed from the loop value on line {node.lineno}"
                    changed = True
        cache[loop] = out
        return out

    def _scalar_targets(self, target: ast.AST, it: ast.AST):
        if not isinstance(it, ast.Call):
            if isinstance(it, (ast.List, ast.Tuple)) and it.elts and all(_is_number(e) for e in it.elts):
                if isinstance(target, ast.Name):
                    yield target.id, f"loop value from the list on line {it.lineno}"
            return
        name = self.a.call_name(it)
        f = it.func
        builtin = isinstance(f, ast.Name) and self.a.qualname(f) is None
        if (builtin and f.id == "range") or name in ("itertools.count", "six.moves.range"):
            if isinstance(target, ast.Name):
                yield target.id, f"loop index from `{f.id if builtin else name}(...)` on line {it.lineno}"
        elif builtin and f.id == "enumerate":
            if isinstance(target, (ast.Tuple, ast.List)) and target.elts and isinstance(target.elts[0], ast.Name):
                yield target.elts[0].id, f"loop index from `enumerate(...)` on line {it.lineno}"
        elif builtin and f.id == "zip" and isinstance(target, (ast.Tuple, ast.List)):
            for el, arg in zip(target.elts, it.args):
                yield from self._scalar_targets(el, arg)

    def varying_names(self, loop: LoopNode) -> set[str]:
        """Names whose value comes from the current iteration: the ``for`` targets, counters,
        names bound from ``next(...)`` in the body, and names computed from those."""
        cache = self.__dict__.setdefault("_varying", {})
        got = cache.get(loop)
        if got is not None:
            return got
        names = set(self.loop_variables(loop))
        assigns = [n for n in walk_body(loop.body) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))]
        changed = True
        while changed:
            changed = False
            for node in assigns:
                value = node.value
                if value is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                new = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)} - names
                if not new:
                    continue
                if _uses(value, names) or any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "next"
                    for c in ast.walk(value)
                ):
                    names |= new
                    changed = True
        cache[loop] = names
        return names

    def is_over_runs(self, loop: LoopNode) -> bool:
        """Whether a loop iterates a few runs rather than data: epochs, folds, checkpoints,
        trials (``for epoch in range(epochs)``, ``for ckpt in checkpoints``), or a fixed
        collection of datasets/models (``for name, ds in sets.items()``, ``for m in [a, b]``)."""
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            return False
        words = " ".join(
            [n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)]
            + [n.id for n in ast.walk(loop.iter) if isinstance(n, ast.Name)]
            + [n.attr for n in ast.walk(loop.iter) if isinstance(n, ast.Attribute)]
        ).lower()
        tokens = set(re.split(r"[^a-z]+", words))
        if any(w in tokens or w + "s" in tokens for w in _RUN_WORDS):
            return True
        it = loop.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values", "keys"):
            return True
        return isinstance(it, (ast.List, ast.Tuple)) and all(
            isinstance(e, (ast.Name, ast.Attribute, ast.Tuple)) for e in it.elts
        )


_RUN_WORDS = ("epoch", "ep", "fold", "ckpt", "checkpoint", "trial", "seed", "round", "repeat", "run", "config")


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _scalar_expr(expr: ast.AST, scalars: dict[str, str], a: "Analysis") -> bool:
    """Arithmetic on numbers and the names in ``scalars`` that uses at least one of those names."""
    used = False
    for n in ast.walk(expr):
        if isinstance(n, ast.Name):
            if n.id in scalars:
                used = True
            elif not (n.id in ("int", "float", "round", "abs", "min", "max") and a.qualname(n) is None):
                return False
        elif isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name):
                return False
        elif not isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop, ast.Load)):
            return False
    return used


def _uses(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))
