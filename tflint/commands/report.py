"""`tflint report merge REPORT.json... [--json OUT]` and `tflint report show REPORT.json`.

``merge`` combines the JSON reports of the workers of one distributed job (each written by
``tflint profile --json``) into one: the union of findings with the workers each was seen on,
per-worker step time and input wait, and stragglers. ``show`` renders any saved report (one
worker's or a merged one) the way ``tflint profile`` does at the end of a run.

A missing, unreadable or corrupt report file is one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import sys

import typer

USAGE_EXIT_CODE = 2


class _BadReport(Exception):
    pass


def load_report(path: str):
    """The :class:`Report` saved at ``path``; ``_BadReport`` with a one-line reason otherwise."""
    from tflint.profiler.report import Report

    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise _BadReport(f"{path}: no such file") from None
    except IsADirectoryError:
        raise _BadReport(f"{path}: is a directory, not a report file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _BadReport(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _BadReport(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict) or "signals" not in data or "tflint_version" not in data:
        raise _BadReport(f"{path}: not a tflint profile report (expected the JSON written by "
                         f"`tflint profile --json`)")
    try:
        return Report.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise _BadReport(f"{path}: malformed tflint report: {detail}") from None


def _fail(message: str) -> None:
    sys.stderr.write(f"tflint report: error: {message}\n")
    raise typer.Exit(USAGE_EXIT_CODE)


def _render(report) -> None:
    from tflint.profiler.renderers.terminal import TerminalRenderer
    from tflint.profiler.renderers.workers import WorkersRenderer

    TerminalRenderer(file=sys.stdout).render(report)
    WorkersRenderer(file=sys.stdout).render(report)


def register(app: typer.Typer) -> None:
    report_app = typer.Typer(
        name="report",
        help="Show saved profile reports, or merge the reports of a distributed job's workers.",
        no_args_is_help=True,
        add_completion=False,
    )

    @report_app.command("merge", no_args_is_help=True)
    def merge_cmd(
        reports: list[str] = typer.Argument(..., metavar="REPORT.json...",
                                            help="Reports written by `tflint profile --json`, one per worker."),
        json_out: str | None = typer.Option(None, "--json", metavar="OUT",
                                               help="Also write the merged report as JSON."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the merged report."),
    ) -> None:
        """Merge the workers' reports: findings per worker, step time, input wait, stragglers."""
        from tflint.profiler.merge import merge

        try:
            loaded = [load_report(p) for p in reports]
        except _BadReport as exc:
            _fail(str(exc))
        merged = merge(loaded, sources=list(reports))
        if json_out:
            try:
                merged.save(json_out)
            except OSError as exc:
                _fail(f"cannot write {json_out}: {exc.strerror or exc}")
        if not quiet:
            _render(merged)

    @report_app.command("show", no_args_is_help=True)
    def show_cmd(
        report: str = typer.Argument(..., metavar="REPORT.json", help="A saved report."),
    ) -> None:
        """Render a saved report (one worker's or a merged one)."""
        try:
            loaded = load_report(report)
        except _BadReport as exc:
            _fail(str(exc))
        _render(loaded)

    app.add_typer(report_app, name="report")
