"""The output formats of `tflint check`: full, concise, json, github, and --statistics."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tflint.finding import Edit, Finding, Fix, Severity
from tflint.check.render import FORMATS, RenderContext, get_renderer, statistics
from tflint.rules import get_rule

ANSI = re.compile(r"\x1b\[[0-9;]*m")

SOURCE = """\
import tensorflow as tf


@tf.function
def step(x):
    y = x * 2
    print("loss", y)
    return tf.reduce_sum(
        y,
        axis=0,
    )
"""


def _finding(code="TFL101", line=7, col=4, end_line=7, end_col=20, **kw) -> Finding:
    kw.setdefault("message", "`print()` in traced code runs only while tracing")
    return Finding(
        code=code,
        path=kw.pop("path", "pkg/train.py"),
        line=line,
        col=col,
        end_line=end_line,
        end_col=end_col,
        **kw,
    )


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(SOURCE)
    return tmp_path


def _ctx(root: Path, **kw) -> RenderContext:
    return RenderContext(root=str(root), **kw)


PRINT_FIX = Fix("Replace `print` with `tf.print`", (Edit(7, 4, 7, 9, "tf.print"),))


# --- get_renderer ------------------------------------------------------------------------


def test_every_format_resolves_and_unknown_is_a_value_error():
    for name in FORMATS:
        assert hasattr(get_renderer(name), "render")
    assert set(FORMATS) == {"full", "concise", "json", "sarif", "github"}
    with pytest.raises(ValueError, match="unknown output format 'yaml'.*full, concise"):
        get_renderer("yaml")


def test_empty_findings(project):
    ctx = _ctx(project)
    assert get_renderer("full").render([], ctx) == ""
    assert get_renderer("concise").render([], ctx) == ""
    assert get_renderer("github").render([], ctx) == ""
    assert json.loads(get_renderer("json").render([], ctx)) == []
    assert statistics([]) == ""


# --- concise -----------------------------------------------------------------------------


def test_concise_lines_are_path_line_col_code_message(project):
    findings = [
        _finding(line=9, col=8, end_line=9, end_col=9, code="TFL999", message="second"),
        _finding(severity=Severity.ERROR, fix=PRINT_FIX),
        _finding(path="nb.ipynb", cell=3, line=2, col=0, end_line=2, end_col=5, message="nb"),
        _finding(path=str(project / "abs.py"), line=1, col=0, end_line=1, end_col=1, message="a"),
    ]
    out = get_renderer("concise").render(findings, _ctx(project, summary=False)).splitlines()
    assert out == [
        "abs.py:1:1: TFL101 a",
        "nb.ipynb:cell 3:2:1: TFL101 nb",
        "pkg/train.py:7:5: TFL101 `print()` in traced code runs only while tracing",
        "pkg/train.py:9:9: TFL999 second",
    ]


def test_concise_summary_counts_and_fix_hint(project):
    findings = [
        _finding(fix=PRINT_FIX),
        _finding(line=8, code="TFL402", severity=Severity.WARNING),
        _finding(line=9, fix=Fix("unsafe one", (), applicability="unsafe")),
    ]
    out = get_renderer("concise").render(findings, _ctx(project)).splitlines()
    assert out[3] == "Found 3 issues (2 errors, 1 warning)."
    assert out[4].startswith("[*] 1 fixable with the `--fix` option")
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option" in out[4]
    hinted = get_renderer("concise").render(findings, _ctx(project, fixable_hint=False))
    assert "--fix" not in hinted and len(hinted.splitlines()) == 4


def test_summary_with_only_unsafe_fixes_and_with_unsafe_fixes_enabled(project):
    unsafe = Fix("Replace `print` with `tf.print`", PRINT_FIX.edits, applicability="unsafe")
    findings = [_finding(fix=unsafe), _finding(line=8, fix=unsafe)]
    out = get_renderer("full").render(findings, _ctx(project))
    assert out.splitlines()[0].startswith("pkg/train.py:7:5: TFL101 `print()`")  # no [*]
    assert out.splitlines()[-1] == (
        "No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option)."
    )
    enabled = get_renderer("full").render(findings, _ctx(project, unsafe_fixes=True))
    assert enabled.splitlines()[0].startswith("pkg/train.py:7:5: TFL101 [*] `print()`")
    assert enabled.splitlines()[-1] == "[*] 2 fixable with the `--fix` option."


def test_concise_outside_root_keeps_the_given_path(tmp_path):
    root = tmp_path / "a"
    root.mkdir()
    f = _finding(path=str(tmp_path / "b" / "x.py"))
    line = get_renderer("concise").render([f], _ctx(root, summary=False))
    assert line.startswith(str(tmp_path / "b" / "x.py") + ":7:5: ")


# --- full --------------------------------------------------------------------------------


def _caret_line(block: list[str]) -> tuple[int, int]:
    """(start, length) of the carets in the first underline of a rendered block."""
    for ln in block:
        m = re.search(r"\|\s(\s*)(\^+)", ln)
        if m:
            return m.start(2), len(m.group(2))
    raise AssertionError("no caret line in\n" + "\n".join(block))


def test_full_shows_source_line_and_caret_under_the_span(project):
    out = get_renderer("full").render([_finding(fix=PRINT_FIX)], _ctx(project))
    lines = out.splitlines()
    assert lines[0] == (
        "pkg/train.py:7:5: TFL101 [*] `print()` in traced code runs only while tracing"
    )
    src = next(ln for ln in lines if ln.endswith('print("loss", y)'))
    assert src.lstrip().startswith("7 |")
    start, length = _caret_line(lines)
    assert start == src.index("print")
    assert length == len('print("loss", y)')
    # context around the offending line, and the fix message as help
    assert any(ln.endswith("y = x * 2") for ln in lines)
    assert any(re.search(r"= help: Replace `print` with `tf.print`$", ln) for ln in lines)
    assert "\x1b[" not in out
    assert lines[-2:] == [
        "Found 1 issue (1 error).",
        "[*] 1 fixable with the `--fix` option.",
    ]


def test_full_colour_only_when_asked(project):
    plain = get_renderer("full").render([_finding(fix=PRINT_FIX)], _ctx(project))
    coloured = get_renderer("full").render([_finding(fix=PRINT_FIX)], _ctx(project, color=True))
    assert "\x1b[" in coloured
    assert ANSI.sub("", coloured) == plain


def test_full_without_fix_hint_or_summary(project):
    out = get_renderer("full").render(
        [_finding(fix=PRINT_FIX)], _ctx(project, fixable_hint=False, summary=False)
    )
    assert "[*]" not in out and "Found" not in out
    assert out.splitlines()[0] == (
        "pkg/train.py:7:5: TFL101 `print()` in traced code runs only while tracing"
    )


def test_full_multiline_span_underlines_first_and_last_line(project):
    f = _finding(code="TFL402", line=8, col=11, end_line=11, end_col=5, severity=Severity.WARNING)
    lines = get_renderer("full").render([f], _ctx(project, summary=False)).splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.endswith("return tf.reduce_sum("))
    last = next(i for i, ln in enumerate(lines) if re.search(r"11 \|     \)$", ln))
    assert lines[first + 1].index("^") == lines[first].index("tf.reduce_sum")
    assert lines[last + 1].rstrip().endswith("^ TFL402")
    assert lines[last + 1].index("^") == lines[last].index(")")


def test_full_long_span_is_elided(tmp_path):
    body = "x = [\n" + "".join(f"    {i},\n" for i in range(30)) + "]\n"
    (tmp_path / "long.py").write_text(body)
    f = _finding(path="long.py", line=1, col=4, end_line=32, end_col=1)
    out = get_renderer("full").render([f], _ctx(tmp_path, summary=False))
    assert "..." in out
    assert "    15," not in out
    assert out.count("\n") < 15


def test_full_aligns_carets_after_tabs_and_wide_characters(tmp_path):
    (tmp_path / "w.py").write_text('def f():\n\tv = "日本語"; print(v)\n')
    col = '\tv = "日本語"; '.__len__()
    f = _finding(path="w.py", line=2, col=col, end_line=2, end_col=col + len("print(v)"))
    lines = get_renderer("full").render([f], _ctx(tmp_path, summary=False)).splitlines()
    src = next(ln for ln in lines if "print(v)" in ln)
    start, length = _caret_line(lines)
    assert "\t" not in src
    # display position: each wide character takes two cells
    prefix = src[: src.index("print")]
    wide = sum(1 for ch in prefix if ch in "日本語")
    assert start == len(prefix) + wide
    assert length == len("print(v)")


def test_full_uses_the_engine_source_callback_and_notebook_cells(tmp_path):
    asked = []

    def source_lines(path):
        asked.append(path)
        return ["a = 1", "print(a)"]

    ctx = _ctx(
        tmp_path,
        source_lines=source_lines,
        cell_lines=lambda path, cell: ["import tensorflow as tf", f"cell_{cell} = 1"],
        summary=False,
    )
    findings = [
        _finding(path="virtual.py", line=2, col=0, end_line=2, end_col=8),
        _finding(path="nb.ipynb", cell=4, line=2, col=0, end_line=2, end_col=6),
    ]
    out = get_renderer("full").render(findings, ctx)
    assert asked == ["virtual.py"]
    assert "2 | print(a)" in out
    assert "nb.ipynb:cell 4:2:1: TFL101" in out and "2 | cell_4 = 1" in out


def test_full_without_source_still_renders(tmp_path):
    f = _finding(path="missing.py", fix=PRINT_FIX)
    out = get_renderer("full").render([f], _ctx(tmp_path, summary=False))
    assert out.splitlines() == [
        "missing.py:7:5: TFL101 [*] `print()` in traced code runs only while tracing",
        "  = help: Replace `print` with `tf.print`",
    ]


def test_full_renders_a_real_rule_finding(tmp_path):
    from tests.rule_harness import run_rules

    rule = get_rule("TFL101")
    assert rule is not None
    findings = run_rules(SOURCE, [rule], path="train.py")
    assert [f.code for f in findings] == ["TFL101"]
    (tmp_path / "train.py").write_text(SOURCE)
    lines = get_renderer("full").render(findings, _ctx(tmp_path)).splitlines()
    assert lines[0].startswith("train.py:7:5: TFL101 [*] ")
    src = next(ln for ln in lines if ln.endswith('print("loss", y)'))
    assert _caret_line(lines) == (src.index("print"), len('print("loss", y)'))


def test_output_is_sorted_whatever_the_input_order(project):
    fs = [_finding(line=9, col=1), _finding(line=7, col=9), _finding(line=7, col=2)]
    for name in ("concise", "json", "github", "full"):
        a = get_renderer(name).render(fs, _ctx(project))
        b = get_renderer(name).render(list(reversed(fs)), _ctx(project))
        assert a == b, name
    rows = get_renderer("concise").render(fs, _ctx(project, summary=False)).splitlines()
    assert [r.split(":")[1:3] for r in rows] == [["7", "3"], ["7", "10"], ["9", "2"]]


# --- json --------------------------------------------------------------------------------


def test_json_is_shaped_like_ruffs(project):
    findings = [
        _finding(fix=PRINT_FIX),
        _finding(
            code="TFL999",
            line=8,
            col=11,
            end_line=11,
            end_col=5,
            severity=Severity.WARNING,
            message="made up",
            url="https://example.invalid/x",
        ),
        _finding(path="nb.ipynb", cell=2, line=1, col=0, end_line=1, end_col=3, message="nb"),
    ]
    data = json.loads(get_renderer("json").render(findings, _ctx(project)))
    assert [d["filename"] for d in data] == [
        str(project / "nb.ipynb"),
        str(project / "pkg" / "train.py"),
        str(project / "pkg" / "train.py"),
    ]
    nb, first, second = data
    assert set(first) == {
        "code",
        "message",
        "filename",
        "location",
        "end_location",
        "fix",
        "url",
        "noqa_row",
        "cell",
        "severity",
    }
    assert first["code"] == "TFL101"
    assert first["location"] == {"row": 7, "column": 5}
    assert first["end_location"] == {"row": 7, "column": 21}
    assert first["noqa_row"] == 7 and first["cell"] is None and first["severity"] == "error"
    assert first["fix"] == {
        "applicability": "safe",
        "message": "Replace `print` with `tf.print`",
        "edits": [
            {
                "content": "tf.print",
                "location": {"row": 7, "column": 5},
                "end_location": {"row": 7, "column": 10},
            }
        ],
    }
    assert first["url"] == get_rule("TFL101").url()
    assert second["severity"] == "warning" and second["fix"] is None
    assert second["url"] == "https://example.invalid/x"
    assert second["end_location"] == {"row": 11, "column": 6}
    assert nb["cell"] == 2


def test_json_unknown_code_has_null_url(project):
    data = json.loads(get_renderer("json").render([_finding(code="TFL998")], _ctx(project)))
    assert data[0]["url"] is None


# --- github ------------------------------------------------------------------------------


def test_github_annotations(project):
    findings = [
        _finding(fix=PRINT_FIX),
        _finding(
            code="TFL998",
            line=8,
            col=11,
            end_line=11,
            end_col=5,
            severity="warning",
            message="spans lines",
        ),
        _finding(line=9, col=0, end_line=9, end_col=0, message="empty span"),
    ]
    out = get_renderer("github").render(findings, _ctx(project)).splitlines()
    assert out[0] == (
        "::error file=pkg/train.py,line=7,col=5,endLine=7,endColumn=20,"
        "title=TFL101 print-in-traced-code::`print()` in traced code runs only while tracing"
    )
    # multi-line spans carry no columns (GitHub accepts them on one line only)
    assert out[1] == "::warning file=pkg/train.py,line=8,endLine=11,title=TFL998::spans lines"
    assert "line=9,col=1,endLine=9,endColumn=1," in out[2]


def test_github_escapes_workflow_command_syntax(project):
    f = _finding(
        path="dir,with:odd%name/t.py",
        message="100% wrong\nsecond line, with: colon\r",
    )
    out = get_renderer("github").render([f], _ctx(project))
    assert "\n" not in out and "\r" not in out
    props, message = out[len("::error ") :].split("::", 1)
    assert message == "100%25 wrong%0Asecond line, with: colon%0D"
    assert props.startswith("file=dir%2Cwith%3Aodd%25name/t.py,line=7,")
    assert props.count(",") == 5  # only the separators between the six properties


def test_github_notebook_names_the_cell(project):
    f = _finding(path="nb.ipynb", cell=3, line=2, col=0, end_line=2, end_col=5, message="m")
    out = get_renderer("github").render([f], _ctx(project))
    assert (
        out
        == "::error file=nb.ipynb,title=TFL101 print-in-traced-code::cell 3, line 2, column 1: m"
    )


# --- statistics --------------------------------------------------------------------------


def test_statistics_counts_per_rule_sorted_by_count_then_code():
    fs = [
        _finding(code="TFL999"),
        _finding(code="TFL101", fix=PRINT_FIX),
        _finding(code="TFL998"),
        _finding(code="TFL101"),
        _finding(code="TFL998"),
        _finding(code="TFL101"),
    ]
    rows = statistics(fs).splitlines()
    assert [r.split()[:2] for r in rows] == [["3", "TFL101"], ["2", "TFL998"], ["1", "TFL999"]]
    assert rows[0].endswith("[*] print-in-traced-code")
    assert "[*]" not in rows[1]
    data = json.loads(statistics(fs, output_format="json"))
    assert data[0] == {"code": "TFL101", "name": "print-in-traced-code", "count": 3, "fixable": 1}
    assert [d["code"] for d in data] == ["TFL101", "TFL998", "TFL999"]


# --- start-up cost -----------------------------------------------------------------------


def test_renderers_import_nothing_heavy():
    """Rendering (even with colour) must not pull in rich; unused formats stay unimported."""
    code = (
        "import sys\n"
        "from tflint.check.render import get_renderer, RenderContext\n"
        "import tflint.check.render\n"
        "assert 'tflint.check.render.sarif' not in sys.modules\n"
        "from tflint.finding import Finding\n"
        "f = Finding('TFL101', 'm', 'x.py', 1, 0, 1, 1)\n"
        "for n in ('full', 'concise', 'json', 'github'):\n"
        "    get_renderer(n).render([f], RenderContext(root='.', color=True))\n"
        "heavy = [m for m in ('rich', 'libcst', 'numpy', 'tensorflow') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- robustness --------------------------------------------------------------------------


_positions = st.integers(min_value=0, max_value=12)


@st.composite
def _findings(draw):
    out = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        line = draw(_positions)
        out.append(
            Finding(
                code=draw(st.sampled_from(["TFL101", "TFL000", "TFL999"])),
                message=draw(st.text(max_size=30)),
                path=draw(st.sampled_from(["a.py", "sub/b c.py", "nb.ipynb"])),
                line=line,
                col=draw(_positions),
                end_line=line + draw(st.integers(min_value=-1, max_value=8)),
                end_col=draw(_positions),
                severity=draw(st.sampled_from([Severity.ERROR, Severity.WARNING])),
                fix=draw(st.sampled_from([None, PRINT_FIX])),
                cell=draw(st.sampled_from([None, 1, 2])),
            )
        )
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    findings=_findings(),
    source=st.lists(st.text(alphabet="ab\t 日\u0301()", max_size=12), max_size=10),
)
def test_no_renderer_crashes_on_odd_positions_or_text(tmp_path_factory, findings, source):
    root = tmp_path_factory.getbasetemp()
    ctx = RenderContext(
        root=str(root),
        source_lines=lambda path: source,
        cell_lines=lambda path, cell: source,
        color=True,
    )
    for name in FORMATS:
        text = get_renderer(name).render(findings, ctx)
        assert isinstance(text, str)
    concise = get_renderer("concise").render(findings, RenderContext(root=str(root), summary=False))
    assert len(concise.split("\n")) == len(findings)
    github = get_renderer("github").render(findings, ctx).split("\n")
    assert len(github) == len(findings)
    assert all(ln.startswith(("::error ", "::warning ")) for ln in github)
    assert not re.search(r"line=0\b", "\n".join(github))
    assert len(json.loads(get_renderer("json").render(findings, ctx))) == len(findings)
