"""The NVML sampler on its own (no TensorFlow needed): it samples real devices where NVML and a
GPU exist, and otherwise says, in one line, why GPU metrics are unavailable. The same tests run
on CPU-only CI (the degraded path) and on a GPU machine (the sampling path)."""

from __future__ import annotations

from types import SimpleNamespace

from tflint.runtime.gpu import GpuSampler, probe
from tflint.runtime.store import Store


def _sampler() -> GpuSampler:
    return GpuSampler(SimpleNamespace(store=Store()))


def test_summary_is_either_sampled_devices_or_a_reason():
    sampler = _sampler()
    sampler.install()
    try:
        for step in range(1, 4):
            sampler.sample(step, force=True)
        summary = sampler.summary()
    finally:
        sampler.uninstall()
    nvml, _handles, reason = probe()
    if reason is None:
        assert summary["available"] is True, summary
        assert summary["devices"], summary
        for dev in summary["devices"]:
            assert dev["name"] and dev["name"] != "?"
            assert dev["memory_total_bytes"] > 0
            assert len(dev["memory_used_bytes"]) >= 3
            assert all(0 <= u <= 100 for _step, u in dev["utilization_pct"])
        nvml.nvmlShutdown()
    else:
        assert summary["available"] is False
        assert summary["reason"].startswith("GPU metrics unavailable: ")
        assert "\n" not in summary["reason"]
        assert sampler.status == "unavailable"


def test_install_uninstall_can_repeat():
    sampler = _sampler()
    for _ in range(3):
        sampler.install()
        sampler.sample(1, force=True)
        first = sampler.summary()
        sampler.uninstall()
        assert sampler.summary()["available"] == first["available"]
    if first["available"]:
        assert len(first["devices"]) == len({d["index"] for d in first["devices"]})
