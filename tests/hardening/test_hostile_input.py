"""Hostile input for `tflint check`: every case ends with findings, `TFL000` or one clear line —
never a traceback, an internal error, or a hang."""

from __future__ import annotations

import ast
import json
import os
import sys

import pytest

from tests.hardening._oracle import assert_no_crash, run_tflint
from tflint.check.engine import PARSE_ERROR_CODE, lint_text
from tflint.rules import all_rules

ALL = frozenset(r.code for r in all_rules())
TRACED_PRINT = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    print(x)\n    return x\n"
FORMATS = ("json", "full", "concise", "sarif", "github")


def check_json(cwd, *paths, timeout=120, env=None) -> list[dict]:
    """Findings as JSON, with file names made relative to ``cwd`` where they are below it."""
    proc = run_tflint(["check", "--no-cache", "--output-format", "json", *paths], cwd=cwd, timeout=timeout, env=env)
    assert_no_crash(proc)
    found = json.loads(proc.stdout)
    root = os.path.abspath(cwd)
    for f in found:
        name = f["filename"]
        if os.path.isabs(name) and os.path.abspath(name).startswith(root + os.sep):
            f["filename"] = os.path.relpath(os.path.abspath(name), root).replace(os.sep, "/")
    return found


def codes_by_file(findings) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in findings:
        out.setdefault(f["filename"], []).append(f["code"])
    return out


def test_symlink_loops_are_not_followed(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "real.py").write_text(TRACED_PRINT)
    os.symlink("..", tmp_path / "pkg" / "up")  # directory loop
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "self")
    os.symlink("loop_b.py", tmp_path / "pkg" / "loop_a.py")  # file loop
    os.symlink("loop_a.py", tmp_path / "pkg" / "loop_b.py")
    os.symlink("missing.py", tmp_path / "pkg" / "dangling.py")
    found = codes_by_file(check_json(tmp_path, ".", timeout=60))
    assert found == {"pkg/real.py": ["TFL101"]}
    # Named explicitly: one clear line, exit 2.
    proc = run_tflint(["check", "--no-cache", "pkg/loop_a.py"], cwd=tmp_path, timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_unreadable_file_is_tfl000_and_the_run_goes_on(tmp_path):
    (tmp_path / "ok.py").write_text(TRACED_PRINT)
    # Reading /proc/self/mem at offset 0 fails with EIO even for root.
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("needs Linux /proc")
    os.symlink("/proc/self/mem", tmp_path / "mem.py")
    paths = ["."]
    if os.geteuid() != 0:
        locked = tmp_path / "locked.py"
        locked.write_text(TRACED_PRINT)
        locked.chmod(0)
    found = check_json(tmp_path, *paths)
    by_file = codes_by_file(found)
    assert by_file["ok.py"] == ["TFL101"]
    assert by_file["mem.py"] == ["TFL000"]
    msg = next(f["message"] for f in found if f["filename"] == "mem.py")
    assert msg.startswith("cannot read file"), msg
    if os.geteuid() != 0:
        assert by_file["locked.py"] == ["TFL000"]


def test_fifo_device_and_directory_named_like_python(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "x.py").mkdir()
    (tmp_path / "x.py" / "inner.py").write_text(TRACED_PRINT)
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "empty.ipynb").write_bytes(b"")
    # In a directory walk the FIFO is skipped; x.py/ is a directory and is walked.
    by_file = codes_by_file(check_json(tmp_path, ".", timeout=60))
    assert by_file == {"x.py/inner.py": ["TFL101"], "empty.ipynb": ["TFL000"]}
    # Named explicitly, a FIFO or a device is refused without blocking on it or reading it.
    by_file = codes_by_file(check_json(tmp_path, "pipe.py", "/dev/zero", "x.py", "empty.py", timeout=60))
    assert by_file["pipe.py"] == ["TFL000"] and by_file["/dev/zero"] == ["TFL000"]
    assert by_file["x.py/inner.py"] == ["TFL101"]
    assert "empty.py" not in by_file


def test_several_megabytes(tmp_path):
    pad = "# " + "padding " * 40 + "\n"
    chunk = "\n@tf.function\ndef step_{i}(x):\n" + pad + "    y = x * {i}\n    print(y)\n    return tf.reduce_sum(y) + {i}\n"
    n = 10_000
    text = "import tensorflow as tf\n" + "".join(chunk.format(i=i) for i in range(n))
    assert len(text) > 4_000_000
    (tmp_path / "big.py").write_text(text)
    found = check_json(tmp_path, "big.py", timeout=600)
    assert [f["code"] for f in found] == ["TFL101"] * n
    assert [f["location"]["row"] for f in found] == sorted(f["location"]["row"] for f in found)


def _nested_cases() -> dict[str, str]:
    h = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n"
    return {
        "parens_10k": "x = " + "(" * 10_000 + "1" + ")" * 10_000 + "\n",
        "brackets_190": h + "    y = " + "[" * 190 + "x" + "]" * 190 + "\n    print(y)\n",
        "list_100k": "import tensorflow as tf\nx = [" + ", ".join(["1"] * 100_000) + "]\n",
        "binop_1000": h + "    y = " + " + ".join(["x"] * 1000) + "\n    print(y)\n",
        "binop_2500": h + "    y = " + " + ".join(["x"] * 2500) + "\n    print(y)\n",
        "binop_100k": h + "    y = " + " + ".join(["x"] * 100_000) + "\n",
        "unary_100k": h + "    y = " + "-" * 100_000 + "x\n",
        "lambdas_2000": h + "    y = " + "lambda: " * 2000 + "x\n    print(y)\n",
        "subscripts_2000": h + "    y = x" + "[0]" * 2000 + "\n    print(y)\n",
        "ifexp_2000": h + "    y = " + "x if x else " * 2000 + "x\n    print(y)\n",
        "attrs_50k": h + "    y = x" + ".a" * 50_000 + "\n",
        "ifs_150": "import tensorflow as tf\n" + "".join(" " * i + "if x:\n" for i in range(150)) + " " * 150 + "pass\n",
        "defs_95": "import tensorflow as tf\n@tf.function\n"
        + "".join("    " * i + f"def g{i}(x):\n" for i in range(95))
        + "    " * 95
        + "print(x)\n",
        "strings_100k": "import tensorflow as tf\nx = " + " ".join(["'a'"] * 100_000) + "\n",
    }


@pytest.mark.parametrize("name", sorted(_nested_cases()))
def test_deeply_nested_code_in_process(name):
    text = _nested_cases()[name]
    try:
        ast.parse(text)
        parses = True
    except (SyntaxError, RecursionError, MemoryError):
        parses = False
    result = lint_text(f"{name}.py", text, ALL)
    assert result.errors == [], result.errors
    codes = [f.code for f in result.findings]
    if not parses:
        assert codes == [PARSE_ERROR_CODE], codes
    else:
        # Valid code is analyzed in full: its traced print is found.
        assert PARSE_ERROR_CODE not in codes, [f.message for f in result.findings]
        if "print(" in text and "@tf.function" in text:
            assert "TFL101" in codes, (name, codes)
    assert sys.getrecursionlimit() < 10_000  # restored


@pytest.mark.slow
def test_deeply_nested_code_through_the_cli(tmp_path):
    cases = _nested_cases()
    for name, text in cases.items():
        (tmp_path / f"{name}.py").write_text(text)
    by_file = codes_by_file(check_json(tmp_path, ".", timeout=900))
    assert by_file["parens_10k.py"] == ["TFL000"]
    assert by_file["binop_2500.py"] == ["TFL101"]
    assert set(by_file) <= {f"{n}.py" for n in cases}


NOTEBOOKS = {
    "broken_json": b'{"cells": [',
    "not_utf8": b'{"cells": [], "x": "\xff"}',
    "top_level_list": b"[1, 2, 3]",
    "no_cells": b'{"metadata": {}, "nbformat": 4}',
    "cells_not_list": b'{"cells": {"a": 1}}',
    "nbformat3": json.dumps({"worksheets": [{"cells": [{"cell_type": "code", "input": "print(1)"}]}], "nbformat": 3}).encode(),
    "cell_not_object": b'{"cells": [1, "x", null]}',
    "code_cell_without_source": json.dumps({"cells": [{"cell_type": "code", "metadata": {}}]}).encode(),
    "source_is_number": json.dumps({"cells": [{"cell_type": "code", "source": 42}]}).encode(),
    "source_list_of_numbers": json.dumps({"cells": [{"cell_type": "code", "source": [1, 2]}]}).encode(),
    "only_markdown_and_raw": json.dumps(
        {"cells": [{"cell_type": "markdown", "source": "# @tf.function\nprint(x)"}, {"cell_type": "raw", "source": "}{"}]}
    ).encode(),
    "r_kernel": json.dumps(
        {"cells": [{"cell_type": "code", "source": "x <- c(1, 2)"}], "metadata": {"kernelspec": {"language": "R"}}}
    ).encode(),
    "magics_and_syntax_error": json.dumps(
        {"cells": [{"cell_type": "code", "source": ["%load_ext foo\n", "!ls\n", "def (:\n"]}]}
    ).encode(),
    "deep_json": b'{"cells": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "valid_with_finding": json.dumps(
        {
            "cells": [
                {"cell_type": "markdown", "source": "intro"},
                {"cell_type": "code", "source": "%matplotlib inline\nimport tensorflow as tf"},
                {"cell_type": "code", "source": ["@tf.function\n", "def f(x):\n", "    print(x)\n", "    return x"]},
            ],
            "metadata": {"language_info": {"name": "python"}},
        }
    ).encode(),
}


def test_hostile_notebooks(tmp_path):
    for name, raw in NOTEBOOKS.items():
        (tmp_path / f"{name}.ipynb").write_bytes(raw)
    found = check_json(tmp_path, ".", timeout=120)
    by_file = codes_by_file(found)
    must_fail = {
        "broken_json",
        "not_utf8",
        "top_level_list",
        "no_cells",
        "cells_not_list",
        "nbformat3",
        "cell_not_object",
        "source_is_number",
        "source_list_of_numbers",
        "magics_and_syntax_error",
        "deep_json",
    }
    for name in must_fail:
        assert by_file.get(f"{name}.ipynb") == ["TFL000"], (name, by_file.get(f"{name}.ipynb"))
    for name in ("code_cell_without_source", "only_markdown_and_raw", "r_kernel"):
        assert f"{name}.ipynb" not in by_file, (name, by_file[f"{name}.ipynb"])
    assert by_file["valid_with_finding.ipynb"] == ["TFL101"]
    hit = next(f for f in found if f["filename"] == "valid_with_finding.ipynb")
    assert hit["cell"] == 2 and hit["location"]["row"] == 3
    # Fixing never touches a notebook it cannot read, and leaves the others valid JSON.
    proc = run_tflint(["check", "--no-cache", "--fix", "--unsafe-fixes", "."], cwd=tmp_path, timeout=120)
    assert_no_crash(proc)
    for name, raw in NOTEBOOKS.items():
        data = (tmp_path / f"{name}.ipynb").read_bytes()
        if name in must_fail or name != "valid_with_finding":
            assert data == raw, name
    doc = json.loads((tmp_path / "valid_with_finding.ipynb").read_bytes())
    assert "tf.print(x)" in "".join(doc["cells"][2]["source"])


def _odd_names() -> list[str]:
    names = ["with space.py", "ünïcödé ✓.py", "日本語.py", "-leading-dash.py", "semi;colon'quote\".py"]
    if sys.platform.startswith("linux"):
        names.append(os.fsdecode(b"not-utf8-\xff\xfe.py"))
    return names


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("io_encoding", ["utf-8", "ascii"])
def test_odd_path_names_in_every_format(tmp_path, fmt, io_encoding):
    d = tmp_path / "dir with spaces" / "ñ"
    d.mkdir(parents=True)
    names = _odd_names()
    for n in names:
        (d / n).write_text(TRACED_PRINT)
    proc = run_tflint(
        ["check", "--no-cache", "--output-format", fmt, "--", "dir with spaces"],
        cwd=tmp_path,
        timeout=120,
        env={"PYTHONIOENCODING": f"{io_encoding}:strict", "LC_ALL": "C.UTF-8"},
    )
    assert_no_crash(proc)
    assert proc.returncode == 1
    if fmt == "json":
        found = json.loads(proc.stdout)
        assert len(found) == len(names) and {f["code"] for f in found} == {"TFL101"}
        if io_encoding == "utf-8":
            shown = {f["filename"].rsplit("/", 1)[-1] for f in found}
            assert {n for n in names if n.isprintable() and "\udcff" not in n} <= shown
    if fmt == "concise":
        assert proc.stdout.count(b"TFL101") == len(names)


def test_odd_names_through_show_files_and_fix(tmp_path):
    for n in _odd_names():
        (tmp_path / n).write_text(TRACED_PRINT)
    proc = run_tflint(["check", "--show-files", "."], cwd=tmp_path, env={"PYTHONIOENCODING": "utf-8:strict"})
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == len(_odd_names())
    proc = run_tflint(["check", "--no-cache", "--fix", "."], cwd=tmp_path, env={"PYTHONIOENCODING": "utf-8:strict"})
    assert_no_crash(proc)
    for n in _odd_names():
        assert "tf.print(x)" in (tmp_path / n).read_text()


def test_binary_and_odd_bytes(tmp_path):
    (tmp_path / "elf.py").write_bytes(b"\x7fELF\x02\x01\x01\0" + os.urandom(2000))
    (tmp_path / "utf16.py").write_bytes("import tensorflow as tf\n".encode("utf-16"))
    (tmp_path / "latin1_no_cookie.py").write_bytes(b"x = '\xe9'\n")
    (tmp_path / "latin1_cookie.py").write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    (tmp_path / "rot13_cookie.py").write_bytes(b"# coding: rot13\nx = 1\n")
    (tmp_path / "crlf.py").write_bytes(TRACED_PRINT.replace("\n", "\r\n").encode())
    (tmp_path / "cr_only.py").write_bytes(TRACED_PRINT.replace("\n", "\r").encode())
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + TRACED_PRINT.encode())
    by_file = codes_by_file(check_json(tmp_path, "."))
    for name in ("elf.py", "utf16.py", "latin1_no_cookie.py", "rot13_cookie.py"):
        assert by_file.get(name) == ["TFL000"], name
    assert "latin1_cookie.py" not in by_file
    for name in ("crlf.py", "cr_only.py", "bom.py"):
        assert by_file.get(name) == ["TFL101"], (name, by_file.get(name))
