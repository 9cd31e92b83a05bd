"""Which functions TensorFlow traces into a graph.

A function is traced when it is

- decorated with ``tf.function`` in any spelling, with or without arguments;
- wrapped: ``g = tf.function(f)``, ``self.step = tf.function(self._step)``, ``tf.function(lambda ...)``;
- a Keras graph-compiled method: ``train_step``, ``test_step``, ``predict_step`` and ``call`` of a
  ``keras.layers.Layer`` / ``keras.Model`` subclass (directly or through classes of the module);
- passed to ``Dataset.map/filter/flat_map/interleave`` (tf.data traces it);
- called from traced code in the same module (transitively): ``helper(x)``, ``self.helper(x)``.

Functions handed to ``tf.py_function`` / ``tf.numpy_function`` run eagerly even when created
inside traced code; they and their bodies are not traced.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis

TF_FUNCTION = frozenset({"tensorflow.function", "tensorflow.compat.v1.function"})
KERAS_TRACED_METHODS = frozenset({"train_step", "test_step", "predict_step", "call"})
DATASET_TRACING_METHODS = frozenset({"map", "filter", "flat_map", "interleave", "parallel_interleave"})
EAGER_WRAPPERS = frozenset(
    {
        "tensorflow.py_function",
        "tensorflow.numpy_function",
        "tensorflow.compat.v1.py_func",
        "tensorflow.experimental.numpy_function",
    }
)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def is_keras_base(qualname: str | None) -> bool:
    if not qualname or not qualname.startswith("keras."):
        return False
    last = qualname.rsplit(".", 1)[-1]
    return (
        last in {"Layer", "Model", "Sequential", "Functional"}
        or qualname.startswith("keras.layers.")
        or qualname.startswith("keras.models.")
    )


class TracedFunctions:
    def __init__(self, analysis: "Analysis") -> None:
        self.a = analysis
        # function node -> human-readable reason ("decorated with @tf.function at line 3")
        self.reasons: dict[ast.AST, str] = {}
        self.eager: set[ast.AST] = set()  # functions passed to py_function & co.
        self.keras_classes: set[ast.ClassDef] = set()
        self._compute()

    # -- queries ---------------------------------------------------------------------------
    def is_traced_function(self, func: ast.AST) -> bool:
        return func in self.reasons

    def reason(self, func: ast.AST) -> str | None:
        return self.reasons.get(func)

    def traced_function_of(self, node: ast.AST) -> ast.AST | None:
        """The traced function whose body ``node`` runs in (innermost first), or ``None``."""
        for anc in self.a.ancestors(node):
            if isinstance(anc, _FUNCS):
                if anc in self.eager:
                    return None
                if anc in self.reasons:
                    return anc
        return None

    def is_traced(self, node: ast.AST) -> bool:
        return self.traced_function_of(node) is not None

    def is_keras_class(self, cls: ast.ClassDef | None) -> bool:
        return cls is not None and cls in self.keras_classes

    # -- computation -----------------------------------------------------------------------
    def _compute(self) -> None:
        a = self.a
        tree = a.tree
        classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
        by_name = {c.name: c for c in classes}

        # Keras subclasses, through module-level bases too (fixpoint).
        changed = True
        while changed:
            changed = False
            for c in classes:
                if c in self.keras_classes:
                    continue
                for b in c.bases:
                    if is_keras_base(a.qualname(b)) or (
                        isinstance(b, ast.Name) and by_name.get(b.id) in self.keras_classes
                    ):
                        self.keras_classes.add(c)
                        changed = True
                        break

        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in node.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    if a.qualname(target) in TF_FUNCTION:
                        self.reasons.setdefault(
                            node, f"decorated with @tf.function (line {dec.lineno})"
                        )
                cls = a.parent(node)
                if (
                    isinstance(cls, ast.ClassDef)
                    and cls in self.keras_classes
                    and node.name in KERAS_TRACED_METHODS
                ):
                    self.reasons.setdefault(
                        node, f"Keras traces `{cls.name}.{node.name}` into a graph"
                    )
            elif isinstance(node, ast.Call):
                name = a.call_name(node)
                if name in TF_FUNCTION and node.args:
                    for f in self._resolve_callable(node.args[0], node):
                        self.reasons.setdefault(f, f"wrapped with tf.function (line {node.lineno})")
                elif name in EAGER_WRAPPERS:
                    arg = node.args[0] if node.args else next(
                        (k.value for k in node.keywords if k.arg == "func"), None
                    )
                    if arg is not None:
                        self.eager.update(self._resolve_callable(arg, node))
                elif (
                    isinstance(node.func, ast.Attribute)
                    and node.func.attr in DATASET_TRACING_METHODS
                    and node.args
                    and self._is_dataset_receiver(node)
                ):
                    for f in self._resolve_callable(node.args[0], node):
                        self.reasons.setdefault(
                            f, f"passed to Dataset.{node.func.attr} (line {node.lineno}), which traces it"
                        )

        # Functions that traced code calls, transitively.
        work = list(self.reasons)
        while work:
            func = work.pop()
            for sub in ast.walk(func):
                if not isinstance(sub, ast.Call) or sub is func:
                    continue
                for callee in self._resolve_callable(sub.func, sub, called=True):
                    if callee not in self.reasons and callee not in self.eager and callee is not func:
                        name = getattr(func, "name", "<lambda>")
                        self.reasons[callee] = (
                            f"called from traced `{name}` (line {sub.lineno})"
                        )
                        work.append(callee)

    def _is_dataset_receiver(self, call: ast.Call) -> bool:
        facts = getattr(self.a, "datasets", None)
        try:
            if facts is not None and facts.is_dataset(call.func.value):  # type: ignore[attr-defined]
                return True
        except Exception:  # analysis of datasets must never break tracing facts
            pass
        # Keyword arguments only Dataset.map/interleave take.
        return any(k.arg in ("num_parallel_calls", "deterministic", "cycle_length") for k in call.keywords)

    def _resolve_callable(self, expr: ast.AST, at: ast.AST, called: bool = False) -> list[ast.AST]:
        """Function nodes of this module that ``expr`` may refer to."""
        if isinstance(expr, ast.Lambda):
            return [] if called else [expr]
        if isinstance(expr, ast.Call):
            # tf.function(f) inside another wrapper, or functools.partial(f, ...)
            name = self.a.call_name(expr)
            if expr.args and (name in TF_FUNCTION or name == "functools.partial"):
                return self._resolve_callable(expr.args[0], at)
            return []
        if isinstance(expr, ast.Name):
            if self.a.imports.aliases.get(expr.id):
                return []
            return self._lookup_function(expr.id, at)
        if (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id in ("self", "cls")
        ):
            cls = self.a.enclosing_class(at)
            if cls is None:
                return []
            return self._methods(cls, expr.attr)
        return []

    def _lookup_function(self, name: str, at: ast.AST) -> list[ast.AST]:
        # Innermost enclosing scope first: nested defs, then module-level defs.
        for anc in self.a.ancestors(at):
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                for stmt in anc.body:
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                        return [stmt]
        return []

    def _methods(self, cls: ast.ClassDef, name: str) -> list[ast.AST]:
        seen: set[str] = set()
        todo = [cls]
        by_name = {c.name: c for c in ast.walk(self.a.tree) if isinstance(c, ast.ClassDef)}
        while todo:
            c = todo.pop(0)
            if c.name in seen:
                continue
            seen.add(c.name)
            for stmt in c.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                    return [stmt]
            todo.extend(by_name[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in by_name)
        return []
