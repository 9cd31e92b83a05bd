"""MirroredStrategy over two logical CPU devices, under `tflint profile`: the report is tagged
with the strategy, its replicas and the batch split, and the None gradient of a variable that
every replica leaves out of the loss is found."""

from __future__ import annotations

import subprocess

import pytest

from tests.distributed.cluster import FIXTURES, TFLINT, base_env

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
    # traced once per replica, reported once, naming the replicas
    assert len(signals) == 1, [s.message for s in signals]
    sig = signals[0]
    assert sig.location is not None
    assert sig.location.file.endswith("mirrored_train.py")
    assert sig.details["replicas"] == [0, 1] and sig.details["replicas_in_sync"] == 2
    assert sig.details["count"] == 2
    assert "on every replica (0, 1 of 2)" in sig.message


def test_each_step_is_one_fetch_not_one_per_replica(mirrored_run):
    """The distributed fetch is timed once; its per-replica inner fetches are not counted again."""
    report, _, _ = mirrored_run
    inp = report.metrics["input"]
    assert inp["eager_fetches"] == 21  # 20 steps, plus the batch fetched before `break`
    assert inp["in_graph_fetches"] == 0
    assert report.metrics["worker"]["steps_observed"] == inp["eager_fetches"] - 2


def test_clean_mirrored_run_has_no_placement_fallbacks(mirrored_run):
    """Mirrored variables are initialised by reading the primary copy under another replica's
    device scope; such reads run where the variable lives (colocation), not a fallback."""
    report, _, _ = mirrored_run
    assert report.signals_of("soft-placement") == [], [s.message for s in report.signals_of("soft-placement")]
    assert report.metrics["placement"]["available_devices"] == ["CPU:0", "CPU:1"]
    assert report.metrics["hooks"]["soft-placement"]["status"] == "ok"


def test_slow_input_points_at_the_users_pipeline(mirrored_slow_run):
    """The stall is found through the distributed iterator and described from the user's
    dataset, not from the shard/rebatch datasets tf.distribute wraps around it."""
    report, _, _ = mirrored_slow_run
    stalls = report.signals_of("input-stall")
    assert len(stalls) == 1, [s.message for s in report.signals]
    stall = stalls[0]
    ds = stall.details["dataset"]
    assert ds["chain"][0] == "PrefetchDataset" and "RebatchDataset" not in ds["chain"]
    assert ds["final_prefetch"] is True and ds["py_function"] is True
    source = (FIXTURES / "mirrored_train.py").read_text().splitlines()
    assert stall.location.file.endswith("mirrored_train.py")
    assert "prefetch" in source[stall.location.line - 1]
    worker = report.metrics["worker"]
    assert worker["input_wait_share"] > 0.2


def test_report_show_renders_the_worker_table(mirrored_run):
    _, path, _ = mirrored_run
    proc = subprocess.run([*TFLINT, "report", "show", str(path)], env=base_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Workers" in proc.stdout
    assert "Mirrored ×2" in proc.stdout
    assert "32/16" in proc.stdout


def test_keras_fit_fetches_inside_the_graph_once_per_step(mirrored_fit_run):
    """Keras fetches each distributed batch inside its train function: one in-graph probe
    around the distributed fetch (not one per replica), described from the user's pipeline."""
    report, _, proc = mirrored_fit_run
    assert "done: replicas=2" in proc.stdout
    inp = report.metrics["input"]
    assert inp["in_graph_fetches"] == 16  # 2 epochs x 8 batches
    ds = inp["dataset"]
    assert ds["chain"] == ["PrefetchDataset", "MapDataset", "BatchDataset", "TensorSliceDataset"]
    assert ds["py_function"] is True and ds["final_prefetch"] is True
    source = (FIXTURES / "mirrored_fit.py").read_text().splitlines()
    assert "prefetch" in source[ds["sites"][0][1] - 1]
    assert report.metrics["worker"]["strategy"] == "MirroredStrategy"
    assert report.metrics["worker"]["num_replicas"] == 2
    assert not report.signals_of("soft-placement") and not report.signals_of("none-gradient")
