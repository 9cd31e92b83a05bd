"""Run small TensorFlow programs for real, all in one process, and lint the same texts.

Each program is a whole module (it imports TensorFlow itself) that records what TensorFlow
did in a dict named ``SEEN``; an exception that escapes the program is recorded too. Programs
run one after another in a single Python process, because importing TensorFlow costs seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tflint.check.engine import lint_text

ROOT = Path(__file__).resolve().parents[2]

_RUNNER = r'''
import json, sys, traceback
programs = json.loads(sys.stdin.read())
out = {}
for name, text in programs.items():
    ns = {"__name__": "__premise__", "SEEN": {}}
    try:
        exec(compile(text, name + ".py", "exec"), ns)
        raised = None
    except Exception as exc:
        raised = {"type": type(exc).__name__, "message": str(exc)[:300]}
    seen = {k: v for k, v in ns["SEEN"].items()}
    out[name] = {"seen": seen, "raised": raised}
print("RESULT " + json.dumps(out, default=repr))
'''


def run_programs(programs: dict[str, str], timeout: int = 540) -> dict[str, dict]:
    """``{name: {"seen": SEEN, "raised": None | {"type", "message"}}}`` for each program."""
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER],
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin",
             "PYTHONHASHSEED": "0"},
        cwd=ROOT,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def lint(text: str, code: str) -> list:
    """tflint's findings of rule ``code`` on the program text (the engine, as `tflint check`)."""
    result = lint_text("premise.py", text, frozenset({code}))
    assert result.errors == [], result.errors
    return [f for f in result.findings if f.code == code]
