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

from tests.profile.conftest import FIXTURES, PROFILE_MAY_RE, expected_signals
from tflint.profiler.report import SIGNAL_KINDS

KiB = 1024

SIGNAL_FIXTURES = [
    "retrace_python_int.py",
    "retrace_shape.py",
    "retrace_partial_batch.py",
    "retrace_partial_batch_mirrored.py",
    "none_gradient_unused.py",
    "none_gradient_unwatched.py",
    "soft_placement.py",
    "input_stall_eager.py",
    "input_stall_fit.py",
    "input_stall_shuffle.py",
    "memory_growth.py",
    "memory_loss_list.py",
    # training health (details checked in test_fixtures_health.py)
    "nan_inf_late.py",
    "nan_inf_fit.py",
    "nan_inf_eager.py",
    "dead_parameter_fit.py",
    "dead_parameter_loop.py",
    "dead_parameter_untracked_loop.py",
    "loss_stall_fit.py",
    "loss_stall_loop.py",
    "loss_stall_labels_fit.py",
    "loss_stall_labels_loop.py",
    "loss_stall_labels_mirrored_fit.py",
    "nan_inf_mirrored.py",
    "loss_broadcast_loop.py",
    "loss_broadcast_eager.py",
    "exploding_gradient_loop.py",
    "exploding_gradient_fit.py",
    "vanishing_gradient_loop.py",
    "vanishing_gradient_fit.py",
]
CLEAN_FIXTURES = ["clean_custom_loop.py", "clean_fit.py", "clean_fit_numpy.py", "clean_three_loops.py"]
# clean twins of the training-health fixtures: no signal at all, every hook ran
HEALTH_CLEAN_FIXTURES = ["nan_inf_late_clean.py", "dead_parameter_fit_clean.py", "loss_broadcast_clean.py",
                         "deep_relu_clean.py", "loss_stall_labels_clean.py"]


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
    may = expected_signals(name, PROFILE_MAY_RE)
    signals = run.signals()
    found = {s["kind"] for s in signals}
    assert set(want) <= found <= set(want) | set(may), [(s["kind"], s["message"][:200]) for s in signals]
    for kind, lines in {**may, **want}.items():
        if kind not in found:
            continue
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


def test_retrace_of_the_final_partial_batch_is_info_with_both_remedies(profiled):
    s = _only(profiled("retrace_partial_batch.py"), "retrace")
    d = s["details"]
    assert s["severity"] == "info"
    assert (d["traces"], d["retraces"]) == (2, 1)
    assert d["partial_batch"] == {"args": ["x", "y"], "full": 32, "partial": 4, "partials": [4]}
    assert "drop_remainder=True" in s["message"] and "None batch dimension" in s["message"]
    assert "traced 2 times: the first trace + 1 retrace" in s["message"]
    assert "grows memory" not in s["message"]


def test_partial_batch_retrace_under_a_strategy_is_seen_through_the_per_replica_specs(profiled):
    """The distributed step gets one spec per replica; the final batch of 4 is 2 per replica."""
    s = _only(profiled("retrace_partial_batch_mirrored.py"), "retrace")
    d = s["details"]
    assert s["severity"] == "info" and (d["traces"], d["retraces"]) == (2, 1)
    assert d["partial_batch"] == {"args": ["batch[0]", "batch[1]"], "full": 16, "partial": 2, "partials": [2],
                                  "per_replica": True}
    assert "(2 instead of 16 per replica) gives `batch[0]`, `batch[1]`" in s["message"]
    assert d["causes"][0] == "batch[0] (each replica): TensorSpec(shape=(16, 8)) -> (2, 8)"


def test_retrace_counts_add_up(profiled):
    s = _only(profiled("retrace_python_int.py"), "retrace")
    assert "traced 12 times: the first trace + 11 retraces" in s["message"]
    assert s["severity"] == "warning"


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
    # TensorFlow 2.21 appends a prefetch to a pipeline ending in a synchronous transformation:
    # suggesting one would be wrong (tests/runtime/test_input_pipeline.py holds the premise)
    assert d["dataset"]["injected_prefetch"] is True
    assert not any(".prefetch(" in a for a in d["advice"]), d["advice"]
    assert run.report["metrics"]["input_wait_share"]["overall"] == pytest.approx(d["wait_share"])


def test_input_stall_at_start_up_is_measured_and_named(profiled):
    """A py_function map before shuffle(N), one short epoch: shuffle fills its buffer through the
    map before the first batch; that waiting is most of the run and is reported as start-up."""
    run = profiled("input_stall_shuffle.py")
    s = _only(run, "input-stall")
    d = s["details"]
    assert d["classification"] == "highly input-bound" and s["severity"] == "warning"
    assert d["startup_wait_s"] > 0.8 * d["wait_s"]
    assert d["startup_wait_s"] > 1.0  # 400 elements x 5 ms
    assert "read_example" in s["message"] and "parse" in s["message"]
    assert "start-up" in s["message"] and "shuffle" in s["message"]
    assert d["dataset"]["shuffle"]["buffer_size"] == 400
    assert not any(".prefetch(" in a for a in d["advice"])  # the pipeline ends in prefetch
    assert run.report["steps"] == 25


def test_every_step_of_every_loop_is_counted(profiled):
    """An eager loop, a tf.function loop and a two-optimizer GAN step in one script."""
    run = profiled("clean_three_loops.py")
    report = run.report
    loops = report["metrics"]["loops"]
    assert [(lp["kind"], lp["name"], lp["steps"]) for lp in loops] == [
        ("optimizer", "SGD", 20), ("function", "step", 40), ("function", "gan_step", 50)]
    assert len(loops[2]["optimizers"]) == 2
    assert report["steps"] == 110 == sum(lp["steps"] for lp in loops)
    # the input-wait share is the waiting of those steps over their time
    inp = report["metrics"]["input"]
    wait = sum(lp["input_wait_s"] for lp in loops)
    span = sum(lp["startup_time_s"] + lp["steady_time_s"] for lp in loops)
    assert inp["share"] == pytest.approx(wait / span)
    assert report["metrics"]["input_wait_share"]["overall"] == pytest.approx(inp["share"])
    # the terminal report has the same breakdown
    assert "Training loops (110 steps in all)" in run.stderr
    assert "gan_step (function, 2 optimizers)" in run.stderr and "110 steps" in run.stderr


def test_two_models_fit_one_after_the_other_are_two_loops(tmp_path):
    from tests.profile.conftest import run_profile

    script = tmp_path / "trainers.py"
    script.write_text(
        "import numpy as np, tensorflow as tf\n"
        "x = np.zeros((64, 4), np.float32); y = np.zeros((64, 1), np.float32)\n"
        "for name in ('first', 'second'):\n"
        "    m = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)], name=name)\n"
        "    m.compile(optimizer='sgd', loss='mse')\n"
        "    m.fit(x, y, batch_size=8, epochs=2 if name == 'first' else 3, verbose=0)\n",
        encoding="utf-8")
    run = run_profile(script, json_path=tmp_path / "r.json")
    assert run.returncode == 0, run.explain()
    loops = run.report["metrics"]["loops"]
    assert [(lp["kind"], lp["name"], lp["steps"]) for lp in loops] == [("keras", "first.fit", 16), ("keras", "second.fit", 24)]
    assert run.report["steps"] == 40


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
    assert acc["name"] == "history" and acc["line"] == 24 and acc["per_step"] == pytest.approx(1.0)
    assert "`history`" in s["message"] and "memory_growth.py:24" in s["message"]
    # projected no further than the run went
    assert d["projected_bytes_after_steps"]["steps"] == 300
    assert run.report["steps"] == 300


def test_a_list_gaining_a_tensor_per_step_is_reported_at_any_size(profiled):
    run = profiled("memory_loss_list.py")
    s = _only(run, "memory-growth")
    c = s["details"]["causes"][0]
    assert (c["name"], c["type"], c["count"], c["line"]) == ("losses", "EagerTensor", 60, 25)
    assert c["bytes_each"] == 4 and c["bytes_held"] == 240  # scalar float32 tensors
    assert "one EagerTensor per training step" in s["message"]
    assert s["severity"] == "warning"


def test_retraces_alone_give_no_memory_cause(profiled):
    # a retrace bug: every step traces again; nothing is appended anywhere
    run = profiled("retrace_python_int.py")
    assert run.signals("memory-growth") == []


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
