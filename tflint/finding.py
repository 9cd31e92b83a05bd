"""The data a check produces: findings, and the fixes they may carry.

Lines are 1-based and columns 0-based character offsets within the line, as in Python's
``ast``; renderers convert to what each output format expects (ruff-style JSON and SARIF
use 1-based columns).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace the text between two positions (line 1-based, col 0-based) with ``content``."""

    line: int
    col: int
    end_line: int
    end_col: int
    content: str


@dataclass(frozen=True, slots=True)
class Fix:
    message: str
    edits: tuple[Edit, ...]
    # "safe" fixes are applied by --fix; "unsafe" ones only with --unsafe-fixes.
    applicability: str = "safe"


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    message: str
    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    severity: Severity = Severity.ERROR
    fix: Fix | None = None
    # For notebooks: 1-based index of the code cell; line/col are then within that cell.
    cell: int | None = None
    url: str | None = field(default=None, compare=False)

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.col, self.code, self.message)
