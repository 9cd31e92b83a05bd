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


# --- positions -------------------------------------------------------------------------------
# Rules speak ``ast`` positions: 1-based lines and UTF-8 byte columns. These helpers read the
# source between such positions and build the edits of structural fixes from it.


def text_between(ctx: RuleContext, start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source text from ``start`` to ``end`` (``(line, byte column)`` pairs)."""
    lines = _lines(ctx)
    (l1, c1), (l2, c2) = start, end
    if l1 == l2:
        return lines[l1 - 1].encode()[c1:c2].decode()
    parts = [lines[l1 - 1].encode()[c1:].decode()]
    parts.extend(lines[l1:l2 - 1])
    parts.append(lines[l2 - 1].encode()[:c2].decode())
    return "".join(parts)


def _lines(ctx: RuleContext) -> list[str]:
    cached = getattr(ctx, "_fix_lines", None)
    if cached is None:
        # ``str.splitlines`` also breaks at form feeds and other separators that the parser
        # keeps inside a line: the parser's lines end at ``\n``/``\r`` only.
        cached = _parser_lines(ctx.source)
        ctx._fix_lines = cached  # type: ignore[attr-defined]
    return cached


def _parser_lines(text: str) -> list[str]:
    out, start, i, n = [], 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n" or c == "\r":
            if c == "\r" and i + 1 < n and text[i + 1] == "\n":
                i += 1
            out.append(text[start:i + 1])
            start = i + 1
        i += 1
    out.append(text[start:])
    return out


def text_lines(ctx: RuleContext, first: int, last: int) -> list[str]:
    """Source lines ``first``..``last`` (1-based, inclusive), with their line breaks."""
    return _lines(ctx)[first - 1 : last]


def start_of(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def end_of(node: ast.AST) -> tuple[int, int]:
    return node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]


def replace_span(start: tuple[int, int], end: tuple[int, int], content: str) -> Edit:
    return Edit(start[0], start[1], end[0], end[1], content)


# --- call chains ---------------------------------------------------------------------------


def chain_receivers(call: ast.Call) -> list[ast.Call]:
    """The method calls below ``call`` in one expression chain, nearest first
    (``a.b().c().d()`` → the ``c()`` and ``b()`` calls for ``d()``)."""
    out: list[ast.Call] = []
    cur = call.func.value if isinstance(call.func, ast.Attribute) else None
    while isinstance(cur, ast.Call) and isinstance(cur.func, ast.Attribute):
        out.append(cur)
        cur = cur.func.value
    return out


def move_step_before(ctx: RuleContext, step: ast.Call, before: ast.Call) -> Edit | None:
    """Move the method call ``step`` (``.cache()``) to just before ``before`` in the same
    expression chain (``x.map(f).batch(2).cache()`` → ``x.cache().map(f).batch(2)``).

    ``None`` when the two are not links of one chain expression (e.g. split over statements).
    """
    if before not in chain_receivers(step) or not isinstance(before.func, ast.Attribute):
        return None
    root_end = end_of(before.func.value)
    lower = text_between(ctx, root_end, end_of(step.func.value))  # ".map(f).batch(2)"
    moved = text_between(ctx, end_of(step.func.value), end_of(step))  # ".cache()"
    if "#" in moved:
        return None  # the comment before the moved call belongs to the line it ends
    return replace_span(root_end, end_of(step), moved + lower)


# --- calls -----------------------------------------------------------------------------------


def set_keyword(ctx: RuleContext, call: ast.Call, name: str, value: str) -> Edit:
    """Set keyword ``name`` of ``call`` to the source text ``value`` (replacing or adding it)."""
    for kw in call.keywords:
        if kw.arg == name:
            return replace_span(start_of(kw.value), end_of(kw.value), value)
    last = None
    for node in (*call.args, *call.keywords):
        if last is None or end_of(node) > end_of(last):
            last = node
    if last is None:
        # ``f()`` → ``f(name=value)``: insert before the closing parenthesis
        line, col = end_of(call)
        return Edit(line, col - 1, line, col - 1, f"{name}={value}")
    line, col = end_of(last)
    return Edit(line, col, line, col, f", {name}={value}")


def wrap(node: ast.AST, before: str, after: str) -> tuple[Edit, Edit]:
    """Two insertions putting ``node`` between ``before`` and ``after``."""
    (l1, c1), (l2, c2) = start_of(node), end_of(node)
    return Edit(l1, c1, l1, c1, before), Edit(l2, c2, l2, c2, after)


def insert_first_in_block(ctx: RuleContext, body: list[ast.stmt], statement: str) -> Edit | None:
    """Insert ``statement`` as the first statement of ``body`` (an indented block)."""
    first = body[0]
    line_text = _lines(ctx)[first.lineno - 1]
    indent = line_text.encode()[: first.col_offset].decode()
    if indent.strip():
        return None  # the block shares its line with the header (``with x: y``)
    return Edit(first.lineno, 0, first.lineno, 0, f"{indent}{statement}\n")
