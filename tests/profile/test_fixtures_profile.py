"""Every profile fixture under the real profiler: its signal, the cause and the location, and
nothing on the clean ones.

Each fixture marks the line a signal must point at with ``# profile-expect: <kind>``. A fixture
must report exactly the kinds it marks; every marked line must be pointed at, and no signal of
those kinds may point at another line of the fixture.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.profile.conftest import FIXTURES, expected_signals
from tflint.profiler.report import SIGNAL_KINDS

KiB = 1024

SIGNAL_FIXTURES = [
    "retrace_python_int.py",
    "retrace_shape.py",
    "none_gradient_unused.py",
    "none_gradient_unwatched.py",
    "soft_placement.py",
    "input_stall_eager.py",
    "input_stall_fit.py",
    "memory_growth.py",
    # training health (details checked in test_fixtures_health.py)
    "nan_inf_late.py",
    "nan_inf_fit.py",
    "nan_inf_eager.py",
    "dead_parameter_fit.py",
    "dead_parameter_loop.py",
    "dead_parameter_untracked_loop.py",
    "loss_stall_fit.py",
    "loss_stall_loop.py",
    "loss_broadcast_loop.py",
    "loss_broadcast_eager.py",
    "exploding_gradient_loop.py",
    "exploding_gradient_fit.py",
    "vanishing_gradient_loop.py",
    "vanishing_gradient_fit.py",
]
CLEAN_FIXTURES = ["clean_custom_loop.py", "clean_fit.py"]
# clean twins of the training-health fixtures: no signal at all, every hook ran
HEALTH_CLEAN_FIXTURES = ["nan_inf_late_clean.py", "dead_parameter_fit_clean.py", "loss_broadcast_clean.py",
                         "deep_relu_clean.py"]


def test_every_signal_kind_has_a_fixture():
    covered = {kind for name in SIGNAL_FIXTURES for kind in expected_signals(name)}
    assert covered == set(SIGNAL_KINDS)
    on_disk = {p.name for p in FIXTURES.glob("*.py") if expected_signals(p.name)}
    assert on_disk == set(SIGNAL_FIXTURES)


@pytest.mark.parametrize("name", SIGNAL_FIXTURES)
def test_signal_fixture_reports_its_signal_at_its_line(profiled, name):
    run = profiled(name)
    assert run.returncode in (0, 3), run.explain()
    want = expected_signals(name)
    signals = run.signals()
    assert {s["kind"] for s in signals} == set(want), [(s["kind"], s["message"][:200]) for s in signals]
    for kind, lines in want.items():
        located = {
            s["location"]["line"]
            for s in signals
            if s["kind"] == kind and s["location"] and Path(s["location"]["file"]).name == name
        }
        assert set(lines) <= located, f"{kind}: expected at lines {lines}, reported at {sorted(located)}"
        assert located <= set(lines), f"{kind}: reported at unmarked lines {sorted(located - set(lines))}"
        for s in signals:
            if s["kind"] == kind and s["location"]:
                assert Path(s["location"]["file"]).resolve() == (FIXTURES / name).resolve()
    # the hook behind every reported kind ran
    hooks = run.report["metrics"]["hooks"]
    assert all(hooks[kind]["status"] == "ok" for kind in want), hooks


def _only(run, kind):
    found = run.signals(kind)
    assert len(found) == 1, [s["message"] for s in found]
    return found[0]


def test_retrace_cause_python_int(profiled):
    s = _only(profiled("retrace_python_int.py"), "retrace")
    d = s["details"]
    assert d["function"] == "train_step"
    assert d["traces"] == 12 and d["retraces"] == 11  # one per new Python value
    assert re.fullmatch(r"step: Python int \d+ -> \d+", d["causes"][0]), d["causes"]
    assert "tensor" in d["fix"].lower()
    assert "step: Python int" in s["message"]


def test_retrace_cause_shape(profiled):
    s = _only(profiled("retrace_shape.py"), "retrace")
    d = s["details"]
    assert d["function"] == "predict"
    assert d["retraces"] == 9
    assert re.fullmatch(r"x: TensorSpec\(shape=\(2\d, 8\)\) -> .*\(2\d, 8\)\)?", d["causes"][0]), d["causes"]
    assert "input_signature" in d["fix"] or "reduce_retracing" in d["fix"]


def test_none_gradient_cause_unused_variable(profiled):
    s = _only(profiled("none_gradient_unused.py"), "none-gradient")
    d = s["details"]
    assert [v["name"].split(":")[0] for v in d["variables"]] == ["unused_bias"]  # not dense_w
    assert d["variables"][0]["shape"] == [1]
    assert d["eager"] is True
    assert d["count"] == 20  # every step
    assert "never read inside the tape" in s["message"]


def test_none_gradient_cause_unwatched_tensor(profiled):
    s = _only(profiled("none_gradient_unwatched.py"), "none-gradient")
    d = s["details"]
    assert len(d["variables"]) == 1 and d["variables"][0]["shape"] == []
    assert d["variables"][0]["reason"] == "unwatched-tensor"
    assert d["eager"] is False  # found while tracing the tf.function
    assert "tape.watch" in s["message"]


def test_soft_placement_requested_and_actual_device(profiled):
    found = profiled("soft_placement.py").signals("soft-placement")
    for s in found:
        assert s["details"]["requested"].endswith("GPU:0")
        assert s["details"]["actual"].endswith("CPU:0")
    by_line = {s["location"]["line"]: s for s in found if s["location"]}
    eager, graph = by_line[9], by_line[15]
    assert eager["details"]["ops"] == ["MatMul"] and "eager" in eager["details"]["mechanisms"]
    assert {"MatMul", "Relu"} <= set(graph["details"]["ops"])
    assert "tf.function" in graph["message"]


@pytest.mark.parametrize("name, flag", [("input_stall_eager.py", "from_generator"),
                                        ("input_stall_fit.py", "py_function")])
def test_input_stall_share_and_pipeline(profiled, name, flag):
    run = profiled(name)
    s = _only(run, "input-stall")
    d = s["details"]
    # 20 ms of Python per batch against ~1 ms of compute: far above the 20% "highly" line
    assert d["wait_share"] > 0.5
    assert d["classification"] == "highly input-bound"
    assert d["dataset"][flag] is True
    assert d["dataset"]["prefetch"] is False
    assert any("prefetch" in a for a in d["advice"])
    assert run.report["metrics"]["input_wait_share"]["overall"] == pytest.approx(d["wait_share"])


def test_memory_growth_rate_and_cause(profiled):
    run = profiled("memory_growth.py")
    s = _only(run, "memory-growth")
    d = s["details"]
    # the script keeps 256 KiB per step
    assert 128 * KiB < d["slope_bytes_per_step"] < 1024 * KiB
    assert d["projected_bytes_after_steps"]["bytes"] > d["baseline_bytes"]
    kinds = {c["kind"] for c in d["causes"]}
    assert "accumulated-tensors" in kinds
    acc = next(c for c in d["causes"] if c["kind"] == "accumulated-tensors")
    assert acc["type"] == "ndarray" and acc["count"] == 300
    assert run.report["steps"] == 300


@pytest.mark.parametrize("name", CLEAN_FIXTURES)
def test_clean_fixture_reports_nothing(profiled, name):
    run = profiled(name)  # run with --fail-on all
    assert run.returncode == 0, run.explain()
    report = run.report
    assert report["signals"] == [], [s["message"] for s in report["signals"]]
    assert report["steps"] >= 100
    hooks = report["metrics"]["hooks"]
    assert all(hooks[kind]["status"] == "ok" for kind in SIGNAL_KINDS), hooks
    assert report["metrics"]["retraces"] == 0
    assert not expected_signals(name)


@pytest.mark.parametrize("name", HEALTH_CLEAN_FIXTURES)
def test_training_health_clean_twin_reports_nothing(profiled, name):
    run = profiled(name)
    assert run.returncode == 0, run.explain()
    report = run.report
    assert report["signals"] == [], [s["message"] for s in report["signals"]]
    hooks = report["metrics"]["hooks"]
    assert all(hooks[kind]["status"] == "ok" for kind in SIGNAL_KINDS), hooks
    assert report["metrics"]["loss"], "the loss series was recorded"
    assert not expected_signals(name)
