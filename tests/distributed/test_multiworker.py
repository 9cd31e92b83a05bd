"""A real two-worker MultiWorkerMirroredStrategy job on 127.0.0.1, each worker under
`tflint profile --json`, worker 1 slowed down by its input pipeline; `tflint report merge`
names the straggler and lists the findings per worker."""

from __future__ import annotations

import subprocess

import pytest

from tests.distributed.cluster import FIXTURES, TFLINT, base_env
from tflint.profiler.report import Report
from tflint.runtime.health import HEALTH_KINDS

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # the job takes about 20 s


def _line_of(text: str) -> int:
    """The line of the worker script that contains ``text``."""
    source = (FIXTURES / "multiworker_train.py").read_text().splitlines()
    return next(i for i, line in enumerate(source, 1) if text in line)


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
    # measured split: the fast worker's time goes to waiting for its peer, not for its input
    fs, ss = fast["split"], slow["split"]
    assert fs["collectives_timed"] and fs["own_pipeline_timed"]
    assert fs["peer_wait_share"] > 0.5 and fs["input_wait_share"] < 0.15
    assert ss["input_wait_share"] > 0.4 and ss["peer_wait_share"] < fs["peer_wait_share"] - 0.3
    for split in (fs, ss):
        total = split["input_wait_s"] + split["peer_wait_s"] + split["compute_s"]
        assert total == pytest.approx(split["time_s"], rel=1e-3)


def test_fast_worker_does_not_claim_to_be_input_bound(two_worker_job):
    fast, slow = two_worker_job[0]
    assert fast.signals_of("input-stall") == []
    assert len(slow.signals_of("input-stall")) == 1


def test_merge_names_the_straggler_and_findings_per_worker(two_worker_job, tmp_path):
    _, paths, _ = two_worker_job
    out = tmp_path / "merged.json"
    proc = subprocess.run([*TFLINT, "report", "merge", *map(str, paths), "--json", str(out)],
                          env=base_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    merged = Report.load(out)

    stragglers = merged.metrics["stragglers"]
    assert [(s["worker"], s["task_type"], s["task_index"], s["cause"]) for s in stragglers] == [
        ("worker:1", "worker", 1, "input-wait")]
    assert set(merged.metrics["workers"]) == {"worker:0", "worker:1"}
    assert merged.metrics["workers"]["worker:0"]["waiting_for"]["worker"] == "worker:1"
    assert "waiting_for" not in merged.metrics["workers"]["worker:1"]

    none_grad = merged.signals_of("none-gradient")
    assert len(none_grad) == 1 and none_grad[0].details["workers"] == ["worker:0", "worker:1"]
    assert none_grad[0].details["replicas"] == [0, 1]  # each worker's replica, unioned
    found = merged.signals_of("straggler")
    assert len(found) == 1 and found[0].details["workers"] == ["worker:1"]
    assert "task type worker, index 1" in found[0].message and "own input pipeline" in found[0].message
    slow_map = _line_of("ds = ds.map(slow_down)")
    assert found[0].location is not None and found[0].location.line == slow_map
    # the input stall is worker 1's alone
    stall = merged.signals_of("input-stall")
    assert len(stall) == 1 and stall[0].details["workers"] == ["worker:1"]

    text = proc.stdout
    assert "worker:1 (task type worker, index 1) is the straggler" in " ".join(text.split())
    assert "caused by worker:1 (input-wait)" in " ".join(text.split())
    assert "Findings by worker" in text and "all workers" in text
    print(text)  # the merged report, for the record


def test_slow_compute_worker_is_the_straggler_with_compute_as_cause(slow_compute_job, tmp_path):
    reports, paths, _ = slow_compute_job
    fast, slow = (r.metrics["worker"]["split"] for r in reports)
    assert slow["compute_share"] > 0.5 and fast["peer_wait_share"] > 0.5
    assert fast["input_wait_share"] < 0.2 and slow["input_wait_share"] < 0.2
    for r in reports:  # neither worker is input-bound
        assert r.signals_of("input-stall") == [], [s.message for s in r.signals_of("input-stall")]
    out = tmp_path / "merged.json"
    proc = subprocess.run([*TFLINT, "report", "merge", *map(str, paths), "--json", str(out)],
                          env=base_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    merged = Report.load(out)
    assert [(s["worker"], s["cause"]) for s in merged.metrics["stragglers"]] == [("worker:1", "compute")]
    sig = merged.signals_of("straggler")
    assert len(sig) == 1 and "computing its step" in sig[0].message
    assert merged.metrics["workers"]["worker:0"]["waiting_for"] == {
        "worker": "worker:1", "cause": "compute", "peer_wait_share": fast["peer_wait_share"]}
    print(proc.stdout)  # the merged report, for the record


def test_training_health_names_the_unused_layer_on_every_worker(two_worker_job):
    """Each worker's probe runs inside the replica function of a MultiWorkerMirroredStrategy
    step: the layer that is never called is a dead parameter on both workers (its gradient is
    always None, and the step drops it), and nothing else about the run's health is reported."""
    reports, _, _ = two_worker_job
    for report in reports:
        kinds = sorted(s.kind for s in report.signals if s.kind in HEALTH_KINDS)
        assert kinds == ["dead-parameter"], [s.message for s in report.signals]
        (dead,) = report.signals_of("dead-parameter")
        d = dead.details
        assert d["reason"] == "gradient-none", d
        assert sorted(d["variables"]) == ["net/dense_2/bias", "net/dense_2/kernel"], d
        assert dead.location is not None and dead.location.file.endswith("multiworker_train.py")


def test_a_non_finite_loss_is_localised_on_every_worker(nan_worker_job):
    """The loss of each worker's replica turns -inf at step 21 (the log of a count that reaches
    0): each report names that step, the Log op and its line, inside the replica function."""
    reports, _, _ = nan_worker_job
    log_line = _line_of("tf.math.log(remaining)")
    for report in reports:
        (nan,) = report.signals_of("nan-inf")
        d = nan.details
        assert d["step"] == 21 and d["tensor"] == "the loss", d
        assert d["op"] == "Log" and d["localised"], d
        assert nan.location is not None and nan.location.line == log_line, (nan.location, log_line)
        assert "log of zero" in d["cause"]
