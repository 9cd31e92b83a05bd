"""Every rule's VALID and INVALID examples, run for real: a rule cannot silently stop firing."""

from __future__ import annotations

import pytest

from tflint.rules import all_rules
from tests.rule_harness import expected, run_rules

RULES = [r for r in all_rules() if r.code != "TFL000"]

CASES = [
    pytest.param(rule, kind, i, src, id=f"{rule.code}-{kind}-{i}")
    for rule in RULES
    for kind in ("VALID", "INVALID")
    for i, src in enumerate(getattr(rule, kind))
]


@pytest.mark.parametrize("rule,kind,index,source", CASES)
def test_example(rule, kind, index, source):
    got = [(f.line, f.code) for f in run_rules(source, [rule])]
    if kind == "VALID":
        assert got == [], f"{rule.code} fired on a VALID example:\n{source}"
    else:
        want = expected(source, rule.code)
        assert want, f"{rule.code} INVALID example {index} marks no `# expect:` line"
        assert sorted(got) == want, f"{rule.code} on INVALID example:\n{source}"


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_is_documented_with_examples(rule):
    for attr in ("name", "summary", "what", "why", "example", "use_instead", "fix_safety"):
        assert getattr(rule, attr, "").strip(), f"{rule.code} lacks {attr}"
    assert len(rule.VALID) >= 3, f"{rule.code} needs at least 3 VALID examples"
    assert len(rule.INVALID) >= 3, f"{rule.code} needs at least 3 INVALID examples"
    assert rule.severity.value in ("error", "warning")


def test_examples_are_also_checked_by_all_rules_together():
    """Running every rule at once must not crash on any example."""
    for rule in RULES:
        for src in (*rule.VALID, *rule.INVALID):
            run_rules(src)
