"""Property-based search for internal errors on programs made of TensorFlow API shapes.

hypothesmith's programs rarely reach the analyses' deep paths (a tape with a ``gradient`` call
on an attribute of a subscript of a call result...). This generator builds modules from the
shapes real training code has: ``GradientTape`` blocks in every spelling (``as`` targets that
are names, attributes or tuples; ``tape = tf.GradientTape(); with tape:`` re-entered;
several tapes in one ``with``), ``gradient``/``jacobian``/``watch`` calls whose arguments are
subscripts, attributes, calls and tuples, ``tf.function`` decorators of every spelling,
``tf.data`` chains, ``strategy.scope()`` blocks, Keras model subclasses, training loops with
``apply_gradients``, and attribute chains off arbitrary call results
(``plt.rcParams['axes.prop_cycle'].by_key()['color']``).

Every rule must run on each of them without an internal error, and ``TFL000`` appears exactly
when Python itself rejects the text. ``TFLINT_PROPERTY_SCALE=N`` searches N times longer.
"""

from __future__ import annotations

import os
import textwrap

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hardening._oracle import python_accepts_text
from tflint.check.engine import PARSE_ERROR_CODE, lint_text
from tflint.rules import all_rules

ALL = frozenset(r.code for r in all_rules())
SCALE = max(int(os.environ.get("TFLINT_PROPERTY_SCALE", "1")), 1)
SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck), "derandomize": False}

HEADERS = [
    "import tensorflow as tf\nimport matplotlib.pyplot as plt\n",
    "import tensorflow as tf\nimport numpy as np\nimport matplotlib.pyplot as plt\n",
    "import tensorflow as tf\nfrom tensorflow import keras\nfrom tensorflow.keras import layers\n",
    "from tensorflow import GradientTape, function, Variable\nimport tensorflow as tf\n",
    "import tensorflow.compat.v1 as tf\n",
    "import keras\nfrom keras import ops, layers\nimport tensorflow as tf\n",
    "import tensorflow as T\nimport tensorflow as tf\nimport numpy as onp\n",
]

NAMES = ["x", "y", "w", "b", "loss", "logits", "grads", "model", "opt", "tape", "t", "ds", "v",
         "params", "strategy", "self", "h", "z", "colors", "step", "i"]
TAPES = ["tape", "t", "g", "outer", "inner", "self.tape", "tape2"]
ATOMS = [
    "x", "y", "w", "b", "loss", "model", "params", "self", "h", "None", "0", "1.5", "'s'", "i",
    "tf.constant([1.0, 2.0])", "tf.Variable(1.0)", "np.ones(3)", "model.w", "model.b",
    "model.trainable_variables", "self.model.trainable_weights", "model.layers[0].kernel",
    "plt.rcParams['axes.prop_cycle'].by_key()['color']", "f(x).a.b()", "x[0][1]",
    "tf.keras.layers.Dense(3)", "layers.Dense(4)", "keras.Sequential([layers.Dense(1)])",
    "tf.keras.losses.MeanSquaredError()", "tf.random.uniform([2])", "tf.data.AUTOTUNE",
    "tf.distribute.MirroredStrategy()", "strategy", "tf.float32", "'int32'",
]
CALLS = [
    "tf.reduce_sum({})", "tf.reduce_mean({})", "tf.square({})", "tf.nn.relu({})",
    "tf.cast({}, tf.int32)", "tf.cast({}, 'float32')", "tf.argmax({})", "tf.stop_gradient({})",
    "tf.numpy_function(f, [{}], tf.float32)", "np.array({})", "float({})", "int({})",
    "{}.numpy()", "{}.astype('int32')", "model({})", "model({}, training=True)",
    "loss_fn(y, {})", "self.call({})", "len({})", "zip(grads, {})", "list({})", "tuple({})",
    "tf.clip_by_global_norm({}, 1.0)", "tf.nest.flatten({})", "ops.sum({})", "{}.by_key()",
    "{}()", "{}.trainable_variables", "{}[0]", "{}[1:]", "{}['k']", "{}.shape", "{}.dtype",
    "tf.GradientTape()", "tf.GradientTape(persistent=True)", "tape.gradient({}, {})",
    "strategy.run(step, args=({},))", "{}.result()",
]


@st.composite
def exprs(draw, depth: int = 0) -> str:
    kind = draw(st.integers(0, 9 if depth < 3 else 0))
    if kind <= 2:
        return draw(st.sampled_from(ATOMS))
    if kind <= 5:
        tpl = draw(st.sampled_from(CALLS))
        return tpl.format(*(draw(exprs(depth + 1)) for _ in range(tpl.count("{}"))))
    if kind == 6:
        op = draw(st.sampled_from(["+", "*", "-", "**", "@", "/"]))
        return f"({draw(exprs(depth + 1))} {op} {draw(exprs(depth + 1))})"
    if kind == 7:
        n = draw(st.integers(0, 3))
        elts = ", ".join(draw(exprs(depth + 1)) for _ in range(n))
        return draw(st.sampled_from(["[{}]", "({},)", "[*{}]"])).format(elts) if n else "[]"
    if kind == 8:
        return f"[{draw(exprs(depth + 1))} for v in {draw(exprs(depth + 1))}]"
    return f"({draw(exprs(depth + 1))} if {draw(exprs(depth + 1))} else {draw(exprs(depth + 1))})"


TARGETS = ["x", "y", "loss", "logits", "grads", "h", "z", "dw, db", "(a, b)", "self.w", "x[0]",
           "grads, _", "*rest, last", "model.out", "colors", "v"]


@st.composite
def simple_statements(draw) -> str:
    e = draw(exprs())
    tape = draw(st.sampled_from(TAPES))
    kind = draw(st.integers(0, 13))
    if kind <= 3:
        return f"{draw(st.sampled_from(TARGETS))} = {e}"
    if kind == 4:
        return f"{draw(st.sampled_from(TARGETS))} = {tape}.gradient({e}, {draw(exprs())})"
    if kind == 5:
        return f"{tape}.watch({e})"
    if kind == 6:
        method = draw(st.sampled_from(["jacobian", "batch_jacobian", "gradient"]))
        extra = draw(st.sampled_from(["", ", unconnected_gradients=tf.UnconnectedGradients.ZERO",
                                      ", output_gradients=None"]))
        return f"{draw(st.sampled_from(TARGETS))} = {tape}.{method}(target={e}, sources={draw(exprs())}{extra})"
    if kind == 7:
        return f"opt.apply_gradients(zip({draw(exprs())}, {e}))"
    if kind == 8:
        return draw(st.sampled_from([f"del {tape}", f"{tape} = None", "return grads", f"return {e}",
                                     "pass", "break", "continue"]))
    if kind == 9:
        return f"{draw(st.sampled_from(NAMES))}.append({e})"
    if kind == 10:
        return f"opt.minimize(lambda: {e}, var_list={draw(exprs())})"
    if kind == 11:
        return f"opt.build({e})"
    if kind == 12:
        return f"{draw(st.sampled_from(TARGETS))} += {e}"
    return f"print({e})"


DECORATORS = [
    "@tf.function\n", "@tf.function()\n", "@tf.function(jit_compile=True)\n", "@function\n",
    "@tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])\n",
    "@tf.autograph.experimental.do_not_convert\n", "@T.function(reduce_retracing=True)\n",
    "@tf.compat.v1.function\n", "", "", "@staticmethod\n", "@property\n",
]


def _indent(body: str) -> str:
    return textwrap.indent(body, "    ")


@st.composite
def blocks(draw, depth: int = 0) -> str:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 13 if depth < 3 else 0))
        if kind <= 3:
            lines.append(draw(simple_statements()))
            continue
        body = _indent(draw(blocks(depth + 1)))
        tape = draw(st.sampled_from(TAPES))
        e = draw(exprs())
        if kind == 4:
            ctor = draw(st.sampled_from([
                "tf.GradientTape()", "tf.GradientTape(persistent=True)",
                "tf.GradientTape(watch_accessed_variables=False)", "GradientTape()",
                "tf.autodiff.GradientTape(persistent=p)",
            ]))
            after = ""
            if draw(st.booleans()):  # the gradient call on the tape, after the block
                method = draw(st.sampled_from(["gradient", "gradient", "jacobian"]))
                after = f"\n{draw(st.sampled_from(TARGETS))} = {tape}.{method}({draw(exprs())}, {draw(exprs())})"
            lines.append(f"with {ctor} as {tape}:\n{body}{after}")
        elif kind == 5:
            lines.append(f"{tape} = tf.GradientTape()\nwith {tape}:\n{body}\nwith {tape}:\n{body}\n"
                         f"grads = {tape}.gradient({draw(exprs())}, {draw(exprs())})")
        elif kind == 6:
            lines.append(f"with tf.GradientTape() as outer, tf.GradientTape(persistent=True) as inner:\n{body}")
        elif kind == 7:
            args = draw(st.sampled_from(["x", "self, x", "model, x, y, opt", "x, y=None, *a, **k", "*args"]))
            lines.append(f"{draw(st.sampled_from(DECORATORS))}def {draw(st.sampled_from(['step', 'train_step', 'call', 'f', 'build']))}({args}):\n{body}")
        elif kind == 8:
            base = draw(st.sampled_from(["tf.keras.Model", "keras.Model", "layers.Layer", "object", "tf.Module"]))
            lines.append(f"class Net({base}):\n{body}")
        elif kind == 9:
            target = draw(st.sampled_from(["x, y", "batch", "(x, y)", "i", "step, (x, y)"]))
            it = draw(st.sampled_from([
                "ds", "enumerate(ds)", "ds.take(1)", "range(10)", e,
                "tf.data.Dataset.from_tensor_slices((x, y)).shuffle(10).batch(4).map(f)",
                "strategy.experimental_distribute_dataset(ds)",
            ]))
            lines.append(f"for {target} in {it}:\n{body}")
        elif kind == 10:
            lines.append(f"with strategy.scope():\n{body}")
        elif kind == 11:
            lines.append(f"if {e}:\n{body}\nelse:\n{_indent(draw(simple_statements()))}")
        elif kind == 12:
            lines.append(f"try:\n{body}\nexcept Exception as err:\n    raise\nfinally:\n    pass")
        else:
            lines.append(f"while {e}:\n{body}")
    return "\n".join(lines) + "\n"


@st.composite
def preludes(draw) -> str:
    """Module-level statements before the code (plotting set-up, constants, models)."""
    return "".join(f"{draw(st.sampled_from(TARGETS))} = {draw(exprs())}\n" for _ in range(draw(st.integers(0, 3))))


@st.composite
def functions(draw) -> str:
    args = draw(st.sampled_from(["model, x, y, learning_rate", "self, x", "x", "*args, **kw"]))
    return f"{draw(st.sampled_from(DECORATORS))}def train({args}):\n{_indent(draw(blocks(1)))}"


@st.composite
def modules(draw) -> str:
    parts = [draw(st.sampled_from(HEADERS)), draw(preludes())]
    for _ in range(draw(st.integers(1, 3))):
        parts.append(draw(st.one_of(blocks(), functions())))
    return "".join(parts)


def assert_no_internal_error(text: str) -> None:
    result = lint_text("gen.py", text, ALL)
    assert result.errors == [], (result.errors, text)
    parse_errors = [f for f in result.findings if f.code == PARSE_ERROR_CODE]
    assert bool(parse_errors) == (not python_accepts_text(text)), ([f.message for f in parse_errors], text)


@settings(max_examples=150 * SCALE, **SETTINGS)
@given(modules())
def test_tensorflow_api_programs_run_every_rule_cleanly(program: str) -> None:
    assert_no_internal_error(program)


@settings(max_examples=60 * SCALE, **SETTINGS)
@given(modules())
def test_the_same_programs_inside_a_function_run_every_rule_cleanly(program: str) -> None:
    text = "import tensorflow as tf\n\ndef outer(model, x, y, opt, ds, strategy, loss_fn, p):\n" + _indent(program)
    assert_no_internal_error(text)


# --- notebooks: cells with IPython syntax around TensorFlow code ---------------------------

IPYTHON_LINES = [
    "%matplotlib inline", "!pip install -q tensorflow \\\n    tensorflow-datasets", "%load_ext tensorboard",
    "files = !ls", "tf.GradientTape?", "model.summary??", "%timeit f(x)", "!nvidia-smi", "%env A=1",
    "%tensorboard --logdir logs", "?tf.function", "x = %time f(x)", "!echo $x \\\n  done", "# a question?",
]


@st.composite
def notebook_cells(draw) -> str:
    body = draw(blocks())
    lines = body.split("\n")
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(lines)))
        # at the indentation of the line it goes before, so that it belongs to that block
        ref = lines[at] if at < len(lines) else ""
        indent = ref[: len(ref) - len(ref.lstrip())]
        lines.insert(at, textwrap.indent(draw(st.sampled_from(IPYTHON_LINES)), indent))
    cell = "\n".join(lines)
    head = draw(st.sampled_from(["", "", "", "  ", "%%time\n", "%%capture\n", "%%bash\n"]))
    if head.strip():
        return head + cell
    return textwrap.indent(cell, head) if head else cell


def _ipython_accepts(cell: str) -> bool | None:
    """Whether the Python IPython makes of the cell parses (None: IPython is not installed)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # pragma: no cover
        return None
    try:
        return python_accepts_text(TransformerManager().transform_cell(cell))
    except Exception:  # noqa: BLE001 - IPython itself gives up on the cell
        return False


@settings(max_examples=40 * SCALE, **SETTINGS)
@given(st.lists(notebook_cells(), min_size=1, max_size=4))
def test_notebooks_of_tensorflow_cells_check_cleanly(cells) -> None:
    import json

    from tflint.check.engine import lint_bytes

    doc = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": c}
                     for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    result = lint_bytes("nb.ipynb", json.dumps(doc).encode(), ALL)
    assert result.errors == [], (result.errors, cells)
    bad_cells = {f.cell for f in result.findings if f.code == PARSE_ERROR_CODE}
    for i, cell in enumerate(cells, start=1):
        if cell.startswith("%%"):
            continue  # a cell magic: IPython hands the body over as a string
        accepted = _ipython_accepts(cell.rstrip("\n") if cell.endswith("\n") else cell)
        if accepted:
            assert i not in bad_cells, (i, cell, [f.message for f in result.findings])
    for f in result.findings:
        assert f.cell is not None and 1 <= f.cell <= len(cells), f
        assert f.line >= 1 and f.col >= 0, f
