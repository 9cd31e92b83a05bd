"""A hook that raises inside TensorFlow's call path disables itself; the run is unaffected.

``TFLINT_DEBUG_FAIL_HOOK=<kind>`` (test-only switch, ``tflint/runtime/hookbase.py``) makes that
hook's event handler raise on its first use, for real, inside TensorFlow's tracing callbacks,
``GradientTape.gradient``, the iterator's ``next`` or the step hook. The fixture goes through
every handler; its output must be byte-identical to a plain ``python`` run, and the report must
name the hook that failed, and why, while the other signals are still reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "hardening" / "all_signals_train.py"
TIMEOUT_S = 240
# signals the fixture produces deterministically (input-stall and memory-growth depend on timing)
DETERMINISTIC = {"retrace", "none-gradient", "soft-placement"}
HOOK_KINDS = ["retrace", "none-gradient", "soft-placement", "input-stall", "memory-growth", "steps"]


def _env(fail: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env.pop("TFLINT_DEBUG_FAIL_HOOK", None)
    if fail is not None:
        env["TFLINT_DEBUG_FAIL_HOOK"] = fail
    return env


def _profile(tmp_path: Path, fail: str | None) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / f"report-{fail or 'none'}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tflint", "profile", str(FIXTURE), "--json", str(report)],
        cwd=ROOT, env=_env(fail), capture_output=True, timeout=TIMEOUT_S, check=False, stdin=subprocess.DEVNULL,
    )
    assert report.exists(), proc.stderr.decode(errors="replace")[-4000:]
    return proc, json.loads(report.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """The plain run's stdout, and the profiled run without any forced failure."""
    plain = subprocess.run([sys.executable, str(FIXTURE)], cwd=ROOT, env=_env(), capture_output=True,
                           timeout=TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    assert plain.returncode == 0, plain.stderr.decode(errors="replace")[-4000:]
    proc, report = _profile(tmp_path_factory.mktemp("baseline"), None)
    return plain.stdout, proc, report


def test_unforced_run_measures_everything(baseline):
    plain_out, proc, report = baseline
    assert proc.returncode == 0
    assert proc.stdout == plain_out
    assert {h["status"] for h in report["metrics"]["hooks"].values()} == {"ok"}
    assert DETERMINISTIC <= {s["kind"] for s in report["signals"]}
    assert b"hook failed" not in proc.stderr


@pytest.mark.parametrize("kind", HOOK_KINDS)
def test_failing_hook_disables_itself_and_the_run_is_unchanged(baseline, tmp_path, kind):
    plain_out, _, base_report = baseline
    proc, report = _profile(tmp_path, kind)
    err = proc.stderr.decode(errors="replace")
    # the script ran to the end with exactly the same results
    assert proc.returncode == 0, err[-4000:]
    assert proc.stdout == plain_out, err[-4000:]
    assert "Traceback" not in err
    assert report["exit_code"] == 0
    assert report["metrics"]["run"]["outcome"] == "completed"
    # the failing hook, and only it, is reported as failed, with the reason
    hooks = report["metrics"]["hooks"]
    failed = {k: h for k, h in hooks.items() if h["status"] != "ok"}
    if kind == "steps":
        # memory and input wait are sampled per step: they are reported as not measured too
        assert sorted(failed) == ["input-stall", "memory-growth", "steps"], hooks
        for derived in ("input-stall", "memory-growth"):
            assert "step counting failed" in failed[derived]["reason"]
    else:
        assert list(failed) == [kind], hooks
    reason = failed[kind]["reason"]
    assert "RuntimeError: forced failure of the " + kind + " handler" in reason
    assert f"! {kind} hook failed:" in err  # the terminal report says it too
    # every other deterministic signal is still found
    kinds = {s["kind"] for s in report["signals"]}
    assert DETERMINISTIC - {kind} <= kinds, (kind, kinds)
    if kind == "steps":
        assert report["steps"] == 0  # step counting stopped at its first tick
    else:
        assert report["steps"] == base_report["steps"] == 30
    if kind in ("retrace", "none-gradient"):
        # failed on the first event: nothing of that kind was recorded
        assert kind not in kinds


def test_every_signal_hook_failing_at_once(baseline, tmp_path):
    """(Step counting is left working: memory and input-wait sampling are driven by its ticks.)"""
    plain_out, _, _ = baseline
    signal_kinds = [k for k in HOOK_KINDS if k != "steps"]
    proc, report = _profile(tmp_path, ",".join(signal_kinds))
    assert proc.returncode == 0
    assert proc.stdout == plain_out
    hooks = report["metrics"]["hooks"]
    assert {k for k, h in hooks.items() if h["status"] == "failed"} == set(signal_kinds), hooks
    assert not {s["kind"] for s in report["signals"]} & {"retrace", "none-gradient"}
