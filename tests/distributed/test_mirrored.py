"""MirroredStrategy over two logical CPU devices, under `tflint profile`: the report is tagged
with the strategy, its replicas and the batch split, and the None gradient of a variable that
every replica leaves out of the loss is found."""

from __future__ import annotations

import subprocess

import pytest

from tests.distributed.cluster import TFLINT, base_env

pytestmark = pytest.mark.timeout(300)


def test_report_is_tagged_with_strategy_replicas_and_batch(mirrored_run):
    report, _, _ = mirrored_run
    worker = report.metrics["worker"]
    assert worker["strategy"] == "MirroredStrategy"
    assert worker["num_replicas"] == 2
    assert worker["local_replicas"] == 2
    assert worker["global_batch_size"] == 32
    assert worker["per_replica_batch_size"] == 16
    assert worker["id"] == "local" and worker["task_type"] is None and worker["is_chief"] is True


def test_distributed_loop_is_timed(mirrored_run):
    report, _, _ = mirrored_run
    worker = report.metrics["worker"]
    # 20 steps: the first (tracing) is not counted, nor the batch fetched before `break`
    assert 15 <= worker["steps_observed"] <= 20
    step = worker["step_time_s"]
    assert 0 < step["median"] <= step["p90"]
    assert 0 <= worker["input_wait_share"] < 1


def test_none_gradient_seen_across_replicas(mirrored_run):
    report, _, _ = mirrored_run
    signals = report.signals_of("none-gradient")
    assert signals, [s.message for s in report.signals]
    assert signals[0].location is not None
    assert signals[0].location.file.endswith("mirrored_train.py")


def test_report_show_renders_the_worker_table(mirrored_run):
    _, path, _ = mirrored_run
    proc = subprocess.run([*TFLINT, "report", "show", str(path)], env=base_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Workers" in proc.stdout
    assert "Mirrored ×2" in proc.stdout
    assert "32/16" in proc.stdout
