"""Applying fixes: edit arithmetic, --fix / --diff / --unsafe-fixes, and what is preserved."""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys

from tflint.finding import Edit, Fix
from tflint.check.fix import apply_fixes, fix_file, parses
from tflint.rules import get_rule, resolve
from tflint.rules.base import Rule

BAD = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n    print(x)\n    return x\n"
GOOD = BAD.replace("print(x)", "tf.print(x)")


def check(*args, cwd, input=None):
    env = {k: v for k, v in os.environ.items() if k != "TFLINT_CACHE_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "tflint", "check", "--output-format", "concise", "--no-cache", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=env, input=input,
    )


def fix(message, *edits, applicability="safe"):
    return Fix(message, tuple(Edit(*e) for e in edits), applicability)


def test_apply_non_overlapping_and_skip_overlapping():
    text = "aaa bbb ccc\nddd\n"
    new, n = apply_fixes(text, [fix("1", (1, 0, 1, 3, "A")), fix("2", (1, 8, 1, 11, "C")), fix("3", (2, 0, 2, 3, "D"))])
    assert (new, n) == ("A bbb C\nD\n", 3)
    new, n = apply_fixes(text, [fix("1", (1, 0, 1, 7, "X")), fix("2", (1, 4, 1, 11, "Y"))])
    assert (new, n) == ("X ccc\nddd\n", 1)


def test_identical_edits_are_shared_and_insertions_at_one_point_conflict():
    imp = (1, 0, 1, 0, "import x\n")
    new, n = apply_fixes("a\nb\n", [fix("1", imp, (1, 0, 1, 1, "A")), fix("2", imp, (2, 0, 2, 1, "B"))])
    assert (new, n) == ("import x\nA\nB\n", 2)
    new, n = apply_fixes("a\n", [fix("1", (1, 0, 1, 0, "p")), fix("2", (1, 0, 1, 0, "q"))])
    assert n == 1 and new in ("pa\n", "qa\n")


def test_multiline_edits_crlf_and_out_of_range():
    text = "def f():\r\n    return 1\r\n"
    new, n = apply_fixes(text, [fix("m", (1, 8, 2, 12, "\n    x = 1\n    return x"))])
    assert new == "def f():\r\n    x = 1\r\n    return x\r\n" and n == 1
    assert apply_fixes(text, [fix("bad", (9, 0, 9, 1, ""))]) == (text, 0)
    assert apply_fixes(text, [fix("bad", (1, 50, 1, 51, ""))]) == (text, 0)


def test_parses():
    assert parses("x = 1\n") is None
    assert "syntax error" in parses("x = (\n")


def test_fix_writes_file_and_preserves_mode(tmp_path):
    p = tmp_path / "train.py"
    p.write_text(BAD)
    p.chmod(0o751)
    proc = check("--fix", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.read_text() == GOOD
    assert stat.S_IMODE(p.stat().st_mode) == 0o751
    assert "Fixed 1 issue" in proc.stderr
    assert list(tmp_path.glob(".tflint-*")) == []  # no temporary files left


def test_fix_preserves_crlf_encoding_and_bom(tmp_path):
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes(BAD.replace("\n", "\r\n").encode())
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# -*- coding: latin-1 -*-\n" + BAD.replace("print(x)", "print('é', x)")).encode("latin-1"))
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + BAD.encode())
    assert check("--fix", cwd=tmp_path).returncode == 0
    assert crlf.read_bytes() == GOOD.replace("\n", "\r\n").encode()
    assert latin.read_bytes().decode("latin-1").endswith("    tf.print('é', x)\n    return x\n")
    assert b"\xc3" not in latin.read_bytes()  # still latin-1, not UTF-8
    assert bom.read_bytes() == b"\xef\xbb\xbf" + GOOD.encode()


def test_fixes_converge_over_passes(tmp_path):
    src = (
        "from tensorflow import function\n\n@function\ndef step(x):\n"
        "    print(x)\n    print(x, x)\n    print('done')\n    return x\n"
    )
    p = tmp_path / "m.py"
    p.write_text(src)
    assert check("--fix", cwd=tmp_path).returncode == 0
    out = p.read_text()
    ast.parse(out)
    assert out.count("import tensorflow as tf") == 1
    assert out.count("tf.print(") == 3 and "    print(" not in out


def test_diff_prints_and_does_not_write(tmp_path):
    p = tmp_path / "train.py"
    p.write_text(BAD)
    proc = check("--diff", cwd=tmp_path)
    assert proc.returncode == 1
    assert "--- a/train.py" in proc.stdout and "+++ b/train.py" in proc.stdout
    assert "-    print(x)" in proc.stdout and "+    tf.print(x)" in proc.stdout
    assert p.read_text() == BAD
    p.write_text(GOOD)
    proc = check("--diff", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == ""


def test_unsafe_fixes_only_with_flag(tmp_path):
    src = BAD.replace("print(x)", "print(f'x={x}')")
    p = tmp_path / "m.py"
    p.write_text(src)
    proc = check("--fix", cwd=tmp_path)
    assert proc.returncode == 1 and p.read_text() == src
    assert check("--diff", cwd=tmp_path).stdout == ""
    assert "tf.print(f'x={x}')" in check("--diff", "--unsafe-fixes", cwd=tmp_path).stdout
    proc = check("--fix", "--unsafe-fixes", cwd=tmp_path)
    assert "tf.print(f'x={x}')" in p.read_text()


class BreaksCode(Rule):
    code = "TFL101"
    name = "breaks-code"
    summary = what = why = example = use_instead = "test rule"

    def check(self, ctx):
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                ctx.report(node, "bad fix", fix=Fix("break it", (ctx.replace(node, "print(("),)))


def test_fix_that_would_not_parse_leaves_file_untouched():
    outcome = fix_file("m.py", BAD.encode(), resolve(), rules=[BreaksCode()])
    assert outcome.new_raw is None and outcome.fixed == 0
    assert "would not parse" in outcome.problem


def test_real_rule_fix_in_process():
    outcome = fix_file("m.py", BAD.encode(), resolve(), rules=[get_rule("TFL101")()])
    assert outcome.new_raw == GOOD.encode() and outcome.fixed == 1 and outcome.findings == []
    assert "+    tf.print(x)" in outcome.diff()


def test_fix_notebook(tmp_path):
    nb = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
             "source": ["%matplotlib inline\n", "import tensorflow as tf"]},
            {"cell_type": "markdown", "metadata": {}, "source": ["notes"]},
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
             "source": ["@tf.function\n", "def f(x):\n", "    !echo hi\n", "    print(x)\n", "    return x"]},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    p = tmp_path / "nb.ipynb"
    p.write_text(json.dumps(nb, indent=2) + "\n")
    proc = check("--fix", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.read_text().startswith('{\n  "cells"')  # the file's JSON indentation is kept
    out = json.loads(p.read_text())
    assert out["cells"][0]["source"] == ["%matplotlib inline\n", "import tensorflow as tf"]
    assert out["cells"][1] == nb["cells"][1]
    assert out["cells"][2]["source"] == ["@tf.function\n", "def f(x):\n", "    !echo hi\n", "    tf.print(x)\n", "    return x"]


def test_fix_notebook_changes_only_the_fixed_line(tmp_path):
    # as Colab writes notebooks: non-ASCII text and <, >, & as \\u escapes, no final newline; a
    # cell stored as one string with CRLF line ends, which no fix touches
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["<b>Pr\u00e9cision</b> & recall \u00bf\n"]},
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
             "source": "import tensorflow as tf\r\nx = 1\r\n"},
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
             "source": ["@tf.function\n", "def f(x):\n", "    print(x)\n", "    return x\n"]},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 0,
    }
    raw = json.dumps(nb, indent=2, ensure_ascii=True)
    raw = raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()
    assert b"\\u00e9" in raw and b"\\u003cb\\u003e" in raw and not raw.endswith(b"\n")
    p = tmp_path / "nb.ipynb"
    p.write_bytes(raw)
    proc = check("--fix", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.read_bytes() == raw.replace(b'"    print(x)\\n"', b'"    tf.print(x)\\n"')


def test_stdin_fix_writes_fixed_source_to_stdout(tmp_path):
    proc = check("-", "--fix", cwd=tmp_path, input=BAD)
    assert proc.returncode == 0
    assert proc.stdout == GOOD
    proc = check("-", "--diff", cwd=tmp_path, input=BAD)
    assert proc.returncode == 1 and "+    tf.print(x)" in proc.stdout
