"""The per-file pipeline: TFL000, skipping non-TF files, rule crashes, columns, order."""

from __future__ import annotations

import ast
import json
import os

import pytest

from tflint.check.engine import lint_bytes, lint_many, lint_text, may_use_tensorflow, sort_findings
from tflint.finding import Severity
from tflint.rules import get_rule, resolve
from tflint.rules.base import Rule

ALL = resolve()
BAD = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n    print(x)\n    return x\n"


def test_tfl101_end_to_end():
    res = lint_bytes("m.py", BAD.encode(), ALL)
    assert [(f.code, f.line, f.col, f.end_line, f.end_col) for f in res.findings] == [("TFL101", 5, 4, 5, 12)]
    assert not res.errors


def test_syntax_error_is_tfl000_with_position():
    res = lint_bytes("m.py", b"x = 1\ndef f(:\n    pass\n", ALL)
    (f,) = res.findings
    assert f.code == "TFL000" and f.severity == Severity.ERROR
    assert (f.line, f.col) == (2, 6)
    assert "syntax error" in f.message


def test_tfl000_in_files_without_tensorflow():
    res = lint_bytes("plain.py", b"def f(:\n", ALL)
    assert [f.code for f in res.findings] == ["TFL000"]


def test_undecodable_binary_and_cookie_problems():
    (f,) = lint_bytes("m.py", b"import tensorflow\nx = '\xff\xfe'\n", ALL).findings
    assert f.code == "TFL000" and f.line == 2 and "cannot decode" in f.message
    (f,) = lint_bytes("m.py", b"\x00\x01\x02binary", ALL).findings
    assert "binary" in f.message
    (f,) = lint_bytes("m.py", b"# coding: nope\n", ALL).findings
    assert "unknown encoding" in f.message


def test_broken_notebook_is_tfl000():
    (f,) = lint_bytes("n.ipynb", b'{"cells": [', ALL).findings
    assert f.code == "TFL000" and "notebook" in f.message


def test_tfl000_can_be_deselected():
    assert lint_bytes("m.py", b"def f(:\n", resolve(ignore=["TFL000"])).findings == []


def test_latin1_file_is_checked():
    text = "# -*- coding: latin-1 -*-\n" + BAD.replace("print(x)", "print('é', x)")
    res = lint_bytes("m.py", text.encode("latin-1"), ALL)
    assert [(f.code, f.line) for f in res.findings] == [("TFL101", 6)]


def test_columns_are_characters_not_bytes():
    text = BAD.replace("    print(x)", "    s = 'ééé'; print(x)")
    (f,) = lint_text("m.py", text, ALL).findings
    line = text.split("\n")[f.line - 1]
    assert line[f.col :].startswith("print(")
    assert line[f.col : f.end_col] == "print(x)"
    if f.fix is not None:
        e = f.fix.edits[0]
        assert line[e.col :].startswith("print")


def test_files_without_tensorflow_are_not_analyzed():
    assert not may_use_tensorflow("import numpy as np\nprint(np.ones(3))\n")
    assert not may_use_tensorflow("URL = 'https://tools.ietf.org/html/rfc7230'\nx = normalize('utf.8')\n")
    for spelling in (
        "import tensorflow as tf",
        "from tensorflow import keras",
        "import keras",
        "from keras import layers",
        "import tf_keras",
        "from tensorflow.python.eager import def_function",
        "def f(tf):\n    return tf.function(g)",
    ):
        assert may_use_tensorflow(spelling), spelling
    # No mention of TensorFlow: the rules do not run (a lookalike decorator is not flagged).
    text = "from mylib import function\n\n@function\ndef step(x):\n    print(x)\n"
    assert lint_text("m.py", text, ALL).findings == []


class Boom(Rule):
    code = "TFL999"
    name = "always-crashes"
    summary = what = why = example = use_instead = "test rule"

    def check(self, ctx):
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Call):
                ctx.report(node, "found a call")
                raise ZeroDivisionError("boom")


def test_crashing_rule_keeps_other_findings():
    tfl101 = get_rule("TFL101")()
    res = lint_text("m.py", BAD, ALL | {"TFL999"}, rules=[Boom(), tfl101])
    assert [f.code for f in res.findings] == ["TFL101"]  # the crashing rule's partial output is dropped
    (err,) = res.errors
    assert "TFL999" in err and "always-crashes" in err and "m.py" in err and "ZeroDivisionError" in err
    assert not res.cacheable


def test_notebook_findings_are_in_cells():
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["text"]},
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
             "source": ["%pip install tensorflow\n", "import tensorflow as tf"]},
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 2,
             "source": ["!nvidia-smi\n", "@tf.function\n", "def f(x):\n", "    print(x)\n", "    return x\n"]},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (f,) = lint_bytes("n.ipynb", json.dumps(nb).encode(), ALL).findings
    assert (f.code, f.cell, f.line, f.col) == ("TFL101", 2, 4, 4)


def test_notebook_syntax_error_located_in_cell():
    nb = {"cells": [{"cell_type": "code", "source": "import tensorflow as tf\n"},
                    {"cell_type": "code", "source": "x = 1\ny = (\n"}], "metadata": {}}
    (f,) = lint_bytes("n.ipynb", json.dumps(nb).encode(), ALL).findings
    assert f.code == "TFL000" and f.cell == 2


def test_parallel_and_serial_give_the_same_ordered_result():
    tasks = []
    for i in range(40):
        body = BAD if i % 3 else "def f(:\n"
        tasks.append((f"pkg/m{i:02d}.py", (body + "\n" * i).encode(), ALL))
    tasks.reverse()
    serial = sort_findings(f for r in lint_many(tasks, jobs=1) for f in r.findings)
    parallel = sort_findings(f for r in lint_many(tasks, jobs=2) for f in r.findings)
    assert serial == parallel
    assert len(serial) == 40
    assert [f.path for f in serial] == sorted(f.path for f in serial)
    assert [r.path for r in lint_many(tasks, jobs=2)] == [t[0] for t in tasks]


@pytest.mark.slow
def test_standard_library_tfl000_only_for_files_that_do_not_parse():
    import subprocess
    import sys
    import sysconfig
    import warnings

    stdlib = sysconfig.get_paths()["stdlib"]
    listing = subprocess.run([sys.executable, "-m", "tflint", "check", "--show-files", stdlib],
                             capture_output=True, text=True, timeout=300)
    files = listing.stdout.split()
    assert len(files) > 500
    proc = subprocess.run(
        [sys.executable, "-m", "tflint", "check", "--no-cache", "--select", "TFL000",
         "--output-format", "json", stdlib],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    reported = {os.path.abspath(f["filename"]) for f in json.loads(proc.stdout)}
    really_bad = set()
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(data)
        except (SyntaxError, ValueError):
            really_bad.add(os.path.abspath(f))
    assert reported == really_bad


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(lambda t: ("import tensorflow as tf\n" + t).encode("utf-8", "surrogatepass")),
))
def test_any_bytes_give_findings_never_an_exception(data):
    for name in ("m.py", "m.ipynb"):
        res = lint_bytes(name, data, ALL)
        for f in res.findings:
            assert f.line >= 1 and f.col >= 0
            if f.code == "TFL000":
                assert f.message
