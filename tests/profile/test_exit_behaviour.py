"""Exit status, tracebacks, SystemExit, Ctrl-C and unrunnable scripts under `tflint profile`.

Whatever happens to the script, its exit status and output pass through and the report
(terminal and JSON) is still produced.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.profile.conftest import FIXTURES, ROOT, profile_env, run_profile

TRACEBACK_HEAD = "Traceback (most recent call last):"


def _traceback_block(stderr: str) -> str:
    """From the 'Traceback' line to the exception line (the first unindented line after it)."""
    lines = stderr.splitlines()
    start = lines.index(TRACEBACK_HEAD)
    end = start + 1
    while end < len(lines) and (lines[end].startswith(" ") or not lines[end]):
        end += 1
    return "\n".join(lines[start : end + 1])


def test_exception_traceback_and_status_pass_through(profiled):
    run = profiled("crash.py")
    plain = subprocess.run(
        [sys.executable, str(FIXTURES / "crash.py")], cwd=ROOT, env=profile_env(),
        capture_output=True, text=True, timeout=120,
    )
    assert plain.returncode == 1
    assert run.returncode == 1, run.explain()
    assert run.stdout == plain.stdout == "reading records\n"
    # the traceback is exactly the one Python prints: no tflint or runpy frames
    assert _traceback_block(run.stderr) == _traceback_block(plain.stderr)
    assert "ValueError: corrupt record 3" in _traceback_block(run.stderr)
    assert "tflint" not in _traceback_block(run.stderr)
    report = run.report
    assert report["exit_code"] == 1
    assert report["metrics"]["run"]["outcome"] == "exception"
    assert report["metrics"]["run"]["exception"] == "ValueError: corrupt record 3"
    # the terminal report follows the traceback
    assert run.stderr.index(TRACEBACK_HEAD) < run.stderr.index("tflint profile")


def test_sys_exit_code_passes_through(profiled):
    run = profiled("exit_code.py")
    assert run.returncode == 3, run.explain()
    assert run.stdout == "sum 3.0\n"
    assert TRACEBACK_HEAD not in run.stderr
    report = run.report
    assert report["exit_code"] == 3
    assert report["metrics"]["run"]["outcome"] == "exit"
    # written atomically: no temporary file left next to it
    assert not [p.name for p in run.json_path.parent.iterdir() if p.name.startswith(".tflint-")]


def test_sys_exit_with_message_prints_it_and_exits_1(tmp_path):
    script = tmp_path / "exit_message.py"
    script.write_text("import sys\nprint('configuring')\nsys.exit('bad config: lr must be > 0')\n")
    report_path = tmp_path / "r.json"
    run = run_profile(script, json_path=report_path)
    assert run.returncode == 1, run.explain()
    assert run.stdout == "configuring\n"
    lines = run.stderr.splitlines()
    assert "bad config: lr must be > 0" in lines
    assert TRACEBACK_HEAD not in run.stderr
    assert json.loads(report_path.read_text())["exit_code"] == 1


def test_sigint_gives_partial_report_and_130(tmp_path):
    report_path = tmp_path / "interrupted.json"
    cmd = [sys.executable, "-m", "tflint", "profile", str(FIXTURES / "long_running.py"),
           "--json", str(report_path)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=profile_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.strip() == "READY" or not line:
                break
        assert line.strip() == "READY", proc.stderr.read() if proc.poll() is not None else "no READY"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-4000:]
    assert "KeyboardInterrupt" in err
    assert "interrupted (partial report)" in err
    report = json.loads(report_path.read_text())
    assert report["exit_code"] == 130
    assert report["metrics"]["run"]["outcome"] == "interrupted"
    assert report["steps"] >= 20


def _one_line_usage_error(run, *needles: str) -> None:
    assert run.returncode == 2, run.explain()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("tflint profile: error: ")
    for needle in needles:
        assert needle in lines[0]
    assert "Traceback" not in run.stderr
    assert run.stdout == ""


def test_missing_script(tmp_path):
    report_path = tmp_path / "r.json"
    run = run_profile(tmp_path / "no_such_train.py", json_path=report_path)
    _one_line_usage_error(run, "no_such_train.py", "no such file")
    assert not report_path.exists()


def test_directory_instead_of_script(tmp_path):
    run = run_profile(tmp_path)
    _one_line_usage_error(run, "is a directory")


def test_syntax_error_in_script(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("import tensorflow as tf\n\ndef step(x:\n    return x\n")
    report_path = tmp_path / "r.json"
    run = run_profile(script, json_path=report_path)
    _one_line_usage_error(run, "broken.py:3", "SyntaxError")
    assert not report_path.exists()


@pytest.mark.parametrize(
    "options, needle",
    [
        (("--fail-on", "retrace,bogus"), "unknown signal kind 'bogus'"),
        (("--fail-on", ","), "no signal kinds"),
        (("--signals", "retrace,bogus"), "--signals: unknown signal kind 'bogus'"),
        (("--signals", ","), "--signals: no signal kinds"),
        (("--signals", "retrace", "--fail-on", "retrace,nan-inf"), "--fail-on nan-inf: not collected"),
        (("--json", "/nonexistent-dir-for-tflint/r.json"), "does not exist"),
    ],
)
def test_bad_arguments(options, needle):
    run = run_profile(FIXTURES / "empty.py", options=options)
    _one_line_usage_error(run, needle)


def test_unknown_option_is_a_usage_error():
    run = run_profile(FIXTURES / "empty.py", options=("--no-such-option",))
    _one_line_usage_error(run, "--no-such-option")


def test_fail_on_fires_on_signal(profiled):
    run = profiled("retrace_python_int.py")  # run with --fail-on retrace
    assert run.returncode == 3, run.explain()
    assert run.report["exit_code"] == 0  # the script itself succeeded
    assert run.signals("retrace")


def test_fail_on_all_passes_a_clean_run(profiled):
    run = profiled("clean_custom_loop.py")  # run with --fail-on all
    assert run.returncode == 0, run.explain()


def test_fail_on_other_kinds_keeps_exit_0(tmp_path):
    run = run_profile(FIXTURES / "retrace_shape.py", options=("--fail-on", "memory-growth,input-stall"),
                      json_path=tmp_path / "r.json")
    assert run.returncode == 0, run.explain()
    assert run.signals("retrace"), "fixture should still report its retrace"


def test_fail_on_does_not_hide_the_scripts_own_failure(tmp_path):
    run = run_profile(FIXTURES / "crash.py", options=("--fail-on", "all"))
    assert run.returncode == 1
