"""Suppression comments: per line, per code, per file; only real comments count."""

from __future__ import annotations

from tflint.check.engine import lint_text
from tflint.rules import resolve
from tflint.check.suppress import scan

ALL = resolve()

HEAD = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n"


def codes_at(text: str) -> list[tuple[int, str]]:
    return sorted((f.line, f.code) for f in lint_text("m.py", text, ALL).findings)


def test_unsuppressed_baseline():
    assert codes_at(HEAD + "    print(x)\n    return x\n") == [(5, "TFL101")]


def test_bare_noqa():
    assert codes_at(HEAD + "    print(x)  # noqa\n    return x\n") == []


def test_noqa_with_codes():
    assert codes_at(HEAD + "    print(x)  # noqa: TFL101\n") == []
    assert codes_at(HEAD + "    print(x)  # noqa:TFL102,TFL101\n") == []
    assert codes_at(HEAD + "    print(x)  # NOQA: E501, TFL101\n") == []
    # Another tool's code only: not suppressed.
    assert codes_at(HEAD + "    print(x)  # noqa: E501\n") == [(5, "TFL101")]
    assert codes_at(HEAD + "    print(x)  # noqa: TFL102\n") == [(5, "TFL101")]


def test_tflint_disable_on_line():
    assert codes_at(HEAD + "    print(x)  # tflint: disable=TFL101\n") == []
    assert codes_at(HEAD + "    print(x)  # tflint: disable=TFL102\n") == [(5, "TFL101")]
    assert codes_at(HEAD + "    print(x)  # some text  # tflint: disable\n") == []


def test_comment_on_another_line_does_not_suppress():
    assert codes_at(HEAD + "    # noqa: TFL101\n    print(x)\n") == [(6, "TFL101")]


def test_disable_file():
    text = "# tflint: disable-file\n" + HEAD + "    print(x)\n"
    assert codes_at(text) == []
    text = HEAD + "    print(x)\n# tflint: disable-file=TFL101\n"
    assert codes_at(text) == []
    text = HEAD + "    print(x)\n# tflint: disable-file=TFL102\n"
    assert codes_at(text) == [(5, "TFL101")]


def test_text_in_strings_is_not_a_comment():
    text = HEAD + '    print("# noqa")\n    s = """\n# tflint: disable-file\n"""\n'
    assert codes_at(text) == [(5, "TFL101")]


def test_multiline_finding_suppressed_on_last_line():
    text = HEAD + "    print(\n        x,\n    )  # noqa: TFL101\n"
    assert codes_at(text) == []


def test_scan_details():
    sup = scan("a = 1  # noqa: TFL101 TFL102\nb = 2  # tflint: disable=TFL3\n# tflint: disable-file=TFL9\n")
    assert sup.lines[1] == frozenset({"TFL101", "TFL102"})
    assert sup.lines[2] == frozenset({"TFL3"})
    assert sup.file_codes == frozenset({"TFL9"}) and not sup.file_all
    assert not scan("x = 'noqa'\n")
    # CR-only line endings count lines as the parser does.
    sup = scan("a = 1\rb = 2  # noqa\r")
    assert sup.lines == {2: None}
