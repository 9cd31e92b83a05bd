"""TFL2xx: retracing. Every new trace of a tf.function rebuilds and re-optimises its graph."""

from __future__ import annotations

import ast

from tflint.analysis.astutil import walk_own
from tflint.analysis.loops import from_memory, strip_batch_dim
from tflint.analysis.values import is_number_literal, number_constant, number_value
from tflint.finding import Edit, Fix, Severity
from tflint.rules._fixes import end_of, replace_span, start_of, tensorflow_alias, text_lines, wrap
from tflint.rules.base import Rule, RuleContext

_SCALAR_CASTS = ("int", "float", "bool", "round", "abs")
_SETUP_METHODS = frozenset({"__init__", "build", "_build", "setup", "setUp", "setUpClass", "__post_init__"})


def _function_aliases(ctx: RuleContext) -> frozenset[str]:
    return frozenset(k for k, v in ctx.analysis.imports.aliases.items() if v in _TF_FUNCTION)


def _mentions_tf_function(ctx: RuleContext) -> bool:
    """Cheap pre-check: the module imports TensorFlow and spells `function` somewhere."""
    return ctx.analysis.imports.uses_tensorflow and "function" in ctx.source


def _could_be_tf_function(ctx: RuleContext, func: ast.AST) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "function"
    return isinstance(func, ast.Name) and func.id in _function_aliases(ctx)


def _fname(func: ast.AST | None) -> str:
    return getattr(func, "name", "<lambda>") if func is not None else "<module>"


def _scalar_use(expr: ast.AST, scalars: dict[str, str], ctx: RuleContext) -> str | None:
    """The Python-scalar loop name that ``expr`` passes by value (``i``, ``i * 2``,
    ``float(i)``), or ``None`` (tensors built from it, ``x[i]``, ``tf.constant(i)``)."""
    if isinstance(expr, ast.Name):
        return expr.id if expr.id in scalars else None
    if isinstance(expr, ast.BinOp):
        return _scalar_use(expr.left, scalars, ctx) or _scalar_use(expr.right, scalars, ctx)
    if isinstance(expr, ast.UnaryOp):
        return _scalar_use(expr.operand, scalars, ctx)
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in _SCALAR_CASTS
        and ctx.analysis.qualname(expr.func) is None
        and len(expr.args) == 1
    ):
        return _scalar_use(expr.args[0], scalars, ctx)
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in ("min", "max")
        and ctx.analysis.qualname(expr.func) is None
        and len(expr.args) >= 2
        and not expr.keywords
    ):
        # min(step, 5): a Python number when every other argument is one too
        uses = [_scalar_use(a, scalars, ctx) for a in expr.args]
        if any(uses) and all(u or is_number_literal(a) or (isinstance(a, ast.Name) and number_constant(ctx.analysis, a))
                             for u, a in zip(uses, expr.args)):
            return next(u for u in uses if u)
    return None


class PythonScalarArgumentRetraces(Rule):
    code = "TFL201"
    name = "python-scalar-retraces-tf-function"
    severity = Severity.WARNING
    summary = "tf.function called with a Python number that changes every call"
    fixable = True
    fix_safety = (
        "The fix wraps the argument in `tf.constant(...)`, so every call passes a tensor of one "
        "dtype and shape and the function traces once. It is unsafe: inside the function the "
        "value is now a tensor, so Python code that needs a Python number (`range(n)`, list "
        "indexing, string formatting) changes behaviour or fails while tracing, and a Python "
        "`float` becomes a `float32` tensor."
    )
    what = (
        "Checks for a `tf.function` called inside a Python loop with a Python number that "
        "changes between calls: the index of `range(...)`/`enumerate(...)`, a counter "
        "(`step += 1`), or arithmetic on those and number constants "
        "(`min(step, WARMUP_STEPS) // 50`). Values wrapped in `tf.constant`/`tf.convert_to_tensor` and functions "
        "with an `input_signature` are fine."
    )
    why = (
        "A `tf.function` keys its graph cache on the *value* of each Python argument. A new "
        "number means a new trace: the whole function is re-traced and its graph re-optimised "
        "on every call (measured on TensorFlow 2.21: a small function called with a new Python "
        "int each time ran about 80x slower than with `tf.constant`), and each concrete "
        "function stays in the cache. TensorFlow only warns after 5 retraces and never says "
        "which argument caused them."
    )
    example = (
        """
        @tf.function
        def train_step(x, y, step):
            ...

        for step, (x, y) in enumerate(dataset):
            train_step(x, y, step)
        """
    )
    use_instead = (
        """
        for step, (x, y) in enumerate(dataset):
            train_step(x, y, tf.constant(step, tf.int64))
        # or iterate the step as a tensor, or give the function an input_signature
        """
    )
    VALID = [
        """
        import tensorflow as tf

        @tf.function
        def train_step(x, step):
            return x * tf.cast(step, tf.float32)

        def run_step(x, step):
            return train_step(x, tf.constant(step))

        for step in range(1000):
            run_step(tf.ones([2]), step)
        """,
        """
        import tensorflow as tf

        @tf.function
        def step(x):
            return x * 2

        for x in tf.data.Dataset.range(10):
            step(x)
        """,
        """
        import tensorflow as tf

        @tf.function
        def step(x, i):
            return x * tf.cast(i, tf.float32)

        for i in range(100):
            step(tf.ones([2]), tf.constant(i))
        """,
        """
        import tensorflow as tf

        @tf.function(input_signature=[tf.TensorSpec([], tf.int64)])
        def step(i):
            return i + 1

        for i in range(100):
            step(i)
        """,
        """
        import tensorflow as tf

        def plain(x, i):
            return x * i

        for i in range(3):
            plain(tf.ones([2]), i)
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x, phase):
            return x * phase

        def train(limit):
            # `limit` may be a tensor: then `phase` is one too
            for step in range(3000):
                phase = min(step, limit) // 50 + 1
                train_step(tf.ones([2]), phase)
                train_step(tf.ones([2]), max(step, limit))
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        @tf.function
        def train_step(x, step):
            return x * tf.cast(step, tf.float32)

        ds = tf.data.Dataset.range(10)
        for i, x in enumerate(ds):
            train_step(x, i)  # expect: TFL201
        """,
        """
        from tensorflow import function

        def body(x, lr):
            return x * lr

        step = function(body)
        for epoch in range(5):
            step(1.0, lr=0.1 * epoch)  # expect: TFL201
        """,
        """
        import tensorflow as tf

        class Trainer:
            def __init__(self):
                self.step_fn = tf.function(self._step)

            def _step(self, x, n):
                return x + n

            def run(self, ds):
                n = 0
                for x in ds:
                    n += 1
                    self.step_fn(x, n)  # expect: TFL201
        """,
        """
        import tensorflow as tf

        WARMUP_STEPS = 1250

        @tf.function
        def train_step(x, phase):
            return x * phase

        for step in range(3000):
            phase = min(step, WARMUP_STEPS) // 50 + 1
            train_step(tf.ones([2]), phase)  # expect: TFL201
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x, phase):
            return x * phase

        for step in range(3000):
            train_step(tf.ones([2]), min(step, 5))  # expect: TFL201
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x, step):
            return x * tf.cast(step, tf.float32)

        def run_step(x, step):
            return train_step(x, step)

        for step in range(1000):
            run_step(tf.ones([2]), step)  # expect: TFL201
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        traced = a.traced
        if not _mentions_tf_function(ctx):
            return
        candidates = _tf_function_names_impl(ctx)
        if not candidates:
            return
        forwarders = self._forwarders(ctx, candidates)
        for node in ctx.analysis.nodes(ast.Call):
            if not (node.args or node.keywords):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id in forwarders:
                self._check_forwarded(ctx, node, forwarders[f.id])
                continue
            if not (
                (isinstance(f, ast.Name) and f.id in candidates)
                or (isinstance(f, ast.Attribute) and f.attr in candidates)
            ):
                continue
            loops = a.loops.enclosing_loops(node)
            if not loops or traced.is_traced(node):
                continue
            creation = traced.tf_function_creation(node.func, node)
            if creation is None or traced.has_input_signature(creation):
                continue
            scalars: dict[str, str] = {}
            for loop in reversed(loops):  # innermost wins
                scalars.update(a.loops.python_scalars(loop))
            if not scalars:
                continue
            for arg in (*node.args, *(k.value for k in node.keywords)):
                name = _scalar_use(arg, scalars, ctx)
                if name is None:
                    continue
                _report_scalar(
                    ctx, node, arg,
                    f"`{ctx.segment(node.func)}` is a tf.function called with Python number "
                    f"`{name}` ({scalars[name]}): every new value retraces the whole function; "
                    f"pass `tf.constant({name})` instead",
                )
                break


    @staticmethod
    def _forwarders(ctx: RuleContext, candidates: set[str]) -> dict[str, tuple[ast.AST, dict[str, ast.Call]]]:
        """Module functions, run eagerly, that pass one of their parameters unchanged to a
        tf.function (``def run_step(x, step): return train_step(x, step)``): name -> (the
        function, parameter -> that tf.function call)."""
        a = ctx.analysis
        traced = a.traced
        out: dict[str, tuple[ast.AST, dict[str, ast.Call]]] = {}
        for stmt in a.tree.body:
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or traced.is_traced_function(stmt):
                continue
            if traced.tf_function_decorator(stmt) is not None:
                continue
            params = {p.arg for p in (*stmt.args.posonlyargs, *stmt.args.args, *stmt.args.kwonlyargs)}
            rebound = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            passed: dict[str, ast.Call] = {}
            for node in ast.walk(stmt):
                if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
                    continue
                f = node.func
                if (f.id if isinstance(f, ast.Name) else f.attr) not in candidates:
                    continue
                creation = traced.tf_function_creation(f, node)
                if creation is None or traced.has_input_signature(creation):
                    continue
                for arg in (*node.args, *(k.value for k in node.keywords)):
                    if isinstance(arg, ast.Name) and arg.id in params and arg.id not in rebound:
                        passed.setdefault(arg.id, node)
            if passed:
                out[stmt.name] = (stmt, passed)
        return out

    def _check_forwarded(self, ctx: RuleContext, call: ast.Call, forwarder) -> None:
        """A call, in a loop, of a function that hands a parameter to a tf.function, with a
        Python number of the loop for that parameter."""
        a = ctx.analysis
        func, passed = forwarder
        loops = a.loops.enclosing_loops(call)
        if not loops or a.traced.is_traced(call) or a.lookup_function(func.name, call) != [func]:
            return
        scalars: dict[str, str] = {}
        for loop in reversed(loops):
            scalars.update(a.loops.python_scalars(loop))
        if not scalars:
            return
        positional = [p.arg for p in (*func.args.posonlyargs, *func.args.args)]
        given = dict(zip(positional, call.args))
        given.update({k.arg: k.value for k in call.keywords if k.arg})
        for param, inner in passed.items():
            arg = given.get(param)
            name = _scalar_use(arg, scalars, ctx) if arg is not None else None
            if name is None:
                continue
            _report_scalar(
                ctx, call, arg,
                f"`{func.name}` passes Python number `{name}` ({scalars[name]}) to tf.function "
                f"`{ctx.segment(inner.func)}` (line {inner.lineno}): every new value retraces the "
                f"whole function; pass `tf.constant({name})` instead",
            )
            return


def _report_scalar(ctx: RuleContext, at: ast.AST, arg: ast.AST, message: str) -> None:
    """A TFL201 finding at ``at``, with the unsafe fix that wraps ``arg`` in ``tf.constant``."""
    tf, imports = tensorflow_alias(ctx)
    ctx.report(
        at,
        message,
        fix=Fix(f"Pass `{tf}.constant({ctx.segment(arg)})`", (*wrap(arg, f"{tf}.constant(", ")"), *imports), "unsafe"),
    )


def _tf_function_names_impl(ctx: RuleContext) -> set[str]:
    """Names (or attribute names) a tf.function may be called by in this module."""
    a = ctx.analysis
    names: set[str] = set()
    for defs in a.functions.values():
        for d in defs:
            if a.traced.tf_function_decorator(d) is not None:
                names.add(d.name)
    for node in ctx.analysis.nodes(ast.Assign):
        if isinstance(node.value, ast.Call):
            if _could_be_tf_function(ctx, node.value.func) and a.call_name(node.value) in _TF_FUNCTION:
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
                    elif isinstance(t, ast.Attribute):
                        names.add(t.attr)
    return names


class TfFunctionCreatedRepeatedly(Rule):
    code = "TFL202"
    name = "tf-function-created-repeatedly"
    severity = Severity.WARNING
    summary = "tf.function created inside a loop or a repeatedly called function"
    fixable = True
    fix_safety = (
        "For `f = tf.function(g)` alone on its lines directly inside a loop, reading no name the "
        "loop binds, the fix moves the statement in front of the loop. It is safe: the function "
        "is the same, created once, so it traces once per input signature instead of once per "
        "iteration. Decorated definitions and factories get no fix."
    )
    what = (
        "Checks for `@tf.function` / `tf.function(...)` evaluated inside a loop, or inside a "
        "function body that runs again and again (called in a loop, or a method that builds "
        "and calls a fresh tf.function on every call). A tf.function created once at module "
        "level, in `__init__`/`build`, or behind a create-once guard is fine, and so is one "
        "built only to be traced (`tf.function(f).get_concrete_function(spec)`): there the "
        "graph is the product."
    )
    why = (
        "Each `tf.function(...)` call makes a new function object with an empty graph cache. "
        "Creating it per iteration or per call traces and optimises the graph every time "
        "(measured on TensorFlow 2.21: about 70x slower than one function created once, and "
        "6-20x slower than plain eager execution). TensorFlow logs a generic retracing warning "
        "after five such traces of the same code but does not say where the function is made."
    )
    example = (
        """
        for x, y in dataset:
            step = tf.function(train_step)
            step(x, y)
        """
    )
    use_instead = (
        """
        step = tf.function(train_step)
        for x, y in dataset:
            step(x, y)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        @tf.function
        def step(x):
            return x * 2

        for x in tf.data.Dataset.range(3):
            step(x)
        """,
        """
        import tensorflow as tf

        functions = {}
        for device, implementation in implementations.items():  # one function per device
            functions[device] = tf.function(implementation)
        """,
        """
        import tensorflow as tf

        def compiled(fn, *args):
            if tf.executing_eagerly():
                return fn(*args)

            @tf.function(jit_compile=True)  # created while the caller is traced: once per trace
            def call(*a):
                return fn(*a)

            return call(*args)

        def loss(x):
            return compiled(tf.reduce_sum, x)

        def norm(x):
            return compiled(tf.norm, x)
        """,
        """
        import tensorflow as tf

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.step = tf.function(self._step)

            def _step(self, x):
                return self.model(x)
        """,
        """
        import tensorflow as tf

        def train(model, ds, epochs):
            @tf.function
            def step(x):
                return model(x)
            for _ in range(epochs):
                for x in ds:
                    step(x)

        train(None, [], 1)
        """,
        """
        import tensorflow as tf

        class Runner:
            def __init__(self):
                self._fn = None

            def predict(self, x):
                if self._fn is None:
                    self._fn = tf.function(self._predict)
                return self._fn(x)

            def _predict(self, x):
                return x
        """,
        """
        import tensorflow as tf

        def make_step(model):
            @tf.function
            def step(x):
                return model(x)
            return step

        step = make_step(None)
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        def body(x):
            return x * 2

        for x in tf.data.Dataset.range(3):
            step = tf.function(body)  # expect: TFL202
            step(x)
        """,
        """
        import tensorflow as tf

        def predict_one(model, x):
            @tf.function  # expect: TFL202
            def fwd(x):
                return model(x)
            return fwd(x)

        for x in [1.0, 2.0]:
            predict_one(None, x)
        """,
        """
        from tensorflow import function

        class Server:
            def __init__(self, model):
                self.model = model

            def serve(self, x):
                return function(self.model)(x)  # expect: TFL202
        """,
        """
        import tensorflow as tensorflow_lib

        for _ in range(3):
            @tensorflow_lib.function(jit_compile=True)  # expect: TFL202
            def step(x):
                return x
            step(1.0)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        traced = a.traced
        if not _mentions_tf_function(ctx):
            return
        decorators: set[ast.AST] = set()
        sites: list[tuple[ast.AST, ast.AST, ast.AST | None]] = []  # (report node, anchor, decorated def)
        for node in ctx.analysis.nodes(ast.FunctionDef, ast.AsyncFunctionDef):
            dec = traced.tf_function_decorator(node)
            if dec is not None:
                decorators.add(dec)
                sites.append((dec, node, node))
        for node in ctx.analysis.nodes(ast.Call):
            if (
                node not in decorators
                and _could_be_tf_function(ctx, node.func)
                and a.call_name(node) in _TF_FUNCTION
            ):
                anchor = node
                parent = a.parent(node)
                if not node.args and isinstance(parent, ast.Call) and parent.func is node:
                    anchor = parent  # tf.function(jit_compile=True)(f): the outer call creates it
                sites.append((node, anchor, None))
        for report_at, anchor, defined in sites:
            message = self._problem(ctx, anchor, defined)
            if message:
                ctx.report(report_at, message, fix=None if defined else self._hoist_fix(ctx, anchor))

    @staticmethod
    def _hoist_fix(ctx: RuleContext, anchor: ast.AST) -> Fix | None:
        """``f = tf.function(g)`` alone on its lines, directly in a loop body and reading nothing
        the loop binds: move it in front of the loop."""
        a = ctx.analysis
        loops = a.loops.enclosing_loops(anchor)
        stmt = a.parent(anchor)
        if not loops or not isinstance(stmt, ast.Assign) or stmt.value is not anchor:
            return None
        loop = loops[0]
        if stmt not in loop.body or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            return None
        bound = {
            n.id
            for part in (getattr(loop, "target", None), *loop.body)
            if part is not None
            for n in ast.walk(part)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        } - {stmt.targets[0].id}
        if any(isinstance(n, ast.Name) and n.id in bound for n in ast.walk(anchor)):
            return None
        lines = text_lines(ctx, stmt.lineno, stmt.end_lineno)
        head, tail = lines[0].encode()[: stmt.col_offset].decode(), lines[-1].encode()[stmt.end_col_offset :].decode()
        if head.strip() or tail.strip():
            return None  # shares its lines with other code
        loop_indent = text_lines(ctx, loop.lineno, loop.lineno)[0].encode()[: loop.col_offset].decode()
        shift = len(head) - len(loop_indent)
        moved = "".join(ln[shift:] if ln[:shift].isspace() else ln for ln in lines)
        if not moved.endswith(("\n", "\r")):
            return None
        return Fix(
            f"Create `{stmt.targets[0].id}` once, before the loop",
            (
                Edit(loop.lineno, 0, loop.lineno, 0, moved),
                Edit(stmt.lineno, 0, stmt.end_lineno + 1, 0, ""),
            ),
        )

    def _problem(self, ctx: RuleContext, anchor: ast.AST, defined: ast.AST | None) -> str | None:
        a = ctx.analysis
        traced = a.traced
        if traced.traced_function_of(anchor) is not None and defined is None:
            return None  # created while tracing: once per trace of the outer function
        if defined is not None and traced.traced_function_of(defined) is not None:
            return None
        if traced.guard_of(anchor) is not None:
            return None
        if traced.runs_only_in_graphs(anchor if defined is None else defined):
            return None  # created while a graph is built: once per trace of the caller
        creations = [anchor] if defined is None else list(defined.decorator_list)
        if any(traced.used_only_for_tracing(c, defined) for c in creations):
            return None  # built to be traced (`.get_concrete_function`): tracing is the point
        what = f"tf.function `{defined.name}`" if defined is not None else "this tf.function"
        # bound name of the created function, to see where it is called
        bound = self._bound_name(ctx, anchor, defined)
        loops = a.loops.enclosing_loops(anchor)
        if loops:
            loop = loops[0]
            if bound is not None and self._called_in_nested_loop(ctx, loop, bound):
                return None  # one graph per outer iteration, reused by the inner loop
            wrapped = anchor.args[0] if defined is None and isinstance(anchor, ast.Call) and anchor.args else None
            if isinstance(wrapped, ast.Name) and wrapped.id in a.loops.loop_variables(loop):
                return None  # each iteration wraps another function: one tf.function each
            return (
                f"{what} is created inside the loop on line {loop.lineno}: every iteration "
                f"builds a new function and traces a new graph; create it once before the loop"
            )
        owner = a.enclosing_function(anchor)
        if owner is None or getattr(owner, "name", "") in _SETUP_METHODS:
            return None
        if self._escapes(ctx, anchor, bound, owner):
            # a factory: fine unless the factory itself is called in a loop
            for site in traced.call_sites(owner):
                site_loops = a.loops.enclosing_loops(site)
                if site_loops and traced.guard_of(site) is None and not traced.is_traced(site):
                    return (
                        f"{what} is created by `{_fname(owner)}`, which the loop on line "
                        f"{site_loops[0].lineno} calls (line {site.lineno}): every iteration traces a "
                        f"new graph; create it once outside the loop"
                    )
            return None
        # used only inside `owner`: a new graph per call of `owner`
        if self._called_in_loop_within(ctx, owner, bound, anchor):
            return None
        repeated = [s for s in traced.call_sites(owner) if a.loops.enclosing_loops(s)]
        if repeated:
            return (
                f"{what} is created on every call of `{_fname(owner)}` (called in the loop on "
                f"line {a.loops.enclosing_loops(repeated[0])[0].lineno}): each call traces a new "
                f"graph; create it once at module level or in `__init__`"
            )
        if _fname(owner).startswith("test"):
            return None  # a test body runs once
        parent = a.parent(anchor)
        if isinstance(parent, ast.Call) and parent.func is anchor or len(traced.call_sites(owner)) > 1:
            return (
                f"{what} is created anew on every call of `{_fname(owner)}` and used once, so each "
                f"call traces a new graph; create it once (module level, `__init__`, or cached on "
                f"`self`)"
            )
        return None

    @staticmethod
    def _bound_name(ctx: RuleContext, anchor: ast.AST, defined: ast.AST | None) -> str | None:
        if defined is not None:
            return defined.name
        parent = ctx.analysis.parent(anchor)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            return parent.targets[0].id
        return None

    @staticmethod
    def _escapes(ctx: RuleContext, anchor: ast.AST, bound: str | None, owner: ast.AST) -> bool:
        """Whether the created function outlives the call of ``owner``: returned, stored on an
        object or in a container, passed on, or declared global."""
        a = ctx.analysis
        parent = a.parent(anchor)
        if isinstance(parent, (ast.Return, ast.Yield, ast.Dict, ast.List, ast.Tuple, ast.keyword)):
            return True
        if isinstance(parent, ast.Call) and parent.func is not anchor:
            return True
        if isinstance(parent, ast.Assign) and not all(isinstance(t, ast.Name) for t in parent.targets):
            return True
        if bound is None:
            return False
        if bound in a.traced.declared_outer(owner):
            return True
        for node in ast.walk(owner):
            if isinstance(node, ast.Name) and node.id == bound and isinstance(node.ctx, ast.Load):
                p = a.parent(node)
                if isinstance(p, ast.Call) and p.func is node:
                    continue
                return True  # returned, stored, passed as an argument...
        return False

    @staticmethod
    def _called_in_nested_loop(ctx: RuleContext, loop: ast.AST, bound: str) -> bool:
        a = ctx.analysis
        for node in ast.walk(loop):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == bound:
                inner = a.loops.enclosing_loops(node)
                if inner and inner[0] is not loop and loop in inner:
                    return True
        return False

    @staticmethod
    def _called_in_loop_within(ctx: RuleContext, owner: ast.AST, bound: str | None, anchor: ast.AST) -> bool:
        if bound is None:
            return False
        a = ctx.analysis
        for node in ast.walk(owner):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == bound:
                if a.loops.enclosing_loops(node):
                    return True
                for anc in a.ancestors(node):  # `[step(x) for x in ds]` reuses it too
                    if anc is owner:
                        break
                    if isinstance(anc, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                        return True
        return False


_TF_FUNCTION = frozenset({"tensorflow.function", "tensorflow.compat.v1.function"})
_PER_BATCH_HOOKS = frozenset(
    {
        "on_batch_begin", "on_batch_end", "on_train_batch_begin", "on_train_batch_end",
        "on_test_batch_begin", "on_test_batch_end", "on_predict_batch_begin", "on_predict_batch_end",
    }
)
# ``predict_on_batch`` is not among them: it calls the cached predict function with none of
# ``predict``'s setup, ~3x faster than an eager ``model(x)`` on a small batch and ~10x on a
# small transformer, where the eager call costs nearly as much as ``predict`` (TensorFlow 2.21)
_PREDICT = frozenset({"predict", "evaluate"})
# keywords of `predict` that only steer its loop: `predict_on_batch` needs none of them
_LOOP_ONLY_KEYWORDS = frozenset({"verbose", "batch_size", "steps", "callbacks"})


def _on_batch_fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
    """``model.predict(x, verbose=0)`` → ``model.predict_on_batch(x)`` (one input, no other
    keywords; ``evaluate`` computes losses and metrics over all batches and has no one-call
    equivalent)."""
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr != "predict":
        return None
    inputs = [*call.args, *(k.value for k in call.keywords if k.arg == "x")]
    others = [k for k in call.keywords if k.arg != "x" and k.arg not in _LOOP_ONLY_KEYWORDS]
    if len(inputs) != 1 or others or any(k.arg is None for k in call.keywords):
        return None
    text = f"{ctx.segment(f.value)}.predict_on_batch({ctx.segment(inputs[0])})"
    return _call_replaced(call, "Run the compiled step on the batch", text)


def _call_replaced(call: ast.Call, title: str, text: str) -> Fix:
    """An unsafe fix that replaces the whole ``call`` with ``text``."""
    return Fix(f"{title}: `{text}`", (replace_span(start_of(call), end_of(call), text),), "unsafe")


class PerBatchPredict(Rule):
    code = "TFL203"
    name = "per-batch-predict-in-loop"
    severity = Severity.WARNING
    summary = "`model.predict`/`evaluate` called per batch or per sample in a Python loop"
    fixable = True
    fix_safety = (
        "For `predict` with one input and no keywords but `verbose`, "
        "`batch_size`, `steps` or `callbacks`, the fix runs the compiled predict step on it: "
        "`model.predict_on_batch(x)`, which returns the same NumPy arrays. It is unsafe: the "
        "whole input goes through the model as one batch (`predict` cuts it into batches of "
        "32), which needs more memory for a large input, and no callbacks run. `evaluate` gets "
        "no fix, and neither does a `predict` reached through a method, which other callers may "
        "give a whole dataset."
    )
    what = (
        "Checks for `model.predict(...)` or `evaluate(...)` called "
        "inside a Python loop on the loop's current batch or sample (`for x in dataset`, "
        "`for i in range(len(x))` with `x[i]`, or the observation of an environment loop: "
        "`state, reward, done, info = env.step(action)`), also through a method that predicts "
        "on what it is given (`action = agent.act(state)` with `def act(self, state): return "
        "self.model.predict(state)`), or from a per-batch callback hook; and "
        "`model.predict(...)` run unconditionally in every iteration of a long loop "
        "(`for step in range(2000)`, 100 iterations or more) whatever it predicts on. Calling "
        "them once per epoch or per checkpoint on a fixed dataset, or every k-th step, is fine, "
        "and so is a loop that visits a few batches (at most 16: `ds.take(5)`) or a literal "
        "list of whole inputs, and so is a loop that trains a model and then evaluates it "
        "(cross-validation folds). `predict_on_batch(x)` in a loop is fine too: it runs the "
        "cached predict function without `predict`'s setup."
    )
    why = (
        "`predict`/`evaluate` are built for whole datasets: every call sets up a data adapter, "
        "callbacks and progress bar, and the first calls build a `tf.function`; `predict` "
        "also concatenates and copies its outputs back to NumPy. Per batch this costs "
        "milliseconds of overhead for microseconds of compute: measured 80-100x slower than one "
        "call on the whole dataset or a direct `model(x, training=False)` (TensorFlow 2.21, "
        "Keras 3, small batches on CPU). An eager `model(x)` is no cure for a deep model: on a "
        "small transformer it costs nearly as much as `predict` (one eager op at a time), while "
        "`predict_on_batch(x)` runs the compiled step, about 10x faster than both."
    )
    example = (
        """
        preds = []
        for x, _ in test_ds:
            preds.append(model.predict(x))
        """
    )
    use_instead = (
        """
        preds = model.predict(test_ds)
        # or, in a custom loop:
        for x, _ in test_ds:
            preds.append(model.predict_on_batch(x))
        """
    )
    VALID = [
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        model.compile('adam', 'mse')
        for epoch in range(10):
            model.fit(x_train, y_train, epochs=1)
            model.evaluate(x_val, y_val)
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        preds = model.predict(test_ds)
        for p in preds:
            print(p)
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for ckpt in checkpoints:
            model.load_weights(ckpt)
            print(model.evaluate(val_ds))
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for name, ds in splits.items():
            print(name, model.evaluate(ds))
        """,
        """
        import tensorflow as tf

        for x, y in test_ds:
            preds = model(x, training=False)
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for step in range(2000):
            if step % 500 == 0:
                print(model.predict(probe, verbose=0))
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for trial in range(10):
            print(model.predict(probe, verbose=0))
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for step in range(2000):
            preds = model(probe, training=False)
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        scores = []
        for data in [x, x[:, :, ::-1, :]]:  # the images and their mirrors: two whole inputs
            scores.append(model.predict(data, batch_size=256))
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for x, y in val_ds.take(5):  # five batches to plot
            show_plot(x[0], y[0], model.predict(x)[0])
        """,
        """
        import keras

        k = 4
        n = len(x_train) // k
        for i in range(k):  # k-fold cross-validation: a model per fold
            model = build_model()
            model.fit(np.concatenate([x_train[:i * n], x_train[(i + 1) * n:]]), epochs=50)
            scores.append(model.evaluate(x_train[i * n:(i + 1) * n], verbose=0))
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        model = tf.keras.models.load_model('m.keras')
        ds = tf.data.Dataset.from_tensor_slices(x).batch(32)
        for batch in ds:
            out = model.predict(batch)  # expect: TFL203
        """,
        """
        import numpy as np
        from tensorflow import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for i in range(len(x_test)):
            sample = np.expand_dims(x_test[i], 0)
            p = model.predict(sample, verbose=0)  # expect: TFL203
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for epoch in range(3):
            for xb, yb in val_batches:
                loss = model.evaluate(xb, yb, verbose=0)  # expect: TFL203
        """,
        """
        import numpy as np
        import keras

        model = keras.Sequential([keras.layers.Dense(2)])
        state, done = env.reset(), False
        while not done:
            q = model.predict(state[np.newaxis], verbose=0)  # expect: TFL203
            state, reward, done, info = env.step(int(np.argmax(q)))
        """,
        """
        import numpy as np
        import keras

        class Agent:
            def __init__(self):
                self.model = keras.Sequential([keras.layers.Dense(2)])

            def act(self, state):
                state = np.reshape(state, [1, 4])
                return int(np.argmax(self.model.predict(state, verbose=0)[0]))  # expect: TFL203

        agent = Agent()
        for episode in range(500):
            state, done = env.reset(), False
            while not done:
                state, reward, done, info = env.step(agent.act(state))
        """,
        """
        import keras

        class Monitor(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                self.model.predict(self.probe)  # expect: TFL203
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for step in range(2000):
            support = sample_task()
            preds = model.predict(support, verbose=0)  # expect: TFL203
            update(preds)
        """,
        """
        import keras

        N_ITERATIONS = 500
        model = keras.Sequential([keras.layers.Dense(1)])
        for it in range(N_ITERATIONS):
            model.predict(probe, verbose=0)  # expect: TFL203
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for step in range(1, 1001):
            query = make_query()
            score = model.predict(query)  # expect: TFL203
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if not a.imports.uses_tensorflow:
            return
        for node in ctx.analysis.nodes(ast.Call):
            if not (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in _PREDICT
            ):
                continue
            if not self._is_keras_model(ctx, node.func.value) or a.traced.is_traced(node):
                continue
            method = node.func.attr
            hook = a.enclosing_function(node)
            if getattr(hook, "name", "") in _PER_BATCH_HOOKS:
                ctx.report(
                    node,
                    f"`{method}()` in per-batch callback hook `{hook.name}` runs a whole "
                    f"`{method}` pass on every training batch; "
                    + ("use `model.predict_on_batch(x)` or " if method == "predict" else "")
                    + "move it to `on_epoch_end`",
                    fix=_on_batch_fix(ctx, node),
                )
                continue
            data = [*node.args[:2], *(k.value for k in node.keywords if k.arg in ("x", "y"))]
            found = self._per_sample(ctx, node, node, data)
            if found is None:
                via = self._through_wrapper(ctx, node, data)
                if via is not None:
                    ctx.report(
                        node,
                        f"`{method}()` is called on one sample per call of `{via[0].name}()`: line "
                        f"{via[1].lineno} passes it `{via[2]}`, a batch or sample of the loop on line "
                        f"{via[3].lineno}: each call pays `{method}`'s whole setup; "
                        + ("use `model.predict_on_batch(x)` (the compiled step, no setup)" if method == "predict"
                           else "call it once on the dataset"),
                    )
                continue
            loop, used = found
            if used is None:
                ctx.report(
                    node,
                    f"`predict()` runs in every one of the {self._long_loop(ctx, loop, node)} iterations of "
                    f"the loop on line {loop.lineno}: each call pays `predict`'s whole setup (a new input "
                    f"pipeline and step loop); use `model.predict_on_batch(x)` (the compiled "
                    f"step) or predict once before the loop",
                    fix=_on_batch_fix(ctx, node),
                )
                continue
            ctx.report(
                node,
                f"`{method}()` is called on `{used}`, a batch or sample of the loop on line "
                f"{loop.lineno}: each call pays `{method}`'s whole setup; "
                + ("call it once on the dataset, or `model.predict_on_batch(x)` in the loop (the "
                   "compiled step, no setup)" if method == "predict" else "call it once on the dataset"),
                fix=_on_batch_fix(ctx, node),
            )

    def _per_sample(self, ctx: RuleContext, call: ast.Call, predict: ast.Call,
                    data: list[ast.AST]) -> tuple[ast.AST, str | None] | None:
        """The loop of ``call``'s function in which ``call`` (``predict``/``evaluate`` itself, or
        a function that runs ``predict``) gets a batch or sample per iteration: ``(loop, the
        loop-varying name it reads)``, or ``(loop, None)`` for a ``predict`` in every iteration
        of a long loop whatever it reads; ``None`` when there is no such loop."""
        a = ctx.analysis
        for loop in a.loops.enclosing_loops(call):
            if a.loops.is_over_runs(loop) or a.loops.over_listed_items(loop):
                continue
            bound = a.loops.iteration_bound(loop)
            if bound is not None and bound <= self.FEW_ITERATIONS:
                continue  # a look at a few batches (`for x, y in ds.take(5)`): a few setups
            if self._fits_same_model(ctx, loop, predict):
                return None  # each iteration trains the model, then judges it (cross-validation)
            varying = a.loops.varying_names(loop)
            used = sorted({n.id for d in data for n in ast.walk(d) if isinstance(n, ast.Name) and n.id in varying})
            if used:
                return None if a.loops.every_kth(call, loop) else (loop, used[0])
            if call is predict and predict.func.attr == "predict" and self._long_loop(ctx, loop, predict) is not None:
                return loop, None
        return None

    def _through_wrapper(self, ctx: RuleContext, node: ast.Call, data: list[ast.AST]):
        """``predict`` on a parameter of a function, in no loop of it (``def act(self, state):
        return np.argmax(self.model.predict(state)[0])``, the parameter perhaps given a batch
        dimension first), when a call of that function in the module passes a batch or sample of
        its loop (``action = agent.act(state)`` in an environment loop): ``(function, call,
        loop-varying name, loop)``, else ``None``."""
        for func, call, arg in _calls_passing(ctx, node, data[0] if data else None):
            found = self._per_sample(ctx, call, node, [arg])
            if found is not None and found[1] is not None:
                return func, call, found[1], found[0]
        return None

    @staticmethod
    def _fits_same_model(ctx: RuleContext, loop: ast.AST, call: ast.Call) -> bool:
        """The loop body also calls ``fit`` on the model ``call`` predicts or evaluates with:
        a model trained per iteration (a fold, a trial) is judged once per iteration. A ``fit``
        on the iteration's own sample (a DQN replay loop that predicts the targets of each
        transition and fits on it) trains per sample; it is no such loop."""
        model = ctx.segment(call.func.value)
        fits = [n for stmt in loop.body for n in ast.walk(stmt)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "fit"
                and ctx.segment(n.func.value) == model]
        return any(
            (x := n.args[0] if n.args else next((k.value for k in n.keywords if k.arg == "x"), None)) is None
            or ctx.analysis.loops.element_of(loop, x) is None
            for n in fits
        )

    # A loop of at most this many iterations (`ds.take(5)`, `range(3)`) is a look at a few
    # batches: a few `predict` setups, not one per batch of a pass over the data.
    FEW_ITERATIONS = 16
    # A loop of at least this many iterations is long: a per-iteration `predict` dominates it.
    LONG_LOOP = 100

    def _long_loop(self, ctx: RuleContext, loop: ast.AST, call: ast.Call) -> int | None:
        """The iteration count of ``for _ in range(N)`` (N a constant, directly or through a
        module-level name) when ``call`` runs in every iteration (not under an ``if``) and N is
        at least ``LONG_LOOP``; else ``None``."""
        if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call):
            return None
        it = loop.iter
        if not (isinstance(it.func, ast.Name) and it.func.id == "range" and it.args and not it.keywords):
            return None
        a = ctx.analysis
        bound = number_value(a, it.args[1] if len(it.args) > 1 else it.args[0])
        start = number_value(a, it.args[0]) if len(it.args) > 1 else 0
        if not (type(bound) is int and type(start) is int):
            return None
        count = bound - start
        if count < self.LONG_LOOP:
            return None
        for anc in a.ancestors(call):
            if anc is loop:
                return count
            if isinstance(anc, (ast.If, ast.IfExp, ast.Try, ast.While, ast.For, ast.FunctionDef, ast.Lambda)):
                return None
        return None

    @staticmethod
    def _is_keras_model(ctx: RuleContext, receiver: ast.AST) -> bool:
        """Any receiver not known to be something else (scikit-learn, pandas, a test case's
        ``self.evaluate``...)."""
        a = ctx.analysis
        if isinstance(receiver, ast.Name) and receiver.id == "self":
            return a.traced.is_keras_class(a.enclosing_class(receiver))
        q = a.qualname(receiver)
        if q is None:
            return True
        return q.startswith(("keras.", "tensorflow."))


# keywords of a one-batch `fit` that `train_on_batch` does not need
_FIT_LOOP_ONLY_KEYWORDS = frozenset({"verbose", "batch_size", "shuffle"})


def _train_on_batch_fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
    """``model.fit(x, y, epochs=1, verbose=0)`` as a statement → ``model.train_on_batch(x, y)``
    (no other keywords but ``verbose``, ``batch_size``, ``shuffle`` and ``sample_weight``)."""
    f = call.func
    parent = ctx.analysis.parent(call)
    if not isinstance(f, ast.Attribute) or not isinstance(parent, ast.Expr):
        return None  # the History `fit` returns is used: `train_on_batch` returns the loss
    kw = {k.arg: k.value for k in call.keywords}
    if None in kw or len(call.args) > 2:
        return None
    x = call.args[0] if call.args else kw.pop("x", None)
    y = call.args[1] if len(call.args) > 1 else kw.pop("y", None)
    epochs = kw.pop("epochs", None)
    if x is None or y is None or (epochs is not None and not (isinstance(epochs, ast.Constant) and epochs.value == 1)):
        return None  # without `y`, `x` may be an (x, y) tuple, which `train_on_batch` takes as inputs
    weight = kw.pop("sample_weight", None)
    if any(k not in _FIT_LOOP_ONLY_KEYWORDS for k in kw):
        return None
    args = [ctx.segment(x), ctx.segment(y)]
    if weight is not None:
        args.append(f"sample_weight={ctx.segment(weight)}")
    text = f"{ctx.segment(f.value)}.train_on_batch({', '.join(args)})"
    return _call_replaced(call, "Run one compiled training step on the batch", text)


class PerBatchFit(Rule):
    code = "TFL204"
    name = "per-batch-fit-in-loop"
    severity = Severity.WARNING
    summary = "`model.fit` called on one batch or sample per iteration of a Python loop"
    fixable = True
    fix_safety = (
        "For `fit(x, y)` used as a statement, with `epochs=1` or no `epochs`, and no keywords "
        "but `verbose`, `batch_size`, `shuffle` and `sample_weight`, the fix calls "
        "`model.train_on_batch(x, y)`: one compiled training step on the same data. It is "
        "unsafe: `fit` cuts an input of more than 32 samples (or `batch_size`) into several "
        "steps, `train_on_batch` takes it as one batch, and no callbacks run. A `fit` reached "
        "through a method that passes its arguments on gets no fix: other callers may pass it "
        "a whole dataset."
    )
    what = (
        "Checks for `model.fit(...)` called inside a Python loop on the loop's current batch or "
        "sample: the elements of a `tf.data` dataset (`for xb, yb in ds`) or the batches of "
        "`ImageDataGenerator.flow(...)`, transitions of a "
        "replay memory (`for state, action, reward, next_state, done in "
        "random.sample(memory, n)`), a minibatch drawn from a replay memory in the loop body "
        "(`batch = random.sample(self.memory, 32)`), or slices of an array by the loop index "
        "(`x[i:i + 32]`, `np.expand_dims(x[i], 0)`), or the observation of an environment loop "
        "(`state, reward, done, info = env.step(action)`: online learning). It also checks `fit` "
        "on a minibatch that a "
        "function draws from a replay memory (`random.sample(self.memory, 32)`, "
        "`self.buffer.sample(32)`) when a loop of the module calls that function "
        "(`agent.replay(32)` once per environment step; a short sample-and-fit loop inside it "
        "counts the same), and `fit` inside a method that only passes its arguments on "
        "(`def train(self, states, targets): self.model.fit(states, targets)`) when a call of "
        "that method does one of the above (`self.q_net.train(states, targets)` on a sampled "
        "minibatch). A loop that calls `fit` on a whole dataset per epoch, "
        "fold or trial is fine, and so is a loop that builds a new model each iteration, "
        "visits a few batches (at most 16) or loads a large dataset in chunks of more than "
        "4096 rows (`x[i:i + 100000]`)."
    )
    why = (
        "`fit` is built to run many steps: every call sets up a data adapter, an epoch "
        "iterator, callbacks and a `History`, then runs one step for a small batch. Measured "
        "on a small model (TensorFlow 2.21, Keras 3, CPU): about 60 ms per `fit` call against "
        "about 1 ms for `train_on_batch` on the same batch, the same update for 50-60x the "
        "time. Reinforcement-learning replay loops that `fit` one transition at a time spend "
        "nearly all their time there."
    )
    example = (
        """
        for state, action, reward, next_state, done in random.sample(memory, 32):
            target = model.predict_on_batch(state)
            target[0][action] = reward
            model.fit(state, target, epochs=1, verbose=0)
        """
    )
    use_instead = (
        """
        for state, action, reward, next_state, done in random.sample(memory, 32):
            target = model.predict_on_batch(state)
            target[0][action] = reward
            model.train_on_batch(state, target)
        # better still: stack the 32 transitions and train on them as one batch
        """
    )
    VALID = [
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        model.compile('adam', 'mse')
        for epoch in range(10):
            model.fit(x_train, y_train, epochs=1)
            model.save(f'ckpt_{epoch}.keras')
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        model.compile('adam', 'mse')
        for xb, yb in train_ds:
            model.train_on_batch(xb, yb)
        """,
        """
        import keras

        for i in range(k):  # k-fold cross-validation: a new model per fold
            model = build_model()
            model.fit(x_train[folds[i]], y_train[folds[i]], epochs=50)
        """,
        """
        import random
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for client_ds in random.sample(client_datasets, 10):  # a whole dataset per client
            model.fit(client_ds, epochs=1)
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for i in range(num_clients):  # each client's own arrays, not a sample
            model.fit(client_x[i], client_y[i], epochs=1)
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for xb, yb in train_ds.take(3):
            model.fit(xb, yb, verbose=0)
        """,
        """
        import numpy as np
        import keras

        class Agent:
            def learn(self):  # the whole memory, many steps per call
                states = np.array([t[0] for t in self.memory])
                self.model.fit(states, self.targets(states), epochs=1, verbose=0)

        agent = Agent()
        for episode in range(500):
            agent.learn()
        """,
        """
        import numpy as np
        import keras

        class Trainer:
            def __init__(self):
                self.model = keras.Sequential([keras.layers.Dense(1)])

            def train(self, x, y):
                self.model.fit(x, y, epochs=1, verbose=0)

        trainer = Trainer()
        for round_ in range(100):  # all the data each round, through a method that passes it on
            trainer.train(np.load('x.npy'), np.load('y.npy'))
        """,
    ]
    INVALID = [
        """
        import random
        import keras

        class Agent:
            def replay(self, batch_size):
                minibatch = random.sample(self.memory, batch_size)
                for state, action, reward, next_state, done in minibatch:
                    target = self.model.predict_on_batch(state)
                    self.model.fit(state, target, epochs=1, verbose=0)  # expect: TFL204
        """,
        """
        import tensorflow as tf

        model = tf.keras.models.load_model('m.keras')
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
        for xb, yb in ds:
            model.fit(xb, yb, verbose=0)  # expect: TFL204
        """,
        """
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for i in range(0, len(x_train), 64):
            xb = x_train[i:i + 64]
            model.fit(xb, y_train[i:i + 64], epochs=1, verbose=0)  # expect: TFL204
        """,
        """
        import numpy as np
        import keras

        model = keras.Sequential([keras.layers.Dense(1)])
        for i in range(len(x_train)):
            sample = np.expand_dims(x_train[i], 0)
            model.fit(sample, y_train[i:i + 1], verbose=0)  # expect: TFL204
        """,
        """
        import random
        import numpy as np
        import keras

        class Agent:
            def replay(self, batch_size):
                minibatch = random.sample(self.memory, batch_size)
                states = np.array([t[0] for t in minibatch])
                targets = self.model.predict_on_batch(states)
                self.model.fit(states, targets, epochs=1, verbose=0)  # expect: TFL204

        agent = Agent()
        for step in range(10000):
            agent.replay(32)
        """,
        """
        import keras

        class QNetwork:
            def __init__(self):
                self.model = keras.Sequential([keras.layers.Dense(2)])

            def train(self, states, targets):
                self.model.fit(states, targets, epochs=1, verbose=0)  # expect: TFL204

        class Agent:
            def __init__(self):
                self.q = QNetwork()

            def replay(self):
                for _ in range(10):
                    states, actions, rewards, next_states, done = self.buffer.sample()
                    self.q.train(states, rewards)

            def run(self, episodes):
                for ep in range(episodes):
                    self.replay()
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        if not a.imports.uses_tensorflow:
            return
        for node in a.nodes(ast.Call):
            f = node.func
            if not (isinstance(f, ast.Attribute) and f.attr == "fit"):
                continue
            if not PerBatchPredict._is_keras_model(ctx, f.value) or a.traced.is_traced(node):
                continue
            x = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "x"), None)
            if x is None:
                continue
            model = ctx.segment(f.value)
            found = self._per_batch(ctx, node, x, model)
            if found is not None:
                what, in_loop = found
                self._report(ctx, node, model, what, " in the loop, or one `fit` on the whole dataset" if in_loop else "")
                continue
            via = self._through_wrapper(ctx, node, x)
            if via is not None:
                self._report(ctx, node, model, via, fix=False)

    @staticmethod
    def _report(ctx: RuleContext, node: ast.Call, model: str, what: str, instead: str = "", fix: bool = True) -> None:
        ctx.report(
            node,
            f"`fit()` is called on {what}: each call pays `fit`'s whole setup again for one batch; "
            f"use `{model}.train_on_batch(x, y)`{instead}",
            fix=_train_on_batch_fix(ctx, node) if fix else None,
        )

    def _per_batch(self, ctx: RuleContext, call: ast.Call, x: ast.AST, obj: str) -> tuple[str, bool] | None:
        """How ``call`` (``fit``, or a method that runs it) gets one batch or sample as ``x`` per
        call: the message's text, and whether it names a loop of the call's own function.
        ``None`` when it is not known to. First a loop of the call's function whose current
        element is ``x``, innermost first (a loop of at most ``FEW_ITERATIONS`` ends the search:
        ``for xb, yb in ds.take(5)``); then, when no longer loop of the function encloses the
        call, a minibatch the function draws from a replay memory and a loop of the module that
        calls the function."""
        a = ctx.analysis
        long_loop = False
        for loop in a.loops.enclosing_loops(call):
            if a.loops.is_over_runs(loop) or a.loops.over_listed_items(loop) or self._rebinds(ctx, loop, obj):
                return None
            bound = a.loops.iteration_bound(loop)
            if bound is not None and bound <= PerBatchPredict.FEW_ITERATIONS:
                break
            long_loop = True
            what = a.loops.element_of(loop, x)
            if what is not None:
                return f"`{what}`, {self._kind(ctx, loop)} of the loop on line {loop.lineno}", True
        if long_loop:
            return None
        what = self._per_call(ctx, call, x)
        return None if what is None else (what, False)

    def _per_call(self, ctx: RuleContext, call: ast.Call, x: ast.AST) -> str | None:
        """``call`` in no loop of its function but short ones, on a minibatch that the function
        draws from a replay memory, when a loop of the module calls that function
        (``agent.replay()`` once per environment step): one ``fit`` per batch all the same."""
        a = ctx.analysis
        func = a.enclosing_function(call)
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        inner, _ = strip_batch_dim(a, x)
        if not self._drawn_in(ctx, func, inner):
            return None
        for caller in a.traced.calls_of(func):
            if a.enclosing_function(caller) is func:
                continue
            for loop in a.loops.enclosing_loops(caller):
                bound = a.loops.iteration_bound(loop)
                if bound is not None and bound <= PerBatchPredict.FEW_ITERATIONS:
                    continue
                return (f"`{ctx.segment(x)}`, a minibatch drawn from a replay memory, once per call of "
                        f"`{func.name}()`, which the loop on line {loop.lineno} calls every iteration")
        return None

    def _through_wrapper(self, ctx: RuleContext, node: ast.Call, x: ast.AST) -> str | None:
        """``fit`` on a parameter of a function (give or take a batch dimension), in no loop
        (``def train(self, states, targets): self.model.fit(states, targets)``), when a call of
        that function in the module passes one batch or sample per call
        (``self.model.train(states, targets)`` on a minibatch drawn from a replay memory)."""
        for func, call, arg in _calls_passing(ctx, node, x):
            f = call.func
            found = self._per_batch(ctx, call, arg, ctx.segment(f.value) if isinstance(f, ast.Attribute) else "")
            if found is not None:
                return f"one batch per call of `{func.name}()`: line {call.lineno} passes it {found[0]}"
        return None

    @staticmethod
    def _drawn_in(ctx: RuleContext, func: ast.AST, expr: ast.AST) -> bool:
        """``expr`` comes from a minibatch that ``func`` draws from a replay memory: through the
        function's assignments (``states = np.array([t[0] for t in minibatch])``) and what it
        fills in (``states[i] = minibatch[i][0]``, ``states.append(s)``)."""
        traced = ctx.analysis.traced
        return from_memory(ctx.analysis, expr, lambda name: [*traced.bindings(name, func), *traced.fills(name, func)])

    @staticmethod
    def _rebinds(ctx: RuleContext, loop: ast.AST, model: str) -> bool:
        """The loop body binds the model anew (a model per fold or trial)."""
        return any(
            isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
                ctx.segment(t) == model for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            )
            for stmt in loop.body for n in ast.walk(stmt)
        )

    @staticmethod
    def _kind(ctx: RuleContext, loop: ast.AST) -> str:
        it = getattr(loop, "iter", None)
        if it is not None and ctx.analysis.datasets.is_dataset(it):
            return "an element of the dataset"
        return "one batch or sample"



def _calls_passing(ctx: RuleContext, node: ast.Call, expr: ast.AST | None):
    """For ``node`` (``predict``/``fit``) in no loop of its function and on ``expr``, a parameter
    of that function (give or take a batch dimension): ``(function, call, argument)`` for each
    call of the function elsewhere in the module, with what it passes for the parameter."""
    a = ctx.analysis
    func = a.enclosing_function(node)
    if expr is None or not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or a.loops.enclosing_loops(node):
        return
    params = [p.arg for p in func.args.posonlyargs + func.args.args]
    param = _parameter_passed(ctx, func, params, expr)
    if param is None:
        return
    for call in a.traced.calls_of(func):
        if a.enclosing_function(call) is not func:
            arg = _argument(call, params, param)
            if arg is not None:
                yield func, call, arg


def _parameter_passed(ctx: RuleContext, func: ast.AST, params: list[str], expr: ast.AST) -> str | None:
    """The parameter of ``func`` that ``expr`` is, give or take a batch dimension
    (``np.reshape(state, [1, n])``, ``state[None]``), directly or through names that ``func``
    binds only to such wrappings of it (``state = np.reshape(state, [1, n])``); else ``None``."""
    a = ctx.analysis
    for _ in range(3):
        inner, _wrapped = strip_batch_dim(a, expr)
        if not isinstance(inner, ast.Name):
            return None
        binds = a.traced.bindings(inner.id, func)
        if inner.id in params:
            def rewraps(value: ast.AST, name: str = inner.id) -> bool:
                core = strip_batch_dim(a, value)[0]
                return isinstance(core, ast.Name) and core.id == name

            ok = all(rewraps(b) for b in binds) and _binds_only_by_assignment(func, inner.id, len(binds))
            return inner.id if ok else None
        if len(binds) != 1 or not _binds_only_by_assignment(func, inner.id, 1):
            return None
        expr = binds[0]
    return None


def _binds_only_by_assignment(func: ast.AST, name: str, count: int) -> bool:
    """``func`` binds ``name`` exactly ``count`` times, all by plain assignments."""
    n_assign = 0
    for n in walk_own(func.body):
        if isinstance(n, (ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr, ast.AnnAssign)):
            if any(isinstance(t, ast.Name) and t.id == name for t in ast.walk(n.target)):
                return False
        elif isinstance(n, ast.Assign):
            n_assign += sum(isinstance(t, ast.Name) and t.id == name for tg in n.targets for t in ast.walk(tg))
    return n_assign == count


def _argument(call: ast.Call, params: list[str], name: str) -> ast.AST | None:
    """The expression ``call`` passes for the parameter ``name`` among ``params`` (a call
    ``obj.method(a, b)`` fills a method's parameters after ``self``); ``None`` when it passes
    none or unpacks ``*args``/``**kwargs``."""
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(k.arg is None for k in call.keywords):
        return None
    for k in call.keywords:
        if k.arg == name:
            return k.value
    bound = isinstance(call.func, ast.Attribute) and params[:1] == ["self"]
    index = params.index(name) - (1 if bound else 0)
    return call.args[index] if 0 <= index < len(call.args) else None
