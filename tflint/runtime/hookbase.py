"""Common machinery of the runtime hooks: install, uninstall, self-disable, user call sites.

A hook patches a few TensorFlow/Keras attributes (class methods, module lists). Each hook:

* checks, at install time, that the private names it relies on exist; if one is missing it
  records ``status="unavailable"`` with the reason and installs nothing;
* restores every patched attribute to the exact object that was there before (``uninstall``);
* never breaks the user's call: the original TensorFlow function always runs once, its result
  (or exception) is passed through unchanged, and an exception raised by tflint's own code
  disables the hook (``status="failed"``) and is recorded instead of propagating.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from typing import Any, Callable

_TFLINT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARY_MARKERS = (
    os.sep + "tensorflow" + os.sep,
    os.sep + "tensorflow_core" + os.sep,
    os.sep + "keras" + os.sep,
    os.sep + "tf_keras" + os.sep,
    os.sep + "absl" + os.sep,
    os.sep + "tensorboard" + os.sep,
    "__autograph_generated_file",
)
_STDLIB_NAMES = ("contextlib.py", "functools.py", "threading.py", "runpy.py")

_is_library_cache: dict[str, bool] = {}

#: Test-only switch: ``TFLINT_DEBUG_FAIL_HOOK=retrace,memory-growth`` makes the event handler of
#: each named hook (``steps`` included) raise once, on its first use after install, so tests can
#: check on real TensorFlow that a failing hook disables itself without touching the user's run.
DEBUG_FAIL_ENV = "TFLINT_DEBUG_FAIL_HOOK"
_DEBUG_FAIL_HANDLERS = {
    "retrace": "_on_trace",
    "none-gradient": "_on_none",
    "soft-placement": "_scan_graph",
    "input-stall": "_on_eager_wait",
    "memory-growth": "sample",
    "steps": "_tick",
    "training-health": "_read_probes",
    "nan-inf": "tracked_tensors",
    "dead-parameter": "snapshot",
    "exploding-gradient": "judge",
    "vanishing-gradient": "judge",
    "loss-stall": "judge",
    "loss-broadcast": "check_target",
}


def is_library_file(filename: str) -> bool:
    """True for TensorFlow/Keras/absl/autograph-generated/tflint files and frozen modules."""
    cached = _is_library_cache.get(filename)
    if cached is not None:
        return cached
    result = (
        filename.startswith("<frozen")
        or filename == "<string>"
        or filename.startswith(_TFLINT_DIR)
        or any(m in filename for m in _LIBRARY_MARKERS)
        or (os.path.basename(filename) in _STDLIB_NAMES and "site-packages" not in filename)
    )
    if len(_is_library_cache) < 4096:
        _is_library_cache[filename] = result
    return result


def user_frame(frame: Any = None) -> tuple[str, int] | None:
    """(file, line) of the first frame outside the libraries, walking outwards from ``frame``."""
    f = frame if frame is not None else sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not is_library_file(fn):
            return fn, f.f_lineno
        f = f.f_back
    return None


AUTOGRAPH_MARKER = "__autograph_generated_file"
_autograph_maps: dict[str, dict[int, tuple[str, int]]] = {}  # generated file -> {line: (file, line)}


def _learn_autograph_map(frame: Any) -> None:
    """Remember the source map of the autograph-generated file running in ``frame``.

    TensorFlow maps converted code back to the user's source only in the thread that called
    it through autograph; a ``MirroredStrategy`` replica runs the converted step function in a
    thread of its own, where stacks and op tracebacks show the generated file. The converted
    function carries the map of its file (``ag_source_map``, covering the functions nested in
    it): it is found from the code object of a frame running that file — this one, or the
    enclosing converted function waiting in another thread — once per file, at trace time."""
    gen = frame.f_code.co_filename
    if gen in _autograph_maps or len(_autograph_maps) >= 1024:
        return
    import gc

    codes = [frame.f_code]
    for other in sys._current_frames().values():
        f = other
        while f is not None:
            if f.f_code.co_filename == gen and f.f_code not in codes:
                codes.append(f.f_code)
            f = f.f_back
    table: dict[int, tuple[str, int]] = {}
    for code in codes:
        for ref in gc.get_referrers(code):
            source_map = getattr(ref, "ag_source_map", None)
            if not isinstance(source_map, dict):
                continue
            for loc, origin in source_map.items():
                try:
                    if loc.filename == gen:
                        table[int(loc.lineno)] = (str(origin.loc.filename), int(origin.loc.lineno))
                except AttributeError:
                    continue
        if table:
            break
    _autograph_maps[gen] = table


def map_autograph(filename: str, lineno: int) -> tuple[str, int] | None:
    """The user's (file, line) behind a line of autograph-generated code, when its map is known."""
    table = _autograph_maps.get(filename)
    return table.get(int(lineno)) if table else None


def user_site_tf_stack() -> tuple[str, int] | None:
    """Like :func:`user_frame` but through TensorFlow's stack extractor, which maps frames of
    autograph-converted code back to the user's source (inside ``tf.function``); where it does
    not (a replica thread of ``MirroredStrategy``), the converted function's own source map."""
    try:
        from tensorflow.python.util import tf_stack

        frames = tf_stack.extract_stack()
        for fr in reversed(list(frames)):
            if not is_library_file(fr.filename):
                return fr.filename, int(fr.lineno)
    except Exception:  # noqa: BLE001 - fall back to the Python stack
        pass
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if AUTOGRAPH_MARKER in fn:
            try:
                _learn_autograph_map(f)
            except Exception:  # noqa: BLE001
                pass
            site = map_autograph(fn, f.f_lineno)
            if site is not None and not is_library_file(site[0]):
                return site
        elif not is_library_file(fn):
            return fn, f.f_lineno
        f = f.f_back
    return None


def drop_own_frame(exc: BaseException) -> None:
    """Remove the frame of the wrapper that is handling ``exc`` (the head of its traceback) so
    that a bare ``raise`` passes the user's exception on as if tflint were not there: a bare
    ``raise`` does not add the re-raising frame again, and TensorFlow's error messages for
    errors inside ``tf.function`` list the frames of the traceback they receive."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame.f_code.co_filename.startswith(_TFLINT_DIR):
        exc.__traceback__ = tb.tb_next


def runtime_initialized() -> bool:
    """True once TensorFlow's eager runtime (devices, collectives) has been initialised.

    Hooks never initialise it themselves: a script must still be able to configure logical
    devices, memory growth, visible devices or collective ops at start-up, which TensorFlow
    refuses once the runtime is up. Anything that touches devices waits until this is true.
    Cheap (an attribute read); False when the private attribute is missing."""
    try:
        from tensorflow.python.eager import context

        return getattr(context.context(), "_context_handle", None) is not None
    except Exception:  # noqa: BLE001
        return False


# what a per-step handler returns for "not at any step" / "not at any time" (see
# ProfileSession._on_step: each handler says at which step or time it is next due)
NEVER = float("inf")
# per-step handlers that sample every few steps do so for the first DENSE_STEPS steps only (short
# runs keep their resolution), then on their clock alone: a call of the due handlers costs
# ~40-50 µs right after a step, ~5 µs per step if it came every 8 steps of 1 ms
DENSE_STEPS = 512


def next_tick(now: float, interval: float) -> float:
    """The next point of a clock grid of ``interval`` at least half an interval after ``now``.
    Handlers that are due on the same grid run in the same per-step call, one after the
    other, instead of each waking Python (cold, right after a step) at a time of its own."""
    return (math.floor(now / interval + 0.5) + 1) * interval


class ThreadFlags(threading.local):
    """Per-thread state of the wrappers, with class-level defaults: reading a flag never set in
    a thread is a plain attribute read (``getattr(local, name, default)`` on a missing name
    raises and catches an AttributeError, several times slower, on every call)."""

    calling = False  # steps: inside a tf.function called eagerly
    applying = False  # steps: inside an optimizer's apply
    inside = False  # input: inside a distributed fetch (inner fetches are not timed)
    inner = 0.0
    inner_n = 0
    depth = 0  # gradients: nesting of the wrapped tape calls


class Hook:
    """Base class: subclasses set ``kind`` and implement ``check``/``_install``/``_uninstall``."""

    kind = "?"

    def __init__(self, session: Any) -> None:
        self.session = session
        self.store = session.store
        self.status = "ok"
        self.reason: str | None = None
        self.installed = False
        self.active = False  # fast flag read by the wrappers
        self._patches: list[tuple[Any, str, bool, Any]] = []
        self._lock = threading.Lock()

    # -- subclass API -------------------------------------------------------------------
    def check(self) -> str | None:
        """Return a reason string when the hook cannot work on this TensorFlow, else None."""
        return None

    def _install(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _uninstall(self) -> None:
        pass

    # -- machinery ----------------------------------------------------------------------
    def install(self) -> None:
        if self.installed or self.status in ("unavailable", "failed"):
            return
        try:
            reason = self.check()
        except Exception as exc:  # noqa: BLE001
            reason = f"{type(exc).__name__}: {exc}"
        if reason:
            self.status = "unavailable"
            self.reason = reason
            return
        try:
            self._install()
        except Exception as exc:  # noqa: BLE001
            self._restore_patches()
            self.status = "failed"
            self.reason = f"install failed: {type(exc).__name__}: {exc}"
            return
        self.installed = True
        self.active = True
        if os.environ.get(DEBUG_FAIL_ENV):
            self._arm_debug_failure(os.environ[DEBUG_FAIL_ENV])

    def _arm_debug_failure(self, spec: str) -> None:
        name = _DEBUG_FAIL_HANDLERS.get(self.kind)
        if self.kind not in {k.strip() for k in spec.split(",")} or not name or name in self.__dict__:
            return

        def fail_once(*args: Any, **kwargs: Any) -> Any:
            self.__dict__.pop(name, None)
            raise RuntimeError(f"forced failure of the {self.kind} handler ({DEBUG_FAIL_ENV})")

        self.__dict__[name] = fail_once

    def uninstall(self) -> None:
        self.active = False
        if not self.installed:
            return
        try:
            self._uninstall()
        except Exception as exc:  # noqa: BLE001
            if self.status == "ok":
                self.status = "failed"
                self.reason = f"uninstall failed: {type(exc).__name__}: {exc}"
        self._restore_patches()
        self.installed = False

    def fail(self, exc: BaseException, where: str = "") -> None:
        """Disable this hook after an internal error; the user's call is not affected."""
        self.active = False
        if self.status != "failed":
            self.status = "failed"
            self.reason = f"{where + ': ' if where else ''}{type(exc).__name__}: {exc}"

    def patch(self, owner: Any, name: str, make_wrapper: Callable[[Any], Any]) -> None:
        """Replace ``owner.name`` by ``make_wrapper(original)``; restored exactly on uninstall."""
        had_own = name in getattr(owner, "__dict__", {})
        saved = owner.__dict__[name] if had_own else None
        original = getattr(owner, name)
        wrapper = make_wrapper(original)
        try:
            wrapper.__wrapped__ = original
            wrapper.__name__ = getattr(original, "__name__", name)
            wrapper.__qualname__ = getattr(original, "__qualname__", name)
            wrapper.__doc__ = getattr(original, "__doc__", None)
        except (AttributeError, TypeError):
            pass
        setattr(owner, name, wrapper)
        self._patches.append((owner, name, had_own, saved))

    def _restore_patches(self) -> None:
        while self._patches:
            owner, name, had_own, saved = self._patches.pop()
            try:
                if had_own:
                    setattr(owner, name, saved)
                else:
                    delattr(owner, name)
            except Exception:  # noqa: BLE001 - best effort; keep restoring the others
                pass

    def status_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"status": self.status}
        if self.reason:
            d["reason"] = self.reason
        return d


def missing_names(pairs: list[tuple[Any, str]]) -> str | None:
    """Reason string naming the first missing attribute among ``(owner, name)`` pairs."""
    for owner, name in pairs:
        if not hasattr(owner, name):
            owner_name = getattr(owner, "__qualname__", None) or getattr(owner, "__name__", repr(owner))
            return f"{owner_name}.{name} not found in this TensorFlow/Keras version"
    return None
