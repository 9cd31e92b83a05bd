"""Series statistics shared by every runtime signal (numpy).

* :func:`theil_sen` -- the median of pairwise slopes, a trend that single spikes and allocator
  steps barely move;
* :func:`mann_kendall_z` -- the Mann–Kendall trend test statistic (with tie correction), as a
  normal score: |z| > 3 is a monotone trend at p < 0.003;
* :func:`relative_change` -- the change a robust trend implies over a window, relative to the
  series' level;
* :func:`l2_norm` / :func:`combine_norms` -- norms of gradient arrays and of groups of them.

Pairwise statistics are O(n²) in memory; callers downsample to a few hundred points first.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np


def _arrays(xs: Sequence[float], ys: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Median of the slopes of all pairs of points with distinct ``x`` (0.0 with none)."""
    x, y = _arrays(xs, ys)
    n = len(x)
    if n < 2:
        return 0.0
    i, j = np.triu_indices(n, k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    if not keep.any():
        return 0.0
    slopes = (y[j] - y[i])[keep] / dx[keep]
    return float(np.median(slopes))


def theil_sen_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(slope, intercept) of the Theil–Sen line; the intercept is the median of ``y - slope·x``."""
    x, y = _arrays(xs, ys)
    slope = theil_sen(x, y)
    if len(x) == 0:
        return slope, 0.0
    return slope, float(np.median(y - slope * x))


def mann_kendall_z(ys: Sequence[float]) -> float:
    """Normal score of the Mann–Kendall S statistic, with the usual continuity and tie corrections."""
    y = np.asarray(ys, dtype=np.float64)
    n = len(y)
    if n < 3:
        return 0.0
    i, j = np.triu_indices(n, k=1)
    s = int(np.sign(y[j] - y[i]).sum())
    _, counts = np.unique(y, return_counts=True)
    ties = counts[counts > 1].astype(np.float64)
    var = (n * (n - 1) * (2 * n + 5) - float((ties * (ties - 1) * (2 * ties + 5)).sum())) / 18.0
    if var <= 0:
        return 0.0
    if s > 0:
        return (s - 1) / math.sqrt(var)
    if s < 0:
        return (s + 1) / math.sqrt(var)
    return 0.0


def relative_change(xs: Sequence[float], ys: Sequence[float]) -> dict[str, float]:
    """Theil–Sen slope, the change it implies from the first to the last ``x``, and that change
    relative to the series' median magnitude (``inf`` when the level is 0 and it changed)."""
    x, y = _arrays(xs, ys)
    slope = theil_sen(x, y)
    span = float(x[-1] - x[0]) if len(x) else 0.0
    change = slope * span
    level = float(np.median(np.abs(y))) if len(y) else 0.0
    rel = abs(change) / level if level > 0 else (0.0 if change == 0 else math.inf)
    return {"slope": slope, "change": change, "level": level, "relative": rel}


def median(values: Iterable[float]) -> float:
    arr = np.asarray(list(values), dtype=np.float64)
    return float(np.median(arr)) if arr.size else math.nan


def l2_norm(values: Any) -> float:
    """Euclidean norm of an array (float64 accumulation, so float16/float32 do not overflow)."""
    arr = np.asarray(values, dtype=np.float64)
    return float(np.sqrt(np.sum(arr * arr)))


def combine_norms(norms: Iterable[float]) -> float:
    """Norm of the concatenation of arrays whose norms are given (sqrt of the sum of squares)."""
    arr = np.asarray(list(norms), dtype=np.float64)
    return float(np.sqrt(np.sum(arr * arr))) if arr.size else 0.0


def downsample(points: Sequence[Sequence[float]], max_points: int) -> list[tuple[float, float]]:
    """At most ``max_points`` points, uniformly spread, the last one kept."""
    pts = [(float(p[0]), float(p[1])) for p in points]
    if len(pts) <= max_points:
        return pts
    idx = np.linspace(0, len(pts) - 1, max_points).round().astype(int)
    return [pts[i] for i in idx]


def split_at(points: Sequence[Sequence[float]], starts: Iterable[float]) -> list[list[tuple[float, float]]]:
    """``points`` (x ascending) split where each of ``starts`` begins; a point at a start belongs
    to the part before it (it holds that part's last steps). Empty parts are dropped."""
    bounds = sorted(set(starts))
    parts: list[list[tuple[float, float]]] = [[]]
    i = 0
    for p in points:
        x = float(p[0])
        while i < len(bounds) and x > bounds[i]:
            i += 1
            if parts[-1]:
                parts.append([])
        parts[-1].append((x, float(p[1])))
    return [part for part in parts if part]
