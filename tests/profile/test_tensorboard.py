"""`--logdir DIR`: TensorBoard scalars, read back from the event files."""

from __future__ import annotations

import glob
import os

import pytest

from tests.profile.conftest import FIXTURES, run_profile


def _read_scalars(run_dir: str) -> dict[str, dict[int, float]]:
    import tensorflow as tf
    from tensorflow.python.framework import tensor_util

    files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
    assert files, f"no event files in {run_dir}"
    out: dict[str, dict[int, float]] = {}
    for path in files:
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.HasField("tensor"):
                    number = float(tensor_util.MakeNdarray(value.tensor))
                else:
                    number = float(value.simple_value)
                out.setdefault(value.tag, {})[int(event.step)] = number
    return out


def _logdir(run) -> str:
    return run.cmd[run.cmd.index("--logdir") + 1]


def test_scalars_written_and_match_the_report(profiled):
    run = profiled("input_stall_fit.py")
    assert run.returncode == 0, run.explain()
    scalars = _read_scalars(os.path.join(_logdir(run), "tflint"))
    report = run.report
    m = report["metrics"]

    for tag in ("tflint/step_time_s", "tflint/input_wait_share", "tflint/retraces",
                "tflint/host_rss_bytes"):
        assert tag in scalars, sorted(scalars)

    # every step-time point of the report is in TensorBoard, at its step, with its value
    step_time = scalars["tflint/step_time_s"]
    assert len(step_time) == len({int(x) for x, _ in m["step_time_s"]}) >= 10
    for x, y in m["step_time_s"]:
        assert step_time[int(x)] == pytest.approx(y, rel=1e-6)

    rss = scalars["tflint/host_rss_bytes"]
    last_x, last_y = m["host_rss_bytes"][-1]
    assert rss[int(last_x)] == pytest.approx(last_y, rel=1e-6)

    waits = scalars["tflint/input_wait_share"]
    assert all(0.0 <= v <= 1.0 for v in waits.values())
    if m["input_wait_share"]["series"]:
        x, y = m["input_wait_share"]["series"][-1]
        assert waits[int(x)] == pytest.approx(y, rel=1e-6)

    retraces = scalars["tflint/retraces"]
    assert max(retraces.values()) == pytest.approx(m["retraces"])


def test_logdir_is_created_and_shared_with_training_runs(tmp_path):
    logdir = tmp_path / "logs" / "experiment-1"
    (tmp_path / "logs").mkdir()
    run = run_profile(FIXTURES / "exit_code.py", options=("--logdir", str(logdir)))
    assert run.returncode == 3, run.explain()
    assert sorted(os.listdir(logdir)) == ["tflint"]
    scalars = _read_scalars(str(logdir / "tflint"))
    assert "tflint/host_rss_bytes" in scalars


def test_logdir_that_is_a_file_is_a_usage_error(tmp_path):
    target = tmp_path / "not-a-dir"
    target.write_text("")
    run = run_profile(FIXTURES / "empty.py", options=("--logdir", str(target)))
    assert run.returncode == 2
    assert "not a directory" in run.stderr
