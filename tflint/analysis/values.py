"""Where a value comes from, for the rules that need more than "is it a tensor".

Built on the scope facts of :mod:`tflint.analysis.traced` (``defining_scope``, ``bindings``,
``self_attr_values``), so every rule asks the same questions the same way:

- :func:`origins` — the expressions a name or ``self.attr`` may hold where it is read;
- :func:`is_plain_python` — a number, string, bool, ``None`` or arithmetic on them;
- :func:`number_constant` — a name bound only to number literals (``LIMIT = 1250``);
- :func:`rebinding_sites` — where a module global or a ``self`` attribute is rebound, and
  whether each site runs eagerly (outside traced code).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from tflint.analysis.astutil import flatten_targets

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis


def origins(a: "Analysis", expr: ast.AST) -> list[ast.AST] | None:
    """Values ``expr`` (a Name or ``self.attr``) may hold: the right-hand sides bound to it in
    its defining scope (or in the methods of its class); ``None`` when it cannot be told
    (a parameter, an import, an unknown attribute)."""
    traced = a.traced
    if isinstance(expr, ast.Name):
        if a.imports.aliases.get(expr.id):
            return None
        scope = traced.defining_scope(expr.id, expr)
        if scope is None:
            return None
        values = traced.bindings(expr.id, scope)
        return values or None
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        values = traced.self_attr_values(a.enclosing_class(expr), expr.attr)
        return values or None
    return None


def is_plain_python(value: ast.AST | None, _depth: int = 0) -> bool:
    """A Python number, string or bool literal, or arithmetic on such literals and names
    (``lr * 0.5``, ``-1``)."""
    if value is None or _depth > 6:
        return False
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (int, float, str, bool))
    if isinstance(value, ast.UnaryOp):
        return is_plain_python(value.operand, _depth + 1)
    if isinstance(value, ast.BinOp):
        sides = (value.left, value.right)
        return any(is_plain_python(s, _depth + 1) for s in sides) and all(
            is_plain_python(s, _depth + 1) or isinstance(s, (ast.Name, ast.Attribute)) for s in sides
        )
    return False


def _assignments(node: ast.AST):
    """(target, value or None for augmented) of an assignment statement."""
    if isinstance(node, ast.Assign):
        for t in node.targets:
            for el in flatten_targets(t):
                yield el, node.value
    elif isinstance(node, ast.AugAssign):
        yield node.target, node
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        yield node.target, node.value


def number_constant(a: "Analysis", name: ast.Name) -> bool:
    """``name`` holds a Python number where it is read: every binding of it in its defining
    scope is an int or float literal (``LIMIT = 1250``), and it is bound no other way there (no
    loop target, counter, parameter or import) nor declared ``global`` by any function."""
    values = origins(a, name)
    if not values or not all(is_number_literal(v) for v in values):
        return False
    scope = a.traced.defining_scope(name.id, name)
    if scope is None or _store_count(scope, name.id) != len(values) or name.id in _params(scope):
        return False
    if isinstance(scope, ast.Module):
        return not any(name.id in g.names for g in a.nodes(ast.Global))
    return True


def number_value(a: "Analysis", expr: ast.AST | None) -> int | float | None:
    """The Python number ``expr`` holds: a literal (``1``, ``-0.5``), or a name that
    :func:`number_constant` holds bound to one value (``batch_size = 1``); else ``None``."""
    if isinstance(expr, ast.Name):
        if not number_constant(a, expr):
            return None
        values = {_literal(v) for v in origins(a, expr) or ()}
        return values.pop() if len(values) == 1 else None
    return _literal(expr) if expr is not None and is_number_literal(expr) else None


def _literal(node: ast.AST) -> int | float:
    if isinstance(node, ast.UnaryOp):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    return node.value


def is_number_literal(node: ast.AST) -> bool:
    """An int or float literal, signed or not (``3``, ``-0.5``); not a bool."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def global_rebinding_sites(a: "Analysis") -> dict[str, list[tuple[ast.AST, ast.AST]]]:
    """Module globals that eager code changes over time: name -> [(statement, value)] for each
    such rebinding: at module level inside a loop or augmented (``lr *= 0.5``), or in an
    untraced function that declares the name ``global`` and increments it, computes it from
    its old value or rebinds it in a loop. A setter (``global FLAG; FLAG = True``) is not one."""
    memo = a.__dict__.get("_global_rebinds")
    if memo is not None:
        return memo
    out: dict[str, list[tuple[ast.AST, ast.AST]]] = {}
    traced = a.traced
    module_bound: dict[str, int] = {}
    for node in a.nodes(ast.Assign, ast.AugAssign, ast.AnnAssign):
        func = a.enclosing_function(node)
        for target, value in _assignments(node):
            if not isinstance(target, ast.Name):
                continue
            name = target.id
            if func is None:
                if a.enclosing_class(node) is not None:
                    continue
                in_loop = any(isinstance(p, (ast.For, ast.While, ast.AsyncFor)) for p in a.ancestors(node))
                module_bound[name] = module_bound.get(name, 0) + 1
                if in_loop or isinstance(node, ast.AugAssign):
                    out.setdefault(name, []).append((node, value))
            elif name in traced.declared_outer(func) and isinstance(traced.declared_outer(func)[name], ast.Global):
                if traced.is_traced_function(func) or traced.is_traced(node):
                    continue
                # changed over time (a counter, a decay, a loop), not set once by a setter
                in_loop = any(isinstance(p, (ast.For, ast.While, ast.AsyncFor)) for p in a.ancestors(node))
                if isinstance(node, ast.AugAssign) or in_loop or _mentions_name(value, name):
                    out.setdefault(name, []).append((node, value))
    a.__dict__["_global_rebinds"] = out
    return out


def eager_self_updates(a: "Analysis", cls: ast.ClassDef | None, attr: str) -> list[ast.AST]:
    """Statements of ``cls``'s eager (untraced) methods, other than ``__init__``/``build``,
    that update ``self.<attr>`` in place: ``self.x += 1`` or ``self.x = self.x * 0.5``."""
    if cls is None:
        return []
    memo = a.__dict__.setdefault("_eager_self_updates", {})
    table = memo.get(cls)
    if table is None:
        table = memo[cls] = {}
        traced = a.traced
        for stmt in cls.body:
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or stmt.name in ("__init__", "build"):
                continue
            if traced.is_traced_function(stmt):
                continue
            for node in ast.walk(stmt):
                if not isinstance(node, (ast.Assign, ast.AugAssign)) or traced.is_traced(node):
                    continue
                for target, value in _assignments(node):
                    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
                        continue
                    if isinstance(node, ast.AugAssign) or _mentions_self_attr(value, target.attr):
                        table.setdefault(target.attr, []).append(node)
    return table.get(attr, [])


def _mentions_name(value: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value))


def _mentions_self_attr(value: ast.AST, attr: str) -> bool:
    return any(
        isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.value, ast.Name) and n.value.id == "self"
        for n in ast.walk(value)
    )


def producers(a: "Analysis", expr: ast.AST, _depth: int = 0) -> list[ast.AST] | None:
    """The expressions that produce the value of ``expr``, followed through names bound in
    their scope, ``self`` attributes, indexing, list/tuple literals and the return values of
    the module's own functions; a call of a name bound to a model constructor
    (``model = keras.Sequential([...])``; ``model(x)``) gives the constructor call. ``None``
    when some origin cannot be told (a parameter, an import, a loop variable)."""
    if _depth > 6:
        return None
    traced = a.traced
    if isinstance(expr, ast.Name):
        if a.imports.aliases.get(expr.id):
            return None
        scope = traced.defining_scope(expr.id, expr)
        if scope is None:
            return None
        if not isinstance(scope, ast.Module) and expr.id in traced.local_names(scope) and expr.id in _params(scope):
            return None
        values = traced.bindings(expr.id, scope)
        if not values or len(values) != _store_count(scope, expr.id):
            return None  # also bound by a loop, `with`, augmented assignment...
        return _union(a, values, _depth)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        values = traced.self_attr_values(a.enclosing_class(expr), expr.attr)
        return _union(a, values, _depth) if values else None
    if isinstance(expr, ast.Subscript):
        return producers(a, expr.value, _depth + 1)
    if isinstance(expr, (ast.List, ast.Tuple)):
        return _union(a, expr.elts, _depth) if expr.elts else None
    if isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Name) and not a.imports.aliases.get(f.id):
            defs = a.lookup_function(f.id, expr)
            if defs:
                from tflint.analysis.astutil import walk_own

                returns = [n.value for n in walk_own(defs[0].body) if isinstance(n, ast.Return) and n.value is not None]
                return _union(a, returns, _depth) if returns else None
            scope = traced.defining_scope(f.id, expr)
            if scope is not None:
                values = traced.bindings(f.id, scope)
                if len(values) == 1 and isinstance(values[0], ast.Call):
                    return [values[0]]  # calling what a constructor built (a model, a layer)
            return None
        if isinstance(f, ast.Attribute) and f.attr in _TENSOR_ARRAY_READS and isinstance(f.value, ast.Name):
            written = _tensor_array_writes(a, f.value)
            if written is not None:
                return _union(a, written, _depth) if written else None
        return [expr]
    return [expr]


_TENSOR_ARRAY_READS = frozenset({"stack", "read", "gather", "concat"})
_TENSOR_ARRAY_WRITES = {"write": 1, "unstack": 0, "scatter": 1, "split": 0}


def _tensor_array_writes(a: "Analysis", name: ast.Name) -> list[ast.AST] | None:
    """The values written into the ``tf.TensorArray`` that ``name`` holds, when every binding
    of ``name`` in its scope is ``tf.TensorArray(...)`` or ``name.write(i, value)`` (and the
    like); ``None`` when ``name`` is not known to be such a TensorArray."""
    traced = a.traced
    scope = traced.defining_scope(name.id, name)
    if scope is None:
        return None
    values = traced.bindings(name.id, scope)
    if not values or len(values) != _store_count(scope, name.id):
        return None
    made = False
    written: list[ast.AST] = []
    for v in values:
        if not isinstance(v, ast.Call):
            return None
        q = a.call_name(v)
        if q in ("tensorflow.TensorArray", "tensorflow.experimental.TensorArray"):
            made = True
            continue
        f = v.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == name.id
                and f.attr in _TENSOR_ARRAY_WRITES):
            return None
    if not made:
        return None
    from tflint.analysis.astutil import walk_own

    body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
    for node in walk_own(body):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name.id
            and node.func.attr in _TENSOR_ARRAY_WRITES
        ):
            i = _TENSOR_ARRAY_WRITES[node.func.attr]
            if len(node.args) > i:
                written.append(node.args[i])
    return written


def _union(a: "Analysis", values, depth: int) -> list[ast.AST] | None:
    out: list[ast.AST] = []
    for v in values:
        got = producers(a, v, depth + 1)
        if got is None:
            return None
        out.extend(got)
    return out


def _params(func: ast.AST) -> set[str]:
    args = getattr(func, "args", None)
    if args is None:
        return set()
    names = {x.arg for x in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names.update(x.arg for x in (args.vararg, args.kwarg) if x is not None)
    return names


def _store_count(scope: ast.AST, name: str) -> int:
    """How many times ``name`` is bound in ``scope`` (any kind of binding, own scope only)."""
    from tflint.analysis.astutil import walk_own

    body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
    n = 0
    for node in walk_own(body):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)):
            n += 1
    return n
