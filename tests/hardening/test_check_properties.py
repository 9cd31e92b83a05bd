"""Property-based search for crashes in `tflint check`.

For any program Python accepts, the engine ends without an exception or an internal error and
reports no ``TFL000``; for any bytes (Python file or notebook), it ends with findings or
``TFL000`` — and ``TFL000`` exactly when Python itself cannot decode and parse the bytes.
Programs come from the Python grammar (hypothesmith) and from a TensorFlow-flavoured generator
that nests the shapes the rules look at (traced functions, training loops, dataset chains).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import hypothesmith
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.hardening._oracle import (
    assert_no_crash,
    python_accepts_bytes,
    python_accepts_text,
    relative_names,
    run_tflint,
)
from tflint.check.engine import PARSE_ERROR_CODE, lint_bytes, lint_text
from tflint.rules import all_rules

ROOT = Path(__file__).resolve().parents[2]
ALL = frozenset(r.code for r in all_rules())
# TFLINT_PROPERTY_SCALE=20 searches twenty times longer (the default keeps the suite fast).
SCALE = max(int(os.environ.get("TFLINT_PROPERTY_SCALE", "1")), 1)
SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck), "derandomize": False}


def assert_clean_run(result, text_ok: bool | None = None) -> None:
    assert result.errors == [], result.errors
    codes = [f.code for f in result.findings]
    if text_ok is True:
        assert PARSE_ERROR_CODE not in codes, [f.message for f in result.findings]
    if text_ok is False:
        assert codes == [PARSE_ERROR_CODE], [(f.code, f.message) for f in result.findings]
    for f in result.findings:
        assert f.line >= 1 and f.col >= 0, f
        assert (f.end_line, f.end_col) >= (f.line, f.col) or f.code == PARSE_ERROR_CODE, f
        assert f.message and "\n" not in f.message.strip("\n"), f


# --- a generator of TensorFlow-shaped programs --------------------------------------------

_NAMES = st.sampled_from(["x", "y", "loss", "step", "ds", "model", "opt", "tape", "i", "batch", "tf", "np"])
_EXPRS = st.sampled_from(
    [
        "x",
        "tf.constant(1.0)",
        "tf.reduce_sum(x)",
        "x + 1",
        "float(x)",
        "x.numpy()",
        "np.array(x)",
        "len(x)",
        "model(x, training=True)",
        "tape.gradient(loss, model.trainable_variables)",
        "tf.data.Dataset.range(10)",
        "tf.data.Dataset.from_tensor_slices(x).map(f).batch(32).shuffle(100)",
        "ds.map(lambda v: v * 2, num_parallel_calls=4).cache().prefetch(1)",
        "tf.random.uniform([2])",
        "np.random.rand()",
        "random.random()",
        "time.time()",
        "f'{x}'",
        "'%s' % x",
        "'{}'.format(x)",
        "[v for v in x]",
        "tf.Variable(0.0)",
        "opt.apply_gradients(zip(grads, model.trainable_variables))",
        "*x",
        "lambda: x",
        "(yield x)",
        "await x",
        "x if y else loss",
        "tf.function(f)",
        "tf.keras.layers.Dense(3)",
        "keras.ops.sum(x)",
        "tf.device('/GPU:0')",
        "tf.config.run_functions_eagerly(True)",
        "None",
    ]
)
_DECORATORS = st.sampled_from(
    [
        "",
        "@tf.function\n",
        "@tf.function(jit_compile=True)\n",
        "@function\n",
        "@tf.function(reduce_retracing=True, input_signature=[tf.TensorSpec([None])])\n",
        "@staticmethod\n",
        "@functools.wraps(g)\n",
    ]
)
_HEADERS = st.sampled_from(
    [
        "import tensorflow as tf\n",
        "import tensorflow as tf\nimport numpy as np\nimport random, time\n",
        "from tensorflow import function, keras\n",
        "import tensorflow.compat.v1 as tf\n",
        "from tensorflow import *\n",
        "import keras\nfrom keras import ops\n",
        "import tf_keras as keras\nimport tensorflow as tf\n",
        "from __future__ import annotations\nimport tensorflow as tf\n",
        "",
    ]
)


def _simple_statement(draw) -> str:
    kind = draw(st.integers(0, 9))
    e = draw(_EXPRS)
    n = draw(_NAMES)
    return [
        f"{n} = {e}",
        f"print({e})",
        f"print({e}, file=sys.stderr, flush=True)",
        f"{n} += {e}",
        f"{n}.append({e})",
        f"return {e}",
        f"del {n}",
        f"global {n}",
        f"assert {e}",
        f"{n}[0] = {e}",
    ][kind]


@st.composite
def tf_programs(draw, depth: int = 0) -> str:
    """A block of statements, possibly nesting functions, classes, loops and context managers."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 8 if depth < 3 else 0))
        if kind <= 2:
            lines.append(_simple_statement(draw))
            continue
        body = textwrap.indent(draw(tf_programs(depth + 1)), "    ")
        e = draw(_EXPRS)
        n = draw(_NAMES)
        if kind == 3:
            lines.append(f"{draw(_DECORATORS)}def {n}(x, y=None, *args, **kw):\n{body}")
        elif kind == 4:
            lines.append(f"for {n} in {e}:\n{body}")
        elif kind == 5:
            lines.append(f"with tf.GradientTape() as {n}:\n{body}")
        elif kind == 6:
            lines.append(f"class {n.capitalize()}(tf.keras.Model):\n{body}")
        elif kind == 7:
            lines.append(f"while {e}:\n{body}")
        else:
            lines.append(f"if {e}:\n{body}\nelse:\n    pass")
    return "\n".join(lines) + "\n"


@st.composite
def tf_modules(draw) -> str:
    return draw(_HEADERS) + draw(tf_programs())


# --- properties -----------------------------------------------------------------------------


@settings(max_examples=60 * SCALE, **SETTINGS)
@given(hypothesmith.from_grammar())
def test_any_program_python_accepts_checks_cleanly(program: str) -> None:
    ok = python_accepts_text(program)
    assert_clean_run(lint_text("gen.py", program, ALL), text_ok=ok)
    # The same program where TensorFlow is in scope, so that every rule really runs on it.
    tf_program = "import tensorflow as tf\n" + program
    assert_clean_run(lint_text("gen.py", tf_program, ALL), text_ok=python_accepts_text(tf_program))


@settings(max_examples=40 * SCALE, **SETTINGS)
@given(hypothesmith.from_grammar())
def test_any_program_inside_a_traced_function_checks_cleanly(program: str) -> None:
    body = textwrap.indent(program, "    ") if program.strip() else "    pass\n"
    text = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n" + body
    ok = python_accepts_text(text)
    assert_clean_run(lint_text("gen.py", text, ALL), text_ok=ok)


@settings(max_examples=250 * SCALE, **SETTINGS)
@given(tf_modules())
def test_tensorflow_shaped_programs_check_cleanly(program: str) -> None:
    ok = python_accepts_text(program)
    result = lint_text("gen.py", program, ALL)
    assert_clean_run(result, text_ok=ok)


@settings(max_examples=80 * SCALE, **SETTINGS)
@given(tf_modules(), st.data())
def test_mutated_programs_check_cleanly(program: str, data) -> None:
    """Cut the program anywhere, or drop/duplicate lines: parse or TFL000, never a crash."""
    lines = program.splitlines(keepends=True)
    op = data.draw(st.sampled_from(["cut", "drop", "dup", "dedent"]))
    if op == "cut":
        at = data.draw(st.integers(0, len(program)))
        text = program[:at]
    else:
        i = data.draw(st.integers(0, max(len(lines) - 1, 0)))
        if op == "drop":
            lines[i : i + 1] = []
        elif op == "dup":
            lines[i:i] = [lines[i]] if lines else []
        else:
            lines[i] = lines[i].lstrip() if lines else ""
        text = "".join(lines)
    assert_clean_run(lint_text("gen.py", text, ALL), text_ok=python_accepts_text(text))


@settings(max_examples=300 * SCALE, **SETTINGS)
@given(st.binary(max_size=2000))
def test_any_bytes_as_python_file(raw: bytes) -> None:
    assert_clean_run(lint_bytes("blob.py", raw, ALL), text_ok=python_accepts_bytes(raw))


_ENCODINGS = st.sampled_from(
    [
        "utf-8",
        "utf8",
        "UTF-8",
        "latin-1",
        "iso-8859-15",
        "cp1252",
        "ascii",
        "euc-jp",
        "shift_jis",
        "koi8-r",
        "utf-16",
        "utf-8-sig",
        "uft-8",
        "rot13",
        "hex",
        "base64",
        "undefined",
        "mbcs",
        "idna",
        "",
    ]
)
_COOKIE_LINES = st.sampled_from(
    [
        "# -*- coding: {} -*-\n",
        "# coding={}\n",
        "#!/usr/bin/env python\n# vim: set fileencoding={} :\n",
        "\n# coding: {}\n",
        "x = 1\n# coding: {}\n",
        "#\n#\n# coding: {}\n",
        "\f# coding: {}\r\n",
        "# coding: {}\r",
        "    # coding: {}\n",
    ]
)


@settings(max_examples=300 * SCALE, **SETTINGS)
@given(
    bom=st.booleans(),
    cookie=_COOKIE_LINES,
    declared=_ENCODINGS,
    actual=st.sampled_from(["utf-8", "latin-1", "cp1252", "euc-jp", "utf-16-le", "koi8-r"]),
    body=st.one_of(tf_modules(), st.text(max_size=200)),
)
def test_any_text_with_any_encoding_cookie_or_bom(bom, cookie, declared, actual, body) -> None:
    raw = (b"\xef\xbb\xbf" if bom else b"") + cookie.format(declared).encode("ascii") + body.encode(
        actual, "replace"
    )
    assert_clean_run(lint_bytes("enc.py", raw, ALL), text_ok=python_accepts_bytes(raw))


def _cell(cell_type: str, source) -> dict:
    cell = {"cell_type": cell_type, "metadata": {}}
    if source is not _MISSING:
        cell["source"] = source
    if cell_type == "code":
        cell["outputs"] = []
        cell["execution_count"] = None
    return cell


_MISSING = object()
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)


@st.composite
def notebooks(draw) -> bytes:
    cells = []
    for _ in range(draw(st.integers(0, 4))):
        ctype = draw(st.sampled_from(["code", "code", "markdown", "raw", "unknown"]))
        source = draw(
            st.one_of(
                tf_modules(),
                tf_modules().map(lambda s: s.splitlines(keepends=True)),
                st.sampled_from(["%matplotlib inline\nimport tensorflow as tf", "!pip install x", "%%bash\nls", "x?", "x = !ls"]),
                st.just(_MISSING),
                _JSONISH,
            )
        )
        cells.append(draw(st.one_of(st.just(_cell(ctype, source)), _JSONISH)) if draw(st.integers(0, 9)) == 0 else _cell(ctype, source))
    doc = {"cells": cells, "metadata": draw(st.one_of(st.just({}), _JSONISH, st.just({"language_info": {"name": "R"}}))), "nbformat": 4, "nbformat_minor": 5}
    raw = json.dumps(doc).encode()
    how = draw(st.sampled_from(["ok", "ok", "cut", "garbage", "bom"]))
    if how == "cut":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif how == "garbage":
        raw = draw(st.binary(max_size=200))
    elif how == "bom":
        raw = b"\xef\xbb\xbf" + raw
    return raw


@settings(max_examples=200 * SCALE, **SETTINGS)
@given(notebooks())
def test_any_notebook_bytes(raw: bytes) -> None:
    result = lint_bytes("nb.ipynb", raw, ALL)
    assert_clean_run(result)
    for f in result.findings:
        if f.code != PARSE_ERROR_CODE:
            assert f.cell is not None and f.cell >= 1, f


@settings(max_examples=150 * SCALE, **SETTINGS)
@given(notebooks())
def test_fixing_any_notebook_keeps_valid_json(raw: bytes) -> None:
    from tflint.check.fix import fix_file

    outcome = fix_file("nb.ipynb", raw, ALL, unsafe=True)
    assert outcome.errors == []
    if outcome.new_raw is not None and outcome.problem is None:
        doc = json.loads(outcome.new_raw)
        assert isinstance(doc["cells"], list)
        again = fix_file("nb.ipynb", outcome.new_raw, ALL, unsafe=True)
        assert again.errors == [] and again.problem is None
        # Fixing is idempotent once it has converged.
        assert again.new_raw is None or again.new_raw == outcome.new_raw or again.fixed == 0


@settings(max_examples=150 * SCALE, **SETTINGS)
@given(tf_modules())
def test_fixing_any_program_keeps_it_parsing(program: str) -> None:
    from tflint.check.fix import fix_file

    assume(python_accepts_text(program))
    outcome = fix_file("gen.py", program.encode(), ALL, unsafe=True)
    assert outcome.errors == []
    if outcome.new_raw is not None and outcome.problem is None:
        assert python_accepts_bytes(outcome.new_raw), outcome.new_raw.decode()


# --- a few through the command line ----------------------------------------------------------


@settings(max_examples=6 * SCALE, **SETTINGS)
@given(
    files=st.lists(
        st.one_of(
            st.binary(max_size=300),
            tf_modules().map(str.encode),
            hypothesmith.from_grammar().map(lambda s: s.encode("utf-8", "surrogatepass")),
        ),
        min_size=1,
        max_size=8,
    ),
    notebook=notebooks(),
    fmt=st.sampled_from(["json", "full", "concise", "sarif", "github"]),
)
def test_cli_on_generated_files(tmp_path_factory, files, notebook, fmt) -> None:
    d = tmp_path_factory.mktemp("gen")
    names = []
    for i, raw in enumerate(files):
        (d / f"m{i}.py").write_bytes(raw)
        names.append(f"m{i}.py")
    (d / "nb.ipynb").write_bytes(notebook)
    proc = run_tflint(["check", "--no-cache", "--output-format", fmt, "."], cwd=d, timeout=120)
    assert_no_crash(proc)
    if fmt == "json":
        out = relative_names(json.loads(proc.stdout), d)
        tfl000 = {f["filename"] for f in out if f["code"] == PARSE_ERROR_CODE}
        for name, raw in zip(names, files):
            assert (name in tfl000) == (not python_accepts_bytes(raw)), (name, raw)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
