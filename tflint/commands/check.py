"""`tflint check`: run the static rules over files, directories, or stdin.

Exit status: 0 no findings, 1 findings (after fixing, when fixing), 2 usage, configuration or
internal error. Everything heavy is imported inside the command: ``tflint check`` on one
small file must start about as fast as the CLI framework itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import typer

OUTPUT_FORMATS = ("full", "concise", "json", "sarif", "github")


class UsageError(Exception):
    """A problem with the command line or the configuration: one line, exit 2."""


_HELP = """Check Python files and notebooks for TensorFlow training pitfalls.

Exit status: 0 no findings, 1 findings, 2 usage, configuration or internal error."""

# (flags, argparse keyword arguments); parsed with argparse so that running `tflint check`
# never pays for the CLI framework's per-parameter value coercion (which imports pydantic).
_LIST_OPTIONS = (
    ("--select", "Rule codes or prefixes to enable (comma-separated, repeatable); replaces the configured set."),
    ("--ignore", "Rule codes or prefixes to disable (comma-separated, repeatable)."),
    ("--extend-select", "Rule codes or prefixes to enable on top of the configured set."),
    ("--exclude", "Patterns to exclude (comma-separated, repeatable); replaces the configured `exclude` and the defaults."),
    ("--extend-exclude", "Patterns to exclude in addition to the default and configured ones."),
)
_FLAGS = (
    ("--statistics", "Show the number of findings per rule instead of the findings."),
    ("--exit-zero", "Exit with status 0 even when there are findings."),
    ("--quiet", "Print the findings and nothing else."),
    ("--no-cache", "Neither read nor write the cache."),
    ("--show-files", "List the files that would be checked, and exit."),
    ("--force-exclude", "Apply the excludes to paths given explicitly too (for pre-commit)."),
    ("--fix", "Apply safe fixes."),
    ("--diff", "Print the fixes as a unified diff instead of applying them; exit 1 if there are any."),
    ("--unsafe-fixes", "Also apply (with --fix/--diff) fixes marked unsafe."),
)


def build_parser():
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):  # one line, exit 2
            raise UsageError(message)

    p = Parser(prog="tflint check", description=_HELP, allow_abbrev=False,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="Files or directories to check (default: .); '-' reads stdin.")
    for flag, text in _LIST_OPTIONS:
        p.add_argument(flag, action="append", metavar="CODES" if "select" in flag or flag == "--ignore" else "PATTERNS", help=text)
    p.add_argument("--output-format", default="full", metavar="FORMAT",
                   help="full (default), concise, json, sarif or github.")
    for flag, text in _FLAGS:
        if flag == "--quiet":
            p.add_argument("-q", flag, action="store_true", help=text)
        else:
            p.add_argument(flag, action="store_true", help=text)
    p.add_argument("--target-version", metavar="VERSION",
                   help="The TensorFlow version the code targets, e.g. 2.16 or tf2.16 (default: "
                        "from the project's dependencies, else the installed TensorFlow, else the newest supported).")
    p.add_argument("--stdin-filename", metavar="PATH",
                   help="The name of the file read from stdin (for messages and configuration).")
    return p


def main(argv: list[str]) -> int:
    """Run ``tflint check`` with ``argv`` (the arguments after ``check``); return the exit status."""
    import sys

    try:
        args = build_parser().parse_args(argv)
        options = CheckOptions(
            paths=list(args.paths or ["."]),
            select=tuple(args.select) if args.select else None,
            ignore=tuple(args.ignore or ()),
            extend_select=tuple(args.extend_select or ()),
            exclude=tuple(args.exclude) if args.exclude else None,
            extend_exclude=tuple(args.extend_exclude or ()),
            output_format=args.output_format,
            statistics=args.statistics,
            exit_zero=args.exit_zero,
            quiet=args.quiet,
            no_cache=args.no_cache,
            show_files=args.show_files,
            force_exclude=args.force_exclude,
            fix=args.fix,
            diff=args.diff,
            unsafe_fixes=args.unsafe_fixes,
            stdin_filename=args.stdin_filename,
            target_version=args.target_version,
        )
        return run_check(options)
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except BrokenPipeError:  # e.g. `tflint check | head`
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 2


def register(app: "typer.Typer") -> None:
    from tflint.commands import register_forwarding

    register_forwarding(app, "check", _HELP, main)


class CheckOptions:
    def __init__(self, **kw) -> None:
        self.paths: list[str] = kw.pop("paths", ["."])
        self.select: tuple[str, ...] | None = kw.pop("select", None)
        self.ignore: tuple[str, ...] = kw.pop("ignore", ())
        self.extend_select: tuple[str, ...] = kw.pop("extend_select", ())
        self.exclude: tuple[str, ...] | None = kw.pop("exclude", None)
        self.extend_exclude: tuple[str, ...] = kw.pop("extend_exclude", ())
        self.output_format: str = kw.pop("output_format", "full")
        self.statistics: bool = kw.pop("statistics", False)
        self.exit_zero: bool = kw.pop("exit_zero", False)
        self.quiet: bool = kw.pop("quiet", False)
        self.no_cache: bool = kw.pop("no_cache", False)
        self.show_files: bool = kw.pop("show_files", False)
        self.force_exclude: bool = kw.pop("force_exclude", False)
        self.fix: bool = kw.pop("fix", False)
        self.diff: bool = kw.pop("diff", False)
        self.unsafe_fixes: bool = kw.pop("unsafe_fixes", False)
        self.stdin_filename: str | None = kw.pop("stdin_filename", None)
        self.target_version: str | None = kw.pop("target_version", None)
        if kw:  # pragma: no cover - programming error
            raise TypeError(f"unknown options: {sorted(kw)}")


def _display_path(abspath: str, cwd: str) -> str:
    import os

    rel = os.path.relpath(abspath, cwd)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return abspath.replace(os.sep, "/")
    return rel.replace(os.sep, "/")


def _lines(text: str) -> list[str]:
    """Lines as the parser counts them (``\\r\\n``, ``\\r`` and ``\\n`` end a line)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _validate_codes(flag: str, values: tuple[str, ...] | None) -> None:
    from tflint.rules import is_valid_selector, retired

    for v in values or ():
        for code in v.split(","):
            code = code.strip()
            if code and not is_valid_selector(code):
                why = retired(code)
                if why is not None:
                    if flag == "--ignore":
                        continue  # ignoring a removed rule is harmless
                    raise UsageError(f"{flag}: {why}")
                raise UsageError(
                    f"{flag}: unknown rule code or prefix {code!r} (see `tflint rules` for the codes)"
                )


def run_check(opts: CheckOptions) -> int:
    import os
    import sys

    from tflint.check.config import ConfigError, ConfigFinder, Overrides, make_settings

    fmt = (opts.output_format or "").strip().lower()
    if fmt not in OUTPUT_FORMATS:
        raise UsageError(
            f"--output-format: unknown format {opts.output_format!r} (expected one of: {', '.join(OUTPUT_FORMATS)})"
        )
    _validate_codes("--select", opts.select)
    _validate_codes("--ignore", opts.ignore)
    _validate_codes("--extend-select", opts.extend_select)
    if opts.target_version is not None:
        from tflint.analysis.version import parse_version

        try:
            parse_version(opts.target_version)
        except ValueError as exc:
            raise UsageError(f"--target-version: {exc}") from None
    stdin_mode = "-" in opts.paths
    if stdin_mode and len(opts.paths) > 1:
        raise UsageError("'-' (stdin) cannot be combined with other paths")
    if opts.stdin_filename and not stdin_mode:
        raise UsageError("--stdin-filename is only meaningful with '-' (stdin) as the path")

    cwd = os.getcwd()
    overrides = Overrides(
        select=opts.select,
        ignore=opts.ignore,
        extend_select=opts.extend_select,
        exclude=opts.exclude,
        extend_exclude=opts.extend_exclude,
        target_version=opts.target_version,
    )
    finder = ConfigFinder(cwd)
    settings_memo: dict[int, object] = {}

    def settings_for_dir(directory: str):
        config = finder.for_dir(directory)
        key = id(config)
        s = settings_memo.get(key)
        if s is None:
            s = settings_memo[key] = (make_settings(config, overrides, cwd), config)
        return s[0]

    try:
        if stdin_mode:
            return _check_stdin(opts, fmt, cwd, settings_for_dir)
        files = _collect(opts.paths, cwd, settings_for_dir, opts.force_exclude)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None

    if opts.show_files:
        for f in sorted(_display_path(p, cwd) for p in files):
            _safe_write(sys.stdout, f + "\n")
        return 0

    from tflint.check.engine import PARSE_ERROR_CODE, FileResult, lint_many, parse_error, sort_findings

    cache = None
    if not opts.no_cache:
        from tflint.check.cache import Cache

        cache_dir = _cache_dir(finder, cwd)
        cache = Cache(cache_dir) if cache_dir else None
    results: dict[str, FileResult] = {}
    raws: dict[str, bytes] = {}
    tasks = []
    targets: dict[str, object] = {}
    try:
        for abspath in files:
            disp = _display_path(abspath, cwd)
            settings = settings_for_dir(os.path.dirname(abspath))
            enabled = settings.enabled_for(abspath)
            target = targets[disp] = settings.target_for(abspath)
            try:
                raw = _read_regular_file(abspath)
            except OSError as exc:
                res = FileResult(disp, cacheable=False)
                if PARSE_ERROR_CODE in enabled:
                    res.findings.append(parse_error(disp, f"cannot read file: {exc.strerror or exc}"))
                results[disp] = res
                continue
            raws[disp] = raw
            tasks.append((disp, raw, enabled, target))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None

    for res in _lint_as_project(tasks, _project_context(opts.paths, files, cwd), cache):
        results[res.path] = res
    if cache is not None:
        cache.save()

    errors: list[str] = []
    for res in results.values():
        errors.extend(res.errors)

    fixed_total = 0
    if opts.fix or opts.diff:
        from tflint.check.fix import fix_file

        fixable = [
            disp
            for disp, res in results.items()
            if any(f.fix is not None and (f.fix.applicability == "safe" or opts.unsafe_fixes) for f in res.findings)
        ]
        diffs: list[str] = []
        for disp in sorted(fixable):
            enabled = settings_for_dir(os.path.dirname(os.path.abspath(disp))).enabled_for(os.path.abspath(disp))
            outcome = fix_file(disp, raws[disp], enabled, unsafe=opts.unsafe_fixes, target=targets.get(disp))
            errors.extend(outcome.errors)
            if outcome.problem:
                sys.stderr.write(f"warning: {disp}: {outcome.problem}; file left unchanged\n")
                continue
            if outcome.new_raw is None:
                continue
            if opts.diff:
                diffs.append(outcome.diff())
                fixed_total += outcome.fixed
                continue
            if not _inside_requested(os.path.abspath(disp), opts.paths, cwd):
                sys.stderr.write(
                    f"warning: {disp}: not fixed: it links to a file outside the paths given to check\n"
                )
                continue
            try:
                outcome.write(os.path.abspath(disp))
            except OSError as exc:
                sys.stderr.write(f"error: {disp}: cannot write fixes: {exc.strerror or exc}\n")
                errors.append(f"cannot write {disp}")
                continue
            fixed_total += outcome.fixed
            results[disp] = FileResult(disp, outcome.findings)
        if opts.diff:
            if diffs:
                _safe_write(sys.stdout, "".join(diffs))
            if not opts.quiet:
                sys.stderr.write(f"Would fix {fixed_total} issue{'s' if fixed_total != 1 else ''}.\n")
            for e in errors:
                sys.stderr.write(f"error: internal error: {e}\n")
            if errors:
                return 2
            return 1 if fixed_total and not opts.exit_zero else 0

    findings = sort_findings(f for res in results.values() for f in res.findings)
    _emit(findings, opts, fmt, cwd, raws)
    if fixed_total and not opts.quiet:
        sys.stderr.write(f"Fixed {fixed_total} issue{'s' if fixed_total != 1 else ''}.\n")
    for e in errors:
        sys.stderr.write(f"error: internal error: {e}\n")
    if errors:
        return 2
    if findings and not opts.exit_zero:
        return 1
    return 0


# The most sibling modules read (summarised, never reported) around a file checked on its own.
PROJECT_CONTEXT_MAX = 200


def _project_context(paths: list[str], files: list[str], cwd: str) -> list[tuple[str, bytes]]:
    """For each file named on its own (or by ``--stdin-filename``), the other modules of its
    package directory (``.py`` files beside it, at most ``PROJECT_CONTEXT_MAX``): the project
    that traced code can be followed through. Directories given to check are their own
    project."""
    import os

    named = [os.path.abspath(os.path.join(cwd, os.path.expanduser(p))) for p in paths]
    named = [p for p in named if not os.path.isdir(p)]
    if not named:
        return []
    known = {os.path.abspath(f) for f in files}
    out: list[tuple[str, bytes]] = []
    seen_dirs: set[str] = set()
    for p in named:
        d = os.path.dirname(p)
        if d in seen_dirs:
            continue
        seen_dirs.add(d)
        try:
            names = sorted(n for n in os.listdir(d) if n.endswith(".py"))
        except OSError:
            continue
        for n in names[:PROJECT_CONTEXT_MAX]:
            full = os.path.join(d, n)
            if full in known or full == p:
                continue
            try:
                raw = _read_regular_file(full)
            except OSError:
                continue
            out.append((_display_path(full, cwd), raw))
    return out


def _lint_as_project(tasks, context, cache):
    """Findings of ``tasks`` checked as one project (``TFLINT_STATS=1``: counts on stderr)."""
    import os
    import sys

    from tflint.check.engine import STATS, lint_project

    results = lint_project(tasks, cache=cache, context=context)
    if os.environ.get("TFLINT_STATS"):
        sys.stderr.write("tflint-stats: " + " ".join(f"{k}={v}" for k, v in STATS.items()) + "\n")
    return results


def _safe_write(out, text: str, json_text: bool = False) -> None:
    """Write ``text``; characters the stream cannot encode (a narrow terminal encoding, file
    names that are not UTF-8) are escaped rather than ending the run with a traceback —
    as ``\\uXXXX`` in JSON output (they only occur inside JSON strings), so it stays valid."""
    try:
        out.write(text)
    except UnicodeEncodeError:
        encoding = getattr(out, "encoding", None) or "utf-8"
        if not json_text:
            out.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))
            return
        parts = []
        for ch in text:
            try:
                ch.encode(encoding)
                parts.append(ch)
            except UnicodeEncodeError:
                cp = ord(ch)
                if cp > 0xFFFF:
                    cp -= 0x10000
                    parts.append(f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}")
                else:
                    parts.append(f"\\u{cp:04x}")
        out.write("".join(parts))


def _read_regular_file(path: str) -> bytes:
    """The bytes of ``path``; a FIFO, device or socket (given explicitly) is refused without
    blocking on it or reading it forever."""
    import os
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            return fh.read()
    finally:
        if fd >= 0:
            os.close(fd)


def _cache_dir(finder, cwd: str) -> str | None:
    """Where the cache lives: ``$TFLINT_CACHE_DIR`` (the user's own choice, anywhere), else the
    configured ``cache-dir`` or ``.tflint_cache`` in the project. A project's cache directory
    that resolves (through symlinks) outside the project is not used at all: the
    configuration and the tree come with the repository and must not steer writes elsewhere."""
    import os

    from tflint.check.cache import CACHE_DIR_NAME

    env = os.environ.get("TFLINT_CACHE_DIR")
    if env:
        return os.path.abspath(env)
    config = finder.for_dir(cwd)
    root = config.root if config.path else cwd
    directory = config.cache_dir or os.path.join(root, CACHE_DIR_NAME)
    real_root = os.path.realpath(root)
    real = os.path.realpath(directory)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        import sys

        sys.stderr.write(
            f"warning: cache directory {directory} resolves outside the project ({real}); "
            "not using a cache (set TFLINT_CACHE_DIR to place it elsewhere)\n"
        )
        return None
    return directory


def _inside_requested(abspath: str, paths: list[str], cwd: str) -> bool:
    """Whether ``abspath`` (following symlinks) is one of the requested paths or below one:
    ``--fix`` never writes through a link to a file outside what it was asked to check."""
    import os

    real = os.path.realpath(abspath)
    for p in paths:
        root = os.path.realpath(os.path.join(cwd, os.path.expanduser(p)))
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def _collect(paths: list[str], cwd: str, settings_for_dir, force_exclude: bool = False) -> list[str]:
    import os

    from tflint.check.discover import walk

    def excluded(parent: str, path: str) -> bool:
        return settings_for_dir(parent).is_excluded(path)

    def force_excluded(path: str) -> bool:
        # The path or any directory above it (up to the governing configuration's root).
        settings = settings_for_dir(os.path.dirname(path))
        stop = settings.config.root
        p = path
        while True:
            if settings_for_dir(os.path.dirname(p)).is_excluded(p):
                return True
            parent = os.path.dirname(p)
            if parent == p or p == stop or not parent.startswith(stop):
                return False
            p = parent

    seen: set[str] = set()
    out: list[str] = []
    for p in paths:
        ap = os.path.abspath(os.path.join(cwd, os.path.expanduser(p)))
        if force_exclude and os.path.exists(ap) and force_excluded(ap):
            continue
        if os.path.isdir(ap):
            found = walk(ap, excluded)
        elif os.path.exists(ap):
            found = [ap]  # given explicitly: checked whatever its name
        else:
            raise UsageError(f"{p}: no such file or directory")
        for f in found:
            key = os.path.normcase(os.path.realpath(f))
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


def _source_lines_factory(raws: dict[str, bytes]):
    cache: dict[str, object] = {}

    def source_lines(path: str):
        if path not in cache:
            raw = raws.get(path)
            lines = None
            if raw is not None:
                from tflint.check.source import SourceError, decode_python

                try:
                    lines = _lines(decode_python(raw).text)
                except SourceError:
                    lines = _lines(raw.decode("latin-1"))
            cache[path] = lines
        return cache[path]

    def cell_lines(path: str, cell: int):
        key = f"{path}\0{cell}"
        if key not in cache:
            lines = None
            raw = raws.get(path)
            if raw is not None:
                from tflint.check.source import SourceError, decode_notebook

                try:
                    doc = decode_notebook(raw).document or {}
                    code_cells = [c for c in doc.get("cells", []) if isinstance(c, dict) and c.get("cell_type") == "code"]
                    if 1 <= cell <= len(code_cells):
                        src = code_cells[cell - 1].get("source", "")
                        src = "".join(src) if isinstance(src, list) else str(src)
                        lines = _lines(src)
                except SourceError:
                    lines = None
            cache[key] = lines
        return cache[key]

    return source_lines, cell_lines


def _emit(findings, opts: CheckOptions, fmt: str, cwd: str, raws: dict[str, bytes], stream=None) -> None:
    import os
    import sys

    out = stream or sys.stdout
    if not findings and not opts.statistics and fmt in ("full", "concise", "github"):
        # Nothing to show: spare the renderers' import on the common, clean, path.
        if fmt == "full" and not opts.quiet:
            out.write("All checks passed!\n")
        return
    import tflint.check.render as render

    if opts.statistics:
        text = render.statistics(findings, "json" if fmt == "json" else "text")
    else:
        renderer = render.get_renderer(fmt)
        color = (
            fmt == "full"
            and not os.environ.get("NO_COLOR")
            and (bool(os.environ.get("FORCE_COLOR")) or (hasattr(out, "isatty") and out.isatty()))
        )
        source_lines, cell_lines = _source_lines_factory(raws)
        ctx = render.RenderContext(
            root=cwd,
            source_lines=source_lines,
            color=bool(color),
            fixable_hint=not opts.fix,
            summary=not opts.quiet,
            cell_lines=cell_lines,
        )
        if hasattr(ctx, "unsafe_fixes"):
            ctx.unsafe_fixes = opts.unsafe_fixes
        text = renderer.render(findings, ctx)
    if text:
        _safe_write(out, text if text.endswith("\n") else text + "\n", json_text=fmt in ("json", "sarif"))
    elif fmt == "full" and not opts.quiet and not findings and not opts.statistics:
        out.write("All checks passed!\n")


def _check_stdin(opts: CheckOptions, fmt: str, cwd: str, settings_for_dir) -> int:
    import os
    import sys

    from tflint.check.engine import lint_bytes, sort_findings

    raw = sys.stdin.buffer.read()
    name = opts.stdin_filename or "-"
    if opts.stdin_filename:
        abspath = os.path.abspath(os.path.join(cwd, opts.stdin_filename))
        disp = _display_path(abspath, cwd)
    else:
        abspath = os.path.join(cwd, "-")
        disp = name
    settings = settings_for_dir(os.path.dirname(abspath))
    enabled = settings.enabled_for(abspath)
    target = settings.target_for(abspath)
    if opts.stdin_filename:
        (res,) = _lint_as_project([(disp, raw, enabled, target)], _project_context([abspath], [abspath], cwd), None)
    else:
        res = lint_bytes(disp, raw, enabled, target=target)
    findings = res.findings
    errors = list(res.errors)
    raws = {disp: raw}
    if opts.fix or opts.diff:
        from tflint.check.fix import fix_file

        outcome = fix_file(disp, raw, enabled, unsafe=opts.unsafe_fixes, target=target)
        errors.extend(outcome.errors)
        if outcome.problem:
            sys.stderr.write(f"warning: {disp}: {outcome.problem}; input left unchanged\n")
        if opts.diff:
            if outcome.new_raw is not None and not outcome.problem:
                _safe_write(sys.stdout, outcome.diff())
                for e in errors:
                    sys.stderr.write(f"error: internal error: {e}\n")
                return 2 if errors else (0 if opts.exit_zero else 1)
            for e in errors:
                sys.stderr.write(f"error: internal error: {e}\n")
            return 2 if errors else 0
        # With --fix, the (fixed) source goes to stdout and the findings to stderr.
        fixed = outcome.new_raw if (outcome.new_raw is not None and not outcome.problem) else raw
        sys.stdout.buffer.write(fixed)
        sys.stdout.flush()
        if outcome.new_raw is not None and not outcome.problem:
            findings = outcome.findings
            raws = {disp: fixed}
        findings = sort_findings(findings)
        _emit(findings, opts, fmt, cwd, raws, stream=sys.stderr)
    else:
        findings = sort_findings(findings)
        _emit(findings, opts, fmt, cwd, raws)
    for e in errors:
        sys.stderr.write(f"error: internal error: {e}\n")
    if errors:
        return 2
    return 1 if findings and not opts.exit_zero else 0
