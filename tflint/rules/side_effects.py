"""TFL1xx: trace-time side effects. Python code in a traced function runs once per trace."""

from __future__ import annotations

import ast

from tflint.finding import Fix, Severity
from tflint.rules._fixes import tensorflow_alias
from tflint.rules.base import Rule, RuleContext


class PrintInTracedCode(Rule):
    code = "TFL101"
    name = "print-in-traced-code"
    severity = Severity.ERROR
    fixable = True
    summary = "`print()` in traced code runs only while tracing"
    what = "Checks for the built-in `print()` called inside a function that TensorFlow traces."
    why = (
        "A traced function's Python body runs only while TensorFlow traces it into a graph. "
        "`print()` is Python, not a graph op: it fires once (per trace) with symbolic tensors, "
        "and every later call prints nothing. Debug output silently disappears, and values "
        "shown are `Tensor(\"x:0\", shape=...)` rather than numbers."
    )
    example = (
        "@tf.function\n"
        "def train_step(x, y):\n"
        "    loss = compute_loss(x, y)\n"
        "    print(\"loss\", loss)\n"
        "    return loss\n"
    )
    use_instead = (
        "@tf.function\n"
        "def train_step(x, y):\n"
        "    loss = compute_loss(x, y)\n"
        "    tf.print(\"loss\", loss)\n"
        "    return loss\n"
    )
    fix_safety = (
        "The fix replaces `print` with `tf.print` (using the module's own TensorFlow alias, "
        "adding `import tensorflow as tf` when there is none). It is safe when the arguments "
        "are tensors or plain values; it is marked unsafe when an argument is an f-string or a "
        "`.format()`/`%` expression (those are formatted once, at trace time) or when `file=` "
        "or `flush=` is passed (tf.print uses `output_stream=`)."
    )
    VALID = [
        "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    tf.print(x)\n    return x\n",
        "import tensorflow as tf\n\ndef eager_loop(ds):\n    for x in ds:\n        print(x)\n",
        "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    def report(v):\n        print(v)\n        return v\n    return tf.py_function(report, [x], tf.float32)\n",
    ]
    INVALID = [
        "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    print(x)  # expect: TFL101\n    return x\n",
        "from tensorflow import function\n\n@function(jit_compile=True)\ndef f(x):\n    print('x is', x)  # expect: TFL101\n    return x\n",
        "import tensorflow as tf\n\ndef helper(x):\n    print(x)  # expect: TFL101\n    return x\n\nstep = tf.function(helper)\n",
        "from tensorflow import keras\n\nclass Net(keras.Model):\n    def train_step(self, data):\n        print('step')  # expect: TFL101\n        return {}\n",
    ]

    def check(self, ctx: RuleContext) -> None:
        a = ctx.analysis
        for node in ast.walk(ctx.tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
                and a.qualname(node.func) is None  # not shadowed by an import
            ):
                continue
            func = a.traced.traced_function_of(node)
            if func is None:
                continue
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
