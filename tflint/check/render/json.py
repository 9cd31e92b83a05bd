"""The ``json`` format: an array of objects shaped like ruff's JSON output.

Each object: ``code``, ``message``, ``filename`` (absolute), ``location`` / ``end_location``
(``{"row", "column"}``, both 1-based), ``fix`` (``null`` or ``{"applicability", "message",
"edits": [{"content", "location", "end_location"}]}``), ``url``, ``noqa_row`` (the line a
``# noqa`` comment goes on), ``cell`` (1-based notebook code cell, or ``null``), and
``severity``. Keys are sorted and findings ordered by path, line, column, code.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tflint.check.render import RenderContext, finding_url, severity_str, sorted_findings

if TYPE_CHECKING:  # pragma: no cover
    from tflint.finding import Finding


def _loc(line: int, col: int) -> dict:
    return {"row": line, "column": col + 1}


def finding_to_dict(f: Finding, ctx: RenderContext) -> dict:
    fix = None
    if f.fix is not None:
        fix = {
            "applicability": f.fix.applicability,
            "message": f.fix.message,
            "edits": [
                {
                    "content": e.content,
                    "location": _loc(e.line, e.col),
                    "end_location": _loc(e.end_line, e.end_col),
                }
                for e in f.fix.edits
            ],
        }
    return {
        "cell": f.cell,
        "code": f.code,
        "end_location": _loc(f.end_line, f.end_col),
        "filename": ctx.abs_path(f.path),
        "fix": fix,
        "location": _loc(f.line, f.col),
        "message": f.message,
        "noqa_row": f.line,
        "severity": severity_str(f),
        "url": finding_url(f),
    }


class JsonRenderer:
    def render(self, findings: Sequence[Finding], ctx: RenderContext) -> str:
        data = [finding_to_dict(f, ctx) for f in sorted_findings(findings)]
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)
