"""Bounded event store: everything the hooks learn, aggregated as it arrives.

Nothing here grows with the number of events: counters, per-key records capped in number
(``MAX_KEYS`` per kind), capped example lists, and time series that halve their resolution when
full (every other point is dropped and the sampling stride doubles), so a week-long run costs the
same memory as a minute-long one.
"""

from __future__ import annotations

import threading
from array import array
from typing import Any, Callable

MAX_KEYS = 256
MAX_EXAMPLES = 20


class Series:
    """Downsampled series of ``(x, y)`` points: at most ``cap`` points, uniformly spread.

    Points are kept as C doubles: 16 bytes a point, where a list of ``(x, y)`` tuples of Python
    numbers costs 48-64 (measured); a profiler holds dozens of these series for a whole run.
    """

    __slots__ = ("cap", "stride", "_n", "_xs", "_ys", "_lock", "last")

    def __init__(self, cap: int = 400) -> None:
        self.cap = max(4, int(cap))
        self.stride = 1
        self._n = 0
        self._xs = array("d")
        self._ys = array("d")
        self._lock = threading.Lock()
        self.last: tuple[float, float] | None = None

    def add(self, x: float, y: float) -> None:
        self.last = (x, y)
        n = self._n
        self._n = n + 1
        if n % self.stride:
            return
        # y first: a reader that copies between the two appends sees one x too few, never a
        # y without its x (it keeps the shorter length); only the halving takes the lock
        self._ys.append(y)
        self._xs.append(x)
        if len(self._xs) >= self.cap:
            with self._lock:
                self._xs, self._ys = self._xs[::2], self._ys[::2]
                self.stride *= 2

    def __len__(self) -> int:
        return len(self._xs)

    @property
    def points(self) -> list[tuple[float, float]]:
        """A copy of the kept points."""
        with self._lock:
            xs, ys = self._xs.tolist(), self._ys.tolist()
        return list(zip(xs, ys))

    @property
    def count(self) -> int:
        """How many points were offered (kept or not)."""
        return self._n

    def downsample(self, max_points: int = 200) -> list[list[float]]:
        with self._lock:
            xs, ys, stride, n, last = self._xs.tolist(), self._ys.tolist(), self.stride, self._n, self.last
        pts = list(zip(xs, ys))
        if last is not None and (len(pts) - 1) * stride != n - 1:  # kept points are every stride-th
            pts.append(last)
        if len(pts) > max_points:
            step = len(pts) / max_points
            pts = [pts[int(i * step)] for i in range(max_points - 1)] + [pts[-1]]
        return [[_num(x), _num(y)] for x, y in pts]


def _num(v: float) -> float:
    f = float(v)
    return int(f) if f.is_integer() and abs(f) < 2**53 else round(f, 9)


class Store:
    """Counters, per-key records and series, shared by all hooks of one session."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}
        self.records: dict[str, dict[Any, dict[str, Any]]] = {}
        self.overflow: dict[str, int] = {}
        self.series_by_name: dict[str, Series] = {}
        self.values: dict[str, Any] = {}
        self._lock = threading.Lock()

    def incr(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def count(self, name: str) -> int:
        return self.counters.get(name, 0)

    def record(self, kind: str, key: Any, factory: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """The record of ``kind``/``key``, created with ``factory`` if new; None once the kind
        holds ``MAX_KEYS`` records (the overflow is counted)."""
        recs = self.records.get(kind)
        if recs is None:
            with self._lock:
                recs = self.records.setdefault(kind, {})
        rec = recs.get(key)
        if rec is not None:
            return rec
        with self._lock:
            rec = recs.get(key)
            if rec is not None:
                return rec
            if len(recs) >= MAX_KEYS:
                self.overflow[kind] = self.overflow.get(kind, 0) + 1
                return None
            rec = factory()
            recs[key] = rec
            return rec

    def records_of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.records.get(kind, {}).values())

    def series(self, name: str, cap: int = 400) -> Series:
        s = self.series_by_name.get(name)
        if s is None:
            with self._lock:
                s = self.series_by_name.setdefault(name, Series(cap))
        return s


def add_example(lst: list[Any], item: Any, cap: int = MAX_EXAMPLES) -> bool:
    """Append to a capped example list; False when full."""
    if len(lst) >= cap:
        return False
    lst.append(item)
    return True
