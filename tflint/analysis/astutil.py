"""Small syntax-tree helpers shared by the analysis modules and rules."""

from __future__ import annotations

import ast
from collections.abc import Iterator

SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def walk_own(nodes: list[ast.AST]) -> Iterator[ast.AST]:
    """Pre-order walk of ``nodes`` that does not descend into nested functions, lambdas or
    classes (their own node is yielded, their bodies are not)."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, SCOPE_NODES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def dotted(expr: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def flatten_targets(expr: ast.AST) -> Iterator[ast.AST]:
    """The leaves of an assignment target or sequence: ``a, (b, *c)`` → ``a``, ``b``, ``c``."""
    if isinstance(expr, (ast.Tuple, ast.List)):
        for el in expr.elts:
            yield from flatten_targets(el)
    elif isinstance(expr, ast.Starred):
        yield from flatten_targets(expr.value)
    else:
        yield expr
