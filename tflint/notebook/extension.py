"""``%load_ext tflint``: tflint in IPython and Jupyter.

- After every executed cell, the cell is checked statically in the context of the cells run
  before it (their Python, as IPython's own input transformers produce it), and the cell's
  findings are shown under it.
- ``%%tflint_profile`` runs its cell under tflint's runtime hooks (:func:`tflint.runtime.watch`)
  and returns the cell's :class:`~tflint.profiler.report.Report` (shown as HTML in Jupyter, as
  text in a terminal). ``%tflint_watch on`` does the same for every following cell (the last
  report is ``_tflint_report``) until ``%tflint_watch off``. Both take ``--signals KINDS``, as
  ``tflint profile`` does; a bad argument is IPython's one-line ``UsageError``, and the cell
  does not run.

A problem inside tflint is shown as one line on stderr; the cell's own output, result and
traceback are never touched.
"""

from __future__ import annotations

import ast
import os
import sys
from typing import Any, NoReturn

# Cell magics whose body is Python run in the user's namespace: checked as that Python.
_PYTHON_BODY_MAGICS = ("tflint_profile", "time", "capture", "prun")
# Earlier cells kept as context for the static check (the oldest go first). The check of a cell
# re-reads them all, so this bounds its time (about 0.5 s at the limit on one core).
MAX_HISTORY_CELLS = 300
MAX_HISTORY_CHARS = 150_000
_NOT_SHOWN = {"TFL000"}  # IPython reports syntax errors itself


def _one_line(what: str, exc: BaseException) -> None:
    msg = " ".join(str(exc).split())
    try:
        sys.stderr.write(f"tflint: {what} failed: {type(exc).__name__}: {msg}\n"[:500])
    except Exception:  # noqa: BLE001 - nowhere left to say it
        pass


class TflintExtension:
    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.history: list[str] = []
        self.watching = False
        self.signals: frozenset[str] | None = None  # --signals of the magic in force; None: all
        self.session: Any = None
        self.last_report: Any = None
        self._nested = 0
        self._cache: Any = None
        self._said: set[str] = set()

    # -- registration -----------------------------------------------------------------------
    def register(self) -> None:
        ip = self.shell
        ip.events.register("pre_run_cell", self.pre_run_cell)
        ip.events.register("post_run_cell", self.post_run_cell)
        ip.register_magic_function(self.tflint_profile, "cell", "tflint_profile")
        ip.register_magic_function(self.tflint_watch, "line", "tflint_watch")
        fmt = ip.display_formatter.formatters
        from tflint.notebook.render import report_html, report_pretty

        fmt["text/html"].for_type_by_name("tflint.profiler.report", "Report", report_html)
        fmt["text/plain"].for_type_by_name("tflint.profiler.report", "Report", report_pretty)

    def unregister(self) -> None:
        ip = self.shell
        for name, fn in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            try:
                ip.events.unregister(name, fn)
            except ValueError:
                pass
        self._stop_session()
        self.watching = False

    # -- the Python of a cell -------------------------------------------------------------------
    def python_of(self, raw: str) -> tuple[str, int] | None:
        """The cell's Python (IPython syntax transformed) and the line offset of its body."""
        offset = 0
        stripped = raw.lstrip("\n")
        offset += len(raw) - len(stripped)
        if stripped.startswith("%%"):
            first, _, body = stripped.partition("\n")
            name = first[2:].split(None, 1)[0] if first[2:].strip() else ""
            if name not in _PYTHON_BODY_MAGICS:
                return None
            raw, offset = body, offset + 1
        code = self.shell.transform_cell(raw)
        try:
            ast.parse(code)
        except (SyntaxError, ValueError):
            return None
        return code, offset

    def _cache_and_path(self) -> tuple[Any, str]:
        from tflint.server.core import ConfigCache

        if self._cache is None:
            self._cache = ConfigCache(os.getcwd())
        name = os.environ.get("JPY_SESSION_NAME") or ""
        if not name.endswith(".ipynb"):
            name = os.path.join(os.getcwd(), "<ipython>.ipynb")
        return self._cache, name

    def check(self, raw: str) -> Any:
        """Check ``raw`` after the cells before it; return its findings (``CellFindings``) or None."""
        got = self.python_of(raw)
        if got is None:
            return None
        code, offset = got
        from tflint.notebook.render import CellFindings
        from tflint.server.core import lint_notebook

        cache, path = self._cache_and_path()
        outcome = lint_notebook(cache, path, [*self.history, code])
        self._remember(code)
        for msg in ([outcome.config_error] if outcome.config_error else []) + outcome.errors:
            if msg not in self._said:  # once each, not under every cell
                self._said.add(msg)
                sys.stderr.write(f"tflint: {' '.join(msg.split())}\n")
        mine = len(self.history)
        found = [f for f in outcome.findings if f.cell == mine and f.code not in _NOT_SHOWN]
        return CellFindings(found, offset) if found else None

    def _remember(self, code: str) -> None:
        self.history.append(code)
        while len(self.history) > MAX_HISTORY_CELLS or (
            len(self.history) > 1 and sum(map(len, self.history)) > MAX_HISTORY_CHARS
        ):
            self.history.pop(0)

    # -- events -----------------------------------------------------------------------------
    def _is_magic_cell(self, raw: str) -> bool:
        s = raw.lstrip()
        return s.startswith("%%tflint_profile") or s.startswith("%tflint_watch")

    def pre_run_cell(self, info: Any) -> None:
        if self._nested or not self.watching or getattr(info, "silent", False):
            return
        try:
            if self._is_magic_cell(getattr(info, "raw_cell", "") or ""):
                return
            self._start_session()
        except Exception as exc:  # noqa: BLE001
            _one_line("starting the runtime hooks", exc)

    def post_run_cell(self, result: Any) -> None:
        if self._nested:
            return
        info = getattr(result, "info", None)
        if info is not None and getattr(info, "silent", False):
            return
        raw = getattr(info, "raw_cell", None) or ""
        if self.session is not None:
            try:
                report = self._stop_session()
                if report is not None:
                    self.last_report = report
                    self.shell.user_ns["_tflint_report"] = report
                    self._display(report)
            except Exception as exc:  # noqa: BLE001
                _one_line("the cell's runtime report", exc)
        if not raw.strip():
            return
        try:
            findings = self.check(raw)
            if findings is not None:
                self._display(findings)
        except Exception as exc:  # noqa: BLE001
            _one_line("checking the cell", exc)

    def _display(self, obj: Any) -> None:
        from IPython.display import display

        display(obj)

    # -- runtime sessions -------------------------------------------------------------------
    def _start_session(self) -> Any:
        from tflint.runtime import watch

        session = watch(signals=self.signals)
        session.__enter__()
        self.session = session
        return session

    def _stop_session(self) -> Any:
        session, self.session = self.session, None
        if session is None:
            return None
        session.__exit__(None, None, None)
        return session.report(script=f"<cell {self.shell.execution_count}>")

    # -- magics -----------------------------------------------------------------------------
    def tflint_profile(self, line: str, cell: str) -> Any:
        """%%tflint_profile [--signals KINDS]: run the cell under tflint's runtime hooks and
        return its report."""
        rest, signals = _signals_option(line, "%%tflint_profile")
        if rest:
            _usage(f"%%tflint_profile: unexpected argument {rest[0]!r} (it takes --signals KINDS)")
        started = False
        if self.session is None:
            outer_signals, self.signals = self.signals, signals
            try:
                self._start_session()
                started = True
            except Exception as exc:  # noqa: BLE001 - the cell still runs
                _one_line("starting the runtime hooks", exc)
            finally:
                self.signals = outer_signals
        self._nested += 1
        outer = getattr(self.shell.displayhook, "exec_result", None)  # a nested run resets it
        try:
            # the magic's line as a comment: tracebacks and report locations use the cell's lines
            self.shell.run_cell(f"# %%tflint_profile {line}".rstrip() + "\n" + cell, store_history=False)
        finally:
            self._nested -= 1
            try:
                self.shell.displayhook.exec_result = outer
            except AttributeError:
                pass
        if not started:
            return None
        try:
            report = self._stop_session()
        except Exception as exc:  # noqa: BLE001
            _one_line("the cell's runtime report", exc)
            return None
        self.last_report = report
        return report

    def tflint_watch(self, line: str) -> None:
        """%tflint_watch on [--signals KINDS] | off: run every following cell under tflint's
        runtime hooks."""
        words, signals = _signals_option(line, "%tflint_watch")
        arg = " ".join(words).lower()
        if arg in ("on", "1", "true", "yes"):
            self.watching = True
            self.signals = signals
            which = "runtime hooks on" if signals is None else "signals: " + ", ".join(sorted(signals))
            print(f"tflint: watching every cell ({which}); %tflint_watch off to stop")
        elif signals is not None:
            _usage("%tflint_watch: --signals goes with 'on'")
        elif arg in ("off", "0", "false", "no"):
            self.watching = False
            self.signals = None
            self._stop_session()
            print("tflint: runtime hooks off")
        elif not arg:
            print(f"tflint: watch is {'on' if self.watching else 'off'}")
        else:
            sys.stderr.write(f"tflint: %tflint_watch takes 'on' or 'off', not {line.strip()!r}\n")


def _usage(message: str) -> NoReturn:
    from IPython.core.error import UsageError

    raise UsageError(message)


def _signals_option(line: str, magic: str) -> tuple[list[str], frozenset[str] | None]:
    """The words of a magic's line other than ``--signals KINDS``, and those kinds (None when
    the option is not given); a bad option is a :class:`UsageError`."""
    from IPython.core.magic_arguments import MagicArgumentParser

    from tflint.profiler.runner import ProfileUsageError, parse_kinds

    parser = MagicArgumentParser(prog=magic)
    parser.add_argument("--signals", metavar="KINDS")
    parser.add_argument("words", nargs="*")
    args = parser.parse_argstring(line)
    if args.signals is None:
        return args.words, None
    try:
        kinds = parse_kinds(args.signals, "--signals")
    except ProfileUsageError as exc:
        _usage(f"{magic}: {exc}")
    return args.words, kinds


_EXTENSIONS: dict[int, TflintExtension] = {}


def load_ipython_extension(shell: Any) -> None:
    if id(shell) in _EXTENSIONS:
        return
    ext = TflintExtension(shell)
    ext.register()
    _EXTENSIONS[id(shell)] = ext


def unload_ipython_extension(shell: Any) -> None:
    ext = _EXTENSIONS.pop(id(shell), None)
    if ext is not None:
        ext.unregister()
