"""`%load_ext tflint` in a real terminal IPython shell and in a real Jupyter kernel.

Both run in their own processes (TensorFlow is imported by the cells, as a user would): the
IPython shell in a small driver script, the kernel through jupyter_client's KernelManager.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(300)

DEFINE = "import tensorflow as tf\n\n@tf.function\ndef scale(x, n):\n    return x * n\n"
LOOP = "for i in range(6):\n    y = scale(tf.constant(1.0), i)\n"
PROFILED = "%%tflint_profile\nfor i in range(10, 16):\n    y = scale(tf.constant(1.0), i)\n"
RAISES = "def broken():\n    return {}['missing']\n\nbroken()\n"

DRIVER = textwrap.dedent(
    """
    import json, sys
    from IPython.terminal.interactiveshell import TerminalInteractiveShell

    ip = TerminalInteractiveShell.instance(colors="nocolor")
    for cell in json.loads(sys.stdin.read()):
        sys.stdout.write("\\n@@CELL@@\\n"); sys.stdout.flush()
        sys.stderr.write("\\n@@CELL@@\\n"); sys.stderr.flush()
        r = ip.run_cell(cell, store_history=True)
        sys.stdout.flush(); sys.stderr.flush()
        sys.stdout.write("\\n@@RESULT@@ " + json.dumps({"success": r.success, "result": repr(r.result)}) + "\\n")
    """
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.pop("TFLINT_CACHE_DIR", None)
    return env


def run_terminal_ipython(cells: list[str], cwd) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER], input=json.dumps(cells), capture_output=True, text=True,
        cwd=cwd, env=_env(), timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outs = proc.stdout.split("\n@@CELL@@\n")[1:]
    errs = proc.stderr.split("\n@@CELL@@\n")[1:]
    assert len(outs) == len(cells) == len(errs), (proc.stdout[-2000:], proc.stderr[-2000:])
    got = []
    for out, err in zip(outs, errs):
        body, _, res = out.rpartition("\n@@RESULT@@ ")
        got.append({"stdout": body, "stderr": err, **json.loads(res)})
    return got


def _tflint_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("tflint")]


def test_terminal_ipython(tmp_path):
    cells = [
        "%load_ext tflint",
        DEFINE,
        LOOP + "y",
        PROFILED,
        RAISES,
        "import tflint.server.core as _core\n_core.lint_notebook = lambda *a, **k: 1 / 0",
        "x = 41 + 1\nx",
    ]
    load, define, loop, profiled, raises, breaker, after_break = run_terminal_ipython(cells, tmp_path)
    assert load["success"] and not _tflint_lines(load["stdout"] + load["stderr"])
    # the definition alone is fine
    assert define["success"] and not _tflint_lines(define["stdout"])
    # the call in a loop, in a later cell: the static finding, after the cell's own output
    assert loop["success"] and "numpy=5.0" in loop["result"]
    out = loop["stdout"]
    assert "tflint: 1 finding in this cell" in out
    assert "line 2: TFL201 [warning] `scale` is a tf.function called with Python number `i`" in out
    assert out.index("numpy=5.0") < out.index("tflint: 1 finding")
    assert "<div" not in out  # plain text in a terminal
    # under %%tflint_profile: the report is the cell's result, with the retrace and its argument
    assert profiled["success"]
    assert "tflint profile: 1 runtime finding (6 steps" in profiled["stdout"]
    assert "retrace [warning] tf.function `scale` was traced 6 times" in profiled["stdout"]
    assert "n: Python int" in profiled["stdout"] and "(cell line 3)" in profiled["stdout"]
    assert "Report(" in profiled["result"]  # the report object itself is returned
    assert "line 3: TFL201" in profiled["stdout"]  # the static check saw the magic's body
    # a cell that raises keeps its traceback; tflint adds nothing
    assert not raises["success"]
    assert "KeyError" in raises["stdout"] and "broken()" in raises["stdout"]
    assert not _tflint_lines(raises["stdout"] + raises["stderr"])
    # tflint itself broken: one line, and the cell's result is untouched
    assert after_break["success"] and after_break["result"] == "42"
    assert "Out[" in after_break["stdout"] and "42" in after_break["stdout"]
    lines = _tflint_lines(after_break["stderr"])
    assert lines == ["tflint: checking the cell failed: ZeroDivisionError: division by zero"], after_break


def test_import_tflint_stays_light():
    # `%load_ext tflint` finds its entry point in the package, which imports nothing for it
    code = (
        "import sys, tflint\n"
        "assert callable(tflint.load_ipython_extension)\n"
        "heavy = {'IPython', 'tflint.notebook', 'tflint.server', 'pygls', 'tensorflow'} & set(sys.modules)\n"
        "print(sorted(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# -- a real Jupyter kernel --------------------------------------------------------------------


def _execute(kc, code: str, timeout: float = 120) -> dict:
    """Run ``code``; collect its iopub outputs until the kernel is idle again."""
    msg_id = kc.execute(code)
    got: dict = {"stream": {"stdout": "", "stderr": ""}, "display": [], "result": [], "error": [], "reply": None}
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"kernel gave no output for {code!r} in {timeout}s; got {got}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            got["stream"][content["name"]] += content["text"]
        elif kind == "display_data":
            got["display"].append(content["data"])
        elif kind == "execute_result":
            got["result"].append(content["data"])
        elif kind == "error":
            got["error"].append(content)
        elif kind == "status" and content["execution_state"] == "idle":
            break
    got["reply"] = kc.get_shell_msg(timeout=timeout)["content"]
    return got


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=_env(), cwd=str(tmp_path_factory.mktemp("kernel")))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_jupyter_kernel(kernel):
    load = _execute(kernel, "%load_ext tflint")
    assert load["reply"]["status"] == "ok" and not load["display"]
    define = _execute(kernel, DEFINE)
    assert define["reply"]["status"] == "ok" and not define["display"]

    # the static finding, under the second cell, as HTML with a plain-text fallback
    loop = _execute(kernel, LOOP + "y")
    assert loop["reply"]["status"] == "ok"
    assert "numpy=5.0" in loop["result"][0]["text/plain"]
    [shown] = loop["display"]
    assert "TFL201" in shown["text/html"] and "tflint-findings" in shown["text/html"]
    assert 'href="https://' in shown["text/html"]
    assert shown["text/plain"].startswith("tflint: 1 finding in this cell")

    # %%tflint_profile: the report is the cell's result (HTML), naming the argument
    prof = _execute(kernel, PROFILED)
    assert prof["reply"]["status"] == "ok", prof
    [report] = prof["result"]
    assert "tflint-report" in report["text/html"]
    assert "was traced" in report["text/html"] and "n: Python int" in report["text/html"]
    assert "tflint profile: 1 runtime finding" in report["text/plain"]
    # ... and inspectable
    check = _execute(kernel, "r = _\n(type(r).__name__, [s.kind for s in r.signals], r.signals[0].details['cause_counts'])")
    assert check["result"][0]["text/plain"].startswith("('Report', ['retrace'], {'n': ")

    # %tflint_watch on: every cell gets its report; off: none
    _execute(kernel, "%tflint_watch on")
    watched = _execute(kernel, "for i in range(20, 23):\n    scale(tf.constant(2.0), i)")
    assert any("tflint-report" in d.get("text/html", "") and "was traced" in d["text/html"] for d in watched["display"])
    assert _execute(kernel, "_tflint_report.signals[0].kind")["result"][0]["text/plain"] == "'retrace'"
    _execute(kernel, "%tflint_watch off")
    quiet = _execute(kernel, "for i in range(30, 33):\n    scale(tf.constant(2.0), tf.constant(i))")
    assert not quiet["display"], quiet

    # a cell that raises: its traceback as is, status error, nothing from tflint
    bad = _execute(kernel, RAISES)
    assert bad["reply"]["status"] == "error"
    [err] = bad["error"]
    assert err["ename"] == "KeyError" and any("broken()" in ln for ln in err["traceback"])
    assert not bad["display"] and "tflint" not in bad["stream"]["stderr"] + bad["stream"]["stdout"]


def test_configuration_is_honoured_in_ipython(tmp_path):
    # The static check only: a stand-in `tensorflow` module keeps this run free of TensorFlow.
    fake = tmp_path / "fake"
    (fake / "tensorflow").mkdir(parents=True)
    (fake / "tensorflow" / "__init__.py").write_text("def function(f=None, **kw):\n    return f\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "tflint.toml").write_text('ignore = ["TFL201"]\n')
    cells = [
        f"import sys; sys.path.insert(0, {str(fake)!r})\n%load_ext tflint",
        'import tensorflow as tf\n\n@tf.function\ndef scale(x, n):\n    print("tracing")\n    return x * n\n',
        "for i in range(3):\n    scale(1.0, i)\n",
        "open('tflint.toml', 'w').write('selekt = []\\n')",
        "for i in range(3):\n    scale(1.0, i)\n",
        "for j in range(3):\n    scale(2.0, j)\n",
    ]
    _, define, ignored, breaks, defaults, again = run_terminal_ipython(cells, work)
    assert "line 5: TFL101" in define["stdout"]
    assert not _tflint_lines(ignored["stdout"] + ignored["stderr"])  # TFL201 ignored by tflint.toml
    # an invalid configuration: one line naming the file and the key, once; the defaults apply
    [line] = _tflint_lines(breaks["stderr"])
    assert "tflint.toml" in line and "selekt" in line
    assert "TFL201" in defaults["stdout"] and not _tflint_lines(defaults["stderr"])
    assert "TFL201" in again["stdout"]


def test_magics_take_signals(tmp_path):
    cells = [
        "%load_ext tflint",
        DEFINE,
        # retrace left out: the retracing loop is not reported, and the report says it was off
        "%%tflint_profile --signals training-health\nfor i in range(10, 16):\n    y = scale(tf.constant(1.0), i)\n",
        "r = _\n(r.metrics['hooks']['retrace']['status'], r.metrics['hooks']['nan-inf']['status'], len(r.signals))",
        # a bad kind: IPython's one-line usage error, and the cell does not run
        "%%tflint_profile --signals retrace,bogus\nran = True\n",
        "'ran' in dir()",
        "%tflint_watch on --signals retrace",
        "for i in range(20, 23):\n    scale(tf.constant(2.0), i)\n",
        "(_tflint_report.signals[0].kind, _tflint_report.metrics['hooks']['nan-inf']['status'])",
        "%tflint_watch off",
    ]
    (_, _, health, statuses, bad, ran, watch_on, watched, watched_report, _) = run_terminal_ipython(cells, tmp_path)
    assert health["success"], health
    assert "Report(" in health["result"], health
    # the report says what it did not look at, rather than looking clean
    assert ("tflint profile: 0 runtime findings (6 steps" in health["stdout"]
            and "; not collected: retrace, none-gradient, soft-placement, input-stall, memory-growth)" in health["stdout"]), health
    assert statuses["result"] == "('off', 'ok', 0)", statuses
    assert not bad["success"]
    assert "UsageError: %%tflint_profile: --signals: unknown signal kind 'bogus'" in bad["stdout"] + bad["stderr"], bad
    assert "Traceback" not in bad["stdout"] + bad["stderr"]
    assert ran["result"] == "False", ran
    assert "signals: retrace" in watch_on["stdout"], watch_on
    assert watched["success"] and "was traced" in watched["stdout"], watched
    assert "not collected: none-gradient, soft-placement, input-stall, memory-growth, training-health)" in watched["stdout"]
    assert watched_report["result"] == "('retrace', 'off')", watched_report
