"""Which functions TensorFlow traces into a graph.

A function is traced when it is

- decorated with ``tf.function`` in any spelling, with or without arguments;
- wrapped: ``g = tf.function(f)``, ``self.step = tf.function(self._step)``, ``tf.function(lambda ...)``;
- a Keras graph-compiled method: ``train_step``, ``test_step``, ``predict_step`` and ``call`` of a
  ``keras.layers.Layer`` / ``keras.Model`` subclass (directly or through classes of the module);
- passed to ``Dataset.map/filter/flat_map/interleave`` (tf.data traces it);
- called from traced code in the same module (transitively): ``helper(x)``, ``self.helper(x)``;
- reached from traced code of another module of the project (``Analysis(project=...)``, facts
  from :class:`tflint.analysis.project.ProjectIndex`): such a function names the entry point
  that reaches it (:meth:`TracedFunctions.entry_note`).

Functions handed to ``tf.py_function`` / ``tf.numpy_function`` run eagerly even when created
inside traced code; they and their bodies are not traced. So do functions decorated with a
module function that hands the function it decorates to one of those (``@py_func`` or
``@py_func(Tout=tf.float32)``), wherever they are called or mapped.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from tflint.analysis.astutil import flatten_targets, walk_own

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
        "tensorflow.compat.v1.py_function",
        "tensorflow.compat.v1.numpy_function",
        "tensorflow.experimental.numpy_function",
        "tensorflow.py_func",
        "tensorflow.python.ops.script_ops.eager_py_func",
        "tensorflow.python.ops.script_ops.py_func",
        "tensorflow.python.ops.script_ops.py_func_common",
        "tensorflow.python.ops.script_ops.numpy_function",
    }
)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_FUNC_CLASSES = frozenset(_FUNCS)
_WRAPPER_LAST_NAMES = frozenset(n.rsplit(".", 1)[-1] for n in TF_FUNCTION | EAGER_WRAPPERS)


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
        # functions TensorFlow itself traces (not reached through other traced code), and
        # whether AutoGraph converts them: "autograph", "no-autograph" (Keras 3 methods,
        # ``tf.function(autograph=False)``; Keras 2 methods are "autograph")
        self.entry_points: dict[ast.AST, str] = {}
        # function -> the ``@tf.function`` decorators / ``tf.function(f)`` calls that wrap it
        self.creations: dict[ast.AST, list[ast.AST]] = {}
        # tf.functions created with AutoGraph's ``BUILTIN_FUNCTIONS`` (or ``ALL``) option: their
        # ``print`` of a tensor is converted into a print op
        self.converts_builtins: set[ast.AST] = set()
        # traced function -> the traced entry point (of this module) whose trace reaches it
        self.roots: dict[ast.AST, ast.AST] = {}
        # function reached from another module's (or an unresolved local) trace -> its note
        self.external: dict[ast.AST, str] = {}
        self._compute()

    # -- queries ---------------------------------------------------------------------------
    def is_traced_function(self, func: ast.AST) -> bool:
        return func in self.reasons

    def is_module_traced(self, func: ast.AST) -> bool:
        """Traced as far as the module alone shows (not only through project-wide facts)."""
        return func in self.reasons and self.roots.get(func, func) not in self.external

    def reason(self, func: ast.AST) -> str | None:
        return self.reasons.get(func)

    def traced_function_of(self, node: ast.AST) -> ast.AST | None:
        """The traced function whose body ``node`` runs in (innermost first), or ``None``."""
        if not self.reasons:
            return None
        table = self._traced_context
        if node in table:
            return table[node]
        for anc in self.a.ancestors(node):  # a node built after the analysis
            if isinstance(anc, _FUNCS):
                if anc in self.eager:
                    return None
                if anc in self.reasons:
                    return anc
        return None

    @property
    def _traced_context(self) -> dict[ast.AST, ast.AST | None]:
        """Every node of the module → the traced function it runs in (``None`` if eager)."""
        table = self.__dict__.get("_context")
        if table is None:
            order, parents, _ = self.a._index
            table = self.__dict__["_context"] = {order[0]: None}
            eager, reasons = self.eager, self.reasons
            funcs = _FUNC_CLASSES
            for node in order[1:]:
                parent = parents[node]
                # (``Load``/``Store`` and operator nodes are shared leaves: any parent will do)
                current = table.get(parent)
                if parent.__class__ in funcs:
                    if parent in eager:
                        inner = None
                    elif parent in reasons:
                        inner = parent
                    else:
                        inner = current
                    # decorators, defaults and annotations run where the function is defined
                    if inner is not current and _in_body(parent, node):
                        current = inner
                table[node] = current
        return table

    def nodes_in_traced_code(self) -> list[tuple[ast.AST, ast.AST]]:
        """(node, traced function) for every node that runs in traced code, in source order."""
        got = self.__dict__.get("_traced_nodes")
        if got is None and not self.reasons:
            got = self.__dict__["_traced_nodes"] = []
        if got is None:
            got = [(n, f) for n, f in self._traced_context.items() if f is not None and hasattr(n, "lineno")]
            got.sort(key=lambda p: (p[0].lineno, p[0].col_offset))
            self.__dict__["_traced_nodes"] = got
        return got

    def calls_in_traced_code(self) -> list[tuple[ast.Call, ast.AST]]:
        """(call, traced function) for every call that runs in traced code, in source order."""
        got = self.__dict__.get("_traced_calls")
        if got is None and not self.reasons:
            got = self.__dict__["_traced_calls"] = []
        if got is None:
            got = [
                (n, f) for n, f in self._traced_context.items() if f is not None and isinstance(n, ast.Call)
            ]
            got.sort(key=lambda p: (p[0].lineno, p[0].col_offset))
            got = self.__dict__["_traced_calls"] = got
        return got

    def is_traced(self, node: ast.AST) -> bool:
        return self.traced_function_of(node) is not None

    def entry_note(self, func: ast.AST | None) -> str | None:
        """For a function traced through project-wide facts: "`helper` is traced through
        `train_step` in train.py:41"; ``None`` for functions the module alone shows traced."""
        if func is None:
            return None
        return self.external.get(self.roots.get(func, func))

    def is_keras_class(self, cls: ast.ClassDef | None) -> bool:
        return cls is not None and cls in self.keras_classes

    # -- computation -----------------------------------------------------------------------
    def _compute(self) -> None:
        a = self.a
        classes = a.nodes(ast.ClassDef)
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

        aliases = a.imports.aliases
        eager_decorators: set[ast.AST] = set()
        for node in a.nodes(ast.FunctionDef, ast.AsyncFunctionDef, ast.Call):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in node.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    if a.qualname(target) in TF_FUNCTION:
                        self.reasons.setdefault(
                            node, f"decorated with @tf.function (line {dec.lineno})"
                        )
                        self.entry_points[node] = _autograph_kind(dec)
                        self.creations.setdefault(node, []).append(dec)
                        if _converts_builtins(dec):
                            self.converts_builtins.add(node)
                cls = a.parent(node)
                if (
                    isinstance(cls, ast.ClassDef)
                    and cls in self.keras_classes
                    and node.name in KERAS_TRACED_METHODS
                    and not self._keras_runs_eagerly
                    and cls not in self._superseded_classes
                ):
                    self.reasons.setdefault(
                        node, f"Keras traces `{cls.name}.{node.name}` into a graph"
                    )
                    self.entry_points.setdefault(node, "autograph" if self._keras2 else "no-autograph")
            elif isinstance(node, ast.Call):
                # Only a call spelled ``<x>.function(...)`` (and the like) or through an
                # imported name can be one of these: skip resolving the others.
                f = node.func
                if f.__class__ is ast.Attribute:
                    name = a.call_name(node) if f.attr in _WRAPPER_LAST_NAMES else None
                elif f.__class__ is ast.Name:
                    name = a.call_name(node) if f.id in aliases else None
                else:
                    name = None
                if name in TF_FUNCTION and node.args:
                    for f in self._resolve_callable(node.args[0], node):
                        self.reasons.setdefault(f, f"wrapped with tf.function (line {node.lineno})")
                        self.entry_points.setdefault(f, _autograph_kind(node))
                        self.creations.setdefault(f, []).append(node)
                        if _converts_builtins(node):
                            self.converts_builtins.add(f)
                elif name in EAGER_WRAPPERS:
                    arg = node.args[0] if node.args else next(
                        (k.value for k in node.keywords if k.arg == "func"), None
                    )
                    if arg is not None:
                        self.eager.update(self._resolve_callable(arg, node))
                        self._note_eager_parameter(arg, node, eager_decorators)
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
                        self.entry_points.setdefault(f, "autograph")

        if eager_decorators:
            self._eager_decorated(eager_decorators)
        for f in self.eager:  # a py_function body runs eagerly, whoever else names it
            self.reasons.pop(f, None)

        # Functions that traced code calls, transitively; and functions that traced code hands
        # to graph-building APIs (tf.cond, tf.while_loop, tf.map_fn, strategy.run, ...). Then the
        # same from the functions other modules' traced code reaches (project-wide facts).
        self._follow_calls(list(self.reasons))
        self._follow_calls(self._seed_project_facts())

    def _follow_calls(self, work: list) -> None:
        while work:
            func = work.pop()
            name = getattr(func, "name", "<lambda>")
            for sub in self._walk_traced_body(func):
                if not isinstance(sub, ast.Call):
                    continue
                callees = list(self._resolve_callable(sub.func, sub, called=True))
                how = "called from"
                if self._traces_arguments(sub):
                    how = "passed to a graph-building call in"
                    for arg in (*sub.args, *(k.value for k in sub.keywords)):
                        if isinstance(arg, (ast.Name, ast.Attribute, ast.Lambda)):
                            callees.extend(self._resolve_callable(arg, sub))
                for callee in callees:
                    if callee not in self.reasons and callee not in self.eager and callee is not func:
                        self.reasons[callee] = f"{how} traced `{name}` (line {sub.lineno})"
                        self.roots[callee] = self.roots.get(func, func)
                        work.append(callee)

    @property
    def _keras_runs_eagerly(self) -> bool:
        """The module may run its Keras models eagerly: it passes ``run_eagerly=`` something
        other than ``False``/``None`` to a call (``model.compile``) or assigns it to
        ``<model>.run_eagerly``. ``fit`` then calls ``train_step`` and the layers' ``call`` as
        plain Python on every step, so their bodies are not judged as traced code (a debugging
        script's ``print`` does print each step). A value the module computes
        (``run_eagerly=args.debug``, ``backend() == "tensorflow"``) may be true when the
        program runs, so it counts too; a name bound only to ``False``/``None`` literals does
        not."""
        got = self.__dict__.get("_keras_eager_cached")
        if got is None:
            got = False
            if "run_eagerly" in self.a.source:
                for node in self.a.nodes(ast.keyword, ast.Assign):
                    if isinstance(node, ast.keyword):
                        value, hit = node.value, node.arg == "run_eagerly"
                    else:
                        value = node.value
                        hit = any(isinstance(t, ast.Attribute) and t.attr == "run_eagerly" for t in node.targets)
                    if hit and self._may_be_true(value):
                        got = True
                        break
            self.__dict__["_keras_eager_cached"] = got
        return got

    def _may_be_true(self, value: ast.AST) -> bool:
        """``value`` is not known to be ``False``/``None``: a literal, or a name that every
        assignment of the module binds to such a literal."""
        if isinstance(value, ast.Constant):
            return bool(value.value)
        if isinstance(value, ast.Name):
            bound = [
                n.value for n in self.a.nodes(ast.Assign, ast.AnnAssign)
                if any(isinstance(t, ast.Name) and t.id == value.id
                       for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))
            ]
            if bound and all(isinstance(v, ast.Constant) for v in bound) and not self._rebound_otherwise(value.id):
                return any(bool(v.value) for v in bound)
        return True

    def _rebound_otherwise(self, name: str) -> bool:
        """``name`` is bound by something other than a plain assignment: a parameter, a loop or
        ``with`` target, an augmented assignment, an import, ``global``."""
        for node in self.a.nodes(ast.arg, ast.AugAssign, ast.For, ast.withitem, ast.Import,
                                 ast.ImportFrom, ast.Global, ast.NamedExpr):
            if isinstance(node, ast.arg):
                if node.arg == name:
                    return True
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                if any((al.asname or al.name.split(".")[0]) == name for al in node.names):
                    return True
            elif isinstance(node, ast.Global):
                if name in node.names:
                    return True
            else:
                target = (node.target if isinstance(node, (ast.AugAssign, ast.For, ast.NamedExpr))
                          else node.optional_vars)
                if target is not None and any(isinstance(e, ast.Name) and e.id == name for e in ast.walk(target)):
                    return True
        return False

    @property
    def _superseded_classes(self) -> set[ast.ClassDef]:
        """Module-level classes defined again later under the same name (a notebook cell that
        rewrites a layer): what comes after the redefinition, a model that ``fit`` traces
        included, uses the new class; the old one is only what the cells before it ran, not
        known to be traced."""
        got = self.__dict__.get("_superseded_cached")
        if got is None:
            last: dict[str, ast.ClassDef] = {}
            got = set()
            for stmt in self.a.tree.body:
                if isinstance(stmt, ast.ClassDef):
                    if stmt.name in last:
                        got.add(last[stmt.name])
                    last[stmt.name] = stmt
            self.__dict__["_superseded_cached"] = got
        return got

    @property
    def _keras2(self) -> bool:
        """The module imports Keras 2 (``tf_keras``, ``tensorflow.python.keras``), whose
        layers and ``train_step`` run under AutoGraph (Keras 3 runs them without)."""
        got = self.__dict__.get("_keras2_cached")
        if got is None:
            got = False
            for node in self.a.nodes(ast.Import, ast.ImportFrom):
                names = [al.name for al in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(n == "tf_keras" or n.startswith(("tf_keras.", "tensorflow.python.keras")) for n in names):
                    got = True
                    break
            self.__dict__["_keras2_cached"] = got
        return got

    def runs_autograph(self, func: ast.AST) -> bool:
        """Whether AutoGraph converts ``func`` on some path TensorFlow traces it by: it is (or
        is reached from) a ``tf.function`` with AutoGraph on, or a ``Dataset.map``-style
        function. Keras 3 calls ``call``/``train_step``/... without AutoGraph, as does
        ``tf.function(autograph=False)``; AutoGraph converts what converted code calls."""
        converted = self.__dict__.get("_autograph")
        if converted is None:
            roots = [f for f, kind in self.entry_points.items() if kind == "autograph"]
            converted = self.__dict__["_autograph"] = self._reach(
                roots, lambda f: self.entry_points.get(f) == "no-autograph"
            )
        return func in converted

    def converts_print(self, func: ast.AST) -> bool:
        """Whether AutoGraph turns a ``print`` of a tensor in ``func`` into a print op: ``func``
        is (or is reached from) a ``tf.function`` created with
        ``experimental_autograph_options`` naming ``Feature.BUILTIN_FUNCTIONS`` or
        ``Feature.ALL`` (the options reach what converted code calls). A ``print`` of Python
        values only still runs only while tracing."""
        converted = self.__dict__.get("_builtins")
        if converted is None:
            roots = [f for f in self.converts_builtins if self.entry_points.get(f) == "autograph"]
            converted = self.__dict__["_builtins"] = self._reach(
                roots, lambda f: self.entry_points.get(f) == "no-autograph"
            ) if roots else set()
        return func in converted

    def only_traced_explicitly(self, func: ast.AST) -> bool:
        """Whether traced ``func`` runs only when the program asks TensorFlow for a graph
        (``f.get_concrete_function(...)``) and never when a tf.function is called: it is
        reached only from tf.functions used solely through ``get_concrete_function``. Its
        trace-time Python effects then happen exactly once per requested trace."""
        if func not in self.reasons:
            return False
        called = self.__dict__.get("_called_reach")
        if called is None:
            roots = [f for f in self.reasons if f in self.entry_points and not self._wrapped_only_for_tracing(f)]
            called = self.__dict__["_called_reach"] = self._reach(roots, lambda f: False)
        return func not in called

    def roots_of(self, func: ast.AST) -> list[ast.AST]:
        """The functions TensorFlow traces itself (entry points) whose traces run ``func``."""
        reach = self.__dict__.setdefault("_reach_by_root", {})
        out = []
        for root in self.entry_points:
            got = reach.get(root)
            if got is None:
                got = reach[root] = self._reach([root], lambda f: False)
            if func in got:
                out.append(root)
        return out

    def _wrapped_only_for_tracing(self, func: ast.AST) -> bool:
        creations = self.creations.get(func)
        return bool(creations) and all(self.used_only_for_tracing(c, func) for c in creations)

    def used_only_for_tracing(self, creation: ast.AST, func: ast.AST | None = None) -> bool:
        """Whether the tf.function made by ``creation`` (a ``@tf.function`` decorator of
        ``func``, or a ``tf.function(...)`` call) is only used as
        ``.get_concrete_function(...)``: built to be traced, not called."""
        a = self.a
        decorated = func is not None and creation in getattr(func, "decorator_list", ())
        if decorated:
            name, at = func.name, func
        else:
            p = a.parent(creation)
            if isinstance(p, ast.Attribute) and p.value is creation:
                return p.attr == "get_concrete_function"
            if not (isinstance(p, ast.Assign) and len(p.targets) == 1 and isinstance(p.targets[0], ast.Name)):
                return False
            name, at = p.targets[0].id, p
        scope = self.defining_scope(name, at)
        if scope is None:
            return False
        uses = self._name_uses(scope).get(name, [])
        return bool(uses) and all(
            isinstance(a.parent(n), ast.Attribute) and a.parent(n).attr == "get_concrete_function" for n in uses
        )

    def _name_uses(self, scope: ast.AST) -> dict[str, list[ast.Name]]:
        cache = self.__dict__.setdefault("_name_use_index", {})
        table = cache.get(scope)
        if table is None:
            table = cache[scope] = {}
            for n in ast.walk(scope):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    table.setdefault(n.id, []).append(n)
        return table

    def _reach(self, roots: list[ast.AST], blocked) -> set[ast.AST]:
        """``roots`` and the functions their traced bodies call or hand to graph-building
        calls, transitively, not entering functions for which ``blocked(f)`` holds."""
        seen = set(roots)
        work = list(roots)
        while work:
            current = work.pop()
            for sub in self._walk_traced_body(current):
                if not isinstance(sub, ast.Call):
                    continue
                callees = list(self._resolve_callable(sub.func, sub, called=True))
                if self._traces_arguments(sub):
                    for arg in (*sub.args, *(k.value for k in sub.keywords)):
                        if isinstance(arg, (ast.Name, ast.Attribute, ast.Lambda)):
                            callees.extend(self._resolve_callable(arg, sub))
                for callee in callees:
                    if callee not in seen and callee not in self.eager and not blocked(callee):
                        seen.add(callee)
                        work.append(callee)
        return seen

    def _note_eager_parameter(self, arg: ast.AST, call: ast.Call, out: set[ast.AST]) -> None:
        """``tf.py_function(fn, ...)`` where ``fn`` is a parameter: the function taking it (and
        the functions around that one) wrap what they are given into eager code: decorators."""
        if isinstance(arg, ast.Call) and self.a.call_name(arg) == "functools.partial" and arg.args:
            arg = arg.args[0]
        if not isinstance(arg, ast.Name):
            return
        owner = None
        for anc in self.a.ancestors(call):
            if isinstance(anc, _FUNCS) and arg.id in _param_names(anc):
                owner = anc
                break
        while owner is not None:
            out.add(owner)
            owner = self.a.enclosing_function(owner)

    def _eager_decorated(self, decorators: set[ast.AST]) -> None:
        """Functions decorated with such a wrapper (``@py_func`` or ``@py_func(Tout=...)``)
        run eagerly when called."""
        for node in self.a.nodes(ast.FunctionDef, ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(target, ast.Name) and any(
                    d in decorators for d in self.a.lookup_function(target.id, node)
                ):
                    self.eager.add(node)

    def _seed_project_facts(self) -> list:
        """Functions the project's traced code reaches (qualname -> [entry, path, line]) that the
        module alone does not show traced; returns them."""
        facts = getattr(self.a, "project", None)
        if not facts:
            return []
        tops: dict[str, ast.AST] = {}
        for stmt in self.a.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                tops.setdefault(stmt.name, stmt)
            elif isinstance(stmt, ast.ClassDef):
                for sub in stmt.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        tops.setdefault(f"{stmt.name}.{sub.name}", sub)
        seeded: list = []
        for qual, (entry, path, line) in sorted(facts.items()):
            node = tops.get(qual)
            if node is None or node in self.reasons or node in self.eager:
                continue
            name = qual.rsplit(".", 1)[-1]
            note = f"`{name}` is traced through `{entry}` in {path}:{line}"
            self.reasons[node] = note
            self.external[node] = note
            seeded.append(node)
        return seeded

    def _walk_traced_body(self, func: ast.AST):
        """Nodes of ``func`` (nested functions included) except eager (py_function) bodies."""
        stack = list(ast.iter_child_nodes(func))
        while stack:
            node = stack.pop()
            if node in self.eager:
                continue
            yield node
            stack.extend(ast.iter_child_nodes(node))

    def _traces_arguments(self, call: ast.Call) -> bool:
        """Whether a call inside traced code traces the functions it is given."""
        name = self.a.call_name(call)
        if name is not None:
            if name in EAGER_WRAPPERS or name in TF_FUNCTION:
                return False
            root = name.split(".")[0]
            return root == "tensorflow" or name.startswith("keras.ops.")
        f = call.func
        return isinstance(f, ast.Attribute) and f.attr in ("run", "experimental_run_v2", "call_for_each_replica")

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
            return self.a.lookup_function(expr.id, at)
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

    def _methods(self, cls: ast.ClassDef, name: str) -> list[ast.AST]:
        table = self.__dict__.setdefault("_method_table", {})
        methods = table.get(cls)
        if methods is None:
            methods = table[cls] = {}
            for c in reversed(self._class_chain(cls)):
                for stmt in c.body:
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        methods[stmt.name] = stmt
            for stmt in cls.body:  # the class's own definitions win over its bases
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    methods[stmt.name] = stmt
        got = methods.get(name)
        return [got] if got is not None else []

    # -- scopes ----------------------------------------------------------------------------
    def local_names(self, func: ast.AST) -> frozenset[str]:
        """Names local to ``func``: parameters and names it binds, less ``global``/``nonlocal``."""
        cache = self.__dict__.setdefault("_locals", {})
        got = cache.get(func)
        if got is None:
            got = cache[func] = frozenset(_bound_names(func) - set(self.declared_outer(func)))
        return got

    def declared_outer(self, func: ast.AST) -> dict[str, ast.Global | ast.Nonlocal]:
        """``global``/``nonlocal`` names of ``func`` and the statement that declares each."""
        cache = self.__dict__.setdefault("_declared_outer", {})
        out = cache.get(func)
        if out is not None:
            return out
        out = cache[func] = {}
        if isinstance(func, ast.Lambda):
            return out
        if not self.a.nodes(ast.Global) and not self.a.nodes(ast.Nonlocal):
            return out
        for node in walk_own(func.body):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                for n in node.names:
                    out.setdefault(n, node)
        return out

    def defining_scope(self, name: str, at: ast.AST) -> ast.AST | None:
        """The function (or the module) whose local ``name`` refers to at ``at``; ``None`` for
        builtins and names bound nowhere."""
        for anc in self.a.ancestors(at):
            if isinstance(anc, _FUNCS):
                if name in self.local_names(anc):
                    return anc
                decl = self.declared_outer(anc).get(name)
                if isinstance(decl, ast.Global):
                    break
            elif isinstance(anc, ast.Module):
                break
        if name in self._module_names:
            return self.a.tree
        return None

    @property
    def _module_names(self) -> frozenset[str]:
        got = self.__dict__.get("_modnames")
        if got is None:
            got = self.__dict__["_modnames"] = frozenset(_bound_names(self.a.tree))
        return got

    def bindings(self, name: str, scope: ast.AST) -> list[ast.AST]:
        """Values assigned to ``name`` directly in ``scope`` (a function or the module):
        ``name = value`` and ``name: T = value``; for ``a, b = value`` the whole value."""
        cache = self.__dict__.setdefault("_bindings", {})
        table = cache.get(scope)
        if table is None:
            table = cache[scope] = {}
            body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
            for node in walk_own(body):
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        for n in _target_names(t):
                            table.setdefault(n, []).append(node.value)
                elif isinstance(node, ast.AnnAssign) and node.value is not None:
                    for n in _target_names(node.target):
                        table.setdefault(n, []).append(node.value)
                elif isinstance(node, ast.NamedExpr):
                    table.setdefault(node.target.id, []).append(node.value)
                elif isinstance(node, (ast.With, ast.AsyncWith)):
                    for item in node.items:
                        if item.optional_vars is not None:
                            for n in _target_names(item.optional_vars):
                                table.setdefault(n, []).append(item.context_expr)
        return table.get(name, [])

    def fills(self, name: str, scope: ast.AST) -> list[ast.AST]:
        """What ``scope`` (a function) puts into ``name`` besides plain assignments: values
        assigned to its rows (``name[i] = value``) or appended (``name.append(value)``,
        ``.extend``), and the iterable of a ``for`` loop whose target binds it. A nested
        function fills ``name`` only through its rows and appends, and only when it does not
        bind a ``name`` of its own (its loop targets are its own names)."""
        cache = self.__dict__.setdefault("_fills", {})
        table = cache.get(scope)
        if table is None:
            table = cache[scope] = {}
            self._collect_fills(table, scope, frozenset(), True)
        return table.get(name, [])

    def _collect_fills(self, table: dict[str, list[ast.AST]], func: ast.AST, shadowed: frozenset[str],
                       own: bool) -> None:
        body = getattr(func, "body", [])
        for node in walk_own(body if isinstance(body, list) else [body]):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                self._collect_fills(table, node, shadowed | self.local_names(node), False)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id not in shadowed:
                        table.setdefault(t.value.id, []).append(node.value)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in ("append", "extend") and isinstance(node.func.value, ast.Name)
                  and node.func.value.id not in shadowed and node.args):
                table.setdefault(node.func.value.id, []).append(node.args[0])
            elif own and isinstance(node, (ast.For, ast.AsyncFor)):
                for n in _target_names(node.target):
                    table.setdefault(n, []).append(node.iter)

    def self_attr_values(self, cls: ast.ClassDef | None, attr: str) -> list[ast.AST]:
        """Values assigned to ``self.<attr>`` in any method of ``cls`` (or its module bases)."""
        if cls is None:
            return []
        cache = self.__dict__.setdefault("_selfattrs", {})
        table = cache.get(cls)
        if table is None:
            table = cache[cls] = {}
            for c in self._class_chain(cls):
                for stmt in c.body:
                    if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        continue
                    for node in ast.walk(stmt):
                        value = getattr(node, "value", None)
                        if isinstance(node, ast.Assign):
                            targets = node.targets
                        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and value is not None:
                            targets = [node.target]
                        else:
                            continue
                        for t in targets:
                            for el in flatten_targets(t):
                                if _is_self_attr(el):
                                    table.setdefault(el.attr, []).append(value)
        return table.get(attr, [])

    def _class_chain(self, cls: ast.ClassDef) -> list[ast.ClassDef]:
        by_name = self.__dict__.get("_classes_by_name")
        if by_name is None:
            by_name = self.__dict__["_classes_by_name"] = {
                c.name: c for c in self.a.nodes(ast.ClassDef)
            }
        out, todo = [], [cls]
        while todo:
            c = todo.pop(0)
            if c in out:
                continue
            out.append(c)
            todo.extend(by_name[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in by_name)
        return out

    def enclosing_function_of(self, node: ast.AST) -> ast.AST | None:
        return self.a.enclosing_function(node)

    def call_sites(self, func: ast.AST) -> list[ast.Call]:
        """In-module calls of ``func`` (by name, or ``self.name`` for methods). For a method the
        returned calls' positional arguments line up with its parameters after ``self``:
        callers get ``ast.Call`` copies with a placeholder first argument (the real call node
        is their ``original`` attribute)."""
        table = self.__dict__.get("_call_sites")
        if table is None:
            table = self.__dict__["_call_sites"] = {}
            for node in self.a.nodes(ast.Call):
                for callee in self._resolve_callable(node.func, node, called=True):
                    if isinstance(node.func, ast.Attribute) and isinstance(self.a.parent(callee), ast.ClassDef):
                        shifted = ast.Call(func=node.func, args=[ast.Constant(None), *node.args], keywords=node.keywords)
                        ast.copy_location(shifted, node)
                        shifted.original = node  # type: ignore[attr-defined]
                        table.setdefault(callee, []).append(shifted)
                    else:
                        table.setdefault(callee, []).append(node)
        return table.get(func, [])

    def makes_instance(self, value: ast.AST, cls: ast.ClassDef) -> bool:
        """``value`` is a new instance of ``cls``: ``Cls(...)``, or ``Cls.make(...)`` where
        ``make`` is a classmethod or staticmethod of ``cls`` whose every ``return`` gives one
        (``agent = Agent.load(path)``, a ``load`` that builds ``Agent()`` and fills it)."""
        if not isinstance(value, ast.Call):
            return False
        f = value.func
        if isinstance(f, ast.Name):
            return f.id == cls.name
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == cls.name):
            return False
        make = self._methods(cls, f.attr)
        if len(make) != 1:
            return False
        kinds = {d.id for d in make[0].decorator_list if isinstance(d, ast.Name)}
        if not kinds & {"classmethod", "staticmethod"}:
            return False
        names = {cls.name}
        args = make[0].args.posonlyargs + make[0].args.args
        if "classmethod" in kinds and args:
            names.add(args[0].arg)

        def new(v: ast.AST | None, local: bool = True) -> bool:
            """``cls(...)``, or (``local``) a name that ``make`` binds only to such calls."""
            if isinstance(v, ast.Name) and local:
                binds = self.bindings(v.id, make[0])
                return bool(binds) and all(new(b, False) for b in binds)
            return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in names

        returns = [r for r in walk_own(make[0].body) if isinstance(r, ast.Return)]
        return bool(returns) and all(new(r.value) for r in returns)

    def calls_of(self, func: ast.AST) -> list[ast.Call]:
        """Every in-module call that runs ``func``: those of :meth:`call_sites` (the real call
        nodes) and, for a method, ``obj.name(...)`` where ``obj`` is bound, in the call's scope
        or the module, only to instances of the method's class (``agent = DQNAgent(...)``, or
        ``DQNAgent.load(path)``, then ``agent.replay(32)``), and ``self.attr.name(...)`` where
        the calling class assigns ``self.attr`` only such instances (``self.model =
        QNetwork(...)`` in ``__init__``, then ``self.model.train(states, targets)``)."""
        out = [getattr(c, "original", c) for c in self.call_sites(func)]
        cls = self.a.parent(func)
        if not isinstance(cls, ast.ClassDef):
            return out
        name = getattr(func, "name", None)
        if self._methods(cls, name) != [func]:
            return out
        for node in self.a.nodes(ast.Call):
            f = node.func
            if not (isinstance(f, ast.Attribute) and f.attr == name):
                continue
            obj = f.value
            if isinstance(obj, ast.Name) and obj.id not in ("self", "cls"):
                scope = self.a.enclosing_function(node) or self.a.tree
                binds = self.bindings(obj.id, scope) or self.bindings(obj.id, self.a.tree)
            elif _is_self_attr(obj):
                binds = [v for v in self.self_attr_values(self.a.enclosing_class(node), obj.attr) if not _is_none(v)]
            else:
                continue
            if binds and all(self.makes_instance(b, cls) for b in binds):
                out.append(node)
        return out

    def runs_only_within(self, func: ast.AST, outer: ast.AST, _seen: frozenset = frozenset()) -> bool:
        """``func`` runs only during calls of ``outer``: it is ``outer``, or it has in-module
        calls and every one of them is made by code that itself runs only within ``outer``
        (``self._penalty()`` called only from ``_loss()``, called only from ``train_step()``)."""
        if func is outer:
            return True
        if func is None or func in _seen or len(_seen) > 8:
            return False
        sites = self.call_sites(func)
        seen = _seen | {func}
        return bool(sites) and all(
            self.runs_only_within(self.a.enclosing_function(getattr(c, "original", c)), outer, seen) for c in sites
        )

    # -- tf.function objects ---------------------------------------------------------------
    def tf_function_creation(self, expr: ast.AST, at: ast.AST) -> ast.AST | None:
        """Where the tf.function that ``expr`` refers to is created: the ``@tf.function``
        decorator (``ast.Name``/``ast.Attribute``/``ast.Call``) or the ``tf.function(...)``
        call; ``None`` when ``expr`` is not known to be a tf.function."""
        if isinstance(expr, ast.Call) and self.a.call_name(expr) in TF_FUNCTION:
            return expr
        if isinstance(expr, ast.Name):
            for f in self.a.lookup_function(expr.id, at):
                dec = self.tf_function_decorator(f)
                if dec is not None:
                    return dec
            scope = self.defining_scope(expr.id, at)
            if scope is not None:
                values = self.bindings(expr.id, scope)
                if len(values) == 1 and isinstance(values[0], ast.Call) and self.a.call_name(values[0]) in TF_FUNCTION:
                    return values[0]
            return None
        if _is_self_attr(expr):
            cls = self.a.enclosing_class(at)
            if cls is None:
                return None
            for f in self._methods(cls, expr.attr):
                dec = self.tf_function_decorator(f)
                if dec is not None:
                    return dec
            values = self.self_attr_values(cls, expr.attr)
            found = [v for v in values if isinstance(v, ast.Call) and self.a.call_name(v) in TF_FUNCTION]
            if found and len(found) == len([v for v in values if not _is_none(v)]):
                return found[0]
        return None

    def tf_function_decorator(self, func: ast.AST) -> ast.AST | None:
        for dec in getattr(func, "decorator_list", ()):
            target = dec.func if isinstance(dec, ast.Call) else dec
            if self.a.qualname(target) in TF_FUNCTION:
                return dec
        return None

    @staticmethod
    def has_input_signature(creation: ast.AST | None) -> bool:
        if not isinstance(creation, ast.Call):
            return False
        return any(k.arg == "input_signature" and not _is_none(k.value) for k in creation.keywords)

    # -- values ----------------------------------------------------------------------------
    def is_tensor(self, expr: ast.AST, _depth: int = 0) -> bool:
        """Whether ``expr`` (inside traced code) evaluates to a tf.Tensor, as far as the
        module shows: a TensorFlow/``keras.ops`` op result, ``self(...)`` in a Keras class,
        arithmetic or indexing on a tensor, or a local name bound to one. Static shapes
        (``x.shape[0]``) and Python numbers are not tensors."""
        if _depth > 8:
            return False
        if isinstance(expr, ast.Call):
            name = self.a.call_name(expr)
            if name is not None:
                if name.endswith("()") and name.startswith(("keras.", "tensorflow.keras.")):
                    return True  # calling a Keras model, layer, loss or metric instance
                return _is_tensor_op(name)
            f = expr.func
            if isinstance(f, ast.Name) and f.id == "self":
                return True
            if (
                _is_self_attr(f)
                and f.attr in _KERAS_TENSOR_METHODS
                and self.is_keras_class(self.a.enclosing_class(expr))
            ):
                return True  # self.compute_loss(...), self.call(...) of a Keras model
            if isinstance(f, ast.Attribute) and f.attr in TENSOR_METHODS:
                return self.is_tensor(f.value, _depth + 1)
            return False
        if isinstance(expr, ast.Subscript):
            return self.is_tensor(expr.value, _depth + 1)
        if isinstance(expr, ast.BinOp):
            return self.is_tensor(expr.left, _depth + 1) or self.is_tensor(expr.right, _depth + 1)
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and not isinstance(
            expr.ops[0], (ast.Is, ast.IsNot, ast.In, ast.NotIn)
        ):
            return self.is_tensor(expr.left, _depth + 1) or self.is_tensor(expr.comparators[0], _depth + 1)
        if isinstance(expr, ast.UnaryOp) and not isinstance(expr.op, ast.Not):
            return self.is_tensor(expr.operand, _depth + 1)
        if isinstance(expr, ast.Name):
            scope = self.defining_scope(expr.id, expr)
            if scope is None or isinstance(scope, ast.Module):
                return False
            if expr.id in _param_names(scope):
                return self._tensor_param(scope, expr.id, _depth)
            values = self.bindings(expr.id, scope)
            return bool(values) and all(
                v is not expr and self.is_tensor(_unpacked(v), _depth + 1) for v in values
            )
        return False

    def _tensor_param(self, func: ast.AST, name: str, _depth: int = 0) -> bool:
        """Parameters known to be tensors: those of a tf.function with an ``input_signature``;
        the first argument of a Keras layer's ``call`` and of ``train_step``/``test_step``/
        ``predict_step``; parameters without a Python default of a function TensorFlow traces
        itself (``@tf.function``, ``tf.function(f)``, ``Dataset.map(f)``); and parameters of a
        helper that every in-module call passes a tensor."""
        if self.has_input_signature(self.tf_function_decorator(func)):
            return True
        args = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
        if getattr(func, "name", None) in KERAS_TRACED_METHODS and self.is_keras_class(self.a.parent(func)):
            return len(args) > 1 and args[1] == name
        method = isinstance(self.a.parent(func), ast.ClassDef)
        if name in args and method and args.index(name) == 0:
            return False  # self / cls
        if func in self.entry_points:
            if _python_default(func, name) or name not in args:
                return False
            idx = args.index(name)
            for site in self.call_sites(func):  # `step(x, True)`: a Python flag, not a tensor
                passed = site.args[idx] if idx < len(site.args) else next(
                    (k.value for k in site.keywords if k.arg == name), None
                )
                if isinstance(passed, ast.Constant) or (
                    isinstance(passed, ast.UnaryOp) and isinstance(passed.operand, ast.Constant)
                ):
                    return False
            return True
        if name not in args or _depth > 3:
            return False
        idx = args.index(name)
        sites = [s for s in self.call_sites(func) if self.is_traced(getattr(s, "original", s))]
        return bool(sites) and all(
            idx < len(s.args) and self.is_tensor(s.args[idx], _depth + 4) for s in sites
        )

    def carries_tensor(self, expr: ast.AST) -> bool:
        """Whether evaluating ``expr`` in traced code uses a tensor's *value* (so, at trace
        time, a symbolic tensor): ``loss``, ``f"{loss}"``, ``str(x + 1)``, ``tf.shape(x)``.
        Static facts of a tensor are not values: ``x.shape``, ``x.dtype``, ``x.name``,
        ``len(x)``, ``type(x)``."""
        stack = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Attribute) and node.attr in _STATIC_TENSOR_ATTRS:
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _STATIC_BUILTINS:
                continue
            if isinstance(node, ast.Call) and (self.a.call_name(node) or "").rsplit(".", 1)[-1] in _NOT_TENSOR_LAST:
                continue  # tf.is_tensor(x), tf.executing_eagerly(): Python answers
            if isinstance(node, ast.Compare) and all(isinstance(o, (ast.Is, ast.IsNot)) for o in node.ops):
                continue
            if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, (ast.Name, ast.Call, ast.Subscript, ast.BinOp, ast.UnaryOp)) and self.is_tensor(node):
                return True
            stack.extend(ast.iter_child_nodes(node))
        return False

    # -- guards ----------------------------------------------------------------------------
    def guard_of(self, node: ast.AST, kind: str = "once") -> ast.AST | None:
        """The ``if`` (or conditional expression) around ``node`` in its function that makes it
        run only once (``kind="once"``: ``if self.v is None``, ``if not self.built``,
        ``if key not in cache``, ``if not hasattr(self, "v")``) or only eagerly
        (``kind="eager"``: ``if tf.executing_eagerly()``); also an earlier
        ``if <guard>: return`` in an enclosing block."""
        test_ok = self.is_once_guard if kind == "once" else self.is_eager_guard
        child = node
        for anc in self.a.ancestors(node):
            if isinstance(anc, (ast.Lambda, ast.ClassDef)):
                break
            if isinstance(anc, (ast.If, ast.IfExp, ast.While)) and child is not anc.test and test_ok(anc.test):
                return anc
            if isinstance(anc, ast.BoolOp) and isinstance(anc.op, ast.And):
                idx = anc.values.index(child) if child in anc.values else 0
                if any(test_ok(v) for v in anc.values[:idx]):
                    return anc
            prev = self._earlier_exit(anc, child, lambda test: test_ok(test, negated=True))
            if prev is not None:
                return prev
            if isinstance(anc, _FUNCS):
                break
            child = anc
        return None

    def _earlier_exit(self, block_owner: ast.AST, child: ast.AST, test_ok) -> ast.If | None:
        """An ``if <test>: return/raise`` before ``child`` in one of ``block_owner``'s
        statement lists whose test ``test_ok`` accepts."""
        for field in ("body", "orelse", "finalbody"):
            block = getattr(block_owner, field, None)
            if isinstance(block, list) and block:
                _, position, exits = self._block_exits(block)
                i = position.get(id(child))
                if i is None:
                    continue
                for j, prev in exits:
                    if j >= i:
                        break
                    if test_ok(prev.test):
                        return prev
        return None

    def runs_only_in_graphs(self, node: ast.AST) -> bool:
        """Whether ``node`` runs only while a graph is built, as its function's tests say: in
        the ``else`` of ``if tf.executing_eagerly() [or ...]:``, under
        ``if not tf.executing_eagerly():``, or after ``if tf.executing_eagerly(): return``.
        Created there, a tf.function is created once per trace of the caller, not per call."""
        child = node
        for anc in self.a.ancestors(node):
            if isinstance(anc, (ast.Lambda, ast.ClassDef)):
                return False
            if isinstance(anc, (ast.If, ast.IfExp)) and child is not anc.test:
                test = anc.test
                in_else = child in anc.orelse if isinstance(anc, ast.If) else child is anc.orelse
                if in_else and self._eager_if_true(test):
                    return True
                if not in_else and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
                        and self._eager_if_true(test.operand):
                    return True
            if self._earlier_exit(anc, child, self._eager_if_true) is not None:
                return True
            if isinstance(anc, _FUNCS):
                return False
            child = anc
        return False

    def _eager_if_true(self, test: ast.AST) -> bool:
        """``test`` is true whenever code runs eagerly: an eager guard, alone or in an ``or``."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            return any(self._eager_if_true(v) for v in test.values)
        return isinstance(test, ast.Call) and self.is_eager_guard(test)

    def _block_exits(self, block: list) -> tuple[list, dict[int, int], list[tuple[int, ast.If]]]:
        """For a statement list: each statement's index, and its ``if ...: return/raise``
        statements in order (memoised: blocks of thousands of statements are scanned once)."""
        memo = self.__dict__.setdefault("_block_exit_memo", {})
        info = memo.get(id(block))
        if info is None or info[0] is not block:
            position = {id(s): i for i, s in enumerate(block)}
            exits = [
                (i, s)
                for i, s in enumerate(block)
                if isinstance(s, ast.If) and s.body and isinstance(s.body[-1], (ast.Return, ast.Raise))
            ]
            info = memo[id(block)] = (block, position, exits)
        return info

    def is_once_guard(self, test: ast.AST, negated: bool = False) -> bool:
        """A test that is true only until some state exists (or, ``negated``, once it does)."""
        for node in ast.walk(test):
            if isinstance(node, ast.Compare):
                ops = node.ops
                if any(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in ops):
                    return True
                if any(isinstance(o, (ast.Eq, ast.NotEq)) for o in ops) and any(
                    _is_none(c) for c in (node.left, *node.comparators)
                ):
                    return True
            elif isinstance(node, ast.Call):
                f = node.func
                fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if fname in ("hasattr", "getattr", "isinstance"):
                    return True
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                if isinstance(node.operand, (ast.Attribute, ast.Name, ast.Subscript)):
                    return True
            elif isinstance(node, ast.Attribute) and node.attr in ("built", "_built", "initialized", "_initialized"):
                return True
        if negated and isinstance(test, (ast.Attribute, ast.Name)):
            return True
        return False

    def is_eager_guard(self, test: ast.AST, negated: bool = False) -> bool:
        """A test that is true only outside graphs (``tf.executing_eagerly()``,
        ``isinstance(x, EagerTensor)``, ``hasattr(x, "numpy")``) — or, ``negated``, only inside."""
        for node in ast.walk(test):
            if isinstance(node, ast.Call):
                f = node.func
                fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if fname in ("executing_eagerly", "inside_function", "in_graph_mode", "is_symbolic_tensor",
                             "is_keras_tensor", "get_static_value", "in_tf_graph", "in_symbolic_scope"):
                    return True
                if fname == "hasattr" and any(
                    isinstance(x, ast.Constant) and x.value == "numpy" for x in node.args
                ):
                    return True
                if fname == "isinstance" and "Eager" in ast.unparse(node):
                    return True
            elif isinstance(node, ast.Name) and (
                node.id in ("eager", "is_eager", "run_eagerly") or _other_backend(node.id)
            ):
                return True
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _other_backend(node.value):
                return True
            elif isinstance(node, ast.Attribute) and (
                node.attr in ("run_eagerly", "_run_eagerly", "ndarray") or _other_backend(node.attr)
            ):
                return True
        return False


_STATIC_TENSOR_ATTRS = frozenset(
    {"shape", "dtype", "name", "device", "ndim", "rank", "get_shape", "op", "graph", "__class__"}
)
_STATIC_BUILTINS = frozenset({"len", "type", "isinstance", "id", "hasattr", "callable", "repr_shape"})


def _python_default(func: ast.AST, name: str) -> bool:
    """Whether parameter ``name`` of ``func`` defaults to a Python constant other than None
    (``training=False``, ``mode="train"``): configuration, not a tensor."""
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    if name not in {a.arg for a in (*positional, *args.kwonlyargs)}:
        return True  # *args / **kwargs
    d = defaults.get(name)
    return d is not None and not _is_none(d)


_KERAS_TENSOR_METHODS = frozenset({"compute_loss", "call", "__call__"})
TENSOR_METHODS = frozenset({"__getitem__", "read", "stack", "concat", "gather", "value", "read_value"})
_NOT_TENSOR_LAST = frozenset(
    {
        "is_tensor", "executing_eagerly", "get_static_value", "TensorShape", "TensorSpec",
        "as_dtype", "DType", "name_scope", "device", "dimension_value", "dimension_at_index",
        "get_logger", "shape_v2", "is_symbolic_tensor", "is_keras_tensor", "convert_to_numpy",
        "ndim", "standardize_dtype", "is_float_dtype", "is_int_dtype", "result_type",
        "control_dependencies", "init_scope", "GradientTape", "Module", "function",
        "zip", "make_ndarray", "get_value", "in_graph_mode",
    }
)
_TENSOR_MODULES = (
    "tensorflow.math.", "tensorflow.nn.", "tensorflow.linalg.", "tensorflow.random.",
    "tensorflow.image.", "tensorflow.signal.", "tensorflow.strings.", "tensorflow.experimental.numpy.",
    "tensorflow.dtypes.cast", "tensorflow.bitwise.", "tensorflow.raw_ops.", "keras.ops.",
)


def _is_tensor_op(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    if last in _NOT_TENSOR_LAST or name.endswith("()") or "()." in name:
        return False
    if name.startswith(_TENSOR_MODULES):
        return not (name.startswith("keras.ops.") and last in ("shape", "dtype"))
    return name.count(".") == 1 and name.startswith("tensorflow.") and last[:1].islower()


def _autograph_kind(creation: ast.AST) -> str:
    """``"no-autograph"`` for ``tf.function(..., autograph=False)``, else ``"autograph"``."""
    for k in getattr(creation, "keywords", ()):
        if k.arg == "autograph" and isinstance(k.value, ast.Constant) and k.value.value is False:
            return "no-autograph"
    return "autograph"


def _converts_builtins(creation: ast.AST) -> bool:
    """``tf.function(..., experimental_autograph_options=...)`` naming AutoGraph's
    ``Feature.BUILTIN_FUNCTIONS`` or ``Feature.ALL`` (alone, in a tuple, however imported)."""
    for k in getattr(creation, "keywords", ()):
        if k.arg == "experimental_autograph_options":
            for e in ast.walk(k.value):
                word = e.attr if isinstance(e, ast.Attribute) else e.id if isinstance(e, ast.Name) else None
                if word in ("BUILTIN_FUNCTIONS", "ALL"):
                    return True
    return False


def _in_body(func: ast.AST, child: ast.AST) -> bool:
    """Whether ``child`` (a direct child of ``func``) runs when ``func`` is called."""
    if isinstance(func, ast.Lambda):
        return child is func.body
    if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return child in func.body
    return True


def _other_backend(word: str) -> bool:
    """Names and strings that select a non-TensorFlow backend (``backend() == "torch"``)."""
    w = word.lower()
    return "torch" in w or w in ("jax", "numpy", "is_jax", "is_numpy")


def _param_names(func: ast.AST) -> set[str]:
    args = getattr(func, "args", None)
    if args is None:
        return set()
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    if args.vararg:
        names.add(args.vararg.arg)
    if args.kwarg:
        names.add(args.kwarg.arg)
    return names


def _target_names(t: ast.AST):
    for el in flatten_targets(t):
        if isinstance(el, ast.Name):
            yield el.id


def _bound_names(owner: ast.AST) -> set[str]:
    """Names a function (parameters included) or module binds in its own scope."""
    names = _param_names(owner)
    if isinstance(owner, ast.Lambda):
        return names
    for node in walk_own(owner.body):
        if node is owner:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for al in node.names:
                names.add(al.asname or al.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            pass
    return names


def _is_self_attr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _unpacked(value: ast.AST) -> ast.AST:
    return value
