"""TFL1xx: trace-time side effects. Python code in a traced function runs once per trace."""

from __future__ import annotations

import ast

from tflint.analysis.astutil import flatten_targets, walk_own
from tflint.finding import Fix, Severity
from tflint.rules._fixes import end_of, replace_span, start_of, tensorflow_alias
from tflint.rules.base import Rule, RuleContext


class PrintInTracedCode(Rule):
    code = "TFL101"
    name = "print-in-traced-code"
    severity = Severity.ERROR
    fixable = True
    summary = "`print()` in traced code runs only while tracing"
    what = (
        "Checks for the built-in `print()` called inside a function that TensorFlow traces. A "
        "print of trace-time facts only (text, a tensor's static `.shape`, `.dtype` or `.name`) "
        "is a shape check that means to run while tracing, and is not reported. Nor is a "
        "`print` of a value in a `tf.function` created with AutoGraph's "
        "`experimental_autograph_options` naming `Feature.BUILTIN_FUNCTIONS` (or `ALL`), which "
        "converts it into a print op."
    )
    why = (
        "A traced function's Python body runs only while TensorFlow traces it into a graph. "
        "`print()` is Python, not a graph op: it fires once (per trace) with symbolic tensors, "
        "and every later call prints nothing. Debug output silently disappears, and values "
        "shown are `Tensor(\"x:0\", shape=...)` rather than numbers."
    )
    example = (
        """
        @tf.function
        def train_step(x, y):
            loss = compute_loss(x, y)
            print("loss", loss)
            return loss
        """
    )
    use_instead = (
        """
        @tf.function
        def train_step(x, y):
            loss = compute_loss(x, y)
            tf.print("loss", loss)
            return loss
        """
    )
    fix_safety = (
        "The fix replaces `print` with `tf.print` (using the module's own TensorFlow alias, "
        "adding `import tensorflow as tf` when there is none). It is safe when the arguments "
        "are tensors or plain values; it is marked unsafe when an argument is an f-string or a "
        "`.format()`/`%` expression (those are formatted once, at trace time) or when `file=` "
        "or `flush=` is passed (tf.print uses `output_stream=`)."
    )
    VALID = [
        """
        import tensorflow as tf

        @tf.function
        def f(x):
            tf.print(x)
            return x
        """,
        """
        import tensorflow as tf

        def eager_loop(ds):
            for x in ds:
                print(x)
        """,
        """
        import tensorflow as tf

        @tf.function
        def f(x):
            def report(v):
                print(v)
                return v
            return tf.py_function(report, [x], tf.float32)
        """,
        """
        import tensorflow as tf

        @tf.function
        def f(x):
            h = tf.nn.relu(x)
            print("h:", h.shape, f"dtype {h.dtype}")  # a trace-time shape check
            return h
        """,
        """
        import keras

        class Net(keras.Model):
            def train_step(self, data):
                print("step")  # fit runs this eagerly: it prints every step
                return {}

        model = Net()
        model.compile(optimizer="adam", run_eagerly=True)
        """,
        """
        import tensorflow as tf

        @tf.function(experimental_autograph_options=tf.autograph.experimental.Feature.BUILTIN_FUNCTIONS)
        def f(x):
            print("x:", x)  # AutoGraph converts it into a print op: it prints every call
            return x
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        @tf.function
        def f(x):
            print(x)  # expect: TFL101
            return x
        """,
        """
        from tensorflow import function

        @function(jit_compile=True)
        def f(x):
            print('x is', x)  # expect: TFL101
            return x
        """,
        """
        import tensorflow as tf

        def helper(x):
            print(x)  # expect: TFL101
            return x

        step = tf.function(helper)
        """,
        """
        from tensorflow import keras

        class Net(keras.Model):
            def train_step(self, data):
                print('step')  # expect: TFL101
                return {}
        """,
        """
        import tensorflow as tf

        @tf.function
        def f(x):
            h = tf.nn.relu(x)
            print("h:", h.shape, tf.reduce_max(h))  # expect: TFL101
            return h
        """,
        """
        import keras

        class Net(keras.Model):
            def train_step(self, data):
                print('step')  # expect: TFL101
                return {}

        model = Net()
        model.compile(optimizer="adam", run_eagerly=False)
        """,
        """
        import tensorflow as tf

        Feature = tf.autograph.experimental.Feature

        @tf.function(experimental_autograph_options=(Feature.ALL,))
        def f(x):
            print(f"x: {x}")  # expect: TFL101
            return x
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if "print" not in ctx.source:
            return  # cheap text test: nothing to look at
        a = ctx.analysis
        for node in ctx.analysis.nodes(ast.Call):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
                and a.qualname(node.func) is None  # not shadowed by an import
            ):
                continue
            func = a.traced.traced_function_of(node)
            if func is None or _prints_static_facts(node):
                continue
            if a.traced.converts_print(func) and any(not _formatted_at_trace_time(x) for x in node.args):
                continue  # AutoGraph's BUILTIN_FUNCTIONS option makes it a print op
            name = getattr(func, "name", "<lambda>")
            alias, import_edits = tensorflow_alias(ctx)
            unsafe = any(
                isinstance(arg, ast.JoinedStr)
                or (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mod))
                or (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "format")
                for arg in node.args
            ) or any(k.arg in ("file", "flush") for k in node.keywords)
            fix = Fix(
                message=f"Replace `print` with `{alias}.print`",
                edits=(ctx.replace(node.func, f"{alias}.print"), *import_edits),
                applicability="unsafe" if unsafe else "safe",
            )
            ctx.report(
                node,
                f"`print()` in traced `{name}` runs only while tracing; later calls print "
                f"nothing. Use `{alias}.print()`",
                fix=fix,
            )


_STATIC_ATTRS = frozenset({"shape", "dtype", "ndim", "rank", "name"})


def _prints_static_facts(call: ast.Call) -> bool:
    """``print("h:", h.shape)``: every argument is known while tracing (text, numbers, a
    tensor's static ``.shape``/``.dtype``/``.ndim``/``.name``, formatted from those) and one
    is such a static fact. A trace-time shape check prints what it means to, once per trace;
    ``tf.print`` would print the run-time shape on every step instead."""
    facts = 0

    def static(e: ast.AST) -> bool:
        nonlocal facts
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.Attribute) and e.attr in _STATIC_ATTRS:
            facts += 1
            return True
        if isinstance(e, ast.Subscript):  # x.shape[0], x.shape[1:]
            return isinstance(e.value, ast.Attribute) and e.value.attr == "shape" and static(e.value)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("len", "str", "repr", "tuple", "list"):
            return len(e.args) == 1 and not e.keywords and static(e.args[0])
        if isinstance(e, ast.Compare):  # h.shape == y.shape
            return static(e.left) and all(static(c) for c in e.comparators)
        if isinstance(e, ast.JoinedStr):
            return all(static(v.value) if isinstance(v, ast.FormattedValue) else static(v) for v in e.values)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mod):
            right = e.right.elts if isinstance(e.right, ast.Tuple) else [e.right]
            return static(e.left) and all(static(r) for r in right)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "format":
            return static(e.func.value) and all(static(x) for x in e.args) and all(static(k.value) for k in e.keywords)
        return False

    args = [*call.args, *(k.value for k in call.keywords if k.arg in ("sep", "end"))]
    return all(static(x) for x in args) and facts > 0 and not any(k.arg == "file" for k in call.keywords)


def _inside(a, node: ast.AST, stmt: ast.AST) -> bool:
    return node is stmt or any(anc is stmt for anc in a.ancestors(node))


def _formatted_at_trace_time(e: ast.AST) -> bool:
    """A literal or a string formatted in Python (f-string, ``%``, ``.format``): a ``str`` by
    the time ``print`` sees it, so AutoGraph's converted ``print`` prints it only while tracing."""
    return (
        isinstance(e, (ast.Constant, ast.JoinedStr))
        or (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mod))
        or (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "format")
    )


# --------------------------------------------------------------------------------------------
# Shared helpers for TFL102..TFL108.

def _traced_calls(ctx: RuleContext):
    """(call, traced function) for every call that runs in traced code."""
    yield from ctx.analysis.traced.calls_in_traced_code()


def _fname(func: ast.AST) -> str:
    return getattr(func, "name", "<lambda>")


def _text(ctx: RuleContext, node: ast.AST, limit: int = 40) -> str:
    text = ctx.segment(node) or ast.unparse(node)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_CONTAINER_CALLS = frozenset(
    {
        "list", "dict", "set", "collections.defaultdict", "collections.OrderedDict",
        "collections.deque", "collections.Counter",
    }
)
_MUTATORS = frozenset(
    {"append", "extend", "insert", "update", "add", "setdefault", "appendleft", "extendleft", "discard", "remove"}
)
_LIST_MUTATORS = frozenset({"append", "extend", "insert"})
# What mutates a list or dict argument in place (a tf.function's arguments are checked).
_ARG_MUTATORS = _MUTATORS | {"pop", "popitem", "clear", "sort", "reverse"}
_VARIABLES = frozenset(
    {
        "tensorflow.Variable", "tensorflow.compat.v1.Variable", "tensorflow.compat.v1.get_variable",
        "keras.Variable", "keras.backend.Variable", "keras.variables.Variable",
    }
)


def _is_container_value(ctx: RuleContext, value: ast.AST) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        if isinstance(f, ast.Name) and f.id in ("list", "dict", "set") and ctx.analysis.qualname(f) is None:
            return True
        return ctx.analysis.call_name(value) in _CONTAINER_CALLS
    return False


def _creates_state(ctx: RuleContext, value: ast.AST) -> bool:
    """Whether ``value`` builds a layer or a variable (tracked state, not a traced value)."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in ("add_weight", "add_variable", "add_loss", "add_metric"):
                return True
            q = ctx.analysis.call_name(node) or ""
            if q in _VARIABLES or q.startswith(("keras.layers.", "keras.metrics.", "keras.losses.")):
                return True
    return False


# --------------------------------------------------------------------------------------------


class MutatedOuterContainer(Rule):
    code = "TFL102"
    name = "outer-container-mutated-in-traced-code"
    severity = Severity.ERROR
    summary = "Python list/dict/set from an outer scope mutated in traced code"
    what = (
        "Checks for a Python list, dict or set that lives outside the traced function (a "
        "module global, a variable of an enclosing eager function, or a container held in a "
        "`self.` attribute) being mutated inside traced code: `.append/.extend/.insert/"
        ".update/.add`, item assignment, or `+=` on an item. Containers created inside the "
        "traced function itself are fine, and so is a side channel of a trace the program "
        "asks for (`f.get_concrete_function(...)`, `f` never called): it is filled once per "
        "requested trace, as intended. Also a list or dict *argument* of a `tf.function` "
        "mutated in place (`.append/.pop/.update`, item assignment or deletion)."
    )
    why = (
        "The Python body of a traced function runs only while TensorFlow traces it. The "
        "mutation happens once per trace, not once per call: a list meant to collect one loss "
        "per step ends up with one symbolic `Tensor(\"...\")` per trace, and a dict cache is "
        "filled with graph tensors that cannot be used outside the graph (using them raises "
        "or leaks the graph). A tf.function checks its Python arguments after tracing: one "
        "modified in place raises `ValueError: f(xs) should not modify its Python input "
        "arguments`."
    )
    example = (
        """
        losses = []

        @tf.function
        def train_step(x, y):
            loss = compute_loss(x, y)
            losses.append(loss)
            return loss
        """
    )
    use_instead = (
        """
        @tf.function
        def train_step(x, y):
            return compute_loss(x, y)

        losses = []
        for x, y in dataset:
            losses.append(float(train_step(x, y)))
        # or, inside traced code, accumulate in a tf.TensorArray / tf.Variable
        """
    )
    VALID = [
        """
        import tensorflow as tf

        @tf.function
        def total(xs):
            xs = list(xs)
            xs.append(tf.constant(0.0))
            return tf.add_n(xs)
        """,
        """
        import tensorflow as tf

        @tf.function
        def f(xs):
            out = []
            for i in range(3):
                out.append(xs[i] * 2)
            return tf.stack(out)
        """,
        """
        import tensorflow as tf

        history = []

        @tf.function
        def step(x):
            return x * 2

        for x in tf.data.Dataset.range(3):
            history.append(float(step(x)))
        """,
        """
        import keras

        class Block(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.heads = {}

            def call(self, x, key='a'):
                if key not in self.heads:
                    self.heads[key] = keras.layers.Dense(4)
                return self.heads[key](x)
        """,
        """
        import tensorflow as tf

        @tf.function
        def f(n):
            ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            for i in tf.range(n):
                ta = ta.write(i, tf.cast(i, tf.float32))
            return ta.stack()
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        @tf.function
        def total(xs):
            xs.append(tf.constant(0.0))  # expect: TFL102
            return tf.add_n(xs)
        """,
        """
        import tensorflow as tf

        def step(batch):
            batch["scaled"] = batch["x"] * 2.0  # expect: TFL102
            return batch["scaled"]

        step_fn = tf.function(step)
        """,
        """
        import tensorflow as tf

        losses = []

        @tf.function
        def step(x):
            loss = tf.reduce_mean(x)
            losses.append(loss)  # expect: TFL102
            return loss
        """,
        """
        import tensorflow as tf

        cache = {}

        def helper(x):
            cache['last'] = x  # expect: TFL102
            return x + 1

        @tf.function
        def step(x):
            return helper(x)
        """,
        """
        from tensorflow import keras

        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.dense = keras.layers.Dense(1)
                self.seen = []

            def call(self, x):
                self.seen.append(x)  # expect: TFL102
                return self.dense(x)
        """,
        """
        import tensorflow as tf

        def train(ds):
            counts = {'steps': 0}

            @tf.function
            def step(x):
                counts['steps'] += 1  # expect: TFL102
                return x

            for x in ds:
                step(x)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        traced = a.traced
        for node, _func in traced.nodes_in_traced_code():
            target: ast.AST | None = None
            what = ""
            if not isinstance(node, (ast.Call, ast.Assign, ast.AugAssign, ast.Delete)):
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ARG_MUTATORS:
                target, what = node.func.value, f".{node.func.attr}()"
                arg_func = self._mutated_argument(ctx, target, node)
                if arg_func is not None:
                    self._report_argument(ctx, node, target, what, arg_func)
                    continue
                if node.func.attr not in _MUTATORS or any(_creates_state(ctx, arg) for arg in node.args):
                    continue
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                targets = node.targets if not isinstance(node, ast.AugAssign) else [node.target]
                subs = [t for t in targets if isinstance(t, ast.Subscript)]
                if not subs:
                    continue
                target = subs[0].value
                what = "item deletion" if isinstance(node, ast.Delete) else "item assignment"
                arg_func = self._mutated_argument(ctx, target, node)
                if arg_func is not None:
                    self._report_argument(ctx, node, target, what, arg_func)
                    continue
                if isinstance(node, ast.Assign) and _creates_state(ctx, node.value):
                    continue
            else:
                continue
            func = traced.traced_function_of(node)
            if func is None:
                continue
            where = self._outer_container(ctx, target, node, what)
            if where is None or traced.guard_of(node) is not None:
                continue
            if traced.only_traced_explicitly(func):
                continue  # traced on request (`get_concrete_function`): a side channel of that trace
            if "trac" in where.lower():
                continue  # deliberately counting traces (`tracing_count[...] += 1`)
            ctx.report(
                node,
                f"{what} on {where} in traced `{_fname(func)}` runs only while tracing, not on "
                f"every call, and stores graph tensors; return values from the function or use "
                f"a `tf.TensorArray`/`tf.Variable`",
            )

    @staticmethod
    def _traced_once_per_container(ctx: RuleContext, at: ast.AST, scope: ast.AST) -> bool:
        """Whether every tf.function whose trace runs ``at`` is created in ``scope`` (next to
        the container) and traced at most once there: called once, not in a loop, or only
        traced with ``get_concrete_function``, and never handed out. Each call of ``scope``
        then makes a fresh container and one trace that fills it: a deliberate side channel
        of the trace (``cond_is_stacked[0] = ...`` in a `while_loop` body)."""
        a = ctx.analysis
        traced = a.traced
        func = traced.traced_function_of(at)
        roots = traced.roots_of(func) if func is not None else []
        if not roots:
            return False
        for root in roots:
            if a.enclosing_function(root) is not scope or not isinstance(root, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return False
            if traced.tf_function_decorator(root) is None:
                return False
            uses = [
                n for n in ast.walk(scope)
                if isinstance(n, ast.Name) and n.id == root.name and isinstance(n.ctx, ast.Load)
            ]
            calls = 0
            for n in uses:
                p = a.parent(n)
                if isinstance(p, ast.Attribute) and p.attr == "get_concrete_function":
                    continue
                if isinstance(p, ast.Call) and p.func is n and not _called_repeatedly(ctx, p, scope):
                    calls += 1
                    continue
                return False  # called in a loop, returned, stored or passed on
            if calls > 1:
                return False
        return True

    @staticmethod
    def _mutated_argument(ctx: RuleContext, target: ast.AST, at: ast.AST) -> ast.AST | None:
        """The tf.function whose own (never rebound) parameter ``target`` is, else ``None``."""
        if not isinstance(target, ast.Name):
            return None
        a = ctx.analysis
        traced = a.traced
        scope = traced.defining_scope(target.id, at)
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) or a.enclosing_function(at) is not scope:
            return None
        params = [p.arg for p in (*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs)]
        if target.id not in params or target.id in ("self", "cls") or traced.bindings(target.id, scope):
            return None
        reason = traced.reason(scope) or ""
        if traced.tf_function_decorator(scope) is None and not reason.startswith("wrapped with tf.function"):
            return None
        return scope

    @staticmethod
    def _report_argument(ctx: RuleContext, node: ast.AST, target: ast.Name, what: str, func: ast.AST) -> None:
        ctx.report(
            node,
            f"{what} on `{target.id}`, an argument of tf.function `{_fname(func)}`: TensorFlow raises "
            f"`ValueError: ... should not modify its Python input arguments`; work on a copy "
            f"(`{target.id} = list({target.id})` / `dict({target.id})`) or return the new value",
        )

    def _outer_container(self, ctx: RuleContext, target: ast.AST, at: ast.AST, what: str) -> str | None:
        a = ctx.analysis
        traced = a.traced
        if isinstance(target, ast.Name):
            if a.imports.aliases.get(target.id):
                return None
            scope = traced.defining_scope(target.id, at)
            if scope is None:
                return None
            if not isinstance(scope, ast.Module) and (traced.is_traced_function(scope) or traced.is_traced(scope)):
                return None  # created during the trace itself
            if not isinstance(scope, ast.Module) and self._traced_once_per_container(ctx, at, scope):
                return None
            values = traced.bindings(target.id, scope)
            where = "module-level" if isinstance(scope, ast.Module) else f"`{getattr(scope, 'name', '?')}`'s"
            if values and all(_is_container_value(ctx, v) for v in values):
                line = values[0].lineno
                return f"{where} `{target.id}` (created on line {line})"
            if (
                not values
                and not isinstance(scope, ast.Module)
                and target.id in {p.arg for p in scope.args.args}
                and what.strip(".()") in _LIST_MUTATORS
            ):
                return f"`{target.id}`, a parameter of eager `{getattr(scope, 'name', '?')}`,"
            return None
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            func = a.enclosing_function(at)
            cls = a.enclosing_class(at)
            if func is None or cls is None:
                return None
            values = traced.self_attr_values(cls, target.attr)
            if not values or not all(_is_container_value(ctx, v) for v in values):
                return None
            # reset inside the same function: a fresh container per trace
            for v in values:
                if a.enclosing_function(v) is func:
                    return None
            return f"`self.{target.attr}` (created on line {values[0].lineno})"
        return None


def _called_repeatedly(ctx: RuleContext, node: ast.AST, scope: ast.AST) -> bool:
    """Whether ``node`` sits in a loop or comprehension of ``scope``."""
    for anc in ctx.analysis.ancestors(node):
        if anc is scope:
            return False
        if isinstance(anc, (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return True
    return False


def _plain_python_value(ctx: RuleContext, value: ast.AST) -> bool:
    """A number, string, bool, None, tuple or list literal, or ``int()``/``float()``/``len()``."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Constant):
        return True
    if isinstance(value, (ast.Tuple, ast.List)):
        return True
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("int", "float", "len", "str", "bool"):
        return ctx.analysis.qualname(value.func) is None
    return False


def _assigned_targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return [el for t in node.targets for el in flatten_targets(t)]
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return list(flatten_targets(node.target))
    return []


class RebindingInTracedCode(Rule):
    code = "TFL103"
    name = "python-state-rebound-in-traced-code"
    severity = Severity.ERROR
    summary = "`global`/`nonlocal` or plain `self.attr` rebound, or a tensor stored on `self`, in traced code"
    what = (
        "Checks for traced code that rebinds Python state living outside the call: a name "
        "declared `global` or `nonlocal`, or a plain Python attribute (`self.step += 1`, "
        "`self.total = self.total + x`, where the attribute holds a number, string or tuple "
        "rather than a `tf.Variable`); and a tensor the trace computed stored on `self` or on a "
        "module-level object (`self.loss_value = loss`, `self.grad = g`)."
    )
    why = (
        "Python statements in a traced function run only while TensorFlow traces it. A "
        "counter incremented there counts traces, not calls; a total accumulated there holds "
        "the symbolic tensor of the last trace. The program silently computes something "
        "other than it says, and the stale value is baked into later graphs as a constant. "
        "A tensor stored on an object outlives its graph: reading it after the call raises "
        "`TypeError: <tf.Tensor ...> is out of scope and cannot be used here`."
    )
    example = (
        """
        step = 0

        @tf.function
        def train_step(x):
            global step
            step += 1
            return model(x)
        """
    )
    use_instead = (
        """
        step = tf.Variable(0)

        @tf.function
        def train_step(x):
            step.assign_add(1)
            return model(x)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        step = tf.Variable(0)

        @tf.function
        def f(x):
            step.assign_add(1)
            return x
        """,
        """
        import tensorflow as tf

        count = 0

        def eager_step(x):
            global count
            count += 1
            return x
        """,
        """
        import tensorflow as tf

        class Embedding(tf.keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self._call_id = 0

            def call(self, ids):
                self._call_id += 1  # numbers each trace's lookup ops, meant to count traces
                return tf.identity(ids, name=f"lookup_{self._call_id}")
        """,
        """
        import keras
        import tensorflow as tf

        class Counter(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.calls = tf.Variable(0)

            def call(self, x):
                self.calls.assign_add(1)
                return x
        """,
        """
        import tensorflow as tf

        class M(tf.Module):
            def __init__(self):
                self.v = None

            @tf.function
            def __call__(self, x):
                if self.v is None:
                    self.v = tf.Variable(1.0)
                return x * self.v
        """,
        """
        import tensorflow as tf

        class Trainer(tf.Module):
            def __init__(self):
                self.loss_value = tf.Variable(0.0)

            @tf.function
            def step(self, x):
                loss = tf.reduce_mean(x * x)
                self.loss_value.assign(loss)
                return loss

        trainer = Trainer()
        trainer.last = trainer.step(tf.ones(3))  # eager: a concrete value
        """,
        """
        import keras
        import tensorflow as tf

        class GAN(keras.Model):
            def train_step(self, data):
                self.batch = tf.shape(data)[0]  # read only by helpers of this trace
                with tf.GradientTape() as tape:
                    loss = self._loss(data)
                return {"loss": loss}

            def _loss(self, data):
                return tf.reduce_mean(data) + self._penalty()

            def _penalty(self):
                return tf.reduce_mean(tf.random.uniform([self.batch]))
        """,
    ]
    INVALID = [
        """
        import keras
        import tensorflow as tf

        class GAN(keras.Model):
            def train_step(self, data):
                self.batch = tf.shape(data)[0]  # expect: TFL103
                return {"loss": tf.reduce_mean(data)}

            def test_step(self, data):
                # another trace: the tensor of train_step's graph is out of scope here
                return {"loss": tf.reduce_mean(tf.random.uniform([self.batch]))}
        """,
        """
        import tensorflow as tf

        step = 0

        @tf.function
        def f(x):
            global step
            step += 1  # expect: TFL103
            return x
        """,
        """
        from tensorflow import keras

        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.calls = 0

            def call(self, x):
                self.calls += 1  # expect: TFL103
                return x
        """,
        """
        import tensorflow as tf

        class Acc:
            def __init__(self):
                self.total = 0.0

            @tf.function
            def add(self, x):
                self.total = self.total + tf.reduce_sum(x)  # expect: TFL103
                return x
        """,
        """
        import tensorflow as tf

        def make():
            last = None

            @tf.function
            def step(x):
                nonlocal last
                last = x  # expect: TFL103
                return x
            return step
        """,
        """
        import tensorflow as tf

        class Trainer(tf.Module):
            @tf.function
            def step(self, x):
                loss = tf.reduce_mean(x * x)
                self.loss_value = loss  # expect: TFL103
                return loss
        """,
        """
        import tensorflow as tf

        class Embedding(tf.keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self._calls = 0

            def call(self, ids):
                self._calls += 1  # expect: TFL103
                return tf.identity(ids, name=f"lookup_{self._calls}") * self._calls
        """,
        """
        import tensorflow as tf

        class Stats:
            pass

        stats = Stats()

        @tf.function
        def step(x):
            y = tf.nn.relu(x)
            stats.last = y  # expect: TFL103
            return y
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        traced = a.traced
        for node, func in traced.nodes_in_traced_code():
            targets = _assigned_targets(node)
            if not targets:
                continue
            own = a.enclosing_function(node)
            if own is None:
                continue
            declared = traced.declared_outer(own)
            for t in targets:
                if isinstance(t, ast.Name) and t.id in declared:
                    if traced.guard_of(node) is not None:
                        continue
                    decl = declared[t.id]
                    kind = "global" if isinstance(decl, ast.Global) else "nonlocal"
                    ctx.report(
                        node,
                        f"rebinding {kind} `{t.id}` (declared on line {decl.lineno}) in traced "
                        f"`{_fname(func)}` happens only while tracing, not on every call; use a "
                        f"`tf.Variable` and `.assign()`",
                    )
                elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and self._leaks_tensor(ctx, node, t):
                    owner = "`self`" if t.value.id == "self" else f"outer object `{t.value.id}`"
                    ctx.report(
                        node,
                        f"`{_text(ctx, t)} = ...` stores a tensor of the trace of `{_fname(func)}` on "
                        f"{owner}: read after the call it is a graph tensor out of scope (an error, or "
                        f"a crash in the next trace); return it, or `.assign()` it to a `tf.Variable`",
                    )
                elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    if not self._accumulates(node, t):
                        continue
                    values = [
                        v for v in traced.self_attr_values(a.enclosing_class(node), t.attr)
                        if a.enclosing_function(v) is not own
                    ]
                    if not values or not all(_plain_python_value(ctx, v) for v in values):
                        continue
                    if traced.guard_of(node) is not None or self._names_only(ctx, node, t.attr):
                        continue
                    ctx.report(
                        node,
                        f"`{_text(ctx, node)}` updates plain Python attribute `self.{t.attr}` "
                        f"(set on line {values[0].lineno}) in traced `{_fname(func)}`: it runs only "
                        f"while tracing, not on every call; keep it in a `tf.Variable` and use "
                        f"`.assign_add()`",
                    )

    @staticmethod
    def _leaks_tensor(ctx: RuleContext, node: ast.AST, target: ast.Attribute) -> bool:
        """``self.x = <tensor>`` (or ``obj.x = <tensor>`` for a module-level ``obj``) in traced
        code: a tensor of the trace kept beyond it."""
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or node.targets[0] is not target:
            return False
        a = ctx.analysis
        traced = a.traced
        root = target.value.id  # type: ignore[attr-defined]
        if root != "self":
            if a.imports.aliases.get(root) or not isinstance(traced.defining_scope(root, node), ast.Module):
                return False
        else:
            cls = a.enclosing_class(node)
            if cls is None:
                return False
            # Scratch space of one call (read back only by the function that stores it, or by
            # methods that only it calls: the same trace) is harmless; a tensor kept for other
            # methods or for the caller leaks.
            own = a.enclosing_function(node)
            reads = [
                n for n in ast.walk(cls)
                if isinstance(n, ast.Attribute) and n.attr == target.attr and isinstance(n.ctx, ast.Load)
                and isinstance(n.value, ast.Name) and n.value.id == "self"
            ]
            if reads and all(traced.runs_only_within(a.enclosing_function(n), own) for n in reads):
                return False
        return traced.is_tensor(node.value)

    @staticmethod
    def _names_only(ctx: RuleContext, node: ast.AST, attr: str) -> bool:
        """Every other read of ``self.<attr>`` in the class is formatted into a string (an
        f-string, ``.format()``, ``%``, ``str()``): a counter that numbers what each trace
        builds (op or layer names), which is meant to count traces."""
        a = ctx.analysis
        cls = a.enclosing_class(node)
        if cls is None:
            return False
        reads = [
            n for n in ast.walk(cls)
            if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name) and n.value.id == "self" and not _inside(a, n, node)
        ]

        def formatted(n: ast.AST) -> bool:
            for anc in a.ancestors(n):
                if isinstance(anc, ast.FormattedValue):
                    return True
                if isinstance(anc, ast.Call):
                    f = anc.func
                    if (isinstance(f, ast.Attribute) and f.attr == "format") or (isinstance(f, ast.Name) and f.id == "str"):
                        return True
                    return False
                if isinstance(anc, ast.BinOp) and isinstance(anc.op, ast.Mod):
                    return isinstance(anc.left, (ast.Constant, ast.JoinedStr))
                if isinstance(anc, (ast.stmt, ast.Lambda)):
                    return False
            return False

        return bool(reads) and all(formatted(n) for n in reads)

    @staticmethod
    def _accumulates(node: ast.AST, target: ast.Attribute) -> bool:
        if isinstance(node, ast.AugAssign):
            return True
        value = getattr(node, "value", None)
        if not isinstance(value, ast.BinOp):
            return False
        for side in (value.left, value.right):
            if (
                isinstance(side, ast.Attribute)
                and side.attr == target.attr
                and isinstance(side.value, ast.Name)
                and side.value.id == "self"
            ):
                return True
        return False


_RNG_SETUP = frozenset(
    {
        "seed", "default_rng", "RandomState", "Generator", "SeedSequence", "PCG64", "PCG64DXSM",
        "MT19937", "Philox", "SFC64", "BitGenerator", "Random", "SystemRandom", "getstate",
        "setstate", "get_state", "set_state", "bit_generator",
    }
)


class PythonRandomInTracedCode(Rule):
    code = "TFL104"
    name = "python-random-in-traced-code"
    severity = Severity.ERROR
    summary = "Python or NumPy randomness in traced code is drawn once, at trace time"
    fixable = True
    fix_safety = (
        "For one-number draws with a TensorFlow equivalent (`random.random()`, "
        "`random.uniform(a, b)`, `random.gauss(mu, sigma)`, `np.random.rand()`, "
        "`np.random.randn()`, `np.random.uniform(...)`, `np.random.normal(...)` without "
        "keywords), the fix draws with `tf.random.uniform([], ...)` / `tf.random.normal([], ...)`, "
        "a new number on every call. It is unsafe: the value is a float32 tensor, not a Python "
        "float, the random stream differs (seed with `tf.random.set_seed`), and a `tf.data` map "
        "whose function draws random numbers is stateful, so it no longer runs in parallel by "
        "itself."
    )
    what = (
        "Checks for `random.*`, `np.random.*` and NumPy `Generator`/`RandomState` methods "
        "(`rng = np.random.default_rng(); rng.normal()`) called in traced code. "
        "`tf.random.*`, `tf.random.Generator` and `keras.random.*` are graph ops and fine."
    )
    why = (
        "Python and NumPy random numbers are drawn while the function is traced and baked into "
        "the graph as constants. Every later call reuses the same \"random\" value: dropout "
        "masks, augmentations and noise stop being random, silently (measured on TensorFlow "
        "2.21: four calls, one value)."
    )
    example = (
        """
        @tf.function
        def augment(image):
            if np.random.rand() < 0.5:
                image = tf.image.flip_left_right(image)
            return image
        """
    )
    use_instead = (
        """
        @tf.function
        def augment(image):
            if tf.random.uniform([]) < 0.5:
                image = tf.image.flip_left_right(image)
            return image
        """
    )
    VALID = [
        """
        import tensorflow as tf

        @tf.function
        def f(x):
            return x + tf.random.normal(tf.shape(x))
        """,
        """
        import tensorflow as tf

        gen = tf.random.Generator.from_seed(1)

        @tf.function
        def f(x):
            return x + gen.normal(tf.shape(x))
        """,
        """
        import numpy as np
        import tensorflow as tf

        rng = np.random.default_rng(0)
        x_train = rng.normal(size=(100, 4)).astype('float32')

        @tf.function
        def f(x):
            return x * 2
        """,
        """
        import random
        import tensorflow as tf

        def make_ds(files):
            random.shuffle(files)
            return tf.data.Dataset.from_tensor_slices(files)
        """,
    ]
    INVALID = [
        """
        import numpy as np
        import tensorflow as tf

        @tf.function
        def f(x):
            return x + np.random.normal()  # expect: TFL104
        """,
        """
        import random
        import tensorflow as tf

        def jitter(x):
            return x * random.uniform(0.9, 1.1)  # expect: TFL104

        ds = tf.data.Dataset.range(4).map(jitter)
        """,
        """
        import numpy as np
        from tensorflow import function

        rng = np.random.default_rng(0)

        @function
        def f(x):
            return x + rng.normal()  # expect: TFL104
        """,
        """
        from numpy import random
        import keras

        class Noise(keras.layers.Layer):
            def call(self, x):
                return x + random.rand()  # expect: TFL104
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        for call, func in _traced_calls(ctx):
            name = a.call_name(call) or self._self_rng(ctx, call)
            if not name or not name.startswith(("random.", "numpy.random.")):
                continue
            last = name.rsplit(".", 1)[-1]
            if last in _RNG_SETUP or last.endswith("()"):
                continue
            shown = _text(ctx, call.func)
            ctx.report(
                call,
                f"`{shown}()` in traced `{_fname(func)}` draws one number while tracing; every "
                f"call reuses it as a constant. Use `tf.random.*` or a `tf.random.Generator`",
                fix=_tf_random_fix(ctx, call, name),
            )

    @staticmethod
    def _self_rng(ctx: RuleContext, call: ast.Call) -> str | None:
        """``self.rng.normal()`` where ``self.rng = np.random.default_rng()`` in the class."""
        f = call.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute)):
            return None
        inner = f.value
        if not (isinstance(inner.value, ast.Name) and inner.value.id == "self"):
            return None
        a = ctx.analysis
        values = a.traced.self_attr_values(a.enclosing_class(call), inner.attr)
        if len(values) == 1 and isinstance(values[0], ast.Call):
            q = a.call_name(values[0])
            if q:
                return f"{q}().{f.attr}"
        return None


_CLOCKS = frozenset(
    {
        "time.time", "time.time_ns", "time.perf_counter", "time.perf_counter_ns", "time.monotonic",
        "time.monotonic_ns", "time.process_time", "time.process_time_ns", "time.localtime",
        "time.gmtime", "time.ctime", "time.asctime", "time.strftime",
        "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today",
        "datetime.date.today", "timeit.default_timer",
    }
)


# Python/NumPy draws of one number and the TensorFlow op drawing the same distribution:
# name -> (tf.random function, default arguments (low/mean, high/stddev), fixed arity or None)
_TF_RANDOM_EQUIVALENT = {
    "random.random": ("uniform", ("0.0", "1.0"), 0),
    "random.uniform": ("uniform", (), 2),
    "random.gauss": ("normal", (), 2),
    "random.normalvariate": ("normal", (), 2),
    "numpy.random.rand": ("uniform", ("0.0", "1.0"), 0),
    "numpy.random.random": ("uniform", ("0.0", "1.0"), 0),
    "numpy.random.randn": ("normal", ("0.0", "1.0"), 0),
    "numpy.random.uniform": ("uniform", ("0.0", "1.0"), None),
    "numpy.random.normal": ("normal", ("0.0", "1.0"), None),
}


def _tf_random_fix(ctx: RuleContext, call: ast.Call, name: str) -> Fix | None:
    """``random.uniform(a, b)`` → ``tf.random.uniform([], a, b)``: one scalar draw per call."""
    known = _TF_RANDOM_EQUIVALENT.get(name)
    if known is None or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    op, defaults, arity = known
    given = [ctx.segment(a) for a in call.args]
    if (arity is not None and len(given) != arity) or len(given) > 2:
        return None
    args = given + list(defaults[len(given):])
    tf, imports = tensorflow_alias(ctx)
    text = f"{tf}.random.{op}([]{''.join(', ' + a for a in args if args != ['0.0', '1.0'])})"
    return Fix(f"Draw with `{tf}.random.{op}`", (replace_span(start_of(call), end_of(call), text), *imports), "unsafe")


# clocks whose differences `tf.timestamp()` (seconds, float64) measures the same way
_TIMESTAMP_EQUIVALENT = frozenset({"time.time", "time.perf_counter", "time.monotonic", "timeit.default_timer"})


class WallClockInTracedCode(Rule):
    code = "TFL105"
    name = "wall-clock-in-traced-code"
    severity = Severity.ERROR
    summary = "Wall-clock call in traced code is read once, at trace time"
    fixable = True
    fix_safety = (
        "For `time.time()`, `time.perf_counter()`, `time.monotonic()` and "
        "`timeit.default_timer()`, the fix reads the clock with `tf.timestamp()`, an op that "
        "runs on every call. It is unsafe: the value is a float64 tensor of seconds since the "
        "epoch, not a Python float, and ops that are not ordered by data dependencies may run "
        "before or after it (differences between two reads stay meaningful only when they "
        "depend on the work they time)."
    )
    what = (
        "Checks for `time.time()`, `time.perf_counter()`, `time.monotonic()`, "
        "`datetime.now()` and similar clock reads inside traced code. A reading that only "
        "reaches Python calls (`took = time.time() - start; logging.info(...)`) times the "
        "Python work done while tracing, which is right once per trace, and is not reported."
    )
    why = (
        "The clock is read while the function is traced and the value is frozen into the "
        "graph as a constant. Step timings computed inside the function are always zero or "
        "the trace time, and time-based schedules never advance."
    )
    example = (
        """
        @tf.function
        def train_step(x, y):
            start = time.perf_counter()
            loss = step(x, y)
            tf.print("took", time.perf_counter() - start)
            return loss
        """
    )
    use_instead = (
        """
        @tf.function
        def train_step(x, y):
            return step(x, y)

        start = time.perf_counter()
        loss = train_step(x, y)
        print("took", time.perf_counter() - start)  # or tf.timestamp() inside the graph
        """
    )
    VALID = [
        """
        import time
        import tensorflow as tf

        @tf.function
        def step(x):
            return x * 2

        start = time.perf_counter()
        step(tf.constant(1.0))
        print(time.perf_counter() - start)
        """,
        """
        import tensorflow as tf

        @tf.function
        def step(x):
            t0 = tf.timestamp()
            y = x * 2
            tf.print(tf.timestamp() - t0)
            return y
        """,
        """
        import time
        import tensorflow as tf

        @tf.function
        def step(x):
            def now(v):
                return time.time()
            return tf.py_function(now, [x], tf.float64)
        """,
    ]
    INVALID = [
        """
        import time
        import tensorflow as tf

        @tf.function
        def step(x):
            t = time.time()  # expect: TFL105
            return x * 2
        """,
        """
        from time import perf_counter
        import tensorflow as tensorflow_lib

        @tensorflow_lib.function(jit_compile=True)
        def step(x):
            start = perf_counter()  # expect: TFL105
            return x
        """,
        """
        from datetime import datetime
        from tensorflow import keras

        class Stamp(keras.layers.Layer):
            def call(self, x):
                self.last = datetime.now()  # expect: TFL105
                return x
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        for call, func in _traced_calls(ctx):
            if a.call_name(call) not in _CLOCKS:
                continue
            if self._times_python_work(ctx, call):
                continue
            fix = None
            if a.call_name(call) in _TIMESTAMP_EQUIVALENT and not (call.args or call.keywords):
                tf, imports = tensorflow_alias(ctx)
                fix = Fix(
                    f"Read the clock in the graph: `{tf}.timestamp()`",
                    (replace_span(start_of(call), end_of(call), f"{tf}.timestamp()"), *imports),
                    "unsafe",
                )
            ctx.report(
                call,
                f"`{_text(ctx, call.func)}()` in traced `{_fname(func)}` reads the clock once, "
                f"while tracing; the value is a constant in every later call. Time the call "
                f"from eager code or use `tf.timestamp()`",
                fix=fix,
            )

    @staticmethod
    def _times_python_work(ctx: RuleContext, call: ast.Call) -> bool:
        """Whether the clock reading (and every value computed from it in the function) only
        reaches Python calls that are not TensorFlow ops (``logging.info``, a metrics
        counter): it then times the Python work done while tracing, which is right once per
        trace. Reaching a TensorFlow op, a return, a branch condition or stored state, or not
        being used at all, counts as frozen."""
        a = ctx.analysis
        own = a.enclosing_function(call)
        if own is None or isinstance(own, ast.Lambda):
            return False
        tainted: set[str] = set()
        todo: list[ast.AST] = [call]
        sinks = 0
        while todo:
            cur = todo.pop()
            while True:
                p = a.parent(cur)
                if isinstance(p, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.JoinedStr,
                                  ast.FormattedValue, ast.Tuple, ast.List, ast.keyword, ast.Starred)):
                    cur = p
                    continue
                if isinstance(p, ast.IfExp) and cur is not p.test:
                    cur = p
                    continue
                if isinstance(p, ast.Call) and cur is not p.func:
                    name = a.call_name(p) or ""
                    if _graph_call(ctx, p, name):
                        return False  # into the graph: a constant there
                    if isinstance(p.func, ast.Name) and p.func.id in _PASS_THROUGH or name.startswith("math."):
                        cur = p
                        continue
                    sinks += 1  # a Python call: logging, metrics, ...
                    break
                if isinstance(p, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and cur is p.value:
                    targets = p.targets if isinstance(p, ast.Assign) else [p.target]
                    for t in targets:
                        for el in flatten_targets(t):
                            if not isinstance(el, ast.Name):
                                return False  # stored in Python state
                            if el.id not in tainted:
                                tainted.add(el.id)
                                todo.extend(
                                    n for n in walk_own(own.body)
                                    if isinstance(n, ast.Name) and n.id == el.id and isinstance(n.ctx, ast.Load)
                                )
                    break
                return False  # returned, a condition, or anything else
        return sinks > 0


def _graph_call(ctx: RuleContext, call: ast.Call, name: str) -> bool:
    """A TensorFlow/Keras call that puts its arguments into the graph (an op, `tf.print`,
    `tf.summary.*`), as opposed to TensorFlow's own Python helpers (`tensorflow.python.
    checkpoint.metrics`, `tensorflow.python.platform.tf_logging`)."""
    if ctx.analysis.traced.is_tensor(call):
        return True
    if name.startswith("tensorflow.python."):
        return name.startswith(("tensorflow.python.ops.", "tensorflow.python.framework."))
    return name.startswith(("tensorflow.", "keras."))


_PASS_THROUGH = frozenset({"max", "min", "round", "int", "float", "abs", "str", "sum", "format"})


class VariableCreatedInTracedCode(Rule):
    code = "TFL106"
    name = "variable-created-in-traced-code"
    severity = Severity.ERROR
    summary = "`tf.Variable` created in traced code without a create-once guard"
    what = (
        "Checks for `tf.Variable(...)` (and `keras.Variable(...)`) constructed inside traced "
        "code outside `build()`/`__init__` and without a create-once guard such as "
        "`if self.v is None:`."
    )
    why = (
        "A variable created in a traced function is created again on every trace, and "
        "TensorFlow traces a function that created variables a second time to check it. So "
        "the first call already raises `ValueError: tf.function only supports singleton "
        "tf.Variables created on the first call`, and so does `fit` on a Keras model whose "
        "`call` creates one (measured on TensorFlow 2.21 with Keras 3). Called eagerly, the "
        "same layer silently makes a fresh variable, with reset state, on every call."
    )
    example = (
        """
        @tf.function
        def step(x):
            total = tf.Variable(0.0)
            total.assign_add(tf.reduce_sum(x))
            return total
        """
    )
    use_instead = (
        """
        total = tf.Variable(0.0)

        @tf.function
        def step(x):
            total.assign_add(tf.reduce_sum(x))
            return total
        """
    )
    VALID = [
        """
        import tensorflow as tf

        class Scale(tf.keras.layers.Layer):
            def build(self, input_shape):
                self.w = tf.Variable(tf.ones(input_shape[-1:]))

            def call(self, x):
                return x * self.w
        """,
        """
        import tensorflow as tf

        class M(tf.Module):
            def __init__(self):
                self.v = None

            @tf.function
            def __call__(self, x):
                if self.v is None:
                    self.v = tf.Variable(tf.zeros_like(x))
                return self.v.assign_add(x)
        """,
        """
        import tensorflow as tf

        counter = tf.Variable(0)

        @tf.function
        def step(x):
            counter.assign_add(1)
            return x
        """,
        """
        import tensorflow as tf

        class Lazy(tf.keras.layers.Layer):
            def call(self, x):
                if not self.built:
                    self.build(x.shape)
                return x

            def build(self, shape):
                self.k = tf.Variable(tf.zeros(shape[-1:]))
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        @tf.function
        def step(x):
            acc = tf.Variable(0.0)  # expect: TFL106
            acc.assign_add(tf.reduce_sum(x))
            return acc
        """,
        """
        import tensorflow as tf
        from tensorflow import keras

        class Net(keras.Model):
            def call(self, x):
                self.scale = tf.Variable(2.0)  # expect: TFL106
                return x * self.scale
        """,
        """
        import keras
        import tensorflow as tf

        def body(x):
            v = keras.Variable(1.0)  # expect: TFL106
            return x * v

        step = tf.function(body)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        for call, func in _traced_calls(ctx):
            if a.call_name(call) not in _VARIABLES:
                continue
            own = a.enclosing_function(call)
            if getattr(own, "name", "") in ("build", "_build", "__init__", "build_from_config"):
                continue
            if a.traced.guard_of(call) is not None:
                continue
            ctx.report(
                call,
                f"`{_text(ctx, call.func)}(...)` in traced `{_fname(func)}` creates a variable on "
                f"every trace: the first call raises `ValueError` (tf.function only supports "
                f"singleton variables); create it once in `__init__`/`build()` or behind "
                f"`if self.v is None:`",
            )


def _torch_chain(expr: ast.AST) -> bool:
    """``x.detach().cpu()`` and the like: a PyTorch tensor, not a TensorFlow one."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr in ("cpu", "detach", "cuda"):
            return True
        expr = expr.func.value
    return False


class TensorToPythonInTracedCode(Rule):
    code = "TFL107"
    name = "tensor-to-python-in-traced-code"
    severity = Severity.ERROR
    summary = "Tensor converted to a Python value in traced code raises while tracing"
    what = (
        "Checks for `.numpy()`, `.item()` and `bool(t)` of a tensor inside traced code, and "
        "`int(t)`/`float(t)` of a tensor in traced code that AutoGraph does not convert: "
        "Keras `call`/`train_step`/`test_step`/`predict_step` (Keras 3 traces them without "
        "AutoGraph) and `tf.function(autograph=False)`. Inside a `tf.function` or a "
        "`Dataset.map` function AutoGraph turns `int(t)`/`float(t)` into a cast, which runs "
        "correctly, so those are not reported. Static shape dimensions (`int(x.shape[0])`) "
        "and code behind `if tf.executing_eagerly():` are fine."
    )
    why = (
        "A tensor being traced has no value. `.numpy()`/`.item()` raise `AttributeError` and "
        "`bool(t)` raises `OperatorNotAllowedInGraphError` while tracing; without AutoGraph "
        "`int(t)`/`float(t)` raise `TypeError`. The failure is loud but late: a Keras layer "
        "that works when called eagerly in a notebook raises only once `fit`, `predict` or a "
        "functional model on `keras.Input` traces it. (Measured on TensorFlow 2.21 with "
        "Keras 3. Keras 2 layers wrap `call` in AutoGraph (`autograph.tf_convert` in their "
        "base layer), so there `int()`/`float()` would become casts too; not measured.)"
    )
    example = (
        """
        class Crop(keras.layers.Layer):
            def call(self, inputs):
                n = int(tf.shape(inputs)[0])
                if bool(inputs[0, 0] > 0):
                    return inputs[: n // 2]
                return inputs
        """
    )
    use_instead = (
        """
        class Crop(keras.layers.Layer):
            def call(self, inputs):
                n = tf.shape(inputs)[0]
                return tf.cond(inputs[0, 0] > 0, lambda: inputs[: n // 2], lambda: inputs)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        @tf.function
        def f(x):
            n = int(x.shape[0])
            return tf.reshape(x, [n, -1])
        """,
        """
        import tensorflow as tf

        @tf.function
        def step(x):
            return tf.reduce_mean(x)

        for x in tf.data.Dataset.range(3):
            print(float(step(x)), step(x).numpy())
        """,
        """
        import tensorflow as tf

        @tf.function
        def f(x, scale=2):
            s = float(scale)
            return x * s
        """,
        """
        import tensorflow as tf

        def helper(t):
            if tf.executing_eagerly():
                return t.numpy()
            return t

        @tf.function
        def f(x):
            return helper(x)
        """,
        """
        import tensorflow as tf

        @tf.function
        def f(x):
            loss = tf.reduce_mean(x)
            if float(loss) > 1.0:  # AutoGraph: a cast and a tf.cond
                return x
            return -x
        """,
        """
        import keras

        class Scores(keras.layers.Layer):
            def call(self, inputs):
                return inputs * float(inputs.numpy().max())

        model = keras.Sequential([Scores()])
        model.compile(loss="mse", run_eagerly=(keras.backend.backend() == "tensorflow"))
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        @tf.function
        def f(x):
            return x.numpy() * 2  # expect: TFL107
        """,
        """
        import keras
        import tensorflow as tf

        class Crop(keras.layers.Layer):
            def call(self, inputs):
                n = int(tf.shape(inputs)[0])  # expect: TFL107
                flag = bool(inputs[0, 0] > 0)  # expect: TFL107
                return inputs[: n // 2]
        """,
        """
        import tensorflow as tf

        def to_py(t):
            return t.item()  # expect: TFL107

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def f(x):
            y = tf.square(x)
            return to_py(y)
        """,
        """
        import tensorflow as tf

        @tf.function(autograph=False)
        def f(x):
            return tf.zeros([int(x)])  # expect: TFL107
        """,
        """
        import keras

        RUN_EAGERLY = False

        class Scores(keras.layers.Layer):
            def call(self, inputs):
                return inputs * float(inputs.numpy().max())  # expect: TFL107

        model = keras.Sequential([Scores()])
        model.compile(loss="mse", run_eagerly=RUN_EAGERLY)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        traced = a.traced
        for call, func in _traced_calls(ctx):
            f = call.func
            problem = None
            if isinstance(f, ast.Attribute) and f.attr in ("numpy", "item") and not call.args and not call.keywords:
                if f.attr == "numpy" and a.qualname(f.value) is None and not _torch_chain(f.value) or (
                    f.attr == "item" and traced.is_tensor(f.value)
                ):
                    problem = f"`.{f.attr}()` in traced `{_fname(func)}` raises `AttributeError` while tracing"
            elif (
                isinstance(f, ast.Name)
                and f.id in ("float", "int", "bool")
                and a.qualname(f) is None
                and len(call.args) == 1
                and not call.keywords
                and traced.is_tensor(call.args[0])
            ):
                if f.id == "bool":
                    problem = (
                        f"`bool()` of a tensor in traced `{_fname(func)}` raises "
                        f"`OperatorNotAllowedInGraphError` while tracing"
                    )
                elif not traced.runs_autograph(func):
                    kind = traced.entry_points.get(func)
                    if kind == "no-autograph" and traced.is_keras_class(a.parent(func)):
                        how = "Keras 3 traces it without AutoGraph: it runs eagerly but fails in `fit`/`predict`"
                    elif kind == "no-autograph":
                        how = "`autograph=False`"
                    else:
                        how = "it is traced without AutoGraph"
                    problem = f"`{f.id}()` of a tensor in traced `{_fname(func)}` raises `TypeError` while tracing ({how})"
            if problem is None or traced.guard_of(call, kind="eager") is not None:
                continue
            ctx.report(
                call,
                f"{problem}; keep it a tensor (`tf.cast`, tensor comparisons, `tf.cond`) or move "
                f"it to eager code",
            )


_FILE_OPENERS = frozenset(
    {"io.open", "codecs.open", "gzip.open", "bz2.open", "lzma.open",
     "tensorflow.io.gfile.GFile", "tensorflow.gfile.GFile", "tensorflow.gfile.Open"}
)
_FILE_WRITERS = frozenset(
    {
        "json.dump", "pickle.dump", "yaml.dump", "yaml.safe_dump", "numpy.save", "numpy.savez",
        "numpy.savez_compressed", "numpy.savetxt", "csv.writer", "shutil.copy", "shutil.copyfile",
        "shutil.move", "os.makedirs", "os.remove", "os.rename", "os.mkdir",
        "tensorflow.io.gfile.makedirs", "tensorflow.io.gfile.remove", "tensorflow.io.gfile.rename",
        "tensorflow.io.gfile.copy", "sys.stdout.write", "sys.stderr.write", "sys.stdout.flush",
        "sys.stderr.flush",
    }
)
_LOG_MODULES = (
    "absl.logging.", "tensorflow.get_logger().", "tensorflow.compat.v1.logging.",
    "tensorflow.logging.", "tensorflow.python.platform.tf_logging.",
)
_LOG_WARNINGS = frozenset({"warning", "warn", "error", "critical", "fatal", "exception", "log_first_n"})
_LOG_SETUP = frozenset({"getLogger", "basicConfig", "get_absl_handler", "set_verbosity", "get_verbosity",
                        "getLevelName", "Formatter", "StreamHandler", "FileHandler", "Handler",
                        "get_logger", "getEffectiveLevel", "isEnabledFor", "level_debug", "vlog_is_on"})


class LoggingOrFileIOInTracedCode(Rule):
    code = "TFL108"
    name = "logging-or-file-io-in-traced-code"
    severity = Severity.ERROR
    summary = "Python logging or file write of a tensor value in traced code runs only while tracing"
    what = (
        "Checks for Python logging (`logging.*`, `logger.info(...)`, `absl.logging`, "
        "`tf.get_logger()`) and writes to a Python file (`fh.write(...)`, `sys.stdout.write`, "
        "`json.dump`, `np.save`...) inside traced code whose arguments carry a tensor's value. "
        "Logging static facts (shapes, dtypes, names, configuration) once per trace is correct "
        "and not reported, nor is graph-side I/O: `tf.summary.*` writers, `tf.io.write_file`, "
        "`TensorArray.write`, `tf.print`."
    )
    why = (
        "Python I/O in a traced function happens once per trace, not once per call. A log line "
        "or file record of a tensor is written on the first step only, showing a symbolic "
        "`Tensor(\"Mean:0\", shape=(), dtype=float32)` instead of a number, and never again, "
        "so metrics files and logs silently stop after step 1. (Measured on TensorFlow 2.21.)"
    )
    example = (
        """
        @tf.function
        def train_step(x, y):
            loss = compute_loss(x, y)
            logging.info("loss %s", loss)
            return loss
        """
    )
    use_instead = (
        """
        @tf.function
        def train_step(x, y):
            loss = compute_loss(x, y)
            with writer.as_default():
                tf.summary.scalar("loss", loss, step=optimizer.iterations)
            return loss

        # or log the returned value from the eager loop:
        # logging.info("loss %.4f", float(train_step(x, y)))
        """
    )
    VALID = [
        """
        import tensorflow as tf

        writer = tf.summary.create_file_writer('logs')

        @tf.function
        def step(x, i):
            with writer.as_default():
                tf.summary.scalar('x', tf.reduce_mean(x), step=i)
            return x
        """,
        """
        import tensorflow as tf

        @tf.function
        def f(n):
            ta = tf.TensorArray(tf.float32, size=n)
            for i in tf.range(n):
                ta = ta.write(i, 1.0)
            tf.io.write_file('out.txt', tf.strings.as_string(n))
            return ta.stack()
        """,
        """
        import logging
        import tensorflow as tf

        @tf.function
        def step(x):
            return x * 2

        for x in tf.data.Dataset.range(3):
            logging.info('loss %.3f', float(step(x)))
        """,
        """
        import logging
        import keras

        class Block(keras.layers.Layer):
            def call(self, inputs, training=False):
                logging.info('%s input shape %s (%s)', self.name, inputs.shape, inputs.dtype)
                logging.info('training=%s', training)
                return inputs
        """,
    ]
    INVALID = [
        """
        import logging
        import tensorflow as tf

        @tf.function
        def step(x):
            logging.info('x=%s', x)  # expect: TFL108
            return x
        """,
        """
        import logging
        import tensorflow as tf

        log = logging.getLogger(__name__)

        def helper(x):
            log.warning('mean %s', tf.reduce_mean(x))  # expect: TFL108
            return x

        @tf.function
        def step(x):
            return helper(x)
        """,
        """
        import tensorflow as tf

        @tf.function
        def step(x):
            loss = tf.reduce_mean(x)
            with open('log.txt', 'a') as fh:
                fh.write(f'{loss}\\n')  # expect: TFL108
            return x
        """,
        """
        from absl import logging
        from tensorflow import keras

        class Net(keras.Model):
            def train_step(self, data):
                logging.info('batch %s', data)  # expect: TFL108
                return {}
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        traced = ctx.analysis.traced
        for call, func in _traced_calls(ctx):
            what = self._io(ctx, call)
            if what is None:
                continue
            args = [*call.args, *(k.value for k in call.keywords)]
            if not any(traced.carries_tensor(x) for x in args):
                continue  # static facts (shapes, dtypes, configuration): right once per trace
            if self._structure_warning(ctx, call):
                continue
            ctx.report(
                call,
                f"{what} of a tensor in traced `{_fname(func)}` runs only while tracing: it "
                f"writes a symbolic `Tensor(...)` once, not a value per call; use "
                f"`tf.print`/`tf.summary` inside the graph, or log returned values from eager code",
            )

    @staticmethod
    def _structure_warning(ctx: RuleContext, call: ast.Call) -> bool:
        """A warning about how the program is built, shown once on purpose: a warning-level
        log call under an `if` on Python values (``if not is_tf_type(inputs):``)."""
        a = ctx.analysis
        name = a.call_name(call) or ""
        if name.rsplit(".", 1)[-1] not in _LOG_WARNINGS:
            return False
        own = a.enclosing_function(call)
        for anc in a.ancestors(call):
            if anc is own:
                break
            if isinstance(anc, (ast.If, ast.IfExp)) and not a.traced.carries_tensor(anc.test):
                return True
        return False

    def _io(self, ctx: RuleContext, call: ast.Call) -> str | None:
        a = ctx.analysis
        f = call.func
        name = a.call_name(call)
        if name:
            last = name.rsplit(".", 1)[-1]
            root = name.split(".")[0]
            logs = root == "logging" or name.startswith(_LOG_MODULES)
            if logs and last not in _LOG_SETUP and not last.endswith("()") and last[:1].islower():
                return f"logging call `{_text(ctx, f)}()`"
            if name in _FILE_WRITERS:
                return f"file I/O `{_text(ctx, f)}()`"
        if (
            isinstance(f, ast.Attribute)
            and f.attr in ("write", "writelines", "write_text", "write_bytes")
            and self._is_python_file(ctx, f.value, call)
        ):
            return f"file I/O `{_text(ctx, f)}()`"
        return None

    @staticmethod
    def _is_python_file(ctx: RuleContext, expr: ast.AST, at: ast.AST) -> bool:
        a = ctx.analysis
        values: list[ast.AST] = []
        if isinstance(expr, ast.Name):
            scope = a.traced.defining_scope(expr.id, at)
            if scope is not None:
                values = a.traced.bindings(expr.id, scope)
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            values = a.traced.self_attr_values(a.enclosing_class(at), expr.attr)
        elif isinstance(expr, ast.Call):
            values = [expr]
        if not values:
            return False
        for v in values:
            if not isinstance(v, ast.Call):
                return False
            f = v.func
            q = a.call_name(v)
            if isinstance(f, ast.Name) and f.id == "open" and q is None:
                continue
            if q in _FILE_OPENERS or q in ("pathlib.Path", "csv.writer") or (q or "").startswith("pathlib.Path"):
                continue
            return False
        return True


class StalePythonStateInTracedCode(Rule):
    code = "TFL109"
    name = "stale-python-state-in-traced-code"
    severity = Severity.ERROR
    summary = "Python value read in traced code is rebound later: the graph keeps the old value"
    what = (
        "Checks for traced code that reads a Python number, string or bool that eager code "
        "changes later: a module global reassigned in a loop or in a function that declares it "
        "`global`, or a `self` attribute updated in place (`self.steps += 1`) by an untraced "
        "method. Constants that are never reassigned are fine."
    )
    why = (
        "A Python value read while TensorFlow traces a function is frozen into the graph as a "
        "constant. When eager code later changes it (a learning rate decayed in Python, a step "
        "counter incremented after each batch), the graph keeps computing with the value it had "
        "when it was traced: `if self.steps >= warmup:` never switches on, a decayed learning "
        "rate is never used. Nothing fails; the program silently does something else."
    )
    example = (
        """
        lr = 0.1

        @tf.function
        def train_step(x):
            return x * lr

        for epoch in range(10):
            train_step(x)
            lr = lr * 0.5
        """
    )
    use_instead = (
        """
        lr = tf.Variable(0.1)

        @tf.function
        def train_step(x):
            return x * lr

        for epoch in range(10):
            train_step(x)
            lr.assign(lr * 0.5)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        SCALE = 0.5

        @tf.function
        def f(x):
            return x * SCALE
        """,
        """
        import tensorflow as tf

        lr = tf.Variable(0.1)

        @tf.function
        def f(x):
            return x * lr

        for epoch in range(3):
            f(tf.ones(2))
            lr.assign(lr * 0.5)
        """,
        """
        import tensorflow as tf

        class Trainer(tf.Module):
            def __init__(self):
                self.steps = tf.Variable(0)
                self.warmup = 100

            @tf.function
            def step(self, x):
                if self.steps >= self.warmup:
                    x = x * 2.0
                return x

            def on_batch_end(self):
                self.steps.assign_add(1)
        """,
        """
        import tensorflow as tf

        count = 0

        def eager_only():
            global count
            count += 1

        def report():
            return count
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        lr = 0.1

        @tf.function
        def f(x):
            return x * lr  # expect: TFL109

        for epoch in range(3):
            f(tf.ones(2))
            lr = lr * 0.5
        """,
        """
        import tensorflow as tf

        class Trainer(tf.Module):
            def __init__(self):
                self.steps = 0

            @tf.function
            def step(self, x):
                if self.steps >= 100:  # expect: TFL109
                    x = x * 2.0
                return x

            def on_batch_end(self):
                self.steps += 1
        """,
        """
        import tensorflow as tf

        temperature = 1.0

        def anneal():
            global temperature
            temperature = temperature * 0.9

        @tf.function
        def sample(logits):
            return tf.nn.softmax(logits / temperature)  # expect: TFL109
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        traced = a.traced
        if not traced.reasons:
            return
        from tflint.analysis.values import eager_self_updates, global_rebinding_sites, is_plain_python

        rebound = global_rebinding_sites(a)
        seen: set[tuple[ast.AST, str]] = set()
        for node, func in traced.nodes_in_traced_code():
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in rebound:
                if not isinstance(traced.defining_scope(node.id, node), ast.Module):
                    continue
                values = traced.bindings(node.id, a.tree)
                sites = rebound[node.id]
                if not values or not all(is_plain_python(v) for v in values):
                    continue
                if not all(isinstance(v, ast.AugAssign) or is_plain_python(v) for _, v in sites):
                    continue
                if (func, node.id) in seen:
                    continue
                seen.add((func, node.id))
                ctx.report(
                    node,
                    f"module global `{node.id}` is read in traced `{_fname(func)}` but rebound on line "
                    f"{sites[0][0].lineno}: the graph keeps the value it had when traced. Keep it in a "
                    f"`tf.Variable` (`.assign()`) or pass it as a tensor argument",
                )
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                cls = a.enclosing_class(node)
                updates = eager_self_updates(a, cls, node.attr)
                if not updates or (func, "self." + node.attr) in seen:
                    continue
                values = traced.self_attr_values(cls, node.attr)
                if not values or not all(is_plain_python(v) for v in values):
                    continue
                seen.add((func, "self." + node.attr))
                ctx.report(
                    node,
                    f"`self.{node.attr}` is read in traced `{_fname(func)}` but updated eagerly on line "
                    f"{updates[0].lineno}: the graph keeps the value it had when traced. Keep it in a "
                    f"`tf.Variable` (`.assign_add()`) or pass it as a tensor argument",
                )


class RecursionInTracedCode(Rule):
    code = "TFL110"
    name = "recursion-in-tf-function"
    severity = Severity.ERROR
    summary = "A `tf.function` that calls itself (directly or through other functions)"
    what = (
        "Checks for a `tf.function` whose traced code calls the same `tf.function` again, "
        "directly or through functions it calls. A `tf.function` defined inside a function "
        "that its trace calls again is a new `tf.function` on each such call, not the same one."
    )
    why = (
        "Each call of a `tf.function` during tracing traces it again. With a tensor argument "
        "the recursion's stop condition is a graph tensor, so tracing fails (endless recursion, "
        "or `OperatorNotAllowedInGraphError` when AutoGraph gives up on the recursive call); "
        "with Python numbers every distinct value is a new trace and a new graph (`fact(5)` "
        "traces five functions)."
    )
    example = (
        """
        @tf.function
        def fact(n):
            if n <= 1:
                return tf.constant(1)
            return n * fact(n - 1)
        """
    )
    use_instead = (
        """
        @tf.function
        def fact(n):
            result = tf.constant(1)
            for i in tf.range(2, n + 1):
                result *= i
            return result
        """
    )
    VALID = [
        """
        import tensorflow as tf

        def flatten(nest):
            if isinstance(nest, (list, tuple)):
                return [y for x in nest for y in flatten(x)]
            return [nest]

        @tf.function
        def f(xs):
            return tf.add_n(flatten(xs))
        """,
        """
        import tensorflow as tf

        @tf.function
        def fact(n):
            result = tf.constant(1)
            for i in tf.range(2, n + 1):
                result *= i
            return result
        """,
        """
        import tensorflow as tf

        def fact(n):
            return 1 if n <= 1 else n * fact(n - 1)

        @tf.function
        def f(x):
            return x * fact(4)
        """,
        """
        import tensorflow as tf

        def minimize(loss_fn, steps, jit_compile=False):
            if jit_compile:
                # a new tf.function on each call of `minimize`: the inner call below makes its
                # own, and does not take this branch
                @tf.function(jit_compile=True)
                def run_jitted():
                    return minimize(loss_fn, steps, jit_compile=False)
                return run_jitted()
            return tf.reduce_sum([loss_fn() for _ in range(steps)])
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        @tf.function
        def fact(n):
            if n <= 1:
                return tf.constant(1)
            return n * fact(n - 1)  # expect: TFL110
        """,
        """
        import tensorflow as tf

        @tf.function
        def walk(depth, x):
            return helper(depth, x)

        def helper(depth, x):
            if depth == 0:
                return x
            return walk(depth - 1, x * 2)  # expect: TFL110
        """,
        """
        import tensorflow as tf

        class Tree(tf.Module):
            @tf.function
            def depth(self, n):
                if n == 0:
                    return 0
                return 1 + self.depth(n - 1)  # expect: TFL110
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        traced = a.traced
        entries = [
            f for f in traced.reasons
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and traced.tf_function_decorator(f) is not None
        ]
        for entry in entries:
            # functions the entry's trace reaches, and through which call each is reached
            reach: dict[ast.AST, None] = {entry: None}
            # functions whose body defines the entry: entered again, they define a new
            # tf.function, and calling that one is no recursion of this one
            definers = {anc for anc in a.ancestors(entry) if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef))}
            todo = [entry]
            while todo and len(reach) < 200:
                func = todo.pop()
                for call in self._own_calls(func):
                    for callee in traced._resolve_callable(call.func, call, called=True):
                        if callee is entry and func in definers:
                            continue
                        if callee is entry:
                            ctx.report(
                                call,
                                f"`{_text(ctx, call.func)}(...)` calls tf.function `{entry.name}` again while "
                                f"tracing it: with a tensor argument tracing fails; with Python "
                                f"numbers every value is a new trace. Use a loop (`tf.while_loop`, "
                                f"`for i in tf.range(...)`) instead",
                            )
                        elif callee not in reach and traced.tf_function_decorator(callee) is None:
                            reach[callee] = None
                            todo.append(callee)

    @staticmethod
    def _own_calls(func: ast.AST):
        from tflint.analysis.astutil import walk_own

        for node in walk_own(list(ast.iter_child_nodes(func))):
            if isinstance(node, ast.Call):
                yield node


_ITER_SOURCES = frozenset({"list", "tuple", "range", "sorted", "reversed", "enumerate", "zip", "map", "filter"})


class PythonIteratorInTracedCode(Rule):
    code = "TFL111"
    name = "python-iterator-in-traced-code"
    severity = Severity.ERROR
    summary = "`next()` on a Python iterator or generator in traced code is read once"
    what = (
        "Checks for `next(it)` inside traced code where `it` is a Python iterator or generator: "
        "`iter()` of a list, tuple or range, a generator expression, a call of a generator "
        "function of the module, or an `itertools` iterator. `next()` on an iterator of a "
        "`tf.data.Dataset` is fine."
    )
    why = (
        "`next()` on a Python iterator runs while the function is traced: the element it returns "
        "is frozen into the graph as a constant. Every later call uses that same first element "
        "and the iterator never advances, so a training step that draws its batch or its "
        "hyper-parameter this way trains on one value forever."
    )
    example = (
        """
        batches = iter(python_batches)

        @tf.function
        def train_step():
            x = next(batches)
            return model(x)
        """
    )
    use_instead = (
        """
        batches = iter(tf.data.Dataset.from_tensor_slices(python_batches))

        @tf.function
        def train_step():
            x = next(batches)
            return model(x)
        """
    )
    VALID = [
        """
        import tensorflow as tf

        it = iter(tf.data.Dataset.range(10))

        @tf.function
        def f():
            return next(it)
        """,
        """
        import tensorflow as tf

        values = iter([1.0, 2.0, 3.0])

        def eager():
            return next(values)
        """,
        """
        import tensorflow as tf

        @tf.function
        def f(xs):
            it = iter(xs)
            first = next(it)
            return first + sum(it)
        """,
        """
        import tensorflow as tf

        @tf.function
        def consume_next(iterator):
            tf.print("Value:", next(iterator))

        consume_next(iter(tf.data.Dataset.range(3)))
        """,
    ]
    INVALID = [
        """
        import tensorflow as tf

        values = iter([1.0, 2.0, 3.0])

        @tf.function
        def f(x):
            return x + next(values)  # expect: TFL111
        """,
        """
        import tensorflow as tf

        def batches():
            while True:
                yield 1.0

        gen = batches()

        @tf.function
        def f(x):
            return x * next(gen)  # expect: TFL111
        """,
        """
        import itertools

        import tensorflow as tf

        class Schedule(tf.Module):
            def __init__(self):
                self.rates = itertools.cycle([0.1, 0.01])

            @tf.function
            def step(self, x):
                return x * next(self.rates)  # expect: TFL111
        """,
        """
        import tensorflow as tf

        @tf.function
        def consume_next(iterator):
            tf.print("Value:", next(iterator))  # expect: TFL111

        iterator = iter([1, 2, 3])
        consume_next(iterator)
        consume_next(iterator)
        """,
    ]

    def check(self, ctx: RuleContext) -> None:
        if "next" not in ctx.source:
            return
        a = ctx.analysis
        traced = a.traced
        from tflint.analysis.values import origins

        for call, func in traced.calls_in_traced_code():
            f = call.func
            if not (isinstance(f, ast.Name) and f.id == "next" and call.args) or a.qualname(f) is not None:
                continue
            it = call.args[0]
            values = origins(a, it)
            if values is None:
                values = self._passed_in(ctx, it, func)
                if not values:
                    continue
            # created inside the same trace: a fresh iterator per trace is consumed within it
            elif isinstance(it, ast.Name) and traced.defining_scope(it.id, it) is func:
                continue
            if all(self._python_iterator(ctx, v) for v in values):
                ctx.report(
                    call,
                    f"`next({_text(ctx, it)})` on a Python iterator in traced `{_fname(func)}` runs once, "
                    f"while tracing: every call reuses that first element as a constant. Iterate a "
                    f"`tf.data.Dataset` instead, or pass the element in as an argument",
                )

    @staticmethod
    def _passed_in(ctx: RuleContext, it: ast.AST, func: ast.AST) -> list[ast.AST]:
        """``next(it)`` where ``it`` is a parameter of the tf.function ``func``: the values the
        module's calls of ``func`` pass for it, followed to their bindings (``it = iter([...])``
        at the call site). A Python object argument keys the trace by its identity, so later
        calls with the same iterator reuse the trace and never call ``next`` again."""
        from tflint.analysis.values import origins

        a = ctx.analysis
        traced = a.traced
        if not isinstance(it, ast.Name) or isinstance(func, ast.Lambda) or traced.tf_function_decorator(func) is None:
            return []
        params = [p.arg for p in (*func.args.posonlyargs, *func.args.args)]
        if it.id not in params and it.id not in [p.arg for p in func.args.kwonlyargs]:
            return []
        if it.id in traced.local_names(func) - set(params) - {p.arg for p in func.args.kwonlyargs}:
            return []
        out: list[ast.AST] = []
        sites = traced.call_sites(func)
        for site in sites:
            arg = next((k.value for k in site.keywords if k.arg == it.id), None)
            if arg is None and it.id in params and params.index(it.id) < len(site.args):
                arg = site.args[params.index(it.id)]
            if arg is None or isinstance(arg, ast.Starred):
                return []
            bound = origins(a, arg) if isinstance(arg, ast.Name) else [arg]
            if not bound:
                return []
            out.extend(bound)
        return out

    @staticmethod
    def _python_iterator(ctx: RuleContext, value: ast.AST) -> bool:
        a = ctx.analysis
        if isinstance(value, ast.GeneratorExp):
            return True
        if not isinstance(value, ast.Call):
            return False
        name = a.call_name(value)
        if name is not None:
            return name.startswith("itertools.")
        f = value.func
        if isinstance(f, ast.Name) and f.id == "iter" and value.args:
            src = value.args[0]
            if isinstance(src, (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp, ast.Constant)):
                return True
            if isinstance(src, ast.Call) and isinstance(src.func, ast.Name) and src.func.id in _ITER_SOURCES:
                return a.qualname(src.func) is None
            if isinstance(src, ast.Name):
                inner = a.traced.bindings(src.id, a.traced.defining_scope(src.id, src) or a.tree)
                return bool(inner) and all(isinstance(v, (ast.List, ast.Tuple, ast.ListComp)) for v in inner)
            return False
        if isinstance(f, ast.Name):
            for g in a.lookup_function(f.id, value):
                if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(g)):
                    return True
        return False


for _rule in list(vars().values()):
    if isinstance(_rule, type) and issubclass(_rule, Rule) and getattr(_rule, "code", "").startswith("TFL1"):
        _rule.traced_context = True
