"""Reading files: encodings, BOM, binary files, notebooks and their cell/line map."""

from __future__ import annotations

import json

import pytest

from tflint.check.source import (
    SourceError,
    decode,
    decode_notebook,
    decode_python,
    detect_encoding,
    newline_of,
)


def notebook(*cells, language="python"):
    nb = {
        "cells": [
            {"cell_type": t, "metadata": {}, "source": s, **({"outputs": [], "execution_count": None} if t == "code" else {})}
            for t, s in cells
        ],
        "metadata": {"language_info": {"name": language}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(nb).encode()


def test_utf8_default_and_bom():
    src = decode_python("x = 'é'\n".encode())
    assert src.text == "x = 'é'\n" and src.encoding == "utf-8" and not src.bom
    src = decode_python(b"\xef\xbb\xbf" + "y = 'ü'\n".encode())
    assert src.text == "y = 'ü'\n" and src.bom


def test_coding_cookie_line_one_and_two():
    raw = b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n"
    src = decode_python(raw)
    assert src.encoding == "iso8859-1"
    assert "été" in src.text
    raw2 = b"#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\ns = '\x80'\n"
    assert "€" in decode_python(raw2).text
    # A cookie on line 2 only counts when line 1 is a comment or blank.
    raw3 = b"x = 1\n# coding: latin-1\ns = '\xe9'\n"
    with pytest.raises(SourceError) as info:
        decode_python(raw3)
    assert info.value.line == 3


def test_unknown_cookie_and_bom_conflict():
    with pytest.raises(SourceError, match="unknown encoding 'klingon'") as info:
        decode_python(b"# coding: klingon\nx = 1\n")
    assert info.value.line == 1
    with pytest.raises(SourceError, match="BOM"):
        decode_python(b"\xef\xbb\xbf# coding: latin-1\nx = 1\n")


def test_invalid_utf8_position():
    with pytest.raises(SourceError) as info:
        decode_python(b"a = 1\nb = '\xff'\n")
    assert info.value.line == 2 and info.value.col == 5
    assert "0xff" in info.value.reason


def test_binary_file():
    with pytest.raises(SourceError, match="binary"):
        decode_python(b"\x7fELF\x02\x01\x01\x00\x00\x00")


def test_detect_encoding_ignores_cookie_in_code():
    assert detect_encoding(b"x = 1\ny = 2\n# coding: latin-1\n") == ("utf-8", False)


def test_notebook_code_cells_and_map():
    raw = notebook(
        ("markdown", "# Title\n"),
        ("code", ["import tensorflow as tf\n", "x = 1"]),
        ("code", "%matplotlib inline\nfor i in range(3):\n    !echo hi\n    y = i\nfiles = !ls\nhelp?\n"),
        ("code", "%%bash\necho not python\n"),
        ("code", "z = (1\n     % 2)\n"),
    )
    src = decode_notebook(raw)
    lines = src.text.split("\n")
    assert lines[0] == "import tensorflow as tf"
    assert lines[2] == "get_ipython().run_line_magic('matplotlib', 'inline')"
    assert lines[4] == "    get_ipython().system('echo hi')"  # keeps the block valid
    assert lines[6] == "files = get_ipython().getoutput('ls')"
    assert lines[7] == "get_ipython().run_line_magic('pinfo', 'help')"
    assert lines[8] == "" and lines[9] == ""  # a cell magic: the whole cell
    assert lines[10] == "z = (1" and lines[11] == "     % 2)"  # valid Python is left alone
    compile(src.text, "<nb>", "exec")
    nb = src.notebook
    assert nb.locate(1) == (1, 1)
    assert nb.locate(2) == (1, 2)
    assert nb.locate(3) == (2, 1)
    assert nb.locate(6) == (2, 4)
    assert nb.locate(11) == (4, 1)
    assert 3 in nb.replaced and 4 not in nb.replaced


def test_notebook_errors():
    with pytest.raises(SourceError, match="invalid notebook JSON") as info:
        decode_notebook(b'{"cells": [\n  {"cell_type": "code",,}]}')
    assert info.value.line == 2
    with pytest.raises(SourceError, match="no 'cells'"):
        decode_notebook(b'{"worksheets": []}')
    with pytest.raises(SourceError, match="code cell 1"):
        decode_notebook(b'{"cells": [{"cell_type": "code", "source": 3}]}')


def test_non_python_notebook_is_empty():
    src = decode_notebook(notebook(("code", "println(1)"), language="julia"))
    assert src.text == ""


def test_decode_dispatches_on_suffix():
    assert decode("a.ipynb", notebook(("code", "a = 1"))).notebook is not None
    assert decode("a.py", b"a = 1\n").notebook is None


def test_newline_style():
    assert newline_of("a\r\nb\n") == "\r\n"
    assert newline_of("a\rb") == "\r"
    assert newline_of("a\nb\r\n") == "\n"
    assert newline_of("abc") == "\n"


# --- notebook cells as Jupyter runs them ---------------------------------------------------

import ast  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from tests.rule_harness import expected  # noqa: E402
from tflint.check import ipython as ipy  # noqa: E402
from tflint.check.engine import lint_bytes  # noqa: E402
from tflint.check.source import isolate_unparsable_cells  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_FIXTURE = ROOT / "fixtures" / "check" / "notebook_cell_shapes_bugs.ipynb"

# Cells in the shapes real notebooks have (TensorFlow's guides and tutorials, Colab exports).
CELL_SHAPES = [
    "%matplotlib inline\nimport tensorflow as tf",
    "!pip install -q tensorflow \\\n   tensorflow-datasets\nimport os",
    "!pip install a \\\n  b \\\n  c\n!nvidia-smi",
    "!wget -q https://example.org/y.zip \\\n  -O /tmp/y.zip && unzip -q /tmp/y.zip\nimport zipfile",
    "%pip install -U tensorflow",
    "%%time\nmodel.fit(x)\n%ls",
    "%%timeit -n 10\nfor i in range(3):\n    !echo hi\n    f(i)",
    "%%capture\n!pip install x\nimport tensorflow as tf",
    "%%bash\necho hi",
    "%%writefile train.py\nimport tensorflow as tf\nprint(1)\n",
    "#@title Licensed\n%%time\nx = 1",
    "tf.GradientTape?",
    "obj.method??",
    "?obj",
    "tf.data.*?",
    "plt.plot?",
    "def f(x):\n  return x\nf?",
    "x = y?",
    "  x = 1\n  y = 2\n",
    "    for i in range(3):\n        print(i)\n    !echo done",
    "\t!ls\n\tx = 1",
    "x = !ls\nfiles = %sx ls",
    "a, b = !ls",
    "d['k'] = !ls",
    "!!ls",
    ">>> a = 1\n... b",
    "In [1]: a = 1",
    "s = '''\n!not a cmd\n'''",
    "def f():\n    '''doc?\n    %not\n    '''\n    return 1",
    "if x:\n    !echo hi\n    y=1",
    "try:\n  %tensorflow_version 2.x\nexcept Exception:\n  pass",
    "%timeit -n 3 f(1)",
    "%load_ext tensorboard\n%tensorboard --logdir logs",
    "%env TF_CPP_MIN_LOG_LEVEL=3\nimport tensorflow as tf",
    "history = model.fit(x, y)\n%tensorboard --logdir logs/fit",
    "x = 1 # hi?",
    "import os # what?",
    "x = 5 if a else b  # ok?",
    "print('a?')",
    "print('a = !b')\n!ls",
    "print(\"!\")\n%ls",
    "x = [1,\n     2]\n!ls",
    "\n\nimport os\n!ls",
    "x = 1\n  # comment\n%time y = f(x)",
    "!echo it's\nq = 1",
    "if True:\n    x = 1\n  \n    y = 2",
    "f(a=!b)",
    "x = y ? ",
    "%time y = f(x,\n  z)\nw = 2",
]


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except SyntaxError:
        return False


@pytest.mark.parametrize("cell", CELL_SHAPES)
def test_builtin_transformation_matches_ipython(cell):
    pytest.importorskip("IPython")
    with_ipython = ipy.transform_cell(cell)
    builtin = ipy.transform_cell(cell, use_ipython=False)
    n = len(cell.split("\n"))
    assert len(with_ipython.lines) == len(builtin.lines) == n
    assert (with_ipython.lines, with_ipython.cols, with_ipython.replaced) == (
        builtin.lines, builtin.cols, builtin.replaced,
    )


@pytest.mark.parametrize("cell", CELL_SHAPES)
def test_a_cell_ipython_accepts_parses(cell):
    from IPython.core.inputtransformer2 import TransformerManager

    ipython_text = TransformerManager().transform_cell(cell)
    ours = "\n".join(ipy.transform_cell(cell).lines)
    builtin = "\n".join(ipy.transform_cell(cell, use_ipython=False).lines)
    assert _parses(ours) == _parses(builtin)
    if _parses(ipython_text):
        assert _parses(ours), (cell, ours)
    elif not cell.lstrip().startswith("%%"):  # cell magics hide their body from IPython's parse
        assert not _parses(ours), (cell, ours)


def test_ipython_is_used_when_installed():
    pytest.importorskip("IPython")
    assert ipy.transform_cell("%matplotlib inline\nx = 1").via == "ipython"
    assert ipy.transform_cell("%matplotlib inline\nx = 1", use_ipython=False).via == "builtin"
    assert ipy.transform_cell("x = 1\nprint(x % 2)").via == "none"  # plain Python: left alone


def test_continuation_lines_of_a_shell_escape_are_one_rewritten_line():
    t = ipy.transform_cell("!pip install -q tensorflow \\\n    tensorflow-datasets\nimport os")
    assert t.lines[0] == "get_ipython().system('pip install -q tensorflow      tensorflow-datasets')"
    assert t.lines[1] == "" and t.lines[2] == "import os"
    assert t.replaced == {0, 1}


def test_an_indented_cell_is_dedented_and_its_columns_kept():
    cell = "  x = tf.constant(1.0)\n  if x:\n      !echo hi\n      y = x"
    for use in (True, False):
        t = ipy.transform_cell(cell, use_ipython=use)
        assert t.lines == ["x = tf.constant(1.0)", "if x:", "    get_ipython().system('echo hi')", "    y = x"]
        assert t.cols == [2, 2, 2, 2]
        assert t.replaced == {2}


def test_python_body_cell_magics_keep_their_body():
    t = ipy.transform_cell("%%time\nfor i in range(2):\n    !echo $i\n    y = i")
    assert t.lines == ["", "for i in range(2):", "    get_ipython().system('echo $i')", "    y = i"]
    assert t.replaced == {0, 2}
    other = ipy.transform_cell("%%bash\necho hi\nls")
    assert other.lines == ["", "", ""] and other.replaced == {0, 1, 2}


def test_positions_map_back_to_the_cell():
    raw = notebook(
        ("code", "import tensorflow as tf\n%matplotlib inline"),
        ("code", "  x = tf.constant([1.0])\n  with tf.GradientTape() as tape:\n      y = x * x\n  g = tape.gradient(y, x)"),
    )
    src = decode_notebook(raw)
    nb = src.notebook
    # line 6 of the text is the cell's line 4, moved two columns left
    assert src.text.split("\n")[5] == "g = tape.gradient(y, x)"
    assert nb.position(6, 4) == (2, 4, 6)
    assert nb.position(2, 0) == (1, 2, 0)
    result = lint_bytes("nb.ipynb", raw, frozenset({"TFL301"}))
    (f,) = result.findings
    cell_line = "  g = tape.gradient(y, x)"
    assert (f.cell, f.line, f.col) == (2, 4, cell_line.index("tape.gradient"))


def test_a_cell_that_does_not_parse_is_reported_alone():
    raw = notebook(
        ("code", "import tensorflow as tf\n"),
        ("code", "x = 1\ndef broken(:\n    pass"),
        ("code", "@tf.function\ndef f(x):\n    print(x)\n    return x"),
        ("code", "  y = (\n"),
    )
    result = lint_bytes("nb.ipynb", raw, frozenset({"TFL000", "TFL101"}))
    got = sorted((f.cell, f.line, f.code) for f in result.findings)
    assert got == [(2, 2, "TFL000"), (3, 3, "TFL101"), (4, 1, "TFL000")], [
        (f.cell, f.line, f.col, f.code, f.message) for f in result.findings
    ]
    assert result.errors == []


def test_isolating_cells_keeps_the_line_count():
    src = decode_notebook(notebook(("code", "a = 1"), ("code", "b = (\nc = 2"), ("code", "d = 3")))
    text, bad = isolate_unparsable_cells(src.text, src.notebook)
    assert len(text.split("\n")) == len(src.text.split("\n"))
    assert [cell for cell, *_ in bad] == [2]
    assert text.split("\n")[:4] == ["a = 1", "", "", "d = 3"]
    assert {2, 3} <= src.notebook.replaced


def _fixture_expectations() -> set[tuple[int, int, str]]:
    doc = json.loads(NOTEBOOK_FIXTURE.read_text())
    want = set()
    ncode = 0
    for cell in doc["cells"]:
        if cell["cell_type"] != "code":
            continue
        ncode += 1
        want.update((ncode, line, code) for line, code in expected("".join(cell["source"])))
    return want


_LINT_FIXTURE = """
import json, sys
from tflint.check.engine import lint_bytes
from tflint.rules import all_rules
raw = open(sys.argv[1], 'rb').read()
r = lint_bytes(sys.argv[1], raw, frozenset(c.code for c in all_rules()))
from tflint.check import ipython
print(json.dumps({"errors": r.errors, "ipython": bool(ipython._manager),
                  "findings": [[f.cell, f.line, f.col, f.code] for f in r.findings]}))
"""


def _lint_fixture_in_subprocess(hide_ipython: bool) -> dict:
    prelude = "import sys; sys.modules['IPython'] = None\n" if hide_ipython else ""
    proc = subprocess.run(
        [sys.executable, "-c", prelude + _LINT_FIXTURE, str(NOTEBOOK_FIXTURE)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("hide_ipython", [False, True], ids=["ipython", "builtin"])
def test_notebook_fixture_findings_with_and_without_ipython(hide_ipython):
    if not hide_ipython:
        pytest.importorskip("IPython")
    out = _lint_fixture_in_subprocess(hide_ipython)
    assert out["errors"] == []
    assert out["ipython"] is (not hide_ipython)
    got = {(cell, line, code) for cell, line, _col, code in out["findings"]}
    assert got == _fixture_expectations()
    # the indented cell: the column is the one in the cell as written
    doc = json.loads(NOTEBOOK_FIXTURE.read_text())
    code_cells = [c for c in doc["cells"] if c["cell_type"] == "code"]
    for cell, line, col, code in out["findings"]:
        if code == "TFL301":
            text = "".join(code_cells[cell - 1]["source"]).split("\n")[line - 1]
            assert col == text.index("tape.gradient")


def _imported(args: list[str], cwd) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tflint", "check", "--no-cache", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return {ln.rsplit("|", 1)[1].strip().split(".")[0] for ln in proc.stderr.splitlines()
            if ln.startswith("import time:") and "|" in ln}


def test_ipython_is_imported_only_for_a_cell_that_needs_it(tmp_path):
    pytest.importorskip("IPython")
    (tmp_path / "a.py").write_text("import tensorflow as tf\nx = tf.constant(1.0)\n")
    (tmp_path / "plain.ipynb").write_bytes(notebook(("code", "import tensorflow as tf\nx = 1 % 2")))
    (tmp_path / "magic.ipynb").write_bytes(notebook(("code", "%matplotlib inline\nimport tensorflow as tf")))
    for name in ("a.py", "plain.ipynb", "magic.ipynb"):
        assert "IPython" not in _imported([name], tmp_path), name  # never the interactive shell
    probe = (
        "import sys\nfrom tflint.check.engine import lint_bytes\nfrom tflint.check import ipython\n"
        "lint_bytes(sys.argv[1], open(sys.argv[1], 'rb').read(), frozenset({'TFL000', 'TFL101'}))\n"
        "print(bool(ipython._manager), 'IPython' in sys.modules)"
    )
    for name, loaded in (("a.py", "False"), ("plain.ipynb", "False"), ("magic.ipynb", "True")):
        proc = subprocess.run([sys.executable, "-c", probe, name], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert proc.stdout.split() == [loaded, "False"], (name, proc.stdout, proc.stderr[-2000:])


def test_the_light_loader_gives_ipythons_own_transformer():
    pytest.importorskip("IPython")
    from IPython.core.inputtransformer2 import TransformerManager

    light = ipy._load_light()
    assert light is not TransformerManager
    for cell in CELL_SHAPES:
        assert light().transform_cell(cell) == TransformerManager().transform_cell(cell)


def test_line_numbers_in_messages_are_the_cells_lines():
    raw = notebook(
        ("code", "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
                 "x = tf.ones([2, 3])\npreds = model(x)"),
        ("code", "%matplotlib inline\nwith tf.GradientTape() as tape:\n    loss = tf.reduce_mean(preds)\n"
                 "grads = tape.gradient(loss, model.trainable_variables)"),
    )
    (f,) = lint_bytes("nb.ipynb", raw, frozenset({"TFL302"})).findings
    assert (f.cell, f.line) == (2, 4)
    assert "computed on cell 1 line 4 before" in f.message, f.message
    assert "(lines 2-3)" in f.message, f.message


def test_a_future_import_in_a_later_cell_is_not_a_syntax_error():
    # Jupyter compiles each cell on its own, so `from __future__` may open any cell
    raw = notebook(
        ("code", "import tensorflow as tf"),
        ("code", "from __future__ import annotations\n@tf.function\ndef f(x):\n    print(x)\n    return x"),
    )
    result = lint_bytes("nb.ipynb", raw, frozenset({"TFL000", "TFL101"}))
    assert [(f.cell, f.line, f.code) for f in result.findings] == [(2, 4, "TFL101")]
