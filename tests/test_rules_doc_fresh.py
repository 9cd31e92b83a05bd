"""The checked-in rule reference (docs/rules.md) must match what the rules generate."""

from __future__ import annotations

import difflib
from pathlib import Path

from tflint.check.render.ruledoc import REGENERATE_COMMAND, markdown_reference
from tflint.rules import all_rules

DOC = Path(__file__).resolve().parents[1] / "docs" / "rules.md"


def test_docs_rules_md_is_up_to_date():
    expected = markdown_reference(all_rules())
    actual = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    if actual != expected:
        diff = "".join(
            list(
                difflib.unified_diff(
                    actual.splitlines(keepends=True),
                    expected.splitlines(keepends=True),
                    "docs/rules.md (checked in)",
                    "docs/rules.md (generated)",
                )
            )[:60]
        )
        raise AssertionError(
            f"docs/rules.md is stale; regenerate it with `{REGENERATE_COMMAND}` "
            f"from the project root.\n{diff}"
        )


def test_reference_documents_every_rule():
    text = DOC.read_text(encoding="utf-8")
    for rule in all_rules():
        anchor = rule.url().rsplit("#", 1)[1]
        assert f'<a id="{anchor}"></a>' in text, rule.code
        assert f"### {rule.code} {rule.name}" in text, rule.code
