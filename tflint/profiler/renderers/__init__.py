"""Views of a profile :class:`~tflint.profiler.report.Report`.

Each renderer is a class with ``render(report)``: :class:`~.terminal.TerminalRenderer` (rich,
on stderr), :class:`~.json.JsonRenderer` (``--json PATH``, written atomically) and
:class:`~.tensorboard.TensorBoardRenderer` (``--logdir DIR``, needs TensorFlow). Import the one
you need from its module; this package imports nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tflint.profiler.report import Report


class Renderer(Protocol):
    def render(self, report: "Report") -> Any: ...


def series_values(value: Any) -> list[tuple[float, float]]:
    """A metrics series as ``(x, y)`` pairs: accepts ``[[x, y], ...]`` or ``[y, ...]``."""
    if not isinstance(value, (list, tuple)):
        return []
    out: list[tuple[float, float]] = []
    for i, item in enumerate(value):
        try:
            if isinstance(item, (list, tuple)) and len(item) >= 2:
                out.append((float(item[0]), float(item[1])))
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                out.append((float(i), float(item)))
        except (TypeError, ValueError):
            continue
    return out


__all__ = ["Renderer", "series_values"]
