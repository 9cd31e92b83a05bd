"""The bounded event store: memory never grows with the number of events."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tflint.runtime.store import MAX_EXAMPLES, MAX_KEYS, Series, Store, add_example


@given(n=st.integers(0, 5000), cap=st.integers(4, 64))
@settings(max_examples=60, deadline=None)
def test_series_is_bounded_uniform_and_keeps_the_last_point(n, cap):
    s = Series(cap)
    for i in range(n):
        s.add(i, i * 2.0)
    assert len(s.points) < cap
    assert s.count == n
    pts = s.downsample(max_points=20)
    assert len(pts) <= 20
    if n:
        assert pts[-1] == [n - 1, (n - 1) * 2]
        assert pts[0] == [0, 0]
        xs = [p[0] for p in pts]
        assert xs == sorted(xs)
        # uniform spacing of the kept points (the stride is a power of two)
        kept = [p[0] for p in s.points]
        gaps = {b - a for a, b in zip(kept, kept[1:])}
        assert len(gaps) <= 1


def test_records_are_capped_and_overflow_counted():
    store = Store()
    for i in range(MAX_KEYS + 10):
        rec = store.record("retrace", i, lambda: {"n": 0})
        if rec is not None:
            rec["n"] += 1
    assert len(store.records_of("retrace")) == MAX_KEYS
    assert store.overflow["retrace"] == 10
    # an existing key still works after the cap
    assert store.record("retrace", 0, lambda: {"n": 0})["n"] == 1


def test_counters_and_examples():
    store = Store()
    store.incr("a")
    store.incr("a", 4)
    assert store.count("a") == 5 and store.count("b") == 0
    lst: list[int] = []
    results = [add_example(lst, i) for i in range(MAX_EXAMPLES + 5)]
    assert len(lst) == MAX_EXAMPLES and results.count(False) == 5


def test_series_numbers_are_json_friendly():
    s = Series(8)
    s.add(1, 2.5)
    s.add(2, 3.0)
    assert s.downsample() == [[1, 2.5], [2, 3]]
    assert isinstance(s.downsample()[1][1], int)


def test_store_shared_series_by_name():
    store = Store()
    assert store.series("x") is store.series("x")
    assert store.series("x") is not store.series("y")


def test_a_series_costs_sixteen_bytes_a_point():
    import tracemalloc

    tracemalloc.start()
    try:
        s = Series(512)
        before = tracemalloc.get_traced_memory()[0]
        for i in range(500):
            s.add(i * 1000, i * 0.5)  # steps past the small-int cache, as in a long run
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(s) == 500
    # two arrays of C doubles (with the arrays' over-allocation); a list of (x, y) tuples of
    # Python numbers costs 56 B for the tuple, 24-32 B for each number and 8 B for the slot
    assert grown < 500 * 20, grown


def test_a_non_finite_last_point_is_reported_once():
    s = Series(8)
    s.add(1, 1.0)
    s.add(2, float("nan"))
    pts = s.downsample()
    assert len(pts) == 2 and pts[0] == [1, 1] and pts[1][0] == 2 and pts[1][1] != pts[1][1]
    for i in range(3, 12):  # past the cap: the stride doubles, the last offered point is kept
        s.add(i, float(i))
    pts = s.downsample()
    assert pts[-1] == [11, 11] and [p[0] for p in pts].count(11) == 1
