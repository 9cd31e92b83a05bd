"""The report as a person reads it: the live status next to Keras' progress bar, whole
sentences in the summary, the traceback printed once and without tflint's frames."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import time

import pytest

from tests.profile.conftest import ROOT, profile_env, run_profile
from tflint.profiler.live import LiveStatus, _Tap
from tflint.profiler.renderers.terminal import _exception_line, headline


class _Term(io.StringIO):
    def fileno(self) -> int:  # no terminal size: 80 columns
        raise OSError


def _live(stream):
    live = LiveStatus(stream=stream)
    live({"steps": 12, "last_step_time_s": 0.003, "retraces": 0})
    return live, _Tap(stream, live, True)


def test_status_is_appended_after_a_progress_bar_and_removed_before_its_redraw():
    term = _Term()
    live, tap = _live(term)
    tap.write("\r 3/10 ━━━━━━ 1s 20ms/step - loss: 0.5")
    live.draw()
    out = term.getvalue()
    assert out.endswith("\x1b[0m") and "tflint: steps 12" in out  # drawn after the bar
    drawn = out.rsplit(" - loss: 0.5", 1)[1]
    width = len("\x1b[2m" + "  │ ") - len("\x1b[2m")
    tap.write("\b" * 10 + "\r 4/10 ━━━━━━ 1s 20ms/step - loss: 0.4")
    after = term.getvalue()[len(out):]
    # erased first: as many backspaces as it was wide, then erase-to-end-of-line
    visible = len(drawn.replace("\x1b[2m", "").replace("\x1b[0m", ""))
    assert after.startswith("\b" * visible + "\x1b[K") and visible > width
    live.draw()
    tap.write(" - loss: 0.3\n")  # the bar's last redraw ends the line
    n = len(term.getvalue())
    live.draw()  # at a line start: the status has a line of its own
    assert term.getvalue()[n:].startswith("\r\x1b[2K")


def test_status_is_not_added_to_a_line_the_script_left_unfinished():
    term = _Term()
    live, tap = _live(term)
    tap.write("loading data... ")
    n = len(term.getvalue())
    live.draw()
    assert term.getvalue()[n:] == ""


def test_status_fits_the_terminal_width():
    term = _Term()
    live, tap = _live(term)
    tap.write("\r" + "x" * 60)
    live.draw()
    tail = term.getvalue().rsplit("x", 1)[1].replace("\x1b[2m", "").replace("\x1b[0m", "")
    assert 60 + len(tail) <= 79 and tail.endswith("…")


def test_headline_is_a_whole_sentence_or_ends_with_an_ellipsis():
    assert headline("Short thing happened. More detail here. Fix: do it.") == "Short thing happened."
    long = "HIGHLY input-bound: " + "word " * 40 + "end. Second sentence."
    h = headline(long)
    assert h.endswith("…") and len(h) <= 90 and not h[:-1].endswith(" ")


def test_header_shows_the_exception_once_not_its_traceback():
    text = "ValueError: in user code:\n\n    File \"x.py\", line 3, in step\n        boom()\n\n    ValueError: boom"
    assert _exception_line(text) == "ValueError: in user code: … (traceback above)"
    assert _exception_line("KeyError: 'x'") == "KeyError: 'x'"


ERR_SCRIPT = '''
import tensorflow as tf
model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
opt = tf.keras.optimizers.SGD(0.1)


@tf.function
def step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    grads = [tf.zeros([3, 3])] + grads[1:]  # wrong shape: Keras raises inside apply
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


step(tf.zeros([8, 4]))
'''


def test_error_inside_tf_function_traceback_has_no_tflint_frames_and_is_printed_once(tmp_path):
    script = tmp_path / "bad_step.py"
    script.write_text(ERR_SCRIPT, encoding="utf-8")
    run = run_profile(script)
    assert run.returncode == 1, run.explain()
    err = run.stderr
    assert "Dimension 0 in both shapes must be equal" in err
    assert "tflint/runtime" not in err, err[-4000:]  # no frame of tflint's hooks
    assert "apply_gradients  **" in err  # Keras' own frames stay, as without tflint
    # TensorFlow's in-graph traceback ("in user code:") once; the report header has one line
    assert err.count("in user code:") == 1, err[-4000:]
    report = err[err.index("tflint profile " + str(script)):]
    assert "raised ValueError: in user code: … (traceback above)" in " ".join(report.split())


FIT_SCRIPT = '''
import time
import numpy as np
import tensorflow as tf
x = np.zeros((640, 4), np.float32); y = np.zeros((640, 1), np.float32)
model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
slow = tf.keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: time.sleep(0.03))
model.fit(x, y, batch_size=8, epochs=1, verbose=1, callbacks=[slow])
'''


@pytest.mark.slow
def test_live_status_shows_during_fit_next_to_the_progress_bar(tmp_path):
    script = tmp_path / "fit_bar.py"
    script.write_text(FIT_SCRIPT, encoding="utf-8")
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "tflint", "profile", str(script)], cwd=ROOT,
                                env=profile_env(TERM="xterm"), stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
        os.close(slave)
        slave = -1
        chunks = []
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=60)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, text[-3000:]
    assert "━" in text  # Keras drew its progress bar on the terminal
    bar_lines = [seg for seg in text.split("\r") if "━" in seg and "tflint: steps" in seg]
    assert bar_lines, text[-3000:]  # the status was drawn on the bar's line, after the bar


def test_step_time_line_never_shows_a_p90_below_the_median():
    """Two or three steps (a short run): the p90 is a nearest rank, the median the report's."""
    from tflint.profiler.renderers.terminal import TerminalRenderer
    from tflint.profiler.report import Report

    rep = Report.from_dict({"tflint_version": "0", "script": "s.py", "steps": 3, "signals": [],
                            "metrics": {"step_time_s": [[2, 1.82], [3, 1.4]], "median_step_time_s": 1.82}})
    out = io.StringIO()
    TerminalRenderer(file=out, width=120).render(rep)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("step time"))
    assert "median 1.8 s, p90 1.8 s" in line, line
