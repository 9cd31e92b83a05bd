"""``tflint check --statistics``: how many findings each rule produced."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from tflint.finding import Finding


def _rule_name(code: str) -> str:
    try:
        from tflint.rules import get_rule

        rule = get_rule(code)
    except Exception:
        rule = None
    return str(getattr(rule, "name", "") or "") if rule is not None else ""


def statistics_rows(findings: Sequence[Finding]) -> list[dict]:
    """One row per code: ``code``, ``name``, ``count``, ``fixable`` (how many carry a fix);
    sorted by count (highest first), then code."""
    counts: dict[str, int] = {}
    fixable: dict[str, int] = {}
    for f in findings:
        counts[f.code] = counts.get(f.code, 0) + 1
        if f.fix is not None:
            fixable[f.code] = fixable.get(f.code, 0) + 1
    order = sorted(counts, key=lambda c: (-counts[c], c))
    return [
        {
            "code": c,
            "name": _rule_name(c),
            "count": counts[c],
            "fixable": fixable.get(c, 0),
        }
        for c in order
    ]


def statistics(findings: Sequence[Finding], output_format: str = "text") -> str:
    """The ``--statistics`` table (``output_format="json"`` gives a JSON array instead).

    Text: ``count  CODE  [*] name`` per line, ``[*]`` when some of the findings can be fixed.
    Empty string when there are no findings (JSON: ``[]``).
    """
    rows = statistics_rows(findings)
    if output_format == "json":
        return json.dumps(rows, indent=2)
    if not rows:
        return ""
    count_w = max(len(str(r["count"])) for r in rows)
    code_w = max(len(r["code"]) for r in rows)
    any_fix = any(r["fixable"] for r in rows)
    lines = []
    for r in rows:
        marker = ""
        if any_fix:
            marker = "[*] " if r["fixable"] else "    "
        line = f"{r['count']:>{count_w}}  {r['code']:<{code_w}}  {marker}{r['name']}"
        lines.append(line.rstrip())
    return "\n".join(lines)
