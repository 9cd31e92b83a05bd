"""tflint's command line: ``tflint check``, ``tflint rule(s)``, ``tflint profile``, ``tflint report``.

Each command lives in its own module under ``tflint/commands/``. Keep this module and the
``check`` path free of heavy imports (TensorFlow, libcst, numpy): ``tflint check`` runs on every
commit and its start-up time is part of the product.
"""

from __future__ import annotations

import typer

from tflint import __version__
from tflint.commands import check as _check
from tflint.commands import profile as _profile
from tflint.commands import report as _report
from tflint.commands import rules as _rules

app = typer.Typer(
    name="tflint",
    help="A diagnostic linter and profiler for TensorFlow training code.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tflint {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """A diagnostic linter and profiler for TensorFlow training code."""


_check.register(app)
_rules.register(app)
_profile.register(app)
_report.register(app)


def main() -> None:
    app()
