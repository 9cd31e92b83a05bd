"""GPU metrics through NVML (pynvml from nvidia-ml-py): utilisation and device memory.

NVML's memory figure is device-wide and TensorFlow reserves most GPU memory up front, so it is
context (headroom, utilisation), not the growth signal: that comes from TensorFlow's own
``get_memory_info('GPU:0')`` in :mod:`tflint.runtime.memory`. Without a GPU or NVML library this
degrades to ``{"available": False, "reason": ...}``.
"""

from __future__ import annotations

import time
from typing import Any

from tflint.runtime.hookbase import NEVER, Hook

MIN_INTERVAL_S = 1.0


def probe() -> tuple[Any, list[Any], str | None]:
    """(pynvml module, device handles, reason-if-unavailable)."""
    try:
        import pynvml
    except Exception as exc:  # noqa: BLE001
        return None, [], f"pynvml not importable: {type(exc).__name__}: {exc}"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound / DriverNotLoaded on CPU hosts
        msg = str(exc) or type(exc).__name__
        return None, [], f"NVML unavailable: {type(exc).__name__}: {msg}"
    try:
        n = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
    except Exception as exc:  # noqa: BLE001
        _shutdown(pynvml)
        return None, [], f"NVML device query failed: {type(exc).__name__}: {exc}"
    if not handles:
        _shutdown(pynvml)
        return None, [], "no GPU visible to NVML"
    return pynvml, handles, None


def _shutdown(pynvml: Any) -> None:
    try:
        pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001
        pass


class GpuSampler(Hook):
    kind = "gpu"

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._last = 0.0
        self.names: list[str] = []

    def check(self) -> str | None:
        nvml, handles, reason = probe()
        if reason:
            return f"GPU metrics unavailable: {reason}"
        self._nvml, self._handles = nvml, handles
        return None

    def _install(self) -> None:
        self.names = []
        for h in self._handles:
            try:
                name = self._nvml.nvmlDeviceGetName(h)
                self.names.append(name.decode() if isinstance(name, bytes) else str(name))
            except Exception:  # noqa: BLE001
                self.names.append("?")
        self.sample(0, force=True)

    def _uninstall(self) -> None:
        if self._nvml is not None:
            _shutdown(self._nvml)
        self._nvml = None
        self._handles = []
        self.status = "ok"

    def install(self) -> None:
        # NVML is (re)initialised on each install; an unavailable status is rechecked each time
        if self.status == "unavailable":
            self.status, self.reason = "ok", None
        super().install()

    def sample(self, step: int, now: float | None = None, force: bool = False) -> tuple[float, float]:
        """Take a sample when one is due (``force``: now); returns the (step, time) of the next."""
        if not (self.active or force) or self._nvml is None:
            return NEVER, NEVER
        now = time.perf_counter() if now is None else now
        if not force and now - self._last < MIN_INTERVAL_S:
            return NEVER, self._last + MIN_INTERVAL_S
        self._last = now
        nv = self._nvml
        for i, h in enumerate(self._handles):
            try:
                util = nv.nvmlDeviceGetUtilizationRates(h)
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                self.store.series(f"gpu{i}.utilization", 200).add(step, float(util.gpu))
                self.store.series(f"gpu{i}.memory_used_bytes", 200).add(step, float(mem.used))
                self.store.values[f"gpu{i}.memory_total_bytes"] = int(mem.total)
            except Exception as exc:  # noqa: BLE001
                self.fail(exc, "NVML sample")
                return NEVER, NEVER
        return NEVER, now + MIN_INTERVAL_S

    def summary(self) -> dict[str, Any]:
        if self.status != "ok" or not self.names:
            return {"available": False, "reason": self.reason or "GPU metrics unavailable: not sampled"}
        devices = []
        for i, name in enumerate(self.names):
            devices.append(
                {
                    "index": i,
                    "name": name,
                    "utilization_pct": self.store.series(f"gpu{i}.utilization", 200).downsample(200),
                    "memory_used_bytes": self.store.series(f"gpu{i}.memory_used_bytes", 200).downsample(200),
                    "memory_total_bytes": self.store.values.get(f"gpu{i}.memory_total_bytes"),
                }
            )
        return {"available": True, "devices": devices}
