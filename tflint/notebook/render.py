"""How the extension shows things under a cell: static findings and a cell's runtime report,
as plain text (terminal IPython) and as HTML (Jupyter front ends). Compact on purpose: one line
per finding.
"""

from __future__ import annotations

import html
import os
from typing import Any

from tflint.finding import Finding

_COLOURS = {"error": "#c62828", "warning": "#b26a00", "info": "#1565c0"}
_BOX = (
    "font-family: var(--jp-code-font-family, monospace); font-size: 12px; line-height: 1.5; "
    "border-left: 3px solid {c}; padding: 2px 8px; margin: 2px 0"
)


def _sev(value: Any) -> str:
    return str(getattr(value, "value", value))


class CellFindings:
    """The static findings of one cell; ``line`` numbers are the cell's own."""

    def __init__(self, findings: list[Finding], line_offset: int = 0) -> None:
        self.findings = list(findings)
        self.line_offset = line_offset

    def __len__(self) -> int:
        return len(self.findings)

    def _line(self, f: Finding) -> int:
        return f.line + self.line_offset

    def text(self) -> str:
        n = len(self.findings)
        head = f"tflint: {n} finding{'s' if n != 1 else ''} in this cell"
        rows = [f"  line {self._line(f)}: {f.code} [{_sev(f.severity)}] {f.message}" for f in self.findings]
        return "\n".join([head, *rows])

    def __repr__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    def _repr_html_(self) -> str:
        worst = "error" if any(_sev(f.severity) == "error" for f in self.findings) else "warning"
        rows = []
        for f in self.findings:
            code = html.escape(f.code)
            if f.url:
                code = f'<a href="{html.escape(f.url)}" target="_blank" rel="noopener">{code}</a>'
            colour = _COLOURS.get(_sev(f.severity), "#555")
            rows.append(
                f'<div><span style="color:{colour};font-weight:bold">{code}</span> '
                f'<span style="opacity:.7">line {self._line(f)}</span> {html.escape(f.message)}</div>'
            )
        return f'<div class="tflint-findings" style="{_BOX.format(c=_COLOURS[worst])}">{"".join(rows)}</div>'


def _where(location: Any) -> str:
    if location is None:
        return ""
    file = str(getattr(location, "file", "") or "")
    line = getattr(location, "line", None)
    name = os.path.basename(file)
    if file.startswith("<") or "ipykernel_" in file or name.startswith("ipython-input"):
        return f" (cell line {line})"
    return f" ({name}:{line})"


def report_text(report: Any) -> str:
    """A cell's runtime report, compactly."""
    signals = list(getattr(report, "signals", []) or [])
    steps = getattr(report, "steps", 0)
    dur = getattr(report, "duration_s", 0.0) or 0.0
    n = len(signals)
    off = _off_kinds(report)
    head = (
        f"tflint profile: {n} runtime finding{'s' if n != 1 else ''} "
        f"({steps} step{'s' if steps != 1 else ''}, {dur:.2f} s"
        + (f"; not collected: {', '.join(off)}" if off else "") + ")"
    )
    rows = [f"  {s.kind} [{s.severity}] {s.message}{_where(s.location)}" for s in signals]
    return "\n".join([head, *rows])


def _off_kinds(report: Any) -> list[str]:
    """The signal kinds left out of the run (``--signals``), the training-health kinds named
    together when all of them are."""
    from tflint.profiler.report import SIGNAL_KINDS, TRAINING_HEALTH_KINDS

    hooks = (getattr(report, "metrics", None) or {}).get("hooks")
    if not isinstance(hooks, dict):
        return []
    off = [k for k in SIGNAL_KINDS if isinstance(hooks.get(k), dict) and hooks[k].get("status") == "off"]
    if all(k in off for k in TRAINING_HEALTH_KINDS):
        off = [k for k in off if k not in TRAINING_HEALTH_KINDS] + ["training-health"]
    return off


def report_html(report: Any) -> str:
    signals = list(getattr(report, "signals", []) or [])
    worst = "info"
    for s in signals:
        if s.severity == "error":
            worst = "error"
            break
        if s.severity == "warning":
            worst = "warning"
    head = html.escape(report_text(report).split("\n", 1)[0])
    rows = [f'<div style="font-weight:bold">{head}</div>']
    for s in signals:
        colour = _COLOURS.get(s.severity, "#555")
        rows.append(
            f'<div><span style="color:{colour};font-weight:bold">{html.escape(s.kind)}</span> '
            f"{html.escape(s.message)}"
            f'<span style="opacity:.7">{html.escape(_where(s.location))}</span></div>'
        )
    return f'<div class="tflint-report" style="{_BOX.format(c=_COLOURS[worst])}">{"".join(rows)}</div>'


def report_pretty(report: Any, p: Any, cycle: bool) -> None:
    p.text(report_text(report))
