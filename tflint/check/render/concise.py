"""The ``concise`` format: one line per finding, ``path:line:col: CODE message``.

Columns are 1-based. Notebook findings read ``path:cell N:line:col: CODE message``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tflint.check.render import RenderContext, sorted_findings, summary_lines

if TYPE_CHECKING:  # pragma: no cover
    from tflint.finding import Finding


def concise_line(f: Finding, ctx: RenderContext) -> str:
    where = ctx.display_path(f.path) + ":"
    if f.cell is not None:
        where += f"cell {f.cell}:"
    # Messages are one line by contract; keep the format line-oriented even if one is not.
    message = " ".join(f.message.splitlines())
    return f"{where}{f.line}:{f.col + 1}: {f.code} {message}"


class ConciseRenderer:
    def render(self, findings: Sequence[Finding], ctx: RenderContext) -> str:
        out = [concise_line(f, ctx) for f in sorted_findings(findings)]
        if ctx.summary:
            out.extend(summary_lines(findings, ctx.fixable_hint, ctx.unsafe_fixes))
        return "\n".join(out)
