"""GPU metrics degrade cleanly where there is no GPU/NVML, and work where there is one."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from tflint.runtime import watch  # noqa: E402
from tflint.runtime.gpu import probe  # noqa: E402


def _nvml_works() -> bool:
    return probe()[2] is None


def test_probe_reports_a_reason_or_devices():
    nvml, handles, reason = probe()
    if reason is None:
        assert nvml is not None and handles
    else:
        assert nvml is None and handles == []
        assert reason and "\n" not in reason


@pytest.mark.skipif(_nvml_works(), reason="NVML is available here")
def test_without_nvml_report_says_unavailable_and_why():
    with watch() as s:
        tf.reduce_sum(tf.ones([3]))
    gpu = s.report().metrics["gpu"]
    assert gpu["available"] is False
    assert gpu["reason"].startswith("GPU metrics unavailable: ")
    assert len(gpu["reason"]) > len("GPU metrics unavailable: ")


@pytest.mark.skipif(not _nvml_works(), reason="needs a GPU with NVML")
def test_with_nvml_devices_are_sampled():
    with watch() as s:

        @tf.function
        def f(x):
            return x * 2.0

        for _ in range(5):
            f(tf.ones([3]))
    gpu = s.report().metrics["gpu"]
    assert gpu["available"] is True
    dev = gpu["devices"][0]
    assert dev["name"] and dev["memory_total_bytes"] > 0
    assert dev["utilization_pct"] and dev["memory_used_bytes"]
