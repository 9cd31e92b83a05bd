"""Helpers for the `tflint profile` tests: run a script under the real profiler in a subprocess.

Every run is a real process with real TensorFlow (3-5 s just to import it), so runs of the
bundled fixtures are cached for the whole test session and shared between test files.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "profile"
DOCS_SCHEMA = ROOT / "docs" / "profile-json.md"
PROFILE_EXPECT_RE = re.compile(r"#\s*profile-expect:\s*([a-z-]+(?:\s*,\s*[a-z-]+)*)")
# a kind that a fixture's line may report on some machines and not on others (see the fixture)
PROFILE_MAY_RE = re.compile(r"#\s*profile-may:\s*([a-z-]+(?:\s*,\s*[a-z-]+)*)")
RUN_TIMEOUT_S = 180


def profile_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ start-up chatter
    env.pop("PYTHONSTARTUP", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "120"  # width of the terminal report when stderr is not a terminal
    env.update(extra)
    return env


@dataclass
class ProfileRun:
    cmd: list[str]
    returncode: int
    stdout: str
    stderr: str
    json_path: Path | None

    @property
    def report(self) -> dict[str, Any]:
        assert self.json_path is not None and self.json_path.exists(), (
            f"no JSON report written; rc={self.returncode}\nstderr:\n{self.stderr[-4000:]}"
        )
        return json.loads(self.json_path.read_text(encoding="utf-8"))

    def signals(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [s for s in self.report["signals"] if kind is None or s["kind"] == kind]

    def explain(self) -> str:
        return f"cmd: {' '.join(self.cmd)}\nrc={self.returncode}\nstdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-6000:]}"


def run_profile(
    script: str | Path,
    *args: str,
    options: tuple[str, ...] = (),
    json_path: Path | None = None,
    cwd: Path | None = None,
    module: bool = True,
    timeout: float = RUN_TIMEOUT_S,
) -> ProfileRun:
    """``python -m tflint profile [--json PATH] OPTIONS SCRIPT -- ARGS`` in a subprocess."""
    cmd = [sys.executable, "-m", "tflint"] if module else [str(Path(sys.executable).parent / "tflint")]
    cmd += ["profile", str(script)]
    if json_path is not None:
        cmd += ["--json", str(json_path)]
    cmd += list(options)
    if args:
        cmd += ["--", *args]
    proc = subprocess.run(
        cmd, cwd=cwd or ROOT, env=profile_env(), capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return ProfileRun(cmd, proc.returncode, proc.stdout, proc.stderr, json_path)


def expected_signals(name: str, marker: re.Pattern[str] = PROFILE_EXPECT_RE) -> dict[str, list[int]]:
    """``{kind: [line, ...]}`` from the ``# profile-expect: kind`` markers of a fixture (with
    ``PROFILE_MAY_RE``, from its ``# profile-may: kind`` markers)."""
    out: dict[str, list[int]] = {}
    text = (FIXTURES / name).read_text(encoding="utf-8")
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = marker.search(line)
        if m:
            for kind in m.group(1).split(","):
                out.setdefault(kind.strip(), []).append(lineno)
    return out


# fixture name -> extra tflint options used for its cached run (one run per fixture)
FIXTURE_OPTIONS: dict[str, tuple[str, ...]] = {
    "retrace_python_int.py": ("--fail-on", "retrace"),
    "clean_custom_loop.py": ("--fail-on", "all"),
    "clean_fit.py": ("--fail-on", "all"),
    "input_stall_fit.py": ("--logdir", "{out}/tb-input_stall_fit"),  # read back by test_tensorboard
    "nan_inf_eager.py": ("--fail-on", "nan-inf"),
    "loss_broadcast_clean.py": ("--fail-on", "all"),
    "vanishing_gradient_loop.py": ("--logdir", "{out}/tb-vanishing"),  # loss and gradient-norm tags
}


@pytest.fixture(scope="session")
def profiled(tmp_path_factory: pytest.TempPathFactory):
    """``profiled("retrace_python_int.py")`` -> the cached :class:`ProfileRun` of a fixture."""
    cache: dict[str, ProfileRun] = {}
    out_dir = tmp_path_factory.mktemp("profile-runs")

    def get(name: str) -> ProfileRun:
        if name not in cache:
            json_path = out_dir / (Path(name).stem + ".json")
            options = tuple(o.replace("{out}", str(out_dir)) for o in FIXTURE_OPTIONS.get(name, ()))
            cache[name] = run_profile(FIXTURES / name, options=options, json_path=json_path)
        return cache[name]

    return get
