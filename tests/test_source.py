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
    assert lines[2] == "pass"  # %matplotlib
    assert lines[4] == "    pass"  # indented shell escape keeps the block valid
    assert lines[6] == "pass" and lines[7] == "pass"  # x = !ls, help?
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
