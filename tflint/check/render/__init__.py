"""Output formats of ``tflint check``.

``get_renderer(name)`` returns an object whose ``render(findings, ctx)`` turns a list of
findings into the text to print (without a trailing newline; an empty string means there is
nothing to print). Each format lives in its own module, imported only when asked for, so that
``tflint check`` pays for nothing it does not print. No renderer imports rich: the ``full``
format writes its own ANSI escapes, and only when ``ctx.color`` is set.

Positions in findings are 1-based lines and 0-based columns; every format that shows a column
shows it 1-based.
"""

from __future__ import annotations

import importlib
import os
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from tflint.check.render.statistics import statistics

if TYPE_CHECKING:  # pragma: no cover
    from tflint.finding import Finding

__all__ = [
    "FORMATS",
    "RenderContext",
    "Renderer",
    "get_renderer",
    "read_source_lines",
    "statistics",
]

# name -> (module, class); the module is imported on first use.
_RENDERERS: dict[str, tuple[str, str]] = {
    "full": ("tflint.check.render.full", "FullRenderer"),
    "concise": ("tflint.check.render.concise", "ConciseRenderer"),
    "json": ("tflint.check.render.json", "JsonRenderer"),
    "sarif": ("tflint.check.render.sarif", "SarifRenderer"),
    "github": ("tflint.check.render.github", "GithubRenderer"),
}

FORMATS: tuple[str, ...] = tuple(_RENDERERS)


def read_source_lines(path: str) -> list[str] | None:
    """The lines of a file on disk (without line endings), or ``None`` when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.splitlines()


@dataclass
class RenderContext:
    """What a renderer knows beyond the findings.

    ``root``: the directory paths are shown relative to (and SARIF URIs are relative to).
    ``source_lines(path)``: the lines of a checked file (``path`` as the finding gives it),
    for snippets and fingerprints; ``None`` reads the file from disk, relative to ``root``.
    ``color``: emit ANSI colours (``full`` only). ``fixable_hint``: mark fixable findings
    ``[*]`` and say how many ``--fix`` would fix. ``summary``: end the human formats with a
    ``Found N issues`` line. ``cell_lines(path, cell)``: for notebook findings, the lines of
    that code cell (snippets are skipped when it is not given). ``unsafe_fixes``: the run
    was given ``--unsafe-fixes``, so unsafe fixes count as fixable in hints.
    """

    root: str
    source_lines: Callable[[str], list[str] | None] | None = None
    color: bool = False
    fixable_hint: bool = True
    summary: bool = True
    cell_lines: Callable[[str, int], list[str] | None] | None = None
    unsafe_fixes: bool = False
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    _paths: dict = field(default_factory=dict, repr=False, compare=False)

    # --- paths -------------------------------------------------------------------------
    def abs_path(self, path: str) -> str:
        if path == "-":
            return path
        return os.path.normpath(os.path.join(os.path.abspath(self.root), path))

    def display_path(self, path: str) -> str:
        """``path`` relative to ``root`` when it lies under it, else as given; ``/`` separators."""
        shown = self._paths.get(path)
        if shown is None:
            shown = self._paths[path] = self._display_path(path)
        return shown

    def _display_path(self, path: str) -> str:
        if path == "-":
            return path
        absolute = self.abs_path(path)
        root = os.path.abspath(self.root)
        try:
            rel = os.path.relpath(absolute, root)
        except ValueError:  # another drive on Windows
            rel = absolute
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            rel = path if not os.path.isabs(path) else absolute
        return rel.replace(os.sep, "/")

    # --- source ------------------------------------------------------------------------
    def lines_for(self, finding: Finding) -> list[str] | None:
        """The lines the finding's positions refer to (its notebook cell, or its file)."""
        key = (finding.path, finding.cell)
        if key in self._cache:
            return self._cache[key]
        lines: list[str] | None = None
        try:
            if finding.cell is not None:
                if self.cell_lines is not None:
                    lines = self.cell_lines(finding.path, finding.cell)
            elif self.source_lines is not None:
                lines = self.source_lines(finding.path)
            elif finding.path != "-":
                lines = read_source_lines(self.abs_path(finding.path))
        except Exception:  # a snippet is a nicety: never let it break the output
            lines = None
        if lines is not None:
            lines = [ln.rstrip("\r\n") for ln in lines]
        self._cache[key] = lines
        return lines


class Renderer(Protocol):
    def render(self, findings: Sequence[Finding], ctx: RenderContext) -> str: ...


def get_renderer(name: str) -> Renderer:
    """The renderer for an output format; ``ValueError`` naming the formats on an unknown one."""
    key = (name or "").strip().lower()
    if key not in _RENDERERS:
        raise ValueError(f"unknown output format {name!r} (expected one of: {', '.join(FORMATS)})")
    module_name, cls_name = _RENDERERS[key]
    module = importlib.import_module(module_name)
    return getattr(module, cls_name)()


# --- helpers shared by the formats ------------------------------------------------------


def severity_str(finding: Finding) -> str:
    sev = finding.severity
    return str(getattr(sev, "value", sev) or "error")


@lru_cache(maxsize=512)
def rule_meta(code: str) -> tuple[str, str | None, bool]:
    """``(name, url, known)`` for a code, from the registry; never raises."""
    try:
        from tflint.rules import get_rule

        rule = get_rule(code)
    except Exception:
        rule = None
    if rule is None:
        return "", None, False
    try:
        url = rule.url()
    except Exception:
        url = None
    return str(getattr(rule, "name", "") or ""), url, True


def finding_url(finding: Finding) -> str | None:
    return finding.url or rule_meta(finding.code)[1]


def sorted_findings(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: f.sort_key())


def char_width(ch: str) -> int:
    if ch == "\t":
        return 4
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    return sum(char_width(c) for c in text)


def count_phrase(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def is_fixable(finding: Finding, unsafe_fixes: bool = False) -> bool:
    fix = finding.fix
    return fix is not None and (fix.applicability == "safe" or unsafe_fixes)


def summary_lines(
    findings: Sequence[Finding], fixable_hint: bool, unsafe_fixes: bool = False
) -> list[str]:
    """``Found N issues ...`` and, with ``fixable_hint``, how many ``--fix`` would fix."""
    if not findings:
        return []
    errors = sum(1 for f in findings if severity_str(f) == "error")
    warnings = len(findings) - errors
    parts = []
    if errors:
        parts.append(count_phrase(errors, "error"))
    if warnings:
        parts.append(count_phrase(warnings, "warning"))
    out = [f"Found {count_phrase(len(findings), 'issue')} ({', '.join(parts)})."]
    if fixable_hint:
        safe = sum(1 for f in findings if is_fixable(f, unsafe_fixes))
        unsafe = sum(1 for f in findings if f.fix is not None and not is_fixable(f, unsafe_fixes))
        hidden = "1 hidden fix" if unsafe == 1 else f"{unsafe} hidden fixes"
        hidden_note = f"{hidden} can be enabled with the `--unsafe-fixes` option"
        if safe:
            line = f"[*] {safe} fixable with the `--fix` option"
            out.append(f"{line} ({hidden_note})." if unsafe else f"{line}.")
        elif unsafe:
            out.append(f"No fixes available ({hidden_note}).")
    return out
