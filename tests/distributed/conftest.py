"""Real reports for the distributed tests, produced once per test session by running the
fixtures under ``tflint profile --json`` (a two-worker MultiWorkerMirroredStrategy job on
loopback, and MirroredStrategy runs over logical CPU devices)."""

from __future__ import annotations

import subprocess

import pytest

from tests.distributed.cluster import FIXTURES, TFLINT, base_env, run_job
from tflint.profiler.report import Report

SLOW_INPUT_MS = "40"


def _fail_with_logs(runs, what: str) -> None:
    logs = "\n".join(f"--- worker {r.index} rc={r.returncode}\n{r.stderr[-2500:]}" for r in runs)
    pytest.fail(f"{what} failed:\n{logs}")


@pytest.fixture(scope="session")
def two_worker_job(tmp_path_factory):
    """(reports, paths, runs) of a two-worker job whose worker 1 has a slow input pipeline."""
    tmp = tmp_path_factory.mktemp("multiworker")
    runs = run_job(tmp, FIXTURES / "multiworker_train.py", n=2,
                   env_per_worker=[{"SLOW_INPUT_MS": "0"}, {"SLOW_INPUT_MS": SLOW_INPUT_MS}],
                   script_args=["--steps", "30"], timeout=180)
    if any(r.returncode != 0 or not r.report.exists() for r in runs):
        _fail_with_logs(runs, "two-worker MultiWorkerMirroredStrategy job")
    return [Report.load(r.report) for r in runs], [r.report for r in runs], runs


@pytest.fixture(scope="session")
def slow_compute_job(tmp_path_factory):
    """(reports, paths, runs) of a two-worker job whose worker 1 computes 40 ms longer per step."""
    tmp = tmp_path_factory.mktemp("multiworker_compute")
    runs = run_job(tmp, FIXTURES / "multiworker_train.py", n=2,
                   env_per_worker=[{"SLOW_COMPUTE_MS": "0"}, {"SLOW_COMPUTE_MS": SLOW_INPUT_MS}],
                   script_args=["--steps", "30"], timeout=180)
    if any(r.returncode != 0 or not r.report.exists() for r in runs):
        _fail_with_logs(runs, "two-worker job with a slow-compute worker")
    return [Report.load(r.report) for r in runs], [r.report for r in runs], runs


@pytest.fixture(scope="session")
def nan_worker_job(tmp_path_factory):
    """(reports, paths, runs) of a two-worker job whose loss turns -inf at step 21 (log of 0)."""
    tmp = tmp_path_factory.mktemp("multiworker_nan")
    runs = run_job(tmp, FIXTURES / "multiworker_train.py", n=2, env_per_worker=[{}, {}],
                   script_args=["--steps", "30", "--nan-at", "20"], timeout=180)
    if any(r.returncode != 0 or not r.report.exists() for r in runs):
        _fail_with_logs(runs, "two-worker job with a non-finite loss")
    return [Report.load(r.report) for r in runs], [r.report for r in runs], runs


def profile_script(tmp, script, json_name, args, timeout=150):
    out = tmp / json_name
    cmd = [*TFLINT, "profile", str(script), "--json", str(out), "--no-live", "--", *args]
    proc = subprocess.run(cmd, cwd=tmp, env=base_env(), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not out.exists():
        pytest.fail(f"tflint profile {script.name} {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return out, proc


@pytest.fixture(scope="session")
def mirrored_run(tmp_path_factory):
    """(report, path, completed process) of the MirroredStrategy fixture over 2 logical CPUs."""
    tmp = tmp_path_factory.mktemp("mirrored")
    path, proc = profile_script(tmp, FIXTURES / "mirrored_train.py", "mirrored.json",
                                ["--replicas", "2", "--steps", "20", "--unused-layer"])
    return Report.load(path), path, proc


@pytest.fixture(scope="session")
def mirrored_slow_run(tmp_path_factory):
    """(report, path, completed process) of the MirroredStrategy fixture with a slow input map."""
    tmp = tmp_path_factory.mktemp("mirrored_slow")
    path, proc = profile_script(tmp, FIXTURES / "mirrored_train.py", "mirrored_slow.json",
                                ["--replicas", "2", "--steps", "20", "--slow-input", SLOW_INPUT_MS])
    return Report.load(path), path, proc


@pytest.fixture(scope="session")
def mirrored_fit_run(tmp_path_factory):
    """(report, path, completed process) of Keras fit under MirroredStrategy (2 logical CPUs)."""
    tmp = tmp_path_factory.mktemp("mirrored_fit")
    path, proc = profile_script(tmp, FIXTURES / "mirrored_fit.py", "mirrored_fit.json", ["--epochs", "2"])
    return Report.load(path), path, proc
