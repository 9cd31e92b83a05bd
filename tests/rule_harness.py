"""Run one rule (or all) over a source string, the way the engine does, for tests."""

from __future__ import annotations

import ast
import re

from tflint.analysis import Analysis
from tflint.rules import all_rules
from tflint.rules.base import Rule, RuleContext

EXPECT_RE = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")


def run_rules(source: str, rules: list[type[Rule]] | None = None, path: str = "example.py"):
    tree = ast.parse(source)
    ctx = RuleContext(path, source, tree, Analysis(tree, source))
    for rule in rules or all_rules():
        rule().run(ctx)
    return sorted(ctx.findings, key=lambda f: f.sort_key())


def expected(source: str, code: str | None = None) -> list[tuple[int, str]]:
    """(line, code) pairs marked with ``# expect: CODE[, CODE]`` in ``source``."""
    out = []
    for i, line in enumerate(source.splitlines(), start=1):
        m = EXPECT_RE.search(line)
        if m:
            for c in m.group(1).replace(" ", ",").split(","):
                if c and (code is None or c == code):
                    out.append((i, c))
    return sorted(out)
