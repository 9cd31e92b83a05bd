"""The default ``full`` format: each finding with its source lines, underlined.

::

    train.py:12:9: TFL101 [*] `print` in traced code runs only while tracing
       |
    11 |     loss = step(x)
    12 |     print(loss)
       |     ^^^^^^^^^^^ TFL101
    13 |     return loss
       |
       = help: Replace `print` with `tf.print`

Colours are ANSI escapes written here (no rich import), only when ``ctx.color`` is set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tflint.check.render import (
    RenderContext,
    char_width,
    display_width,
    is_fixable,
    severity_str,
    sorted_findings,
    summary_lines,
)

if TYPE_CHECKING:  # pragma: no cover
    from tflint.finding import Finding

RESET = "\x1b[0m"
BOLD = "\x1b[1m"
RED = "\x1b[31m"
YELLOW = "\x1b[33m"
BLUE = "\x1b[34m"
CYAN = "\x1b[36m"

# Spans longer than this many lines show their head and tail only.
_MAX_SPAN_LINES = 6
_CONTEXT = 1


class _Style:
    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, *codes: str) -> str:
        if not self.on or not text:
            return text
        return "".join(codes) + text + RESET


def _expand(text: str) -> str:
    return text.replace("\t", "    ")


def _width_until(text: str, col: int) -> int:
    """Display width of the first ``col`` characters of ``text``."""
    return sum(char_width(c) for c in text[: max(col, 0)])


def header(f: Finding, ctx: RenderContext, style: _Style) -> str:
    path = ctx.display_path(f.path)
    where = f"{path}:"
    if f.cell is not None:
        where += f"cell {f.cell}:"
    where += f"{f.line}:{f.col + 1}:"
    sev_color = RED if severity_str(f) == "error" else YELLOW
    parts = [style(where, BOLD), style(f.code, BOLD, sev_color)]
    if ctx.fixable_hint and is_fixable(f, ctx.unsafe_fixes):
        parts.append(style("[*]", CYAN))
    parts.append(f.message)
    return " ".join(parts)


def snippet(f: Finding, lines: list[str], style: _Style) -> list[str]:
    """Gutter-numbered source lines of the span with context, and the underline."""
    n = len(lines)
    first = min(max(f.line, 1), n)
    last = min(max(f.end_line, first), n)
    sev_color = RED if severity_str(f) == "error" else YELLOW

    shown: list[int | None] = []  # None = elision marker
    start = max(first - _CONTEXT, 1)
    end = min(last + _CONTEXT, n)
    span = last - first + 1
    if span > _MAX_SPAN_LINES:
        head = list(range(start, first + 3))
        tail = list(range(last - 1, end + 1))
        shown = [*head, None, *tail]
    else:
        shown = list(range(start, end + 1))
    # Drop blank context lines at either edge: they only add noise.
    while shown and shown[0] is not None and shown[0] < first and not lines[shown[0] - 1].strip():
        shown.pop(0)
    while shown and shown[-1] is not None and shown[-1] > last and not lines[shown[-1] - 1].strip():
        shown.pop()

    num_w = len(str(max(x for x in shown if x is not None)))
    pad = " " * num_w
    bar = style("|", BOLD, BLUE)
    out = [f"{pad} {bar}"]

    def marker_line(text_line: str, c0: int, c1: int, label: str) -> str:
        lead = _width_until(text_line, c0)
        width = max(_width_until(text_line, c1) - lead, 1)
        mark = style("^" * width, BOLD, sev_color)
        tail = (" " + style(label, BOLD, sev_color)) if label else ""
        return f"{pad} {bar} {' ' * lead}{mark}{tail}"

    for ln in shown:
        if ln is None:
            out.append(f"{style('.' * num_w, BOLD, BLUE)} {bar} ...")
            continue
        text = lines[ln - 1]
        num = style(str(ln).rjust(num_w), BOLD, BLUE)
        shown_text = _expand(text)
        out.append(f"{num} {bar} {shown_text}".rstrip())
        if ln == first == last:
            c1 = f.end_col if f.end_line == f.line else len(text)
            c1 = min(max(c1, f.col + 1), max(len(text), f.col + 1))
            out.append(marker_line(text, f.col, c1, f.code))
        elif ln == first:
            out.append(marker_line(text, f.col, max(len(text.rstrip()), f.col + 1), ""))
        elif ln == last:
            indent = len(text) - len(text.lstrip())
            end = f.end_col if f.end_line == last else len(text.rstrip())
            out.append(marker_line(text, indent, max(end, indent + 1), f.code))
    out.append(f"{pad} {bar}")
    if f.fix is not None and f.fix.message:
        eq = style("=", BOLD, BLUE)
        out.append(f"{pad} {eq} {style('help', BOLD, CYAN)}: {f.fix.message}")
    return out


class FullRenderer:
    def render(self, findings: Sequence[Finding], ctx: RenderContext) -> str:
        style = _Style(ctx.color)
        blocks: list[str] = []
        for f in sorted_findings(findings):
            block = [header(f, ctx, style)]
            lines = ctx.lines_for(f)
            if lines:
                block.extend(snippet(f, lines, style))
            elif f.fix is not None and f.fix.message:
                block.append(f"  = {style('help', BOLD, CYAN)}: {f.fix.message}")
            blocks.append("\n".join(block))
        if ctx.summary:
            tail = summary_lines(findings, ctx.fixable_hint, ctx.unsafe_fixes)
            if tail:
                blocks.append(
                    "\n".join(style(t, BOLD) if i == 0 else t for i, t in enumerate(tail))
                )
        return "\n\n".join(blocks)


__all__ = ["FullRenderer", "display_width"]
