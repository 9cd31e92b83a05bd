"""`merge()` and `tflint report` on real saved reports (produced by running the fixtures)."""

from __future__ import annotations

import copy
import subprocess

import pytest

from tests.distributed.cluster import TFLINT, base_env
from tflint.profiler.merge import (
    RATIO,
    STEP_TIME_FLOOR_S,
    find_stragglers,
    merge,
    worker_row,
)
from tflint.profiler.report import Report

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def test_per_worker_rows_and_union(two_worker_job):
    reports, paths, _ = two_worker_job
    merged = merge(reports, sources=[str(p) for p in paths])
    rows = merged.metrics["workers"]
    assert list(rows) == ["worker:0", "worker:1"]
    for wid, report in zip(rows, reports):
        row = rows[wid]
        assert row["timing_source"] == "distributed iterator"
        assert 0 < row["step_time_s"]["median"] <= row["step_time_s"]["p90"]
        assert row["step_time_s"]["n"] == report.metrics["worker"]["steps_observed"]
        assert row["input_wait_share"] == report.metrics["worker"]["input_wait_share"]
        assert row["strategy"] == "MultiWorkerMirroredStrategy"
        # retraces and memory per worker
        assert row["retraces"] == report.metrics["retraces"]
        assert row["host_rss_peak_bytes"] == max(y for _, y in report.metrics["host_rss_bytes"])
        assert set(row["device_memory_peak_bytes"]) <= set(report.metrics["device_memory_bytes"])
    # every finding of every worker is in the union, each listing where it was seen
    for wid, report in zip(rows, reports):
        for s in report.signals:
            assert any(m.kind == s.kind and wid in m.details["workers"] for m in merged.signals)
    assert merged.steps == max(r.steps for r in reports)
    assert merged.exit_code == 0


def test_straggler_does_not_depend_on_report_order(two_worker_job):
    reports, _, _ = two_worker_job
    forward = merge(reports).metrics["stragglers"]
    backward = merge(list(reversed(reports))).metrics["stragglers"]
    assert [s["worker"] for s in forward] == [s["worker"] for s in backward] == ["worker:1"]


def test_identical_workers_have_no_straggler(two_worker_job):
    reports, _, _ = two_worker_job
    fast = reports[0]
    merged = merge([fast, copy.deepcopy(fast)])
    assert list(merged.metrics["workers"]) == ["worker:0", "worker:0#2"]
    assert merged.metrics["stragglers"] == []
    assert not [s for s in merged.signals if s.details.get("straggler")]
    assert merged.signals_of("straggler") == []


def test_single_report_merges_to_itself(mirrored_run):
    report, path, _ = mirrored_run
    merged = merge([report], sources=[str(path)])
    assert merged.metrics["stragglers"] == []
    assert [s.kind for s in merged.signals] == [s.kind for s in report.signals]
    assert all(s.details["workers"] == ["mirrored"] for s in merged.signals)  # untagged role: named by file


def test_step_time_rule_on_real_rows(two_worker_job):
    """The step-time test, on rows of the real job with worker 0's steps stretched."""
    reports, _, _ = two_worker_job
    rows = {f"w{i}": worker_row(r) for i, r in enumerate(reports)}
    for row in rows.values():
        row["input_wait_share"] = 0.0  # isolate the step-time test
        row["split"] = None  # as in reports without a measured split
    base = rows["w1"]["step_time_s"]["median"]
    rows["w0"]["step_time_s"] = {**rows["w0"]["step_time_s"], "median": base * (RATIO + 0.5) + STEP_TIME_FLOOR_S}
    found = find_stragglers(rows)
    assert [(s["worker"], s["cause"]) for s in found] == [("w0", "step-time")]
    rows["w0"]["step_time_s"]["median"] = base * 1.2  # within 1.5x: not a straggler
    assert find_stragglers(rows) == []


def test_merged_report_round_trips_through_json(two_worker_job, tmp_path):
    reports, _, _ = two_worker_job
    merged = merge(reports)
    merged.save(tmp_path / "m.json")
    assert Report.load(tmp_path / "m.json").to_dict() == Report.from_json(merged.to_json()).to_dict()


@pytest.mark.parametrize("content,needle", [
    (None, "no such file"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "not a tflint profile report"),
    ('{"tflint_version": "0", "signals": [{"kind": "retrace"}]}', "malformed tflint report"),
])
def test_bad_report_files_fail_with_one_line(tmp_path, content, needle):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    for args in (["report", "show", str(path)], ["report", "merge", str(path)]):
        proc = subprocess.run([*TFLINT, *args], env=base_env(), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr
