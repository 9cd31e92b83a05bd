"""The SARIF output: schema-valid 2.1.0, what GitHub code scanning needs, stable fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tflint.finding import Edit, Finding, Fix, Severity
from tflint.check.render import RenderContext, get_renderer
from tflint.rules import all_rules

SCHEMA = Path(__file__).resolve().parents[1].parent / "shared/data/sarif-schema-2.1.0.json"

SOURCE = """\
import tensorflow as tf


@tf.function
def step(x):
    print("loss", x)
    y = x * 2
    print("loss", x)
    return y
"""


def _f(line, col=4, end_col=20, code="TFL101", path="src/train.py", **kw) -> Finding:
    return Finding(
        code=code,
        message=kw.pop("message", "`print()` in traced code runs only while tracing"),
        path=path,
        line=line,
        col=col,
        end_line=kw.pop("end_line", line),
        end_col=end_col,
        **kw,
    )


def _render(root: Path, findings) -> dict:
    return json.loads(get_renderer("sarif").render(findings, RenderContext(root=str(root))))


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SOURCE)
    return tmp_path


def _findings():
    return [
        _f(6, fix=Fix("Replace `print` with `tf.print`", (Edit(6, 4, 6, 9, "tf.print"),))),
        _f(8),
        _f(7, col=4, end_col=4, code="TFL998", severity=Severity.WARNING, message="zero width"),
        _f(2, col=0, end_col=3, code="TFL101", path="nb dir/note book.ipynb", cell=2),
        _f(3, col=0, end_line=5, end_col=1, code="TFL997", message="spans\nlines"),
    ]


@pytest.fixture(scope="module")
def validator():
    if not SCHEMA.is_file():
        pytest.skip(
            f"SARIF schema not available at {SCHEMA} (shared test data is not in this clone)"
        )
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def _errors(validator, log) -> list[str]:
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(log)]


def test_sarif_validates_against_the_official_schema(project, validator):
    assert _errors(validator, _render(project, _findings())) == []
    assert _errors(validator, _render(project, [])) == []


def test_schema_check_would_catch_a_broken_log(project, validator):
    log = _render(project, _findings())
    log["runs"][0]["results"][0]["level"] = "fatal"
    del log["runs"][0]["tool"]["driver"]["name"]
    assert len(_errors(validator, log)) >= 2


def test_driver_lists_every_rule_with_help(project):
    log = _render(project, _findings())
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "tflint" and driver["version"] and driver["informationUri"]
    ids = [r["id"] for r in driver["rules"]]
    registered = [r.code for r in all_rules()]
    assert ids[: len(registered)] == registered
    # codes that are not registered rules still get a descriptor
    assert set(ids[len(registered) :]) == {"TFL997", "TFL998"} - set(registered)
    for rule in all_rules():
        d = driver["rules"][ids.index(rule.code)]
        assert d["name"] == rule.name
        assert d["shortDescription"]["text"] == rule.summary
        assert d["fullDescription"]["text"]
        assert "## What it does" in d["help"]["markdown"]
        assert "## Why is this bad?" in d["help"]["text"]
        assert d["helpUri"] == rule.url()
        assert d["defaultConfiguration"]["level"] == str(rule.severity.value)


def test_results_point_at_rules_and_relative_uris(project):
    log = _render(project, _findings())
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.resolve().as_uri() + "/"
    results = run["results"]
    assert len(results) == 5
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        loc = r["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert not loc["artifactLocation"]["uri"].startswith("/")
        assert loc["region"]["startLine"] >= 1
        assert r["message"]["text"]
    by_line = {
        (r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]): r
        for r in results
    }
    first = by_line[("TFL101", 6)]
    assert first["level"] == "error"
    assert first["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 6,
        "startColumn": 5,
        "endLine": 6,
        "endColumn": 21,
    }
    assert first["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/train.py"
    zero = by_line[("TFL998", 7)]
    assert zero["level"] == "warning"
    region = zero["locations"][0]["physicalLocation"]["region"]
    assert region["endColumn"] > region["startColumn"]
    nb = next(r for r in results if r.get("properties", {}).get("cell") == 2)
    assert nb["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        "nb%20dir/note%20book.ipynb"
    )
    assert nb["message"]["text"].startswith("cell 2, line 2: ")


def test_fixes_are_exact_replacements(project, validator):
    fix = Fix(
        "Replace `print` with `tf.print`",
        (Edit(6, 4, 6, 9, "tf.print"), Edit(1, 0, 1, 0, "import os\n")),
        applicability="unsafe",
    )
    log = _render(project, [_f(6, fix=fix), _f(8)])
    assert _errors(validator, log) == []
    with_fix, without = log["runs"][0]["results"]
    assert "fixes" not in without
    (sfix,) = with_fix["fixes"]
    assert sfix["description"]["text"] == "Replace `print` with `tf.print`"
    assert sfix["properties"]["applicability"] == "unsafe"
    (change,) = sfix["artifactChanges"]
    assert change["artifactLocation"] == {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"}
    assert change["replacements"] == [
        {
            "deletedRegion": {"startLine": 6, "startColumn": 5, "endLine": 6, "endColumn": 10},
            "insertedContent": {"text": "tf.print"},
        },
        {
            "deletedRegion": {"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1},
            "insertedContent": {"text": "import os\n"},
        },
    ]


def test_paths_outside_the_root_get_absolute_file_uris(tmp_path, validator):
    root = tmp_path / "repo"
    root.mkdir()
    outside = tmp_path / "elsewhere.py"
    outside.write_text("print(1)\n")
    log = _render(root, [_f(1, col=0, end_col=8, path=str(outside))])
    loc = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": outside.resolve().as_uri()}
    assert _errors(validator, log) == []


def _fingerprints(log) -> dict[tuple[str, int], str]:
    return {
        (r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]): (
            r["partialFingerprints"]["primaryLocationLineHash"]
        )
        for r in log["runs"][0]["results"]
    }


def test_fingerprints_survive_code_moving_and_tell_duplicates_apart(project):
    before = _fingerprints(_render(project, [_f(6), _f(8)]))
    # identical offending lines in one file: distinct fingerprints (occurrence index)
    assert len(set(before.values())) == 2
    assert before[("TFL101", 6)].endswith(":1") and before[("TFL101", 8)].endswith(":2")

    # move everything down three lines and re-indent: same fingerprints
    moved = "# a\n# b\n# c\n" + SOURCE.replace("    print", "        print")
    (project / "src" / "train.py").write_text(moved)
    after = _fingerprints(_render(project, [_f(9, col=8, end_col=24), _f(11, col=8, end_col=24)]))
    assert after[("TFL101", 9)] == before[("TFL101", 6)]
    assert after[("TFL101", 11)] == before[("TFL101", 8)]

    # a different offending line, rule or file changes the fingerprint
    (project / "src" / "train.py").write_text(
        moved.replace('print("loss", x)', 'print("acc", x)', 1)
    )
    changed = _fingerprints(_render(project, [_f(9, col=8, end_col=24)]))
    assert changed[("TFL101", 9)] != before[("TFL101", 6)]
    other_rule = _fingerprints(_render(project, [_f(9, col=8, end_col=24, code="TFL102")]))
    assert other_rule[("TFL102", 9)].split(":")[0] != after[("TFL101", 9)].split(":")[0]


def test_sarif_is_deterministic(project):
    a = get_renderer("sarif").render(_findings(), RenderContext(root=str(project)))
    b = get_renderer("sarif").render(list(reversed(_findings())), RenderContext(root=str(project)))
    assert a == b


def test_check_command_emits_valid_sarif_with_repo_relative_uris(tmp_path, validator):
    import subprocess
    import sys

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(SOURCE)
    exe = Path(sys.executable).with_name("tflint")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tflint"]
    out = subprocess.run(
        [*cmd, "check", "--no-cache", "--output-format", "sarif", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    log = json.loads(out.stdout)
    assert _errors(validator, log) == []
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"TFL101"}
    locs = [r["locations"][0]["physicalLocation"] for r in results]
    assert [loc["artifactLocation"]["uri"] for loc in locs] == ["pkg/train.py", "pkg/train.py"]
    assert [loc["region"]["startLine"] for loc in locs] == [6, 8]
    fps = [r["partialFingerprints"]["primaryLocationLineHash"] for r in results]
    assert fps[0].endswith(":1") and fps[1].endswith(":2")


_pos = st.integers(min_value=0, max_value=9)
_odd_findings = st.lists(
    st.builds(
        Finding,
        code=st.sampled_from(["TFL101", "TFL999"]),
        message=st.text(min_size=1, max_size=20),
        path=st.sampled_from(["a.py", "d/é f.py", "n.ipynb", "-"]),
        line=_pos,
        col=_pos,
        end_line=_pos,
        end_col=_pos,
        severity=st.sampled_from([Severity.ERROR, Severity.WARNING]),
        fix=st.sampled_from([None, Fix("f", (Edit(1, 0, 1, 2, "x"),))]),
        cell=st.sampled_from([None, 3]),
    ),
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(findings=_odd_findings, lines=st.lists(st.text(max_size=8), max_size=5))
def test_sarif_stays_schema_valid_for_odd_findings(tmp_path_factory, validator, findings, lines):
    ctx = RenderContext(root=str(tmp_path_factory.getbasetemp()), source_lines=lambda p: lines)
    log = json.loads(get_renderer("sarif").render(findings, ctx))
    assert _errors(validator, log) == []
    assert len(log["runs"][0]["results"]) == len(findings)
