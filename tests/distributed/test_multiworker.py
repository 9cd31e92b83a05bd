"""A real two-worker MultiWorkerMirroredStrategy job on 127.0.0.1, each worker under
`tflint profile --json`, worker 1 slowed down by its input pipeline; `tflint report merge`
names the straggler and lists the findings per worker."""

from __future__ import annotations

import subprocess

import pytest

from tests.distributed.cluster import TFLINT, base_env
from tflint.profiler.report import Report

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # the job takes about 20 s


def test_each_worker_report_is_tagged_with_its_role(two_worker_job):
    reports, _, _ = two_worker_job
    for index, report in enumerate(reports):
        w = report.metrics["worker"]
        assert w["id"] == f"worker:{index}"
        assert (w["task_type"], w["task_index"]) == ("worker", index)
        assert w["role_source"] == "TF_CONFIG"
        assert w["cluster"] == {"worker": 2} and w["cluster_size"] == 2
        assert w["is_chief"] is (index == 0)
        assert w["strategy"] == "MultiWorkerMirroredStrategy"
        assert w["num_replicas"] == 2 and w["local_replicas"] == 1
        assert w["global_batch_size"] == 32 and w["per_replica_batch_size"] == 16


def test_none_gradient_names_the_workers_replica(two_worker_job):
    reports, _, _ = two_worker_job
    for index, report in enumerate(reports):
        found = report.signals_of("none-gradient")
        assert len(found) == 1, [s.message for s in found]
        assert found[0].details["replicas"] == [index] and found[0].details["replicas_in_sync"] == 2
        assert f"on replica {index} of 2" in found[0].message


def test_slow_worker_waits_for_input_fast_worker_waits_for_it(two_worker_job):
    reports, _, _ = two_worker_job
    fast, slow = (r.metrics["worker"] for r in reports)
    assert slow["input_wait_share"] > 2 * fast["input_wait_share"]
    # synchronous all-reduce: the fast worker's steps are as long as the slow one's
    assert fast["step_time_s"]["median"] > 0.5 * slow["step_time_s"]["median"]


def test_merge_names_the_straggler_and_findings_per_worker(two_worker_job, tmp_path):
    _, paths, _ = two_worker_job
    out = tmp_path / "merged.json"
    proc = subprocess.run([*TFLINT, "report", "merge", *map(str, paths), "--json", str(out)],
                          env=base_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    merged = Report.load(out)

    stragglers = merged.metrics["stragglers"]
    assert [(s["worker"], s["cause"]) for s in stragglers] == [("worker:1", "input-wait")]
    assert set(merged.metrics["workers"]) == {"worker:0", "worker:1"}

    none_grad = merged.signals_of("none-gradient")
    assert len(none_grad) == 1 and none_grad[0].details["workers"] == ["worker:0", "worker:1"]
    assert none_grad[0].details["replicas"] == [0, 1]  # each worker's replica, unioned
    stall = [s for s in merged.signals_of("input-stall") if s.details.get("straggler")]
    assert len(stall) == 1 and stall[0].details["workers"] == ["worker:1"]
    assert "worker:1" in stall[0].message

    text = proc.stdout
    assert "worker:1 is a straggler" in text
    assert "Findings by worker" in text and "all workers" in text
