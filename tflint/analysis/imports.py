"""Import and alias resolution: what a name or attribute chain refers to.

``ImportMap.qualname(expr)`` turns ``tf.nn.relu`` into ``tensorflow.nn.relu`` and
``layers.Dense`` (after ``from tensorflow.keras import layers``) into ``keras.layers.Dense``.
Spellings of the same API are normalised so rules compare one name:
``tensorflow.keras.*``, ``tf_keras.*`` and ``tensorflow.python.keras.*`` become ``keras.*``;
``tensorflow.compat.v2.*`` becomes ``tensorflow.*``.

Names bound once in a scope to a call are followed too: after ``rng = np.random.default_rng()``
``rng.normal`` resolves to ``numpy.random.default_rng().normal``.
"""

from __future__ import annotations

import ast

_NORMALISE = (
    ("tensorflow.compat.v2.", "tensorflow."),
    ("tensorflow.python.keras.", "keras."),
    ("tensorflow.keras.", "keras."),
    ("tf_keras.", "keras."),
    ("keras.src.", "keras."),
    ("tensorflow.python.eager.def_function.function", "tensorflow.function"),
    ("tensorflow.python.eager.polymorphic_function.polymorphic_function.function", "tensorflow.function"),
)


def normalise(name: str) -> str:
    probe = name + "."
    for old, new in _NORMALISE:
        if probe.startswith(old) or name == old:
            name = new + probe[len(old):]
            name = name[:-1] if name.endswith(".") else name
            probe = name + "."
    if name in ("tensorflow.keras", "tf_keras", "tensorflow.python.keras"):
        return "keras"
    return name


class ImportMap:
    """Module-wide import aliases plus single-assignment call origins per scope."""

    def __init__(self, analysis) -> None:
        self.aliases: dict[str, str] = {}
        # names bound by imports anywhere in the module (function-level imports included)
        for node in analysis.nodes(ast.Import, ast.ImportFrom):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = normalise(a.name)
                    else:
                        root = a.name.split(".")[0]
                        self.aliases[root] = normalise(root)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                base = node.module
                for a in node.names:
                    if a.name == "*":
                        continue
                    self.aliases[a.asname or a.name] = normalise(f"{base}.{a.name}")
        self._origins = _origins_from(analysis)
        self._resolving: set[tuple[int, str]] = set()  # guards `x = x()` and other cycles

    @property
    def modules(self) -> set[str]:
        """Top-level packages imported by the module (``tensorflow``, ``keras``, ``numpy``...)."""
        return {v.split(".")[0] for v in self.aliases.values()}

    @property
    def uses_tensorflow(self) -> bool:
        return bool(self.modules & {"tensorflow", "keras"})

    def qualname(self, expr: ast.AST | None, scope: ast.AST | None = None) -> str | None:
        """Fully qualified, normalised name of ``expr`` or ``None`` when it is not known.

        ``scope`` is the function (or module) the expression is in; it lets names bound by
        assignment (``rng = np.random.default_rng()``) be followed.
        """
        parts: list[str] = []
        node = expr
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            base = self.aliases.get(node.id)
            if base is None:
                base = self._origin(node.id, scope)
            if base is None:
                return None
        elif isinstance(node, ast.Call):
            inner = self.qualname(node.func, scope)
            if inner is None:
                return None
            base = inner + "()"
        else:
            return None
        parts.reverse()
        return normalise(".".join([base, *parts])) if parts else base

    def call_name(self, call: ast.AST, scope: ast.AST | None = None) -> str | None:
        """Qualified name of the function a ``Call`` node calls."""
        if isinstance(call, ast.Call):
            return self.qualname(call.func, scope)
        return None

    def _origin(self, name: str, scope: ast.AST | None) -> str | None:
        for s in (scope, None):
            key = (id(s) if s is not None else 0, name)
            value = self._origins.get(key)
            if value is not None and key not in self._resolving:
                self._resolving.add(key)
                try:
                    q = self.qualname(value)
                finally:
                    self._resolving.discard(key)
                if q is not None:
                    return q + "()"
        return None


def _origins_from(analysis) -> dict[tuple[int, str], ast.AST]:
    """(scope id, name) → the callee expression of the single ``name = callee(...)`` in scope.

    Names assigned more than once in a scope are dropped (their origin is ambiguous). The
    scope of an assignment is its enclosing function (classes share their enclosing scope);
    the module scope has id 0."""
    origins: dict[tuple[int, str], ast.AST | None] = {}
    enclosing = analysis.enclosing_function
    for node in analysis.nodes(ast.Assign, ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        scope = None
        for t in targets:
            if isinstance(t, ast.Name):
                if scope is None:
                    f = enclosing(node)
                    scope = id(f) if f is not None else 0
                k = (scope, t.id)
                if k in origins:
                    origins[k] = None
                elif isinstance(node.value, ast.Call):
                    origins[k] = node.value.func
                else:
                    origins[k] = None
    return {k: v for k, v in origins.items() if v is not None}
