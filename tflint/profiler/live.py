"""A one-line live status on stderr while the profiled script runs (only on a terminal).

``steps 1,240 · step 3.1 ms · retraces 2 · 12 s`` is redrawn in place twice a second by a
daemon thread that polls the watch session's cheap ``status()``. The script's own output is not
changed: its ``sys.stdout``/``sys.stderr`` writes pass through a thin wrapper that erases the
status first (on the terminal only), so the two never mix. The status is drawn on its own line
while the cursor is at the start of a line; while a progress bar owns the line (Keras ``fit``
redraws its bar with ``\\r``/``\\b``), the status is appended after the bar, as far as the
terminal is wide, and removed (backspaces, erase to end of line) before the bar's next redraw.
A line the script left unfinished without redrawing it is left alone.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import Any

_CLEAR = "\r\x1b[2K"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SEP = "  │ "


class LiveStatus:
    """Callable so a session may push status dicts to it; it also polls ``session.status()``."""

    def __init__(self, stream: Any = None, interval_s: float = 0.5) -> None:
        self._stream = stream if stream is not None else sys.__stderr__ or sys.stderr
        self._interval = interval_s
        self._lock = threading.RLock()
        self._status: dict[str, Any] = {}
        self._session: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._shown = False  # a status line is on screen
        self._at_line_start = True  # where the script left the cursor
        self._line = ""  # visible text of the script's unfinished line
        self._redrawn = False  # that line is redrawn in place (a progress bar)
        self._suffix = 0  # width of the status appended after a progress bar (0: none)
        self._start_time = time.monotonic()
        self._taps: list[tuple[str, Any, Any]] = []

    # -- a session may push its status -------------------------------------------------------
    def __call__(self, status: dict[str, Any] | None = None, **kw: Any) -> None:
        if isinstance(status, dict):
            with self._lock:
                self._status = dict(status)
        elif kw:
            with self._lock:
                self._status = dict(kw)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, session: Any = None) -> None:
        self._session = session
        self._start_time = time.monotonic()
        self._install_taps()
        self._thread = threading.Thread(target=self._loop, name="tflint-live", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        self._remove_taps()
        with self._lock:
            self._erase()

    # -- drawing --------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._poll()
                self.draw()
            except Exception:  # the status line must never disturb the run
                return

    def _poll(self) -> None:
        if self._session is None:
            return
        status = getattr(self._session, "status", None)
        if callable(status):
            value = status()
            if isinstance(value, dict):
                with self._lock:
                    self._status = dict(value)

    def line(self) -> str:
        with self._lock:
            st = dict(self._status)
        return format_status(st, time.monotonic() - self._start_time)

    def draw(self) -> None:
        text = self.line()
        with self._lock:
            if self._stop.is_set():
                return
            width = _terminal_width(self._stream)
            if self._at_line_start:
                if len(text) > width - 1:
                    text = text[: max(0, width - 2)] + "…"
                self._erase()
                self._stream.write(_CLEAR + "\x1b[2m" + text + "\x1b[0m")
                self._stream.flush()
                self._shown = True
            elif self._redrawn:
                # a progress bar owns the line: add the status after it, within the width
                room = width - 1 - len(self._line) - len(_SEP)
                if room < 12:
                    return
                if len(text) > room:
                    text = text[: room - 1] + "…"
                self._erase()
                self._stream.write("\x1b[2m" + _SEP + text + "\x1b[0m")
                self._stream.flush()
                self._suffix = len(_SEP) + len(text)

    def _erase(self) -> None:
        try:
            if self._shown:
                self._stream.write(_CLEAR)
                self._shown = False
            if self._suffix:
                self._stream.write("\b" * self._suffix + "\x1b[K")
                self._suffix = 0
            self._stream.flush()
        except Exception:
            self._shown = False
            self._suffix = 0

    # -- the script's writes ------------------------------------------------------------------
    def _before_write(self, same_terminal: bool) -> None:
        if same_terminal:
            self._lock.acquire()  # held until _after_write: no redraw between the two
            self._erase()

    def _after_write(self, text: str, same_terminal: bool) -> None:
        if not same_terminal:
            return
        try:
            if text:
                self._track(text)
        finally:
            self._lock.release()

    def _track(self, text: str) -> None:
        """Follow the cursor through the script's text: line start, and the visible line."""
        if "\n" in text:
            self._line, self._redrawn = "", False
            text = text.rsplit("\n", 1)[1]
        line = self._line
        for ch in _ANSI.sub("", text):
            if ch == "\r":
                line, self._redrawn = "", True
            elif ch == "\b":
                line, self._redrawn = line[:-1], True
            elif ch >= " " or ch == "\t":
                line += ch
        self._line = line[-1000:]
        self._at_line_start = not line and not self._redrawn

    def _install_taps(self) -> None:
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            same = _same_terminal(stream, self._stream)
            tap = _Tap(stream, self, same)
            setattr(sys, name, tap)
            self._taps.append((name, stream, tap))

    def _remove_taps(self) -> None:
        for name, original, tap in self._taps:
            if getattr(sys, name) is tap:  # the script may have replaced it: leave theirs
                setattr(sys, name, original)
        self._taps.clear()


class _Tap:
    """Passes every write through unchanged; erases the status line first on the terminal."""

    def __init__(self, stream: Any, owner: LiveStatus, same_terminal: bool) -> None:
        object.__setattr__(self, "_tap_stream", stream)
        object.__setattr__(self, "_tap_owner", owner)
        object.__setattr__(self, "_tap_same", same_terminal)

    def write(self, text: str) -> int:
        owner = self._tap_owner
        owner._before_write(self._tap_same)
        n = 0
        try:
            n = self._tap_stream.write(text)
        finally:
            owner._after_write(text if isinstance(text, str) else "", self._tap_same)
        return n

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tap_stream, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._tap_stream, name, value)

    def __iter__(self) -> Any:
        return iter(self._tap_stream)


def format_status(status: dict[str, Any], elapsed_s: float) -> str:
    steps = status.get("steps")
    parts = [f"tflint: steps {steps:,}" if isinstance(steps, int) else "tflint: starting"]
    step_time = status.get("last_step_time_s")
    if isinstance(step_time, (int, float)):
        parts.append(f"step {_fmt_seconds(float(step_time))}")
    retraces = status.get("retraces")
    if isinstance(retraces, int):
        parts.append(f"retraces {retraces}")
    parts.append(f"{elapsed_s:.0f} s")
    return " · ".join(parts)


def _fmt_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1.0:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def _terminal_width(stream: Any) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except Exception:
        return 80
    return columns if columns >= 20 else 80  # an unsized terminal reports 0


def _same_terminal(a: Any, b: Any) -> bool:
    try:
        if not a.isatty():
            return False
        return os.path.samestat(os.fstat(a.fileno()), os.fstat(b.fileno()))
    except Exception:
        return False
