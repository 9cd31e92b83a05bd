"""`tflint rule CODE`, `tflint rules` and the generated rule reference."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tflint.cli import app
from tflint.finding import Severity
from tflint.check.render import ruledoc
from tflint.rules import all_rules
from tflint.rules.base import Rule

SECTION_TITLES = ["What it does", "Why is this bad?", "Example", "Use instead", "Fix safety"]


class TinyRule(Rule):
    """A rule defined here so the documentation code is tested independently of the catalog."""

    code = "TFL990"
    name = "tiny-example-rule"
    severity = Severity.WARNING
    summary = "A tiny | rule for tests"
    what = """
        Checks for tiny things.

        Second paragraph.
    """
    why = "Because they are tiny."
    example = """
        x = tiny()
        y = "```"
    """
    use_instead = "```python\nx = big()\n```"
    fix_safety = "Always safe."
    fixable = True


class InlineCodeRule(Rule):
    code = "TFL992"
    name = "inline-code"
    summary = "Code given on one string"
    what = "Prose."
    why = "Reasons."
    example = "def f():\n    print(1)\n"
    use_instead = "def f():\n    tf.print(1)"


class UndocumentedRule(Rule):
    code = "TFL991"
    name = "undocumented"
    summary = "No docs"
    what = ""
    why = ""
    example = ""
    use_instead = ""


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


# --- ruledoc, on rules defined here --------------------------------------------------------


def test_rule_text_has_title_and_sections_in_order():
    text = ruledoc.rule_text(TinyRule)
    lines = text.splitlines()
    assert lines[0] == "TFL990 tiny-example-rule (warning)"
    positions = [text.index(f"## {t}\n") for t in SECTION_TITLES]
    assert positions == sorted(positions)
    # docstring-style indentation is removed, paragraphs kept
    assert "\nChecks for tiny things.\n\nSecond paragraph.\n" in text
    # code is fenced; a fence inside the code gets a longer fence; an existing fence is kept
    assert '````python\nx = tiny()\ny = "```"\n````' in text
    assert "```python\nx = big()\n```" in text and "```python\n```python" not in text
    assert "Fix is available" in text


def test_code_keeps_its_own_indentation():
    text = ruledoc.rule_text(InlineCodeRule)
    assert "```python\ndef f():\n    print(1)\n```" in text
    assert "```python\ndef f():\n    tf.print(1)\n```" in text
    assert ruledoc.rule_dict(InlineCodeRule)["example"] == "def f():\n    print(1)"


def test_undocumented_sections_are_marked_not_dropped_silently():
    text = ruledoc.rule_text(UndocumentedRule)
    assert text.splitlines()[0] == "TFL991 undocumented (error)"
    assert "## What it does\n\n(not documented)" in text
    assert "## Example" not in text  # no empty code block
    assert "No automatic fix." in text


def test_markdown_reference_anchors_match_rule_urls():
    md = ruledoc.markdown_reference([UndocumentedRule, TinyRule])
    assert md.endswith("\n") and not md.endswith("\n\n")
    # table of contents first, sorted by code, linking to the anchors the rule URLs use
    toc = [ln for ln in md.splitlines() if ln.startswith("| [TFL")]
    assert [re.match(r"\| \[(TFL\d+)\]", ln).group(1) for ln in toc] == ["TFL990", "TFL991"]
    for rule in (TinyRule, UndocumentedRule):
        anchor = rule.url().rsplit("#", 1)[1]
        assert f"(#{anchor})" in md
        assert f'<a id="{anchor}"></a>' in md
        assert f"### {rule.code} {rule.name}\n" in md
    # a pipe in a summary does not break the table
    assert "A tiny \\| rule for tests" in md
    assert "## TFL9xx:" in md
    assert ruledoc.markdown_reference([TinyRule, UndocumentedRule]) == md  # deterministic


def test_rules_table_and_json_on_local_rules():
    table = ruledoc.rules_table([TinyRule, UndocumentedRule]).splitlines()
    assert table[0].split() == ["CODE", "NAME", "SEVERITY", "FIX", "SUMMARY"]
    assert table[1].split()[:4] == ["TFL990", "tiny-example-rule", "warning", "yes"]
    assert table[2].split()[:4] == ["TFL991", "undocumented", "error", "no"]
    # columns line up
    assert table[1].index("warning") == table[0].index("SEVERITY")
    data = json.loads(ruledoc.rules_json([TinyRule]))
    assert data[0]["code"] == "TFL990" and data[0]["fixable"] is True
    assert data[0]["what"] == "Checks for tiny things.\n\nSecond paragraph."
    assert data[0]["url"] == TinyRule.url()


# --- the commands, on the registered rules --------------------------------------------------


def test_rules_lists_every_registered_rule():
    rules = all_rules()
    assert rules, "no rules registered"
    res = _invoke("rules")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["CODE", "NAME", "SEVERITY", "FIX", "SUMMARY"]
    assert [ln.split()[0] for ln in lines[1:]] == [r.code for r in rules]
    for rule, line in zip(rules, lines[1:]):
        cells = line.split()
        assert cells[1] == rule.name and cells[2] == str(rule.severity.value)
        assert cells[3] == ("yes" if rule.fixable else "no")


def test_rules_json():
    res = _invoke("rules", "--output-format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [d["code"] for d in data] == [r.code for r in all_rules()]
    for d, rule in zip(data, all_rules()):
        assert d["name"] == rule.name and d["severity"] == str(rule.severity.value)
        assert d["fixable"] is bool(rule.fixable) and d["summary"]
        assert set(d) >= {"what", "why", "example", "use_instead", "fix_safety", "url"}


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_prints_each_rules_documentation(rule):
    res = _invoke("rule", rule.code.lower())
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert out.splitlines()[0] == f"{rule.code} {rule.name} ({rule.severity.value})"
    positions = [out.find(f"## {t}\n") for t in SECTION_TITLES]
    assert -1 not in positions and positions == sorted(positions), positions
    assert "(not documented)" not in out, f"{rule.code} lacks documentation"
    assert "```python\n" in out
    for code in (rule.example, rule.use_instead):
        assert textwrap.dedent(code).strip("\n") in out
    js = json.loads(_invoke("rule", rule.code, "--output-format", "json").stdout)
    assert js["code"] == rule.code and js["why"] == ruledoc.clean(rule.why)


def test_rule_all():
    res = _invoke("rule", "--all")
    assert res.exit_code == 0
    titles = [
        ln for ln in res.stdout.splitlines() if re.match(r"^TFL\d+ \S+ \((error|warning)\)$", ln)
    ]
    assert len(titles) == len(all_rules())


@pytest.mark.parametrize(
    "args, message",
    [
        (["rule", "TFL999"], "unknown rule code 'TFL999'"),
        (["rule", "print"], "unknown rule code 'print'"),
        (["rule"], "missing rule CODE"),
        (["rule", "TFL101", "--all"], "either a rule CODE or --all"),
        (["rule", "TFL101", "--output-format", "markdown"], "unknown output format 'markdown'"),
        (["rules", "--output-format", "xml"], "unknown output format 'xml'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args, message):
    res = _invoke(*args)
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_markdown_output_is_the_generated_reference():
    res = _invoke("rules", "--output-format", "markdown")
    assert res.exit_code == 0
    assert res.stdout == ruledoc.markdown_reference(all_rules())


def test_console_script_prints_a_rule_without_traceback():
    exe = Path(sys.executable).with_name("tflint")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tflint"]
    ok = subprocess.run([*cmd, "rule", "TFL101"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("TFL101 print-in-traced-code (error)\n")
    bad = subprocess.run([*cmd, "rule", "TFL000X"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1
