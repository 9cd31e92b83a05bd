"""The overhead bench's confidence intervals of the median ratio cover the true median."""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("tflint_bench_overhead", ROOT / "bench" / "profile_overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_median_interval_covers_the_true_median_about_95_percent_of_the_time():
    median_ci = _bench().median_ci
    rng = random.Random(7)
    for n in (40, 300):
        runs = 1000
        # skewed noise, like block ratios: the true median of a lognormal(0, s) is exactly 1
        hits = sum(lo <= 1.0 <= hi for lo, hi in
                   (median_ci([rng.lognormvariate(0, 0.06) for _ in range(n)]) for _ in range(runs)))
        assert 0.92 <= hits / runs <= 0.98, (n, hits)
    assert median_ci([]) != median_ci([])  # NaNs: no data, no interval
    assert median_ci([1.5]) == (1.5, 1.5)
    lo, hi = median_ci([float(i) for i in range(300)])
    assert lo < 149.5 < hi and hi - lo < 40


def test_the_clustered_interval_counts_the_traces_own_spread():
    # each group is one pair of traces: a speed ratio of its own (sd 2.5%, as measured between
    # two traces of one step) times block noise; the true median over traces is exactly 1
    bench = _bench()
    rng = random.Random(11)
    runs, hits_clustered, hits_blocks = 200, 0, 0
    for _ in range(runs):
        groups = []
        for _ in range(8):
            trace = rng.gauss(0, 0.025)
            groups.append([math.exp(trace + rng.gauss(0, 0.08)) for _ in range(30)])
        lo, hi = bench.clustered_median_ci(groups, reps=300, seed=rng.randrange(1 << 30))
        hits_clustered += lo <= 1.0 <= hi
        lo, hi = bench.median_ci([x for g in groups for x in g])
        hits_blocks += lo <= 1.0 <= hi
    assert 0.88 <= hits_clustered / runs <= 0.99, hits_clustered
    assert hits_blocks / runs < 0.85, hits_blocks  # block noise alone: far too narrow here
    assert all(math.isnan(x) for x in bench.clustered_median_ci([]))  # no data, no interval
    assert bench.clustered_median_ci([[1.5], [1.5]]) == (1.5, 1.5)


def test_the_5ms_graph_and_fit_rows_are_calibrated_to_at_least_5ms():
    # the training-health target holds "with steps >= 5 ms": a shorter step is not that case
    window = _bench().calibration_window
    for kind in ("graph", "fit"):
        lo, hi = window(kind, 5)
        assert lo == 1.0 and hi > lo
        assert window(kind, 1) == (0.8, 1.2)
    assert window("eager", 5) == (0.8, 1.2)


def test_a_row_measured_outside_its_calibration_window_says_so():
    note = _bench().window_note
    assert note("fit", 5, 0.0055) == "" and note("graph", 5, 0.005) == ""
    assert "4.04 ms" in note("fit", 5, 0.00404) and "5-6.25 ms" in note("fit", 5, 0.00404)
    assert note("graph", 1, 0.0011) == "" and "0.8-1.2 ms" in note("eager", 1, 0.0013)
