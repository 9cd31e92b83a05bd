"""Keras models built in the module and their last layer (a fact of :class:`Analysis`).

``Analysis.models.last_layer(model, at)`` tells the last layer of the model that the name
``model`` holds at ``at`` (a ``Sequential`` list or ``.add`` calls, a functional
``keras.Model(inputs, outputs)``, or a function of the module returning one) and the activation
it ends with: ``"softmax"``, ``"sigmoid"``, ``"linear"`` or ``"other"``.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from tflint.analysis.loops import walk_body

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_ACTIVATION_FUNCS = {
    "tensorflow.nn.softmax": "softmax",
    "tensorflow.math.softmax": "softmax",
    "keras.activations.softmax": "softmax",
    "tensorflow.nn.sigmoid": "sigmoid",
    "tensorflow.sigmoid": "sigmoid",
    "tensorflow.math.sigmoid": "sigmoid",
    "keras.activations.sigmoid": "sigmoid",
    "keras.activations.linear": "linear",
}
_DENSE_LIKE = frozenset({"keras.layers.Dense", "keras.layers.core.Dense"})
_SEQUENTIAL = frozenset({"keras.Sequential", "keras.models.Sequential"})
_FUNCTIONAL = frozenset({"keras.Model", "keras.models.Model"})


class ModelFacts:
    def __init__(self, analysis: "Analysis") -> None:
        self.a = analysis

    def last_layer(self, model: ast.AST, at: ast.AST, depth: int = 0) -> tuple[ast.AST, str] | None:
        """(layer node, "softmax" | "sigmoid" | "linear" | other) of the model's last layer."""
        a = self.a
        if depth > 3:
            return None
        if isinstance(model, ast.Name):
            scope = a.enclosing_function(at)
            value = self.single_value(model.id, at)
            if value is None:
                return None
            if isinstance(value, ast.Call):
                q = a.call_name(value)
                if q in _SEQUENTIAL:
                    return self._sequential_last(value, model.id, scope)
                if q in _FUNCTIONAL:
                    return self._functional_last(value)
                # model = build(): a function of the module returning a model
                for f in a.functions.get(value.func.id, []) if isinstance(value.func, ast.Name) else []:
                    rets = [n for n in walk_body(list(f.body)) if isinstance(n, ast.Return) and n.value is not None]
                    if len(rets) == 1:
                        return self._last_of_expr(rets[0].value, rets[0], depth + 1)
            return None
        return None

    def _last_of_expr(self, expr: ast.AST, at: ast.AST, depth: int) -> tuple[ast.AST, str] | None:
        a = self.a
        if isinstance(expr, ast.Call):
            q = a.call_name(expr)
            if q in _SEQUENTIAL:
                return self._sequential_last(expr, None, None)
            if q in _FUNCTIONAL:
                return self._functional_last(expr)
        if isinstance(expr, ast.Name):
            return self.last_layer(expr, at, depth + 1)
        return None

    def _sequential_last(self, call: ast.Call, name: str | None, scope) -> tuple[ast.AST, str] | None:
        last = None
        layers = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "layers"), None)
        if isinstance(layers, (ast.List, ast.Tuple)) and layers.elts:
            last = layers.elts[-1]
        elif layers is not None:
            return None
        if name is not None:
            body = scope.body if isinstance(scope, _FUNCS) else self.a.tree.body
            adds = [
                n for n in walk_body(body)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add"
                and isinstance(n.func.value, ast.Name) and n.func.value.id == name and n.args
            ]
            if adds:
                last = max(adds, key=lambda n: (n.lineno, n.col_offset)).args[0]
        if last is None:
            return None
        act = self.layer_activation(last)
        return (last, act) if act else None

    def _functional_last(self, call: ast.Call) -> tuple[ast.AST, str] | None:
        outputs = call.args[1] if len(call.args) >= 2 else next((k.value for k in call.keywords if k.arg == "outputs"), None)
        depth = 0
        while isinstance(outputs, ast.Name) and depth < 4:
            outputs = self.single_value(outputs.id, call)
            depth += 1
        # outputs = Layer(...)(x)
        if isinstance(outputs, ast.Call) and isinstance(outputs.func, ast.Call):
            act = self.layer_activation(outputs.func)
            return (outputs, act) if act else None
        return None

    def layer_activation(self, layer: ast.AST) -> str | None:
        a = self.a
        if not isinstance(layer, ast.Call):
            return None
        q = a.call_name(layer) or ""
        last = q.rsplit(".", 1)[-1]
        if q == "keras.layers.Softmax":
            return "softmax"
        if q == "keras.layers.Activation":
            arg = layer.args[0] if layer.args else next((k.value for k in layer.keywords if k.arg == "activation"), None)
            return self._activation_value(arg)
        if q in _DENSE_LIKE or (q.startswith("keras.layers.") and last in ("Dense", "EinsumDense")):
            arg = layer.args[1] if len(layer.args) >= 2 else next((k.value for k in layer.keywords if k.arg == "activation"), None)
            if arg is None:
                return "linear"
            return self._activation_value(arg)
        return None

    def _activation_value(self, arg: ast.AST | None) -> str | None:
        if arg is None:
            return None
        if isinstance(arg, ast.Constant):
            if arg.value is None:
                return "linear"
            if isinstance(arg.value, str):
                return arg.value if arg.value in ("softmax", "sigmoid", "linear") else "other"
            return None
        q = self.a.qualname(arg)
        return _ACTIVATION_FUNCS.get(q or "", None)

    def single_value(self, name: str, at: ast.AST) -> ast.AST | None:
        """The value of the only assignment to ``name`` in the scope of ``at`` (or the module)."""
        a = self.a
        func = a.enclosing_function(at)
        bodies = [func.body] if isinstance(func, _FUNCS) else []
        bodies.append(self.a.tree.body)
        for body in bodies:
            values = []
            for n in walk_body(body):
                if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                        values.append(n.value)
            if len(values) == 1:
                return values[0]
            if values:
                return None
        return None
