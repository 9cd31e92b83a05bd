"""`tflint profile SCRIPT` behaves like `python SCRIPT`: same stdout bytes, same stderr (plus the
report after it), same exit status, same traceback, same argv/__name__/__file__/imports, and the
same results from threads, spawned processes and parallel tf.data pipelines.

Every test runs the fixture twice in real subprocesses on real TensorFlow (CPU): once with plain
``python`` and once with ``python -m tflint profile``, with the same environment, and compares.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "hardening"
TIMEOUT_S = 240
# TensorFlow's own C++ start-up lines (absl/glog format, with a timestamp and thread id) are
# written even with TF_CPP_MIN_LOG_LEVEL=3; they are the only lines ignored when comparing.
_TF_LOG_LINE = re.compile(rb"^(WARNING: All log messages before absl::InitializeLog\(\)|[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ ).*\n?", re.MULTILINE)
# autograph writes converted functions to randomly named temporary files
_AUTOGRAPH_FILE = re.compile(rb"__autograph_generated_file\w+\.py")
REPORT_HEAD = b"\ntflint profile "


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ)
    e["TF_CPP_MIN_LOG_LEVEL"] = "3"
    for name in ("PYTHONUNBUFFERED", "PYTHONSTARTUP", "TFLINT_DEBUG_FAIL_HOOK", "PYTHONWARNINGS"):
        e.pop(name, None)
    e.update(extra)
    return e


@dataclass
class Run:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def clean_stderr(self) -> bytes:
        return _AUTOGRAPH_FILE.sub(b"<autograph>", _TF_LOG_LINE.sub(b"", self.stderr))

    def explain(self) -> str:
        return (f"rc={self.returncode}\nstdout:\n{self.stdout[-2000:]!r}\n"
                f"stderr:\n{self.stderr[-5000:].decode(errors='replace')}")


def run(cmd: list[str], cwd: Path) -> Run:
    p = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, timeout=TIMEOUT_S, check=False,
                       stdin=subprocess.DEVNULL)
    return Run(p.returncode, p.stdout, p.stderr)


def plain_and_profiled(script: str, *args: str, tmp_path: Path, cwd: Path = FIXTURES) -> tuple[Run, Run, dict]:
    """Run ``python SCRIPT ARGS`` and ``python -m tflint profile SCRIPT --json R -- ARGS``."""
    report = tmp_path / f"{Path(script).stem}.json"
    plain = run([sys.executable, script, *args], cwd)
    prof = run([sys.executable, "-m", "tflint", "profile", script, "--json", str(report), "--", *args], cwd)
    assert report.exists(), f"no report written\n{prof.explain()}"
    return plain, prof, json.loads(report.read_text(encoding="utf-8"))


def assert_same_behaviour(plain: Run, prof: Run) -> None:
    """Same status, byte-identical stdout, and stderr = the script's stderr + the report."""
    assert prof.returncode == plain.returncode, f"plain:\n{plain.explain()}\nprofiled:\n{prof.explain()}"
    assert prof.stdout == plain.stdout, f"plain:\n{plain.explain()}\nprofiled:\n{prof.explain()}"
    script_err, sep, _report = prof.clean_stderr.partition(REPORT_HEAD)
    assert sep, f"no terminal report on stderr\n{prof.explain()}"
    assert script_err == plain.clean_stderr, f"plain:\n{plain.explain()}\nprofiled:\n{prof.explain()}"
    assert b"tflint" not in script_err, "tflint wrote into the script's part of stderr"


def last_line(data: bytes) -> bytes:
    return data.rstrip(b"\n").rsplit(b"\n", 1)[-1]


# ------------------------------------------------------------------------------ plain runs
def test_stdout_bytes_argv_name_file_and_own_imports(tmp_path):
    args = ("--epochs", "2", "two words", "ünïcode", "")
    plain, prof, report = plain_and_profiled("io_passthrough.py", *args, tmp_path=tmp_path)
    assert plain.returncode == 0, plain.explain()
    assert_same_behaviour(plain, prof)
    out = prof.stdout.decode("utf-8", errors="surrogateescape").splitlines()
    assert out[0] == "argv " + repr(["io_passthrough.py", *args])
    assert "name __main__" in out
    assert f"file {FIXTURES / 'io_passthrough.py'} True" in out
    assert "path0 True" in out
    assert "sibling [2, 4, 6]" in out and "package dense_0+dense_1+dense_2" in out
    assert "main module is this one True" in out
    # raw bytes, no trailing newline: the very last bytes written are the script's own
    assert prof.stdout.endswith(b"raw bytes \xff\xfe\x00 end")
    assert report["exit_code"] == 0 and report["argv"] == list(args)
    assert report["steps"] >= 29


def test_script_given_by_relative_path_from_another_directory(tmp_path):
    script = os.path.relpath(FIXTURES / "io_passthrough.py", tmp_path)
    plain, prof, _ = plain_and_profiled(script, "x", tmp_path=tmp_path, cwd=tmp_path)
    assert plain.returncode == 0, plain.explain()
    assert_same_behaviour(plain, prof)
    assert prof.stdout.startswith(f"argv {[script, 'x']!r}\n".encode())


@pytest.mark.parametrize(
    "args, status",
    [(("exit", "4"), 4), (("raise-systemexit", "0"), 0), (("exit-none",), 0)],
    ids=["sys.exit(4)", "SystemExit(0)", "sys.exit()"],
)
def test_exit_status_passes_through(tmp_path, args, status):
    plain, prof, report = plain_and_profiled("exit_modes.py", *args, tmp_path=tmp_path)
    assert plain.returncode == status, plain.explain()
    assert_same_behaviour(plain, prof)
    assert b"Traceback" not in prof.stderr
    assert report["exit_code"] == status


def test_sys_exit_with_a_message(tmp_path):
    plain, prof, report = plain_and_profiled("exit_modes.py", "exit-message", "lr must be > 0",
                                             tmp_path=tmp_path)
    assert plain.returncode == 1
    assert_same_behaviour(plain, prof)
    assert prof.clean_stderr.startswith(b"lr must be > 0\n")
    assert report["exit_code"] == 1 and report["metrics"]["run"]["outcome"] == "exit"


@pytest.mark.parametrize("mode, last", [
    ("raise", b"DataError: record 'b' is corrupt"),
    ("raise-tf", b"Input to reshape is a tensor with 6 values, but the requested shape has 16 [Op:Reshape]"),
    ("raise-in-function", b"ValueError: expected 3 features, got 5"),
])
def test_uncaught_exception_traceback_is_pythons(tmp_path, mode, last):
    """The whole traceback (chained causes included) is byte-identical to plain Python's: no
    frame of tflint's runner or of its hooks around TensorFlow calls shows up in it."""
    plain, prof, report = plain_and_profiled("exit_modes.py", mode, tmp_path=tmp_path)
    assert plain.returncode == 1
    assert_same_behaviour(plain, prof)
    script_err = prof.clean_stderr.partition(REPORT_HEAD)[0]
    assert last_line(script_err).strip().endswith(last)
    assert report["exit_code"] == 1 and report["metrics"]["run"]["outcome"] == "exception"


def test_scripts_own_excepthook_is_used(tmp_path):
    plain, prof, report = plain_and_profiled("exit_modes.py", "excepthook", tmp_path=tmp_path)
    assert plain.returncode == 1
    assert_same_behaviour(plain, prof)
    assert b"custom hook: RuntimeError: handled by the script's hook\n" in prof.stderr
    assert b"Traceback" not in prof.stderr
    assert report["metrics"]["run"]["outcome"] == "exception"


def test_relative_import_in_a_script_fails_as_in_python(tmp_path):
    plain, prof, report = plain_and_profiled("relative_import.py", tmp_path=tmp_path)
    assert plain.returncode == 1
    assert_same_behaviour(plain, prof)
    assert last_line(prof.clean_stderr.partition(REPORT_HEAD)[0]) == (
        b"ImportError: attempted relative import with no known parent package")
    assert report["exit_code"] == 1


def test_threads_running_tensorflow(tmp_path):
    plain, prof, report = plain_and_profiled("threads_train.py", tmp_path=tmp_path)
    assert plain.returncode == 0, plain.explain()
    assert_same_behaviour(plain, prof)
    assert prof.stdout.count(b"\n") == 3
    hooks = report["metrics"]["hooks"]
    assert all(h["status"] in ("ok", "off") for h in hooks.values()), hooks


@pytest.mark.slow  # the spawned children import TensorFlow again
def test_multiprocessing_spawn_reimports_the_script(tmp_path):
    plain, prof, _ = plain_and_profiled("spawn_workers.py", "--workers", "2", tmp_path=tmp_path)
    assert plain.returncode == 0, plain.explain()
    assert_same_behaviour(plain, prof)
    assert b"preprocessed [1, 4, 7, 10, 13, 16, 19, 22]\n" in prof.stdout
    assert b"child saw ('__mp_main__', 'spawn_workers.py', ['--workers', '2'])\n" in prof.stdout
    assert b"child exit 0\n" in prof.stdout


def test_tf_data_parallel_map(tmp_path):
    plain, prof, report = plain_and_profiled("tfdata_parallel_map.py", tmp_path=tmp_path)
    assert plain.returncode == 0, plain.explain()
    assert_same_behaviour(plain, prof)
    assert b"checksum " in prof.stdout and b"in tf.function " in prof.stdout
    assert report["metrics"]["hooks"]["input-stall"]["status"] == "ok"


@pytest.mark.parametrize("args", [("ok",), ("exit-message", "bad config"), ("raise",)],
                         ids=["returns", "sys.exit(message)", "raises"])
def test_merged_log_is_the_scripts_followed_by_the_report(tmp_path, args):
    """`python train.py > log 2>&1` with a block-buffered stdout: the script's stdout and stderr
    interleave exactly as without tflint, and the report comes after all of it."""
    def merged(cmd: list[str]) -> bytes:
        p = subprocess.run(cmd, cwd=FIXTURES, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
        return _AUTOGRAPH_FILE.sub(b"", _TF_LOG_LINE.sub(b"", p.stdout))

    plain = merged([sys.executable, "exit_modes.py", *args])
    prof = merged([sys.executable, "-m", "tflint", "profile", "exit_modes.py", "--", *args])
    assert b"trained 11.0\n" in plain
    script_part, sep, _ = prof.partition(REPORT_HEAD)
    assert sep, prof.decode(errors="replace")
    assert script_part == plain, (plain.decode(errors="replace"), prof.decode(errors="replace"))


# ------------------------------------------------------------------------------- Ctrl-C
def _interrupt(cmd: list[str]) -> tuple[int, bytes, bytes]:
    proc = subprocess.Popen(cmd, cwd=FIXTURES, env=env(PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        first = b""
        while time.monotonic() < deadline:
            first = proc.stdout.readline()
            if first.strip() == b"READY" or not first:
                break
        assert first.strip() == b"READY", proc.communicate(timeout=60)[1][-3000:]
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, first + out, err


@pytest.mark.slow
def test_ctrl_c_mid_training(tmp_path):
    report_path = tmp_path / "interrupted.json"
    p_rc, p_out, p_err = _interrupt([sys.executable, "sigint_train.py"])
    rc, out, err = _interrupt([sys.executable, "-m", "tflint", "profile", "sigint_train.py",
                               "--json", str(report_path)])
    # Python dies of SIGINT after printing the traceback; tflint exits 130 (what a shell shows)
    assert p_rc == -signal.SIGINT, p_err[-3000:]
    assert rc == 130, err[-3000:]
    assert out == p_out == b"READY\nfinally ran\n"  # the script's finally block ran
    script_err = _TF_LOG_LINE.sub(b"", err).partition(REPORT_HEAD)[0]
    assert last_line(script_err) == last_line(_TF_LOG_LINE.sub(b"", p_err)) == b"KeyboardInterrupt"
    assert b"/tflint/" not in script_err, "tflint's own frames in the script's traceback"
    assert b"interrupted (partial report)" in err
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["exit_code"] == 130
    assert report["metrics"]["run"]["outcome"] == "interrupted"
    assert report["steps"] >= 20


@pytest.mark.slow
def test_ctrl_c_handled_by_the_script(tmp_path):
    report_path = tmp_path / "caught.json"
    p_rc, p_out, _ = _interrupt([sys.executable, "sigint_train.py", "--catch"])
    rc, out, err = _interrupt([sys.executable, "-m", "tflint", "profile", "sigint_train.py",
                               "--json", str(report_path), "--", "--catch"])
    assert p_rc == 0 and rc == 0, err[-3000:]
    assert out == p_out == b"READY\ninterrupted: checkpoint saved\nfinally ran\n"
    assert b"KeyboardInterrupt" not in err
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["exit_code"] == 0 and report["metrics"]["run"]["outcome"] == "completed"
