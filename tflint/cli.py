"""tflint's command line: ``tflint check``, ``tflint rule(s)``, ``tflint profile``, ``tflint report``,
``tflint server``.

Each command lives in its own module under ``tflint/commands/`` and exposes ``register(app)``.
``check`` (it runs on every commit) and ``profile`` (its start-up is counted against the user's
run) parse their own arguments and are dispatched before the CLI framework is even imported:
typer coerces every parameter through pydantic, which costs 0.25-0.4 s per command here. The
typer app still lists them, and forwards to the same entry points.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import Any

from tflint import __version__

_FAST_COMMANDS = {
    "check": "tflint.commands.check",
    "profile": "tflint.commands.profile",
    # the language server: started by editors, speaks LSP on stdio (no CLI framework output)
    "server": "tflint.server",
}


@lru_cache(maxsize=1)
def build_app() -> Any:
    import typer

    from tflint.commands import check, profile, report, rules

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

    check.register(app)
    rules.register(app)
    profile.register(app)
    report.register(app)
    from tflint import server
    from tflint.commands import register_forwarding

    register_forwarding(app, "server", server.SUMMARY, server.main)
    return app


def __getattr__(name: str) -> Any:
    if name == "app":
        return build_app()
    raise AttributeError(name)


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] in _FAST_COMMANDS:
        import importlib

        sys.exit(importlib.import_module(_FAST_COMMANDS[argv[0]]).main(argv[1:]))
    build_app()()
