"""A script that configures TensorFlow's devices at start-up runs unchanged under `tflint profile`.

TensorFlow refuses memory growth, visible/logical devices, thread pools and collective ops once
its runtime is initialised; the hooks must therefore never initialise it while installing. The
fixture configures all of these at its very top (as GPU training scripts do), then trains a few
steps; the profiled run must print exactly what the plain run prints, and the hooks that need
devices (placement, memory, the in-graph input probe) must still have done their work, later.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "runtime" / "startup_config_train.py"
TIMEOUT_S = 180
SIGNAL_KINDS = ("retrace", "none-gradient", "soft-placement", "input-stall", "memory-growth")

pytestmark = pytest.mark.timeout(2 * TIMEOUT_S + 30)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env.pop("TFLINT_DEBUG_FAIL_HOOK", None)
    return env


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("startup")
    plain = subprocess.run([sys.executable, str(FIXTURE)], cwd=tmp, env=_env(), capture_output=True,
                           text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    report = tmp / "report.json"
    profiled = subprocess.run([sys.executable, "-m", "tflint", "profile", str(FIXTURE), "--json", str(report),
                               "--no-live"], cwd=tmp, env=_env(), capture_output=True, text=True,
                              timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    return plain, profiled, report


def test_plain_run_configures_devices(runs):
    plain, _, _ = runs
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "configured: 2 logical CPUs" in plain.stdout


def test_profiled_run_is_unchanged(runs):
    plain, profiled, report = runs
    assert profiled.returncode == 0, profiled.stderr[-4000:]
    assert "cannot be modified after being initialized" not in profiled.stderr
    assert "Traceback" not in profiled.stderr
    assert profiled.stdout == plain.stdout
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["exit_code"] == 0
    assert data["metrics"]["run"]["outcome"] == "completed"


def test_hooks_did_their_work_after_the_runtime_came_up(runs):
    _, profiled, report = runs
    assert report.exists(), profiled.stderr[-4000:]
    data = json.loads(report.read_text(encoding="utf-8"))
    m = data["metrics"]
    hooks = m["hooks"]
    assert all(hooks[k]["status"] == "ok" for k in (*SIGNAL_KINDS, "steps")), hooks
    assert data["steps"] >= 15
    # devices were listed after the script split the CPU in two (not before: that would have failed)
    assert m["placement"]["available_devices"] == ["CPU:0", "CPU:1"]
    assert m["placement"]["graph_nodes_checked"] > 0  # graph collection started late, still worked
    # the in-graph input probe (its accumulator is created lazily) timed the fetches inside fetch_and_step
    assert m["input"]["in_graph_fetches"] == 20
    assert m["input"]["eager_fetches"] == 20
    # TensorFlow allocator stats were probed once the runtime was up
    assert "CPU:0" in m["device_memory_bytes"]
    # nothing is wrong with this script: no retrace, None gradient or placement fallback
    kinds = {s["kind"] for s in data["signals"]}
    assert not kinds & {"retrace", "none-gradient", "soft-placement"}, [s["message"] for s in data["signals"]]


def test_hooks_leave_the_runtime_uninitialised_until_the_script_starts_it(tmp_path):
    """In-process library use: entering watch() before any TensorFlow work, then configuring
    logical devices inside the session, works; so does leaving and re-entering it."""
    code = (
        "import tensorflow as tf\n"
        "from tflint.runtime import watch\n"
        "s = watch()\n"
        "with s:\n"
        "    cpu = tf.config.list_physical_devices('CPU')[0]\n"
        "    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)\n"
        "    x = tf.reduce_sum(tf.ones([4]))\n"
        "with s:\n"
        "    y = tf.reduce_sum(tf.ones([4]))\n"
        "print(len(tf.config.list_logical_devices('CPU')), float(x + y))\n"
        "print(s.report().metrics['placement']['available_devices'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "3 8.0"
    assert lines[1] == "['CPU:0', 'CPU:1', 'CPU:2']"
