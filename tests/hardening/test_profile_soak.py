"""Long runs: the profiler aggregates, it does not keep every event.

``fixtures/hardening/soak_train.py`` runs thousands of cheap steps (a retrace every 50 steps up to
step 1250, a None gradient every 10th step, a tf.data fetch every step) under ``tflint profile``.
Checked on real runs: once the script stops retracing, tflint's own Python heap (tracemalloc,
allocations made in tflint's files) grows by a few bytes a step at most, into series that are
capped, and the report of a 3000-step run has the same shape
and about the same size as the report of a 500-step run: series downsampled, examples capped,
one record per (kind, call site) with a count.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "hardening" / "soak_train.py"
TIMEOUT_S = 300
SERIES_CAP = 200  # points per series in the report
EXAMPLES_CAP = 20  # examples per record (tflint.runtime.store.MAX_EXAMPLES)
HEAP_EVERY = 250
# tflint's heap is bounded by the capacity of its series (a few hundred points each) and records;
# keeping one (step, time) pair per step would cost ~88 B/step, ~260 KB over 3000 steps on top.
HEAP_BUDGET_BYTES = 512 * 1024
# the last retrace is at step 1250; after it, only series may grow (16 B a point, capped). Keeping
# one Python float per step in a list costs 32 B a step.
STEADY_FROM = 1500
STEADY_BYTES_PER_STEP = 20

pytestmark = pytest.mark.slow


def _profile(tmp_path: Path, steps: int, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / f"soak-{steps}.json"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TFLINT_DEBUG_FAIL_HOOK", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tflint", "profile", str(FIXTURE), "--json", str(report), "--",
         "--steps", str(steps), *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc, json.loads(report.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("soak")
    short = _profile(tmp, 500)
    long = _profile(tmp, 3000, "--heap-every", str(HEAP_EVERY))
    return short, long


def _lists(obj, path="$"):
    """(path, length) of every list in a JSON document."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _lists(v, f"{path}.{k}")
    elif isinstance(obj, list):
        yield path, len(obj)
        for i, v in enumerate(obj):
            yield from _lists(v, f"{path}[{i}]")


def test_profiler_heap_is_bounded(runs):
    _, (proc, report) = runs
    heap = {int(s): int(b) for s, b in re.findall(r"^tflint-heap (\d+) (\d+)$", proc.stderr, re.MULTILINE)}
    assert sorted(heap) == list(range(HEAP_EVERY, 3001, HEAP_EVERY)), proc.stderr[-3000:]
    assert report["steps"] == 3000
    assert max(heap.values()) < HEAP_BUDGET_BYTES, heap
    # bounded series fill up and then stop growing: growth slows down. Storing every event
    # grows at a constant rate (the second half would grow at least as much as the first).
    first = heap[STEADY_FROM] - heap[HEAP_EVERY]
    second = heap[3000] - heap[STEADY_FROM]
    assert second < 0.9 * first, heap
    assert second / (3000 - STEADY_FROM) < STEADY_BYTES_PER_STEP, heap


def test_report_is_bounded_and_does_not_grow_with_steps(runs):
    (_, short), (_, long) = runs
    assert (short["steps"], long["steps"]) == (500, 3000)
    for report in (short, long):
        too_long = [(p, n) for p, n in _lists(report) if n > SERIES_CAP]
        assert not too_long, too_long
        for sig in report["signals"]:
            assert len(sig["details"].get("examples", [])) <= EXAMPLES_CAP
        assert "dropped_records" not in report["metrics"]
    # aggregated: one signal per kind and call site, with a count that grows instead
    kinds = lambda r: sorted(s["kind"] for s in r["signals"] if s["kind"] in ("retrace", "none-gradient"))
    assert kinds(short) == kinds(long) == ["none-gradient", "retrace"]
    grad = {r["steps"]: next(s for s in r["signals"] if s["kind"] == "none-gradient") for r in (short, long)}
    assert (grad[500]["details"]["count"], grad[3000]["details"]["count"]) == (50, 300)
    retrace = {r["steps"]: next(s for s in r["signals"] if s["kind"] == "retrace") for r in (short, long)}
    assert (retrace[500]["details"]["retraces"], retrace[3000]["details"]["retraces"]) == (10, 25)
    assert len(retrace[3000]["details"]["examples"]) == EXAMPLES_CAP
    # 6x the steps, well under 2x the bytes (the difference: series not yet full at 500 steps)
    size = {r["steps"]: len(json.dumps(r, separators=(",", ":"))) for r in (short, long)}
    assert size[3000] < 2 * size[500], size
