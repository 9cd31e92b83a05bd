"""Helpers for premise tests: lint a program's text and run the same text under real TensorFlow.

A premise test keeps each program as one string, so the text tflint reads is the text that runs:
``findings(src)`` lints it (``tflint.check.engine.lint_text``, every rule, the default target),
``run(src)`` executes it in this process and returns its globals, ``run_isolated(programs)``
executes several programs in one fresh interpreter (for device configuration that must happen
before TensorFlow starts, e.g. two logical CPU devices for ``MirroredStrategy``) and returns each
program's ``RESULT``. ``pipeline_nodes(ds)`` are the kinds of the nodes of the pipeline tf.data
really runs after its optimizations (``ParallelMapV2``, ``Map``, ``Prefetch``...), read from the
iterator's autotuning model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def findings(src: str, target: str | None = None) -> list[tuple[int, str]]:
    """(line, code) of every finding tflint reports on ``src``."""
    from tflint.check.engine import lint_text
    from tflint.rules import rule_codes

    tv = None
    if target is not None:
        from tflint.analysis.version import make_target

        tv = make_target(target)
    result = lint_text("program.py", textwrap.dedent(src), frozenset(rule_codes()), target=tv)
    assert not result.errors, result.errors
    return sorted((f.line, f.code) for f in result.findings)


def codes(src: str, target: str | None = None) -> set[str]:
    return {c for _, c in findings(src, target)}


_count = [0]


def _register(text: str) -> str:
    """A file name for ``text`` that ``linecache`` (so AutoGraph) can read the source from."""
    import linecache

    _count[0] += 1
    name = f"<premise-program-{_count[0]}>.py"
    linecache.cache[name] = (len(text), None, text.splitlines(keepends=True), name)
    return name


def run(src: str, **names) -> dict:
    """Execute ``src`` (dedented) in a fresh namespace holding ``names``; return the namespace."""
    text = textwrap.dedent(src)
    ns: dict = {"__name__": "premise_program", **names}
    exec(compile(text, _register(text), "exec"), ns)  # noqa: S102 - the program under test
    return ns


_RUNNER = r'''
import json, linecache, os, sys, textwrap
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
cpus = tf.config.list_physical_devices("CPU")
n = int(sys.argv[1])
if n > 1:
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * n)
programs = json.loads(sys.stdin.read())
out = {}
for name, src in programs.items():
    ns = {"__name__": "premise_program"}
    text = textwrap.dedent(src)
    filename = "<premise-" + name + ">.py"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    try:
        exec(compile(text, filename, "exec"), ns)
        out[name] = {"result": ns.get("RESULT")}
    except Exception as exc:
        out[name] = {"error": type(exc).__name__ + ": " + str(exc)[:500]}
print("@@RESULTS@@" + json.dumps(out, default=str))
'''


def run_isolated(programs: dict[str, str], logical_cpus: int = 1, timeout: float = 240) -> dict:
    """Run each program (in order) in one new interpreter with ``logical_cpus`` CPU devices
    configured before anything else; ``{name: {"result": RESULT} | {"error": "Type: msg"}}``."""
    return run_isolated_many([(programs, logical_cpus)], timeout)[0]


def run_isolated_many(jobs: list[tuple[dict[str, str], int]], timeout: float = 240) -> list[dict]:
    """:func:`run_isolated` for several (programs, logical_cpus) jobs, in concurrent interpreters
    (TensorFlow's start-up dominates; the jobs overlap it)."""
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    procs = [
        subprocess.Popen([sys.executable, "-c", _RUNNER, str(n)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _, n in jobs
    ]
    outs = []
    try:
        for proc, (programs, _) in zip(procs, jobs):
            stdout, stderr = proc.communicate(json.dumps(programs), timeout=timeout)
            marker = [ln for ln in stdout.splitlines() if ln.startswith("@@RESULTS@@")]
            assert proc.returncode == 0 and marker, stderr[-3000:]
            outs.append(json.loads(marker[-1][len("@@RESULTS@@"):]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outs


def pipeline_nodes(ds) -> set[str]:
    """The node kinds of the pipeline tf.data runs for ``ds`` (after its graph rewrites)."""
    from tensorflow.core.framework import model_pb2
    from tensorflow.python.ops import gen_experimental_dataset_ops

    it = iter(ds)
    next(it)
    raw = gen_experimental_dataset_ops.iterator_get_model_proto(it._iterator_resource).numpy()
    model = model_pb2.ModelProto()
    model.ParseFromString(raw)
    return {n.name for n in model.nodes.values()}
