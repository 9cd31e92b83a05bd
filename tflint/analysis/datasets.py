"""tf.data chains across statements.

Minimal version: ``is_dataset(expr)`` tells whether an expression evaluates to a
``tf.data.Dataset`` — a ``tf.data.*`` constructor, a method chain on one, or a name bound to one.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis

DATASET_ROOTS = ("tensorflow.data.", "keras.utils.image_dataset_from_directory",
                 "keras.utils.text_dataset_from_directory", "keras.utils.timeseries_dataset_from_array",
                 "keras.preprocessing.image_dataset_from_directory")


class DatasetFacts:
    def __init__(self, analysis: "Analysis") -> None:
        self.a = analysis
        self._assigned: dict[tuple[int, str], list[ast.AST]] = {}
        for node in ast.walk(analysis.tree):
            if isinstance(node, ast.Assign):
                scope = analysis.enclosing_function(node)
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self._assigned.setdefault((id(scope), t.id), []).append(node.value)

    def is_dataset(self, expr: ast.AST, _depth: int = 0) -> bool:
        if _depth > 20:
            return False
        node = expr
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        if isinstance(node, ast.Call):
            q = self.a.call_name(node)
            return bool(q) and q.startswith(DATASET_ROOTS)
        if isinstance(node, ast.Name):
            scope = self.a.enclosing_function(node)
            for value in self._assigned.get((id(scope), node.id), []):
                if value is not expr and self.is_dataset(value, _depth + 1):
                    return True
            return False
        if isinstance(node, ast.Attribute):
            q = self.a.qualname(node)
            return bool(q) and q.startswith(DATASET_ROOTS)
        return False
