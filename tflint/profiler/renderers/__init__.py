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
    def render(self, report: Report) -> Any: ...


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


def metric_series(value: Any) -> list[tuple[float, float]]:
    """The series of a metric that is either a series or ``{"series": [...], ...}``."""
    if isinstance(value, dict):
        return series_values(value.get("series"))
    return series_values(value)


def metric_scalar(value: Any, keys: tuple[str, ...] = ("overall", "current", "value")) -> float | None:
    """A single figure: a number, or the first numeric ``keys`` entry of a dict."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        for k in keys:
            v = value.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
    return None


def device_memory(value: Any) -> dict[str, dict[str, Any]]:
    """``{device: {"series": [(x, y)], "current": n|None, "peak": n|None}}`` for the devices
    with data (``metrics["device_memory_bytes"]``); devices marked unavailable are left out."""
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(value, dict):
        pts = series_values(value)
        return {"device": {"series": pts, "current": None, "peak": None}} if pts else {}
    for dev, entry in value.items():
        if isinstance(entry, dict):
            if entry.get("available") is False:
                continue
            pts = series_values(entry.get("series"))
            cur, peak = metric_scalar(entry, ("current",)), metric_scalar(entry, ("peak",))
        else:
            pts, cur, peak = series_values(entry), None, None
        if pts or cur is not None:
            out[str(dev)] = {"series": pts, "current": cur, "peak": peak}
    return out


__all__ = ["Renderer", "device_memory", "metric_scalar", "metric_series", "series_values"]
