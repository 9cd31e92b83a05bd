"""`tflint rules` (placeholder: replaced by its implementation)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass
