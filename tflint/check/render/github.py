"""The ``github`` format: GitHub Actions workflow commands, one annotation per finding.

``::error file=PATH,line=L,col=C,endLine=L2,endColumn=C2,title=CODE name::message``
(``::warning`` for warning-severity rules). Columns are 1-based (the end column inclusive)
and given only for single-line spans (GitHub ignores them otherwise); notebook findings
annotate the file and name the cell and line in the message. Values are escaped as the
workflow-command syntax requires: ``%``, CR and LF everywhere, and ``:`` / ``,`` inside
properties.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tflint.check.render import RenderContext, rule_meta, severity_str, sorted_findings

if TYPE_CHECKING:  # pragma: no cover
    from tflint.finding import Finding


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding, ctx: RenderContext) -> str:
    command = "error" if severity_str(f) == "error" else "warning"
    name = rule_meta(f.code)[0]
    title = f"{f.code} {name}" if name else f.code
    props = [("file", ctx.display_path(f.path))]
    message = f.message
    if f.cell is not None:
        # Annotations address lines of the file, not of a notebook cell: name the cell in the
        # text and annotate the file.
        message = f"cell {f.cell}, line {f.line}, column {f.col + 1}: {message}"
    else:
        line = max(f.line, 1)
        end_line = max(f.end_line, line)
        props += [("line", str(line))]
        if end_line == line:
            # GitHub accepts columns only on single-line annotations; its end column is
            # 1-based and inclusive, which is the 0-based exclusive end of the finding.
            end_col = max(f.end_col, f.col + 1)
            props += [("col", str(f.col + 1)), ("endLine", str(end_line))]
            props += [("endColumn", str(end_col))]
        else:
            props += [("endLine", str(end_line))]
    props.append(("title", title))
    rendered = ",".join(f"{k}={escape_property(v)}" for k, v in props)
    return f"::{command} {rendered}::{escape_data(message)}"


class GithubRenderer:
    def render(self, findings: Sequence[Finding], ctx: RenderContext) -> str:
        return "\n".join(annotation(f, ctx) for f in sorted_findings(findings))
