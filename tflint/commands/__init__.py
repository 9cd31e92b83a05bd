"""One module per CLI command; each exposes ``register(app)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def register_forwarding(app: Any, name: str, help: str, main: Callable[[list[str]], int]) -> None:
    """Register a command that parses its own arguments: the typer app lists it and forwards
    everything after the command name to ``main(argv)``, which returns the exit status."""
    import typer

    def command(ctx: typer.Context) -> None:
        raise typer.Exit(main(list(ctx.args)))

    command.__annotations__ = {"ctx": typer.Context, "return": None}
    command.__doc__ = help
    app.command(
        name,
        help=help,
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    )(command)
