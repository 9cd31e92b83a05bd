"""Building blocks for fixes that rules share."""

from __future__ import annotations

import ast

from tflint.finding import Edit
from tflint.rules.base import RuleContext


def tensorflow_alias(ctx: RuleContext) -> tuple[str, tuple[Edit, ...]]:
    """The name this module uses for ``tensorflow``, and the edits that add an import if none.

    Prefers a module-level ``import tensorflow as X`` / ``import tensorflow``; otherwise inserts
    ``import tensorflow as tf`` after the docstring and ``__future__`` imports.
    """
    for name, target in sorted(ctx.analysis.imports.aliases.items()):
        if target == "tensorflow" and _bound_at_module_level(ctx.tree, name):
            return name, ()
    line = 1
    body = ctx.tree.body
    i = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
        line = body[0].end_lineno + 1
        i = 1
    while i < len(body) and isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__":
        line = body[i].end_lineno + 1
        i += 1
    return "tf", (Edit(line, 0, line, 0, "import tensorflow as tf\n"),)


def _bound_at_module_level(tree: ast.Module, name: str) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if (a.asname or a.name.split(".")[0]) == name and a.name == "tensorflow":
                    return True
    return False
