"""Memory sampling (host RSS, TensorFlow allocator stats) and the robust growth trend.

Samples are taken on step ticks at the next point of a ``MIN_INTERVAL_S`` clock grid (so slow
steps are each sampled, and ~5 ms steps every tenth; the grid is shared with the other hooks'
reads), and in the first ``DENSE_STEPS`` steps also every ``EVERY_N_STEPS``-th step: host RSS from
``/proc/self/statm`` read through a file descriptor kept open (about 7 µs; reopening it each time
costs ~15x more), falling back to ``resource.getrusage`` peak RSS elsewhere; and
``tf.config.experimental.get_memory_info`` for ``CPU:0`` (works with oneDNN, counts allocations
>= 256 KiB only) and ``GPU:0`` when present. Which devices have allocator stats is found at the
first sample taken after TensorFlow's runtime is initialised (never earlier: that would stop the
script from configuring its devices at start-up).

The trend (``analyze``) drops the warm-up, downsamples, and combines a Theil–Sen slope with a
Mann–Kendall test (``tflint.profiler.stats``) and a magnitude gate, so a clean run's slow creep, allocator steps and single
spikes are not reported as growth; the growth must still be going on over the last third of the
window, so a one-off rise that then levels off is not reported either.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from tflint.profiler import stats as _stats
from tflint.runtime.hookbase import DENSE_STEPS, NEVER, Hook, next_tick

KIND = "memory-growth"
MIN_INTERVAL_S = 0.05  # a sample (and the call of every per-step handler) costs ~20-90 µs in place
EVERY_N_STEPS = 16  # ... or, for the first DENSE_STEPS steps, every 16th step: short runs of tiny steps still get a trend

# growth gate (see analyze)
WARMUP_FRACTION = 0.2
MIN_SLOPE_BYTES_PER_STEP = 4 * 1024
MIN_Z = 3.0
MIN_TOTAL_GROWTH = 32 * 1024 * 1024
MIN_GROWTH_FRACTION = 0.05
MIN_POINTS = 12
# a trend claims growth per step: over fewer steps than this, one-off costs (traces, allocator
# pools) read as growth (an 18-step run whose 3 retraces took 155 MiB, flat when run longer)
MIN_WINDOW_STEPS = 32
# ... and the growth must go on: over the last third of the window alone, the rate must still
# be significant and large enough to pass the gate had it held over the whole window. A one-off
# level shift (a second ``fit`` that retraces and builds new pipelines, validation and evaluate
# functions traced for the first time, allocator arenas filling in a short run) rises and then
# stays flat
LATE_FRACTION = 1 / 3
MIN_Z_LATE = 2.0
MIN_LATE_POINTS = 5  # the fewest samples whose Mann–Kendall z can exceed MIN_Z_LATE


class MemorySampler(Hook):
    kind = KIND

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._fd: int | None = None
        self._page = 4096
        self._next_t = 0.0
        self._last_step = 0
        self._tf_devices: list[str] = []
        self._get_memory_info: Any = None
        self._tf_pending = True  # TensorFlow allocator stats not probed yet (runtime not up)
        self.rss = self.store.series("host_rss_bytes", 512)
        self.tf_mem: dict[str, Any] = {}
        self.rss_source = "none"
        self.samples = 0
        self.baseline_rss: int | None = None

    def check(self) -> str | None:
        return None

    def _install(self) -> None:
        if self._fd is None:
            try:
                self._fd = os.open("/proc/self/statm", os.O_RDONLY)
                self._page = os.sysconf("SC_PAGE_SIZE")
                self.rss_source = "statm"
            except (OSError, ValueError, AttributeError):
                self._fd = None
                try:
                    import resource  # noqa: F401

                    self.rss_source = "getrusage-peak"
                except ImportError:
                    self.rss_source = "none"
        self.sample(0, force=True)

    def _probe_tf_memory(self) -> None:
        """Find the devices whose TensorFlow allocator stats can be read. Runs only once the
        runtime is initialised: listing devices or reading memory info would initialise it, and
        a script configuring devices at start-up would then fail."""
        from tflint.runtime.hookbase import runtime_initialized

        if not runtime_initialized():
            return
        self._tf_pending = False
        try:
            import tensorflow as tf

            gmi = tf.config.experimental.get_memory_info
            devices = ["CPU:0"]
            try:
                if tf.config.list_logical_devices("GPU"):
                    devices.append("GPU:0")
            except Exception:  # noqa: BLE001
                pass
            ok = []
            for d in devices:
                try:
                    gmi(d)
                    ok.append(d)
                    self.tf_mem.setdefault(d, self.store.series(f"tf_memory_bytes.{d}", 512))
                except Exception as exc:  # noqa: BLE001 - e.g. oneDNN off: no CPU allocator stats
                    self.store.values[f"tf_memory_unavailable.{d}"] = f"{type(exc).__name__}: {exc}".strip()[:200]
            self._tf_devices = ok
            self._get_memory_info = gmi
        except Exception as exc:  # noqa: BLE001
            self.store.values["tf_memory_unavailable"] = f"{type(exc).__name__}: {exc}"[:200]

    def _uninstall(self) -> None:
        pass

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def read_rss(self) -> int | None:
        fd = self._fd
        if fd is not None:
            try:
                data = os.pread(fd, 128, 0)
                return int(data.split()[1]) * self._page
            except (OSError, ValueError, IndexError):
                return None
        if self.rss_source == "getrusage-peak":
            import resource

            return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
        return None

    def sample(self, step: int, now: float | None = None, force: bool = False) -> tuple[float, float]:
        """Take a sample when one is due (``force``: now). Returns when the next one is due: the
        step and the time, whichever comes first."""
        now = time.perf_counter() if now is None else now
        if not self.active and not force:
            return NEVER, NEVER
        if not force and now < self._next_t and (step >= DENSE_STEPS or 0 <= step - self._last_step < EVERY_N_STEPS):
            return (self._last_step + EVERY_N_STEPS if step < DENSE_STEPS else NEVER), self._next_t
        self._last_step = step
        if self._tf_pending:
            self._probe_tf_memory()
        self.samples += 1
        rss = self.read_rss()
        if rss is not None:
            self.rss.add(step, rss)
            if self.baseline_rss is None:
                self.baseline_rss = rss
        gmi = self._get_memory_info
        if gmi is not None:
            for d in self._tf_devices:
                try:
                    self.tf_mem[d].add(step, gmi(d)["current"])
                except Exception:  # noqa: BLE001
                    pass
        self._next_t = next_tick(now, MIN_INTERVAL_S)  # the read clock's grid is a multiple of this one
        return (step + EVERY_N_STEPS if step < DENSE_STEPS else NEVER), self._next_t

    def tf_memory_summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self._tf_pending:
            try:
                self._probe_tf_memory()
            except Exception:  # noqa: BLE001
                pass
        gmi = self._get_memory_info
        for d in self._tf_devices:
            entry: dict[str, Any] = {"series": self.tf_mem[d].downsample(200)}
            try:
                info = gmi(d)
                entry["current"] = int(info["current"])
                entry["peak"] = int(info["peak"])
            except Exception:  # noqa: BLE001
                pass
            out[d] = entry
        for k, v in self.store.values.items():
            if k.startswith("tf_memory_unavailable."):
                out[k.split(".", 1)[1]] = {"available": False, "reason": v}
        return out


# ---------------------------------------------------------------------------- trend
# the estimators live in the shared statistics module; these names are kept for callers
theil_sen = _stats.theil_sen
mann_kendall_z = _stats.mann_kendall_z


def analyze(points: list[list[float]] | list[tuple[float, float]], max_points: int = 200) -> dict[str, Any]:
    """Trend of a (step, bytes) series: slope per step, MK z, growth, verdict."""
    pts = [(float(x), float(y)) for x, y in points]
    out: dict[str, Any] = {"points": len(pts), "growth": False}
    if len(pts) < MIN_POINTS:
        out["reason"] = f"too few samples ({len(pts)})"
        return out
    # drop warm-up: the first 20% of the steps
    x0, x1 = pts[0][0], pts[-1][0]
    cut = x0 + WARMUP_FRACTION * (x1 - x0)
    body = [p for p in pts if p[0] >= cut]
    if len(body) < MIN_POINTS:
        body = pts[int(len(pts) * WARMUP_FRACTION) :]
    if len(body) > max_points:
        stride = len(body) / max_points
        body = [body[int(i * stride)] for i in range(max_points)]
    xs = [p[0] for p in body]
    ys = [p[1] for p in body]
    if xs[-1] <= xs[0]:
        out["reason"] = "no step progress"
        return out
    if xs[-1] - xs[0] < MIN_WINDOW_STEPS:
        out["reason"] = f"too few steps after warm-up ({xs[-1] - xs[0]:.0f})"
        return out
    slope = theil_sen(xs, ys)
    z = mann_kendall_z(ys)
    baseline = sorted(ys[: max(1, len(ys) // 10)])[len(ys[: max(1, len(ys) // 10)]) // 2]
    growth = slope * (xs[-1] - xs[0])
    out.update(
        {
            "slope_bytes_per_step": slope,
            "mk_z": z,
            "baseline_bytes": baseline,
            "growth_bytes": growth,
            "window_steps": [xs[0], xs[-1]],
            "last_bytes": ys[-1],
        }
    )
    gate = max(MIN_TOTAL_GROWTH, MIN_GROWTH_FRACTION * baseline)
    out["min_growth_bytes"] = gate
    out["growth"] = bool(slope > MIN_SLOPE_BYTES_PER_STEP and z > MIN_Z and growth > gate)
    if out["growth"]:
        mid = xs[-1] - LATE_FRACTION * (xs[-1] - xs[0])
        late = [(x, y) for x, y in zip(xs, ys) if x >= mid]
        if len(late) < MIN_LATE_POINTS:  # a short run sampled every 16 steps: its last few samples
            late = list(zip(xs, ys))[-MIN_LATE_POINTS:]
        if len(late) >= MIN_LATE_POINTS:
            late_slope = theil_sen([p[0] for p in late], [p[1] for p in late])
            late_z = mann_kendall_z([p[1] for p in late])
        else:
            late_slope, late_z = 0.0, 0.0
        out.update({"late_slope_bytes_per_step": late_slope, "late_mk_z": late_z, "late_window_steps": [mid, xs[-1]]})
        if not (late_slope > MIN_SLOPE_BYTES_PER_STEP and late_z > MIN_Z_LATE
                and late_slope * (xs[-1] - xs[0]) > gate):
            out["growth"] = False
            out["reason"] = "grew, then levelled off: no significant growth over the last third of the window"
    return out


def analyze_runs(points: list[list[float]] | list[tuple[float, float]], starts: list[int]) -> dict[str, Any]:
    """:func:`analyze` for each training run of the process (split at ``starts``: where a new
    training loop or ``model.fit`` call began; a point at a start belongs to the run before),
    so that the one-off memory of a run's start (a new model's traces and weights, new input
    pipelines) is that run's warm-up, not growth. The trend reported is the fastest growing run's,
    else the last run's. Runs too short to judge on their own (``fit`` per batch) are judged
    together, as one series."""
    pts = [(float(x), float(y)) for x, y in points]
    segs = _stats.split_at(pts, starts)
    long = [seg for seg in segs if len(seg) >= MIN_POINTS]
    if len(segs) < 2 or not long:
        return analyze(pts)
    results = [analyze(seg) for seg in long]
    grown = [r for r in results if r["growth"]]
    out = max(grown, key=lambda r: r["slope_bytes_per_step"]) if grown else results[-1]
    out["runs"] = len(segs)
    return out


# ------------------------------------------------------------------- growing containers
_HELD_TYPES = ("EagerTensor", "ResourceVariable", "ndarray", "KerasTensor", "Variable", "SymbolicTensor")
MAX_CONTAINERS = 16
MAX_USER_FRAMES = 8


def _held_type(obj: Any) -> str | None:
    """Type name of the last item of a list/deque when it is a tensor, variable or array."""
    if not isinstance(obj, list) and type(obj).__name__ != "deque":
        return None
    if len(obj) < 2:
        return None
    try:
        tname = type(obj[-1]).__name__
    except Exception:  # noqa: BLE001
        return None
    return tname if tname in _HELD_TYPES else None


def _nbytes(x: Any) -> int:
    nb = getattr(x, "nbytes", None)
    if isinstance(nb, int):
        return nb
    try:
        n = math.prod(int(d or 0) for d in x.shape)
        return n * int(getattr(getattr(x, "dtype", None), "size", 4) or 4)
    except Exception:  # noqa: BLE001
        return 0


class ContainerWatch:
    """Python lists that hold tensors/arrays in the frames of the training loop, and how their
    length follows the step count. Sampled at a loop's steps 4, 8, 16, 32, ... (a few dozen
    samples in a long run); a container is reported only when it was measured growing with the
    steps, whatever the bytes."""

    def __init__(self) -> None:
        self._seen: dict[tuple[Any, str], dict[str, Any]] = {}

    def sample(self, frame: Any, step: int) -> None:
        from tflint.runtime.hookbase import is_library_file

        f = frame
        users = 0
        while f is not None and users < MAX_USER_FRAMES:
            code = f.f_code
            if not is_library_file(code.co_filename):
                users += 1
                self._scan(f, code, step)
            f = f.f_back

    def _scan(self, f: Any, code: Any, step: int) -> None:
        try:
            items = list(f.f_locals.items())
        except Exception:  # noqa: BLE001
            return
        for name, value in items:
            tname = _held_type(value)
            if tname is None:
                continue
            key = (code, name)
            rec = self._seen.get(key)
            if rec is None:
                if len(self._seen) >= MAX_CONTAINERS:
                    continue
                rec = self._seen[key] = {"obj": value, "name": name, "code": code, "type": tname, "samples": []}
            elif rec["obj"] is not value:
                rec.update(obj=value, type=tname, samples=[])  # rebound to a new list: start again
            rec["samples"].append((step, len(value)))
            if len(rec["samples"]) > 64:
                del rec["samples"][1:3]

    def growing(self, step_now: int) -> list[dict[str, Any]]:
        """Containers whose length grew by about one item (or more) per step between samples."""
        out = []
        for rec in self._seen.values():
            samples = list(rec["samples"])
            obj = rec["obj"]
            try:
                n_now = len(obj)
            except Exception:  # noqa: BLE001
                continue
            if not samples or step_now > samples[-1][0]:
                samples.append((step_now, n_now))
            if len(samples) < 3:
                continue
            (s0, n0), (s1, n1) = samples[0], samples[-1]
            if s1 <= s0 or n1 <= n0:
                continue
            rate = (n1 - n0) / (s1 - s0)
            # grew between every pair of samples, by at least one item per two steps
            monotone = all(b[1] > a[1] for a, b in zip(samples, samples[1:]) if b[0] > a[0])
            if rate < 0.5 or not monotone:
                continue
            each = 0
            try:
                tail = list(obj)[-50:]
                each = sum(_nbytes(x) for x in tail) / max(1, len(tail))
            except Exception:  # noqa: BLE001
                pass
            code = rec["code"]
            file, line = _append_line(code, rec["name"])
            where = "module level" if code.co_name == "<module>" else f"{code.co_name}()"
            out.append({
                "kind": "accumulated-tensors",
                "name": rec["name"],
                "type": rec["type"],
                "count": n_now,
                "per_step": round(rate, 2),
                "bytes_each": each,
                "bytes_held": each * n_now,
                "file": file,
                "line": line,
                "scope": where,
                "samples": [list(s) for s in samples[-8:]],
            })
        out.sort(key=lambda c: -c["count"])
        return out


def _append_line(code: Any, name: str) -> tuple[str, int]:
    """(file, line) where ``name`` is appended to inside ``code``, else where ``code`` starts."""
    import linecache
    import re

    file = code.co_filename
    try:
        lines = sorted({ln for _, _, ln in code.co_lines() if ln})
    except Exception:  # noqa: BLE001
        lines = []
    pat = re.compile(rf"\b{re.escape(name)}\s*(\.\s*(append|extend|insert|appendleft)\s*\(|\+=)")
    for ln in lines:
        if pat.search(linecache.getline(file, ln)):
            return file, ln
    return file, code.co_firstlineno
