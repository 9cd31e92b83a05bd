"""Run a user's training script the way ``python script.py ARGS`` would, with tflint watching.

The script runs in this process as the ``__main__`` module, with ``sys.argv`` set to
``[script, *args]`` and ``sys.path[0]`` set to the script's directory so that its own modules
import. Its stdout and stderr are left alone. Whatever happens to it, the report is produced:

=======================================  ==========================================
the script ...                           exit status of ``tflint profile``
=======================================  ==========================================
finishes                                 0
calls ``sys.exit(n)``                    ``n`` (``None`` -> 0, a message -> 1)
raises                                   1, traceback printed as Python prints it
is interrupted (Ctrl-C / SIGINT)         130, with a partial report
cannot be run (missing, syntax error)    2, one line on stderr, no report
=======================================  ==========================================

With ``--fail-on KINDS``, a run whose script exited 0 exits with :data:`FAIL_ON_EXIT_CODE`
when any signal of those kinds fired. A script that failed on its own keeps its exit status.

The report (terminal on stderr, ``--json`` written atomically, ``--logdir`` TensorBoard
scalars) is produced after the script has finished and the hooks are removed.
"""

from __future__ import annotations

import builtins
import os
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tflint.profiler.report import SIGNAL_KINDS, expand_signal_names

#: Exit status of a run whose script exited 0 while a ``--fail-on`` signal fired.
FAIL_ON_EXIT_CODE = 3
#: Exit status for a script that cannot be run, or bad arguments.
USAGE_EXIT_CODE = 2
#: Exit status of an interrupted run (128 + SIGINT, what a shell reports for Ctrl-C).
INTERRUPT_EXIT_CODE = 130


class ProfileUsageError(Exception):
    """Bad input: reported as one line on stderr and exit status 2."""


@dataclass
class ProfileOptions:
    script: str
    args: list[str] = field(default_factory=list)
    json_path: str | None = None
    logdir: str | None = None
    fail_on: frozenset[str] = frozenset()
    signals: frozenset[str] | None = None  # None: every signal kind
    live: bool | None = None  # None: on when stderr is a terminal


@dataclass
class Outcome:
    """How the script ended."""

    exit_code: int
    kind: str  # "completed" | "exit" | "exception" | "interrupted"
    exception: str | None = None  # "ValueError: message" for "exception"/"interrupted"

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.kind, "exception": self.exception}


def parse_kinds(value: str, option: str) -> frozenset[str]:
    """``"retrace,none-gradient"`` -> the set of kinds; ``"all"`` -> every kind;
    ``"training-health"`` -> its six kinds. Bad input raises :class:`ProfileUsageError`."""
    kinds, unknown = expand_signal_names(value)
    if unknown:
        raise ProfileUsageError(
            f"{option}: unknown signal kind {unknown[0]!r} (expected a comma-separated list of "
            f"{', '.join(SIGNAL_KINDS)}, training-health (its six kinds), or all)"
        )
    if not kinds:
        raise ProfileUsageError(f"{option}: no signal kinds given")
    return frozenset(kinds)


def parse_fail_on(value: str | None, signals: frozenset[str] | None = None) -> frozenset[str]:
    """The ``--fail-on`` kinds; with ``signals`` (``--signals``), ``all`` means every collected
    kind and naming a kind that is not collected is an error (it could never fire)."""
    if value is None:
        return frozenset()
    kinds = parse_kinds(value, "--fail-on")
    if signals is None:
        return kinds
    if "all" not in {p.strip() for p in value.split(",")}:
        missing = sorted(kinds - signals, key=SIGNAL_KINDS.index)
        if missing:
            raise ProfileUsageError(
                f"--fail-on {', '.join(missing)}: not collected, so "
                + ("it could never fire; add it" if len(missing) == 1 else "they could never fire; add them")
                + " to --signals"
            )
    return kinds & signals


def compile_script(path: str) -> tuple[str, Any]:
    """Read and compile the script; bad input raises :class:`ProfileUsageError`.

    Returns the absolute path (what Python uses as ``__file__`` and in tracebacks) and the
    code object.
    """
    if not os.path.exists(path):
        raise ProfileUsageError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ProfileUsageError(f"{path}: is a directory, expected a Python script")
    # like the interpreter: cwd joined to the path as given, not normalised ("./", "..")
    abspath = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    try:
        with open(abspath, "rb") as fh:
            source = fh.read()
    except OSError as exc:
        raise ProfileUsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        code = compile(source, abspath, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else path
        if exc.lineno and exc.offset:
            where += f":{exc.offset}"
        raise ProfileUsageError(f"{where}: {type(exc).__name__}: {exc.msg}") from None
    except (ValueError, UnicodeDecodeError) as exc:  # null bytes, bad encoding
        raise ProfileUsageError(f"{path}: cannot compile: {exc}") from None
    return abspath, code


def check_outputs(opts: ProfileOptions) -> None:
    """Fail early (before a long run) when the report could not be written."""
    if opts.json_path is not None:
        if os.path.isdir(opts.json_path):
            raise ProfileUsageError(f"--json {opts.json_path}: is a directory")
        parent = os.path.dirname(os.path.abspath(opts.json_path))
        if not os.path.isdir(parent):
            raise ProfileUsageError(f"--json {opts.json_path}: directory {parent} does not exist")
        if not os.access(parent, os.W_OK):
            raise ProfileUsageError(f"--json {opts.json_path}: directory {parent} is not writable")
    if opts.logdir is not None and os.path.exists(opts.logdir) and not os.path.isdir(opts.logdir):
        raise ProfileUsageError(f"--logdir {opts.logdir}: exists and is not a directory")


def environment_before_tensorflow(source: bytes | str) -> list[tuple[str, str, bool]]:
    """What a script sets in ``os.environ`` at its top level before it first imports TensorFlow
    or Keras, as ``(name, value, overwrite)``: string literals assigned
    (``os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"``) or given to ``os.environ.setdefault``. TensorFlow
    and Keras read such variables (log level, backend, visible devices) when they are imported,
    and the profiler imports them before the script runs."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []

    def environ(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ"
                and isinstance(node.value, ast.Name) and node.value.id == "os")

    def literal(node: ast.AST) -> str | None:
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None

    out: list[tuple[str, str, bool]] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]
            if any(n.split(".")[0] in ("tensorflow", "keras", "tf_keras") for n in names):
                break
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            t = stmt.targets[0]
            if isinstance(t, ast.Subscript) and environ(t.value):
                key, value = literal(t.slice), literal(stmt.value)
                if key is not None and value is not None:
                    out.append((key, value, True))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            f, args = stmt.value.func, stmt.value.args
            if (isinstance(f, ast.Attribute) and f.attr == "setdefault" and environ(f.value) and len(args) == 2
                    and literal(args[0]) is not None and literal(args[1]) is not None):
                out.append((literal(args[0]), literal(args[1]), False))
    return out


def run(opts: ProfileOptions) -> int:
    """Profile ``opts.script``; returns the exit status. Bad input raises ProfileUsageError."""
    abspath, code = compile_script(opts.script)
    check_outputs(opts)
    # the script's own settings for TensorFlow's import, made before the profiler imports it
    try:
        with open(abspath, "rb") as fh:
            preset = environment_before_tensorflow(fh.read())
    except OSError:
        preset = []
    for key, value, overwrite in preset:
        if overwrite:
            os.environ[key] = value
        else:
            os.environ.setdefault(key, value)
    import importlib
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        raise ProfileUsageError(
            "TensorFlow is not installed; install it, e.g. pip install 'tflint[profile]'"
        )
    try:
        watch = importlib.import_module("tflint.runtime.watch").watch
    except ImportError as exc:  # TensorFlow missing or broken
        raise ProfileUsageError(
            f"cannot load TensorFlow ({exc}); install it, e.g. pip install 'tflint[profile]'"
        ) from None

    live = None
    if opts.live or (opts.live is None and _stderr_is_tty()):
        from tflint.profiler.live import LiveStatus

        live = LiveStatus()

    argv = [opts.script, *opts.args]
    start = time.perf_counter()
    outcome: Outcome
    with _as_main(abspath, argv) as main_globals:
        session = watch(signals=opts.signals, live=live)
        try:
            session.__enter__()
        except Exception as exc:  # the hooks must never stop the training run
            _warn(f"could not install the TensorFlow hooks ({type(exc).__name__}: {exc}); "
                  "running the script without them")
            session, hook_error = None, f"{type(exc).__name__}: {exc}"
        else:
            hook_error = None
        if live is not None and session is not None:
            live.start(session)
        try:
            outcome = _execute(code, main_globals, abspath)
        finally:
            if live is not None:
                live.stop()
            if session is not None:
                session.__exit__(None, None, None)
        duration = round(time.perf_counter() - start, 6)
        report = _build_report(session, hook_error, opts, outcome, duration)
    report.metrics.setdefault("run", outcome.to_dict())
    _render(report, opts)
    return exit_status(outcome.exit_code, report, opts.fail_on)


def _build_report(session: Any, hook_error: str | None, opts: ProfileOptions, outcome: Outcome,
                  duration: float) -> Any:
    """The session's report; if the hooks never ran or building it fails, a report that says so
    (same schema, no signals), so that a run always leaves its report behind."""
    if session is not None:
        try:
            return session.report(script=opts.script, argv=list(opts.args),
                                  exit_code=outcome.exit_code, duration_s=duration)
        except Exception as exc:  # noqa: BLE001
            hook_error = f"building the report failed: {type(exc).__name__}: {exc}"
            _warn(hook_error)
    from tflint import __version__
    from tflint.profiler.report import Report

    reason = hook_error or "hooks not installed"
    return Report(
        tflint_version=__version__, script=opts.script, argv=list(opts.args),
        exit_code=outcome.exit_code, duration_s=duration, steps=0, signals=[],
        metrics={
            "step_time_s": [], "input_wait_share": {"overall": None, "series": []},
            "host_rss_bytes": [], "device_memory_bytes": {}, "retraces": 0,
            "gpu": {"available": False, "reason": reason},
            "hooks": {kind: {"status": "failed", "reason": reason}
                      if opts.signals is None or kind in opts.signals else {"status": "off", "reason": "not selected"}
                      for kind in SIGNAL_KINDS},
        },
    )


def _warn(line: str) -> None:
    try:
        sys.stderr.write(f"tflint profile: warning: {line}\n")
        sys.stderr.flush()
    except Exception:
        pass


def exit_status(script_exit: int, report: Any, fail_on: frozenset[str]) -> int:
    if script_exit == 0 and fail_on and any(s.kind in fail_on for s in report.signals):
        return FAIL_ON_EXIT_CODE
    return script_exit


def _render(report: Any, opts: ProfileOptions) -> None:
    """JSON first (what CI reads), then TensorBoard, then the terminal; one failing renderer
    does not stop the others."""
    from tflint.profiler.renderers.terminal import TerminalRenderer

    try:  # the script's buffered output first, so that in a merged log the report comes last
        sys.stdout.flush()
    except Exception:
        pass
    problems: list[str] = []
    if opts.json_path is not None:
        from tflint.profiler.renderers.json import JsonRenderer

        try:
            JsonRenderer(opts.json_path).render(report)
        except OSError as exc:
            problems.append(f"could not write --json {opts.json_path}: {exc}")
    if opts.logdir is not None:
        from tflint.profiler.renderers.tensorboard import TensorBoardRenderer

        try:
            TensorBoardRenderer(opts.logdir).render(report)
        except Exception as exc:  # never lose the rest of the report over TensorBoard
            problems.append(f"could not write TensorBoard scalars to {opts.logdir}: {exc}")
    try:
        TerminalRenderer().render(report)
    except Exception as exc:
        problems.append(f"could not render the terminal report: {type(exc).__name__}: {exc}")
    for line in problems:
        _warn(line)


def _execute(code: Any, main_globals: dict[str, Any], abspath: str) -> Outcome:
    """Run the script's code; translate how it ended as the interpreter would."""
    try:
        exec(code, main_globals)
    except SystemExit as exc:
        return Outcome(_system_exit_code(exc), "exit")
    except KeyboardInterrupt as exc:
        _print_exception(exc, abspath)
        return Outcome(INTERRUPT_EXIT_CODE, "interrupted", _describe(exc))
    except BaseException as exc:  # noqa: BLE001 - the script's own failure, passed through
        _print_exception(exc, abspath)
        return Outcome(1, "exception", _describe(exc))
    return Outcome(0, "completed")


def _system_exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    # Like the interpreter: anything else is printed to stderr (after the script's buffered
    # stdout) and the status is 1.
    try:
        sys.stdout.flush()
    except Exception:
        pass
    try:
        sys.stderr.write(f"{code}\n")
        sys.stderr.flush()
    except Exception:
        pass
    return 1


def _describe(exc: BaseException) -> str:
    text = str(exc)
    name = type(exc).__qualname__
    return f"{name}: {text}" if text else name


def _print_exception(exc: BaseException, abspath: str) -> None:
    """Print the traceback as Python would for an uncaught exception in the script.

    The frames of tflint's runner are dropped so that the traceback starts at the script's
    module level, and ``sys.excepthook`` is used, so a hook installed by the script applies.
    """
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != abspath:
        tb = tb.tb_next
    if tb is None:  # not raised from the script's own frames (should not happen)
        tb = exc.__traceback__
    exc.__traceback__ = tb
    _drop_own_frames(exc)
    try:
        sys.stdout.flush()
    except Exception:
        pass
    try:
        sys.excepthook(type(exc), exc, tb)
    except Exception:
        import traceback

        traceback.print_exception(type(exc), exc, tb)
    try:
        sys.stderr.flush()
    except Exception:
        pass


_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _drop_own_frames(exc: BaseException) -> None:
    """Remove tflint's wrapper frames (hooks around TensorFlow calls) from the traceback of
    ``exc`` and of the exceptions chained to it, so it reads as it would without tflint."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        kept = []
        tb = e.__traceback__
        while tb is not None:
            if not tb.tb_frame.f_code.co_filename.startswith(_OWN_DIR):
                kept.append(tb)
            tb = tb.tb_next
        if kept:
            try:
                for a, b in zip(kept, kept[1:] + [None]):
                    a.tb_next = b
                e.__traceback__ = kept[0]
            except (TypeError, ValueError):  # read-only traceback objects: leave as is
                pass
        todo += [e.__cause__, e.__context__]


class _as_main:
    """Install a fresh ``__main__`` module for the script, with argv and sys.path[0] set.

    The module has no ``__spec__`` and an absolute ``__file__``, like a script run by the
    interpreter, so ``multiprocessing``'s spawn start method re-imports the script by path in
    its children, and pickles of classes defined in the script refer to ``__main__``.
    """

    def __init__(self, abspath: str, argv: list[str]) -> None:
        self.abspath = abspath
        self.argv = argv

    def __enter__(self) -> dict[str, Any]:
        module = types.ModuleType("__main__")
        module.__file__ = self.abspath
        module.__cached__ = None  # type: ignore[attr-defined]
        module.__builtins__ = builtins  # type: ignore[attr-defined]
        module.__loader__ = None
        module.__spec__ = None
        module.__package__ = None
        self.module = module
        self.saved_main = sys.modules.get("__main__")
        self.saved_argv = sys.argv[:]
        self.saved_path0 = sys.path[0] if sys.path else None
        sys.modules["__main__"] = module
        sys.argv[:] = self.argv
        script_dir = os.path.dirname(os.path.realpath(self.abspath))
        if sys.path:
            sys.path[0] = script_dir
        else:
            sys.path.append(script_dir)
        return module.__dict__

    def __exit__(self, *exc: object) -> None:
        if sys.modules.get("__main__") is self.module and self.saved_main is not None:
            sys.modules["__main__"] = self.saved_main
        sys.argv[:] = self.saved_argv
        if self.saved_path0 is not None and sys.path:
            sys.path[0] = self.saved_path0


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
    except Exception:
        return False


StatusFn = Callable[[], dict[str, Any]]
