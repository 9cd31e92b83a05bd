"""``--json PATH``: the report in the documented schema (docs/profile-json.md), written atomically."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tflint.profiler.report import Report


class JsonRenderer:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def render(self, report: Report) -> str:
        """Write the report; a reader sees the previous file or the whole new one."""
        report.save(self.path)
        return self.path
