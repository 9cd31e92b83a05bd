"""`tflint profile` on the command line: arguments, the script's environment and output,
the terminal report and the live status line."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import textwrap
import time

import pytest

from tests.profile.conftest import FIXTURES, ROOT, profile_env, run_profile
from tflint.profiler.report import SIGNAL_KINDS


def test_help_lists_the_options():
    proc = subprocess.run([sys.executable, "-m", "tflint", "profile", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=profile_env(COLUMNS="200"))
    assert proc.returncode == 0, proc.stderr
    for option in ("--json", "--logdir", "--fail-on", "--live"):
        assert option in proc.stdout


def test_help_does_not_import_tensorflow():
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom tflint.cli import app\n"
            "r = CliRunner().invoke(app, ['profile', '--help'])\nassert r.exit_code == 0, r.output\n"
            "print('tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=profile_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_script_runs_as_python_would(tmp_path):
    """Same stdout as `python script_env.py ARGS`: __name__, argv (including options that look
    like tflint's, after --), a sibling module import and a spawn multiprocessing pool."""
    args = ("--epochs", "3", "--json", "not-ours.json", "positional")
    plain = subprocess.run([sys.executable, str(FIXTURES / "script_env.py"), *args], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120, env=profile_env())
    assert plain.returncode == 0, plain.stderr
    run = run_profile(FIXTURES / "script_env.py", *args, cwd=tmp_path, module=False,
                      json_path=tmp_path / "r.json")
    assert run.returncode == 0, run.explain()
    assert run.stdout == plain.stdout  # the report goes to stderr; stdout is the script's own
    assert "name __main__" in run.stdout
    assert "file script_env.py True" in run.stdout
    assert "argv ['--epochs', '3', '--json', 'not-ours.json', 'positional']" in run.stdout
    assert "helper 42" in run.stdout
    assert "squares [0, 1, 4, 9, 16]" in run.stdout
    assert not (tmp_path / "not-ours.json").exists()
    assert run.report["argv"] == list(args)


def test_environment_the_script_sets_before_importing_tensorflow_is_set_before_the_profiler_does(tmp_path):
    """TensorFlow and Keras read some variables when they are imported (the log level, the Keras
    backend), and the profiler imports them before the script runs: the script's top-level
    settings made before its own import are made first. Here it selects Keras' numpy backend:
    the script runs as under plain Python (on that backend, or failing as it does there), not
    silently on TensorFlow."""
    script = tmp_path / "backend.py"
    script.write_text(textwrap.dedent("""\
        import os
        os.environ["KERAS_BACKEND"] = "numpy"
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import keras
        print("backend:", keras.backend.backend())
    """))
    env = profile_env()
    env.pop("KERAS_BACKEND", None)
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120, env=env)
    run = run_profile(script, cwd=tmp_path, module=False, json_path=tmp_path / "r.json")
    assert run.returncode == plain.returncode, (run.explain(), plain.stderr[-500:])
    assert run.stdout == plain.stdout
    assert "backend: tensorflow" not in run.stdout


def test_environment_settings_are_read_from_the_top_of_the_script_until_tensorflow_is_imported():
    from tflint.profiler.runner import environment_before_tensorflow

    source = textwrap.dedent("""\
        import os, sys
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
        os.environ[name] = "not a literal key"
        import tensorflow as tf
        os.environ["AFTER_THE_IMPORT"] = "1"
    """)
    assert environment_before_tensorflow(source) == [("TF_CPP_MIN_LOG_LEVEL", "2", True),
                                                     ("CUDA_VISIBLE_DEVICES", "0", False)]
    assert environment_before_tensorflow("def broken(:\n") == []


def test_terminal_report_has_a_line_per_signal(profiled):
    run = profiled("clean_fit.py")
    assert run.returncode == 0, run.explain()
    err = run.stderr
    header = next(line for line in err.splitlines() if line.startswith("tflint profile"))
    assert "clean_fit.py" in header and "exit 0" in header and "steps" in header
    for kind in SIGNAL_KINDS:
        assert any(line.startswith(kind) for line in err.splitlines()), kind
    assert "step time" in err and "host memory" in err
    assert run.stdout.startswith("final loss")


def test_terminal_report_shows_signal_table(profiled):
    run = profiled("retrace_python_int.py")
    err = run.stderr
    line = next(line for line in err.splitlines() if line.startswith("retrace "))
    assert "✗" in line and "warning" in line
    assert "Retraces" in err  # the table title
    assert "retrace_python_int.py:23" in err  # where (heading its row)


def _read_until(fd: int, deadline: float, proc: subprocess.Popen) -> bytes:
    chunks = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            # drain what is left
            try:
                while select.select([fd], [], [], 0.1)[0]:
                    data = os.read(fd, 65536)
                    if not data:
                        break
                    chunks.append(data)
            except OSError:
                pass
            break
    return b"".join(chunks)


@pytest.mark.slow
def test_live_status_on_a_terminal_only_and_stdout_untouched(profiled):
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tflint", "profile", str(FIXTURES / "input_stall_eager.py")],
            cwd=ROOT, env=profile_env(TERM="xterm"), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=slave,
        )
        os.close(slave)
        slave = -1
        tty_out = _read_until(master, time.monotonic() + 120, proc)
        stdout = proc.stdout.read().decode()
        proc.wait(timeout=60)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    text = tty_out.decode("utf-8", "replace")
    assert proc.returncode == 0, text[-3000:]
    assert "tflint: steps" in text  # the live line was drawn on the terminal
    assert "\r\x1b[2K" in text  # ... and erased in place
    assert stdout.startswith("final loss") and "tflint" not in stdout
    # not a terminal: no live line in the captured stderr
    run = profiled("retrace_shape.py")
    assert "tflint: steps" not in run.stderr and "\x1b[2K" not in run.stderr
